"""The TPOT constants of the serving frameworks (calibrate/serving_overheads.py): the writer
rewrites only the sections it fits (every other section and comment of
specs/serving/frameworks.yaml stays as it was: an earlier writer dropped the sections after
the one it wrote), the overheads are recovered from rows built with known ones, and the
per-MoE-layer term is kept only where it predicts an unseen model better."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

from workbench.backends.kernel_tables import SERVING_CONSTANTS, iteration_overhead_s, serving_constants
from workbench.calibrate import serving_overheads, serving_rows
from workbench.specs import load_model


def test_writers_replace_only_their_sections(tmp_path):
    path = tmp_path / "frameworks.yaml"
    path.write_text(SERVING_CONSTANTS.read_text())
    before = yaml.safe_load(path.read_text())
    fit = {"rows": 3, "median_abs_err": 0.1, "loo_model_median_abs_err": 0.2, "loo_model_median_err": 0.0}
    serving_overheads.write_constants({"vllm": dict(fit, kernel_graph_saving_s=7e-6)},
                                 {"vllm": dict(fit, iteration_overhead_s=1.5e-3, iteration_overhead_s_per_sequence=2e-5,
                                                   iteration_overhead_s_per_moe_layer=4e-5)},
                                 path)
    serving_rows.write_ttft_constants(3.0, {"frameworks": {"sglang": dict(fit, request_latency_s_per_layer=2e-3,
                                                                          request_latency_s_per_moe_layer=3e-3)}},
                                      path)
    after = yaml.safe_load(path.read_text())
    assert after["kernel_graph_saving_s"] == {"trtllm": 0.0, "vllm": 7e-6, "sglang": 0.0, "none": 0.0}
    assert after["iteration_overhead_s"]["vllm"] == 1.5e-3
    assert after["iteration_overhead_s_per_sequence"] == {"trtllm": 0.0, "vllm": 2e-5, "sglang": 0.0, "none": 0.0}
    assert after["iteration_overhead_s_per_moe_layer"] == {"trtllm": 0.0, "vllm": 4e-5, "sglang": 0.0, "none": 0.0}
    assert after["request_latency_s_per_layer"] == {"trtllm": 0.0, "vllm": 0.0, "sglang": 2e-3, "none": 0.0}
    assert after["request_latency_s_per_moe_layer"] == {"trtllm": 0.0, "vllm": 0.0, "sglang": 3e-3, "none": 0.0}
    assert after["benchmark_waves"] == 3.0
    # the held-out errors each writer fitted, as data (a fit without a leave-one-GPU-out figure: .nan)
    assert after["tpot_held_out"]["vllm"]["runs"] == 3 and after["tpot_held_out"]["vllm"]["leave_one_model_out"] == 0.2
    assert np.isnan(after["tpot_held_out"]["vllm"]["leave_one_gpu_out"]) and set(after["tpot_held_out"]) == {"vllm"}
    assert set(after["ttft_held_out"]) == {"sglang"} and after["ttft_held_out"]["sglang"]["leave_one_model_out"] == 0.2
    for kept in set(before) - {"kernel_graph_saving_s", "iteration_overhead_s", "iteration_overhead_s_per_sequence",
                               "iteration_overhead_s_per_moe_layer", "request_latency_s_per_layer",
                               "request_latency_s_per_moe_layer", "benchmark_waves", "tpot_held_out", "ttft_held_out"}:
        assert after[kept] == before[kept], kept
    assert path.read_text().count("\n#") == SERVING_CONSTANTS.read_text().count("\n#")  # comments kept


def test_overheads_per_iteration_and_per_sequence_recovered():
    """Rows built from a known pair (1.2 ms per iteration, 17 us per sequence) over kernel
    TPOTs and batch sizes like the benchmarks' give that pair back on the fit's grids, and
    without the per-sequence term the fit is worse (it cannot follow the batch)."""
    rng = np.random.default_rng(3)
    n = 300
    seqs = rng.choice([1.0, 4.0, 16.0, 64.0, 256.0], n)
    its = np.where(rng.random(n) < 0.3, 1.3, 1.0)  # some rows' tokens carry extra prefill iterations
    kernel = rng.uniform(3e-3, 30e-3, n)
    rows = pd.DataFrame({"kernel_tpot_s": kernel, "tpot_iterations": its, "tpot_sequences": seqs,
                         "measured_tpot_s": kernel + 1.2e-3 * its + 17e-6 * seqs})
    h, h_seq, h_moe = serving_overheads._overhead(rows)
    assert h == pytest.approx(1.2e-3, abs=1e-9) and h_seq == pytest.approx(17e-6, abs=1e-12) and h_moe == 0.0
    assert np.median(np.abs(serving_overheads._tpot_err(rows, (h, h_seq)))) < 1e-9
    one = serving_overheads._overhead(rows, per_sequence=False)
    assert one[1] == 0.0 and np.median(np.abs(serving_overheads._tpot_err(rows, one))) > 0.01


def _rows(n, h, h_seq, h_moe, seed=5):
    """Synthetic rows of four models (two dense, two with 58 and 94 MoE layers) whose
    measured TPOT is kernel + h x iterations + h_seq x sequences + h_moe x MoE layers x
    iterations, times a 2% scatter."""
    rng = np.random.default_rng(seed)
    models = rng.choice(["a", "b", "c", "d"], n)
    layers = pd.Series(models).map({"a": 0.0, "b": 0.0, "c": 58.0, "d": 94.0}).to_numpy()
    seqs = rng.choice([1.0, 4.0, 16.0, 64.0, 256.0], n)
    its = np.where(rng.random(n) < 0.3, 1.3, 1.0)
    kernel = rng.uniform(3e-3, 30e-3, n)
    tpot = (kernel + h * its + h_seq * seqs + h_moe * layers * its) * rng.normal(1.0, 0.02, n)
    return pd.DataFrame({"model": models, "moe_layers": layers, "kernel_tpot_s": kernel, "tpot_iterations": its,
                         "tpot_sequences": seqs, "measured_tpot_s": tpot})


def test_time_per_moe_layer_recovered_and_kept_where_it_generalises():
    """Rows with 2.5 ms per iteration, 20 us per sequence and 48 us per MoE layer give the
    triple back within the grids' steps and a 2% scatter allows, and the per-MoE-layer form
    wins on held-out models; rows made without it (0 us per MoE layer) keep the flat form."""
    rows = _rows(240, 2.5e-3, 20e-6, 48e-6)
    h, h_seq, h_moe = serving_overheads._overhead(rows, per_moe_layer=True)
    assert h == pytest.approx(2.5e-3, abs=3e-4) and h_seq == pytest.approx(20e-6, abs=4e-6)
    assert h_moe == pytest.approx(48e-6, abs=6e-6)
    fit = serving_overheads.fit_overheads(rows.assign(backend="sglang"))["sglang"]
    assert fit["iteration_overhead_s_per_moe_layer"] > 0 and fit["loo_split_median_abs_err"] < fit["loo_flat_median_abs_err"]
    assert fit["loo_model_median_abs_err"] < 0.03  # the 2% scatter, held out by model
    flat = serving_overheads.fit_overheads(_rows(240, 2.5e-3, 20e-6, 0.0).assign(backend="vllm"))["vllm"]
    assert flat["iteration_overhead_s_per_moe_layer"] == 0.0 or \
        flat["loo_split_median_abs_err"] < flat["loo_flat_median_abs_err"]
    assert flat["iteration_overhead_s_per_moe_layer"] == 0.0  # a tie on held-out error keeps the flat form
    assert flat["iteration_overhead_s"] == pytest.approx(2.5e-3, abs=3e-4)


def test_a_framework_with_one_kind_of_model_keeps_the_flat_form():
    """With only MoE models among a framework's rows the per-MoE-layer time cannot be told
    from the per-iteration overhead: it stays 0."""
    rows = _rows(200, 2.5e-3, 20e-6, 48e-6)
    fit = serving_overheads.fit_overheads(rows[rows["moe_layers"] > 0].assign(backend="trtllm"))["trtllm"]
    assert fit["iteration_overhead_s_per_moe_layer"] == 0.0 and np.isnan(fit["loo_split_median_abs_err"])


def test_iteration_overhead_adds_the_moe_layers():
    """A served model's time per iteration outside the tables: the framework's overhead plus
    its time per MoE layer over the model's MoE layers (a dense model: the overhead alone)."""
    consts = serving_constants()
    for fw in ("trtllm", "vllm", "sglang"):
        per_moe = consts["iteration_overhead_s_per_moe_layer"][fw]
        assert iteration_overhead_s(fw, load_model("qwen3_32b")) == consts["iteration_overhead_s"][fw]
        deepseek = load_model("deepseek_v3")
        assert iteration_overhead_s(fw, deepseek) == pytest.approx(
            consts["iteration_overhead_s"][fw] + per_moe * deepseek.n_moe_layers)


