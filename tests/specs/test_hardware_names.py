"""Hardware names as vendors, papers and benchmark tables write them, resolved to the catalog
(workbench/specs/hardware_names.py): one chip or none, never a wrong one."""
from __future__ import annotations

import pytest

from workbench import predict
from workbench.calibrate import gap
from workbench.calibrate.measurements import reference
from workbench.errors import InputError
from workbench.specs import hardware_names, list_hardware, load_hardware


@pytest.mark.parametrize("text,name", [
    ("H100 SXM", "h100_sxm"), ("NVIDIA H100 SXM (Azure ND H100 v5)", "h100_sxm"), ("H100 PCIe", "h100_pcie"),
    ("H200", "h200_sxm"), ("NVIDIA H200 SXM 141GB (700W)", "h200_sxm"), ("NVIDIA GH200 SXM", "gh200"),
    ("NVIDIA B200 SXM", "b200"), ("B300 SXM", "b300"), ("NVIDIA GB300 NVL72 (72 GPUs)", "gb300"),
    ("NVIDIA A100 SXM4 80GB (Azure ND A100 v4)", "a100_sxm"), ("NVIDIA A100 80GB (DGX A100, Selene)", "a100_sxm"),
    ("NVIDIA H100 (DGX-H100)", "h100_sxm"), ("AMD Instinct MI300X", "mi300x"), ("AMD MI300X x8 (xGMI full mesh)", "mi300x"),
    ("AMD MI325X", "mi325x"), ("Intel Gaudi 3", "gaudi3"), ("Gaudi2", "gaudi2"), ("NVIDIA L4", "l4"),
    ("RTX PRO 6000", "rtx_pro_6000"), ("Cerebras CS-3 (WSE-3)", "cs3"), ("Cerebras WSE-2 (CS-2)", "wse2"),
])
def test_names_resolve_to_their_chip(text, name):
    assert hardware_names.resolve(text, list_hardware()) == name
    assert load_hardware(text).name == name


@pytest.mark.parametrize("text", ["H100", "NVIDIA H100 80GB", "A100 80GB", "TPU v5p", "MI250X"])
def test_an_ambiguous_or_unknown_name_is_refused_with_the_catalog(text):
    """H100 and A100 without a module form or a DGX / HGX system name both catalog parts; a chip
    the catalog lacks is not guessed."""
    assert hardware_names.resolve(text, list_hardware()) is None
    with pytest.raises(InputError, match=r"is not known; allowed: a100_pcie, a100_sxm"):
        load_hardware(text)


def test_the_reference_rows_hardware_resolves_as_the_gap_table_maps_it():
    """Every published row the gap table predicts names its hardware in free text
    (measurements.csv `hardware`); where that text names one chip it is the chip the table
    predicts the row on (hand-mapped in calibrate/data/reference_points.yaml): never another,
    and for most rows (the rest say "H100 80GB" or "A100 80GB" with no form or system)."""
    ref, points = reference(), gap.reference_points()
    pairs = {r.id: (ref.loc[r.id, "hardware"], r.hardware) for r in points.itertuples() if r.id in ref.index}
    resolved = {i: (hardware_names.resolve(text, list_hardware()), hw) for i, (text, hw) in pairs.items()}
    assert all(got == hw for got, hw in resolved.values() if got is not None)
    assert sum(got is not None for got, _ in resolved.values()) >= 0.75 * len(resolved)


def test_a_resolved_name_labels_results_by_the_catalog_name():
    ds = predict.gemm(hardware=["NVIDIA H200 SXM", "AMD Instinct MI300X"], m=4096, n=4096, k=4096, dtype="bf16")
    assert list(ds.hardware.values) == ["h200_sxm", "mi300x"]
