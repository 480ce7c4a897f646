"""Run a mapping on the simulated mesh by name, and the shapes the catalog's layers give it.

    from workbench.simulate import run
    r = run("gemv", "mesh", P=64, k=64 * 12, n=64 * 18)       # a 64 x 64 MeshGEMV
    r.cycles, r.correct, r.busy_cycles, r.link_words

Kernels: `gemv` (k, n, rows), `gemm` (m, k, n), `kv` (kv_elems, tokens, generate); mappings
as primitives/mesh.py names them. Hardware is a wafer from the catalog (or a YAML / spec)
with `hardware_overrides` (every knob of `workbench list knobs wse3`, and routing_colors).
"""
from __future__ import annotations

import numpy as np

from ..errors import InputError, check_choice, check_positive
from ..primitives.mesh import MAPPINGS
from .gemm import gemm_program, gemm_sram_bytes
from .gemv import gemv_program, gemv_sram_bytes
from .hardware import SimNumbers, sim_numbers
from .kv import kv_program
from .machine import SimResult, simulate

KERNELS = ("gemv", "gemm", "kv")
SHAPE_ARGS = {"gemv": ("k", "n", "rows"), "gemm": ("m", "k", "n"), "kv": ("kv_elems", "tokens", "generate")}
MAX_P = 256  # a bound on the simulated side, to refuse a typo before it allocates P² of everything


def program(kernel: str, nums: SimNumbers, *, P: int, mapping: str = "mesh", dtype: str = "fp16", seed: int = 0,
            **shape):
    """The Program of `kernel` under `mapping` on P x P PEs (see gemv.py, gemm.py, kv.py)."""
    check_choice("kernel", kernel, KERNELS)
    check_choice("mapping", mapping, MAPPINGS)
    check_choice("dtype", dtype, ("fp16", "bf16", "fp32"))
    check_positive("P", P, integer=True)
    if P > MAX_P:
        raise InputError(f"P={P} is not allowed in a simulation; allowed: 1 to {MAX_P} (a P x P region, every PE "
                         "simulated: extrapolate further with the closed form)")
    unknown = sorted(set(shape) - set(SHAPE_ARGS[kernel]))
    if unknown:
        raise InputError(f"{unknown[0]}={shape[unknown[0]]!r} is not an argument of kernel={kernel!r}; allowed: "
                         f"{', '.join(SHAPE_ARGS[kernel])}")
    build = {"gemv": gemv_program, "gemm": gemm_program, "kv": kv_program}[kernel]
    return build(nums, P=int(P), mapping=mapping, dtype=dtype, seed=seed, **shape)


def run(kernel: str = "gemv", mapping: str = "mesh", *, P: int, hardware="wse3", hardware_overrides=None,
        dtype: str = "fp16", seed: int = 0, max_cycles: int = 10**9, **shape) -> SimResult:
    """Simulate `kernel` under `mapping` on a P x P region of `hardware` and check its result
    against numpy (SimResult.correct). Raises DoesNotFit (SRAM or routing colors) and
    SimulationError (a program the mesh cannot run as written)."""
    nums = sim_numbers(hardware, hardware_overrides)
    return simulate(program(kernel, nums, P=P, mapping=mapping, dtype=dtype, seed=seed, **shape), nums,
                    max_cycles=max_cycles)


def sram_bytes(kernel: str, *, P, mapping: str = "mesh", dtype: str = "fp16", **shape):
    """Bytes of buffers per PE the kernel's program would hold (arrays broadcast), without
    building it: where a full-size layer stops fitting. `kv`: see kv.kv_tokens_per_pe."""
    check_choice("kernel", kernel, ("gemv", "gemm"))
    f = gemv_sram_bytes if kernel == "gemv" else gemm_sram_bytes
    return f(P=P, mapping=mapping, dtype=dtype, **shape)


def layer_shapes(model, *, P_ref: float, kernel: str = "gemv", tokens: int = 4096) -> list[dict]:
    """The matmuls of one layer of a catalog model (workloads/ops.layer_matmuls, routed experts
    fused as one token runs them) as the per-PE tiles they have on a P_ref x P_ref region:
    {name, k, n, kt, nt} (and m, mt for kernel "gemm", `tokens` rows). Simulated on a smaller
    P with k = kt P (and so on), a PE does the work it would do on the full region."""
    from ..specs import load_model
    from ..workloads import ops
    m = load_model(model)
    moe = bool(getattr(m, "is_moe", False))
    out = []
    for mm in ops.layer_matmuls(m, moe=moe):
        k, n = ops.active_shape(mm, m.n_active_experts)
        row = {"name": mm.name, "k": int(k), "n": int(n), "kt": int(np.ceil(k / P_ref)), "nt": int(np.ceil(n / P_ref))}
        if kernel == "gemm":
            row.update(m=int(tokens), mt=int(np.ceil(tokens / P_ref)))
        out.append(row)
    return out
