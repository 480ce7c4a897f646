"""`workbench list ...`: the catalog (hardware, models), one model's description with the
Hugging Face checkpoints that resolve to it and the formats each stores, one hardware's knobs
or its serving frameworks."""
from __future__ import annotations

from .errors import InputError
from .specs import list_hardware, list_models


def list_command(ns) -> int:
    if ns.what == "frameworks":
        if not ns.name:
            raise InputError("list frameworks needs HARDWARE; allowed: a name from `workbench list hardware`")
        return _list_frameworks(ns.name)
    if ns.what == "models" and ns.name:
        return _describe_model(ns.name)
    if ns.what != "knobs":
        for n in list_hardware() if ns.what == "hardware" else list_models():
            print(n)
        return 0
    if not ns.name:
        raise InputError("list knobs needs HARDWARE; allowed: a name from `workbench list hardware`")
    from .backends import knobs, list_knobs
    rows = [(str(n), str(u), f"{v:g}" if isinstance(v, (int, float)) else str(v)) for n, u, v in list_knobs(ns.name)]
    listed = {r[0] for r in rows}
    # knobs the chip has no value for (a math it lacks) can still be set: a hypothetical unit
    rows += [(str(n), str(u), "none (settable: a hypothetical unit)") for n, (u, _) in
             knobs(ns.name, every=True).items() if n not in listed]
    widths = [max((len(r[i]) for r in rows), default=0) for i in range(2)]
    for n, u, v in rows:
        print(f"{n:<{widths[0]}}  {u:<{widths[1]}}  {v}")
    return 0


def _describe_model(name) -> int:
    """A model's sizes, and each Hugging Face checkpoint of it with the weight formats
    predict's weights=None serves it in (specs/checkpoint_formats.csv) and the KV-cache
    format its config asks for; the id asked for is marked."""
    from .specs import load_model
    from .specs.checkpoint_formats import checkpoint_formats, recorded
    spec = load_model(name)
    moe = (f"; MoE {spec.n_experts} experts, top {spec.n_active_experts}"
           + (f" + {spec.n_shared_experts} shared" if spec.n_shared_experts else "")
           + (f", {spec.n_dense_layers} dense layers first" if spec.n_dense_layers else "")) if spec.is_moe else ""
    print(f"{spec.name}: {spec.n_params / 1e9:.1f}B parameters, {spec.n_params_active / 1e9:.1f}B active a token; "
          f"{spec.n_layers} layers, d_model {spec.d_model}, {spec.n_heads} heads / {spec.n_kv_heads} KV heads{moe}")
    print(f"  KV cache {spec.kv_bytes_per_token() / 1e3:.1f} kB a token in 16 bits (softmax-attention layers, "
          f"windows uncapped); source: {spec.source}")
    ids = list(spec.hf_ids) + ([spec.checkpoint] if spec.checkpoint and spec.checkpoint not in spec.hf_ids else [])
    if not ids:
        print("  no Hugging Face checkpoint recorded: weights=None serves it in bf16")
        return 0
    print("  Hugging Face checkpoints (model=\"org/name\"; weights=None serves one as it ships):")
    width = max(len(i) for i in ids)
    for i in ids:
        w, a = checkpoint_formats(i) or ("bf16", None)
        kv = dict(spec.hf_kv_cache).get(i)
        parts = f"weights {w}" + (f", attention {a}" if a else "") + (f", KV cache {kv}" if kv else "") \
            + ("" if recorded(i) or w == "bf16" else " (named by the id: no config recorded)")
        print(f"  {'*' if i == spec.checkpoint else ' '} {i:<{width}}  {parts}")
    return 0


def _list_frameworks(name) -> int:
    """Frameworks with kernel tables for one hardware (default mark, the classes fitted and
    their held-out error), then those that run their engine there without tables."""
    from .backends import backend_for, kernel_tables
    from .specs import load_hardware
    spec = load_hardware(name)
    have = kernel_tables.frameworks(spec)
    engines = kernel_tables.runs_here(spec) if backend_for(spec).kind == "gpu" else []
    if not have:
        print(f"{spec.name}: no kernel tables (framework none: the spec's analytical efficiencies)")
    via = "" if getattr(spec, "kernel_tables", spec.name) == spec.name else f" (tables of {spec.kernel_tables})"
    for fw in have:
        fits = kernel_tables.fits_for(spec, fw)
        mark = " (default)" if fw == spec.default_framework else ""
        print(f"{fw}{mark}{via}: {fits.source}")
        for (c, v), sc in sorted(fits.scores.items()):
            print(f"  {c:17s} {v:20s} {sc['rows']:7d} rows  held-out median |err| {sc['median_abs_err']:6.1%}"
                  f"  p90 {sc['p90_abs_err']:6.1%}")
    for fw in engines:
        print(f"{fw}: its engine (schedule, token budget, host constants) over the analytical efficiencies")
    if have:
        print("none: the spec's analytical efficiencies")
    return 0
