"""The one table of layer operations, hardware-independent: what a transformer layer
computes, as named matmuls with their shapes, the widths its elementwise kernels and
activations touch, and the collectives a layout implies. Every backend (GPU kernels, wafer
MeshGEMV / MeshGEMM) and every workload (inference, serving, training) reads the model's
structure from here, so MLP widths, MoE expert shapes, MLA ranks and the training-FLOPs
convention exist once.

Notation (specs/model.py): L layers, D d_model, H query heads, K KV heads, h head dim,
h_v value head dim, F MLP width, E routed experts, k active experts per token.

A matmul is y[T, n] = x[T, k] @ W[k, n] over the T tokens in flight. `split` says how
tensor parallelism (Megatron-LM) shards it: "n" column-parallel (each rank holds n/tp
columns), "k" row-parallel (k/tp rows, then an all-reduce), "none" replicated. A routed
matmul is one of `count` experts, each token visiting k of them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..primitives.kernel_fits import expected_experts_touched  # noqa: F401  (the one formula: routed experts' shapes)

SPLITS = ("n", "k", "none")
# Bytes of a value of the residual stream: it stays 16-bit (BF16) whatever format the GEMMs
# read, so its norms, the all-reduces of the row-parallel GEMMs' outputs and the MoE
# dispatch move at least this many bytes a value.
STREAM_BYTES = 2.0


def stream_bytes(a_bytes):
    """Bytes a value of the residual stream moves: the activations' format, at least 16 bits."""
    return np.maximum(a_bytes, STREAM_BYTES)


def part_formats(*, weights: str, activations: str, attention_weights: str | None = None,
                 attention_activations: str | None = None) -> tuple[dict, dict | None]:
    """Each part's precision: (math, w_bytes, a_bytes) of the layer's every matmul but the
    routed experts (the attention projections, dense MLPs, shared experts and router:
    `attention_weights` computing in `attention_activations`, by default `weights` in
    `activations`), and the routed experts' own as a dict for layers.layer_gemms(routed=),
    None where the two are the same. MoE checkpoints often quantize only the experts:
    gpt-oss keeps attention in BF16 beside MXFP4 experts, NVIDIA's NVFP4 DeepSeek-R1
    keeps MLA in FP8."""
    from ..units import DTYPE_BYTES
    att_w, att_a = attention_weights or weights, attention_activations or activations
    layer = dict(math=att_a, w_bytes=DTYPE_BYTES[att_w], a_bytes=DTYPE_BYTES[att_a])
    routed = dict(math=activations, w_bytes=DTYPE_BYTES[weights], a_bytes=DTYPE_BYTES[activations])
    return layer, (None if routed == layer else routed)


@dataclass(frozen=True)
class Matmul:
    name: str
    k: int  # contraction (input) width
    n: int  # output width
    split: str  # "n", "k" or "none" (see module docstring)
    count: int = 1  # matrices of this shape in the layer (experts)
    routed: bool = False  # an expert: each token visits top_k of the `count`
    share: float = 1.0  # of the layers, the fraction that has it (hybrids: softmax vs linear attention)

    def __post_init__(self) -> None:
        if self.split not in SPLITS:
            raise ValueError(f"split={self.split!r} is not known; allowed: {', '.join(SPLITS)}")

    @property
    def params(self) -> float:
        """Weights per layer, averaged over the layers (share)."""
        return self.k * self.n * self.count * self.share


