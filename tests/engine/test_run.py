"""``sweep run`` on the local devices (sweep/engine/run.py; docs/inputs.md#sweep-specs): every
configuration of the axes written once, each job compiled once, values equal to
:func:`sweep.engine.evaluate.estimate`, the run's options.

Rows are checked against independent expectations: the Cartesian product of the axes
counted by Python loops, and ``estimate`` in float64 for sampled rows. The shared runs
are described in :mod:`tests.runs`.
"""

from __future__ import annotations

import functools
import math
import os
import re
import subprocess
import sys
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sweep.engine import devices as devices_module
from sweep.engine import program as program_module
from sweep.engine.evaluate import RESULT_COLUMNS, estimate
from sweep.inputs.configs import Bound
from sweep.inputs.machines import load_machine
from sweep.inputs.models import load_model
from tests.runs import (
    CHUNK,
    DATA_SPEC,
    GRID_B,
    GRID_BW,
    GRID_P,
    GRID_P2,
    GRID_S,
    GRID_SET,
    GRID_SPEC,
    PAPER_SPEC,
    Run,
    as_tuples,
    count_rows,
    manifest,
    read_rows,
    run_spec,
    shared_run,
    sweep,
)

HYBRIDS = ("data+filter", "data+spatial")
PAPER_KEY = ("model", "strategy", "p", "b", "p2", "S")


@functools.cache
def builtin_model(name: str):
    return load_model(name)


def estimate_row(row: dict, sets: dict, swept: tuple[str, ...]) -> dict:
    """:func:`sweep.evaluate.estimate` (float64 in tests) for a written row's configuration."""
    overrides = {**sets, **{k: row[k] for k in swept}}
    profile = load_machine(row["machine"]).with_overrides(overrides)
    bound = Bound.of(builtin_model(row["model"]), profile)
    strategy = row["strategy"]
    return estimate(
        bound,
        strategy,
        row["p"],
        row["b"],
        row["p2"] if strategy in HYBRIDS else None,
        row["S"] if strategy == "pipeline" else None,
    )


def assert_matches_estimate(row: dict, want: dict, rel: float, fixed: dict) -> None:
    assert set(want) - set(row) <= set(fixed), set(want) - set(row)
    for name, value in want.items():
        if name in fixed and name not in row:
            continue
        got = row[name]
        if value is None or isinstance(value, bool | str | int):
            assert got == value, (name, got, value, row)
        else:
            assert abs(got - value) <= rel * abs(value), (name, got, value, row)


