"""Weight-streaming training on CS systems (workloads/wafer_training.py) as Cerebras
describes it: Cerebras' activation checkpointing by default, the micro-batch that fills
the wafer, weights streamed from MemoryX under the compute, the optimizer in MemoryX under
the backward pass, and a per-step fixed cost fitted on the CS-2 GPT-3 590M pair
(C181/C182). The CS-2 rows are checked at the end, each with its tolerance and source."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from workbench import predict
from workbench.calibrate.measurements import wse_row
from workbench.specs import load_hardware
from workbench.specs._base import read_yaml
from workbench.workloads.wafer_training import CEREBRAS_RECOMPUTE

POINTS = Path(predict.__file__).parent / "calibrate" / "data" / "reference_points.yaml"
GPT2_SMALL = dict(name="gpt2_small", n_layers=12, d_model=768, n_heads=12, n_kv_heads=12, head_dim=64, d_ff=3072,
                  vocab_size=50257, gated_mlp=False, tied_embeddings=True)
GPT3_590M = dict(name="gpt3_590m", n_layers=18, d_model=1536, n_heads=12, n_kv_heads=12, head_dim=128, d_ff=6144,
                 vocab_size=50257, gated_mlp=False, tied_embeddings=True)
PARTS = ("forward_s", "backward_s", "recompute_s", "weight_streaming_exposed_s", "optimizer_s", "step_fixed_s",
         "layer_stream_latency_s", "pipeline_bubble_s", "dp_comm_exposed_s")


def _config(row_id: str) -> dict:
    """The prediction's configuration of a CS-2 row, as model_vs_silicon runs it."""
    point = next(p for p in read_yaml(POINTS)["points"] if p["id"] == row_id)
    return dict(point["config"])


def test_the_step_is_the_sum_of_its_parts():
    """Conservation: forward + backward + recompute + the streaming not hidden under them +
    the optimizer not hidden under the backward + the fixed part = the step, also where the
    streaming and the optimizer are exposed (a MemoryX 100x slower than assumed)."""
    slow = {"weight_store_bandwidth_bytes_per_s": [150e9, 1.5e9]}
    ds = predict.training(hardware="cs2", model=GPT3_590M, seq_len=2048, global_batch=[1, 8, 128, 600],
                          recompute=["none", "full"], hardware_overrides=slow)
    total = sum(ds[k] for k in PARTS)
    np.testing.assert_allclose(total.values, ds.step_time_s.values, rtol=1e-12)
    starved = ds.sel(weight_store_bandwidth_bytes_per_s=1.5e9)
    assert (starved.weight_streaming_exposed_s > 0).all() and (starved.optimizer_s > 0).any()
    assert (starved.bound == "weight_streaming_io").all()
    assert (ds.sel(weight_store_bandwidth_bytes_per_s=150e9).bound == "compute").all()


def test_recompute_defaults_to_cerebras_checkpointing_on_wafers_only():
    """recompute=None is each hardware's default: Cerebras' block checkpoints ("full") on
    CS systems, "none" on GPUs, as a coordinate, or a variable when they differ."""
    assert CEREBRAS_RECOMPUTE == "full"
    wafer = predict.training(hardware="cs2", model=GPT2_SMALL, seq_len=2048, global_batch=112)
    assert wafer.recompute.item() == "full" and float(wafer.recompute_s) > 0
    explicit = predict.training(hardware="cs2", model=GPT2_SMALL, seq_len=2048, global_batch=112, recompute="full")
    assert float(explicit.step_time_s) == float(wafer.step_time_s)
    gpu = predict.training(hardware="h100_sxm", model="llama_3_8b", dp=8, seq_len=4096, global_batch=64)
    assert gpu.recompute.item() == "none" and float(gpu.recompute_s) == 0.0
    both = predict.training(hardware=["h100_sxm", "cs3"], model="llama_3_8b", dp=None, seq_len=4096,
                            global_batch=64)
    assert list(both.recompute.values) == ["none", "full"]


