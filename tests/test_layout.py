"""Layouts (workbench/layout.py): what each size means and which layouts cannot run."""
from __future__ import annotations

import numpy as np

from workbench.layout import GpuLayout, WaferLayout
from workbench.specs import load_model


def test_devices_is_every_gpu_of_the_layout():
    lay = GpuLayout.for_inference(tp=8.0, pp=2.0, devices=64.0)
    assert lay.dp == 4.0 and lay.devices == 64.0
    train = GpuLayout.for_training(tp=8.0, pp=4.0, cp=2.0, ep=1.0, micro_batch=1.0, virtual_stages=1.0, zero=1,
                                   recompute="none", devices=1024.0)
    assert train.dp == 16.0 and train.devices == 1024.0


def _reasons(layout, model, phase):
    out = []
    for p in layout.problems(model, phase=phase):
        if np.any(p.where):
            out.append(p.message(**{k: f"{float(np.asarray(v).ravel()[0]):g}" for k, v in p.values.items()}))
    return out


def test_problems_name_the_sizes_and_what_is_allowed():
    m = load_model("llama_3_1_70b")  # 64 heads, 80 layers
    assert _reasons(GpuLayout.for_inference(tp=8.0, pp=2.0), m, "inference") == []
    bad = _reasons(GpuLayout.for_inference(tp=3.0, pp=96.0, devices=300.0), m, "inference")
    assert bad[0].startswith("tp=3 does not divide n_heads=64") and "allowed: 1, 2, 4, 8, 16, 32, 64" in bad[0]
    assert "pp=96 exceeds n_layers=80" in bad[1]
    assert "devices=300 is not a multiple of tp*pp=288" in bad[2]


def test_expert_parallelism_must_divide_tp_in_inference_and_the_experts_in_training():
    m = load_model("mixtral_8x7b")  # 8 experts
    assert "ep=3 does not divide tp=8" in _reasons(GpuLayout.for_inference(tp=8.0, pp=1.0, ep=3.0), m, "inference")[0]
    train = GpuLayout.for_training(tp=1.0, pp=1.0, cp=1.0, ep=3.0, micro_batch=1.0, virtual_stages=1.0, zero=1,
                                   recompute="none", devices=24.0)
    assert "ep=3 does not divide n_experts=8" in _reasons(train, m, "training")[0]


def test_wafer_layouts_leave_capacity_to_the_placement_model():
    assert _reasons(WaferLayout(systems=4.0), load_model("llama_3_1_70b"), "inference") == []
    assert WaferLayout(systems=4.0, placement="streaming").problems(load_model("llama_3_1_8b"), phase="inference") == []


def test_wafer_systems_need_a_layer_each_when_pipelined_and_a_sequence_each_when_data_parallel():
    m = load_model("llama_3_1_8b")  # 32 layers
    assert _reasons(WaferLayout(systems=32.0), m, "inference") == []
    assert "devices=33 systems exceed n_layers=32" in _reasons(WaferLayout(systems=33.0), m, "inference")[0]
    train = WaferLayout(systems=64.0).problems(m, phase="training", global_batch=32.0)
    assert np.any(train[0].where) and "global_batch=32" in train[0].message(devices="64", global_batch="32")


def test_training_expert_parallelism_must_divide_the_tensor_and_data_parallel_ranks():
    m = load_model("qwen3_235b_a22b")  # 128 experts: ep=16 divides them, not 8 GPUs
    lay = GpuLayout.for_training(tp=8.0, pp=1.0, cp=1.0, ep=16.0, micro_batch=1.0, virtual_stages=1.0, zero=1,
                                 recompute="none", devices=8.0)
    assert _reasons(lay, m, "training") == ["ep=16 does not divide tp*dp*cp=8 (experts are spread over the tensor- "
                                            "and data-parallel ranks of a stage)"]
    ok = GpuLayout.for_training(tp=8.0, pp=2.0, cp=1.0, ep=16.0, micro_batch=1.0, virtual_stages=1.0, zero=1,
                                recompute="none", devices=32.0)  # tp*dp*cp = 8*2*1
    assert _reasons(ok, m, "training") == []
