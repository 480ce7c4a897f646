"""Import a Hugging Face `config.json` as ModelSpec fields: the transformers key names of
the Llama (3 and 4), Mistral / Mixtral, Gemma, Qwen2 / Qwen3 (dense and MoE, and the text model
of Qwen3-VL), MiMo, MiniMax-M2, Step-3.7, DeepSeek-V2/V3 and Kimi-K2 (MLA) and gpt-oss families
mapped to the spec's; what a config leaves unsaid (the tie default, Gemma's GeGLU, which layers a
window masks) as its family's transformers class fills it (hf_names.family_defaults). A multimodal
wrapper (`text_config`) imports as its text model. Unknown architectures still import when they use
the common keys; a key the spec needs and the file lacks is an error naming it. A config whose layers
the workbench has no kind for (Mamba, RWKV, Jamba / Zamba / Falcon-H1 / Granite-H hybrids, MiniMax-01's
lightning attention, per-layer head shapes, ...: by model_type or by the keys that place
such layers) is refused with UnsupportedFamily, never approximated. Nemotron-H's block pattern and
Kimi Linear's KDA layers import as linear kinds (ModelSpec.linear_kind).
"""
from __future__ import annotations

from ..errors import InputError, brief
from ._base import SpecError
from .hf_names import (_DENSE_FF, _EXPERTS, _KEYS, _SHARED_FF, _TOP_K, FAMILIES, check_counts,
                       family_defaults)

_ATTENTION_TYPES = ("full_attention", "sliding_attention", "chunked_attention", "linear_attention")
# model_type of the families whose linear_attention layers are Gated DeltaNet (transformers'
# Qwen3NextGatedDeltaNet, Qwen3.5's Qwen3_5GatedDeltaNet)
_GATED_DELTANET = ("qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text")


def _gated_deltanet(cfg: dict) -> bool:
    return str(cfg.get("model_type", "")) in _GATED_DELTANET


def _kimi_linear(cfg: dict) -> bool:  # Kimi Linear: KDA layers between MLA layers
    return str(cfg.get("model_type", "")) == "kimi_linear"


_PATTERN = "M*-E"  # Nemotron-H blocks: Mamba-2, attention, MLP, MoE
_BLOCK_TYPES = {"mamba": "M", "attention": "*", "mlp": "-", "moe": "E"}  # layers_block_type (transformers >= 5)


def _nemotron_pattern(cfg: dict) -> str:
    """Nemotron-H's blocks, one character each: hybrid_override_pattern, or the newer
    layers_block_type list spelled the same way ('?' for a block type not known here)."""
    if cfg.get("hybrid_override_pattern"):
        return str(cfg["hybrid_override_pattern"])
    return "".join(_BLOCK_TYPES.get(str(t), "?") for t in cfg.get("layers_block_type") or [])


def _nemotron_h(cfg: dict) -> bool:  # Nemotron-H: one block per character of its pattern
    return str(cfg.get("model_type", "")) == "nemotron_h" and bool(_nemotron_pattern(cfg))
_GATED = ("silu", "swiglu", "swigluoai", "gelu_pytorch_tanh", "geglu")


class UnsupportedFamily(SpecError):
    """A config.json whose layers need a kind the workbench does not model."""

    def __init__(self, origin: str, model_type, key: str, value, what: str):
        said = "" if key == "model_type" else f" has {key}={brief(value, 60)} in config.json"
        InputError.__init__(self, f"spec {brief(origin)}: model_type {brief(model_type)}{said}: {what}, a layer kind the "
                                  "workbench does not model (not approximated); the 'Emerging model families' issue adds it")


def _differs(key: str):
    return lambda v, cfg: v is not None and v != cfg.get(key)


def _mamba(v, cfg) -> bool:  # a Mamba key, unless the config's layer kinds name no Mamba (Granite-4.0's dense ones)
    kinds = [str(k) for k in cfg.get("layer_types") or cfg.get("layers_block_type") or ["mamba"]]
    return not _nemotron_h(cfg) and any("mamba" in k for k in kinds)