def test_checkpointing_trades_memory_for_recompute():
    """Block checkpoints keep 2·D bytes per token and layer (plus the recomputed block's
    intermediates) instead of every intermediate: less SRAM per sequence, so a larger
    micro-batch, at the price of one more forward of every layer."""
    kw = dict(hardware="cs2", model=GPT3_590M, seq_len=2048)
    one = {rc: predict.training(global_batch=8, recompute=rc, **kw) for rc in ("none", "full")}
    assert float(one["full"].activations_per_device_bytes) < float(one["none"].activations_per_device_bytes) / 3
    assert float(one["none"].recompute_s) == 0.0 < float(one["full"].recompute_s)
    assert float(one["full"].forward_s) == pytest.approx(float(one["none"].forward_s))
    big = {rc: predict.training(global_batch=128, recompute=rc, **kw) for rc in ("none", "full")}
    assert float(big["none"].n_micro_batches) == 8 and float(big["full"].n_micro_batches) == 1
    assert float(big["full"].micro_batch) > float(big["none"].micro_batch)


def test_the_micro_batch_fills_the_wafer():
    """modelzoo micro_batch_size "auto" as modelled: the fewest micro-batches whose
    checkpoints fit, a whole number of sequences each (1000 in 3: 334, 333, 333; the
    largest reported); the weights stream in once per micro-batch. The R2.3.0 log of C191
    compiled the full batch of 112 GPT-2 small sequences: it fits in one."""
    ds = predict.training(hardware="cs2", model=GPT2_SMALL, seq_len=2048, global_batch=[112, 351, 352, 1000])
    assert list(ds.n_micro_batches.values) == [1, 1, 2, 3]
    assert list(ds.micro_batch.values) == [112, 351, 176, 334]
    assert (ds.memory_per_device_bytes <= ds.memory_capacity_bytes).all()
    io = ds.weight_streaming_io_s.values
    assert io[2] == pytest.approx(2 * io[1]) and io[3] == pytest.approx(3 * io[1])


def test_the_fixed_cost_dominates_as_the_batch_shrinks():
    """The latencies (step_fixed_s per step, layer_stream_latency_s per streamed layer: 26 of
    them per micro-batch of GPT-2 small) are the two largest parts of a one-sequence step,
    and their share falls as the batch grows; the step tends to a floor as the batch
    shrinks (samples/s proportional to the batch)."""
    b = [1, 2, 4, 16, 64, 256]
    ds = predict.training(hardware="cs2", model=GPT2_SMALL, seq_len=2048, global_batch=b)
    share = (ds.step_fixed_s / ds.step_time_s).values
    assert np.all(np.diff(share) < 0) and share[-1] < 0.06
    one = ds.sel(global_batch=1)
    latencies = ("step_fixed_s", "layer_stream_latency_s")
    assert min(float(one[k]) for k in latencies) > max(float(one[k]) for k in PARTS if k not in latencies)
    assert float(one.layer_stream_latency_s) == pytest.approx(26 * load_hardware("cs2").layer_stream_latency_s)
    assert float(ds.step_time_s.sel(global_batch=2)) < 1.05 * float(one.step_time_s)
    # The knob moves the step by itself, whatever the batch.
    double = predict.training(hardware="cs2", model=GPT2_SMALL, seq_len=2048, global_batch=b,
                              hardware_overrides={"step_fixed_s": 35e-3})
    np.testing.assert_allclose((double.step_time_s - ds.step_time_s).values, 17.5e-3, rtol=1e-9)


@pytest.mark.parametrize("model", [GPT2_SMALL, GPT3_590M, "llama_3_8b"], ids=["gpt2_small", "gpt3_590m", "llama_3_8b"])
@pytest.mark.parametrize("seq_len", [512, 2048])
def test_throughput_does_not_fall_as_the_batch_grows(model, seq_len):
    """samples/s is non-decreasing in global_batch (powers of two, across micro-batch
    counts 1 to 18). Between them the tiles of the MeshGEMM layer model make it wiggle by
    up to 2%, and one sequence past a full micro-batch costs up to 7% (two half-full ones)."""
    ds = predict.training(hardware="cs2", model=model, seq_len=seq_len, global_batch=[2 ** i for i in range(11)])
    assert np.all(np.diff(ds.samples_per_s.values) >= 0)


