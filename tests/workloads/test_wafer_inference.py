"""Decode pipelined through the layer regions (workloads/wafer_inference.decode_step): the
closed form against a simulation of micro-batches circulating through the stages, and
what it implies for batch, memory and throughput."""
import numpy as np
import pytest

from workbench import predict
from workbench.backends import as_numbers
from workbench.specs import load_model
from workbench.primitives.mesh import mesh_gemv
from workbench.workloads.wafer_inference import decode_step, micro_batch_rows
from workbench.workloads.wafer_layers import decode_layer
from workbench.workloads.wafer_pipeline import crossing_s


def simulate_ring(stage_s: np.ndarray, micro_batches: int, tokens: int = 40) -> float:
    """Seconds per token per micro-batch in steady state: each micro-batch runs every stage
    in order, then its next token starts at the first stage; a stage serves one micro-batch
    at a time, first come first served."""
    free = np.zeros(len(stage_s))
    ready = np.zeros(micro_batches)
    first = last = 0.0
    for t in range(tokens):
        for i in range(micro_batches):
            for j, s in enumerate(stage_s):
                start = max(free[j], ready[i])
                ready[i] = free[j] = start + s
        if t == 4:
            first = ready[-1]
        last = ready[-1]
    return (last - first) / (tokens - 5)


@pytest.mark.parametrize("model,devices,batch,P", [("llama_3_1_8b", 1, 1, 161.0), ("llama_3_1_8b", 1, 32, 161.0),
                                                   ("llama_3_1_8b", 1, 100, 161.0), ("llama_3_1_70b", 4, 80, 205.0),
                                                   ("llama_3_1_70b", 4, 200, 205.0), ("qwen3_32b", 3, 7, 200.0)])
def test_pipelined_decode_matches_a_simulated_ring(model, devices, batch, P):
    """max(traversal, micro-batches x busiest stage) is the steady state of the ring: 1%."""
    w, m = as_numbers("cs3"), load_model(model)
    step = decode_step(w, m, P=P, batch=float(batch), context=2048.0, devices=float(devices))
    # the stages, as decode_step builds them: L layers, the lm_head, the crossings
    rows = float(micro_batch_rows(m, batch))
    t_layer = float(decode_layer(w, m, P=P, batch=rows, context=2048.0)["cycles"]) / w.clock_hz
    t_head = float(mesh_gemv(w, P=P, k=m.d_model, n=m.vocab_size, rows=rows)["cycles"]) / w.clock_hz
    x = float(crossing_s(w, rows=rows, d_model=m.d_model))
    per_system = np.array_split(np.arange(m.n_layers), devices)
    stages = []
    for s, block in enumerate(per_system):
        stages += [t_layer] * len(block) + ([x] if s < devices - 1 else [])
    stages.append(t_head)
    sim = simulate_ring(np.array(stages), int(step["micro_batches"]))
    assert float(step["step_s"]) == pytest.approx(sim, rel=0.01)


def test_up_to_one_micro_batch_per_layer_decodes_at_the_batch_1_speed():
    """Llama 3.1 8B on one CS-3 (32 layers), grid fixed: TPOT flat from batch 1 to 32,
    throughput proportional to the batch; beyond 32 each micro-batch carries more rows."""
    r = predict.inference(hardware="cs3", model="llama_3_1_8b", devices=1, pe_grid=161, batch=[1, 2, 8, 32, 64],
                          prompt=512, generate=128, weights="fp16", kv="fp16")
    tpot = r.tpot_s.values
    assert np.allclose(tpot[:4], tpot[0], rtol=1e-12) and tpot[4] > tpot[3]
    decode_rate = r.batch.values / tpot  # tokens/s of the decode phase
    assert decode_rate[3] / decode_rate[0] == pytest.approx(32.0, rel=1e-9)
    assert np.all(np.diff(r.output_tokens_per_s.values) > 0)  # prefill included
    assert list(r.decode_micro_batches.values) == [1, 2, 8, 32, 32]