_MAMBA = "Mamba / Mamba-2 state-space layers outside Nemotron-H"
_WINDOWED = ("layer_types", "use_sliding_window", "hybrid_layer_pattern", "compress_ratios", "attention_chunk_size")
# (config.json key, does its value mean the unmodelled kind, what that kind is), first hit wins, after the
# model_types and keys hf_names.FAMILIES names; "mamba_*": the first key so begun but the state's dtypes
_UNMODELLED = tuple((k, lambda v, cfg: v is not None, w) for k, w in FAMILIES["unmodelled_keys"].items()) + (
    ("linear_attn_config", lambda v, cfg: not _kimi_linear(cfg), "linear-attention layers of a family other "
     "than Kimi Linear's Kimi Delta Attention"),
    ("linear_num_key_heads", lambda v, cfg: not _gated_deltanet(cfg), "linear attention of another kind than the "
     "Gated DeltaNet of Qwen3-Next / Qwen3.5"),
    ("full_attention_interval", lambda v, cfg: bool(v) and not _gated_deltanet(cfg), "linear layers between softmax ones"),
    ("attn_type_list", lambda v, cfg: isinstance(v, list) and 0 in v, "lightning (linear) attention layers (its 0s)"),
    ("hybrid_override_pattern", lambda v, cfg: not _nemotron_h(cfg), "a Mamba-2 / attention hybrid of a family "
     "other than Nemotron-H"),
    ("hybrid_override_pattern", lambda v, cfg: any(c not in _PATTERN for c in str(v)),
     "blocks other than Mamba-2 (M), attention (*), MLP (-) and MoE (E)"),
    ("layers_block_type", lambda v, cfg: _nemotron_h(cfg) and "?" in _nemotron_pattern(cfg),
     "blocks other than mamba, attention, mlp and moe"),
    ("layers_block_type", lambda v, cfg: not _nemotron_h(cfg), "blocks of kinds outside Nemotron-H (Mamba, ...)"),
    ("mamba_*", _mamba, _MAMBA), ("n_mamba_heads", _mamba, _MAMBA), ("ssm_state_size", _mamba, _MAMBA),
    ("expert_layer_period", lambda v, cfg: v is not None and int(v) != 1, "MoE every expert_layer_period-th layer"),
    ("compress_ratios", lambda v, cfg: not isinstance(v, list) or len({int(r) for r in v if r}) > 2,
     "compressed attention of more than DeepSeek-V4's two ratios (CSA and HCA)"),
    ("sparse_attention_config", lambda v, cfg: isinstance(v, dict) and bool(v.get("use_sparse_attention"))
     and str(v.get("sparse_score_type", "max")) != "max", "block-sparse attention scored other than by its keys' max"),
    ("block_configs", lambda v, cfg: not _nas_modelled(v), "NAS blocks other than GQA-or-no-op attention with an "
     "MLP (one KV-head count, no linear replacements, windows or MLP-free blocks)"),
    ("swa_num_attention_heads", _differs("num_attention_heads"), "sliding-window layers with their own query heads"),
    ("swa_v_head_dim", lambda v, cfg: v is not None and v != cfg.get("v_head_dim", cfg.get("head_dim")),
     "sliding-window layers with their own value width"),
    ("num_kv_shared_layers", lambda v, cfg: bool(v), "layers reusing another layer's KV cache"),
    ("hidden_size_per_layer_input", lambda v, cfg: bool(v), "per-layer input embeddings"),
    ("sliding_window", lambda v, cfg: bool(v) and str(cfg.get("model_type")) not in FAMILIES["sliding_window"] and
     all(cfg.get(k) is None for k in _WINDOWED), "a sliding window on layers nothing names (no layer_types or rule)"),
)


def text_config(cfg: dict) -> dict:
    """The text model's config: a multimodal wrapper's `text_config` (Qwen3-VL, Llama-4,
    Gemma, Kimi-K2.5), falling back on the wrapper's tie_word_embeddings; else `cfg`."""
    inner = cfg.get("text_config")
    if not isinstance(inner, dict) or not inner:
        return cfg
    return {**{k: cfg[k] for k in ("tie_word_embeddings", "model_type") if k in cfg}, **inner}


def check_supported(cfg: dict, *, origin: str) -> None:
    """Raise UnsupportedFamily when the (text) config, as hf_names.family_defaults fills it, needs a kind not modelled."""
    check_counts(cfg, origin)  # and InputError for a count that is not a whole number
    cfg = family_defaults(text_config(cfg), {})
    if str(cfg.get("model_type")) in FAMILIES["unmodelled"]:
        raise UnsupportedFamily(origin, cfg["model_type"], "model_type", 0, FAMILIES["unmodelled"][cfg["model_type"]])
    for key, test, what in _UNMODELLED:
        if key.endswith("*"):
            key = next((k for k in cfg if k.startswith(key[:-1]) and not k.endswith("_dtype")), key)
        if key in cfg and test(cfg[key], cfg):
            raise UnsupportedFamily(origin, cfg.get("model_type"), key, cfg[key], what)
    allowed = _ATTENTION_TYPES if _gated_deltanet(cfg) else _ATTENTION_TYPES[:-1]
    if cfg.get("index_topk"):  # GLM-5.2's NVFP4 config names its DSA layers in layer_types
        allowed += ("deepseek_sparse_attention",)
    other = sorted({t for t in cfg.get("layer_types") or [] if t not in allowed},  # "mamba" before "attention"
                   key=lambda t: ("attention" in str(t), str(t)))
    if other:
        raise UnsupportedFamily(origin, cfg.get("model_type"), "layer_types", other[0], f"{other[0]} layers")


