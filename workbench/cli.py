"""`workbench ...`: a thin command-line front on `workbench.predict` and the catalog.

    workbench predict inference --hardware h100_sxm --devices 8 --model llama_3_1_70b \\
        --tp 8 --batch 64 --prompt 2048 --generate 256 --weights fp8 --json
    workbench predict inference --hardware-file my_chip.yaml --set hbm_bandwidth_bytes_per_s=4e12,8e12 ...
    workbench list hardware|models|knobs HARDWARE|frameworks HARDWARE;  workbench list models NAME_OR_ID
    workbench sweep SPEC.yaml --out FILE.nc [--force]
    workbench run STUDY [--smoke] [-p name=value] | --all;  workbench report STUDY
    workbench demo

`workbench predict KIND` is generated from the signature and docstring of predict.KIND:
every keyword argument is an option (`pe_grid` -> `--pe-grid`), so a new argument needs
no edit here. A comma-separated value (--batch 1,8,64) is a sweep dimension, as a list
is in Python. Bad input prints one line naming the argument, the value and what is
allowed, and exits with status 2 (no traceback, no usage dump).
"""
from __future__ import annotations

import argparse
import inspect
import json
import os
import re
import sys
import time
from pathlib import Path

import numpy as np

from . import __version__, predict
from .errors import SHOWN_CHARS, InputError, brief
from .cli_list import list_command
from .specs import MODEL_KNOBS, load_hardware

KINDS = ("inference", "training", "serving", "disaggregated", "gemm", "attention", "collective")
WORDS = {"batch": ("max",), "generate": ("max",), "devices": ("min",)}  # words a numeric argument also takes
OVERRIDES = ("hardware_overrides", "model_overrides")


class _Parser(argparse.ArgumentParser):
    """argparse that raises InputError (one line at the top) instead of printing usage."""

    def error(self, message):
        for a in self._actions:  # a missing subcommand or positional: say what is allowed
            if a.choices and message.endswith(f"required: {a.dest}"):
                message += f"; allowed: {', '.join(a.choices)}"
        raise InputError(message)


def _kind(p: inspect.Parameter) -> str:
    """bool, dict, number or any, from the default (or the annotation where there is one)."""
    ann = "" if p.annotation is p.empty else getattr(p.annotation, "__name__", str(p.annotation))
    d = p.default
    if isinstance(d, bool) or ann.startswith("bool"):
        return "bool"
    if isinstance(d, dict) or "dict" in ann or p.name in OVERRIDES:
        return "dict"
    if isinstance(d, (int, float)) or ann.split(" ")[0] in ("int", "float"):
        return "number"
    return "any"


def _doc_help(doc: str, name: str) -> str:
    """The clause of a prose docstring that mentions `name`, or ''."""
    text = " ".join((doc or "").split())
    for clause in re.split(r"(?<=[.;])\s+(?=[A-Z`])|,\s+(?:and\s+)?(?=`)", text):
        if f"`{name}`" in clause or f"`{name}=" in clause:
            return clause.rstrip(".;,")
    return ""


def signature_table() -> dict:
    """kind -> {argument: (kind, default or inspect.Parameter.empty, help)} from predict.*."""
    table = {}
    for kind in KINDS:
        fn = getattr(predict, kind)
        table[kind] = {}
        for name, p in inspect.signature(fn).parameters.items():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            shown = "required" if p.default is p.empty else f"default: {p.default}"
            help_ = _doc_help(fn.__doc__, name) or _doc_help(predict.__doc__, name) or name.replace("_", " ")
            table[kind][name] = (_kind(p), p.default, f"{help_} ({shown})")
    return table


def _value(arg: str, kind: str, text: str):
    """`text` -> a scalar, or a list (a sweep) when it holds commas."""
    if kind == "dict":
        import yaml
        from .specs._base import _Loader
        try:
            v = yaml.load(text, Loader=_Loader)
        except yaml.YAMLError:
            v = None
        if not isinstance(v, dict):
            raise InputError(f"{arg}={text!r} is not allowed; allowed: a YAML mapping such as '{{knob: [1, 2]}}'")
        return v

    def one(t):
        t = t.strip()
        if kind == "bool":
            if t.lower() not in ("true", "false"):
                raise InputError(f"{arg}={t!r} is not allowed; allowed: true, false")
            return t.lower() == "true"
        for cast in (int, float) if t.isascii() else ():  # int('٢') is 2 in Python: digits are ASCII here
            try:
                return cast(t)
            except ValueError:
                pass
        if kind == "number" and t not in WORDS.get(arg, ()):
            allowed = ", ".join(("a number",) + tuple(repr(w) for w in WORDS.get(arg, ())))
            raise InputError(f"{arg}={t!r} is not a number; allowed: {allowed}")
        return t
    parts = [one(t) for t in text.split(",")]
    return parts if len(parts) > 1 else parts[0]


