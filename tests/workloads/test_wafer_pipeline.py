"""Prefill pipelined over layer regions (workloads/wafer_pipeline.py): the closed-form
makespan against a simulation of the same flow shop, chunk by chunk, and the bounds the
issue sets (below the whole-prompt-per-layer sum, above the compute bound)."""
import numpy as np
import pytest

from workbench import predict
from workbench.backends import as_numbers
from workbench.specs import load_model
from workbench.workloads.wafer_pipeline import chunk_layer_s, crossing_s, pipelined_prefill


def simulate_flow_shop(stage_s: np.ndarray) -> float:
    """Makespan of chunks (rows) through stages (columns) in order, each stage one chunk
    at a time: C[i, k] = max(C[i-1, k], C[i, k-1]) + p[i, k]."""
    n, m = stage_s.shape
    done = np.zeros(m)
    for i in range(n):
        t = 0.0
        for k in range(m):
            t = max(done[k], t) + stage_s[i, k]
            done[k] = t
    return float(done[-1])


def stages(w, model, *, P, batch, prompt, chunk, devices):
    """Stage times per chunk: every layer (attending to the keys so far) and a crossing
    between each pair of systems, the layers split evenly over the systems."""
    n = int(np.ceil(prompt / chunk))
    ctx = np.minimum(np.arange(1, n + 1) * chunk, prompt)
    layer = np.asarray(chunk_layer_s(w, model, P=P, batch=batch, chunk=chunk, context=ctx))
    x = float(crossing_s(w, rows=batch * chunk, d_model=model.d_model))
    per_system = np.array_split(np.arange(model.n_layers), devices)
    cols = []
    for s, block in enumerate(per_system):
        cols += [layer] * len(block)
        if s < devices - 1:
            cols.append(np.full(n, x))
    return np.column_stack(cols)


@pytest.mark.parametrize("model,hardware,P,devices,batch,prompt", [
    ("llama_3_1_8b", "cs3", 161.0, 1, 1, 2048),
    ("llama_3_1_70b", "cs3", 205.0, 4, 1, 1024),
    ("llama_3_1_70b", "cs3", 205.0, 4, 4, 4096),
    ("qwen3_32b", "cs2", 150.0, 3, 2, 3000),
])
def test_closed_form_matches_flow_shop_simulation(model, hardware, P, devices, batch, prompt):
    """The makespan formula (n-1) max(p_mean, x) + L p_last + (D-1) x against the chunk
    by chunk simulation at the chunk size the model chose: within 5%."""
    w, m = as_numbers(hardware), load_model(model)
    out = pipelined_prefill(w, m, P=P, batch=batch, prompt=prompt, devices=devices)
    chunk = float(out["chunk_tokens"])
    sim = simulate_flow_shop(stages(w, m, P=P, batch=batch, prompt=prompt, chunk=chunk, devices=devices))
    assert float(out["ttft_s"]) == pytest.approx(sim, rel=0.05)


def test_every_chunk_size_matches_simulation():
    """Not only at the chosen chunk: at 1, 64 and 1024 tokens per chunk too (5%)."""
    w, m = as_numbers("cs3"), load_model("llama_3_1_8b")
    for chunk in (1.0, 64.0, 1024.0):
        p_mean = chunk_layer_s(w, m, P=161.0, batch=1.0, chunk=chunk, context=(2048 + chunk) / 2)
        p_last = chunk_layer_s(w, m, P=161.0, batch=1.0, chunk=chunk, context=2048.0)
        n = np.ceil(2048 / chunk)
        formula = (n - 1) * p_mean + m.n_layers * p_last
        sim = simulate_flow_shop(stages(w, m, P=161.0, batch=1, prompt=2048, chunk=chunk, devices=1))
        assert float(formula) == pytest.approx(sim, rel=0.05)