def _first(cfg: dict, keys, origin: str, field: str, default=None, prov=None):
    for k in keys:
        if cfg.get(k) is not None:
            if prov is not None:
                prov[field] = k
            return cfg[k]
    if default is not None:
        return default
    raise SpecError(origin, field, None, f"one of the config.json keys {list(keys)}")


def _n_moe_layers(cfg: dict, n_layers: int, origin: str) -> tuple[int, str]:
    """Layers with an MoE block, by the family's convention, and the key(s) that say so."""
    freq = cfg.get("moe_layer_freq")
    if isinstance(freq, list):  # MiniMax-M3, MiMo-V2: one 0/1 flag per layer
        if len(freq) != n_layers:
            raise SpecError(origin, "moe_layer_freq", freq, f"one 0/1 flag per layer ({n_layers})")
        return sum(1 for f in freq if f), "moe_layer_freq"
    if cfg.get("moe_layers") is not None:  # Llama-4, explicit
        return len({int(i) for i in cfg["moe_layers"] if 0 <= int(i) < n_layers}), "moe_layers"
    if cfg.get("interleave_moe_layer_step"):  # Llama-4: layers step-1, 2·step-1, ...
        step = int(cfg["interleave_moe_layer_step"])
        return len(range(step - 1, n_layers, step)), "interleave_moe_layer_step"
    if "decoder_sparse_step" in cfg or "mlp_only_layers" in cfg:  # Qwen2/3-MoE
        step, dense = int(cfg.get("decoder_sparse_step") or 1), set(cfg.get("mlp_only_layers") or [])
        return (sum(1 for i in range(n_layers) if i not in dense and (i + 1) % step == 0),
                "decoder_sparse_step, mlp_only_layers")
    k, f = int(cfg.get("first_k_dense_replace") or 0), int(freq or 1)  # DeepSeek: from layer k, every f-th
    return (sum(1 for i in range(k, n_layers) if i % f == 0),
            "first_k_dense_replace" if "first_k_dense_replace" in cfg else "no dense-layer key: every layer")


def _index_layers(cfg: dict, n_layers: int) -> int:
    """Layers that run DeepSeek Sparse Attention's indexer when a top-k is shared across
    layers (GLM-5.2: index_topk_freq 4, index_skip_topk_offset 3), SGLang's rule as
    aiconfigurator-core's deepseek_v32.py documents it: layer i skips when
    index_topk_pattern[i] == 'S', else max(i - offset + 1, 0) % freq != 0 (with no offset,
    max(i - 1, 0) % freq != 0); 0 when every layer runs it."""
    freq, pattern, offset = int(cfg.get("index_topk_freq") or 1), cfg.get("index_topk_pattern"), \
        cfg.get("index_skip_topk_offset")
    if freq <= 1 and not pattern:
        return 0
    if pattern is not None:
        return sum(1 for i in range(n_layers) if not (i < len(pattern) and pattern[i] == "S"))
    start = int(offset) - 1 if offset is not None else 1
    return sum(1 for i in range(n_layers) if max(i - start, 0) % freq == 0)


def _attention_kinds(cfg: dict, out: dict, prov: dict) -> dict:
    """Head shapes of the two kinds of softmax layer where they differ: MiMo-V2-Flash's
    sliding layers (swa_num_key_value_heads, swa_head_dim) and its value width (v_head_dim);
    Gemma 4's global layers (num_global_key_value_heads x global_head_dim, values from the
    keys' projection: attention_k_eq_v) against its sliding ones (num_key_value_heads x
    head_dim)."""
    got = {}
    if cfg.get("v_head_dim") and int(cfg["v_head_dim"]) != out["head_dim"]:
        got["v_head_dim"], prov["v_head_dim"] = int(cfg["v_head_dim"]), "v_head_dim"
    for field, key in (("sliding_n_kv_heads", "swa_num_key_value_heads"), ("sliding_head_dim", "swa_head_dim"),
                       ("sliding_v_head_dim", "swa_v_head_dim")):
        if cfg.get(key):
            got[field], prov[field] = int(cfg[key]), key
    if cfg.get("global_head_dim") or cfg.get("num_global_key_value_heads"):  # Gemma 4: the stated heads are the sliding ones
        got.update(sliding_n_kv_heads=out["n_kv_heads"], sliding_head_dim=out["head_dim"])
        prov.update(sliding_n_kv_heads="num_key_value_heads (sliding layers)", sliding_head_dim="head_dim (sliding layers)")
        if cfg.get("num_global_key_value_heads"):
            got["n_kv_heads"], prov["n_kv_heads"] = int(cfg["num_global_key_value_heads"]), "num_global_key_value_heads"
        if cfg.get("global_head_dim"):
            got["head_dim"], prov["head_dim"] = int(cfg["global_head_dim"]), "global_head_dim"
    if cfg.get("attention_k_eq_v"):
        got["values_from_keys"], prov["values_from_keys"] = True, "attention_k_eq_v"
    return got


