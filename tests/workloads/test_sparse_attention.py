"""DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5): a lightning indexer scores every cached
token with index_n_heads x index_head_dim dot products and each query attends only to the
index_topk best (DeepSeek-V3.2 technical report, 2025, section 2). Closed forms for the
FLOPs and bytes, linear growth in context at fixed top-k, the parameter and cache counts."""
import numpy as np
import pytest

from workbench import predict
from workbench.backends import numbers
from workbench.specs import load_model
from workbench.workloads import layers, ops
from workbench.workloads.wafer_layers import decode_layer

V32, V3 = load_model("deepseek_v3_2"), load_model("deepseek_v3")
H100 = numbers("h100_sxm")


def test_config_fields_and_counts():
    """config.json: index_topk 2048, index_n_heads 64, index_head_dim 128; the indexer adds
    its query (from the 1,536-wide query latent), key and head weights to every layer, and its
    128-element key to the cache beside the 576-element latent."""
    assert (V32.index_topk, V32.index_n_heads, V32.index_head_dim) == (2048, 64, 128)
    per_layer = 1536 * 64 * 128 + 7168 * 128 + 7168 * 64
    assert V32.indexer_params_per_layer == per_layer
    assert V32.n_params - V3.n_params == V32.n_layers * per_layer
    assert V32.kv_elements_per_token_per_layer == 512 + 64 + 128


def test_decode_cost_is_linear_in_context_at_fixed_top_k():
    """Beyond top-k the attention reads k entries whatever the context, and the indexer
    scores every key: decode FLOPs are affine in the context with slope 2 b H_idx d_idx."""
    kw = dict(batch=4.0, tp=8, math="bf16", kv_bytes=1.0)
    ctx = np.array([4096.0, 8192.0, 16384.0, 32768.0])
    flops = np.asarray(layers.decode_attention(H100, V32, context=ctx, **kw)["flops"], float)
    slope = np.diff(flops) / np.diff(ctx)
    assert slope == pytest.approx(np.full(3, 2 * 4 * 64 * 128), rel=1e-9)
    # dense MLA on one rank, absorbed as serving kernels run it (DeepSeek-V2, arXiv 2405.04434,
    # sec. 2.1.2: all 128 heads score the 512 + 64 latent-plus-rope and sum 512-wide latents,
    # 2 x 1,088 FLOPs per head and key) grows 17x faster; under TP8 its heads split while the
    # indexer is replicated
    dense = np.asarray(layers.decode_attention(H100, V3, context=ctx, **dict(kw, tp=1))["flops"], float)
    assert np.diff(dense) / np.diff(ctx) == pytest.approx(np.full(3, 2 * 4 * 128 * (512 + 64 + 512)), rel=1e-9)
    assert np.diff(dense) / np.diff(ctx) == pytest.approx(17 * slope, rel=1e-9)


def test_below_top_k_it_is_dense_attention_plus_the_indexer():
    kw = dict(batch=2.0, tp=8, math="bf16", kv_bytes=1.0, context=1024.0)
    sparse = layers.decode_attention(H100, V32, **kw)
    dense = layers.decode_attention(H100, V3, **kw)
    indexer = 2 * 2 * 1024 * 64 * 128
    assert float(sparse["flops"]) == pytest.approx(float(dense["flops"]) + indexer, rel=1e-9)


def test_prefill_keeps_the_top_k_share_of_the_causal_pairs():
    """sum_i min(i, k) over sum_i i: 1 up to k tokens, then falling as about 2k / T."""
    share = layers._sparse_share(np.array([1024.0, 2048.0, 8192.0, 131072.0]), 2048)
    assert share[:2] == pytest.approx([1.0, 1.0])
    T, k = 131072.0, 2048.0
    assert share[3] == pytest.approx((k * (k + 1) / 2 + (T - k) * k) / (T * (T + 1) / 2))
    assert share[3] < 2.1 * k / T


def test_long_prompts_cost_less_with_attention_data_parallel():
    """Attention DP (each GPU its own requests, all heads): at 64k tokens DSA's prefill is at
    least 1.5x faster than dense MLA on the same layers; under attention TP the indexer does
    not shard (replicated, as MLA's latent is) and eats most of that gain."""
    kw = dict(hardware="b200", tp=1, attention_dp=8, ep=8, concurrency=8, prompt=65536, generate=256, weights="fp8")
    sparse = predict.serving(model="deepseek_v3_2", **kw)
    dense = predict.serving(model="deepseek_v3", **kw)
    assert float(dense.ttft_s) > 1.5 * float(sparse.ttft_s)


def test_wafer_decode_counts_the_indexer_and_top_k():
    w = numbers("wse3")
    out = decode_layer(w, V32, P=300.0, batch=1.0, context=32768.0)
    base = decode_layer(w, V3, P=300.0, batch=1.0, context=2048.0)  # dense MLA at k keys
    indexer = 2 * 32768 * 64 * 128
    extra = sum(2 * mm.k * mm.n for mm in ops.indexer_matmuls(V32))
    assert float(out["flops"]) == pytest.approx(float(base["flops"]) + indexer + extra, rel=1e-9)


def test_minimax_m3_block_measured_with_its_dense_layers_composed():
    # MiniMax-M3 (layers.msa_block): its 57 sparse layers from vLLM's MSA
    # tables on B200, its 3 layers that attend every key composed; SGLang's MSA tables time bf16 GEMMs only
    from workbench.backends import numbers
    from workbench.primitives.msa import fitted_msa, msa_dims
    from workbench.workloads.layers import attention_block
    from workbench.specs import load_model
    m3 = load_model("minimax_m3")
    shape = dict(phase="decode", batch=16, new=1.0, tp=8, math="fp8_block", w_bytes=1.0, kv_bytes=1.0)
    vllm = numbers("b200", framework="vllm")
    assert attention_block(numbers("b200", framework="sglang"), m3, prefix=8192.0, **shape) is None
    t = {c: float(attention_block(vllm, m3, prefix=c, **shape)["time_s"]) for c in (8192.0, 131072.0)}
    sparse = {c: float(fitted_msa(hw=vllm, prefix=c, heads=8.0, dims=msa_dims(m3),
                                  **{k: v for k, v in shape.items() if k != "tp"})["time_s"]) for c in t}
    # the dense layers read all 131k keys: the layer mean grows more than the sparse block's
    assert t[131072.0] / t[8192.0] > sparse[131072.0] / sparse[8192.0]