def attention_matmuls(model) -> list[Matmul]:
    """Q, K, V and output projections: fused QKV for MHA / GQA / MQA (with the output gate
    where the model has one; hybrids add their linear layers' projections, each matmul
    carrying its share of the layers); for MLA
    (DeepSeek-V2/V3) the query down/up projections (or one query projection without a
    query rank), the shared KV latent with its rope key (replicated across TP ranks), the
    per-head K/V up-projection and the output projection."""
    D = model.d_model
    full = model.n_full_attention_layers / model.n_layers
    linear = linear_attention_matmuls(model) if model.n_linear_layers else []
    if model.is_mla:
        H, h, hv = model.n_heads, model.head_dim, model.v_dim
        rq, rkv, rope = model.q_lora_rank, model.kv_lora_rank, model.qk_rope_head_dim
        q = [Matmul("q_down", k=D, n=rq, split="none", share=full),
             Matmul("q_up", k=rq, n=H * h, split="n", share=full)] if rq \
            else [Matmul("q", k=D, n=H * h, split="n", share=full)]
        gate = [Matmul("attn_gate", k=D, n=H * hv, split="n", share=full)] if model.attention_output_gate else []
        return q + gate + [Matmul("kv_down", k=D, n=rkv + rope, split="none", share=full),
                           Matmul("kv_up", k=rkv, n=H * (h - rope + hv), split="n", share=full),
                           Matmul("attn_out", k=H * hv, n=D, split="k", share=full)] + indexer_matmuls(model) + linear
    if model.is_compressed:
        return compressed_attention_matmuls(model) + linear
    own = _own_shape(model)  # sliding layers with their own projections: a pair of matmuls per kind
    out = []
    for n, _, sliding in model.softmax_kinds or [(0, 0.0, False)]:  # full layers, then sliding ones
        H, K, h, hv = model.attention_shape(sliding=sliding)
        gate = H * h if model.attention_output_gate else 0  # a sigmoid gate as wide as the queries
        v = 0 if (model.values_from_keys and not sliding) else K * hv  # Gemma 4's global layers: V = K
        sfx, share = ("_sliding" if sliding else "", n / model.n_layers) if own else ("", full)
        out += [Matmul("qkv" + sfx, k=D, n=H * h + K * h + v + gate, split="n", share=share),
                Matmul("attn_out" + sfx, k=H * hv, n=D, split="k", share=share)]
        if not own:
            break
    return out + indexer_matmuls(model, share=full * model.index_share) + linear


