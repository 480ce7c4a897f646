"""Model versus execution: each mapping's simulated cycles against primitives/mesh.py's closed
form, over grid sides and layer shapes, as an xarray Dataset (dims mapping, shape, P).

Shapes are per-PE tiles (run.layer_shapes: a catalog layer's tiles on its full region);
on a P x P grid the simulated problem is the tile times P on each side, so each PE does the
work it would on the full region while the line its reductions and shifts cross grows with
P: the grid-dependent terms of the closed form are what the sweep exercises. The KV-cache
update has no cycle closed form in mesh.py (decode_layer charges nothing for it); its
check is capacity: the tokens the program fits against `kv_capacity_tokens`.
"""
from __future__ import annotations

import time

import numpy as np
import xarray as xr

from ..primitives.mesh import KV_PLACEMENT, kv_capacity_tokens, mesh_gemm, mesh_gemv
from .hardware import sim_numbers
from .kv import kv_sram_bytes
from .machine import Machine
from .routes import DoesNotFit
from .run import program


def _backend_numbers(hardware, hardware_overrides):
    from ..backends import numbers
    over = {k: v for k, v in (hardware_overrides or {}).items() if k != "routing_colors"}
    return numbers(hardware, over)


def model_cycles(kernel: str, mapping: str, w, *, P, dtype="fp16", **shape) -> dict:
    """The closed form's cycles (and compute cycles) of the kernel primitives/mesh.py models."""
    if kernel == "gemv":
        r = mesh_gemv(w, P=P, k=shape["k"], n=shape["n"], rows=shape.get("rows", 1), dtype=dtype, mapping=mapping)
    else:
        r = mesh_gemm(w, P=P, m=shape["m"], k=shape["k"], n=shape["n"], dtype=dtype, mapping=mapping)
    return {"cycles": float(r["cycles"]), "compute_cycles": float(r["compute_cycles"])}


def _full(kernel, tiles: dict, P: int) -> dict:
    """The problem whose per-PE tiles on P x P are `tiles`."""
    if kernel == "gemv":
        return dict(k=tiles["kt"] * P, n=tiles["nt"] * P, rows=tiles.get("rows", 1))
    return dict(m=tiles["mt"] * P, k=tiles["kt"] * P, n=tiles["nt"] * P)


def sweep(kernel: str, *, mappings, P, shapes: list[dict], hardware="wse3", hardware_overrides=None,
          dtype: str = "fp16") -> xr.Dataset:
    """Simulate every (mapping, shape, P) and evaluate the closed form there. `shapes`: dicts
    with `name` and the per-PE tiles (kt, nt[, rows] for gemv; mt, kt, nt for gemm)."""
    nums = sim_numbers(hardware, hardware_overrides)
    w = _backend_numbers(hardware, hardware_overrides)
    Ps = [int(p) for p in np.atleast_1d(P)]
    dims = (len(mappings), len(shapes), len(Ps))
    out = {k: np.full(dims, np.nan) for k in ("sim_cycles", "model_cycles", "model_compute_cycles", "utilization",
                                              "compute_share", "colors", "sram_bytes", "wall_s", "hops_words")}
    correct, fits = np.zeros(dims, bool), np.zeros(dims, bool)
    for a, mapping in enumerate(mappings):
        for b, tiles in enumerate(shapes):
            for c, p in enumerate(Ps):
                full = _full(kernel, tiles, p)
                m = model_cycles(kernel, mapping, w, P=float(p), dtype=dtype, **full)
                out["model_cycles"][a, b, c], out["model_compute_cycles"][a, b, c] = m["cycles"], m["compute_cycles"]
                t0 = time.perf_counter()
                try:
                    r = Machine(program(kernel, nums, P=p, mapping=mapping, dtype=dtype, **full), nums).run()
                except DoesNotFit:
                    continue
                out["wall_s"][a, b, c] = time.perf_counter() - t0
                out["sim_cycles"][a, b, c] = r.cycles
                out["utilization"][a, b, c] = r.utilization
                out["compute_share"][a, b, c] = float((r.busy["compute"] + r.busy["add"]).mean()) / max(r.cycles, 1)
                out["colors"][a, b, c] = r.colors
                out["sram_bytes"][a, b, c] = float(r.sram_bytes.max())
                out["hops_words"][a, b, c] = float(r.link_words.sum())
                correct[a, b, c], fits[a, b, c] = r.correct, True
    coords = {"mapping": list(mappings), "shape": [s["name"] for s in shapes], "P": Ps}
    for key in ("kt", "nt", "mt", "rows"):
        if all(key in s for s in shapes):
            coords[f"tile_{key}"] = ("shape", [s[key] for s in shapes])
    ds = xr.Dataset({k: (("mapping", "shape", "P"), v) for k, v in out.items()}, coords=coords)
    ds["correct"] = (("mapping", "shape", "P"), correct)
    ds["fits"] = (("mapping", "shape", "P"), fits)
    ds["ratio"] = ds.sim_cycles / ds.model_cycles
    units = {"sim_cycles": "cycles", "model_cycles": "cycles", "model_compute_cycles": "cycles", "sram_bytes": "B",
             "wall_s": "s", "hops_words": "words", "utilization": "1", "compute_share": "1", "ratio": "1",
             "colors": "colors"}
    names = {"sim_cycles": "simulated cycles", "model_cycles": "closed-form cycles (primitives/mesh.py)",
             "ratio": "simulated / closed form", "utilization": "mean CE busy share (any work)",
             "compute_share": "mean share of the run in FMAs and adds",
             "sram_bytes": "buffers per PE", "wall_s": "simulation wall time", "hops_words": "words over links"}
    for k, u in units.items():
        ds[k].attrs.update(units=u, long_name=names.get(k, k.replace("_", " ")))
    ds.attrs.update(kernel=kernel, hardware=str(hardware), dtype=dtype)
    return ds


