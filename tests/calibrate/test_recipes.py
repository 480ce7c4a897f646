"""calibrate/recipes.py: the disaggregated deployments InferenceX published, read from every
version of its configuration file, and the serving rows that leave their workers out
answered from them."""
from __future__ import annotations

import os
import re
import subprocess

import numpy as np
import pandas as pd
import pytest
import yaml

from workbench.calibrate import recipes, serving_rows
from workbench.cli import main
from workbench.errors import InputError
from workbench.specs import catalog_name, list_gpus, load_model
from workbench.workloads.speculative import MTP_ACCEPTANCE

ENTRY = {  # one disaggregated deployment as the file writes it (nvidia-master.yaml, 2026-03)
    "model": "deepseek-ai/DeepSeek-R1-0528", "model-prefix": "dsr1", "runner": "b200-multinode",
    "precision": "fp8", "framework": "dynamo-trt", "multinode": True, "disagg": True,
    "seq-len-configs": [{"isl": 1024, "osl": 1024, "search-space": [
        {"spec-decoding": "mtp", "conc-list": [1184],
         "prefill": {"num-worker": 1, "tp": 8, "ep": 8, "dp-attn": True, "additional-settings": [
             "CONFIG_FILE=recipes/trtllm/b200-fp8/1k1k/mtp/ctx1_gen3_dep8_batch384_eplb0_mtp3_1184.yaml"]},
         "decode": {"num-worker": 3, "tp": 8, "ep": 8, "dp-attn": True}},
        {"conc-list": [4, 8], "prefill": {"num-worker": 1, "tp": 8, "ep": 8, "dp-attn": True},
         "decode": {"num-worker": 3, "tp": 8, "ep": 8, "dp-attn": False}}]}]}


AGGREGATED = {  # an aggregated entry as the file writes it: a range of concurrencies per layout
    "model": "deepseek-ai/DeepSeek-R1-0528", "runner": "b200", "precision": "fp8", "framework": "trt",
    "image": "nvcr.io#nvidia/tensorrt-llm/release:1.2.0rc6.post3",
    "seq-len-configs": [{"isl": 1024, "osl": 1024, "search-space": [
        {"tp": 8, "ep": 1, "conc-start": 4, "conc-end": 100, "spec-decoding": "mtp"},
        {"tp": 8, "ep": 8, "dp-attn": True, "conc-start": 256, "conc-end": 256, "spec-decoding": "mtp"}]}]}


def test_entries_expand_every_concurrency_with_its_pools():
    config = {"dsr1-fp8-b200-dynamo-trt": ENTRY, "dsr1-fp8-b200-trt-mtp": AGGREGATED}
    got = pd.DataFrame(recipes.entries(config))
    dis, agg = got[got["mode"] == "disagg"], got[got["mode"] == "agg"]
    assert len(dis) == 3
    # 4 to 100 doubling with the end clamped in (generate_sweep_configs.py), then 256
    assert list(agg.concurrency) == [4, 8, 16, 32, 64, 100, 256]
    # MTP depth of the single-node TensorRT-LLM scripts: 3, or 1 with attention DP
    assert list(agg.draft_len) == [3] * 6 + [1] and set(agg.image_tag) == {"1.2.0rc6.post3"}
    assert (agg.prefill_workers == 0).all() and (agg.decode_workers == 1).all()
    mtp = dis[dis.concurrency == 1184].iloc[0]
    assert (mtp.model, mtp.gpu, mtp.framework, mtp.spec_decoding, mtp.draft_len) == \
        ("deepseek_r1", "b200", "trtllm", "mtp", 3)
    assert (mtp.decode_workers, mtp.decode_tp, mtp.decode_dp_attention, mtp.decode_max_batch) == (3, 8, True, 384)
    plain = dis[dis.concurrency == 8].iloc[0]
    assert (plain.spec_decoding, plain.draft_len, plain.decode_dp_attention) == ("none", 0, False)