def sample(rows: list[dict], per_strategy: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    by_strategy: dict[str, list[dict]] = {}
    for row in rows:
        by_strategy.setdefault(row["strategy"], []).append(row)
    picked = []
    for group in by_strategy.values():
        for i in rng.choice(len(group), min(per_strategy, len(group)), replace=False):
            picked.append(group[i])
    return picked


@pytest.fixture(scope="module")
def data64(tmp_path_factory) -> Run:
    """The grid's data job alone, float64 (one job: one compilation)."""
    return shared_run(tmp_path_factory, "data64", DATA_SPEC, "--chunk", CHUNK, "--x64")


@pytest.fixture(scope="module")
def paper64(tmp_path_factory) -> Run:
    return shared_run(tmp_path_factory, "paper64", PAPER_SPEC.read_text(), "--chunk", CHUNK, "--x64")


def grid_expected() -> dict[str, set[tuple]]:
    """Configurations per strategy by plain loops over the axes (docs/inputs.md#sweep-specs)."""
    return {
        "data": {(p, b, bw) for p in GRID_P for b in GRID_B for bw in GRID_BW},
        "pipeline": {(p, b, s, bw) for p in GRID_P for b in GRID_B for s in GRID_S for bw in GRID_BW},
        "data+filter": {
            (p, b, p2, bw)
            for p in GRID_P
            for b in GRID_B
            for p2 in GRID_P2
            for bw in GRID_BW
            if p >= p2 and p % p2 == 0
        },
    }


# ----------------------------------------------------------------------------- row counts


def test_rows_are_the_axis_product_minus_skipped_hybrids(grid):
    expected = grid_expected()
    assert len(expected["data"]) == 24 * 4 * 10
    assert len(expected["pipeline"]) == 24 * 4 * 3 * 10
    # p2 = 2, 3, 4, 8, 16 divide 12, 8, 6, 3, 1 of p = 1..24
    assert len(expected["data+filter"]) == (12 + 8 + 6 + 3 + 1) * 4 * 10
    rows = grid.rows
    total = sum(map(len, expected.values()))
    assert len(rows) == count_rows(grid.out) == total
    assert Counter(r["strategy"] for r in rows) == {k: len(v) for k, v in expected.items()}
    got = {
        "data": [(r["p"], r["b"], r["inter_bandwidth_Bps"]) for r in rows if r["strategy"] == "data"],
        "pipeline": [
            (r["p"], r["b"], r["S"], r["inter_bandwidth_Bps"]) for r in rows if r["strategy"] == "pipeline"
        ],
        "data+filter": [
            (r["p"], r["b"], r["p2"], r["inter_bandwidth_Bps"])
            for r in rows
            if r["strategy"] == "data+filter"
        ],
    }
    for strategy, configs in got.items():
        assert len(configs) == len(set(configs)), f"{strategy}: duplicate rows"
        assert set(configs) == expected[strategy], strategy
    assert f"{total:,} rows" in grid.stdout


def test_columns_hold_each_strategys_own_values(grid):
    """docs/model.md §2: data p1 = p, p2 = 1; pipeline p1 = 1, p2 = p; hybrids p = p1 p2; B = b p1."""
    for r in grid.rows:
        if r["strategy"] == "data":
            assert (r["p1"], r["p2"]) == (r["p"], 1)
        elif r["strategy"] == "pipeline":
            assert (r["p1"], r["p2"]) == (1, r["p"])
            if r["S"] > r["global_batch"]:
                assert not r["feasible"] and r["limit_reason"] == "batch"
        else:
            assert r["p1"] * r["p2"] == r["p"]
        assert r["global_batch"] == r["b"] * r["p1"]
        assert r["iterations"] == math.ceil(1_281_167 / r["global_batch"])
        assert r["feasible"] == (r["limit_reason"] is None)


def test_paper_rows_per_strategy(paper32):
    counts = Counter((r["model"], r["strategy"]) for r in paper32.rows)
    for model in ("resnet50", "vgg16"):
        assert counts[(model, "serial")] == 4  # b only
        assert counts[(model, "pipeline")] == 9 * 4 * 4  # p x b x S
        for s in ("data", "spatial", "filter", "channel", "data+filter", "data+spatial"):
            assert counts[(model, s)] == 9 * 4, s  # p2 defaults to gpus_per_node = 4, which divides p
    assert len(paper32.rows) == 2 * (4 + 144 + 6 * 36) == 728


# ----------------------------------------------------------------------------- compile once


def test_each_job_compiles_once_over_many_chunks(grid, paper32):
    jobs = manifest(grid.out)["jobs"]
    assert [j["chunks"] for j in jobs] == [15, 45, 75]
    assert grid.traces == {(0, "data"): 1, (1, "pipeline"): 1, (2, "data+filter"): 1}
    paper_jobs = manifest(paper32.out)["jobs"]
    assert paper32.traces == {(j["index"], j["strategy"]): 1 for j in paper_jobs}
    assert len(paper32.traces) == 16


# ----------------------------------------------------------------------------- values


def test_float32_rows_equal_estimate(grid, paper32):
    for row in sample(grid.rows, 3, seed=1):
        assert_matches_estimate(row, estimate_row(row, GRID_SET, ("inter_bandwidth_Bps",)), 2e-5, GRID_SET)
    for row in sample(paper32.rows, 1, seed=2):
        assert_matches_estimate(row, estimate_row(row, {}, ()), 2e-5, {})


def test_x64_rows_equal_estimate(data64, paper64):
    assert len(data64.rows) == len(GRID_P) * len(GRID_B) * len(GRID_BW)
    for row in sample(data64.rows, 4, seed=3):
        assert_matches_estimate(row, estimate_row(row, GRID_SET, ("inter_bandwidth_Bps",)), 1e-12, GRID_SET)
    for row in sample(paper64.rows, 1, seed=4):
        assert_matches_estimate(row, estimate_row(row, {}, ()), 1e-12, {})


def test_float32_and_float64_runs_agree(paper32, paper64):
    def by_key(rows):
        return {tuple(r[k] for k in PAPER_KEY): r for r in rows}

    a, b = by_key(paper32.rows), by_key(paper64.rows)
    assert len(a) == len(paper32.rows) == len(b)
    assert set(a) == set(b)
    feasible = [k for k in sorted(a) if b[k]["feasible"]]
    assert len(feasible) > 100
    assert [a[k]["feasible"] for k in sorted(a)] == [b[k]["feasible"] for k in sorted(a)]
    for name in RESULT_COLUMNS:
        x = np.array([a[k][name] for k in feasible], dtype=np.float64)
        y = np.array([b[k][name] for k in feasible], dtype=np.float64)
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=0, err_msg=name)
    schema32 = pq.read_schema(next(paper32.out.glob("part-*.parquet")))
    schema64 = pq.read_schema(next(paper64.out.glob("part-*.parquet")))
    assert schema32.field("t_epoch_s").type == pa.float32()
    assert schema64.field("t_epoch_s").type == pa.float64()


