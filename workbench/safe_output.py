"""Writing report folders without destroying anything the workbench did not create.

- A folder the runner creates carries a manifest (MANIFEST: the files it wrote). The
  runner replaces a folder only when it has a manifest and holds nothing else; any other
  file, or a folder without a manifest, is refused by name unless `force`.
- A new report is built in a private temporary folder and swapped in with one atomic
  rename(2) exchange (Linux renameat2 RENAME_EXCHANGE) where the system has it; elsewhere
  two renames, and a kill between them is repaired by the next run (`recover`), which
  also removes temporary folders that dead runs left behind.
- Paths are resolved and must stay inside the output root.
"""
from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import tempfile
import uuid
from pathlib import Path

from .errors import InputError

MANIFEST = ".workbench-manifest.json"
_TMP = re.compile(r"^\.(?P<name>[a-z0-9_]+)\.(?P<kind>tmp|old)-(?P<pid>\d+)(-.*)?$")
_RENAME_EXCHANGE = 2  # linux/fs.h


def output_root(path) -> Path:
    """The output root, resolved, created if missing, and writable: else one clear error."""
    root = Path(path).expanduser().resolve()
    if root.exists() and not root.is_dir():
        raise InputError(f"out={str(path)!r} is a file; allowed: a folder for reports")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"out={str(path)!r} cannot be created ({e.strerror}); allowed: a writable folder") from None
    if not os.access(root, os.W_OK | os.X_OK):
        raise InputError(f"out={str(path)!r} is not writable; allowed: a writable folder")
    return root


def inside(root: Path, name: str) -> Path:
    """root/name, refused unless it resolves to a direct child of root."""
    target = (root / name).resolve()
    if target.parent != root.resolve():
        raise InputError(f"{name!r} would be written outside {str(root)!r}; allowed: a plain name")
    return target


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def recover(root: Path, name: str) -> list[str]:
    """Repair what killed runs of `name` left in `root`: restore a report that was moved
    aside but never replaced, delete dead runs' temporary folders. Returns what it did."""
    done = []
    final = root / name
    for p in sorted(root.iterdir()):
        m = _TMP.match(p.name)
        if not m or m["name"] != name or not p.is_dir() or _alive(int(m["pid"])):
            continue
        if m["kind"] == "old" and not final.exists() and (p / MANIFEST).exists():
            p.rename(final)
            done.append(f"restored {final.name} from {p.name}")
        else:
            shutil.rmtree(p, ignore_errors=True)
            done.append(f"removed {p.name}")
    return done


def legacy_outputs(name: str) -> set[str]:
    """What a study run wrote before manifests existed: a folder holding only these (and a
    run.json naming the study) is the workbench's own."""
    return {f"{name}.ipynb", f"{name}.html", f"{name}.pdf", "run.json", "sweep.nc"}


def foreign_files(folder: Path) -> list[str]:
    """Files in `folder` that the workbench did not write there."""
    if not folder.exists():
        return []
    if not folder.is_dir():
        return [folder.name]
    return sorted(_present(folder) - _owned(folder))


def _present(folder: Path) -> set:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST}


def _owned(folder: Path) -> set:
    """The files the workbench vouches for in `folder`: its manifest's, or a pre-manifest run's."""
    manifest = folder / MANIFEST
    if manifest.exists():
        try:
            return set(json.loads(manifest.read_text())["files"])
        except (OSError, ValueError, KeyError, TypeError):
            return set()  # a corrupt manifest vouches for nothing
    try:
        legacy = json.loads((folder / "run.json").read_text()).get("study") == folder.name
    except (OSError, ValueError, AttributeError):
        legacy = False
    return legacy_outputs(folder.name) if legacy else set()


def check_replaceable(folder: Path, *, force: bool) -> None:
    """Refuse to replace a folder holding files the workbench did not write, unless force."""
    foreign = foreign_files(folder)
    if foreign and not force:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise InputError(f"{str(folder)!r} holds files the workbench did not write ({shown}); allowed: a folder "
                         "the workbench created, or --force to replace it")


def private_folder(root: Path, name: str) -> Path:
    """A fresh temporary folder for one run (unique per process and call), with the mode the
    user's umask gives a new folder (mkdtemp's 0700 made every report folder unreadable to
    others, as the index linking them is not)."""
    folder = Path(tempfile.mkdtemp(prefix=f".{name}.tmp-{os.getpid()}-", dir=root))
    mask = os.umask(0)
    os.umask(mask)
    folder.chmod(0o777 & ~mask)
    return folder


def write_manifest(folder: Path) -> None:
    """The manifest of a folder the runner built privately: every file in it is the workbench's."""
    files = sorted(_present(folder))
    (folder / MANIFEST).write_text(json.dumps({"created_by": "workbench", "files": files}, indent=1))


def add_to_manifest(folder: Path, written) -> None:
    """Record `written` (paths inside `folder` the workbench just wrote) in its manifest,
    keeping what it vouched for before and nothing else: a file the user added to a report
    folder stays foreign (rewriting the manifest from the folder's listing had adopted it, so
    the next run replaced it without --force)."""
    manifest = folder / MANIFEST
    if not manifest.exists():
        return
    owned = _present(folder) & _owned(folder)
    owned |= {str(Path(w).resolve().relative_to(folder.resolve())) for w in written if w is not None}
    manifest.write_text(json.dumps({"created_by": "workbench", "files": sorted(owned)}, indent=1))


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (renameat2 RENAME_EXCHANGE); False where unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd = -100
    return fn(at_fdcwd, os.fsencode(str(a)), at_fdcwd, os.fsencode(str(b)), _RENAME_EXCHANGE) == 0


def install(tmp: Path, final: Path) -> None:
    """Put the finished folder `tmp` in place of `final` (absent or replaceable)."""
    if not final.exists():
        tmp.rename(final)
        return
    if _exchange(tmp, final):
        shutil.rmtree(tmp, ignore_errors=True)  # tmp now holds the previous report
        return
    old = final.parent / f".{final.name}.old-{os.getpid()}"
    final.rename(old)  # a kill here leaves `old`, which recover() restores
    tmp.rename(final)
    shutil.rmtree(old, ignore_errors=True)


def replace_file(out, write) -> Path:
    """write(tmp) to a fresh name beside `out`, then rename it over `out`: a failed write
    leaves `out` as it was and removes the partial file; an OSError is one line naming `out`."""
    out = Path(out)
    tmp = out.with_name(f".{out.name}.{uuid.uuid4().hex}.tmp")
    try:
        write(tmp)
        os.replace(tmp, out)
    except OSError as e:
        raise InputError(f"out={str(out)!r} cannot be written: {e.strerror or e}") from None
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return out