def test_the_optimizer_runs_in_memoryx_under_the_backward():
    """AdamW in MemoryX: 30 bytes per parameter at MemoryX's rate (cs2.yaml), started on a
    layer's gradients as the last micro-batch's backward delivers them; exposed only where
    it outlasts that backward (never on the measured rows), however many micro-batches
    came before."""
    rate = load_hardware("cs2").weight_store_bandwidth_bytes_per_s
    ds = predict.training(hardware="cs2", model=GPT3_590M, seq_len=2048, global_batch=128)
    n = 590e6
    assert 0.8 * n * 30 / rate < float(ds.optimizer_update_s) < 1.2 * n * 30 / rate
    assert float(ds.optimizer_s) == 0.0 and float(ds.optimizer_update_s) < float(ds.backward_s)
    slow = predict.training(hardware="cs2", model=GPT3_590M, seq_len=2048, global_batch=[145, 1450],
                            hardware_overrides={"weight_store_bandwidth_bytes_per_s": 20e9})
    window = (slow.backward_s + slow.recompute_s) / slow.n_micro_batches
    np.testing.assert_allclose(slow.optimizer_s.values, (slow.optimizer_update_s - window).values, rtol=1e-12)
    # Ten micro-batches of the same size: ten times the backward, the same exposed update.
    assert list(slow.n_micro_batches.values) == [1, 10] and slow.optimizer_s.values[0] > 0
    assert slow.optimizer_s.values[1] == pytest.approx(slow.optimizer_s.values[0])


def test_the_fixed_cost_is_the_intercept_of_c181_c182():
    """cs2.yaml step_fixed_s = 2 t(128) - t(256) of the GPT-3 590M pair (Zhang et al.
    arXiv:2409.00287 Table V via wse_measurements.csv C181, C182): t(b) = f + b·c."""
    t128 = 128 / float(wse_row("C181")["value"])
    t256 = 256 / float(wse_row("C182")["value"])
    assert load_hardware("cs2").step_fixed_s == pytest.approx(2 * t128 - t256, abs=0.1e-3)