def _read_model_file(path: str):
    """A YAML file -> a dict of ModelSpec fields; a .json (Hugging Face config.json) -> the path."""
    if path.endswith(".json"):
        if not os.path.isfile(path):
            raise InputError(f"model_file={path!r} cannot be read; allowed: a Hugging Face config.json or "
                             "a YAML file of model-spec fields")
        return path
    from .specs._base import read_yaml
    return read_yaml(Path(path), arg="model_file")  # unreadable, not UTF-8, not YAML, not a mapping: InputError


def _hardware_file(path: str) -> str:
    """--hardware-file, checked here so that an error names it: a readable hardware YAML file
    (its path as predict takes it: a bare name gains ./, not to read as a catalog name)."""
    if not os.path.isfile(path):
        raise InputError(f"hardware_file={path!r} is not a readable file; allowed: a hardware YAML file in the "
                         "catalog's format, or one that derives_from a catalog chip")
    path = path if path.endswith((".yaml", ".yml")) or os.sep in path or "/" in path else os.path.join(".", path)
    load_hardware(path, arg="hardware_file")  # not UTF-8, not YAML, a bad field: one line naming hardware_file
    return path


def _kwargs(kind: str, args: dict, ns) -> dict:
    """The namespace of `workbench predict KIND` -> keyword arguments of predict.KIND."""
    kwargs = {a: _value(a, k, getattr(ns, a)) for a, (k, _, _) in args.items() if getattr(ns, a) is not None}
    for arg, file_arg in (("hardware", "hardware_file"), ("model", "model_file")):
        path = getattr(ns, file_arg, None)
        if path is not None and arg in kwargs:
            raise InputError(f"{arg}={getattr(ns, arg)!r} and {file_arg}={path!r} are both given; "
                             f"allowed: one of --{arg}, --{file_arg.replace('_', '-')}")
        if path is not None:
            kwargs[arg] = _read_model_file(path) if arg == "model" else _hardware_file(path)
        if arg in args and args[arg][1] is inspect.Parameter.empty and arg not in kwargs:
            listing = "hardware" if arg == "hardware" else "models"
            raise InputError(f"{arg} is required; allowed: a name from `workbench list {listing}` or "
                             f"--{file_arg.replace('_', '-')}")
    knobs, given = MODEL_KNOBS, {}
    for item in getattr(ns, "set", None) or []:
        knob, eq, text = item.partition("=")
        knob = knob.strip()
        if not eq or not knob or not text:
            raise InputError(f"set={item!r} is not allowed; allowed: KNOB=VALUE[,VALUE...]")
        if knob in given:  # the second would silently replace the first
            raise InputError(f"set {knob}={text!r} repeats set {knob}={given[knob]!r}; allowed: one --set per knob, "
                             f"a sweep as a comma list (--set {knob}={given[knob]},{text})")
        given[knob] = text
        twice = next((a for a in OVERRIDES if knob in (kwargs.get(a) or {})), None)
        if twice:  # --set would silently replace the mapping's value
            raise InputError(f"set {knob}={text!r} repeats {twice} {knob}={brief(kwargs[twice][knob])}; allowed: "
                             f"one of --set, --{twice.replace('_', '-')} per knob, a sweep as a comma list")
        target = "model_overrides" if knob in knobs else "hardware_overrides"
        if target not in args:
            raise InputError(f"set {knob}={text!r} is not allowed: predict.{kind} takes no {target}; "
                             f"allowed: {', '.join(a for a in OVERRIDES if a in args)} knobs")
        kwargs.setdefault(target, {})[knob] = _value(knob, "any", text)
    return kwargs


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
    if not ds.sizes:  # the point's categorical inputs as resolved (model, weights), then its outputs
        return {k: clean(ds[k].values.item()) for k in [*_scalar_coords(ds), *ds.data_vars]}
    df = ds.to_dataframe().reset_index()
    return [{k: clean(v) for k, v in row.items()} for row in df.to_dict(orient="records")]