NODE_SIZED = {  # a GB200 SGLang entry that sizes its pools in nodes (nvidia-master.yaml, 2025-12: "tp, ep,
    # and dp-attn do nothing because they are hardcoded"; its comment: "1 prefill worker at DEP4
    # and 4 decode workers at DEP4")
    "model": "deepseek-ai/DeepSeek-R1-0528", "model-prefix": "dsr1", "runner": "gb200", "precision": "fp8",
    "framework": "dynamo-sglang", "disagg": True, "image": "lmsysorg/sglang:v0.5.5.post2",
    "seq-len-configs": [{"isl": 1024, "osl": 1024, "search-space": [
        {"spec-decoding": "none", "conc-list": [4],
         "prefill": {"num-worker": 1, "tp": 1, "ep": 1, "dp-attn": True,
                     "additional-settings": ["PREFILL_NODES=1", "N_ADDITIONAL_FRONTENDS=9"]},
         "decode": {"num-worker": 4, "tp": 1, "ep": 1, "dp-attn": True, "additional-settings": ["DECODE_NODES=4"]}},
        {"spec-decoding": "none", "conc-list": [1024],  # "3 prefill workers each at DEP8, 1 decode worker at DEP48"
         "prefill": {"num-worker": 3, "tp": 1, "ep": 1, "dp-attn": True, "additional-settings": ["PREFILL_NODES=6"]},
         "decode": {"num-worker": 1, "tp": 1, "ep": 1, "dp-attn": True, "additional-settings": ["DECODE_NODES=12"]}}]}]}


def test_pools_sized_in_nodes_take_the_gpus_of_their_nodes():
    """Each worker spans nodes x 4 GPUs (a GB200 NVL72 compute tray) / workers, DEP as the
    entry's comments say; an entry on 8-GPU nodes takes 8 a node; an entry that states its
    own tp keeps it."""
    got = pd.DataFrame(recipes.entries({"dsr1-fp8-gb200-dynamo-sglang": NODE_SIZED})).set_index("concurrency")
    low, mid = got.loc[4], got.loc[1024]
    assert (low.prefill_workers, low.prefill_tp, low.prefill_ep, low.decode_workers, low.decode_tp, low.decode_ep) == \
        (1, 4, 4, 4, 4, 4)
    assert (mid.prefill_workers, mid.prefill_tp, mid.decode_workers, mid.decode_tp, mid.decode_ep) == (3, 8, 1, 48, 48)
    assert low.pools_from_nodes and mid.pools_from_nodes
    eight = dict(NODE_SIZED, runner="b200-multinode")
    assert pd.DataFrame(recipes.entries({"x": eight})).set_index("concurrency").loc[4].decode_tp == 8
    assert not pd.DataFrame(recipes.entries({"dsr1-fp8-b200-dynamo-trt": ENTRY})).pools_from_nodes.any()


def test_rows_copying_the_node_sized_tp_1_match_the_pools_their_nodes_held():
    """The 2026-04 GB200 SGLang rows state tp 1 and ep 1 per worker, as the file wrote them:
    they match the node-sized deployments and run as DEP4 / DEP48, not on one GPU (where
    DeepSeek-R1 does not fit)."""
    df = serving_rows.load()
    row = df[df.id == "2026_04_06_deepseek_r1_gb200_sglang_fp8_disagg_1024x1024_c1024_tp1_ep1_1171"].iloc[0]
    got, why = recipes.pools(row)
    assert why == "" and (got["prefill_workers"], got["prefill_attention_dp"], got["decode_workers"],
                          got["decode_attention_dp"], got["decode_ep"]) == (3, 8, 1, 48, 48)


def test_draft_len_from_the_settings_or_the_recipe_name():
    assert recipes.draft_len({"decode": {"additional-settings": ["DECODE_MTP_SIZE=2"]}}) == 2
    assert recipes.draft_len(ENTRY["seq-len-configs"][0]["search-space"][0]) == 3
    assert recipes.draft_len({"prefill": {"additional-settings": [
        "CONFIG_FILE=recipes/trtllm/gb200-fp4/1k1k/mtp/ctx2_gen1_dep16_batch256_eplb256_mtp1.yaml"]}}) == 1
    assert recipes.draft_len({"decode": {"additional-settings": ["SPECULATIVE_NUM_STEPS=2"]}}) == 2
    assert recipes.draft_len({"decode": {"num-worker": 1}}) == 0


