"""Write the regression grid's reference values (tests/regression/reference/*.csv.gz).
Run once, before a restructuring; the test replays the calls against these files.
`--missing` writes only the calls that have no reference yet (new calls), leaving the
recorded ones as they are; `--only=a,b` re-records the calls named (a change made on
purpose to every output of those calls: say why in test_regression_grid.REBASED)."""
from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

from calls import CALLS  # noqa: E402
from workbench import predict  # noqa: E402


def table(ds):
    """A Dataset as one flat table: one row per point, coordinates as columns."""
    if ds.sizes:
        df = ds.to_dataframe().reset_index()
    else:
        df = ds.expand_dims("point").to_dataframe().reset_index().drop(columns="point")
    for c in ds.coords:  # 0-d coordinates (hardware="h100_sxm") as constant columns
        if ds[c].ndim == 0 and c not in df:
            df[c] = ds[c].item()
    return df


def main() -> None:
    out = HERE / "reference"
    out.mkdir(exist_ok=True)
    missing = "--missing" in sys.argv[1:]
    only = [a.split("=", 1)[1].split(",") for a in sys.argv[1:] if a.startswith("--only=")]
    n = 0
    for name, fn, kwargs in CALLS:
        if missing and (out / f"{name}.csv.gz").exists():
            continue
        if only and name not in only[0]:
            continue
        df = table(getattr(predict, fn)(**kwargs))
        df.to_csv(out / f"{name}.csv.gz", index=False, float_format="%.17g")
        n += len(df)
        print(f"{name}: {len(df)} points, {df.shape[1]} columns")
    print(f"{n} points in all")


if __name__ == "__main__":
    main()
