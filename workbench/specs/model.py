"""Transformer model specs: the published config as a frozen dataclass, plus derived counts.

Notation (scaling-book letters): L layers, D d_model, H query heads, K KV heads,
h head dim, F MLP hidden size, V vocabulary, E routed experts, k active experts.
Parameter counts ignore biases and norm weights except where noted; they are checked
against the published totals in tests/specs/test_models.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ._base import SpecError, bool_fields, require
from .model_context import ContextCounts
from ..units import DTYPE_BYTES


LINEAR_KINDS = ("gdn", "kda", "mamba2")  # linear token mixers (see linear_kind below)


@dataclass(frozen=True, kw_only=True)
class ModelSpec(ContextCounts):
    name: str
    source: str
    n_layers: int  # L
    d_model: int  # D
    n_heads: int  # H, query heads
    n_kv_heads: int  # K; == H for MHA, 1 for MQA
    head_dim: int  # h; for MLA the query/key head dim (nope + rope)
    d_ff: int  # F, hidden size of the dense MLP layers
    vocab_size: int  # V
    gated_mlp: bool = True  # SwiGLU/GeGLU: three D x F matrices instead of two
    tied_embeddings: bool = False  # lm_head shares the embedding matrix
    max_seq_len: int = 4096
    # Mixture of experts (0 = dense model).
    n_experts: int = 0  # E, routed experts per MoE layer
    n_active_experts: int = 0  # k, routed experts per token (top-k)
    n_shared_experts: int = 0  # always-on experts per MoE layer
    d_ff_expert: int = 0  # hidden size of one expert
    # Layers with a dense MLP instead of MoE, wherever they sit (DeepSeek-V3: the first 3;
    # Llama-4-Maverick: every other one); every cost counts layers by kind, not position.
    n_dense_layers: int = 0
    # Latent MoE (Nemotron 3 Super / Ultra): the routed experts run in a narrower width than
    # the model: each MoE layer projects the hidden state down to moe_latent_dim (fc1_latent_proj),
    # dispatches and computes the experts there and projects their sum back up
    # (fc2_latent_proj); the router and the shared experts stay at d_model. 0 = experts at d_model.
    moe_latent_dim: int = 0
    # Multi-head latent attention (DeepSeek-V2/V3); 0 = standard attention.
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0  # 0 = head_dim
    # Sliding-window attention: n_sliding_layers of the L layers see only the last
    # `sliding_window` tokens (gpt-oss alternates full and 128-token windows).
    sliding_window: int = 0
    n_sliding_layers: int = 0
    # Sliding-window layers with their own head shapes (MiMo-V2-Flash: 8 KV heads against the
    # global layers' 4; Gemma 4: 8 KV heads of 256 against 2 of 512); 0 = as the other layers.
    sliding_n_kv_heads: int = 0
    sliding_head_dim: int = 0
    sliding_v_head_dim: int = 0
    # Full-attention layers whose values are their keys' projection (Gemma 4 attention_k_eq_v:
    # no v_proj; the cache still holds K after RoPE and V before it, both)
    values_from_keys: bool = False
    # Linear token mixers with a recurrent state (linear_kind): Gated DeltaNet ("gdn",
    # Qwen3-Next, Qwen3.5), Kimi Delta Attention ("kda", Kimi Linear: the delta rule with a
    # per-channel decay) or Mamba-2's state-space duality ("mamba2", Nemotron-H; key heads =
    # its B/C groups, key head dim = its state size N, value heads x dims = its heads x head
    # dim P). n_linear_layers of the L layers
    # replace softmax attention by a recurrent state per value head (key x value dims) that a
    # token reads and rewrites once; a short causal convolution (linear_conv_kernel taps) runs
    # over its q, k, v. The state is kept at linear_state_bytes_per_element (4: fp32, from
    # config.json mamba_ssm_dtype); no KV cache grows in these layers.
    n_linear_layers: int = 0
    linear_key_heads: int = 0
    linear_value_heads: int = 0
    linear_key_head_dim: int = 0
    linear_value_head_dim: int = 0
    linear_conv_kernel: int = 0
    linear_state_bytes_per_element: float = 4.0
    linear_kind: str = "gdn"
    # Kimi Delta Attention with a full-rank output gate (Kimi-K3: use_full_rank_gate; Kimi
    # Linear's goes through a rank-d_k bottleneck like its forget gate)
    linear_full_rank_gate: bool = False
    # Blocks with a token mixer and no MLP (Nemotron-H's pattern has more mixer blocks, Mamba-2
    # or attention, than MLP blocks: each of these L layers pairs a mixer with an MLP but
    # n_mlp_free_layers of them, which cost their mixer only)
    n_mlp_free_layers: int = 0
    # Layers with an MLP and no token mixer (Llama-3.3-Nemotron-Super's NAS-pruned blocks whose
    # attention is a no-op); such a model's MLP widths differ per layer and d_ff holds their mean
    # (hf_config._nas_blocks: exact for weights and FLOPs, linear in the width)
    n_mixer_free_layers: int = 0
    # DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5; on MLA): a lightning indexer of
    # index_n_heads x index_head_dim scores every cached token with its own small key, and
    # each query attends only to the index_topk best; 0 = dense attention. The indexer's key
    # is cached beside the latent (FP8 in DeepSeek-V3.2; here at the KV dtype).
    index_topk: int = 0
    index_n_heads: int = 0
    index_head_dim: int = 0
    # Layers that run the indexer (GLM-5.2 shares one top-k across index_topk_freq layers: the
    # others reuse it and cache no indexer key); 0 = every softmax layer.
    index_layers: int = 0
    # the softmax layers outside index_layers attend every key (MiniMax-M3's first three dense-
    # attention layers) instead of reusing a shared top-k (GLM-5.2)
    dense_unindexed_layers: bool = False
    # DeepSeek-V4's compressed attention (its technical report, section 2.3; transformers'
    # modeling_deepseek_v4.py). Every layer attends to its last `sliding_window` tokens
    # (n_sliding_layers = n_layers); n_csa_layers also pool every csa_ratio tokens into one
    # compressed entry (Compressed Sparse Attention: overlapping windows of 2 x csa_ratio) of
    # which each query attends the index_topk that a lightning indexer (index_n_heads x
    # index_head_dim, scoring compressed index keys) selects; n_hca_layers pool every hca_ratio
    # tokens (Heavily Compressed Attention) and attend all those entries. The compressors keep
    # a buffer of the not-yet-pooled tokens per sequence (compressor_state_bytes_per_sequence).
    n_csa_layers: int = 0
    csa_ratio: int = 0
    n_hca_layers: int = 0
    hca_ratio: int = 0
    # one cached vector per token and KV head serves as key and value (DeepSeek-V4's shared-KV MQA)
    key_is_value: bool = False
    # grouped low-rank output projection (DeepSeek-V4): the heads in o_groups groups, each
    # projected to o_lora_rank, the o_groups x o_lora_rank vector then to d_model; 0 = one matrix
    o_groups: int = 0
    o_lora_rank: int = 0
    # manifold-constrained hyper-connections (DeepSeek-V4, Xie et al. 2026): the residual stream
    # is hc_mult streams of d_model, collapsed into a block's input and expanded from its output
    # by weights a small projection of all streams computes, twice per layer; 0 = plain residual
    hc_mult: int = 0
    # full-attention layers that also project a sigmoid output gate as wide as the queries
    # (Qwen3-Next, Qwen3.5: attn_output_gate)
    attention_output_gate: bool = False
    published_params: float = 0.0  # total parameter count quoted by the source, for checks
    # Hugging Face ids of the checkpoints with this architecture (model="org/name" resolves here)
    hf_ids: tuple = field(default=(), compare=False)
    # KV-cache format a quantized checkpoint's own config asks for, by Hugging Face id (its
    # hf_quant_config.json kv_cache_quant_algo, or config.json quantization_config
    # kv_cache_scheme): a serving framework that inherits it (specs/serving/frameworks.yaml
    # kv_cache_auto) stores the cache in it when the user leaves the KV dtype unset
    hf_kv_cache: dict = field(default_factory=dict, compare=False)
    # the Hugging Face id this spec was loaded by ("" for a catalog name, a file or a dict)
    checkpoint: str = field(default="", compare=False)
    notes: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.hf_ids, list):
            object.__setattr__(self, "hf_ids", tuple(self.hf_ids))
        if not all(isinstance(i, str) and i.count("/") == 1 for i in self.hf_ids):
            raise SpecError(self.name, "hf_ids", self.hf_ids, "a list of Hugging Face ids 'organization/name'")
        for key in ("hf_kv_cache",):  # per-checkpoint formats (weights: specs/checkpoint_formats.csv)
            for i, dtype in dict(getattr(self, key)).items():
                if i not in self.hf_ids or dtype not in DTYPE_BYTES:
                    raise SpecError(self.name, f"{key}.{i}", dtype, "an id of hf_ids with a dtype of units.DTYPE_BYTES")
        require(self, ("n_layers", "d_model", "n_heads", "n_kv_heads", "head_dim", "d_ff", "vocab_size",
                       "max_seq_len"), "positive_int")
        require(self, ("n_experts", "n_active_experts", "n_shared_experts", "d_ff_expert", "n_dense_layers",
                       "q_lora_rank", "kv_lora_rank", "qk_rope_head_dim", "v_head_dim", "sliding_window",
                       "n_sliding_layers", "n_linear_layers", "linear_key_heads", "linear_value_heads",
                       "linear_key_head_dim", "linear_value_head_dim", "linear_conv_kernel", "index_topk",
                       "index_n_heads", "index_head_dim", "n_mlp_free_layers", "n_mixer_free_layers", "moe_latent_dim",
                       "sliding_n_kv_heads", "sliding_head_dim", "sliding_v_head_dim", "index_layers",
                       "n_csa_layers", "csa_ratio", "n_hca_layers", "hca_ratio", "o_groups", "o_lora_rank",
                       "hc_mult"), "nonnegative_int")
        if self.linear_kind not in LINEAR_KINDS:
            raise SpecError(self.name, "linear_kind", self.linear_kind, f"one of {', '.join(LINEAR_KINDS)}")
        if self.n_mlp_free_layers + self.n_dense_layers > self.n_layers:
            raise SpecError(self.name, "n_mlp_free_layers", self.n_mlp_free_layers,
                            f"<= n_layers - n_dense_layers = {self.n_layers - self.n_dense_layers}")
        require(self, ("published_params", "linear_state_bytes_per_element"), "nonnegative")
        require(self, bool_fields(self), "bool")  # gated_mlp: "false" (a string) must not read as true
        if self.n_heads % self.n_kv_heads:
            raise SpecError(self.name, "n_kv_heads", self.n_kv_heads,
                            f"a divisor of n_heads={self.n_heads}")
        if self.n_experts and not (0 < self.n_active_experts <= self.n_experts):
            raise SpecError(self.name, "n_active_experts", self.n_active_experts,
                            f"1..n_experts={self.n_experts} for an MoE model")
        if self.n_experts and not self.d_ff_expert:
            raise SpecError(self.name, "d_ff_expert", 0, "> 0 when n_experts > 0")
        if self.n_dense_layers > self.n_layers or self.n_sliding_layers > self.n_layers:
            raise SpecError(self.name, "n_dense_layers/n_sliding_layers",
                            max(self.n_dense_layers, self.n_sliding_layers),
                            f"<= n_layers={self.n_layers}")
        if self.n_linear_layers + self.n_sliding_layers + self.n_mixer_free_layers > self.n_layers:
            raise SpecError(self.name, "n_linear_layers", self.n_linear_layers,
                            f"<= n_layers - n_sliding_layers - n_mixer_free_layers = "
                            f"{self.n_layers - self.n_sliding_layers - self.n_mixer_free_layers}")
        if self.n_mixer_free_layers + self.n_mlp_free_layers > self.n_layers:
            raise SpecError(self.name, "n_mixer_free_layers", self.n_mixer_free_layers,
                            f"<= n_layers - n_mlp_free_layers = {self.n_layers - self.n_mlp_free_layers}")
        if self.index_layers > self.n_full_attention_layers:
            raise SpecError(self.name, "index_layers", self.index_layers,
                            f"<= the softmax-attention layers ({self.n_full_attention_layers})")
        if self.index_topk and not (self.index_n_heads and self.index_head_dim):
            raise SpecError(self.name, "index_n_heads/index_head_dim", 0, "> 0 when index_topk > 0")
        if self.n_linear_layers and not all((self.linear_key_heads, self.linear_value_heads, self.linear_key_head_dim,
                                             self.linear_value_head_dim)):
            raise SpecError(self.name, "linear_key_heads/linear_value_heads/linear_*_head_dim", 0,
                            "> 0 when n_linear_layers > 0")
        if self.sliding_n_kv_heads and self.n_heads % self.sliding_n_kv_heads:
            raise SpecError(self.name, "sliding_n_kv_heads", self.sliding_n_kv_heads,
                            f"a divisor of n_heads={self.n_heads}")
        for n, ratio in (("n_csa_layers", "csa_ratio"), ("n_hca_layers", "hca_ratio")):
            if getattr(self, n) and not getattr(self, ratio):
                raise SpecError(self.name, ratio, 0, f"> 0 when {n} > 0")
        if self.n_csa_layers + self.n_hca_layers > self.n_layers:
            raise SpecError(self.name, "n_csa_layers + n_hca_layers", self.n_csa_layers + self.n_hca_layers,
                            f"<= n_layers={self.n_layers}")
        if self.n_csa_layers and not self.index_topk:
            raise SpecError(self.name, "index_topk", 0, "> 0 when n_csa_layers > 0 (the indexer's top-k)")
        if bool(self.o_groups) != bool(self.o_lora_rank) or (self.o_groups and self.n_heads % self.o_groups):
            raise SpecError(self.name, "o_groups", self.o_groups,
                            f"a divisor of n_heads={self.n_heads}, set with o_lora_rank (both or neither)")
        if self.n_sliding_layers and not self.sliding_window:
            raise SpecError(self.name, "sliding_window", 0, "> 0 when n_sliding_layers > 0")

    # ---- structure -------------------------------------------------------------------
    @property
    def is_moe(self) -> bool:
        return self.n_experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def is_compressed(self) -> bool:
        """DeepSeek-V4's compressed attention: CSA / HCA layers beside their windows."""
        return bool(self.n_csa_layers or self.n_hca_layers)

    @property
    def is_dsa(self) -> bool:
        """DeepSeek Sparse Attention: every softmax layer's keys chosen by the indexer's top-k."""
        return bool(self.index_topk) and not self.is_compressed

    @property
    def compressed_kinds(self) -> list[tuple[int, int, float]]:
        """(layers, tokens pooled per compressed entry, entries a query attends at most (inf:
        all)) of the compressed layers: CSA's (the indexer's top-k), then HCA's."""
        return [(n, r, k) for n, r, k in ((self.n_csa_layers, self.csa_ratio, float(self.index_topk)),
                                           (self.n_hca_layers, self.hca_ratio, np.inf)) if n]

    @property
    def n_moe_layers(self) -> int:
        return self.n_layers - self.n_dense_layers - self.n_mlp_free_layers if self.is_moe else 0

    @property
    def n_dense_mlp_layers(self) -> int:
        return self.n_layers - self.n_moe_layers - self.n_mlp_free_layers

    @property
    def v_dim(self) -> int:
        return self.v_head_dim or self.head_dim

    @property
    def mlp_matrices(self) -> int:
        return 3 if self.gated_mlp else 2

    def attention_shape(self, *, sliding: bool = False) -> tuple[int, int, int, int]:
        """(query heads, KV heads, query/key head dim, value head dim) of the softmax layers,
        or of the sliding-window ones (their own shapes where the config gives them)."""
        if not sliding:
            return self.n_heads, self.n_kv_heads, self.head_dim, self.v_dim
        h = self.sliding_head_dim or self.head_dim
        hv = self.sliding_v_head_dim or (self.sliding_head_dim if self.sliding_head_dim else self.v_dim)
        return self.n_heads, self.sliding_n_kv_heads or self.n_kv_heads, h, hv

    @property
    def softmax_kinds(self) -> list[tuple[int, float, bool]]:
        """(layers, window in tokens (inf: none), sliding) of each kind of softmax-attention
        layer the model has: full ones, then sliding-window ones."""
        full = self.n_full_attention_layers - self.n_sliding_layers
        return [(n, w, sl) for n, w, sl in ((full, np.inf, False), (self.n_sliding_layers, self.sliding_window, True))
                if n]

    @property
    def n_full_attention_layers(self) -> int:
        """Layers with softmax attention (full or sliding-window): all but the linear ones and
        those without a token mixer."""
        return self.n_layers - self.n_linear_layers - self.n_mixer_free_layers

    @property
    def linear_qkv_width(self) -> int:
        """q, k and v columns of a Gated DeltaNet layer (the convolution's channels)."""
        return (2 * self.linear_key_heads * self.linear_key_head_dim
                + self.linear_value_heads * self.linear_value_head_dim)

    @property
    def linear_state_bytes_per_sequence(self):
        """Recurrent state one sequence keeps over all linear layers: one key x value matrix
        per value head at linear_state_bytes_per_element, plus the convolution's last taps in
        16 bits."""
        state = (self.linear_value_heads * self.linear_key_head_dim * self.linear_value_head_dim
                 * self.linear_state_bytes_per_element)
        conv = self.linear_qkv_width * max(self.linear_conv_kernel - 1, 0) * 2.0
        return self.n_linear_layers * (state + conv)

    # ---- parameters per layer (matmul weights only) -----------------------------------
    @property
    def attn_params_per_layer(self) -> float:
        """Softmax-attention weights of one such layer (the mean over its kinds)."""
        return self.softmax_attn_params / max(self.n_full_attention_layers, 1)

    @property
    def softmax_attn_params(self) -> int:
        """Softmax-attention weights over all its layers, each kind its own shape."""
        return sum(n * self.softmax_params(sliding=sl) for n, _, sl in self.softmax_kinds)

    def softmax_params(self, *, sliding: bool) -> int:
        """Weights of one softmax layer of that kind: MLA's projections, or Q, K, V (none where
        values are the keys' projection), gate and output."""
        D = self.d_model
        H, K, h, hv = self.attention_shape(sliding=sliding)
        if self.is_mla:
            r_q, r_kv, rope = self.q_lora_rank, self.kv_lora_rank, self.qk_rope_head_dim
            q = D * r_q + r_q * H * h if r_q else D * H * h
            kv_down = D * (r_kv + rope)  # compressed latent + shared rope key
            kv_up = r_kv * H * ((h - rope) + hv)  # per-head nope key and value
            gate = D * H * hv if self.attention_output_gate else 0  # Kimi-K3: mla_use_output_gate
            return q + kv_down + kv_up + gate + H * hv * D + self.indexer_params_per_layer
        gate = D * H * h if self.attention_output_gate else 0
        v = 0 if ((self.values_from_keys and not sliding) or self.key_is_value) else D * K * hv
        r_q, r_o, g = self.q_lora_rank, self.o_lora_rank, self.o_groups
        q = D * r_q + r_q * H * h if r_q else D * H * h  # DeepSeek-V4: queries through a rank-r_q latent
        out = H * hv * r_o + g * r_o * D if g else H * hv * D  # grouped low-rank output projection
        # a GQA model's indexer (MiniMax-M3) in its index_share of the layers
        index = self.indexer_params_per_layer * self.index_share if self.is_dsa else 0  # V4's: compressor_params
        return q + gate + D * K * h + v + out + index

    @property
    def index_share(self) -> float:
        """Of the softmax layers, the share that runs DeepSeek Sparse Attention's indexer."""
        return self.index_layers / max(self.n_full_attention_layers, 1) if self.index_layers else 1.0

    @property
    def selected_share(self) -> float:
        """Of the softmax layers, the share whose keys a top-k selects (DSA)."""
        return self.index_share if self.dense_unindexed_layers else 1.0

    @property
    def indexer_params_per_layer(self) -> int:
        """DeepSeek Sparse Attention's lightning indexer: its queries from the query latent
        (or the hidden state), its one key and its per-head weights from the hidden state."""
        if not self.index_topk:
            return 0
        q_in = self.q_lora_rank or self.d_model
        return (q_in * self.index_n_heads * self.index_head_dim + self.d_model * self.index_head_dim
                + self.d_model * self.index_n_heads)

    @property
    def linear_attn_params_per_layer(self) -> int:
        """A linear layer's matmul weights, by linear_kind (the projections themselves:
        workloads/ops.linear_attention_matmuls; tests/workloads/test_ops.py checks the two
        agree). Gated DeltaNet: q, k, v and the output gate z, the decay and beta gates (one
        each per value head), out_proj; Mamba-2: z, x, B, C and dt (one per head), out_proj;
        KDA: q, k, v, the forget and output gates through rank-d_k bottlenecks, beta (one per
        head), o_proj. The short convolution's taps, like norm weights, are not counted."""
        D, H, dk = self.d_model, self.linear_value_heads, self.linear_key_head_dim
        hv = H * self.linear_value_head_dim
        if self.linear_kind == "kda" and self.linear_full_rank_gate:
            return D * (self.linear_qkv_width + hv) + D * dk + dk * H * dk + D * H + hv * D
        if self.linear_kind == "kda":
            return D * self.linear_qkv_width + D * 2 * dk + dk * (H * dk + hv) + D * H + hv * D
        gates = 2 * H if self.linear_kind == "gdn" else H
        return D * (self.linear_qkv_width + hv) + D * gates + hv * D

    @property
    def compressor_params(self) -> int:
        """DeepSeek-V4's compressors over all layers: a CSA layer's pooled key-value and its
        gate, two series of head_dim each (D x 4h), and its indexer (queries from the query
        latent, two series of index keys and their gate: D x 4 index_head_dim, per-head
        weights); an HCA layer's key-value and gate (D x 2h)."""
        return self.n_csa_layers * self.compressor_params_csa + self.n_hca_layers * self.d_model * 2 * self.head_dim

    @property
    def compressor_params_csa(self) -> int:
        """One CSA layer's compressor and indexer weights (compressor_params)."""
        D, h, nh, dh = self.d_model, self.head_dim, self.index_n_heads, self.index_head_dim
        return D * 4 * h + (self.q_lora_rank or D) * nh * dh + D * 4 * dh + D * nh

    @property
    def hyper_connection_params(self) -> int:
        """Manifold-constrained hyper-connections: per layer two projections of the hc_mult
        streams (hc_mult x D) to the pre, post and mixing weights ((2 + hc_mult) x hc_mult).
        The final collapse's hc_mult x hc_mult D weights (65,536 in V4-Flash), like norm
        weights, are not counted."""
        n, D = self.hc_mult, self.d_model
        return 2 * self.n_layers * (2 + n) * n * n * D

    @property
    def attn_params(self) -> int:
        """Token-mixer parameters over all layers: softmax attention (with DeepSeek-V4's
        compressors) and linear attention."""
        return self.softmax_attn_params + self.n_linear_layers * self.linear_attn_params_per_layer \
            + self.compressor_params

    @property
    def dense_mlp_params_per_layer(self) -> int:
        return self.mlp_matrices * self.d_model * self.d_ff

    @property
    def expert_width(self) -> int:
        """Width the routed experts read and write: the latent of a latent MoE, else d_model."""
        return self.moe_latent_dim or self.d_model

    @property
    def expert_params(self) -> int:
        """Parameters of one routed expert."""
        return self.mlp_matrices * self.expert_width * self.d_ff_expert

    @property
    def shared_expert_params(self) -> int:
        """Parameters of one shared expert (at d_model, also in a latent MoE)."""
        return self.mlp_matrices * self.d_model * self.d_ff_expert

    @property
    def latent_proj_params_per_layer(self) -> int:
        """A latent MoE layer's down and up projections between d_model and the latent."""
        return 2 * self.d_model * self.moe_latent_dim

    @property
    def router_params_per_layer(self) -> int:
        return self.d_model * self.n_experts

    @property
    def embedding_params(self) -> int:
        return self.vocab_size * self.d_model * (1 if self.tied_embeddings else 2)

    @property
    def n_params(self) -> int:
        """Total parameters (all experts), embeddings included."""
        return (self.attn_params + self.n_dense_mlp_layers * self.dense_mlp_params_per_layer
                + self.n_moe_layers * self.moe_params_per_layer + self.embedding_params + self.hyper_connection_params)

    @property
    def moe_params_per_layer(self) -> int:
        """One MoE layer's weights: every routed and shared expert, the router, a latent MoE's
        projections."""
        return (self.n_experts * self.expert_params + self.n_shared_experts * self.shared_expert_params
                + self.router_params_per_layer + self.latent_proj_params_per_layer)

    @property
    def n_params_active(self) -> int:
        """Parameters touched per token (top-k routed + shared experts), embeddings included."""
        moe = (self.n_active_experts * self.expert_params + self.n_shared_experts * self.shared_expert_params
               + self.router_params_per_layer + self.latent_proj_params_per_layer)
        return (self.attn_params + self.n_dense_mlp_layers * self.dense_mlp_params_per_layer
                + self.n_moe_layers * moe + self.embedding_params + self.hyper_connection_params)

    @property
    def n_matmul_params_active(self) -> int:
        """Active parameters used in matmuls per token: excludes the embedding lookup
        (a gather, no FLOPs) but includes the lm_head projection."""
        return self.n_params_active - self.embedding_params + self.vocab_size * self.d_model

    # ---- FLOPs -----------------------------------------------------------------------
    @property
    def flops_per_token(self) -> float:
        """Forward matmul FLOPs per token, without attention scores: 2 x active matmul params."""
        return 2.0 * self.n_matmul_params_active