def test_decode_max_batch_from_the_settings_or_the_recipe_name():
    """The decode engine's most running requests per attention replica: DECODE_MAX_BATCH_SIZE,
    else the `_batch<n>` of the srt-slurm recipe the entry names, whose decode max_batch_size
    it is (2 in recipes/trtllm/h100-fp8/1k1k/stp/ctx1_gen3_tep16_batch2_eplb0_mtp0.yaml, 8 in
    recipes/dsr1-128k8k/gb200/ctx3_ctx_pp8_gen1_dep16_batch8_eplb0_mtp2.yaml, both in
    github.com/ishandhanani/srt-slurm); 0 where nothing says. The shipped table carries it for
    the H100 deployment at 4,916 in flight (ctx2_gen1_dep16_batch256_eplb0_mtp0.yaml: 16 ranks
    of 256, the benchmark running 1.2x as many requests as the decode pool holds)."""
    assert recipes.decode_max_batch(ENTRY["seq-len-configs"][0]["search-space"][0]) == 384
    assert recipes.decode_max_batch({"decode": {"additional-settings": ["DECODE_MAX_BATCH_SIZE=512"]}}) == 512
    assert recipes.decode_max_batch({"prefill": {"additional-settings": [
        "CONFIG_FILE=recipes/trtllm/h100-fp8/1k1k/stp/ctx1_gen3_tep16_batch2_eplb0_mtp0.yaml"]}}) == 2
    assert recipes.decode_max_batch({"decode": {"num-worker": 1}}) == 0
    table = recipes.load()
    h100 = table[(table.config == "dsr1-fp8-h100-dynamo-trt") & (table.concurrency == 4916)]
    assert len(h100) and set(h100.decode_max_batch) == {256}
    assert (table[table["mode"] == "agg"].decode_max_batch == 0).all()


def _commit(repo, text: str, when: str):
    path = repo / ".github" / "configs" / "nvidia-master.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    env = dict(os.environ, GIT_AUTHOR_DATE=when, GIT_COMMITTER_DATE=when, GIT_AUTHOR_NAME="t",
               GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
    for args in (["add", "-A"], ["commit", "-q", "-m", when]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, env=env)


