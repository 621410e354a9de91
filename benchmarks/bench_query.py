"""Streaming Pareto front over a large synthetic Parquet folder; prints rows, seconds, peak RSS.

    python -m benchmarks.bench_query                 # 10^8 rows (about 1 GB on disk, a few minutes)
    python -m benchmarks.bench_query --rows 1e6 --check
    python -m benchmarks.bench_query --rows 1e7 --objectives 3 --check

Writes a dataset folder shaped like ``sweep run`` output (one row group per
``--row-group`` rows, several row groups per part file; columns ``t_epoch_s``
and ``gpu_hours`` as float32, a dictionary-encoded ``strategy`` and a
``feasible`` flag) into a temporary folder, streamed in batches so the
generator never holds the data, then runs ``sweep.query.pareto`` with two
minimised objectives over the feasible rows in a fresh process and reports
its wall time, rows/s and peak resident memory. ``--objectives 3`` adds a
third float32 column ``mem_bytes`` and minimises all three. ``--check`` also
computes the front in memory with :func:`sweep.pareto.pareto_mask` and compares.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

STRATEGIES = ["data", "filter", "data+filter", "pipeline"]


def objective_names(k: int) -> list[str]:
    return ["t_epoch_s", "gpu_hours", "mem_bytes"][:k]


def generate(
    folder: Path, rows: int, row_group: int, groups_per_file: int, objectives: int = 2, seed: int = 0
) -> float:
    """Write ``rows`` rows; returns seconds. Objectives trade off (x up, y down) with noise and ties."""
    rng = np.random.default_rng(seed)
    fields = [("strategy", pa.dictionary(pa.int32(), pa.string()))]
    fields += [(name, pa.float32()) for name in objective_names(objectives)]
    schema = pa.schema([*fields, ("feasible", pa.bool_())])
    started = time.perf_counter()
    written, part = 0, 0
    dictionary = pa.array(STRATEGIES)
    while written < rows:
        path = folder / f"part-{part:06d}.parquet"
        with pq.ParquetWriter(path, schema, compression="zstd") as writer:
            for _ in range(groups_per_file):
                n = min(row_group, rows - written)
                if n <= 0:
                    break
                u = rng.random(n)
                t = np.exp(4 * u) * (1 + 0.2 * rng.random(n))  # seconds: 1 .. 65
                h = np.exp(4 * (1 - u)) * (1 + 0.2 * rng.random(n))  # the other way round
                m = np.exp(2 * rng.random(n)) * (1 + u)  # memory: a third, partly independent axis
                arrays = [
                    pa.DictionaryArray.from_arrays(
                        pa.array(rng.integers(0, len(STRATEGIES), n, dtype=np.int32)), dictionary
                    ),
                    *[pa.array(v.astype(np.float32)) for v in (t, h, m)[:objectives]],
                    pa.array(rng.random(n) < 0.8),
                ]
                batch = pa.record_batch(arrays, schema=schema)
                writer.write_batch(batch, row_group_size=n)
                written += n
        part += 1
    return time.perf_counter() - started


def query(folder: str, objectives: int) -> dict:
    """Run the pareto query (in this process) and return its figures."""
    from sweep.answers.query import ScanStats, pareto

    stats = ScanStats()
    started = time.perf_counter()
    front = pareto(folder, objective_names(objectives), stats=stats)
    seconds = time.perf_counter() - started
    return {
        "rows": stats.rows_read,
        "feasible_rows": stats.rows_matched,
        "front_rows": front.num_rows,
        "seconds": seconds,
        "rows_per_s": stats.rows_read / seconds,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "row_groups": stats.row_groups,
        "second_pass_row_groups": stats.second_pass_row_groups,
        "front": front.select(objective_names(objectives)).to_pylist(),
    }


def check(folder: Path, front: list[dict], objectives: int) -> bool:
    """The same front computed in memory (small --rows only)."""
    import pyarrow.dataset as ds

    from sweep.reduce.pareto import pareto_mask_blocked

    names = objective_names(objectives)
    t = ds.dataset(folder).to_table(filter=ds.field("feasible"))
    objs = np.column_stack([t.column(c).to_numpy().astype(np.float64) for c in names])
    mask = pareto_mask_blocked(objs)
    want = sorted(map(tuple, objs[mask].tolist()))
    got = sorted(tuple(r[c] for c in names) for r in front)
    return want == got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=float, default=1e8, help="rows to generate [1e8]")
    ap.add_argument("--row-group", type=int, default=1 << 20, help="rows per row group [2**20]")
    ap.add_argument("--groups-per-file", type=int, default=8, help="row groups per part file [8]")
    ap.add_argument("--objectives", type=int, choices=(2, 3), default=2, help="objectives [2]")
    ap.add_argument("--check", action="store_true", help="compare with an in-memory front (small runs)")
    ap.add_argument("--keep", type=Path, help="write the data here and keep it (default: a temporary folder)")
    ap.add_argument("--query-only", type=str, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.query_only:
        print(json.dumps(query(args.query_only, args.objectives)))
        return
    rows = int(args.rows)
    with tempfile.TemporaryDirectory(prefix="bench-query-") as tmp:
        folder = args.keep or Path(tmp) / "data"
        folder.mkdir(parents=True, exist_ok=True)
        gen_s = generate(folder, rows, args.row_group, args.groups_per_file, args.objectives)
        size = sum(f.stat().st_size for f in folder.glob("*.parquet"))
        print(f"generated {rows:,} rows in {gen_s:.1f} s ({size / 1e9:.2f} GB of Parquet)", flush=True)
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "benchmarks.bench_query",
                "--query-only",
                str(folder),
                "--objectives",
                str(args.objectives),
            ],
            check=True,
            capture_output=True,
            text=True,
            cwd=Path(__file__).resolve().parents[1],
        )
        fig = json.loads(out.stdout.strip().splitlines()[-1])
        print(
            f"pareto (min {', min '.join(objective_names(args.objectives))}) over {fig['rows']:,} rows "
            f"({fig['feasible_rows']:,} feasible, {fig['row_groups']:,} row groups): "
            f"front of {fig['front_rows']:,} rows in {fig['seconds']:.1f} s = "
            f"{fig['rows_per_s'] / 1e6:.2f} M rows/s, peak RSS {fig['peak_rss_mb']:,.0f} MB "
            f"(second pass read {fig['second_pass_row_groups']} row groups)"
        )
        if args.check:
            ok = check(folder, fig["front"], args.objectives)
            print(f"check against the in-memory front: {'equal' if ok else 'DIFFERENT'}")
            if not ok:
                sys.exit(1)


if __name__ == "__main__":
    main()