def _scalar_coords(ds) -> list:
    return [k for k in ds.coords if ds.coords[k].ndim == 0]


def _predict(kind: str, args: dict, ns) -> int:
    ds = getattr(predict, kind)(**_kwargs(kind, args, ns))
    if ns.json:
        print(json.dumps(_jsonable(ds), indent=2))
    else:
        import pandas as pd
        with pd.option_context("display.max_colwidth", None):  # a reason is read whole, never cut at 50
            print(ds.to_dataframe().to_string() if ds.sizes else
                  pd.Series({k: ds[k].values.item() for k in [*_scalar_coords(ds), *ds.data_vars]}).to_string())
        if ds.attrs.get("held_out_error"):  # how far such a number is from measurement
            print(f"\n{ds.attrs['held_out_error']}")
    return 0


def _add_predict(psub, kind: str, args: dict) -> None:
    """One `workbench predict KIND` parser from the signature table."""
    doc = " ".join((getattr(predict, kind).__doc__ or "").split())
    sp = psub.add_parser(kind, help=doc.split(". ")[0], description=doc.replace("%", "%%"))
    for arg, (k, default, help_) in args.items():
        metavar = {"bool": "true|false", "dict": "YAML"}.get(k, "V[,V...]")
        required = default is inspect.Parameter.empty and arg not in ("hardware", "model")  # or --*-file
        sp.add_argument(f"--{arg.replace('_', '-')}", dest=arg, required=required, default=None,
                        metavar=metavar, help=help_.replace("%", "%%"))
    if "hardware" in args:
        sp.add_argument("--hardware-file", dest="hardware_file", metavar="FILE",
                        help="YAML hardware spec (hardware=FILE), instead of --hardware")
    if "model" in args:
        sp.add_argument("--model-file", dest="model_file", metavar="FILE",
                        help="YAML file of model-spec fields, or a Hugging Face config.json, instead of --model")
    if any(a in args for a in OVERRIDES):
        sp.add_argument("--set", action="append", metavar="KNOB=V[,V...]",
                        help="set a knob, repeatable; a comma list sweeps it (a dimension named after the knob): "
                             "model knobs go to model_overrides, others to hardware_overrides "
                             "(`workbench list knobs HARDWARE`)")
    sp.add_argument("--json", action="store_true", help="print JSON")


def _import_kernels(ns) -> int:
    """`workbench calibrate import-kernels --source aiconfigurator ... --out DIR`."""
    if ns.source != "aiconfigurator":
        raise InputError(f"source={ns.source!r} is not known; allowed: aiconfigurator")
    from .calibrate import aiconfigurator
    out = Path(ns.out)
    if out.exists() and not out.is_dir():
        raise InputError(f"out={ns.out!r} is a file; allowed: a folder")
    datasets = aiconfigurator.import_kernels(hardware=ns.hardware, framework=ns.framework, moe_routing=ns.moe_routing)
    for path in aiconfigurator.write(datasets, out):
        print(f"wrote {path}")
    return 0


def _fit_kernels(ns) -> int:
    """`workbench calibrate fit-kernels --tables DIR`: surfaces -> workbench/specs/kernels/."""
    from .calibrate import kernel_fit
    out = Path(ns.out) if ns.out else kernel_fit.KERNELS_DIR
    classes = None
    if ns.classes:
        from .primitives.kernel_fits import ROOFLINES
        classes = ns.classes.split(",")
        bad = [c for c in classes if c not in ROOFLINES]
        if bad:
            raise InputError(f"classes={bad[0]!r} is not a kernel class; allowed: {', '.join(ROOFLINES)}")
    for path in kernel_fit.fit_folder(Path(ns.tables), hardware=ns.hardware, framework=ns.framework, out_dir=out,
                                      classes=classes):
        print(f"wrote {path}")
    return 0


