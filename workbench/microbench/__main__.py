"""`python -m workbench.microbench --device cuda --out h100_sxm.nc`: run the microbenchmarks
and write the measurements as netCDF (the CLI's `workbench microbench` calls `main`). --out
is checked before anything runs (a .nc path in a writable folder; an existing file is
replaced only with --force), and the file is written beside it and renamed over it, so a
failed write leaves an existing file whole."""
from __future__ import annotations

import argparse
import os
import sys

from ..errors import InputError
from . import SUITES, run, save


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m workbench.microbench", description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default: cpu)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--quick", dest="quick", action="store_true", default=True,
                      help="small sizes, a few repetitions (the default)")
    mode.add_argument("--full", dest="quick", action="store_false", help="the full sweep of sizes")
    p.add_argument("--out", required=True, help="netCDF file to write (.nc)")
    p.add_argument("--force", action="store_true", help="replace --out if it exists")
    p.add_argument("--hardware", default=None, help="spec name to file the results under (default: from the device)")
    p.add_argument("--suites", default=",".join(SUITES), help=f"comma-separated subset of {','.join(SUITES)}")
    p.add_argument("--world-size", type=int, default=None,
                   help="ranks for the collectives (default: every GPU on CUDA; 1, skipped, on CPU)")
    return p


def check_out(out: str, force: bool = False) -> None:
    """`out` must be a .nc file in an existing, writable folder, not a folder; an existing
    file only with `force`. Checked before the benchmarks run."""
    if os.path.isdir(out):
        raise InputError(f"out={out!r} is a folder; allowed: a .nc file path")
    if not out.lower().endswith(".nc"):
        raise InputError(f"out={out!r} is not allowed; allowed: a .nc file path (netCDF)")
    parent = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"out={out!r} cannot be written (its folder is missing or read-only); "
                         "allowed: a .nc path in a writable folder")
    if os.path.lexists(out) and not force:
        raise InputError(f"out={out!r} exists; allowed: a new path, or --force to replace it")


def write(ds, out: str) -> None:
    """save() to a fresh name beside `out`, then rename it over `out`: a failed write leaves
    `out` as it was and removes the partial file."""
    from ..safe_output import replace_file
    replace_file(out, lambda tmp: save(ds, tmp))


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    suites = tuple(s for s in args.suites.split(",") if s)
    try:
        check_out(args.out, args.force)
        ds = run(device=args.device, quick=args.quick, hardware=args.hardware, suites=suites,
                 world_size=args.world_size)
        write(ds, args.out)
    except (ImportError, RuntimeError, ValueError) as e:  # InputError is a ValueError
        print(f"workbench microbench: {e}", file=sys.stderr)
        return 2
    kinds = {}
    for k in ds["kind"].values:
        kinds[k] = kinds.get(k, 0) + 1
    counts = ", ".join(f"{n} {k}" for k, n in kinds.items())
    print(f"{ds.sizes['measurement']} measurements ({counts}) on {ds.attrs['device_name']} -> {args.out}")
    if ds.attrs.get("skipped"):
        print(f"skipped: {ds.attrs['skipped']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
