"""`workbench ...`: a thin command-line front on `workbench.predict` and the catalog.

    workbench predict inference --hardware h100_sxm --devices 8 --model llama_3_1_70b \\
        --tp 8 --batch 64 --prompt 2048 --generate 256 --weights fp8 --json
    workbench list hardware|models
    workbench sweep SPEC.yaml --out FILE.nc
    workbench run STUDY [--smoke] [-p name=value] | --all;  workbench report STUDY
    workbench demo

A comma-separated value (--batch 1,8,64) is a sweep dimension, as a list is in Python.
Bad input prints one line naming the argument, the value and what is allowed, and
exits with status 2 (no traceback).
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from . import predict
from .errors import InputError
from .specs import list_hardware, list_models

# argument -> (type, default or None for required, help)
_ARGS = {
    "inference": {
        "hardware": (str, None, "hardware spec name(s)"), "model": (str, None, "model spec name(s)"),
        "devices": (int, "", "devices in all (default tp*pp)"), "tp": (int, 1, "tensor parallel"),
        "pp": (int, 1, "pipeline parallel"), "batch": ("batch", 1, "sequences, or 'max'"),
        "prompt": (int, 2048, "prompt tokens"), "generate": (int, 256, "generated tokens"),
        "weights": (str, "bf16", "weight dtype"), "activations": (str, "", "math dtype"),
        "kv": (str, "", "KV-cache dtype"),
        "pe_grid": (int, "", "wafers: side of each layer's PE region (default: fastest that fits)"),
        "mapping": (str, "mesh", "wafers: mesh (WaferLLM) or gpu_style"),
        "placement": (str, "regions", "wafers: regions (weights resident) or streaming (MemoryX)")},
    "training": {
        "hardware": (str, None, "hardware spec name(s)"), "model": (str, None, "model spec name(s)"),
        "devices": (int, "", "devices in all (GPUs) or CS systems"), "tp": (int, 1, "tensor parallel"),
        "pp": (int, 1, "pipeline parallel"), "dp": (int, "", "data parallel (default: devices / tp·pp·cp)"),
        "cp": (int, 1, "context parallel"), "ep": (int, 1, "expert parallel"),
        "seq_len": (int, 2048, "tokens per sequence"), "global_batch": (int, 512, "sequences per step"),
        "micro_batch": (int, 1, "sequences per micro-batch"), "precision": (str, "bf16", "bf16 or fp8"),
        "zero": (int, 1, "ZeRO stage 0-3"), "recompute": (str, "none", "none, selective or full"),
        "virtual_stages": (int, 1, "interleaved pipeline stages per device"),
        "attention": (str, "flash2", "attention kernel: flash2, flash1 (FA1 / Triton) or materialized (scores in HBM)")},
    "serving": {
        "hardware": (str, None, "one hardware name"), "model": (str, None, "one model name"),
        "devices": (int, "", "CS systems (wafers)"), "tp": (int, 1, "tensor parallel"), "pp": (int, 1, ""),
        "prompt": (int, 2048, "mean prompt tokens"), "generate": (int, 256, "mean generated tokens"),
        "arrival_rate": (float, "", "requests/s (comma list; default: a grid to saturation)"),
        "ttft_slo": (float, 2.0, "TTFT target [s]"), "tpot_slo": (float, 0.05, "TPOT target [s]"),
        "quantile": (float, 0.9, "TTFT quantile the target applies to"), "weights": (str, "bf16", ""),
        "kv": (str, "", ""), "acceptance": (float, 0.0, "speculative: per-token acceptance"),
        "draft_len": (int, 0, "speculative: drafted tokens per step (0: off)"),
        "draft_model": (str, "", "speculative: draft model (default: MTP heads)")},
    "disaggregated": {
        "prefill_hardware": (str, None, ""), "decode_hardware": (str, None, ""), "model": (str, None, ""),
        "prefill_tp": (int, 1, ""), "decode_tp": (int, 1, ""), "prefill_devices": (int, "", "CS systems"),
        "decode_devices": (int, "", "CS systems"), "prompt": (int, 2048, ""), "generate": (int, 256, ""),
        "ttft_slo": (float, 2.0, ""), "tpot_slo": (float, 0.05, ""), "weights": (str, "bf16", ""),
        "kv": (str, "", ""), "total_devices": (int, 64, "device budget for the integer split")},
    "gemm": {"hardware": (str, None, ""), "m": (int, None, ""), "n": (int, None, ""),
             "k": (int, None, ""), "dtype": (str, "bf16", ""),
             "pe_grid": (int, "", "wafers: side of the PE region"),
             "mapping": (str, "mesh", "wafers: mesh or gpu_style")},
    "attention": {"hardware": (str, None, ""), "batch": (int, None, ""), "seq_len": (int, None, ""),
                  "n_heads": (int, None, ""), "head_dim": (int, None, ""), "dtype": (str, "bf16", ""),
                  "causal": ("bool", "true", ""),
                  "kernel": (str, "flash2", "flash2, flash1 or materialized (scores in HBM)")},
    "collective": {"hardware": (str, None, ""), "devices": (int, None, ""),
                   "op": (str, None, "all_reduce|all_gather|reduce_scatter|all_to_all|send_recv"),
                   "size_bytes": (float, None, "")},
}


def _convert(arg: str, kind, text: str):
    def one(t):
        t = t.strip()
        if kind == "batch":
            if t == "max":
                return t
            try:
                return int(t)
            except ValueError:
                raise InputError(f"{arg}={t!r} is not allowed; allowed: a positive integer or 'max'") from None
        if kind == "bool":
            if t.lower() not in ("true", "false"):
                raise InputError(f"{arg}={t!r} is not allowed; allowed: true, false")
            return t.lower() == "true"
        try:
            v = float(t) if kind is float else kind(t)
        except ValueError:
            raise InputError(f"{arg}={t!r} is not allowed; allowed: {kind.__name__} values") from None
        return v
    parts = [one(t) for t in text.split(",")]
    return parts if len(parts) > 1 else parts[0]


def _jsonable(ds) -> object:
    """One point -> a dict of scalars; a sweep -> a list of records."""
    def clean(v):
        if isinstance(v, (np.bool_, bool)):
            return bool(v)
        if isinstance(v, (np.integer,)):
            return int(v)
        if isinstance(v, (np.floating, float)):
            return None if not np.isfinite(v) else float(v)
        return v if isinstance(v, (str, int)) else str(v)
    if not ds.sizes:
        return {k: clean(ds[k].values.item()) for k in ds.data_vars}
    df = ds.to_dataframe().reset_index()
    return [{k: clean(v) for k, v in row.items()} for row in df.to_dict(orient="records")]


def _predict(kind: str, ns) -> int:
    kwargs = {}
    for arg, (typ, default, _) in _ARGS[kind].items():
        text = getattr(ns, arg)
        if text in (None, ""):
            continue
        kwargs[arg] = _convert(arg, typ, str(text))
    if kind in ("inference", "training") and ns.model_file:
        import yaml
        from .specs._base import _Loader
        try:
            with open(ns.model_file) as f:
                kwargs["model"] = yaml.load(f, Loader=_Loader)
        except (OSError, yaml.YAMLError) as e:
            raise InputError(f"model_file={ns.model_file!r} cannot be read ({type(e).__name__}); "
                             "allowed: a YAML file of model-spec fields") from None
        if not isinstance(kwargs["model"], dict):
            raise InputError(f"model_file={ns.model_file!r} is not a YAML mapping; "
                             "allowed: a YAML file of model-spec fields") from None
    ds = getattr(predict, kind)(**kwargs)
    if ns.json:
        print(json.dumps(_jsonable(ds), indent=2))
    else:
        print(ds.to_dataframe().to_string() if ds.sizes else ds.to_pandas().to_string())
    return 0


def _run(ns) -> int:
    """`workbench run STUDY|--all`: exit 1 naming the study, cell and error on a failure."""
    from .studies import StudyError, list_studies, run_study
    if ns.all == bool(ns.study):
        raise InputError("study is required unless --all; allowed: one of " + ", ".join(list_studies()))
    overrides = {}
    for item in ns.params:
        if "=" not in item:
            raise InputError(f"-p {item!r} is not allowed; allowed: NAME=VALUE")
        key, value = item.split("=", 1)
        overrides[key.strip()] = value
    names = list_studies() if ns.all else [ns.study]
    failed = []
    for name in names:
        t0 = time.perf_counter()
        try:
            out = run_study(name, smoke=ns.smoke, overrides=overrides if not ns.all else None, out_root=ns.out)
            print(f"{name}: {out} ({time.perf_counter() - t0:.1f} s)")
        except StudyError as e:
            print(f"workbench: error: {e}", file=sys.stderr)
            failed.append(name)
    return 1 if failed else 0


SWEEP_KEYS = ("function", "axes", "fixed", "variables", "memory_budget_bytes")


def _sweep(ns) -> int:
    """`workbench sweep SPEC.yaml --out FILE.nc`: the spec names a predict function, the
    axes (lists) and the fixed arguments; the result goes to FILE with units and provenance."""
    import yaml
    from . import sweep
    from .specs._base import _Loader
    try:
        with open(ns.spec) as f:
            spec = yaml.load(f, Loader=_Loader) or {}
    except OSError as e:
        raise InputError(f"spec={ns.spec!r} cannot be read ({e.strerror}); allowed: a YAML file") from None
    unknown = sorted(set(spec) - set(SWEEP_KEYS))
    if unknown:
        raise InputError(f"{unknown[0]}={spec[unknown[0]]!r} is not a sweep key; allowed: {', '.join(SWEEP_KEYS)}")
    name = spec.get("function", "inference")
    if name not in _ARGS:
        raise InputError(f"function={name!r} is not known; allowed: {', '.join(_ARGS)}")
    axes = spec.get("axes") or {}
    if not axes:
        raise InputError("axes={} is not allowed; allowed: a mapping of argument -> list of values")
    ds = sweep.evaluate(getattr(predict, name), sweep.grid(**axes), fixed=spec.get("fixed") or {},
                        variables=spec.get("variables"),
                        memory_budget_bytes=float(spec.get("memory_budget_bytes", 1e9)),
                        scheduler=ns.scheduler, out=ns.out, progress=ns.progress)
    print(f"wrote {ns.out}: {dict(ds.sizes)}, {len(ds.data_vars)} variables")
    ds.close()
    return 0


def demo() -> int:
    """The short demo table of the main job: Llama 3.1 70B on each GPU at batch 1 and max."""
    ds = predict.inference(hardware=["a100_sxm", "h100_sxm", "h200_sxm", "b200", "mi300x"],
                           model="llama_3_1_70b", tp=8, batch=[1, 64], prompt=2048,
                           generate=256, weights=["bf16", "fp8"])
    cols = ["ttft_s", "tpot_s", "output_tokens_per_s_per_device", "output_tokens_per_s_per_user",
            "memory_per_device_bytes", "fits", "bound", "reason"]
    df = ds[cols].to_dataframe()
    df["ttft_ms"] = df.pop("ttft_s") * 1e3
    df["tpot_ms"] = df.pop("tpot_s") * 1e3
    df["memory_GB"] = df.pop("memory_per_device_bytes") / 1e9
    print("Llama 3.1 70B, TP8, prompt 2048, generate 256 (static batch); FP8 weights use FP8 math")
    print(df.round(2).to_string())
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="workbench", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    pr = sub.add_parser("predict", help="predict one configuration or a sweep")
    psub = pr.add_subparsers(dest="kind", required=True)
    for kind, args in _ARGS.items():
        sp = psub.add_parser(kind)
        for arg, (_, default, help_) in args.items():
            required = default is None and not (kind in ("inference", "training") and arg == "model")
            sp.add_argument(f"--{arg.replace('_', '-')}", dest=arg, required=required,
                            default=default, help=help_)
        if kind in ("inference", "training"):
            sp.add_argument("--model-file", dest="model_file", default="",
                            help="YAML file of model-spec fields (a model not in the catalog)")
        sp.add_argument("--json", action="store_true", help="print JSON")
    rn = sub.add_parser("run", help="run a study (or --all) into reports/")
    rn.add_argument("study", nargs="?", help="a name from studies/*.yaml")
    rn.add_argument("--all", action="store_true", help="run every study")
    rn.add_argument("--smoke", action="store_true", help="use the study's smoke parameters")
    rn.add_argument("-p", dest="params", action="append", default=[], metavar="NAME=VALUE",
                    help="override a notebook parameter (YAML syntax for lists)")
    rn.add_argument("--out", default=None, help="reports folder (default: reports/)")
    rp = sub.add_parser("report", help="render a study's HTML and PDF again from its executed notebook")
    rp.add_argument("study")
    rp.add_argument("--out", default=None, help="reports folder (default: reports/)")
    sw = sub.add_parser("sweep", help="evaluate a sweep described by a YAML file into a netCDF file")
    sw.add_argument("spec", help="YAML: function, axes, fixed, variables, memory_budget_bytes")
    sw.add_argument("--out", required=True, help="output .nc (or .zarr) path")
    sw.add_argument("--scheduler", default=None, help="dask.distributed scheduler address")
    sw.add_argument("--progress", action="store_true", help="show a progress bar")
    ls = sub.add_parser("list", help="list the catalog")
    ls.add_argument("what", choices=["hardware", "models"])
    sub.add_parser("demo", help="print the demo prediction table")
    mb = sub.add_parser("microbench", help="run kernel microbenchmarks (needs PyTorch) into a netCDF file")
    mb.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    mb.add_argument("--quick", action="store_true", help="small sizes")
    mb.add_argument("--out", required=True)
    ns = p.parse_args(argv)
    try:
        if ns.command == "predict":
            if ns.kind in ("inference", "training") and not (ns.model or ns.model_file):
                raise InputError("model is required; allowed: a name from `workbench list models` or --model-file")
            return _predict(ns.kind, ns)
        if ns.command == "microbench":
            from .microbench.__main__ import main as microbench_main
            return microbench_main(["--device", ns.device, "--out", ns.out] + (["--quick"] if ns.quick else []))
        if ns.command == "run":
            return _run(ns)
        if ns.command == "report":
            from .studies import rerender
            print(rerender(ns.study, out_root=ns.out))
            return 0
        if ns.command == "sweep":
            return _sweep(ns)
        if ns.command == "list":
            names = list_hardware() if ns.what == "hardware" else list_models()
            for n in names:
                print(n)
            return 0
        return demo()
    except InputError as e:
        print(f"workbench: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
