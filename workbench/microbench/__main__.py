"""`python -m workbench.microbench --device cuda --out h100_sxm.nc`: run the microbenchmarks
and write the measurements as netCDF (the CLI's `workbench microbench` calls `main`)."""
from __future__ import annotations

import argparse
import sys

from . import SUITES, run, save


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m workbench.microbench", description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default: cpu)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--quick", dest="quick", action="store_true", default=True,
                      help="small sizes, a few repetitions (the default)")
    mode.add_argument("--full", dest="quick", action="store_false", help="the full sweep of sizes")
    p.add_argument("--out", required=True, help="netCDF file to write (.nc)")
    p.add_argument("--hardware", default=None, help="spec name to file the results under (default: from the device)")
    p.add_argument("--suites", default=",".join(SUITES), help=f"comma-separated subset of {','.join(SUITES)}")
    p.add_argument("--world-size", type=int, default=None,
                   help="ranks for the collectives (default: every GPU on CUDA; 1, skipped, on CPU)")
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    suites = tuple(s for s in args.suites.split(",") if s)
    try:
        ds = run(device=args.device, quick=args.quick, hardware=args.hardware, suites=suites,
                 world_size=args.world_size)
    except (ImportError, RuntimeError, ValueError) as e:
        print(f"workbench microbench: {e}", file=sys.stderr)
        return 2
    save(ds, args.out)
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