# ----------------------------------------------------------------------------- options, chunks and timings


def test_only_feasible_is_the_feasible_subset(grid, tmp_path):
    only = run_spec(tmp_path, "feasible", GRID_SPEC, "--chunk", CHUNK, "--only-feasible")
    assert all(r["feasible"] for r in only.rows)
    assert as_tuples(only.rows) == as_tuples([r for r in grid.rows if r["feasible"]])
    assert 0 < len(only.rows) < len(grid.rows)


def test_columns_writes_only_those_columns(grid, tmp_path):
    sub = run_spec(tmp_path, "columns", DATA_SPEC, "--chunk", CHUNK, "--columns", "p,t_epoch_s")
    for part in sub.out.glob("part-*.parquet"):
        assert pq.read_schema(part).names == ["p", "t_epoch_s"]
    data = [r for r in grid.rows if r["strategy"] == "data"]
    assert as_tuples(sub.rows) == as_tuples(data, ["p", "t_epoch_s"])


def test_default_chunk_is_larger_for_a_reduction(grid, tmp_path):
    """Without --chunk, a --keep reduction runs chunks of 2^20 points and a run writing
    every row chunks of 2^18; the manifest records the one used, and --chunk overrides it."""
    from sweep.engine.runstate import REDUCE_CHUNK, ROWS_CHUNK, RunOptions
    from sweep.reduce.keep import parse_keep

    assert (ROWS_CHUNK, REDUCE_CHUNK) == (1 << 18, 1 << 20)
    cols = ("t_epoch_s", "p")
    assert RunOptions(out=tmp_path).chunk == ROWS_CHUNK
    assert RunOptions(out=tmp_path, keep=parse_keep("pareto:t_epoch_s,p", cols)).chunk == REDUCE_CHUNK
    assert RunOptions(out=tmp_path, keep=parse_keep("top:3:t_epoch_s", cols)).chunk == REDUCE_CHUNK
    assert RunOptions(out=tmp_path, chunk=64, keep=parse_keep("top:3:t_epoch_s", cols)).chunk == 64
    for name, args, want in (
        ("rows", (), ROWS_CHUNK),
        ("front", ("--keep", "pareto:t_epoch_s,p"), REDUCE_CHUNK),
        ("given", ("--keep", "pareto:t_epoch_s,p", "--chunk", "64"), 64),
    ):
        run = run_spec(tmp_path, name, GRID_SPEC, *args)
        assert manifest(run.out)["run_key"]["chunk"] == want


def test_a_reduction_on_a_gpu_defaults_to_larger_chunks(tmp_path, monkeypatch):
    """Where --chunk is not given, a reduction on a GPU runs 2^24-point chunks (its kernels
    ran 15x faster than at 2^20 on an H200); on a CPU, writing every row, with --chunk, or
    on Dask workers the chunk stays as it was."""
    from types import SimpleNamespace

    from sweep.engine.run import _settle_chunk
    from sweep.engine.runstate import GPU_REDUCE_CHUNK, REDUCE_CHUNK, ROWS_CHUNK, RunOptions
    from sweep.reduce.keep import parse_keep

    keep = parse_keep("pareto:t_epoch_s,p", ("t_epoch_s", "p"))
    assert GPU_REDUCE_CHUNK == 1 << 24
    assert _settle_chunk(RunOptions(out=tmp_path, keep=keep)).chunk == REDUCE_CHUNK  # this CPU
    monkeypatch.setattr(devices_module, "local_devices", lambda: [SimpleNamespace(platform="gpu")])
    assert _settle_chunk(RunOptions(out=tmp_path, keep=keep)).chunk == GPU_REDUCE_CHUNK
    assert _settle_chunk(RunOptions(out=tmp_path, keep=keep, chunk=64)).chunk == 64
    assert _settle_chunk(RunOptions(out=tmp_path)).chunk == ROWS_CHUNK
    assert _settle_chunk(RunOptions(out=tmp_path, keep=keep, dask="local:1")).chunk == REDUCE_CHUNK


