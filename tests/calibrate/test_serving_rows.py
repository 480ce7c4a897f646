"""The serving constants' writers (calibrate/serving_rows.py) rewrite only the sections they
fit: every other section and comment of specs/serving/frameworks.yaml stays as it was (an
earlier writer dropped the sections after the one it wrote)."""
from __future__ import annotations

import yaml

from workbench.backends.kernel_tables import SERVING_CONSTANTS
from workbench.calibrate import serving_rows


def test_writers_replace_only_their_sections(tmp_path):
    path = tmp_path / "frameworks.yaml"
    path.write_text(SERVING_CONSTANTS.read_text())
    before = yaml.safe_load(path.read_text())
    fit = {"rows": 3, "median_abs_err": 0.1, "loo_model_median_abs_err": 0.2, "loo_model_median_err": 0.0}
    serving_rows.write_constants({"vllm": dict(fit, kernel_graph_saving_s=7e-6)},
                                 {"vllm": {"iteration_overhead_s": 1.5e-3, "rows": 3, "loo_tpot_median_abs_err": 0.1,
                                           "loo_tpot_median_err": 0.0}}, path)
    serving_rows.write_ttft_constants(3.0, {"frameworks": {"sglang": dict(fit, request_latency_s_per_layer=2e-3)}},
                                      path)
    after = yaml.safe_load(path.read_text())
    assert after["kernel_graph_saving_s"] == {"trtllm": 0.0, "vllm": 7e-6, "sglang": 0.0, "none": 0.0}
    assert after["iteration_overhead_s"]["vllm"] == 1.5e-3
    assert after["request_latency_s_per_layer"] == {"trtllm": 0.0, "vllm": 0.0, "sglang": 2e-3, "none": 0.0}
    assert after["benchmark_waves"] == 3.0
    for kept in set(before) - {"kernel_graph_saving_s", "iteration_overhead_s", "request_latency_s_per_layer",
                               "benchmark_waves"}:
        assert after[kept] == before[kept], kept
    assert path.read_text().count("\n#") == SERVING_CONSTANTS.read_text().count("\n#")  # comments kept