def test_leave_one_gpu_out_measures_how_the_overheads_carry_to_a_gpu():
    """Rows of three GPUs built with one pair of overheads: each GPU's rows predicted with the
    pair fitted on the other two are as close as the 2% scatter allows. When one GPU's host
    runs 2 ms slower per iteration, its held-out rows miss by that (the other GPUs fit no
    trace of it) while the in-sample error, its rows a minority, hides most of it."""
    rows = _rows(300, 2.5e-3, 20e-6, 0.0).assign(backend="vllm")
    rows["system"] = np.resize(["h100_sxm", "h200_sxm", "b200"], len(rows))
    same = serving_overheads.fit_overheads(rows)["vllm"]
    assert same["loo_gpu_median_abs_err"] < 0.03
    slow = rows.copy()
    on_b200 = slow["system"] == "b200"
    slow.loc[on_b200, "measured_tpot_s"] += 2e-3 * slow.loc[on_b200, "tpot_iterations"]
    fit = serving_overheads.fit_overheads(slow)["vllm"]
    held_b200 = serving_overheads._tpot_err(slow[on_b200], serving_overheads._overhead(slow[~on_b200]))
    assert np.median(held_b200) < -0.05  # the unseen GPU's host is slower than the others'
    assert fit["loo_gpu_median_abs_err"] > same["loo_gpu_median_abs_err"]