def kv_capacity(*, mappings, P, kv_elems_per_pe: int, hardware="wse3", hardware_overrides=None,
                dtype: str = "fp16") -> xr.Dataset:
    """Tokens of one layer's KV cache a P x P region holds, as the closed form counts them (spread:
    the whole sequence; concat: the generated tokens, on one line) after a prompt of P - 1
    (the fewest the program takes; none on the line concat appends to): the most the program's
    buffers fit (kv.kv_sram_bytes, the bytes the machine checks) against `kv_capacity_tokens`
    with the same free bytes (SRAM less the new token's landing slice). A token's K and V are
    kv_elems_per_pe values per PE of a row (kv_elems = that x P)."""
    nums = sim_numbers(hardware, hardware_overrides)
    eb = 4.0 if dtype == "fp32" else 2.0
    Ps = [int(p) for p in np.atleast_1d(P)]
    sim, model = np.zeros((len(mappings), len(Ps))), np.zeros((len(mappings), len(Ps)))
    for a, mapping in enumerate(mappings):
        for c, p in enumerate(Ps):
            free = nums.sram_bytes - kv_elems_per_pe * eb
            model[a, c] = float(kv_capacity_tokens(free_bytes_per_pe=free, P=float(p),
                                                   kv_bytes_per_token_per_layer=kv_elems_per_pe * p * eb,
                                                   mapping=mapping))
            g = largest_generate(nums, mapping=mapping, P=p, kv_elems=kv_elems_per_pe * p, dtype=dtype)
            sim[a, c] = g + (p - 1) * (KV_PLACEMENT[mapping] == "spread")
    ds = xr.Dataset({"sim_tokens": (("mapping", "P"), sim), "model_tokens": (("mapping", "P"), model)},
                    coords={"mapping": list(mappings), "P": Ps,
                            "placement": ("mapping", [KV_PLACEMENT[m] for m in mappings])})
    for k in ("sim_tokens", "model_tokens"):
        ds[k].attrs.update(units="tokens", long_name=("most the program fits" if k == "sim_tokens"
                                                      else "kv_capacity_tokens (primitives/mesh.py)"))
    return ds


def largest_generate(nums, *, mapping, P, kv_elems, dtype="fp16") -> int:
    """The most tokens the update can append after a prompt of P - 1 with its buffers within a
    PE's free SRAM (0 if none)."""
    def fits(g):
        return kv_sram_bytes(P=P, kv_elems=kv_elems, tokens=P - 1, generate=g, mapping=mapping,
                             dtype=dtype) <= nums.sram_bytes
    if not fits(1):
        return 0
    lo, hi = 1, 2
    while fits(hi):
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo
