"""Studies: `studies/<name>.yaml` names a parameterized notebook, its parameters and the
smaller `smoke` overrides CI runs; `run_study` executes it with papermill into a
temporary folder, renders the report, and moves the folder into `reports/<name>/` only
when everything succeeded, so a failed run never replaces the last good report.
"""
from __future__ import annotations

import datetime as _dt
import json
import platform
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from . import __version__
from .errors import InputError

ROOT = Path(__file__).resolve().parents[1]
STUDY_KEYS = ("name", "title", "notebook", "parameters", "smoke", "report")
FORMATS = ("html", "pdf")


class StudyError(RuntimeError):
    """A study run failed; the message names the study, the cell and the error."""


@dataclass
class Study:
    name: str
    title: str
    notebook: Path
    parameters: dict = field(default_factory=dict)
    smoke: dict = field(default_factory=dict)
    formats: tuple = FORMATS


def studies_dir(root: Path = ROOT) -> Path:
    return root / "studies"


def list_studies(root: Path = ROOT) -> list[str]:
    return sorted(p.stem for p in studies_dir(root).glob("*.yaml"))


STUDY_NAME = re.compile(r"^[a-z0-9_]+$")  # a study is named, never addressed by a path


def load_study(name: str, root: Path = ROOT) -> Study:
    known = list_studies(root)
    if not isinstance(name, str) or not STUDY_NAME.match(name) or name not in known:
        raise InputError(f"study={str(name)[:200]!r} is not known; allowed: {', '.join(known) or 'none'} "
                         "(names from studies/, not paths)")
    path = studies_dir(root) / f"{name}.yaml"
    data = yaml.safe_load(path.read_text()) or {}
    unknown = sorted(set(data) - set(STUDY_KEYS))
    if unknown:
        raise InputError(f"study {name!r}: key {unknown[0]!r} is not allowed; allowed: {', '.join(STUDY_KEYS)}")
    if "notebook" not in data:
        raise InputError(f"study {name!r}: notebook is missing; allowed: a path under notebooks/")
    formats = tuple((data.get("report") or {}).get("formats", FORMATS))
    bad = [f for f in formats if f not in FORMATS]
    if bad:
        raise InputError(f"study {name!r}: report format {bad[0]!r} is not allowed; allowed: {', '.join(FORMATS)}")
    notebook = (root / str(data["notebook"])).resolve()
    if root.resolve() not in notebook.parents or notebook.suffix != ".ipynb" or not notebook.is_file():
        raise InputError(f"study {name!r}: notebook={data['notebook']!r} is not allowed; allowed: a notebook "
                         "inside the project (notebooks/<name>.ipynb)")
    if data.get("name", name) != name:
        raise InputError(f"study {name!r}: name={data['name']!r} is not allowed; allowed: {name!r} (the file's name)")
    study = Study(name=name, title=data.get("title", name.replace("_", " ")),
                  notebook=notebook, parameters=data.get("parameters") or {},
                  smoke=data.get("smoke") or {}, formats=formats)
    validate_parameters(study, {**study.parameters, **study.smoke})
    return study


def notebook_parameters(notebook: Path) -> dict:
    """The notebook's `parameters` cell: name -> {type, default, help} (papermill's parser)."""
    import papermill
    return papermill.inspect_notebook(str(notebook))


_TYPES = {"int": int, "float": (int, float), "str": str, "bool": bool, "list": list, "dict": dict}


def coerce(name: str, value, declared: str):
    """A command-line string to the declared type (YAML syntax for lists and dicts)."""
    if not isinstance(value, str) or declared == "str":
        return value
    try:
        parsed = yaml.safe_load(value)
    except yaml.YAMLError as e:
        raise InputError(f"parameter {name}={value[:200]!r} is not valid YAML ({str(e).splitlines()[0]}); "
                         f"allowed: a {declared} in YAML syntax") from None
    if declared == "float" and isinstance(parsed, int):
        parsed = float(parsed)
    return parsed


def validate_parameters(study: Study, params: dict) -> dict:
    """Every parameter must exist in the notebook and have its declared type."""
    declared = notebook_parameters(study.notebook)
    out = {}
    for name, value in params.items():
        if name not in declared:
            raise InputError(f"study {study.name!r}: parameter {name}={value!r} is not in the notebook; "
                             f"allowed: {', '.join(sorted(declared))}")
        kind = (declared[name].get("inferred_type_name") or "None").split("[")[0]
        value = coerce(name, value, kind)
        expected = _TYPES.get(kind)
        if expected is not None and (not isinstance(value, expected) or (kind != "bool" and isinstance(value, bool))):
            raise InputError(f"study {study.name!r}: parameter {name}={value!r} is not allowed; allowed: {kind}")
        out[name] = value
    return out