def test_pipelined_ttft_between_compute_bound_and_whole_prompt_sum():
    """Issue 17: the TTFT of a pipelined multi-system prefill is below the whole-prompt-
    per-layer sum and above its compute bound, at every point of a sweep."""
    r = predict.inference(hardware="cs3", model="llama_3_1_70b", devices=[4, 6, 8], batch=[1, 2, 4],
                          prompt=[128, 1024, 8192], generate=128, weights="fp16", kv="fp16")
    # the points that do not fit (8,192-token prompts of 2 and 4 sequences on 4 systems) have no time
    assert bool(r.ttft_s.isnull().equals(~r.fits)) and int((~r.fits).sum()) == 2
    fit = r.where(r.fits)
    pre = fit.ttft_s  # includes the lm_head's last-token GEMV, as does the unpipelined time
    assert bool((pre <= fit.prefill_unpipelined_s).where(r.fits, True).all())
    assert bool((pre >= fit.prefill_compute_bound_s).where(r.fits, True).all())
    # and pipelining matters: at 2,048 tokens and more it is at least 10x below the sum
    long = fit.sel(prompt=8192)
    assert bool((long.ttft_s * 10 <= long.prefill_unpipelined_s).where(r.fits.sel(prompt=8192), True).all())


def test_ttft_grows_with_prompt_and_batch():
    r = predict.inference(hardware="cs3", model="llama_3_1_8b", devices=1, batch=[1, 2, 4],
                          prompt=[64, 256, 1024, 4096], generate=64, pe_grid=150)
    ttft = r.ttft_s.transpose("batch", "prompt").values
    assert np.all(np.diff(ttft, axis=1) > 0) and np.all(np.diff(ttft, axis=0) > 0)


def test_one_chunk_is_the_unpipelined_pass():
    """With the whole prompt as one chunk and one system the pipeline has nothing to
    overlap: the makespan is L times the layer's pass (the GEMM kernel or the GEMV form,
    whichever is faster, so at most the unpipelined time)."""
    w, m = as_numbers("cs3"), load_model("llama_3_1_8b")
    one = m.n_layers * chunk_layer_s(w, m, P=161.0, batch=1.0, chunk=512.0, context=512.0)
    out = pipelined_prefill(w, m, P=161.0, batch=1.0, prompt=512.0, devices=1)
    assert float(out["ttft_s"]) <= float(one) <= float(out["unpipelined_s"]) * (1 + 1e-12)


def simulate_units(unit_s: np.ndarray, n_layers: int) -> float:
    """Makespan of units through n_layers identical stages (one system): unit_s[i] is unit
    i's time in every stage."""
    return simulate_flow_shop(np.repeat(unit_s[:, None], n_layers, axis=1))


@pytest.mark.parametrize("batch,max_rows", [(8.0, 4.0), (8.0, 3.0), (5.0, 8.0), (3.0, 1.0)])
def test_chunks_hold_only_the_rows_that_fit(batch, max_rows):
    """With room for `max_rows` activation rows a PE, a chunk of c tokens takes the batch in
    the fewest equal groups of sequences that fit (s x c <= max_rows) or one sequence at a
    time, every group's chunks in turn through the pipeline: the closed form against the
    flow shop of those units (5%), and at no chunk size more rows than fit."""
    w, m = as_numbers("cs3"), load_model("llama_3_1_8b")
    prompt = 64.0
    out = pipelined_prefill(w, m, P=161.0, batch=batch, prompt=prompt, devices=1, max_rows=max_rows)
    c, s = float(out["chunk_tokens"]), float(out["chunk_sequences"])
    assert float(out["rows_per_pe"]) <= max_rows and s * c == float(out["rows_per_pe"])
    groups = np.ceil(batch / s)
    n = int(np.ceil(prompt / c))
    ctx = np.minimum(np.arange(1, n + 1) * c, prompt)
    per_group = np.asarray(chunk_layer_s(w, m, P=161.0, batch=s, chunk=c, context=ctx, gemm=False))
    sim = simulate_units(np.tile(per_group, int(groups)), m.n_layers)
    assert float(out["ttft_s"]) == pytest.approx(sim, rel=0.05)
    free = pipelined_prefill(w, m, P=161.0, batch=batch, prompt=prompt, devices=1)
    assert float(free["chunk_sequences"]) in (1.0, batch)


def test_no_room_for_one_row_leaves_no_time():
    w, m = as_numbers("cs3"), load_model("llama_3_1_8b")
    out = pipelined_prefill(w, m, P=161.0, batch=np.array([1.0, 1.0]), prompt=512.0, devices=1,
                            max_rows=np.array([0.0, 1.0]))
    assert np.isnan(out["ttft_s"][0]) and np.isfinite(out["ttft_s"][1])
    assert out["chunk_tokens"][1] == 1.0 and out["rows_per_pe"][1] == 1.0
