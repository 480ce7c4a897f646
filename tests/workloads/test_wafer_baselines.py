"""WaferLLM's two compiler baselines on WSE-2, the `t10` and `ladder` mappings
(workbench/primitives/mesh.py), against their published rows (He et al., OSDI'25, Tables 2-4;
wse_measurements.csv C005-C012, C031-C036, C079-C084), predicted through the gap table's
own predictor (calibrate/gap.py `_wafer`, rows in calibrate/data/reference_points.yaml).

What is fitted and what is held out: the mesh model's two software costs come from C026 and
C074 (calibrate/wafer_fit.py). The baselines add ONE number, mesh.RELAY_BYTES_PER_CYCLE
(bytes per cycle of a message forwarded in software by an intermediate PE), fitted here on
ONE row, C031 (T10 prefill, 480 x 480); the 17 other baseline rows are held out.

Tolerances (speed error = model / measured - 1, positive = the model is faster):
- T10 prefill held out (C032, C033): 5% (the structure leaves 2-3%);
- T10 decode (C079-C081): 20% (the model is 2-7% slow; 13-19% before the PE-mesh simulation
  showed the neighbour-shift allreduce's adds stream with the message, issue 21);
- T10 end-to-end (C005-C008, grids ASSUMED 660 x 660 for both phases, see the rows' note): 12%;
- Ladder prefill (C034-C036): 15%. The mechanism WaferLLM describes for Ladder (ring
  allreduce, GEMM via a relayed allgather, concat KV), as the PE-mesh simulation executes it
  (workbench/simulate/gemm.py), was 3.8x-5.8x faster than measured; its rows grow by about
  2 cycles per PE^2 per token per layer, on this model and WaferLLM's three larger ones, which
  is every block's input passing the region's P^2 PEs one after another at one cycle a hop
  (mesh.block_input_cycles, no constant fitted): the model is now 8-10% slow.
- Ladder decode (C082-C084): 10%. After the block inputs the decode rows kept 1.3-1.5M
  cycles per layer here and 1.0-3.4M on WaferLLM's larger models, rising with the layer's
  weights and, on the large models, falling with the grid: the layer's weights read through
  the unified memory, a chain over the program's PEs plus W / P cycles entering the region
  over its P edge links (mesh.unified_weight_cycles, no constant fitted): +4% here, -1% to
  +5% on all twelve Ladder decode rows (1.7-2.6x fast before).
- Ladder end to end: 25% for C010-C012 (-15% to +13%). C009 (2048 in, 128 out) is an xfail
  (its recorded error asserted): against C010 (4096 in) it implies a 2,048-token prefill taking ~90% of a 4,096-token
  one (both rows rounded to 0.1 tok/s: 1.2 and 1.1), where Table 3's prefill rows and the
  model grow with the prompt.
"""
from __future__ import annotations

import numpy as np
import pytest

from workbench.calibrate import gap
from workbench.calibrate.measurements import wse_row
from workbench.calibrate.wafer_fit import CLOCK_HZ, N_LAYERS, per_layer_cycles_from_tpr, prefill_model
from workbench.primitives import mesh
from workbench.workloads.wafer_layers import prefill_layer
from workbench.backends import numbers

WSE2 = numbers("wse2")
T10_ROWS = {"C079": 0.20, "C080": 0.20, "C081": 0.20,           # Table 4 decode, 420/540/660
            "C031": 0.01, "C032": 0.05, "C033": 0.05,           # Table 3 prefill, 480/600/720 (C031 fitted)
            "C005": 0.12, "C006": 0.12, "C007": 0.12, "C008": 0.12}  # Table 2 end-to-end
# Ladder: (row, the model's speed error when this test was written), so a change of the
# mechanism is seen either way.
LADDER_ROWS = {"C082": 0.04, "C083": 0.04, "C084": 0.04,         # Table 4 decode
               "C034": -0.09, "C035": -0.08, "C036": -0.10,      # Table 3 prefill
               "C009": 0.30, "C010": -0.15, "C011": 0.13, "C012": -0.01}  # Table 2 end-to-end
LADDER_TOLERANCE = {"C082": 0.10, "C083": 0.10, "C084": 0.10, "C034": 0.15, "C035": 0.15, "C036": 0.15,
                    "C010": 0.25, "C011": 0.25, "C012": 0.25}
LADDER_WHY = ("C009 (2048 in / 128 out, 1.2 tok/s) against C010 (4096 in, 1.1 tok/s) implies a 2,048-token Ladder "
              "prefill taking ~90% of a 4,096-token one; Table 3's prefill rows and the model grow with the prompt")


@pytest.fixture(scope="module")
def rows():
    return gap.scored_points([*T10_ROWS, *LADDER_ROWS])


def test_every_baseline_row_is_in_the_gap_table_with_its_mapping(rows):
    assert set(rows.index) == set(T10_ROWS) | set(LADDER_ROWS)
    for rid in rows.index:
        mapping = rows.loc[rid, "config"]["mapping"]
        assert mapping == ("t10" if rid in T10_ROWS else "ladder"), rid
        assert rows.loc[rid, "value_si"] == pytest.approx(wse_row(rid)["value"])
    assert [rid for rid in rows.index if rows.loc[rid, "fitted"]] == ["C031"]
    assert gap.describe(rows.reset_index().set_index("id", drop=False).loc["C080"]) == \
        "decode, 540x540 PEs, t10"