def _compressed_layers(cfg: dict, n_layers: int, origin: str, prov: dict) -> dict:
    """DeepSeek-V4 (its technical report, section 2.3; transformers' modeling_deepseek_v4.py):
    compress_ratios gives one ratio per layer (then the MTP layers'): 0 the window alone,
    the smaller nonzero ratio Compressed Sparse Attention (4: the indexer picks index_topk
    entries), the larger Heavily Compressed Attention (128: every entry attended); every
    layer attends its last sliding_window tokens, through shared-KV MQA (one cached vector
    is key and value), queries from a rank-q_lora_rank latent, a grouped low-rank output
    projection (o_groups x o_lora_rank) and hc_mult hyper-connection streams."""
    ratios = [int(r) for r in cfg["compress_ratios"]]
    if len(ratios) < n_layers:
        raise SpecError(origin, "compress_ratios", cfg["compress_ratios"], f"one ratio per layer ({n_layers})")
    ratios = ratios[:n_layers]
    kinds = sorted({r for r in ratios if r})
    csa = kinds[0] if kinds and cfg.get("index_topk") else 0
    hca = ([r for r in kinds if r != csa] or [0])[0]
    keys = ("sliding_window", "q_lora_rank", "o_groups", "o_lora_rank", "hc_mult")
    out = {f: int(_first(cfg, (f,), origin, f, prov=prov)) for f in keys}
    if csa:
        out.update(index_topk=int(cfg["index_topk"]), index_n_heads=int(_first(cfg, ("index_n_heads",), origin,
                                                                                 "index_n_heads", prov=prov)),
                   index_head_dim=int(_first(cfg, ("index_head_dim",), origin, "index_head_dim", prov=prov)))
        prov["index_topk"] = "index_topk"
    prov.update(n_sliding_layers="every layer (its window branch)", key_is_value="DeepSeek-V4: shared-KV MQA",
                n_csa_layers=f"compress_ratios == {csa}", csa_ratio="compress_ratios (the smaller, with the indexer)",
                n_hca_layers=f"compress_ratios == {hca}", hca_ratio="compress_ratios (the larger)")
    return dict(out, n_sliding_layers=n_layers, key_is_value=True, n_csa_layers=ratios.count(csa) if csa else 0,
                csa_ratio=csa, n_hca_layers=ratios.count(hca) if hca else 0, hca_ratio=hca)


def _block_sparse(cfg: dict, n_layers: int, origin: str, prov: dict) -> dict:
    """MiniMax-M3's sparse attention (sparse_attention_config, as aiconfigurator-core's
    sdk/models/minimax_m3.py reads it): in the layers sparse_attention_freq flags, an indexer
    of sparse_num_index_heads x sparse_index_dim scores every cached key, a block of
    sparse_block_size keys scores its best key's (sparse_score_type max), and each query
    attends its sparse_topk_blocks best blocks plus the sparse_local_block latest and
    sparse_init_block first ones; the other layers attend every key. As DeepSeek Sparse
    Attention's fields: a top-k of that many keys, the indexer's layers, dense_unindexed_layers."""
    sa = cfg["sparse_attention_config"]
    freq = list(sa.get("sparse_attention_freq") or [1] * n_layers)
    if len(freq) != n_layers:
        raise SpecError(origin, "sparse_attention_config.sparse_attention_freq", freq, f"one flag per layer ({n_layers})")
    get = lambda k: int(_first(sa, (k,), origin, f"sparse_attention_config.{k}"))  # noqa: E731
    blocks = get("sparse_topk_blocks") + int(sa.get("sparse_local_block") or 0) + int(sa.get("sparse_init_block") or 0)
    n_sparse = sum(1 for f in freq if f)
    prov.update(index_topk="sparse_attention_config: (sparse_topk_blocks + sparse_local_block + sparse_init_block) "
                           "x sparse_block_size", index_n_heads="sparse_attention_config.sparse_num_index_heads",
                index_head_dim="sparse_attention_config.sparse_index_dim",
                dense_unindexed_layers="sparse_attention_config.sparse_attention_freq: 0 = every key")
    out = dict(index_topk=blocks * get("sparse_block_size"), index_n_heads=get("sparse_num_index_heads"),
               index_head_dim=get("sparse_index_dim"), dense_unindexed_layers=n_sparse < n_layers)
    if n_sparse < n_layers:
        out["index_layers"], prov["index_layers"] = n_sparse, "sparse_attention_config.sparse_attention_freq"
    return out


def _nas_modelled(blocks) -> bool:
    """Whether Llama-Nemotron NAS blocks are of the kinds _nas_blocks imports."""
    if not isinstance(blocks, list) or not blocks:
        return False
    att, ffn = [b.get("attention") or {} for b in blocks], [b.get("ffn") or {} for b in blocks]
    odd = any(a.get("replace_with_linear") or a.get("window_length") or a.get("sparsify") or f.get("no_op")
              or f.get("replace_with_linear") or f.get("sparsify") for a, f in zip(att, ffn))
    return not odd and len({a.get("n_heads_in_group") for a in att if not a.get("no_op")}) == 1