def test_activation_buffers_are_per_micro_batch_so_the_kv_cache_sets_the_batch():
    """Every sequence's KV cache is in every region, its activations only where it is being
    computed: the largest batch is about the SRAM the weights leave over the KV per
    sequence (within the grid's tiling and the reserve)."""
    m = load_model("llama_3_1_8b")
    r = predict.inference(hardware="cs3", model=m.name, devices=1, batch="max", prompt=1024, generate=256,
                          weights="fp16", kv="fp16")
    w = as_numbers("cs3")
    kv_per_seq = m.kv_elements_per_token_per_layer * m.n_layers * 2.0 * (1024 + 256)
    sram_left = w.program_pes * (w.sram_per_pe_bytes - w.sram_reserved_per_pe_bytes) - m.n_params * 2.0
    assert 0.5 * sram_left / kv_per_seq <= float(r.batch) <= sram_left / kv_per_seq


def simulate_verify_ring(stage_s: np.ndarray, micro_batches: int, units: int, tokens: int = 30) -> float:
    """Seconds per step per micro-batch in steady state when each step of a micro-batch is
    `units` positions checked as a wavefront: position j enters a stage once position j-1
    has left it (its keys and values of that layer exist) and once the stage is free; the
    micro-batch's next step starts after its last position leaves the last stage."""
    free = np.zeros(len(stage_s))
    ready = np.zeros(micro_batches)
    first = last = 0.0
    for t in range(tokens):
        for i in range(micro_batches):
            prev = np.full(len(stage_s), ready[i])  # position j-1's exit time of every stage
            for _ in range(units):
                entry = ready[i]
                for j, s in enumerate(stage_s):
                    start = max(free[j], entry, prev[j])
                    entry = free[j] = prev[j] = start + s
            ready[i] = entry
        if t == 4:
            first = ready[-1]
        last = ready[-1]
    return (last - first) / (tokens - 5)


@pytest.mark.parametrize("model,devices,batch,P,units", [("llama_3_1_70b", 4, 1, 205.0, 4),
                                                         ("llama_3_1_70b", 4, 1, 205.0, 8),
                                                         ("llama_3_1_8b", 1, 4, 161.0, 4),
                                                         ("llama_3_1_8b", 1, 64, 161.0, 4)])
def test_verify_wavefront_matches_a_simulated_pipeline(model, devices, batch, P, units):
    """A verify step of u positions per sequence as a wavefront through the layer regions:
    max(traversal + (u - 1) x busiest stage, micro-batches x u x busiest stage), against the
    simulated pipeline (1%); decode_step takes it where it beats u rows together, so at batch
    1 checking u positions costs little more than one token (70B on 4 CS-3: under 1.1x for
    u = 4), and with the ring full (batch 64) about as much as u tokens."""
    w, m = as_numbers("cs3"), load_model(model)
    rows = float(micro_batch_rows(m, batch))
    t_layer = float(decode_layer(w, m, P=P, batch=rows, context=2048.0)["cycles"]) / w.clock_hz
    t_head = float(mesh_gemv(w, P=P, k=m.d_model, n=m.vocab_size, rows=rows)["cycles"]) / w.clock_hz
    x = float(crossing_s(w, rows=rows, d_model=m.d_model))
    stages = []
    for s, block in enumerate(np.array_split(np.arange(m.n_layers), devices)):
        stages += [t_layer] * len(block) + ([x] if s < devices - 1 else [])
    stages.append(t_head)
    one = decode_step(w, m, P=P, batch=float(batch), context=2048.0, devices=float(devices))
    sim = simulate_verify_ring(np.array(stages), int(one["micro_batches"]), units)
    step = decode_step(w, m, P=P, batch=float(batch), context=2048.0, devices=float(devices),
                       rows_per_sequence=float(units))
    assert float(step["step_s"]) <= sim * 1.01
    if batch == 1:
        assert float(step["step_s"]) == pytest.approx(sim, rel=0.01)
        limit = {4: 1.1, 8: 1.32}[units]  # x one token's step
        assert float(step["step_s"]) < limit * float(one["step_s"])
    if batch == 64:  # the ring is full: u positions cost about u tokens (rows together save a little)
        assert 0.9 * units * float(one["step_s"]) <= float(step["step_s"]) <= units * float(one["step_s"])