def _kernel_reference(ns) -> int:
    """`workbench calibrate kernel-repeatability --tables DIR` (two frameworks' tables of one
    library kernel against each other -> specs/kernels/repeatability.csv) and `kernel-roughness`
    (each table's points interpolated from their measured neighbours -> roughness.csv)."""
    from .calibrate import kernel_repeatability, kernel_roughness
    if ns.calibrate_command == "kernel-repeatability":
        df, mod, default, need = (kernel_repeatability.repeatability(Path(ns.tables)), kernel_repeatability,
                                  kernel_repeatability.REPEATABILITY_CSV, "no two frameworks' tables of one GPU")
    else:
        df, mod, default, need = (kernel_roughness.roughness(Path(ns.tables)), kernel_roughness,
                                  kernel_roughness.ROUGHNESS_CSV, "no kernel table of a catalog GPU")
        df = kernel_roughness.summary(df) if len(df) else df
    if df.empty:
        raise InputError(f"tables={ns.tables!r} holds {need}; allowed: the --out folder of workbench calibrate "
                         "import-kernels")
    print(f"wrote {mod.write(df, Path(ns.out) if ns.out else default)}")
    return 0


def _import_recipes(ns) -> int:
    """`workbench calibrate import-recipes --inferencex PATH` (calibrate/recipes.py)."""
    from .calibrate import recipes
    wrote, warning = recipes.import_to(ns.inferencex, ns.out)  # --out checked before the history is read
    if warning:
        print(f"workbench: warning: {warning}", file=sys.stderr)
    if wrote:
        print(f"wrote {wrote}")
    return 0


def _fit_serving(ns) -> int:
    """`workbench calibrate fit-serving` (calibrate/serving_overheads.fit_serving)."""
    from .calibrate import serving_overheads
    serving_overheads.fit_serving(report=print)
    return 0


def _run(ns) -> int:
    """`workbench run STUDY|--all`: exit 1 naming the study, cell and error on a failure."""
    from .studies import StudyError, list_studies, run_study
    if ns.all == bool(ns.study):
        raise InputError("study is required unless --all; allowed: one of " + ", ".join(list_studies()))
    if ns.all and ns.params:
        raise InputError(f"-p {ns.params[0]!r} is not allowed with --all (each study has its own parameters); "
                         "allowed: -p with one study")
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
            out = run_study(name, smoke=ns.smoke, overrides=overrides or None, out_root=ns.out, force=ns.force)
            print(f"{name}: {out} ({time.perf_counter() - t0:.1f} s)")
        except StudyError as e:
            print(f"workbench: error: {e}", file=sys.stderr)
            failed.append(name)
    return 1 if failed else 0


SWEEP_KEYS = ("function", "axes", "fixed", "variables", "memory_budget_bytes")


def _check_out(out: str, spec: str, force: bool) -> None:
    """--out must be a new file in an existing folder, or an existing one with --force
    (never the spec itself; the rest as sweep.check_out: .nc, or a .zarr store)."""
    from .sweep import check_out
    if os.path.exists(out) and os.path.samefile(out, spec):
        raise InputError(f"out={out!r} is the sweep spec itself; allowed: another path")
    check_out(out)
    if os.path.exists(out) and not force:
        raise InputError(f"out={out!r} exists; allowed: a new path, or --force to replace it")


def _sweep(ns, functions) -> int:
    """`workbench sweep SPEC.yaml --out FILE.nc [--force]`: the spec names a predict
    function, the axes (lists) and the fixed arguments; the result goes to FILE with units
    and provenance. An existing FILE is replaced only with --force, the spec never."""
    from . import sweep
    from .specs._base import read_yaml
    spec = read_yaml(Path(ns.spec), arg="spec")  # unreadable, not UTF-8, not YAML, not a mapping: InputError
    _check_out(ns.out, ns.spec, ns.force)
    unknown = sorted(set(spec) - set(SWEEP_KEYS), key=str)
    if unknown:
        raise InputError(f"{str(unknown[0])[:SHOWN_CHARS]}={brief(spec[unknown[0]])} is not a sweep key; allowed: "
                         f"{', '.join(SWEEP_KEYS)}")
    name = spec.get("function", "inference")
    if name not in functions:
        raise InputError(f"function={brief(name)} is not known; allowed: {', '.join(functions)}")
    for key in ("axes", "fixed"):
        if not isinstance(spec.get(key) or {}, dict):
            raise InputError(f"{key}={brief(spec[key])} is not allowed; allowed: a mapping of argument -> value(s)")
    axes = spec.get("axes") or {}
    if not axes:
        raise InputError("axes={} is not allowed; allowed: a mapping of argument -> list of values")
    try:  # the folder passed sweep.check_out's access test, yet a write there can fail (/proc, a full disk)
        ds = sweep.evaluate(getattr(predict, name), sweep.grid(**axes), fixed=spec.get("fixed") or {},
                            variables=spec.get("variables"), memory_budget_bytes=spec.get("memory_budget_bytes", 1e9),
                            scheduler=ns.scheduler, out=ns.out, progress=ns.progress)
    except OSError as e:  # one beside --out (the parts folder, the file): else not ours to explain
        folder = os.path.dirname(os.path.abspath(ns.out))  # '..' resolved; compared by path components
        if e.filename is None or os.path.commonpath([os.path.abspath(os.fsdecode(e.filename)), folder]) == folder:
            raise InputError(f"out={ns.out!r} cannot be written: {e.strerror or e}") from None
        raise
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