def _nas_width(ffn_mult: float, d_model: int) -> int:
    """A NAS block's MLP width: int(2 ffn_mult D / 3) rounded up to a multiple of 256
    (modeling_decilm.py, as aiconfigurator-core's sdk/models/nemotron_nas.py quotes it)."""
    width = int(2 * ffn_mult * d_model / 3)
    return width + (-width) % 256


def _nas_blocks(cfg: dict, prov: dict) -> dict:
    """Llama-3.3-Nemotron-Super (model_type nemotron-nas): block_configs gives each layer's
    attention, a no-op or GQA with n_heads_in_group query heads per KV head, and its MLP
    width (ffn_mult). The attention-free layers are n_mixer_free_layers; d_ff is the widths'
    mean (weights and FLOPs are linear in the width, so exact but for rounding; the GEMM
    efficiency is taken at the mean width)."""
    blocks, D, H = cfg["block_configs"], int(cfg["hidden_size"]), int(cfg["num_attention_heads"])
    group = next(int(b["attention"]["n_heads_in_group"]) for b in blocks if not b["attention"].get("no_op"))
    widths = [_nas_width(float(b["ffn"]["ffn_mult"]), D) for b in blocks]
    prov.update(n_layers="block_configs (one per layer)", n_kv_heads="num_attention_heads / n_heads_in_group",
                d_ff="mean of the block_configs' ffn_mult widths", n_mixer_free_layers="block_configs: attention no_op")
    return dict(n_layers=len(blocks), n_kv_heads=H // group, d_ff=round(sum(widths) / len(widths)),
                n_mixer_free_layers=sum(1 for b in blocks if b["attention"].get("no_op")))


def _attention_windows(cfg: dict, n_layers: int, prov: dict) -> dict:
    """sliding_window / n_sliding_layers: `layer_types` (gpt-oss, Step, Gemma, or hf_names.family_defaults'),
    Qwen's use_sliding_window, Llama-4's chunked attention (a window bounding each chunk)."""
    types = list(cfg.get("layer_types") or [])
    if not types and cfg.get("use_sliding_window") and cfg.get("sliding_window"):  # Qwen2: layers from max_window_layers
        start = int(cfg.get("max_window_layers") or 0)
        types = ["full_attention" if i < start else "sliding_attention" for i in range(n_layers)]
    if not types and cfg.get("attention_chunk_size") and str(cfg.get("model_type", "")).startswith("llama4"):
        rope = cfg.get("no_rope_layers") or [int((i + 1) % int(cfg.get("no_rope_layer_interval") or 4) != 0)
                                             for i in range(n_layers)]  # transformers' Llama4TextConfig default
        types = ["chunked_attention" if r else "full_attention" for r in rope]
    pattern = cfg.get("hybrid_layer_pattern")
    if not types and isinstance(pattern, list) and cfg.get("sliding_window"):  # MiMo-V2: 1 = sliding window
        prov.update(sliding_window="sliding_window", n_sliding_layers="hybrid_layer_pattern: 1")
        return dict(sliding_window=int(cfg["sliding_window"]), n_sliding_layers=sum(1 for t in pattern if t))
    if "chunked_attention" in types:
        prov.update(sliding_window="attention_chunk_size (chunked attention, bounded by a window)",
                    n_sliding_layers="layers with RoPE (no_rope_layers; every 4th layer is global)")
        return dict(sliding_window=int(cfg["attention_chunk_size"]), n_sliding_layers=types.count("chunked_attention"))
    if cfg.get("sliding_window") and "sliding_attention" in types:
        prov.setdefault("sliding_window", "sliding_window")
        prov.setdefault("n_sliding_layers", "layer_types: sliding_attention")
        return dict(sliding_window=int(cfg["sliding_window"]), n_sliding_layers=types.count("sliding_attention"))
    return {}