def _timings(stdout: str) -> dict[str, float]:
    line = next(x for x in stdout.splitlines() if x.startswith("timings: "))
    numbers = [float(v) for v in re.findall(r"\d+\.\d+|\d+", line)]
    names = ["main", "programs", "queue", "device", "host", "again", "final", "made", "prepare", "sink"]
    assert len(numbers) == len(names), line
    return dict(zip(names, numbers, strict=True))


def test_timings_say_where_the_time_went(grid, tmp_path, monkeypatch):
    """--timings prints one line whose main-thread parts add up to its total (each printed to
    0.01 s), one program made ready per job, and the time spent evaluating tied candidates
    again: none when every row is written, some when a chunk's front overflows its
    compaction (4 rows here)."""
    every = run_spec(tmp_path, "every", GRID_SPEC, "--chunk", CHUNK, "--timings")
    t = _timings(every.stdout)
    parts = ("programs", "queue", "device", "host", "final")
    assert abs(sum(t[k] for k in parts) - t["main"]) <= 0.03
    assert t["made"] == 3 and t["again"] == 0 and t["final"] <= t["main"]
    assert t["sink"] > 0  # part files were written on the writer threads
    monkeypatch.setattr(program_module, "COMPACT_ROWS", 4)
    tied = run_spec(
        tmp_path, "tied", GRID_SPEC, "--chunk", CHUNK, "--keep", "pareto:t_epoch_s,p", "--timings"
    )
    t = _timings(tied.stdout)
    assert 0 < t["again"] <= t["host"]
    assert "timings:" not in run_spec(tmp_path, "quiet", GRID_SPEC, "--chunk", CHUNK).stdout


def test_several_devices_write_the_same_rows(grid, tmp_path):
    """A chunk split over 3 (forced host) devices, 64 points padded to 3 x 22, matches one device."""
    spec = tmp_path / "data.toml"
    spec.write_text(DATA_SPEC)
    out = tmp_path / "out"
    env = {**os.environ, "SWEEP_JAX_CACHE": "", "XLA_FLAGS": "--xla_force_host_platform_device_count=3"}
    cmd = [sys.executable, "-m", "sweep.cli", "run", str(spec), "-o", str(out), "--chunk", str(CHUNK)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert as_tuples(read_rows(out)) == as_tuples([r for r in grid.rows if r["strategy"] == "data"])


# ----------------------------------------------------------------------------- wide integers


def test_batch_beyond_int32_is_rejected(tmp_path):
    text = (
        'name = "wide"\nmodel = "resnet50"\nmachine = "abci"\nstrategies = ["data"]\n'
        "[axes]\np = [4194304]\nb = [1024]\n"
    )
    # B = 4,194,304 * 1,024 = 2**32 does not fit the int32 columns: refused as input, naming the axis.
    spec = tmp_path / "wide.toml"
    spec.write_text(text)
    result = sweep("run", spec, "-o", tmp_path / "out", "--chunk", 8, "--x64")
    assert result.exit_code == 2
    assert "axes.b" in result.stderr and "\n" not in result.stderr.strip()
    assert not (tmp_path / "out").exists()


def test_axis_values_beyond_int32_are_exact_or_rejected(tmp_path):
    spec = tmp_path / "wide.toml"
    spec.write_text(
        'name = "wide"\nmodel = "resnet50"\nmachine = "abci"\nstrategies = ["pipeline"]\n'
        "[axes]\np = [8]\nb = [32]\nS = [3000000000]\n"
    )
    out = tmp_path / "out"
    result = sweep("run", spec, "-o", out, "--chunk", 8)
    if result.exit_code == 2:  # rejected as input: fine
        assert "axes.S" in result.stderr
        return
    assert result.exit_code == 0, result.output
    (row,) = read_rows(out)
    assert row["S"] == 3_000_000_000
    assert row["t_epoch_s"] > 0