def test_import_dates_each_deployment_by_the_versions_that_held_it(tmp_path):
    """Three versions: concurrency 4 leaves in the second, 16 arrives in it, 8 stays; a version
    that does not parse is skipped."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    first = {"dsr1-fp8-b200-dynamo-trt": ENTRY}
    second = yaml.safe_load(yaml.safe_dump(first))
    second["dsr1-fp8-b200-dynamo-trt"]["seq-len-configs"][0]["search-space"][1]["conc-list"] = [8, 16]
    _commit(tmp_path, yaml.safe_dump(first), "2026-02-01T12:00:00+00:00")
    _commit(tmp_path, "key: [unclosed", "2026-02-15T12:00:00+00:00")
    _commit(tmp_path, yaml.safe_dump(second), "2026-03-01T12:00:00+00:00")
    df = recipes.import_recipes(tmp_path).set_index("concurrency")
    assert (df.loc[4, "first_date"], df.loc[4, "until_date"]) == ("2026-02-01", "2026-03-01")
    assert (df.loc[8, "first_date"], df.loc[8, "until_date"]) == ("2026-02-01", "")
    assert (df.loc[16, "first_date"], df.loc[16, "until_date"]) == ("2026-03-01", "")
    assert (df.loc[1184, "spec_decoding"], df.loc[1184, "draft_len"]) == ("mtp", 3)
    with pytest.raises(InputError, match="inferencex=.* is not a git repository"):
        recipes.import_recipes(tmp_path / "nowhere")
    out = tmp_path / "deployments.csv"  # the command writes what the function returns
    assert main(["calibrate", "import-recipes", "--inferencex", str(tmp_path), "--out", str(out)]) == 0
    assert len(recipes.load(out)) == len(df)
    assert main(["calibrate", "import-recipes", "--inferencex", str(tmp_path / "nowhere")]) == 2


def test_the_shipped_recipes_keep_their_provenance():
    df = recipes.load()
    assert len(df) > 500
    assert df.first_commit.map(lambda c: bool(re.fullmatch(r"[0-9a-f]{40}", c))).all()
    dated = df[df.until_date != ""]
    assert (dated.until_date >= dated.first_date).all()
    assert set(df.gpu) <= set(list_gpus()) and set(df.framework) <= set(recipes.FRAMEWORKS.values())
    assert all(load_model(m).name == m for m in set(df.model))  # catalog names, each a spec
    assert (df[df.spec_decoding == "none"].draft_len == 0).all() and set(df["mode"]) == {"agg", "disagg"}


def test_recipes_agree_with_the_rows_that_state_their_workers():
    """Two independent sources of one deployment: the disaggregated rows that state their
    workers, and the file's deployment for the same run on the row's date. Every row the
    recipes match gets the workers and layout it states (22 when this was written)."""
    rows = serving_rows.load()
    stated = rows[(rows["mode"] != "agg") & rows.prefill_num_workers.notna()]
    agree = 0
    for r in stated.itertuples():
        pools, _ = recipes.pools(r)
        if pools is None:
            continue
        assert (pools["prefill_workers"], pools["decode_workers"], pools["decode_tp"], pools["decode_attention_dp"]) \
            == (r.prefill_num_workers, r.decode_num_workers, r.decode_tp_size, r.decode_attention_dp_size), r.id
        agree += 1
    assert agree >= 20


def _row(rid: str):
    """One serving row as predict_rows reads them (a named tuple: `mode` is its column)."""
    rows = serving_rows.load()
    return next(rows[rows.id == rid].itertuples())


def test_rows_without_workers_take_the_published_pools_or_say_why():
    rows = serving_rows.load()
    # GB200, TensorRT-LLM FP8, 1k/1k at 27 in flight: the row `..._cfg386` states the same
    # run with 3 decode workers of TP8 and one prefill worker
    cfg, why = serving_rows.config(
        _row("2026_03_25_deepseek_r1_gb200_trtllm_fp8_disagg_1024x1024_c27_tp8_0_ep8_0_1057"))
    stated = _row("dsr1_gb200_trtllm_fp8_disagg_1024x1024_c27_cfg386")
    assert why == "" and cfg["function"] == "disaggregated"
    assert (cfg["decode_workers"], cfg["decode_tp"], cfg["prefill_workers"]) == \
        (stated.decode_num_workers, stated.decode_tp_size, stated.prefill_num_workers) == (3, 8, 1)
    # B200 FP8 at 1,184 in flight: the file's only deployment there decoded with MTP, its recipe
    # ctx1_gen3_dep8_batch384_eplb0_mtp3_1184.yaml three tokens deep
    mtp, why = serving_rows.config(
        _row("2026_03_25_deepseek_r1_b200_sxm_trtllm_fp8_disagg_1024x1024_c1184_tp8_0_ep8_0_356"))
    assert why == "" and (mtp["decode_workers"], mtp["decode_attention_dp"], mtp["draft_len"]) == (3, 8, 3)
    assert mtp["acceptance"] == MTP_ACCEPTANCE
    reasons = pd.Series([serving_rows.config(r)[1] for r in rows[rows["mode"] != "agg"].itertuples()])
    assert reasons.str.contains("ambiguous").any()


def test_rows_answered_from_the_recipes_against_their_measurements():
    """The disaggregated rows whose pools come from the recipes (74 decoding plainly and 39 with
    MTP when this was written, all DeepSeek-R1 on B200, GB200, H100): TPOT median |error| 7.0%
    for the 74, tolerance 12%. They enter the TPOT constants' fit with every answered row
    (calibrate/serving_overheads.py), where they are 113 of 1,127. Their TTFT is 29.5% off at
    the median (56% before the decode pools held only their engine's batch,
    recipes.decode_max_batch); one deployment of these runs (`..._cfg378`, GB200, 1k/8k,
    4 decode workers of TP8) measured a 38.6 s TTFT at 4 requests in flight, which nothing
    here explains (its 10.9 s at 36 the batch cap does)."""
    rows = serving_rows.load()
    lacking = rows[(rows["mode"] != "agg") & rows.prefill_num_workers.isna()]
    res = serving_rows.predict_rows(lacking).dropna(subset=["tpot_s"])
    res = res[res.draft_len == 0]
    assert len(res) >= 70
    assert np.median(np.abs(res.tpot_err)) <= 0.12
    assert catalog_name("deepseek-ai/DeepSeek-R1") in set(res.model.map(catalog_name))


def test_decode_pools_hold_their_engine_batch_and_the_rest_wait():
    """Two runs whose TTFT no prefill queue explains, answered by the decode engine's batch cap
    (recipes.decode_max_batch) over an FP8 cache (serving_rows.DISAGGREGATED_KV):
    - DeepSeek-R1 on 2 H100 prefill + 1 decode instance of DEP16, 4,916 requests in flight
      (ctx2_gen1_dep16_batch256): 4,096 decode, the rest wait; measured TTFT 24.1 s, TPOT
      117.9 ms (model 25.3 s and 120.8 ms when this was written; 144 s and 69 ms before the
      cap, when the whole cache decoded and the queue stood at the prefill pool);
    - DeepSeek-R1 on GB200, 1k/8k, 4 decode workers of TP8 at 36 in flight (`..._cfg378`,
      which states its workers; the recipe that ran them says 8 per worker): 32 decode, 4
      wait a slot; measured TTFT 10.9 s (12.1 s when this was written, 0.2 s before);
    - DeepSeek-R1 on H100, 3 decode workers of TEP16 at 9 in flight (`..._cfg494`): the file
      ran MTP and plain entries of that deployment on its date (recipes.pools calls it
      ambiguous), both `ctx1_gen3_tep16_batch2`, so the cap is known (recipes.
      engine_settings): 6 decode, 3 wait; measured TTFT 7.1 s (6.5 s when this was written,
      0.4 s before). Its TPOT, 2 sequences a step on 16 H100, is fast beside the cap: 25% when
      this was written, 32% since TensorRT-LLM's serving constants were refitted with NVFP4's
      scale bytes (graph saving 6 -> 10 us per kernel, which a 2-sequence step feels most).
    Tolerance 20% on each TTFT and on the first two TPOTs, 35% on the third's."""
    ids = {"2026_03_25_deepseek_r1_h100_sxm_trtllm_fp8_disagg_1024x1024_c4916_tp16_0_ep16_0_873": 256,
           "dsr1_gb200_trtllm_fp8_disagg_1024x8192_c36_cfg378": 8,
           "dsr1_h100_trtllm_fp8_disagg_1024x1024_c9_cfg494": 2}
    rows = serving_rows.load()
    res = serving_rows.predict_rows(rows[rows.id.isin(list(ids))]).set_index("id")
    for i, batch in ids.items():
        cfg, _ = serving_rows.config(_row(i))
        assert (cfg["kv"], cfg["decode_max_batch"]) == ("fp8", batch)
        assert abs(res.loc[i, "ttft_err"]) <= 0.20, res.loc[i]
        assert abs(res.loc[i, "tpot_err"]) <= (0.20 if batch > 2 else 0.35), res.loc[i]