def parser(table: dict) -> argparse.ArgumentParser:
    p = _Parser(prog="workbench", description=__doc__.split("\n")[0])
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    pr = sub.add_parser("predict", help="predict one configuration or a sweep")
    psub = pr.add_subparsers(dest="kind", required=True)
    for kind, args in table.items():
        _add_predict(psub, kind, args)
    rn = sub.add_parser("run", help="run a study (or --all) into reports/")
    rn.add_argument("study", nargs="?", help="a name from studies/*.yaml")
    rn.add_argument("--all", action="store_true", help="run every study")
    rn.add_argument("--smoke", action="store_true", help="use the study's smoke parameters")
    rn.add_argument("-p", dest="params", action="append", default=[], metavar="NAME=VALUE",
                    help="override a notebook parameter (YAML syntax for lists)")
    rn.add_argument("--out", default=None, help="reports folder (default: reports/)")
    rn.add_argument("--force", action="store_true",
                    help="replace a report folder even if it holds files the workbench did not write")
    rp = sub.add_parser("report", help="render a study's HTML and PDF again from its executed notebook")
    rp.add_argument("study")
    rp.add_argument("--out", default=None, help="reports folder (default: reports/)")
    sw = sub.add_parser("sweep", help="evaluate a sweep described by a YAML file into a netCDF file")
    sw.add_argument("spec", help="YAML: function, axes, fixed, variables, memory_budget_bytes")
    sw.add_argument("--out", required=True, help="output .nc (or .zarr) path")
    sw.add_argument("--force", action="store_true", help="replace --out if it exists (never the spec itself)")
    sw.add_argument("--scheduler", default=None, help="dask.distributed scheduler address")
    sw.add_argument("--progress", action="store_true", help="show a progress bar")
    ls = sub.add_parser("list", help="list the catalog, or the knobs of one hardware")
    ls.add_argument("what", choices=["hardware", "models", "knobs", "frameworks"])
    ls.add_argument("name", nargs="?", help="knobs, frameworks: the hardware (name or YAML path); models: a "
                    "catalog name or Hugging Face id to describe")
    sub.add_parser("demo", help="print the demo prediction table")
    mb = sub.add_parser("microbench", help="run kernel microbenchmarks (needs PyTorch) into a netCDF file")
    mb.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    mb.add_argument("--quick", action="store_true", help="small sizes, a few repetitions (seconds on a CPU); "
                    "default: the full sweep of sizes (microbench.PLANS)")
    mb.add_argument("--out", required=True, help="netCDF file to write (.nc, in a writable folder)")
    mb.add_argument("--force", action="store_true", help="replace --out if it exists")
    cal = sub.add_parser("calibrate", help="import measured kernel tables into the measurement schema")
    csub = cal.add_subparsers(dest="calibrate_command", required=True)
    ik = csub.add_parser("import-kernels", help="kernel tables of a public source -> <out>/<gpu>-<framework>.nc")
    ik.add_argument("--source", required=True, help="aiconfigurator (pip install -e '.[silicon]')")
    ik.add_argument("--hardware", default=None, help="one GPU (default: every GPU the source covers)")
    ik.add_argument("--framework", default=None, help="trtllm, vllm or sglang (default: all; NCCL tables always)")
    ik.add_argument("--out", required=True, help="folder for the netCDF files")
    ik.add_argument("--moe-routing", default="balanced",
                    help="token routing of the MoE rows: balanced (what the committed surfaces fit), "
                         "power_law_1.01 or power_law_1.2")
    fk = csub.add_parser("fit-kernels", help="fit kernel efficiency surfaces to imported tables, scored by "
                                             "held-out shape neighbourhoods")
    fk.add_argument("--tables", required=True, help="the --out folder of import-kernels")
    fk.add_argument("--hardware", default=None, help="one catalog GPU (default: every GPU with tables)")
    fk.add_argument("--framework", default=None, help="trtllm, vllm or sglang (default: all)")
    fk.add_argument("--out", default=None, help="folder for the JSON surfaces (default: workbench/specs/kernels)")
    fk.add_argument("--classes", default=None, help="refit only these kernel classes (comma-separated, e.g. moe), "
                                                    "keeping the file's other surfaces")
    kr = csub.add_parser("kernel-repeatability", help="how far two frameworks' tables of one library kernel agree "
                                                      "(the floor under a kernel model's error)")
    kr.add_argument("--tables", required=True, help="the --out folder of import-kernels")
    kr.add_argument("--out", default=None, help="CSV to write (default: workbench/specs/kernels/repeatability.csv)")
    kn = csub.add_parser("kernel-roughness", help="how well each kernel table predicts its points from their "
                                                  "measured neighbours (a model-free reference for the surfaces)")
    kn.add_argument("--tables", required=True, help="the --out folder of import-kernels")
    kn.add_argument("--out", default=None, help="CSV to write (default: workbench/specs/kernels/roughness.csv)")
    ir = csub.add_parser("import-recipes", help="the deployments InferenceX's configuration ran (its git history)")
    ir.add_argument("--inferencex", required=True, help="a clone of github.com/SemiAnalysisAI/InferenceX")
    ir.add_argument("--out", default=None, help="CSV (default: calibrate/reference/inferencex_deployments.csv)")
    csub.add_parser("fit-serving", help="fit each serving framework's per-iteration overhead to the measured "
                                        "serving runs (specs/serving/frameworks.yaml), leave-one-out scored")
    return p