def test_fit_serving_keeps_each_frameworks_better_tpot_pass(monkeypatch):
    """Two TPOT passes whose constants alternate (as SGLang's did between an 8 and a 12 us
    graph saving): each framework keeps the pass with the lower leave-one-model-out error,
    and the TTFT constants are fitted after each pass with the constants written."""
    passes = iter([
        ({"sglang": {"kernel_graph_saving_s": 8e-6, "rows": 3}, "vllm": {"kernel_graph_saving_s": 0.0, "rows": 3}},
         {"sglang": {"iteration_overhead_s": 3.05e-3, "loo_model_median_abs_err": 0.099},
          "vllm": {"iteration_overhead_s": 1.5e-3, "loo_model_median_abs_err": 0.10}}),
        ({"sglang": {"kernel_graph_saving_s": 12e-6, "rows": 3}, "vllm": {"kernel_graph_saving_s": 1e-6, "rows": 3}},
         {"sglang": {"iteration_overhead_s": 5.98e-3, "loo_model_median_abs_err": 0.088},
          "vllm": {"iteration_overhead_s": 1.6e-3, "loo_model_median_abs_err": 0.12}}),
    ])
    written, ttft_fits = [], []
    monkeypatch.setattr(serving_rows, "load", lambda: pd.DataFrame())
    monkeypatch.setattr(serving_overheads, "_tpot_pass", lambda rows: next(passes))
    monkeypatch.setattr(serving_overheads, "write_constants", lambda s, o: written.append((s, o)) or "yaml")
    monkeypatch.setattr(serving_overheads, "_ttft_pass", lambda rows, report: ttft_fits.append(len(written)))
    serving_overheads.fit_serving(report=lambda line: None)
    assert serving_overheads.TPOT_PASSES == 2 and ttft_fits == [1, 2]
    savings, overheads = written[-1]
    assert savings["sglang"]["kernel_graph_saving_s"] == 12e-6 and overheads["sglang"]["iteration_overhead_s"] == 5.98e-3
    assert savings["vllm"]["kernel_graph_saving_s"] == 0.0 and overheads["vllm"]["iteration_overhead_s"] == 1.5e-3


def _comment_percent(section: str, framework: str, label: str) -> float:
    """The percentage after `label` in the comment of a fitted constant's line of frameworks.yaml."""
    import re
    lines = SERVING_CONSTANTS.read_text().split(f"\n{section}:\n", 1)[1].split("\n")
    line = next(l for l in lines if l.startswith(f"  {framework}:"))
    return float(re.search(re.escape(label) + r"[^0-9]*([0-9.]+)%", line).group(1)) / 100.0


@pytest.mark.parametrize("framework", ["trtllm", "vllm", "sglang"])
def test_held_out_errors_are_those_the_fit_wrote_beside_its_constants(framework):
    """The tpot_held_out / ttft_held_out data (what predict.serving states in its attrs) and the
    comments the same fit wrote on the constants (iteration_overhead_s: TPOT;
    request_latency_s_per_moe_layer: TTFT) give the same leave-one-model-out and
    leave-one-GPU-out errors, to the comments' 0.1%."""
    c = serving_constants()
    for key, section in (("tpot_held_out", "iteration_overhead_s"), ("ttft_held_out", "request_latency_s_per_moe_layer")):
        e = c[key][framework]
        assert e["leave_one_model_out"] == pytest.approx(_comment_percent(section, framework, "leave-one-model-out"),
                                                         abs=6e-4)
        assert e["leave_one_gpu_out"] == pytest.approx(_comment_percent(section, framework, "leave-one-GPU-out"),
                                                       abs=6e-4)
        assert e["runs"] > 100
