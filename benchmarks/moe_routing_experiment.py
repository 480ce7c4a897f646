"""Token routing of the MoE kernel tables, end to end: the serving rows scored with the
measured MoE-layer surfaces (predict.serving moe_mla_kernels="measured") fitted to the
tables' balanced rows or to their power-law rows, the frameworks' constants refitted under
each (workbench calibrate fit-serving), against the default (composed expert GEMMs).

    pip install -e '.[silicon]'
    python benchmarks/moe_routing_experiment.py --routing power_law_1.01
    python benchmarks/moe_routing_experiment.py --routing balanced
    python benchmarks/moe_routing_experiment.py --composed        # the default path, as shipped

Writes nothing in the project: the MoE tables of the GPUs with serving rows (H100, H200,
B200, GB200) are imported at that routing, their MoE surfaces refitted and the constants
refitted in a temporary copy of workbench/specs. Figures at 988b563 (2 cores, ~6 min each),
TPOT median |error| agg MoE / disagg MoE / agg dense, TTFT agg dense / agg MoE, TPOT
leave-one-model-out SGLang / TensorRT-LLM / vLLM:
composed 13.8 / 13.5 / 7.2, 27.2 / 23.0, 9.1 / 12.9 / 10.9;
measured balanced 14.4 / 10.7 / 7.1, 28.6 / 24.3, 12.0 / 13.6 / 14.8;
measured power_law_1.01 11.0 / 11.0 / 6.4, 28.7 / 24.7, 9.7 / 11.3 / 12.9.
"""
from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

GPUS = ("h100_sxm", "h200_sxm", "b200", "gb200")  # the GPUs of reference/serving_silicon.csv


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--routing", default="power_law_1.01", help="balanced, power_law_1.01 or power_law_1.2")
    ap.add_argument("--composed", action="store_true", help="score the shipped default path only")
    args = ap.parse_args()

    import pandas as pd

    from workbench import predict
    from workbench.backends import kernel_tables
    from workbench.calibrate import aiconfigurator, kernel_fit, serving_overheads, serving_rows

    pd.set_option("display.width", 200)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if not args.composed:
            kernels, tables = tmp / "kernels", tmp / "tables"
            shutil.copytree(kernel_tables.KERNELS_DIR, kernels)
            constants = tmp / "frameworks.yaml"
            shutil.copy(kernel_tables.SERVING_CONSTANTS, constants)
            kernel_tables.KERNELS_DIR, kernel_tables.SERVING_CONSTANTS = kernels, constants
            kernel_tables._load.cache_clear()
            kernel_tables.serving_constants.cache_clear()
            for gpu in GPUS:
                aiconfigurator.write(aiconfigurator.import_kernels(hardware=gpu, moe_routing=args.routing), tables)
                kernel_fit.fit_folder(tables, hardware=gpu, out_dir=kernels, classes=("moe",), log=lambda *_: None)
            kernel_tables._load.cache_clear()
            served = predict.serving

            def measured(*a, **k):
                k.setdefault("moe_mla_kernels", "measured")
                return served(*a, **k)
            predict.serving = measured
            serving_overheads.fit_serving(report=print)
        scored = serving_rows.predict_rows(serving_rows.load())
        print(serving_rows.summary(scored, by=("mode", "moe")).round(3).to_string())


if __name__ == "__main__":
    main()
