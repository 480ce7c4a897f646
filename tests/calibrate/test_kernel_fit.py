"""Fitting efficiency surfaces (calibrate/kernel_fit.py): a known surface and fixed latency
are recovered from synthetic rows; the folds hold out whole neighbourhoods; the committed
surfaces (workbench/specs/kernels/) load, stay physical and carry the held-out scores that
the closing note of the kernel-table issue states; with the silicon extra installed, the
primitives evaluated through predict reproduce the measured tables they were fitted to."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from synthetic_chip import SyntheticChip as _Chip
from workbench import predict
from workbench.backends import kernel_tables
from workbench.calibrate import kernel_fit as kf
from workbench.primitives.kernel_fits import EffGrid, gemm_roofline
from workbench.specs import list_gpus, load_hardware

RNG = np.random.default_rng(7)


def _synthetic_gemms(n=4000, fixed_s=4e-6):
    """Rows timed by a known model, monotone in every size as real kernels are: t = fixed
    + max(FLOPs / (peak · ramp(FLOPs)), bytes / (bandwidth · 0.85)), the math ramp
    0.8 · F / (F + 1e9) (half speed at a GFLOP)."""
    m = np.round(2 ** RNG.uniform(0, 14, n))
    nn = np.round(2 ** RNG.uniform(6, 15, n))
    k = np.round(2 ** RNG.uniform(6, 15, n))
    flops = 2 * m * nn * k
    nbytes = 2 * (m * k + k * nn + m * nn)
    busy = np.maximum(flops / (1e15 * 0.8 * flops / (flops + 1e9)), nbytes / (3e12 * 0.85))
    roof, _ = gemm_roofline(m=m, n=nn, k=k, peak=1e15, bandwidth=3e12, a_bytes=2, b_bytes=2, c_bytes=2)
    return pd.DataFrame({"m": m, "n": nn, "k": k, "time_s": fixed_s + busy}), roof / busy


def test_known_surface_and_fixed_latency_are_recovered():
    """The times are recovered; the fixed latency is one of the candidate shares of the
    fastest row (a flexible surface can absorb part of it at small shapes, so it is not
    identified on its own: what is checked is the time it predicts)."""
    rows, eff = _synthetic_gemms()
    table = kf.Table("gemm", "bf16", rows, kf.gemm_features)
    grid, fixed_s, score, per_row = kf.fit_table(table, _Chip())
    fastest = rows["time_s"].min()
    assert any(fixed_s == pytest.approx(s * fastest) for s in kf.FIXED_SHARES)
    # held out by neighbourhood: the smooth truth is interpolated from the cells around it
    assert score["median_abs_err"] < 0.02 and score["p90_abs_err"] < 0.08
    assert per_row["err"].notna().all()


def test_the_fit_finds_a_kernels_row_tile():
    """Rows timed by a kernel that re-reads its weights per 128-row tile, at most 8 times:
    the GEMM fit keeps that tile and cap (candidates kernel_fit.GEMM_ROW_TILES, by held-out
    error); rows of a kernel that reads them once keep no tile."""
    m = np.round(2 ** RNG.uniform(0, 12, 3000))
    nn, k = np.round(2 ** RNG.uniform(9, 14, 3000)), np.round(2 ** RNG.uniform(9, 14, 3000))
    fits = {}
    for tile in (0.0, 128.0):
        roof, _ = gemm_roofline(m=m, n=nn, k=k, peak=1e15, bandwidth=3e12, a_bytes=1, b_bytes=1, c_bytes=2,
                                tile_m=tile, max_passes=8.0)
        rows = pd.DataFrame({"m": m, "n": nn, "k": k, "time_s": 3e-6 + roof / 0.8})
        g, fixed_s, score = kf._fit_gemm(kf.Table("gemm", "fp8", rows, kf.gemm_features), _Chip(), kf.SMOOTH)
        fits[tile] = score
    assert (fits[128.0].get("tile_m"), fits[128.0].get("max_passes")) == (128.0, 8.0)
    assert fits[128.0]["p90_abs_err"] < 0.05
    assert "tile_m" not in fits[0.0] and fits[0.0]["p90_abs_err"] < 0.05


def test_the_fit_finds_a_kernels_wave_tail():
    """Rows timed by a fixed-tile kernel (128 x 256 output tiles, the last wave as long as a
    full one on 108 SMs) with m stepping across wave boundaries: the GEMM fit keeps that tile
    (candidates kernel_fit.GEMM_WAVE_TILES, by held-out error) and predicts the steps, which
    a smooth surface without it misses; rows of a stream-K kernel (no tail) keep no tile."""
    m = np.round(2 ** RNG.uniform(7, 13, 3000))
    nn, k = 2.0 ** RNG.integers(10, 15, 3000), 2.0 ** RNG.integers(10, 15, 3000)
    tables = {}
    for tile in (0.0, 128.0):
        roof, _ = gemm_roofline(m=m, n=nn, k=k, peak=1e15, bandwidth=3e12, a_bytes=2, b_bytes=2, c_bytes=2,
                                wave_tile_m=tile, wave_tile_n=2 * tile, n_sms=_Chip.n_sms)
        rows = pd.DataFrame({"m": m, "n": nn, "k": k, "time_s": 3e-6 + roof / 0.8})
        tables[tile] = kf.Table("gemm", "bf16", rows, kf.gemm_features)
    fits = {tile: kf._fit_gemm(t, _Chip(), kf.SMOOTH)[2] for tile, t in tables.items()}
    smooth = kf.fit_table(tables[128.0], _Chip())[2]  # the tailed rows on a surface without the tile
    assert smooth["p90_abs_err"] > 2 * fits[128.0]["p90_abs_err"]
    assert (fits[128.0].get("wave_tile_m"), fits[128.0].get("wave_tile_n")) == (128.0, 256.0)
    assert fits[128.0]["p90_abs_err"] < 0.05
    assert "wave_tile_m" not in fits[0.0] and fits[0.0]["p90_abs_err"] < 0.05


def test_folds_hold_out_whole_neighbourhoods():
    coords = {"m": 2 ** RNG.uniform(0, 14, 5000), "n": 2 ** RNG.uniform(5, 16, 5000), "k": 2 ** RNG.uniform(5, 16, 5000)}
    fold = kf.neighbourhoods(coords, ("m", "n", "k"))
    assert set(np.unique(fold)) == set(range(kf.FOLDS))
    cell = np.stack([np.floor(np.log2(coords[a]) / kf.NEIGHBOURHOOD_LOG2) for a in "mnk"], -1)
    frame = pd.DataFrame(cell).assign(fold=fold)
    assert (frame.groupby([0, 1, 2])["fold"].nunique() == 1).all()  # a cell is never split across folds


def test_folds_deal_neighbouring_cells_to_unrelated_folds():
    """Each fold holds out cells a factor 2 wide, not runs of them: along one coordinate,
    consecutive cells share a fold about 1/FOLDS of the time (a linear hash dealt runs of
    five consecutive cells to one fold, holding out a factor 32)."""
    keys = 2.0 ** np.arange(0, 400)
    for slices in (1.0, 2.0, 8.0, 1024.0):
        fold = kf.neighbourhoods({"slices": np.full(keys.shape, slices), "keys": keys}, ("slices", "keys"))
        same = np.mean(fold[1:] == fold[:-1])
        assert 0.1 < same < 0.3, (slices, same)
        runs = np.diff(np.flatnonzero(np.diff(np.r_[-1, fold, -1]) != 0))
        assert runs.max() <= 5


def _synthetic_decode(groups=(8.0, 16.0, 32.0, 48.0, 64.0)):
    """Decode rows over slices x keys x GQA group where groups of 48 and up run a kernel
    ten times slower than those up to 32 (TensorRT-LLM's XQA serves groups up to 32 on
    Hopper; the others fall back to a slower kernel)."""
    sl, ky, gr = np.meshgrid(2.0 ** np.arange(0, 11), 2.0 ** np.arange(4, 15), np.asarray(groups), indexing="ij")
    sl, ky, gr = sl.ravel(), ky.ravel(), gr.ravel()
    rows = pd.DataFrame({"batch": sl, "n_kv_heads": 1.0, "n_heads": gr, "seq_len": 1.0, "context": ky - 1.0,
                         "head_dim": 128.0, "window": 0.0})

    class chip:
        class hbm:
            bandwidth_bytes_per_s = 3e12

        @staticmethod
        def peak(dtype):
            return 1e15
    roof, _ = kf.decode_features(rows, chip, "bf16/bf16")
    eff = 0.7 * sl * ky / (sl * ky + 2e4) * np.where(gr >= 48, 0.1, 1.0)
    return kf.Table("decode_attention", "bf16/bf16", rows.assign(time_s=roof / eff), kf.decode_features), chip


def test_each_measured_group_is_its_own_kernel():
    """The class axes get a knot at every measured value and a weak penalty: a group of 48,
    which runs the slow kernel, is not interpolated between 32 and 64, and the fast groups
    are not pulled toward the slow ones (each held out within 3%)."""
    table, chip = _synthetic_decode()
    grid, fixed_s, score, per_row = kf.fit_table(table, chip)
    assert np.isclose(grid.knots[grid.axes.index("group")], np.log2(48.0), atol=1e-6).any()
    err = per_row.assign(ae=per_row["err"].abs()).groupby("group")["ae"].median()
    assert (err < 0.03).all(), err


def _dispatched_decode(framework: str):
    """Decode rows of one GQA shape over slices x keys, timed by a smooth kernel where
    TensorRT-LLM's rule (xqa_dispatch.runs_xqa, 132 SMs) runs XQA and by a second smooth
    kernel, reading the cache at a quarter of the rate, where it falls back to MMHA."""
    from workbench.primitives.xqa_dispatch import runs_xqa
    table, chip = _synthetic_decode(groups=(8.0,))
    chip.n_sms = 132
    rows = table.rows
    roof, _ = kf.decode_features(rows, chip, "bf16/bf16")
    sl, ky = rows["batch"].to_numpy(), rows["context"].to_numpy() + 1.0
    xqa = runs_xqa(slices=sl, history=ky - 1.0, n_sms=132)
    eff = 0.7 * sl * ky / (sl * ky + 2e4) * np.where(xqa, 1.0, 0.25)
    rows = rows.assign(time_s=roof / eff, framework=framework)
    return kf.Table("decode_attention", "bf16/bf16", rows, kf.decode_features), chip, xqa


def test_tensorrt_llm_decode_tables_split_by_their_dispatch():
    """A TensorRT-LLM table whose rows follow the dispatch rule gets two surfaces (XQA's
    under the plain variant, MMHA's as @mmha), each row predicted on held-out folds within
    10% by the one its kernel runs; one surface across the cliff misses by more. The same
    rows labelled vLLM keep one surface: the rule is TensorRT-LLM's."""
    table, chip, xqa = _dispatched_decode("trtllm")
    fits = kf._fit_decode(table, chip, kf.SMOOTH)
    assert [v for v, _, _ in fits] == ["bf16/bf16", "bf16/bf16@mmha"]
    assert fits[0][2]["dispatch"] == "xqa" and fits[0][2]["rows"] == len(table.rows)
    assert fits[0][2]["p90_abs_err"] < 0.10
    _, _, single, _ = kf.fit_table(table, chip)
    assert single["p90_abs_err"] > fits[0][2]["p90_abs_err"]
    vllm, chip, _ = _dispatched_decode("vllm")
    assert [v for v, _, _ in kf._fit_decode(vllm, chip, kf.SMOOTH)] == ["bf16/bf16"]


def _gemv_table(warm: bool):
    """bf16 GEMVs (m = 1) over 1 MiB to 2 GiB of weights on a chip of 1 TB/s and 96 MiB of
    L2, timed at 0.85 of the DRAM rate, and with `warm` at 3x it where the weights fit 1.5x
    the L2 (a benchmark re-reading them from the L2, as the GDDR cards' tables do)."""
    class chip(_Chip):
        class hbm:
            bandwidth_bytes_per_s = 1e12
        l2_bytes = 96 * 2.0 ** 20
    n = 2.0 ** np.arange(9, 16)
    nn, kk = np.meshgrid(n, n, indexing="ij")
    rows = pd.DataFrame({"m": 1.0, "n": nn.ravel(), "k": kk.ravel()})
    nbytes = 2.0 * (rows.n * rows.k + rows.k + rows.n)
    rate = np.where(warm & (nbytes <= 1.5 * chip.l2_bytes), 3.0, 0.85) * 1e12
    table = kf.Table("gemm", "bf16", rows.assign(time_s=2e-6 + nbytes / rate), kf.gemm_features)
    return table, chip, nbytes


def test_a_table_timed_with_a_warm_l2_keeps_only_its_cold_rows():
    """Served iterations read weights and caches cold: a streaming kernel's table whose
    L2-sized rows beat the DRAM roofline (3x) loses the rows within 1.5x the L2; a table
    read cold keeps every row, and so does a class that does not stream its operands."""
    warm, chip, nbytes = _gemv_table(True)
    kept, left = kf.cold_rows(warm, chip)
    assert left == int((nbytes <= 1.5 * chip.l2_bytes).sum()) > 0
    assert len(kept.rows) == len(warm.rows) - left and (2.0 * kept.rows.n * kept.rows.k > 1.5 * chip.l2_bytes).all()
    cold, chip, _ = _gemv_table(False)
    assert kf.cold_rows(cold, chip) == (cold, 0)
    assert kf.cold_rows(kf.Table("attention", "bf16/bf16", warm.rows, kf.gemm_features), chip)[1] == 0


# ---- the committed surfaces ---------------------------------------------------------------

SPECS = [load_hardware(h) for h in list_gpus() if load_hardware(h).kernel_tables]
FILES = sorted(kernel_tables.KERNELS_DIR.glob("*.json"))
# The PCIe cards' GDDR tables (l40s, rtx_pro_6000, Intel's b60) run further above their DRAM roofline
# (96-128 MiB of L2 over 0.46-1.8 TB/s) and score above the bounds below; theirs:
# tests/specs/test_more_gpu_specs.py and tests/specs/test_b60.py.
DATACENTER_FILES = [p for p in FILES if p.stem.rsplit("-", 1)[0] not in ("l40s", "rtx_pro_6000", "b60")]


def test_every_gpu_with_tables_has_its_default_framework():
    assert {s.name for s in SPECS} >= {"a100_sxm", "h100_sxm", "h200_sxm", "b200", "b300", "gb200", "gb300"}
    for s in SPECS:
        assert s.default_framework in kernel_tables.frameworks(s), s.name


# No kernel beats its roofline where the roofline is the datasheet peak: at a compute-bound
# GEMM shape the surface stays under the peak (boost clocks: 5%). Against the HBM roofline it
# can: operands that fit in L2 (50 MB on H100, 126 MB on B200) are re-read from L2 across a
# benchmark's repetitions (measured: m=32768, n=32, k=512 bf16 on H100 in 7.4 us against
# 10.6 us of HBM traffic, 1.43x), a small batch's KV cache likewise, and an NVLS all-reduce
# sends S where the ring roofline counts 2(p-1)/p·S. For those the bound guards against a
# surface running away where no row was measured.
RUNAWAY_MAX_EFF = {"gemm": 3.0, "attention": 2.0, "decode_attention": 4.0, "collective": 4.0, "moe": 2.0,
                   "mla_decode": 4.0, "ep_a2a": 2.0, "gdn": 3.0, "dsa_module": 6.0,
                   "dsv4_module": 3.0, "mhc": 2.0, "msa_module": 4.0}  # EP: a low-latency kernel sending
# a copy per expert may still beat the roofline's one copy per rank by overlapping NVLink directions. DSA
# blocks: SGLang's prefill surfaces carry a 0.5-0.6 ms fixed latency (its sparse path's launches), which its
# dense-MHA prefills of <= 2048 keys finish within 0.2 ms of: their time beyond it runs up to 5.3x the
# block's roofline, as measured (no DSA surface exceeds its table's largest); every other DSA surface <= 1.5.
# DeepSeek-V4 blocks: at most 2.09x (H100 SGLang's 16-bit CSA decode: the roofline counts the indexer's FP4
# keys and the top-k gather at full width); mHC at most 1.6x. MSA blocks (MiniMax-M3): at most 3.28x (H100
# SGLang's 16-bit prefill, beside its 0.55 ms fixed latency, as DSA's), every other <= 2.4x


@pytest.mark.parametrize("path", DATACENTER_FILES, ids=[p.stem for p in DATACENTER_FILES])
def test_surfaces_are_physical(path):
    doc = json.loads(path.read_text())
    assert doc["source"].startswith("aiconfigurator-core")
    for s in doc["surfaces"]:
        g = EffGrid.from_dict(s)
        # sliding-window tiles: the roofline counts whole tiles, a kernel that skips the masked
        # part of the band runs above it
        bound = RUNAWAY_MAX_EFF[s["class"]] * (2.0 if "+window" in s["variant"] else 1.0)
        assert np.exp(g.log_eff.max()) < bound, (s["class"], s["variant"], float(np.exp(g.log_eff.max())))
        if s["class"] == "gemm" and s["variant"] in ("bf16", "fp8", "fp4"):
            assert float(g(m=8192.0, n=8192.0, k=8192.0)) <= 1.05, (s["variant"], float(g(m=8192.0, n=8192.0,
                                                                                           k=8192.0)))
        assert s["score"]["rows"] >= 20 and 0 <= s["score"]["median_abs_err"] <= s["score"]["p90_abs_err"]


# Held-out scores of the committed fits (5 folds by factor-2 neighbourhoods, dealt to folds
# by a mixing hash), as stated in the closing note: GEMM and context attention in the 16-bit
# and FP8 formats the layer model uses, on every catalog GPU the tables cover.
# Bounds (median, p90) over every datacenter GPU and framework; TensorRT-LLM's, the default,
# are lower (GEMM bf16 <= 4.4% / 16.1% (A100), fp8 <= 4.0% / 13.3%, prefill attention
# <= 2.9% / 10.6%, decode <= 3.7% / 18.1% (A100), NCCL all-reduce <= 2.9% / 17.3%). The robust
# GEMM fit (calibrate/surface_solve.py) lowered the largest GEMM medians (bf16 6.1% -> 5.3%,
# fp8 6.8% -> 6.2%, fp4 6.4% -> 4.9%) and raised FP4's largest p90 from 20.3% to 21.1% (B200
# SGLang): its bound moved from 21% to 22%.
BOUNDS = {("gemm", "bf16"): (0.065, 0.20), ("gemm", "fp8"): (0.08, 0.24), ("gemm", "fp4"): (0.07, 0.22),
          ("attention", "bf16/bf16"): (0.05, 0.21), ("attention", "fp8/fp8"): (0.05, 0.15),
          ("decode_attention", "bf16/bf16"): (0.05, 0.20), ("collective", "nccl/all_reduce"): (0.03, 0.18),
          # MoE layers (routing, gated grouped GEMMs, combine) over tokens per expert, expert
          # width, hidden size and touched experts: TensorRT-LLM block FP8 <= 5.3% / 25%
          ("moe", "bf16"): (0.15, 0.53), ("moe", "fp8"): (0.14, 0.66), ("moe", "fp8_block"): (0.14, 0.58),
          ("moe", "fp4"): (0.11, 0.31),
          # EP dispatch / combine (DeepEP and TensorRT-LLM's kernels, 56-414 rows a table):
          # TensorRT-LLM 1.6-9.6% / 6.7-23%
          ("ep_a2a", "dispatch/bf16"): (0.27, 0.75), ("ep_a2a", "combine/bf16"): (0.27, 0.75),
          # Gated DeltaNet token mixing (issue 18: <= 10% median by fold)
          ("gdn", "prefill/bf16"): (0.10, 0.35), ("gdn", "decode/bf16"): (0.10, 0.35),
          # Kimi Delta Attention (kda_perf, 33-44 decode rows a table: p90 up to 24%)
          ("gdn", "kda_prefill/bf16"): (0.10, 0.35), ("gdn", "kda_decode/bf16"): (0.10, 0.35)}
# DeepSeek Sparse Attention's attention block (dsa_*_module_perf): decode <= 4.4% / 23.4%; prefill
# <= 8.5% / 30.5% but Blackwell vLLM's (FlashInfer sparse MLA), whose 3-7 ms small shapes double at
# random, up to 13.6% / 38.4% (GB300)
BOUNDS.update({("dsa_module", f"{phase}/{fmt}/{kv}"): bound for phase, bound in (("decode", (0.05, 0.25)),
                                                                                  ("prefill", (0.15, 0.40)))
               for fmt in ("bf16", "fp8_block", "fp4") for kv in ("bf16", "fp8")})


@pytest.mark.parametrize("path", DATACENTER_FILES, ids=[p.stem for p in DATACENTER_FILES])
def test_held_out_scores_within_the_stated_bounds(path):
    doc = json.loads(path.read_text())
    for s in doc["surfaces"]:
        bound = BOUNDS.get((s["class"], s["variant"]))
        if bound:
            assert s["score"]["median_abs_err"] <= bound[0], (path.stem, s["class"], s["variant"], s["score"])
            assert s["score"]["p90_abs_err"] <= bound[1], (path.stem, s["class"], s["variant"], s["score"])


def test_pooled_scores_mix_the_surfaces_by_their_rows():
    """Two surfaces, |error| uniform on [0, 0.1] over 100 rows and on [0, 0.3] over 300 rows:
    the pooled CDF is F(x) = 0.25 min(x / 0.1, 1) + 0.75 x / 0.3, so the median is 0.1
    (F = 0.25 + 2.5 x = 0.5) and the 90th percentile 0.26; one surface alone pools to itself."""
    levels = kf.ABS_ERR_LEVELS
    ks = pd.DataFrame({"hardware": ["h100_sxm"] * 3, "kernel_class": ["gemm", "gemm", "attention"],
                       "rows": [100, 300, 50],
                       "abs_err_quantiles": [list(0.1 * levels), list(0.3 * levels), list(0.2 * levels ** 2)]})
    p = kf.pooled(ks).set_index("kernel_class")
    assert p.loc["gemm", "median_abs_err"] == pytest.approx(0.1, rel=0.01)
    assert p.loc["gemm", "p90_abs_err"] == pytest.approx(0.26, rel=0.01)
    assert (p.loc["gemm", "rows"], p.loc["gemm", "surfaces"]) == (400, 2)
    assert p.loc["attention", "median_abs_err"] == pytest.approx(0.2 * 0.5 ** 2, rel=0.02)
    assert p.loc["attention", "p90_abs_err"] == pytest.approx(0.2 * 0.9 ** 2, rel=0.02)


def test_host_bound_tables_are_the_ones_a_served_gemm_sets_aside():
    """vLLM's block-FP8 tables on Blackwell hold 128-210 us of fixed latency against a few us for
    its FP8 tables (gemm.HOST_BOUND_FACTOR): flagged, and no TensorRT-LLM or SGLang table is."""
    ks = kf.scores()
    flagged = ks[kf.host_bound(ks)]
    assert len(flagged) and (flagged.kernel_class == "gemm").all() and (flagged.framework == "vllm").all()
    assert set(flagged.variant.str.split("@").str[0]) == {"fp8_block"}
    assert {"b200", "gb200", "b300", "gb300"} <= set(flagged.hardware)


def test_a_score_keeps_its_error_quantiles():
    err = np.random.default_rng(0).normal(0.0, 0.1, 5000)
    s = kf.summarize(err)
    q = np.asarray(s["abs_err_quantiles"])
    assert len(q) == len(kf.ABS_ERR_LEVELS) and np.all(np.diff(q) >= 0)
    assert q[25] == pytest.approx(s["median_abs_err"], rel=1e-3)  # level 0.5
    assert q[45] == pytest.approx(s["p90_abs_err"], rel=1e-3)  # level 0.9


# ---- the primitives reproduce the tables (needs the silicon extra) ----------------------

def _measured(kind_file: str, gpu: str = "h100_sxm", framework: str = "trtllm"):
    pytest.importorskip("aiconfigurator_core")
    pytest.importorskip("pyarrow")
    from workbench.calibrate import aiconfigurator
    root = aiconfigurator.data_root()
    tables = aiconfigurator.available(root)
    t = tables[(tables.gpu == gpu) & (tables.framework == framework) & tables.file.str.endswith(kind_file)]
    newest = max(t.version, key=aiconfigurator._version_key)
    row = t[t.version == newest].iloc[0]
    return aiconfigurator._read(root.parents[1] / row.file, gpu, framework, newest, root)


def test_predict_gemm_reproduces_the_measured_table():
    """In-sample agreement of predict.gemm with every measured bf16 GEMM on H100 under
    TensorRT-LLM: the primitive evaluates exactly the roofline and surface that were fitted."""
    df = _measured("gemm_perf.parquet")
    df = df[df.dtype == "bf16"].sample(3000, random_state=0)
    row = {c: xr.DataArray(df[c].to_numpy(float), dims="row") for c in ("m", "n", "k")}
    t = predict.gemm(hardware="h100_sxm", framework="trtllm", **row).time_s.values
    err = np.abs(t / df.time_s.to_numpy() - 1)
    assert np.median(err) < 0.03 and np.quantile(err, 0.9) < 0.10


def test_predict_attention_reproduces_the_measured_table():
    df = _measured("context_attention_perf.parquet")
    df = df[(df.dtype == "bf16") & (df.kv_dtype == "bf16") & (df.window == 0)].sample(400, random_state=0)
    row = {c: xr.DataArray(df[c].to_numpy(float), dims="row") for c in ("batch", "seq_len", "n_heads", "n_kv_heads",
                                                                         "head_dim")}
    t = predict.attention(hardware="h100_sxm", framework="trtllm", **row).time_s.values
    err = np.abs(t / df.time_s.to_numpy() - 1)
    assert np.median(err) < 0.04 and np.quantile(err, 0.9) < 0.15


def test_hopper_block_fp8_gemm_pays_a_weight_pass_per_128_rows():
    """TensorRT-LLM's H100 block-FP8 GEMM at n = k = 8192 takes 34.3 us at m = 128 and
    59.6 us at m = 129 (aiconfigurator-core 0.12.0, systems/data/h100_sxm/gemm/trtllm/
    1.3.0rc20/gemm_perf.parquet): the committed surface carries tile_m 128 and predict.gemm
    reproduces both within 10%; the plain FP8 GEMM's surface has no row tile (no jump)."""
    r = predict.gemm(hardware="h100_sxm", framework="trtllm", m=[128.0, 129.0], n=8192.0, k=8192.0,
                     dtype="fp8_block")
    np.testing.assert_allclose(r.time_s.values, [34.3e-6, 59.6e-6], rtol=0.10)
    fp8 = predict.gemm(hardware="h100_sxm", framework="trtllm", m=[128.0, 129.0], n=8192.0, k=8192.0, dtype="fp8")
    assert float(fp8.time_s[1] / fp8.time_s[0]) < 1.05