def test_aggregated_rows_decode_with_mtp_where_their_version_ran_it():
    """The benchmark's MTP and plain entries for DeepSeek-R1 on 8 B200 list the same
    concurrencies and differ by image: TensorRT-LLM 1.2.0rc6.post3 ran MTP, post2 did not."""
    post3 = _row("2026_03_25_deepseek_r1_b200_sxm_trtllm_fp8_agg_8192x1024_c4_tp8_0_ep1_0_1014")
    post2 = _row("2026_03_25_deepseek_r1_b200_sxm_trtllm_fp8_agg_8192x1024_c8_tp8_0_ep1_0_1192")
    assert (post3.backend_version, post2.backend_version) == ("1.2.0rc6.post3", "1.2.0rc6.post2")
    assert recipes.speculation(post3) == (3, "") and recipes.speculation(post2) == (0, "")
    cfg, _ = serving_rows.config(post3)
    assert (cfg["draft_len"], cfg["acceptance"]) == (3, MTP_ACCEPTANCE)


@pytest.fixture(scope="module")
def mtp_runs():
    """Every answered row whose run decoded with MTP per the benchmark's configuration."""
    rows = serving_rows.load()
    drafted = [r.id for r in rows.itertuples() if (serving_rows.config(r)[0] or {}).get("draft_len")]
    return serving_rows.predict_rows(rows[rows.id.isin(drafted)]).dropna(subset=["tpot_s"])


def test_aggregated_runs_that_decoded_with_mtp_against_their_measurements(mtp_runs):
    """The 22 aggregated MTP runs (DeepSeek-R1 on 8 B200, TensorRT-LLM 1.2.0rc6.post3) at the
    cited acceptance (speculative.MTP_ACCEPTANCE, 0.85, never fitted): TPOT median |error|
    9.9% (median -7.9%) when this was written, against +50% predicted as plain decoding;
    tolerance 15%. Across acceptances 0.55-0.85 these rows would be best at about 0.8; the
    cited value is kept."""
    agg = mtp_runs[mtp_runs["mode"] == "agg"]
    assert len(agg) >= 20
    assert np.median(np.abs(agg.tpot_err)) <= 0.15