def compressed_attention_matmuls(model) -> list[Matmul]:
    """DeepSeek-V4's attention projections (transformers' modeling_deepseek_v4.py): queries
    through a rank-r_q latent (q_a, q_b), the one shared key-value vector (kv_proj, replicated
    on the TP ranks as MLA's latent is), the grouped low-rank output (o_a: each of o_groups
    groups of heads to o_lora_rank, whole groups per TP rank; o_b, row-parallel); the CSA
    layers' compressor (kv and gate of two series, D x 4h) and indexer (queries from the query
    latent, its compressor D x 4 index_head_dim, head weights), the HCA layers' compressor
    (D x 2h), each on its share of the layers, replicated; the hyper-connections' two
    projections of the hc_mult streams to their (2 + hc_mult) x hc_mult weights."""
    D, H, h, L = model.d_model, model.n_heads, model.head_dim, model.n_layers
    rq, g, ro, nh, dh, hc = (model.q_lora_rank, model.o_groups, model.o_lora_rank, model.index_n_heads,
                             model.index_head_dim, model.hc_mult)
    kv = model.n_kv_heads * h * (1 if model.key_is_value else 2)
    out = [Matmul("q_down", k=D, n=rq, split="none"), Matmul("q_up", k=rq, n=H * h, split="n")] if rq \
        else [Matmul("q", k=D, n=H * h, split="n")]
    out += [Matmul("kv", k=D, n=kv, split="none")]
    out += [Matmul("attn_out_group", k=H * h // g, n=g * ro, split="n"), Matmul("attn_out", k=g * ro, n=D, split="k")] \
        if g else [Matmul("attn_out", k=H * h, n=D, split="k")]
    csa, hca = model.n_csa_layers / L, model.n_hca_layers / L
    if csa:
        out += [Matmul("compress_kv", k=D, n=4 * h, split="none", share=csa),
                Matmul("index_q", k=rq or D, n=nh * dh, split="none", share=csa),
                Matmul("index_compress_kv", k=D, n=4 * dh, split="none", share=csa),
                Matmul("index_w", k=D, n=nh, split="none", share=csa)]
    if hca:
        out += [Matmul("compress_kv_heavy", k=D, n=2 * h, split="none", share=hca)]
    if hc:
        out += [Matmul("hc_mix", k=hc * D, n=2 * (2 + hc) * hc, split="none")]
    return out


def _own_shape(model) -> bool:
    """Whether the sliding-window layers' projections differ from the full layers'."""
    return bool(model.n_sliding_layers) and (model.attention_shape(sliding=True) != model.attention_shape()
                                             or model.values_from_keys)


def indexer_matmuls(model, share=None) -> list[Matmul]:
    """DeepSeek Sparse Attention's lightning indexer (DeepSeek-V3.2 inference code): queries
    from the query latent, one key and the per-head weights from the hidden state; small,
    replicated on every TP rank."""
    if not model.index_topk:
        return []
    nh, dh, D = model.index_n_heads, model.index_head_dim, model.d_model
    full = model.n_full_attention_layers / model.n_layers if share is None else share
    return [Matmul("index_q", k=model.q_lora_rank or D, n=nh * dh, split="none", share=full),
            Matmul("index_k", k=D, n=dh, split="none", share=full),
            Matmul("index_w", k=D, n=nh, split="none", share=full)]


def linear_attention_matmuls(model, share=None) -> list[Matmul]:
    """A linear layer's projections, heads split by TP, each carrying the linear layers'
    share of all layers (or `share`), by linear_kind:

    - "gdn", Gated DeltaNet (Qwen3-Next / Qwen3.5 modeling code): q, k, v and the output
      gate z (in_proj_qkvz), the decay and beta gates (in_proj_ba, one each per value head),
      out_proj.
    - "kda", Kimi Delta Attention (Kimi Linear modeling_kimi.py): q, k, v (q_proj, k_proj,
      v_proj), the per-channel forget gate through a rank-d_k bottleneck (f_a_proj, f_b_proj),
      beta (b_proj, one per head), the output gate through the same bottleneck (g_a_proj,
      g_b_proj), o_proj.
    - "mamba2", Mamba-2 (Nemotron-H modeling code, Mamba2Mixer): in_proj to z and x (H·P
      each), B and C (G·N each) and dt (one per head), out_proj.
    """
    D, hv = model.d_model, model.linear_value_heads * model.linear_value_head_dim
    share = model.n_linear_layers / model.n_layers if share is None else share
    H, dk = model.linear_value_heads, model.linear_key_head_dim
    out = [Matmul("linear_out", k=hv, n=D, split="k", share=share)]
    if model.linear_kind == "kda" and model.linear_full_rank_gate:  # Kimi-K3: the output gate beside q, k, v
        return [Matmul("linear_qkvg", k=D, n=model.linear_qkv_width + hv, split="n", share=share),
                Matmul("linear_gate_down", k=D, n=dk, split="none", share=share),  # f_a
                Matmul("linear_gate_up", k=dk, n=H * dk, split="n", share=share),  # f_b
                Matmul("linear_beta", k=D, n=H, split="n", share=share)] + out
    if model.linear_kind == "kda":
        return [Matmul("linear_qkv", k=D, n=model.linear_qkv_width, split="n", share=share),
                Matmul("linear_gate_down", k=D, n=2 * dk, split="none", share=share),  # f_a, g_a
                Matmul("linear_gate_up", k=dk, n=H * dk + hv, split="n", share=share),  # f_b, g_b
                Matmul("linear_beta", k=D, n=H, split="n", share=share)] + out
    gates = 2 * H if model.linear_kind == "gdn" else H  # gdn: decay and beta; mamba2: dt
    return [Matmul("linear_qkvz", k=D, n=model.linear_qkv_width + hv, split="n", share=share),
            Matmul("linear_ba", k=D, n=gates, split="n", share=share)] + out


def mlp_matmuls(model, *, moe: bool) -> list[Matmul]:
    """The dense MLP (fused gate/up, then down), or an MoE layer: the router, the routed
    experts (fused gate/up and down of each; in a latent MoE between the latent projections)
    and the shared experts as one wide MLP."""
    D, up = model.d_model, model.mlp_matrices - 1
    if moe is None:  # a block without an MLP (ops.layer_kinds)
        return []
    if not moe:
        F = model.d_ff
        return [Matmul("mlp_up", k=D, n=up * F, split="n"), Matmul("mlp_down", k=F, n=D, split="k")]
    F, E, X = model.d_ff_expert, model.n_experts, model.expert_width
    out = [Matmul("router", k=D, n=E, split="none"),
           Matmul("expert_up", k=X, n=up * F, split="n", count=E, routed=True),
           Matmul("expert_down", k=F, n=X, split="k", count=E, routed=True)]
    if model.moe_latent_dim:  # latent MoE: into the latent before dispatch, back after the combine
        # replicated on the TP ranks (small: D x latent); the up-projection of each rank's
        # partial expert sums is linear, so the layer's one all-reduce still sums them
        out = out[:1] + [Matmul("latent_down", k=D, n=X, split="none")] + out[1:] \
            + [Matmul("latent_up", k=X, n=D, split="none")]
    if model.n_shared_experts:
        Fs = F * model.n_shared_experts
        out += [Matmul("shared_up", k=D, n=up * Fs, split="n"), Matmul("shared_down", k=Fs, n=D, split="k")]
    return out


def routed_params(model) -> float:
    """Parameters of the routed experts (all MoE layers)."""
    if not model.n_moe_layers:
        return 0.0
    per_layer = sum(mm.k * mm.n * mm.count for mm in mlp_matmuls(model, moe=True) if mm.routed)
    return float(per_layer * model.n_moe_layers)


def layer_matmuls(model, *, moe: bool) -> list[Matmul]:
    """Every matmul of one layer (attention projections, then the MLP or MoE)."""
    return attention_matmuls(model) + mlp_matmuls(model, moe=moe)


def lm_head(model) -> Matmul:
    """Logits: the output projection over the vocabulary, column-parallel under TP."""
    return Matmul("lm_head", k=model.d_model, n=model.vocab_size, split="n")


def active_shape(mm: Matmul, top_k: int) -> tuple[float, float]:
    """(k, n) of the matmul one token runs, the experts it visits fused side by side
    (their columns for an up-projection, their rows for a down-projection)."""
    if not mm.routed:
        return float(mm.k), float(mm.n)
    return (float(mm.k), float(mm.n) * top_k) if mm.split == "n" else (float(mm.k) * top_k, float(mm.n))


def expert_slots(n_experts, ep):
    """Expert slots of a layer split `ep`-way: n_experts where ep divides it, else the next
    multiple of ep, the extra slots holding redundant copies of the busiest experts as the
    engines' expert-parallel load balancers place them (SGLang --ep-num-redundant-experts,
    vLLM --num-redundant-experts, TensorRT-LLM's MoE load balancer num_slots). DeepSeek-R1's
    256 experts over 48 GPUs: 288 slots, 6 a GPU, as SGLang's GB200 NVL72 decode ran them
    (--tp-size 48 --ep-size 48 --ep-num-redundant-experts 32: LMSYS, "Deploying DeepSeek on
    GB200 NVL72 with PD and Large Scale EP (Part II)", 2025-09, reproduction scripts; the
    launch script InferenceX's GB200 SGLang entries name, github.com/Elnifio/dynamo
    components/backends/sglang/slurm_jobs/scripts/gb200-fp8.sh, sets 32 at every size, so
    over 24 GPUs those runs held 12 slots a GPU where this rule gives the fewest, 11)."""
    ep = np.asarray(ep, float)
    return np.ceil(n_experts / ep) * ep


def busiest_rank_experts(*, n_experts, top_k, tokens, ep):
    """(expert-token pairs, experts touched) on the busiest of `ep` expert-parallel ranks when
    `tokens` tokens each route to top_k of n_experts at random, the experts split evenly: a
    rank's pairs are Binomial(T k, 1/ep), the busiest sits z(ep) standard deviations above
    the mean (Blom's approximation of the expected largest of ep normal draws,
    Phi^-1((ep - 0.375) / (ep + 0.25))), and it touches its E/ep experts as the T' = pairs
    ep / k tokens that would bring it that many pairs on average do (expected_experts_touched
    over ep; over the expert_slots where ep does not divide the experts). One rank (ep = 1):
    expected_experts_touched itself."""
    from statistics import NormalDist
    ep = np.asarray(ep, float)
    sizes, at = np.unique(ep, return_inverse=True)  # one quantile per distinct size
    z = np.array([NormalDist().inv_cdf((r - 0.375) / (r + 0.25)) if r > 1 else 0.0 for r in sizes])
    z = z[at].reshape(ep.shape)
    mean = tokens * top_k / ep
    pairs = mean + z * np.sqrt(mean * (1.0 - 1.0 / ep))
    slots = expert_slots(n_experts, ep)  # replicas of an expert share its tokens
    return pairs, expected_experts_touched(n_experts=slots, top_k=top_k, tokens=pairs * ep / top_k) / ep


def layer_kinds(model) -> list[tuple[int, bool | None]]:
    """(number of layers, is MoE) for the model's dense-MLP and MoE layers, and (n, None)
    for its layers without an MLP (Nemotron-H's extra mixer blocks), zero counts dropped
    (DeepSeek-V3: 3 dense layers, then 58 MoE layers)."""
    return [(n, moe) for n, moe in ((model.n_dense_mlp_layers, False), (model.n_moe_layers, True),
                                    (model.n_mlp_free_layers, None)) if n]


def mlp_width(model, *, moe: bool) -> int:
    """MLP hidden width one token activates: F for a dense layer, the active and shared
    experts' widths for an MoE layer (activations, elementwise bytes)."""
    if moe is None:
        return 0
    if moe:
        return model.d_ff_expert * (model.n_active_experts + model.n_shared_experts)
    return model.d_ff


def widest_mlp(model) -> int:
    """The largest MLP width any layer activates (MoE layers when the model has them)."""
    return mlp_width(model, moe=model.is_moe)


def qkv_width(model) -> int:
    """Q, K and V columns per token: (H + 2K)·h."""
    return (model.n_heads + 2 * model.n_kv_heads) * model.head_dim


def qk_width(model) -> int:
    """Q and K columns per token, which rotary embedding rewrites: (H + K)·h."""
    return (model.n_heads + model.n_kv_heads) * model.head_dim


def tp_allreduce_bytes(model, *, tokens, a_bytes):
    """Bytes of each of the two all-reduces of a layer's [T, D] activations across the TP
    group (after attention, after the MLP: Megatron-LM tensor parallelism), in at least 16
    bits: they sum the row-parallel GEMMs' outputs, which FP8 and FP4 GEMMs write in BF16
    (the residual stream stays 16-bit; AIConfigurator models them the same way, its
    ModelConfig.comm_quant_mode defaulting to CommQuantMode.half, aiconfigurator-core 0.12.0
    sdk/config.py)."""
    return tokens * model.d_model * stream_bytes(a_bytes)


def expert_dispatch_bytes(model, *, tokens, a_bytes):
    """Bytes of each all-to-all of an MoE layer (dispatch, combine): every token's hidden
    state (a latent MoE's latent) to its k experts, in at least 16 bits."""
    return tokens * model.n_active_experts * model.expert_width * stream_bytes(a_bytes)


def training_model_flops(model, *, tokens, seq_len):
    """Model FLOPs of a training step over `tokens` tokens of sequences `seq_len` long:
    6·N·tokens + 12·L·H·h·S·tokens (PaLM Appendix B / llm-foundry: attention counted
    without causal halving); N = parameters touched per token, embeddings included; the
    attention term over the layers with softmax attention (a hybrid's linear layers and
    Llama-Nemotron's attention-free ones have none). Returns (model FLOPs, attention FLOPs)."""
    attention = 12.0 * model.n_full_attention_layers * model.n_heads * model.head_dim * seq_len * tokens
    return 6.0 * model.n_params_active * tokens + attention, attention