def run_study(name: str, *, smoke: bool = False, overrides: dict | None = None, out_root: Path | None = None,
              root: Path = ROOT, force: bool = False) -> Path:
    """Execute a study into `out_root/<name>/` (notebook, sweep.nc, run.json, html, pdf).
    It runs in a private temporary folder that replaces the old report in one step only
    when everything succeeded; a folder holding files the workbench did not write is
    refused unless `force` (safe_output.py)."""
    import papermill
    from .report import export_html, export_pdf, write_index
    from .safe_output import check_replaceable, inside, install, output_root, private_folder, recover, \
        write_manifest

    study = load_study(name, root)
    params = {**study.parameters, **(study.smoke if smoke else {})}
    params = validate_parameters(study, {**params, **(overrides or {})})
    out_root = output_root(out_root or root / "reports")
    for line in recover(out_root, study.name):
        print(f"workbench: {line} (left by an interrupted run)")
    final = inside(out_root, study.name)
    check_replaceable(final, force=force)
    tmp = private_folder(out_root, study.name)
    declared = notebook_parameters(study.notebook)
    if "output_dir" in declared:
        params = {**params, "output_dir": str(tmp)}
    timings = {}
    executed = tmp / f"{study.name}.ipynb"
    try:
        t0 = time.perf_counter()
        _execute(papermill, study, executed, params, tmp)
        timings["execute_s"] = round(time.perf_counter() - t0, 2)
        run = {"study": study.name, "title": study.title, "smoke": smoke,
               "parameters": {k: v for k, v in params.items() if k != "output_dir"},
               "created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
               "versions": _versions(), "git_sha": _git_sha(root), "timings": timings}
        t0 = time.perf_counter()
        html = export_html(executed, tmp / f"{study.name}.html", run)
        timings["html_s"] = round(time.perf_counter() - t0, 2)
        if "pdf" in study.formats:
            t0 = time.perf_counter()
            pdf, message = export_pdf(html, tmp / f"{study.name}.pdf")
            timings["pdf_s"] = round(time.perf_counter() - t0, 2)
            if pdf is None:
                run["pdf"] = message
                print(f"workbench: {message}")
        (tmp / "run.json").write_text(json.dumps(run, indent=2, default=str))
        write_manifest(tmp)
        install(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    write_index(out_root)
    return final


def _execute(papermill, study: Study, executed: Path, params: dict, cwd: Path) -> None:
    """Run the notebook; any failure becomes a StudyError naming the study and the cell."""
    try:
        papermill.execute_notebook(str(study.notebook), str(executed), parameters=params,
                                   cwd=str(cwd), progress_bar=False, kernel_name="python3")
    except papermill.PapermillExecutionError as e:
        raise StudyError(f"study {study.name!r} failed in cell {e.cell_index} of the executed notebook "
                         f"({_first_line(executed, e.cell_index)!r}): {e.ename}: {e.evalue}") from None
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as e:  # the kernel died (os._exit, out of memory), a timeout, a broken notebook
        index, line = _running_cell(executed)
        where = f"in cell {index} ({line!r})" if index is not None else "before any cell finished"
        raise StudyError(f"study {study.name!r} failed {where}: {type(e).__name__}: "
                         f"{str(e).strip().splitlines()[0][:200] if str(e).strip() else 'no message'}") from None


def _running_cell(notebook: Path) -> tuple[int | None, str]:
    """The cell that was running when the kernel went away: the last one papermill started."""
    import nbformat
    try:
        cells = nbformat.read(notebook, as_version=4).cells
    except (OSError, ValueError):
        return None, ""
    started = [i for i, c in enumerate(cells) if c.get("metadata", {}).get("papermill", {}).get("start_time")]
    if not started:  # papermill marks every cell 'completed' when the kernel dies: the last one started
        return None, ""
    i = started[-1]
    line = next((ln for ln in cells[i].source.splitlines() if ln.strip() and not ln.startswith("#")), "")
    return i, line[:80]


def _first_line(notebook: Path, index: int) -> str:
    """First code line of the cell that raised (the one with an error output)."""
    import nbformat
    try:
        cells = nbformat.read(notebook, as_version=4).cells
    except (OSError, ValueError):
        return "?"
    failed = [c for c in cells if c.cell_type == "code" and any(o.get("output_type") == "error" for o in c.outputs)]
    source = failed[0].source if failed else (cells[index].source if index < len(cells) else "")
    return next((line for line in source.splitlines() if line.strip() and not line.startswith("#")), "")[:80]


def _versions() -> dict:
    import numpy
    import xarray
    return {"workbench": __version__, "python": platform.python_version(), "numpy": numpy.__version__,
            "xarray": xarray.__version__}


def _git_sha(root: Path) -> str:
    from .sweep import git_sha
    return git_sha()


def rerender(name: str, *, out_root: Path | None = None, root: Path = ROOT) -> Path:
    """Render a study's report again (HTML, PDF, index) from its executed notebook and
    run.json, without executing anything: after a template or style change."""
    from .report import export_html, export_pdf, write_index
    from .safe_output import add_to_manifest, inside
    out_root = Path(out_root or root / "reports").resolve()
    if not isinstance(name, str) or not STUDY_NAME.match(name):
        raise InputError(f"study={str(name)[:200]!r} is not a study name; allowed: {', '.join(list_studies(root))}")
    folder = inside(out_root, name)
    executed, run_json = folder / f"{name}.ipynb", folder / "run.json"
    if not (executed.exists() and run_json.exists()):
        raise InputError(f"study={name!r} has no report in {out_root} to render; allowed: "
                         f"{', '.join(sorted(p.parent.name for p in out_root.glob('*/run.json'))) or 'run it first'}")
    try:
        run = json.loads(run_json.read_text())
        if not isinstance(run, dict) or "study" not in run:
            raise ValueError("not a run record")
    except (ValueError, UnicodeDecodeError) as e:
        raise InputError(f"{str(run_json)!r} is corrupt ({e}); allowed: a run.json the workbench wrote "
                         f"(run the study again: workbench run {name})") from None
    html = export_html(executed, folder / f"{name}.html", run)
    pdf, message = export_pdf(html, folder / f"{name}.pdf")
    if pdf is None:
        print(f"workbench: {message}")
    add_to_manifest(folder, [html, pdf])  # those two, not whatever else the folder holds
    write_index(out_root)
    return folder