def _command(ns, table) -> int:
    if ns.command == "predict":
        return _predict(ns.kind, table[ns.kind], ns)
    if ns.command == "calibrate":
        return {"fit-kernels": _fit_kernels, "fit-serving": _fit_serving, "import-recipes": _import_recipes,
                "kernel-repeatability": _kernel_reference,
                "kernel-roughness": _kernel_reference}.get(ns.calibrate_command, _import_kernels)(ns)
    if ns.command == "microbench":  # it checks --out before anything runs; the full sweep unless --quick
        from .microbench.__main__ import main as microbench_main
        return microbench_main(["--device", ns.device, "--out", ns.out, "--quick" if ns.quick else "--full"]
                               + (["--force"] if ns.force else []))
    if ns.command == "run":
        return _run(ns)
    if ns.command == "report":
        from .studies import rerender
        print(rerender(ns.study, out_root=ns.out))
        return 0
    if ns.command == "sweep":
        return _sweep(ns, tuple(table))
    return list_command(ns) if ns.command == "list" else demo()


def _interrupted(ns) -> str:
    """What a Ctrl-C left: a sweep to .nc, microbench, import-recipes, a study write aside and rename at the end."""
    cmd, out = getattr(ns, "command", None), str(getattr(ns, "out", None) or "")
    if cmd == "report" or getattr(ns, "calibrate_command", "import-recipes") != "import-recipes" or (
            cmd == "sweep" and out.rstrip("/").endswith(".zarr")):
        return "an output in progress may be incomplete"
    return "the study in progress was not written" if cmd == "run" else "nothing written"


def main(argv=None) -> int:
    """Exit 2 with one line on bad input, 130 on Ctrl-C, 141 when stdout's reader has gone (`| head`)."""
    table, ns = signature_table(), None
    try:
        ns = parser(table).parse_args(argv)
        rc = _command(ns, table)
        sys.stdout.flush()  # a closed pipe shows here, inside the try
        return rc
    except InputError as e:
        print(f"workbench: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"workbench: interrupted; {_interrupted(ns)}", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the Python docs' recipe (signal module): stdout to devnull, no second error at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
