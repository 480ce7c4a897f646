"""Speculative decoding, one implementation for every backend (workloads/speculative.py):
the expected tokens per step against a Monte Carlo of the acceptance process, and the
static-batch model on GPUs and wafers with a draft model, the target's MTP head or an EAGLE-3
head for it."""
import numpy as np
import pytest

from workbench import predict
from workbench.specs import load_model
from workbench.workloads.speculative import eagle_draft, expected_tokens_per_step, mtp_draft


@pytest.mark.parametrize("acceptance,k", [(0.5, 1), (0.7, 3), (0.9, 5), (0.3, 8), (1.0, 4)])
def test_expected_tokens_per_step_matches_a_monte_carlo(acceptance, k):
    """Each drafted token is accepted with probability a until the first rejection (Leviathan
    et al. 2023, i.i.d. acceptance); the step emits the accepted prefix plus the target's own
    token. 200,000 simulated steps: within 1%."""
    rng = np.random.default_rng(7)
    accepted = rng.random((200_000, k)) < acceptance
    prefix = np.where(accepted.all(axis=1), k, np.argmin(accepted, axis=1))
    assert (prefix + 1).mean() == pytest.approx(float(expected_tokens_per_step(acceptance=acceptance, draft_len=k)),
                                                rel=0.01)


GPU = dict(hardware="h100_sxm", model="llama_3_1_70b", tp=8, prompt=1024, generate=256, weights="fp8")


def test_no_draft_is_the_plain_step():
    plain = predict.inference(batch=[1, 16], **GPU)
    spec = predict.inference(batch=[1, 16], draft_model="llama_3_2_1b", draft_len=0, acceptance=0.7, **GPU)
    np.testing.assert_allclose(spec.tpot_s.values, plain.tpot_s.values, rtol=1e-12)
    np.testing.assert_allclose(spec.memory_per_device_bytes.values, plain.memory_per_device_bytes.values, rtol=1e-12)


def test_gpu_speculation_pays_at_small_batch_and_is_monotone_in_acceptance():
    """Memory-bound decode (batch 1): verifying 4 positions costs little more than one, so a
    1B draft at acceptance 0.8 cuts the time per token; more acceptance is never slower; the
    draft's weights and cache are counted."""
    plain = predict.inference(batch=1, **GPU)
    spec = predict.inference(batch=1, draft_model="llama_3_2_1b", draft_len=3, acceptance=[0.5, 0.8, 0.95], **GPU)
    t = spec.tpot_s.values
    assert np.all(np.diff(t) < 0) and t[1] < 0.7 * float(plain.tpot_s)
    assert float(spec.memory_per_device_bytes[0]) > float(plain.memory_per_device_bytes)
    assert float(spec.tokens_per_step.sel(acceptance=0.8)) == pytest.approx((1 - 0.8 ** 4) / 0.2)


def test_speculation_loses_where_decode_is_compute_bound():
    """At a large batch the verify step's 4x rows cost 4x compute: at low acceptance the
    speculative step is slower than the plain one."""
    plain = predict.inference(batch=512, **dict(GPU, model="llama_3_1_8b", tp=1))
    spec = predict.inference(batch=512, draft_model="llama_3_2_1b", draft_len=3, acceptance=0.3,
                             **dict(GPU, model="llama_3_1_8b", tp=1))
    assert float(spec.tpot_s) > float(plain.tpot_s)


def test_mtp_head_is_one_layer_of_the_target():
    """No draft model: the target's multi-token-prediction head drafts, one more layer of its
    shape with its embedding and lm_head (DeepSeek-V3's MTP module)."""
    m = load_model("deepseek_v3")
    d = mtp_draft(m)
    assert d.n_layers == 1 and d.d_model == m.d_model and d.n_experts == m.n_experts
    assert d.n_params == pytest.approx(m.embedding_params + (m.n_params - m.embedding_params) / m.n_layers, rel=0.05)
    r = predict.inference(hardware="b200", model="llama_3_1_70b", tp=8, batch=1, prompt=1024, generate=256,
                          weights="fp8", draft_len=[0, 2], acceptance=0.8)
    assert float(r.tpot_s.sel(draft_len=2)) < float(r.tpot_s.sel(draft_len=0))