def test_relay_rate_is_the_fit_on_C031_alone():
    """RELAY_BYTES_PER_CYCLE enters T10's prefill linearly in 1/r: solve C031 (175.0 tok/s
    prefill of 4,096 tokens on 480 x 480) for it and compare with the shipped 1.5."""
    target = per_layer_cycles_from_tpr(wse_row("C031")["value"], 4096)
    saved = mesh.RELAY_BYTES_PER_CYCLE

    def cycles(inv_rate):
        mesh.RELAY_BYTES_PER_CYCLE = 1.0 / inv_rate if inv_rate else np.inf
        return float(prefill_layer(WSE2, prefill_model(), P=480.0, batch=1.0, prompt=4096.0,
                                   mapping="t10")["cycles"])
    try:
        base, unit = cycles(0.0), cycles(1.0)
    finally:
        mesh.RELAY_BYTES_PER_CYCLE = saved
    rate = (unit - base) / (target - base)
    print(f"fitted relay rate {rate:.4f} B/cycle (shipped {saved})")
    assert saved == pytest.approx(rate, rel=0.01)


@pytest.mark.parametrize("rid", list(T10_ROWS))
def test_t10_rows(rows, rid):
    r = rows.loc[rid]
    print(f"{rid} {gap.describe(r)}: model {r.predicted:.1f} vs {r.value_si:.1f} tok/s ({r.error:+.1%})")
    assert abs(r.error) <= T10_ROWS[rid]


@pytest.mark.parametrize("rid", list(LADDER_ROWS))
def test_ladder_rows(rows, rid):
    r = rows.loc[rid]
    print(f"{rid} {gap.describe(r)}: model {r.predicted:.1f} vs {r.value_si:.1f} tok/s ({r.error:+.1%})")
    assert r.error == pytest.approx(LADDER_ROWS[rid], abs=0.02)
    if rid not in LADDER_TOLERANCE:
        pytest.xfail(f"{rid}: model {r.error:+.0%} vs measured. {LADDER_WHY}")
    assert abs(r.error) <= LADDER_TOLERANCE[rid]


def test_baselines_are_slower_than_waferllm_and_ladder_slowest_in_decode(rows):
    """Tables 3-4: both baselines far behind WaferLLM; Ladder behind T10 in decode."""
    mesh_ids = ["C073", "C075", "C077", "C025", "C027", "C029"]
    mesh_pred = gap.scored_points(mesh_ids).loc[mesh_ids, "predicted"].to_numpy()
    t10 = rows.loc[["C079", "C080", "C081", "C031", "C032", "C033"], "predicted"].to_numpy()
    ladder = rows.loc[["C082", "C083", "C084", "C034", "C035", "C036"], "predicted"].to_numpy()
    assert np.all(t10 < mesh_pred) and np.all(ladder < mesh_pred)
    assert np.all(ladder[:3] < t10[:3])
    # and both fall as the grid grows (measured: T10 418 > 339 > 265, 175 > 157 > 133; Ladder too)
    for v in (t10[:3], t10[3:], ladder[:3], ladder[3:]):
        assert v[0] > v[1] > v[2]


@pytest.mark.parametrize("mapping, e2e, decode", [
    ("t10", ("C006", "C008", "C005", "C007"), {420: "C079", 540: "C080", 660: "C081"}),
    ("ladder", ("C010", "C012", "C009", "C011"), {420: "C082", 540: "C083", 660: "C084"})])
def test_end_to_end_rows_imply_the_660_decode_grid(mapping, e2e, decode):
    """The end-to-end rows' grids are not stated (Table 2). Two rows with the same prompt
    differ only in generated tokens, so their time difference is decode alone: (4096/4096 -
    4096/128) and (2048/2048 - 2048/128) give T10 ~267 and ~263 tok/s, Ladder ~11.2 and
    ~11.3: Table 4's 660 x 660 column (265.1, 11.4), not 420 or 540. Hence the rows'
    ASSUMED 660 x 660 decode grid (and prefill: WaferLLM's own Table 2 prefill grid)."""
    long4, short4 = wse_row(e2e[1])["value"], wse_row(e2e[0])["value"]
    long2, short2 = wse_row(e2e[3])["value"], wse_row(e2e[2])["value"]
    implied = [(4096 - 128) / (4096 / long4 - 128 / short4), (2048 - 128) / (2048 / long2 - 128 / short2)]
    for rate in implied:
        nearest = min(decode, key=lambda P: abs(wse_row(decode[P])["value"] - rate))
        assert nearest == 660, (mapping, rate)
        assert rate == pytest.approx(wse_row(decode[660])["value"], rel=0.03)


def test_relay_rate_is_below_the_link_rate_and_the_prefill_fit_leaves_no_per_row_factor(rows):
    # one number for both baselines, below the 4 B/cycle link; T10 prefill on 600 and 720 then
    # lands within 4% with nothing else fitted (2.0% and 3.3%).
    assert 0 < mesh.RELAY_BYTES_PER_CYCLE < WSE2.link_bytes_per_cycle
    assert abs(rows.loc["C032", "error"]) < 0.04 and abs(rows.loc["C033", "error"]) < 0.04
    # WaferLLM's projection: tokens / (cycles per layer x 32 layers / 1.1 GHz)
    assert CLOCK_HZ == 1.1e9 and N_LAYERS == 32