def _linear_layers(cfg: dict, n_layers: int, origin: str, prov: dict) -> dict:
    """Gated DeltaNet layers of Qwen3-Next / Qwen3.5: their count (layer_types, or every
    layer but each full_attention_interval-th), heads, head sizes, convolution taps and the
    state's dtype; the full-attention layers' output gate."""
    if not _gated_deltanet(cfg):
        return {}
    types = list(cfg.get("layer_types") or [])
    interval = int(cfg.get("full_attention_interval") or 0)
    if types:
        n_linear, prov["n_linear_layers"] = types.count("linear_attention"), "layer_types: linear_attention"
    elif interval:
        n_linear = n_layers - len(range(interval - 1, n_layers, interval))
        prov["n_linear_layers"] = "all but every full_attention_interval-th layer"
    else:
        raise SpecError(origin, "layer_types", None,
                        "layer_types or full_attention_interval for a Gated DeltaNet hybrid")
    keys = dict(linear_key_heads="linear_num_key_heads", linear_value_heads="linear_num_value_heads",
                linear_key_head_dim="linear_key_head_dim", linear_value_head_dim="linear_value_head_dim",
                linear_conv_kernel="linear_conv_kernel_dim")
    out = {f: int(_first(cfg, (k,), origin, f, prov=prov)) for f, k in keys.items()}
    dtype = str(cfg.get("mamba_ssm_dtype") or "float32")
    out["linear_state_bytes_per_element"] = {"float32": 4.0, "bfloat16": 2.0, "float16": 2.0}.get(dtype, 4.0)
    prov["linear_state_bytes_per_element"] = ("mamba_ssm_dtype" if cfg.get("mamba_ssm_dtype")
                                              else "fp32 state (default)")
    out["attention_output_gate"] = bool(cfg.get("attn_output_gate", str(cfg.get("model_type")) == "qwen3_next"))
    prov["attention_output_gate"] = "attn_output_gate" if "attn_output_gate" in cfg else "Qwen3-Next: gated"
    return dict(out, n_linear_layers=n_linear)


def _kda_layers(cfg: dict, n_layers: int, origin: str, prov: dict) -> dict:
    """Kimi Delta Attention layers of Kimi Linear (linear_attn_config): their count (kda_layers,
    or every layer but full_attn_layers), heads of head_dim keys and values, convolution
    taps; the recurrent state in fp32 (the KDA kernels keep it so)."""
    la = cfg["linear_attn_config"]
    if la.get("kda_layers") is not None:
        n_linear, prov["n_linear_layers"] = len(la["kda_layers"]), "linear_attn_config.kda_layers"
    elif la.get("full_attn_layers") is not None:
        n_linear = n_layers - len(la["full_attn_layers"])
        prov["n_linear_layers"] = "num_hidden_layers - linear_attn_config.full_attn_layers"
    else:
        raise SpecError(origin, "linear_attn_config.kda_layers", None, "kda_layers or full_attn_layers")
    heads, dim = int(_first(la, ("num_heads",), origin, "linear_value_heads")), int(_first(la, ("head_dim",), origin,
                                                                                                "linear_key_head_dim"))
    prov.update({f: f"linear_attn_config.{k}" for f, k in (
        ("linear_key_heads", "num_heads"), ("linear_value_heads", "num_heads"), ("linear_key_head_dim", "head_dim"),
        ("linear_value_head_dim", "head_dim"), ("linear_conv_kernel", "short_conv_kernel_size"))},
        linear_state_bytes_per_element="fp32 state (the KDA kernels')", linear_kind="model_type kimi_linear")
    if la.get("use_full_rank_gate"):
        prov["linear_full_rank_gate"] = "linear_attn_config.use_full_rank_gate"
    return dict(n_linear_layers=n_linear, linear_kind="kda", linear_key_heads=heads, linear_value_heads=heads,
                linear_full_rank_gate=bool(la.get("use_full_rank_gate")),
                linear_key_head_dim=dim, linear_value_head_dim=dim, linear_state_bytes_per_element=4.0,
                linear_conv_kernel=int(la.get("short_conv_kernel_size") or 4))


def _nemotron_blocks(cfg: dict, origin: str, prov: dict) -> dict:
    """Nemotron-H's blocks (_nemotron_pattern: M Mamba-2, * attention, - MLP, E MoE),
    counted as layers of one mixer and one MLP: as many layers as mixer blocks, the MLP
    blocks (MoE first) paired with them and the rest MLP-free; Mamba-2 as a linear kind
    (key heads = n_groups, key head dim = ssm_state_size, value heads x dim = mamba_num_heads
    x mamba_head_dim) with its state at mamba_ssm_cache_dtype."""
    pattern = _nemotron_pattern(cfg)
    mixers, mlps = pattern.count("M") + pattern.count("*"), pattern.count("-") + pattern.count("E")
    if mlps > mixers:
        raise SpecError(origin, "hybrid_override_pattern", pattern, "no more MLP blocks than mixer blocks")
    dtype = str(cfg.get("mamba_ssm_cache_dtype") or "float32")
    prov.update(n_layers="hybrid_override_pattern: mixer blocks (M, *)",
                n_linear_layers="hybrid_override_pattern: M", n_mlp_free_layers="mixer blocks - MLP blocks (-, E)",
                linear_key_heads="n_groups", linear_key_head_dim="ssm_state_size", linear_value_heads="mamba_num_heads",
                linear_value_head_dim="mamba_head_dim", linear_conv_kernel="conv_kernel", linear_kind="nemotron_h",
                linear_state_bytes_per_element="mamba_ssm_cache_dtype")
    out = dict(n_layers=mixers, n_linear_layers=pattern.count("M"), n_mlp_free_layers=mixers - mlps,
               linear_kind="mamba2", linear_conv_kernel=int(cfg.get("conv_kernel") or 4),
               linear_state_bytes_per_element={"float32": 4.0, "bfloat16": 2.0, "float16": 2.0}.get(dtype, 4.0))
    for f, k in (("linear_key_heads", "n_groups"), ("linear_key_head_dim", "ssm_state_size"),
                 ("linear_value_heads", "mamba_num_heads"), ("linear_value_head_dim", "mamba_head_dim")):
        out[f] = int(_first(cfg, (k,), origin, f))
    return out


