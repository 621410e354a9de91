"""Fronts and speed at the sizes people sweep (issue: fronts a person can read); prints a table.

    python -m benchmarks.bench_fronts                 # all rows, a few minutes on 2 cores
    python -m benchmarks.bench_fronts --rows tied     # one row: tied, startup or marginal
    python -m benchmarks.bench_fronts --cold          # adds a cold run of the tied grid

Rows, each the median of ``--runs`` (default 3) runs in fresh processes:

tied      the 9.2e8-point ResNet-50 grid of every strategy, p 1..4096, b 1..512, 100 x 100
          network bandwidths, 10 memory sizes, 10 latencies (ties: below one node nothing
          depends on the network), ``--keep pareto:t_epoch_s,p``: the run's own time (as
          ``sweep run`` prints it), the process's wall time and peak RSS, warm cache;
          ``--cold`` adds one run with an empty compilation cache.
startup   a 100-point sweep, start to finish, in a fresh process with a warm cache.
marginal  every row written (``--keep all``) of 1e6 and 1e7 points: (1e7 - 1e6) rows over
          the difference of the runs' own times; the 1e7-row folder is read back by pyarrow,
          DuckDB and Polars, which must count every row.

The runs use this checkout's code through ``python -m sweep.cli``, each with its own
compilation cache under the temporary folder (``SWEEP_JAX_CACHE``).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def tied_spec(name: str = "tied92", latencies: int = 10) -> str:
    """The tied grid's spec: 9.2e8 points with 10 latencies (``gpu_fronts.sh`` takes 110, 1e10)."""
    return f"""name = "{name}"
model = "resnet50"
machine = "abci"
strategies = ["serial", "data", "spatial", "pipeline", "filter", "channel", "data+filter", "data+spatial"]
[axes]
p = {{ log2 = [0, 12] }}
b = {{ log2 = [0, 9] }}
inter_bandwidth_Bps = {{ linspace = [1e9, 1e11, 100] }}
intra_bandwidth_Bps = {{ linspace = [2.5e10, 9e11, 100] }}
gpu_mem_bytes = {{ linspace = [8e9, 192e9, 10] }}
inter_alpha_s = {{ linspace = [1e-6, 1e-5, {latencies}] }}
"""


TIED = tied_spec()
TINY = """name = "tiny"
model = "resnet50"
machine = "abci"
strategies = ["data"]
[axes]
p = { log2 = [0, 9] }
b = { log2 = [0, 9] }
"""
ROWS = """name = "rows{n}"
model = "resnet50"
machine = "abci"
strategies = ["data"]
[axes]
p = {{ log2 = [0, 9] }}
b = {{ log2 = [0, 9] }}
inter_bandwidth_Bps = {{ linspace = [1e9, 1e11, {n}] }}
"""


def sweep_run(tmp: Path, spec: str, name: str, cache: str, *options: str) -> tuple[float, float, float, str]:
    """``sweep run`` in a fresh process: (its own time, wall, peak RSS in GB, stdout)."""
    path = tmp / f"{name}.toml"
    path.write_text(spec)
    env = {**os.environ, "SWEEP_JAX_CACHE": str(tmp / cache), "PYTHONPATH": str(ROOT)}
    cmd = [
        sys.executable,
        "-m",
        "sweep.cli",
        "run",
        str(path),
        "-o",
        str(tmp / name),
        "--overwrite",
        *options,
    ]
    began = time.perf_counter()
    out = subprocess.run(
        ["/usr/bin/time", "-f", "%M", *cmd], env=env, capture_output=True, text=True, check=True
    )
    wall = time.perf_counter() - began
    own = float(re.search(r"evaluated in ([0-9.]+) s", out.stdout).group(1))  # type: ignore[union-attr]
    rss = int(out.stderr.strip().splitlines()[-1]) / 1e6  # KB -> GB
    return own, wall, rss, out.stdout.strip()


def tied(tmp: Path, runs: int, cold: bool) -> None:
    keep = ("--keep", "pareto:t_epoch_s,p")
    if cold:
        own, wall, rss, text = sweep_run(tmp, TIED, "tied", "cache-cold", *keep)
        print(f"tied grid, cold: own {own:.2f} s, wall {wall:.2f} s, peak RSS {rss:.2f} GB | {text}")
    sweep_run(tmp, TIED, "tied", "cache", *keep)  # warms the cache
    got = [sweep_run(tmp, TIED, "tied", "cache", *keep) for _ in range(runs)]
    own, wall = statistics.median(g[0] for g in got), statistics.median(g[1] for g in got)
    rss = max(g[2] for g in got)
    print(
        f"tied grid 9.2e8 points, warm: own {own:.2f} s ({9.2e8 / own:.3g} points/s), wall {wall:.2f} s,"
        f" peak RSS {rss:.2f} GB (medians of {runs}: own {[round(g[0], 2) for g in got]}) | {got[-1][3]}"
    )


def startup(tmp: Path, runs: int) -> None:
    sweep_run(tmp, TINY, "tiny", "cache")
    walls = [sweep_run(tmp, TINY, "tiny", "cache")[1] for _ in range(runs)]
    print(f"100-point sweep, fresh process, warm cache: wall {statistics.median(walls):.2f} s (of {walls})")


def marginal(tmp: Path, runs: int) -> None:
    small, large = ROWS.format(n=10_000), ROWS.format(n=100_000)
    sweep_run(tmp, small, "rows-small", "cache")
    sweep_run(tmp, large, "rows-large", "cache")
    a = [sweep_run(tmp, small, "rows-small", "cache")[0] for _ in range(runs)]
    b = [sweep_run(tmp, large, "rows-large", "cache")[0] for _ in range(runs)]
    rate = 9e6 / (statistics.median(b) - statistics.median(a))
    print(f"every row written, marginal: {rate:.3g} rows/s (1e6 rows {a} s, 1e7 rows {b} s)")
    folder = tmp / "rows-large"
    import duckdb
    import polars as pl
    import pyarrow.dataset as ds

    counts = {
        "pyarrow": ds.dataset(folder, format="parquet").count_rows(),
        "duckdb": duckdb.sql(f"select count(*) from read_parquet('{folder}/*.parquet')").fetchall()[0][0],
        "polars": pl.scan_parquet(f"{folder}/*.parquet").select(pl.len()).collect().item(),
    }
    assert set(counts.values()) == {10_000_000}, counts
    print(f"the 1e7-row folder read back: {counts}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", default="tied,startup,marginal", help="rows to run, of tied, startup, marginal")
    ap.add_argument("--runs", type=int, default=3, help="runs per figure (their median)")
    ap.add_argument("--cold", action="store_true", help="add a cold run of the tied grid")
    args = ap.parse_args()
    wanted = args.rows.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        if "tied" in wanted:
            tied(Path(tmp), args.runs, args.cold)
        if "startup" in wanted:
            startup(Path(tmp), args.runs)
        if "marginal" in wanted:
            marginal(Path(tmp), args.runs)


if __name__ == "__main__":
    main()