@pytest.mark.xfail(strict=True, reason=(
    "the 39 disaggregated MTP runs (DeepSeek-R1, depths 1-3, B200 / GB200 / H100) come out 22% fast at the median "
    "at the cited acceptance (33% before MLA's verify positions were costed and the decode pools held their "
    "engine's batch). At the acceptance lengths InferenceX measured for DeepSeek-V4-Pro's MTP on SPEED-Bench "
    "coding with thinking on (1.79 / 2.27 / 2.49 at depth 1 / 2 / 3, golden_al_distribution/dsv4_mtp.yaml) they "
    "would be 11.9% off, where the aggregated MTP runs (measured with the chat template on random prompts) would "
    "be 19.7% off (13.7% slow at the median): the two harnesses' prompts accept differently, and the rows do "
    "not say which acceptance ran"))
def test_disaggregated_runs_that_decoded_with_mtp_within_15_percent(mtp_runs):
    dis = mtp_runs[mtp_runs["mode"] == "disagg"]
    assert len(dis) >= 35
    assert np.median(np.abs(dis.tpot_err)) <= 0.15


def test_vendored_recipes_give_the_decode_batch_depth_and_cache():
    """The srt-slurm recipes the repository vendors (benchmarks/multi_node/srt-slurm-recipes/,
    from 2026-05), in each framework's keys: TensorRT-LLM's trtllm_config.decode (max_batch_size,
    speculative_config max_draft_len, kv_cache_config dtype), vLLM's vllm_config.decode
    (max-num-seqs, speculative-config num_speculative_tokens, kv-cache-dtype), SGLang's
    sglang_config.decode (max-running-requests, speculative-num-steps, kv-cache-dtype
    fp8_e4m3), as the vendored trtllm/deepseek-v4/agentx-gb300-20260811, vllm/deepseek-v4/8k1k
    and sglang/dsr1/b200-fp4 recipes write them; an aggregated recipe's `aggregated` section."""
    trt = {"backend": {"type": "trtllm", "trtllm_config": {"decode": {
        "max_batch_size": 4, "speculative_config": {"decoding_type": "MTP", "max_draft_len": 3},
        "kv_cache_config": {"dtype": "fp8", "free_gpu_memory_fraction": 0.7}}}}}
    vllm = {"backend": {"type": "vllm", "vllm_config": {"decode": {
        "max-num-seqs": 256, "kv-cache-dtype": "fp8",
        "speculative-config": '{"method":"mtp","num_speculative_tokens":3}'}}}}
    sglang = {"backend": {"type": "sglang", "sglang_config": {"decode": {
        "max-running-requests": 512, "kv-cache-dtype": "fp8_e4m3", "speculative-num-steps": 2}}}}
    agg = {"backend": {"vllm_config": {"aggregated": {"max-num-seqs": 64, "kv-cache-dtype": "auto"}}}}
    assert recipes.recipe_settings(trt, "disagg") == {"decode_max_batch": 4, "draft_len": 3, "decode_kv": "fp8"}
    assert recipes.recipe_settings(vllm, "disagg") == {"decode_max_batch": 256, "draft_len": 3, "decode_kv": "fp8"}
    assert recipes.recipe_settings(sglang, "disagg") == {"decode_max_batch": 512, "draft_len": 2, "decode_kv": "fp8"}
    assert recipes.recipe_settings(agg, "agg") == {"decode_max_batch": 64, "draft_len": 0, "decode_kv": ""}
    assert recipes.recipe_settings({}, "disagg") == {"decode_max_batch": 0, "draft_len": 0, "decode_kv": ""}


