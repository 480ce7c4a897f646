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


def test_training_expert_groups_must_fit_a_stages_ranks():
    """Megatron-Core carves each expert group of expert_tp x ep ranks out of a stage's
    tp·dp·cp ranks (expert_tp defaults to tp, its --expert-tensor-parallel-size default)."""
    m = load_model("mixtral_8x7b")  # 8 experts, 8 KV heads
    kw = dict(pp=1.0, cp=1.0, micro_batch=1.0, virtual_stages=1.0, zero=1, recompute="none")
    # tp=8, ep=8 on 8 GPUs: the 8x8 expert group needs 64 ranks
    lay = GpuLayout.for_training(tp=8.0, ep=8.0, devices=8.0, **kw)
    assert _reasons(lay, m, "training") == ["ep*expert_tp=8*8 does not divide tp*dp*cp=8 (each expert group "
                                            "spans ep*expert_tp of a stage's tp*dp*cp ranks)"]
    assert _reasons(GpuLayout.for_training(tp=8.0, ep=8.0, devices=8.0, expert_tp=1.0, **kw), m, "training") == []
    assert _reasons(GpuLayout.for_training(tp=2.0, ep=8.0, devices=16.0, **kw), m, "training") == []


def test_training_layouts_megatron_refuses():
    """Each of Megatron-Core's layout checks, one reason per point."""
    m = load_model("llama_3_8b")  # 32 layers, 8 KV heads, dense
    kw = dict(cp=1.0, micro_batch=1.0, zero=1, recompute="none")
    def reasons(seq_len=4096, global_batch=64, **lay):
        layout = GpuLayout.for_training(**{**kw, "pp": 1.0, "virtual_stages": 1.0, "tp": 1.0, "ep": 1.0, **lay})
        return [p.message(**{k: f"{float(np.asarray(v).ravel()[0]):g}" for k, v in p.values.items()})
                for p in layout.problems(m, phase="training", seq_len=seq_len, global_batch=global_batch)
                if np.any(p.where)]
    assert reasons() == []
    assert reasons(tp=16.0, devices=16.0) == ["tp=16 does not divide n_kv_heads=8 of llama_3_8b (training holds "
                                              "whole KV heads a rank); allowed: 1, 2, 4, 8"]
    assert reasons(pp=4.0, virtual_stages=10.0, devices=4.0) == [
        "pp*virtual_stages=4*10 exceeds n_layers+2=34 of llama_3_8b (each virtual stage holds at least one layer, "
        "the embedding or the loss)"]
    assert reasons(pp=4.0, virtual_stages=8.0, devices=4.0) == []  # 32 layers + embedding + loss in 32 chunks
    assert reasons(global_batch=100, devices=8.0) == ["global_batch=100 is not a multiple of dp*micro_batch=8"]
    assert reasons(cp=4096.0, devices=4096.0) == [
        "seq_len=4096 is not a multiple of 2*cp=8192 (context parallelism splits each sequence into 2*cp chunks)"]
    assert reasons(ep=8.0, devices=8.0) == ["ep=8 is not allowed for llama_3_8b: a dense model has no experts; "
                                            "allowed: 1"]
