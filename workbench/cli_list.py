"""`workbench list ...`: the catalog (hardware, models), one model's description with the
Hugging Face checkpoints that resolve to it and the formats each stores, one hardware's knobs
or its serving frameworks."""
from __future__ import annotations

import numpy as np

from .errors import InputError
from .specs import list_hardware, list_models, load_hardware


def list_command(ns) -> int:
    if ns.what == "frameworks":
        if not ns.name:
            raise InputError("list frameworks needs HARDWARE; allowed: a name from `workbench list hardware`")
        return _list_frameworks(ns.name)
    if ns.what == "models" and ns.name:
        return _describe_model(ns.name)
    if ns.what == "hardware" and ns.name:  # one, as models NAME: unknown, one line listing the catalog
        spec = load_hardware(ns.name)
        print(f"{spec.name}: {spec.vendor} {type(spec).__name__}; source: {spec.source}")
        return 0
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
    from .specs.checkpoint_formats import checkpoint_formats, recorded, recorded_base
    spec = load_model(name)
    moe = (f"; MoE {spec.n_experts} experts, top {spec.n_active_experts}"
           + (f" + {spec.n_shared_experts} shared" if spec.n_shared_experts else "")
           + (f", {spec.n_dense_layers} dense layers first" if spec.n_dense_layers else "")) if spec.is_moe else ""
    print(f"{spec.name}: {spec.n_params / 1e9:.1f}B parameters, {spec.n_params_active / 1e9:.1f}B active a token; "
          f"{spec.n_layers} layers, d_model {spec.d_model}, {spec.n_heads} heads / {spec.n_kv_heads} KV heads{moe}")
    print(f"  layers: {_layer_kinds(spec)}")
    print(f"  {_cache(spec)}; source: {spec.source}")
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
            + ("" if recorded(i) or w == "bf16" else f" (its base {recorded_base(i)}'s: ASSUMED)" if
               recorded_base(i) and checkpoint_formats(i) == checkpoint_formats(recorded_base(i))
               else " (named by the id: no config recorded)")
        print(f"  {'*' if i == spec.checkpoint else ' '} {i:<{width}}  {parts}")
    return 0


_LINEAR = {"gdn": "Gated DeltaNet", "kda": "Kimi Delta Attention", "mamba2": "Mamba-2"}  # ModelSpec.linear_kind


def _layer_kinds(spec) -> str:
    """The model's layers by token mixer (full, sliding-window and linear ones, those without a
    mixer), and what changes the attention inside them (MLA, DeepSeek Sparse Attention's top-k,
    DeepSeek-V4's compressed entries) or leaves a layer without an MLP."""
    attn = "MLA" if spec.is_mla else "softmax attention"
    full = spec.n_full_attention_layers - spec.n_sliding_layers
    kinds = [f"{full} full {attn}" if full else "",
             f"{spec.n_sliding_layers} sliding-window {attn} ({spec.sliding_window:,} tokens)" if spec.n_sliding_layers
             else "",
             f"{spec.n_linear_layers} {_LINEAR[spec.linear_kind]} (linear: a fixed state, no KV cache)"
             if spec.n_linear_layers else "",
             f"{spec.n_mixer_free_layers} without a token mixer" if spec.n_mixer_free_layers else ""]
    shared = "" if not spec.index_layers else f" in {spec.index_layers} of them, the others attending every key" \
        if spec.dense_unindexed_layers else f" (an indexer in {spec.index_layers} layers, the others reusing its pick)"
    notes = [f"DeepSeek Sparse Attention: each query attends {spec.index_topk:,} keys{shared}" if spec.is_dsa else "",
             ", ".join(f"{n} of them also pool every {r} tokens (" + ("CSA, a top-k" if np.isfinite(k) else "HCA, all")
                       + ")" for n, r, k in spec.compressed_kinds),
             f"{spec.n_mlp_free_layers} without an MLP" if spec.n_mlp_free_layers else ""]
    text = ", ".join(k for k in kinds if k)
    return text + "".join(f"; {n}" for n in notes if n)


def _cache(spec) -> str:
    """What a sequence holds: the KV cache a token adds over the softmax layers, and the state it
    keeps whatever its length (linear layers' recurrent state and convolution taps, DeepSeek-V4's
    compressor buffers)."""
    text = f"KV cache {spec.kv_bytes_per_token() / 1e3:.1f} kB a token in 16 bits (the {spec.n_full_attention_layers} " \
           f"softmax-attention layers, windows uncapped)"
    if spec.fixed_state_bytes_per_sequence:
        what = [f"{spec.n_linear_layers} {_LINEAR[spec.linear_kind]} layers' state at "
                f"{8 * spec.linear_state_bytes_per_element:.0f} bits and convolution taps" if spec.n_linear_layers else "",
                "compressor buffers" if spec.compressor_state_bytes_per_sequence else ""]
        text += f" + {spec.fixed_state_bytes_per_sequence / 1e6:.2f} MB a sequence whatever its length (" \
                + ", ".join(w for w in what if w) + ")"
    return text


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