def test_synthetic_acceptance_length_and_the_acceptance_that_gives_it():
    """From 2026-07 the benchmark enforces the SPEED-Bench acceptance length of each model and
    depth (SYNTHETIC_ACCEPTANCE_LENGTH, runners/inject_synthetic_acceptance.py; DeepSeek-V4-Pro
    MTP with thinking on: 1.79 / 2.27 / 2.49 at depth 1 / 2 / 3, golden_al_distribution/
    dsv4_mtp.yaml). A row of such a run is predicted at the per-token acceptance that emits that
    many tokens per step (speculative.acceptance_for_tokens_per_step)."""
    from workbench.workloads.speculative import acceptance_for_tokens_per_step, expected_tokens_per_step
    on = {"prefill": {"additional-settings": ["SYNTHETIC_ACCEPTANCE=true", "SYNTHETIC_ACCEPTANCE_LENGTH=2.49"]}}
    off = {"prefill": {"additional-settings": ["SYNTHETIC_ACCEPTANCE_LENGTH=2.49"]}}
    assert recipes.acceptance_length(on) == 2.49 and recipes.acceptance_length(off) == 0.0
    lengths, depth = np.array([1.79, 2.27, 2.49]), np.array([1.0, 2.0, 3.0])
    a = acceptance_for_tokens_per_step(lengths, draft_len=depth)
    np.testing.assert_allclose(expected_tokens_per_step(acceptance=a, draft_len=depth), lengths, rtol=1e-12)
    assert a[0] == pytest.approx(0.79, rel=1e-9)  # depth 1: E = 1 + a
    table = recipes.load()
    dsv4 = table[(table.config == "dsv4-fp4-b200-dynamo-vllm-mtp") & (table.concurrency == 8)].iloc[0]
    # the depth from the vendored recipe (num_speculative_tokens 3), the length from the file's settings
    assert (dsv4.draft_len, dsv4.acceptance_length, dsv4.decode_kv) == (3, 2.49, "fp8")
    # a row of that run: its pools, its cache, and the acceptance giving 2.49 tokens per step
    template = _row("2026_03_25_deepseek_r1_h100_sxm_trtllm_fp8_disagg_1024x1024_c4916_tp16_0_ep16_0_873")
    row = template._replace(id="dsv4-b200-mtp-c8", model_path="deepseek-ai/DeepSeek-V4-Pro", system="b200_sxm",
                            backend="vllm", precision="fp4", gemm_quant_mode="nvfp4", moe_quant_mode="nvfp4",
                            isl=8192, osl=1024, concurrency=8.0, measured="2026-08-20", prefill_tp_size=1.0,
                            prefill_attention_dp_size=8.0, prefill_moe_ep_size=8.0, decode_tp_size=8.0,
                            decode_attention_dp_size=1.0, decode_moe_ep_size=1.0)
    cfg, why = serving_rows.config(row)
    assert why == "" and (cfg["draft_len"], cfg["kv"], cfg["decode_max_batch"]) == (3, "fp8", 256)
    assert float(expected_tokens_per_step(acceptance=cfg["acceptance"], draft_len=3)) == pytest.approx(2.49)
    # the new schema's DEP8 prefill (tp 1, ep 8, dp-attn): 8 GPUs per worker
    assert (cfg["prefill_tp"], cfg["prefill_attention_dp"], cfg["prefill_ep"]) == (1, 8, 8)


def test_import_recipes_writes_only_its_own_csv(tmp_path, capsys):
    """--out replaced any file (a user's notes.txt became a header-only CSV, exit 0) and a folder
    raised IsADirectoryError: refused in one line before the history is read; a history without
    deployments is a warning, and an empty import replaces no earlier CSV."""
    repo = tmp_path / "ix"
    (repo / "configs").mkdir(parents=True)
    (repo / "configs" / "nvidia-master.yaml").write_text("{}\n")
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "empty"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, env=env)
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    (tmp_path / "file").write_text("")
    for out, said in ((notes, "exists and was not written by import-recipes"), (tmp_path, "is a folder"),
                      (tmp_path / "file" / "d.csv", "cannot be written")):
        assert main(["calibrate", "import-recipes", "--inferencex", str(repo), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert f"out={str(out)!r} {said}" in err and len(err.strip().splitlines()) == 1, err
    assert notes.read_text() == "my notes\n"
    out = tmp_path / "d.csv"
    assert main(["calibrate", "import-recipes", "--inferencex", str(repo), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert err.startswith("workbench: warning: ") and "no deployments" in err and len(err.splitlines()) == 1
    assert recipes.load(out).empty and list(recipes.load(out).columns) == list(recipes.COLUMNS)
    full = tmp_path / "full"
    subprocess.run(["git", "init", "-q", str(full)], check=True)
    _commit(full, yaml.safe_dump({"dsr1-fp8-b200-dynamo-trt": ENTRY}), "2026-03-01T12:00:00+00:00")
    assert main(["calibrate", "import-recipes", "--inferencex", str(full), "--out", str(out)]) == 0  # its own CSV
    assert len(recipes.load(out)) == 3 and capsys.readouterr().err == ""
    before = out.read_text()
    assert main(["calibrate", "import-recipes", "--inferencex", str(repo), "--out", str(out)]) == 0
    assert "kept as it was" in capsys.readouterr().err and out.read_text() == before