def test_wafer_mtp_speculation():
    r = predict.inference(hardware="cs3", model="llama_3_1_70b", devices=6, batch=1, prompt=1024, generate=256,
                          weights="fp16", draft_len=[0, 3], acceptance=0.9)
    assert bool(r.fits.all()) and float(r.tpot_s.sel(draft_len=3)) < float(r.tpot_s.sel(draft_len=0))


def test_best_draft_len_is_reported_and_moves_with_acceptance():
    """Swept draft lengths: the one with the least time per token, longer as acceptance rises."""
    r = predict.inference(batch=1, draft_model="llama_3_2_1b", draft_len=[1, 2, 3, 4, 6, 8],
                          acceptance=[0.5, 0.9], **GPU)
    best = r.best_draft_len.values
    for i, a in enumerate(r.acceptance.values):
        assert best[i] == r.tpot_s.sel(acceptance=a).idxmin("draft_len").item()
    assert best[1] > best[0]


def test_bad_speculative_arguments_are_named():
    from workbench.errors import InputError
    with pytest.raises(InputError, match="^draft_model='nope' is not known"):
        predict.inference(hardware="cs3", model="llama_3_1_8b", draft_model="nope")
    with pytest.raises(InputError, match="acceptance=1.5 is not allowed"):
        predict.inference(hardware="h100_sxm", model="llama_3_1_8b", draft_len=2, acceptance=1.5)
    with pytest.raises(InputError, match="speculative decoding .* placement='streaming'"):
        predict.inference(hardware="cs3", model="llama_3_1_8b", placement="streaming", draft_len=2)


def test_an_eagle3_head_is_one_dense_layer_at_the_targets_width():
    """EAGLE-3 (arXiv:2503.01840) drafts with one decoder layer; NVIDIA's heads for MoE
    targets are dense Llama-style layers (nvidia/Llama-4-Maverick-17B-128E-Eagle3: 'Llama3-
    based Eagle3 head (single transformer layer)', vocabulary 202,048 as the target's)."""
    target = load_model("llama_4_maverick_17b_128e")
    head = eagle_draft(target)
    assert head.n_layers == 1 and not head.is_moe and head.vocab_size == 202048
    assert (head.d_model, head.n_heads, head.n_kv_heads, head.head_dim, head.d_ff) == (5120, 40, 8, 128, 16384)
    layer = 5120 * (40 + 2 * 8) * 128 + 40 * 128 * 5120 + 3 * 5120 * 16384  # QKV, output, gated MLP
    assert head.n_params == pytest.approx(layer + 2 * 202048 * 5120, rel=0.01)  # + embedding and LM head


@pytest.mark.parametrize("hardware,extra", [("h200_sxm", dict(tp=2, weights="fp8")),
                                            ("cs3", dict(devices="min", weights="fp16", kv="fp16"))])
def test_an_eagle3_head_speeds_up_a_moe_target_on_gpus_and_wafers(hardware, extra):
    kw = dict(hardware=hardware, model="gpt_oss_120b", batch=1, prompt=1000, generate=500, **extra)
    plain = predict.inference(**kw)
    spec = predict.inference(draft_model="eagle", draft_len=4, acceptance=0.8, **kw)
    assert bool(spec.fits) and float(spec.tokens_per_step) == pytest.approx(3.3616)
    assert float(spec.output_tokens_per_s_per_user) > 1.5 * float(plain.output_tokens_per_s_per_user)


def test_serving_takes_an_eagle3_head():
    kw = dict(hardware="h200_sxm", model="openai/gpt-oss-120b", tp=2, concurrency=8, prompt=1000, generate=500,
              weights="fp8", framework="trtllm")
    assert float(predict.serving(draft_model="eagle", draft_len=3, acceptance=0.7, **kw).tpot_s) < \
        float(predict.serving(**kw).tpot_s)