def fields_from_hf_config(cfg: dict, *, origin: str, provenance: dict | None = None) -> dict:
    """ModelSpec fields from a parsed config.json (`origin` names it in errors); with a
    `provenance` dict, each field's config.json key(s) are written into it."""
    check_supported(cfg, origin=origin)
    cfg, prov = text_config(cfg), (provenance if provenance is not None else {})
    cfg = family_defaults(cfg, prov)  # what the family's transformers config class fills in
    if _nemotron_h(cfg) and "num_hidden_layers" not in cfg:  # Nemotron 3 Ultra: the block list only
        cfg = {**cfg, "num_hidden_layers": len(_nemotron_pattern(cfg))}
    nas = _nas_blocks(cfg, {}) if cfg.get("block_configs") else {}
    if nas:  # Llama-Nemotron NAS: per-layer heads and widths stated in block_configs, not at the top
        cfg = {**cfg, "num_hidden_layers": nas["n_layers"], "num_key_value_heads": nas["n_kv_heads"],
               "intermediate_size": nas["d_ff"]}
    out = {k: int(_first(cfg, keys, origin, k, prov=prov)) for k, keys in _KEYS.items()}
    blocks = _nemotron_blocks(cfg, origin, prov) if _nemotron_h(cfg) else {}
    out["n_layers"] = blocks.get("n_layers", out["n_layers"])
    out["n_kv_heads"] = int(_first(cfg, ("num_key_value_heads",), origin, "n_kv_heads", out["n_heads"], prov=prov))
    if cfg.get("kv_lora_rank"):  # MLA (DeepSeek-V2/V3): query/key head = nope + rope parts
        rope = int(cfg["qk_rope_head_dim"])
        out.update(head_dim=int(cfg["qk_nope_head_dim"]) + rope, qk_rope_head_dim=rope,
                   kv_lora_rank=int(cfg["kv_lora_rank"]), q_lora_rank=int(cfg.get("q_lora_rank") or 0),
                   v_head_dim=int(cfg.get("v_head_dim") or 0))
        prov.update(head_dim="qk_nope_head_dim + qk_rope_head_dim", qk_rope_head_dim="qk_rope_head_dim",
                    kv_lora_rank="kv_lora_rank", q_lora_rank="q_lora_rank", v_head_dim="v_head_dim")
        if cfg.get("mla_use_output_gate"):  # Kimi-K3: a sigmoid gate on the heads' outputs
            out["attention_output_gate"], prov["attention_output_gate"] = True, "mla_use_output_gate"
        if cfg.get("index_topk"):  # DeepSeek Sparse Attention on MLA (DeepSeek-V3.2, GLM-5)
            out.update(index_topk=int(cfg["index_topk"]), index_n_heads=int(cfg["index_n_heads"]),
                       index_head_dim=int(cfg["index_head_dim"]))
            prov.update(index_topk="index_topk", index_n_heads="index_n_heads", index_head_dim="index_head_dim")
            shared = _index_layers(cfg, out["n_layers"])
            if shared:
                out["index_layers"] = shared
                prov["index_layers"] = "index_topk_freq, index_skip_topk_offset (layers that run the indexer)"
    else:
        if out["n_heads"] <= 0:
            raise InputError(f"num_attention_heads={out['n_heads']} in {origin} is not allowed; allowed: a positive "
                             "integer")
        out["head_dim"] = int(cfg.get("head_dim") or out["d_model"] // out["n_heads"])
        prov["head_dim"] = "head_dim" if cfg.get("head_dim") else "hidden_size / num_attention_heads"
        out.update(_attention_kinds(cfg, out, prov))
    n_experts = int(_first(cfg, _EXPERTS, origin, "n_experts", 0, prov=prov))
    # an all-MoE model without a dense width (Qwen3.5 MoE) has no dense-MLP layer: the expert width stands in
    out["d_ff"] = int(_first(cfg, _DENSE_FF + (("moe_intermediate_size",) if n_experts else ()), origin, "d_ff",
                             prov=prov))
    if n_experts:
        width = int(_first(cfg, ("moe_intermediate_size", "intermediate_size"), origin, "d_ff_expert", prov=prov))
        if blocks:  # Nemotron-H: E blocks are MoE, - blocks dense
            n_moe, moe_key = _nemotron_pattern(cfg).count("E"), "hybrid_override_pattern: E"
        else:
            n_moe, moe_key = _n_moe_layers(cfg, out["n_layers"], origin)
        shared_w = _first(cfg, _SHARED_FF + ("moe_shared_expert_intermediate_size",), origin, "n_shared_experts", -1,
                          prov=prov)
        if str(cfg.get("model_type", "")).startswith("llama4"):  # Llama4TextMoe: one shared expert, expert width
            n_shared, prov["n_shared_experts"] = 1, "Llama-4: one shared expert per MoE layer"
        elif str(cfg.get("model_type", "")).startswith("gemma4"):  # a dense MLP beside the experts, every layer
            if int(out["d_ff"]) % width:
                raise SpecError(origin, "intermediate_size", out["d_ff"], f"a multiple of the expert width {width}")
            n_shared, prov["n_shared_experts"] = int(out["d_ff"]) // width, "Gemma 4: intermediate_size / expert width"
        elif shared_w != -1:
            if int(shared_w) % width:
                raise SpecError(origin, prov["n_shared_experts"], shared_w, f"a multiple of the expert width {width}")
            n_shared, prov["n_shared_experts"] = int(shared_w) // width, f"{prov['n_shared_experts']} / expert width"
        else:
            n_shared = int(_first(cfg, ("n_shared_experts", "num_shared_experts"), origin, "n_shared_experts", 0,
                                  prov=prov))
            prov.setdefault("n_shared_experts", "no shared-expert key: none")
        out.update(n_experts=n_experts, d_ff_expert=width, n_shared_experts=n_shared,
                   n_active_experts=int(_first(cfg, _TOP_K, origin, "n_active_experts", prov=prov)),
                   n_dense_layers=out["n_layers"] - n_moe - blocks.get("n_mlp_free_layers", 0))
        prov["n_dense_layers"] = f"num_hidden_layers - MoE layers ({moe_key})"
        if cfg.get("moe_latent_size"):  # latent MoE (Nemotron 3 Super / Ultra): experts in a narrower width
            out["moe_latent_dim"], prov["moe_latent_dim"] = int(cfg["moe_latent_size"]), "moe_latent_size"
        elif cfg.get("routed_expert_hidden_size") and cfg["routed_expert_hidden_size"] != out["d_model"]:  # Kimi-K3
            out["moe_latent_dim"] = int(cfg["routed_expert_hidden_size"])
            prov["moe_latent_dim"] = "routed_expert_hidden_size"
    tied = cfg["tie_word_embeddings"]  # hf_names.family_defaults: the family's default where unstated
    if not isinstance(tied, bool):  # "false" (a string) must not read as true
        raise SpecError(origin, "tie_word_embeddings", tied, "true or false (a JSON boolean)")
    out["tied_embeddings"], prov["tied_embeddings"] = tied, prov.get("tied_embeddings", "tie_word_embeddings")
    for key in ("max_position_embeddings", "model_max_length"):  # Kimi Linear states only the latter
        if cfg.get(key):
            out["max_seq_len"], prov["max_seq_len"] = int(cfg[key]), key
            break
    out.update(_attention_windows(cfg, out["n_layers"], prov))
    sparse = cfg.get("sparse_attention_config")
    if isinstance(sparse, dict) and sparse.get("use_sparse_attention"):
        out.update(_block_sparse(cfg, out["n_layers"], origin, prov))
    if cfg.get("compress_ratios") is not None:
        out.update(_compressed_layers(cfg, out["n_layers"], origin, prov))
    out.update(_linear_layers(cfg, out["n_layers"], origin, prov))
    if _kimi_linear(cfg):
        out.update(_kda_layers(cfg, out["n_layers"], origin, prov))
    out.update({k: v for k, v in blocks.items() if k != "n_layers"})
    if nas:
        _nas_blocks(cfg, prov)  # the provenance of its fields
        out["n_mixer_free_layers"] = nas["n_mixer_free_layers"]
    act = str(_first(cfg, ("mlp_hidden_act", "hidden_act", "hidden_activation", "activation_function"), origin,
                     "gated_mlp", "silu", prov=prov))
    # experts are gated (SwiGLU) in every MoE family here but Nemotron-H's (squared ReLU, no gate)
    by_act, gated = act in _GATED or (n_experts > 0 and act != "relu2"), FAMILIES["gated_mlp"].get(cfg.get("model_type"))
    out["gated_mlp"] = by_act if gated is None else gated  # Gemma 1's GeGLU under hidden_act "gelu"
    prov["gated_mlp"] = prov.get("gated_mlp", "no hidden_act: silu (SwiGLU), the transformers default") if gated in (
        None, by_act) else f"model_type {cfg['model_type']}'s MLP (gated: {str(gated).lower()}) whatever the activation"
    if n_experts and out["gated_mlp"]:
        prov["gated_mlp"] += ", gated experts"
    return out


def is_hf_config(data: dict) -> bool:
    return any(k in data for k in ("hidden_size", "num_hidden_layers", "architectures", "model_type", "text_config"))