# Each CS-2 row: (tolerance on |model / measured - 1|, source). Model errors today, samples/s
# with the latency per streamed layer (cs2.yaml layer_stream_latency_s, fitted on the C rows
# below): C191/C192 +0.6/+0.1%, C179 +12.6%, C180 +15.9%, C181/C182 +0.5%; the GPT-3 2.7B-20B
# rows of Zhang et al. arXiv:2409.00287v2 (Table III shapes, Table V projected epoch hours;
# wse_training.csv T001-T008: samples/s = 211,043,181 PILE samples / (hours x 3600)) T001
# +4.8%, T002 +11.5%, T003 -1.9%, T004 +2.8%, T005/T006 +0.6%, T007 -15.6%, T008 -13.1%; each
# tolerance that error plus ~4-5 points (before it: +30, +38..44, +13, +22, +28, +8..12,
# -10, -8%). Held out: T001-T004 (2.7B, 6.7B), from which no spec value was derived (cs2.yaml
# quotes their batch pairs' intercepts only as a check of step_fixed_s). Not fully held out:
# T005-T008 (13B, 20B): cs2.yaml's MemoryX rate (weight_store_bandwidth, 300 GB/s) is a lower
# bound derived from their batch pairs (fitted: true in reference_points.yaml).
# step_fixed_s is fitted on C181/C182 for all, layer_stream_latency_s on the six C rows.
ROWS = {
    "C191": (0.05, "GPT-2 small bf16, modelzoo R2.3.0 run log (Regular-DABench-LLM gpt2_train_bf16.log)"),
    "C192": (0.05, "GPT-2 small fp16, modelzoo R2.3.0 run log (gpt2_train_f16.log)"),
    "C179": (0.17, "GPT-3 256M batch 128, Zhang et al. arXiv:2409.00287 Table V (projected epoch hours)"),
    "C180": (0.20, "GPT-3 256M batch 256, Zhang et al. Table V (projected epoch hours)"),
    "C181": (0.05, "GPT-3 590M batch 128, Zhang et al. Table V; step_fixed_s fitted on it with C182"),
    "C182": (0.05, "GPT-3 590M batch 256, Zhang et al. Table V; step_fixed_s fitted on it with C181"),
    "T001": (0.09, "GPT-3 2.7B batch 128, Zhang et al. Table V (1258 h), held out"),
    "T002": (0.16, "GPT-3 2.7B batch 256, Zhang et al. Table V (1252 h), held out"),
    "T003": (0.06, "GPT-3 6.7B batch 128, Zhang et al. Table V (2586 h), held out"),
    "T004": (0.07, "GPT-3 6.7B batch 256, Zhang et al. Table V (2581 h), held out"),
    "T005": (0.05, "GPT-3 13B batch 128, Zhang et al. Table V (4943 h); MemoryX 300 GB/s derived from it"),
    "T006": (0.05, "GPT-3 13B batch 256, Zhang et al. Table V (4939 h); MemoryX 300 GB/s derived from it"),
    "T007": (0.20, "GPT-3 20B batch 128, Zhang et al. Table V (7613 h); MemoryX 300 GB/s derived from it"),
    "T008": (0.18, "GPT-3 20B batch 256, Zhang et al. Table V (7594 h); MemoryX 300 GB/s derived from it"),
}


def _error(row_id: str) -> float:
    predicted = float(predict.training(**_config(row_id)).samples_per_s)
    return predicted / float(wse_row(row_id)["value"]) - 1


@pytest.mark.parametrize("row_id", list(ROWS))
def test_cs2_rows_within_their_tolerance(row_id):
    tol, source = ROWS[row_id]
    err = _error(row_id)
    assert abs(err) <= tol, f"{row_id} ({source}): model {err:+.1%}"


def test_every_cs2_row_meets_the_issue_target():
    """The issue's 25% on every CS-2 row, the narrow models included (they missed it by
    30-44% before the latency per streamed layer)."""
    errors = {r: _error(r) for r in ROWS}
    assert max(abs(e) for e in errors.values()) <= 0.25, errors


def test_layer_stream_latency_is_the_fit_of_the_small_model_rows():
    """cs2.yaml layer_stream_latency_s is what calibrate/wafer_fit.fit_layer_stream_latency
    returns on C179-C182, C191, C192 (1.9 ms), and without it those rows are 13-44% fast:
    the latency, not the layer model, carries the width trend. Leave one model out, each
    small model's rows stay within 16%."""
    from workbench.calibrate import wafer_fit
    points = wafer_fit.layer_stream_points(wafer_fit.LAYER_STREAM_FIT_ROWS)
    assert load_hardware("cs2").layer_stream_latency_s == wafer_fit.fit_layer_stream_latency(points=points)
    without = [measured / base - 1.0 for base, measured, _ in points.values()]
    assert min(without) > 0.10  # each row's measured step is >10% longer than the model without it
    models = {r: _config(r)["model"]["name"] for r in points}
    for m in set(models.values()):
        rest = [r for r in points if models[r] != m]
        held = [r for r in points if models[r] == m]
        lat = wafer_fit.fit_layer_stream_latency(rows=rest, points=points)
        for r in held:
            base, measured, streams = points[r]
            assert abs((base + lat * streams) / measured - 1.0) < 0.16, (m, r, lat)