def test_deepseek_v4_mtp_layer_is_its_sliding_window_alone():
    """DeepSeek-V4-Pro's config.json lists 62 compress ratios for 61 layers, the MTP layer's 0:
    its draft is one layer of the target's shape attending over the 128-token window only,
    neither compressed nor indexed; DeepSeek-V3's stays one full MLA layer."""
    from workbench.workloads.speculative import mtp_draft
    v4 = mtp_draft(load_model("deepseek_v4_pro"))
    assert (v4.n_layers, v4.n_sliding_layers, v4.n_csa_layers, v4.n_hca_layers, v4.index_topk) == (1, 1, 0, 0, 0)
    assert not v4.is_compressed and not v4.is_dsa and v4.sliding_window == 128
    v3 = mtp_draft(load_model("deepseek_v3"))
    assert (v3.n_layers, v3.n_sliding_layers, v3.is_mla, v3.is_moe) == (1, 0, True, True)
    r = predict.serving(hardware="b200", model="deepseek_v4_pro", tp=8, concurrency=8, prompt=8192,
                        generate=1024, weights="fp4", framework="vllm", draft_len=3, acceptance=0.69)
    assert bool(r.fits) and float(r.tokens_per_step) == pytest.approx(1 + 0.69 + 0.69 ** 2 + 0.69 ** 3)


def test_every_catalog_model_has_a_valid_mtp_head():
    """draft_len > 0 without a draft model drafts with the target's MTP head: one layer of its
    shape, which must be a valid spec for every catalog model. MiniMax-M3's 57 indexed layers
    and Nemotron-H's 10 MLP-free blocks were copied into the one-layer head and refused
    ("index_layers=57 is not allowed"); the head now keeps one indexed layer (a sparse target's
    layer keeps its indexer) and a mixer with an MLP."""
    from workbench.specs import list_models
    for name in list_models():
        m = load_model(name)
        d = mtp_draft(m)
        assert d.n_layers == 1 and d.n_mlp_free_layers == 0 and d.n_mixer_free_layers == 0, name
        assert d.index_layers <= 1 and (d.is_dsa == m.is_dsa or m.is_compressed), name  # V4: window alone
    m3 = mtp_draft(load_model("minimax_m3"))
    assert (m3.index_layers, m3.index_topk) == (1, load_model("minimax_m3").index_topk)
    r = predict.serving(hardware="b200", model="nemotron_h_56b_base_8k", tp=8, concurrency=16, prompt=1024,
                        generate=256, weights="fp8", draft_len=[0, 2], acceptance=0.7)
    assert bool(r.fits.all()) and float(r.tokens_per_step.sel(draft_len=2)) == pytest.approx(1 + 0.7 + 0.49)


def test_a_non_drafting_point_of_a_gpu_serving_sweep_holds_no_draft():
    """draft_len=0 in a sweep is the deployment without the draft: its KV room is the plain
    call's (before, the draft's weights took room at every point of a sweep that named one:
    Llama 3.1 70B on 4 H100 ran at most 372 requests at draft_len=0, 415 without a draft)."""
    kw = dict(hardware="h100_sxm", model="llama_3_1_70b", tp=4, concurrency=8, prompt=1024, generate=256)
    swept = predict.serving(draft_model="llama_3_2_1b", draft_len=[0, 2], acceptance=0.8, **kw)
    plain = predict.serving(**kw)
    assert float(swept.running_limit.sel(draft_len=0)) == float(plain.running_limit)
    assert float(swept.running_limit.sel(draft_len=2)) < float(plain.running_limit)
    assert float(swept.tpot_s.sel(draft_len=0)) == pytest.approx(float(plain.tpot_s))