@pytest.mark.parametrize("row_id", [r for r in ROWS if r.startswith("T")])
def test_table_v_rows_are_configured_as_the_csv_states(row_id):
    """The 2.7B-20B rows of Zhang et al. Table V are predicted at the configuration of
    reference_points.yaml: GPT-3 shapes of Table III, d_ff = 4·D, one CS-2, MSL 2048, the
    row's batch."""
    config = _config(row_id)
    model = config["model"]
    assert model["d_ff"] == 4 * model["d_model"] and model["head_dim"] * model["n_heads"] == model["d_model"]
    assert (config["hardware"], config["seq_len"]) == ("cs2", 2048)
    shape = f"(L{model['n_layers']} D{model['d_model']} H{model['n_heads']})"  # as in the CSV row
    assert shape in wse_row(row_id)["config"]
    assert wse_row(row_id)["config"].endswith(f"batch {config['global_batch']}")


def test_a_systems_batch_is_whole_sequences():
    """training-docs.cerebras.ai rel-2.5.0 (automatic microbatching): a system's batch is
    ceil(global batch / systems) and NumMicroBatches = ceil(that / micro-batch size), the
    micro-batch a whole number of sequences. 512 sequences on 3 CS-2 run 171 on each: the
    step is 171's, not 170.67's, and every micro-batch size reported is an integer."""
    ds = predict.training(hardware="cs2", model=GPT2_SMALL, seq_len=2048, global_batch=[512, 513], devices=3)
    assert float(ds.step_time_s.sel(global_batch=512)) == pytest.approx(float(ds.step_time_s.sel(global_batch=513)))
    assert np.all(ds.micro_batch.values == np.round(ds.micro_batch.values))
    assert np.all(ds.micro_batch.values * ds.n_micro_batches.values >= 171)


def test_a_point_that_does_not_fit_is_capacity_bound():
    """A sequence whose checkpoints exceed the wafer's SRAM is fits=False and bound
    "capacity", as inference says of such points (not "compute")."""
    ds = predict.training(hardware="cs2", model=GPT2_SMALL, seq_len=[2048, 2 ** 22], global_batch=8)
    assert list(ds.fits.values) == [True, False]
    assert ds.bound.values[1] == "capacity" and ds.bound.values[0] != "capacity"


def test_a_faster_clock_never_makes_a_step_slower():
    """Llama 3.1 405B on one CS-3, 8 sequences of 4,096: the step went 122.87 -> 126.55 s from
    2.2 to 4.4 GHz because the optimizer hid only under the backward's compute, which the
    faster clock shrinks while the step waits on the streaming. The last micro-batch's
    backward lasts as long as it streams: the step is non-increasing in the clock."""
    clocks = [1.1e9, 2.2e9, 2.5e9, 3.0e9, 4.4e9, 8.8e9]
    ds = predict.training(hardware="cs3", model="llama_3_1_405b", devices=1, seq_len=4096, global_batch=8,
                          hardware_overrides={"clock_hz": clocks})
    step = ds.step_time_s.values
    assert np.all(np.diff(step) <= 1e-9 * step[:-1]), step
    assert step[clocks.index(4.4e9)] <= step[clocks.index(2.2e9)]
    io_bound = ds.bound.values == "weight_streaming_io"
    assert io_bound[-1] and not io_bound[0]


def test_a_port_bound_datapath_is_named_local_memory_as_in_inference():
    """WSE-3's 8-wide fp16 unit is held to WSE-2's rate by its 16 B/cycle port (wse3.yaml):
    where a step is bound by its vector work, training names it local_memory as inference
    does; WSE-2's 4-wide unit is compute-bound."""
    kw = dict(model="llama_3_1_8b", devices=1, seq_len=2048, global_batch=64)
    cs3 = predict.training(hardware="cs3", **kw)
    cs2 = predict.training(hardware="cs2", **kw)
    assert str(cs3.bound.values) == "local_memory" and str(cs2.bound.values) == "compute"
    inf = predict.inference(hardware=["cs2", "cs3"], model="llama_3_8b", devices=4, batch=256, pe_grid=160,
                            prompt=128, generate=16, weights="fp16")
    assert list(inf.bound.values) == ["compute", "local_memory"]