@pytest.mark.parametrize("draft_model", ["llama_3_2_1b", "eagle"])
def test_batch_max_counts_the_draft_beside_the_target(draft_model):
    """batch="max" with speculative decoding is the largest batch whose target and draft
    weights and caches fit together: that batch fits and one more does not (it returned the
    target's own maximum, 355 on 8 H100 at 8k + 1k tokens, which the draft then overfilled;
    322 with the 1B draft). A point of the sweep that does not draft keeps the target's."""
    kw = dict(hardware="h100_sxm", model="llama_3_1_70b", tp=8, prompt=8192, generate=1024, weights="fp8", kv="fp8",
              draft_model=draft_model, acceptance=0.8)
    ds = predict.inference(batch="max", draft_len=[0, 3], **kw)
    assert bool(ds.fits.all())
    for k in (0, 3):
        b = int(ds.batch.sel(draft_len=k))
        edge = predict.inference(batch=[b, b + 1], draft_len=k, **kw)
        assert list(edge.fits.values) == [True, False], (k, b)
    assert int(ds.batch.sel(draft_len=3)) < int(ds.batch.sel(draft_len=0))


def test_a_draft_model_prefills_the_prompt_before_the_first_token():
    """Static speculative decoding: the draft builds its cache from the prompt in the prefill
    step, so TTFT is the target's prefill plus the draft's (Llama-3.1-8B with a Llama-3.2-1B
    draft over a 32k prompt on H100: +0.25 s; it had been the target's alone), and
    draft_len = 0 drafts nothing."""
    from workbench import predict
    kw = dict(hardware="h100_sxm", weights="bf16", kv="bf16", batch=1, prompt=32768, generate=256)
    spec = predict.inference(model="llama_3_1_8b", draft_model="llama_3_2_1b", draft_len=[0, 4], acceptance=0.7, **kw)
    target = float(predict.inference(model="llama_3_1_8b", **kw).ttft_s)
    draft = float(predict.inference(model="llama_3_2_1b", **kw).ttft_s)
    assert float(spec.ttft_s.sel(draft_len=0)) == pytest.approx(target, rel=1e-12)
    assert float(spec.ttft_s.sel(draft_len=4)) == pytest.approx(target + draft, rel=1e-9)


def test_a_draft_of_another_tokenizer_cannot_draft():
    """A draft proposes the target's tokens: Qwen3-0.6B (151,936 tokens) for Llama-3.1-8B
    (128,256) is flagged where it drafts, in the static and the serving model; a draft of the
    same tokenizer (Llama-3.2-1B) and draft_len = 0 are not."""
    from workbench import predict
    kw = dict(hardware="h200_sxm", model="llama_3_1_8b", weights="fp8", acceptance=0.5)
    static = predict.inference(batch=1, draft_len=[0, 2], draft_model="qwen3_0_6b", **kw)
    assert bool(static.fits.sel(draft_len=0)) and not bool(static.fits.sel(draft_len=2))
    assert "draft_model=qwen3_0_6b has a 151,936-token vocabulary" in str(static.reason.sel(draft_len=2).values)
    served = predict.serving(concurrency=8, draft_len=2, draft_model="qwen3_0_6b", **kw)
    assert not bool(served.fits) and "vocabulary" in str(served.reason.values)
    assert bool(predict.inference(batch=1, draft_len=2, draft_model="llama_3_2_1b", **kw).fits)


def test_every_speculating_path_checks_the_draft_s_vocabulary():
    """The disaggregated pools and the CS systems (static and serving) flag a draft of another
    tokenizer as the GPU paths do; a vocabulary padded apart by a few hundred entries
    (Qwen2.5's 152,064 and 151,936) is the same tokenizer."""
    from workbench import predict
    from workbench.specs import load_model
    from workbench.workloads.speculative import draft_problems
    kw = dict(model="llama_3_1_8b", draft_model="qwen3_0_6b", draft_len=2, acceptance=0.5)
    for ds in (predict.disaggregated(prefill_hardware="h200_sxm", decode_hardware="h200_sxm", concurrency=8, **kw),
               predict.inference(hardware="cs3", batch=1, **kw), predict.serving(hardware="cs3", concurrency=4, **kw)):
        assert not bool(ds.fits) and "vocabulary" in str(ds.reason.values)
    big = load_model("qwen3_32b")
    padded = load_model(dict(name="padded_draft", n_layers=2, d_model=1024, n_heads=8, n_kv_heads=8, head_dim=128,
                             d_ff=3072, vocab_size=big.vocab_size - 128, gated_mlp=True))
    assert draft_problems(big, padded, 2.0) == []
