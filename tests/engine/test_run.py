"""The sweep engine and ``sweep run`` (docs/inputs.md#sweep-specs, docs/output-format.md; each job compiles once).

Runs go through the CLI (click's ``CliRunner``) on small grids written to
``tmp_path`` with small chunks, so every job spans many chunks. Module-scoped
runs are shared by the tests that only read their output. Rows are checked
against independent expectations: the Cartesian product of the axes counted
by Python loops, :func:`sweep.evaluate.estimate` in float64 for sampled rows,
and :func:`sweep.pareto.pareto_mask` / sorting for the in-stream reductions.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import jax
import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import grids
from sweep.cli.main import cli
from sweep.engine import devices as devices_module
from sweep.engine import filters as filters_module
from sweep.engine import index as index_module
from sweep.engine import program as program_module
from sweep.engine import survivors as survivors_module
from sweep.engine.evaluate import RESULT_COLUMNS, estimate
from sweep.engine.filters import (
    PARETO_BLOCK,
    PARETO_FRONT,
    PARETO_SHORT,
    compact_indices,
    front_points,
    known_front,
    pareto_2d,
    pareto_kd,
    tile,
    top_k_candidates,
)
from sweep.engine.index import (
    FLOAT_CHUNK,
    decode_info,
    digits_at,
    inner_split,
    int_columns,
    numeric_columns,
    program_chunk,
)
from sweep.engine.program import TRACES, build_chunk_fn, device_inputs, prepare_points
from sweep.engine.survivors import Again, _undominated, _within_top, host_candidates, positions, survivors
from sweep.errors import InputError
from sweep.inputs.configs import Bound
from sweep.inputs.grid import Job
from sweep.inputs.machines import load_machine
from sweep.inputs.models import load_model
from sweep.output import store
from sweep.reduce import reducer as reducer_module
from sweep.reduce.keep import Keep
from sweep.reduce.pareto import pareto_brute, pareto_mask

HYBRIDS = ("data+filter", "data+spatial")
PAPER_SPEC = grids.SWEEPS / "paper-resnet50-vgg16.toml"
CHUNK = 64

# The shared grid: three strategies (one pure, pipeline with S, a hybrid with p2), a swept
# machine parameter and a fixed [set] override. p2 values 3, 8 and 16 skip many p.
GRID_P = list(range(1, 25))
GRID_B = [8, 16, 32, 64]
GRID_P2 = [2, 3, 4, 8, 16]
GRID_S = [1, 4, 16]
GRID_BW = [1e10 * k for k in range(1, 11)]  # linspace [10e9, 100e9, 10], exact
GRID_SET = {"wu_passes": 2.0}
GRID_AXES = "\n".join(
    [
        "[axes]",
        "p = { start = 1, stop = 24 }",
        "b = [8, 16, 32, 64]",
        "p2 = [2, 3, 4, 8, 16]",
        "S = [1, 4, 16]",
        "inter_bandwidth_Bps = { linspace = [10e9, 100e9, 10] }",
        "",
        "[set]",
        "wu_passes = 2",
        "",
    ]
)
GRID_SPEC = (
    'name = "grid"\nmodel = "resnet50"\nmachine = "abci"\n'
    'strategies = ["data", "pipeline", "data+filter"]\n' + GRID_AXES
)
DATA_SPEC = 'name = "grid-data"\nmodel = "resnet50"\nmachine = "abci"\nstrategies = ["data"]\n' + GRID_AXES
GRID_KEY = ("strategy", "p", "b", "p2", "S", "inter_bandwidth_Bps")
PAPER_KEY = ("model", "strategy", "p", "b", "p2", "S")


# ----------------------------------------------------------------------------- helpers


@dataclass
class Run:
    spec: Path
    out: Path
    stdout: str
    traces: dict
    rows: list[dict]


@pytest.fixture(scope="module", autouse=True)
def _no_home_jax_cache():
    """In-process ``sweep run`` must not point XLA's persistent cache at the user's home."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SWEEP_JAX_CACHE", "")
        yield


def sweep(*args) -> object:
    """``sweep ARGS`` in-process; exceptions other than SystemExit propagate."""
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def sweep_caught(*args) -> object:
    return CliRunner().invoke(cli, [str(a) for a in args])


def read_rows(folder: Path) -> list[dict]:
    """Every row of a dataset folder, as dicts (dictionary columns decoded)."""
    return ds.dataset(folder, format="parquet").to_table().to_pylist()


def count_rows(folder: Path) -> int:
    return ds.dataset(folder, format="parquet").count_rows()


def manifest(folder: Path) -> dict:
    doc = store.read_manifest(folder)
    assert doc is not None, f"no manifest in {folder}"
    return doc


def temporaries(folder: Path) -> list[str]:
    return sorted(f.name for f in folder.iterdir() if f.name.endswith(".tmp"))


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {f.name: (f.stat().st_size, f.stat().st_mtime_ns) for f in folder.iterdir()}


def as_tuples(rows: list[dict], columns=None) -> list[tuple]:
    """Rows as sorted tuples (order-independent comparison)."""
    if not rows:
        return []
    columns = columns or list(rows[0])
    return sorted(tuple(r[c] for c in columns) for r in rows)


def assert_same_rows(got: list[dict], want: list[dict], key=GRID_KEY) -> None:
    """The same configurations, integers and labels exactly, floats to float32 rounding.

    A ``--keep`` run compiles a different program than a full run and XLA fuses
    it differently, so a float32 value may differ in its last bit.
    """
    assert len(got) == len(want)
    index = {tuple(r[c] for c in key): r for r in want}
    assert len(index) == len(want), "key identifies a row"
    for r in got:
        twin = index[tuple(r[c] for c in key)]
        assert r.keys() == twin.keys()
        for c, v in r.items():
            if isinstance(v, float):
                assert v == pytest.approx(twin[c], rel=1e-6, abs=1e-30), c
            else:
                assert v == twin[c], c


def run_spec(tmp: Path, name: str, text: str, *options) -> Run:
    spec = tmp / f"{name}.toml"
    spec.write_text(text)
    out = tmp / f"{name}-out"
    TRACES.clear()
    result = sweep("run", spec, "-o", out, *options)
    assert result.exit_code == 0, result.output
    return Run(spec, out, result.stdout, dict(TRACES), read_rows(out))


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


# ----------------------------------------------------------------------------- shared runs


@pytest.fixture(scope="module")
def grid(tmp_path_factory) -> Run:
    """The grid, float32, chunk 64: 8,640 points in 135 chunks."""
    return run_spec(tmp_path_factory.mktemp("grid"), "grid", GRID_SPEC, "--chunk", CHUNK)


@pytest.fixture(scope="module")
def data64(tmp_path_factory) -> Run:
    """The grid's data job alone, float64 (one job: one compilation)."""
    return run_spec(tmp_path_factory.mktemp("data64"), "data", DATA_SPEC, "--chunk", CHUNK, "--x64")


@pytest.fixture(scope="module")
def paper32(tmp_path_factory) -> Run:
    return run_spec(tmp_path_factory.mktemp("paper32"), "paper", PAPER_SPEC.read_text(), "--chunk", CHUNK)


@pytest.fixture(scope="module")
def paper64(tmp_path_factory) -> Run:
    tmp = tmp_path_factory.mktemp("paper64")
    return run_spec(tmp, "paper", PAPER_SPEC.read_text(), "--chunk", CHUNK, "--x64")


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


# ----------------------------------------------------------------------------- self-describing output


def test_part_file_explains_itself(paper32):
    part = sorted(paper32.out.glob("part-*.parquet"))[0]
    meta = json.loads(pq.read_schema(part).metadata[store.META_KEY])
    for key in ("versions", "spec", "models", "machines"):
        assert key in meta, key
    assert meta["spec"] == PAPER_SPEC.read_text()
    assert set(meta["models"]) == {"resnet50", "vgg16"}
    assert set(meta["machines"]) == {"abci"}
    assert meta["machines"]["abci"]["params"]["gpus_per_node"] == 4
    assert meta["models"]["resnet50"]["weights"] == 25_502_912
    assert {"jax", "numpy", "pyarrow", "paradl-sweep"} <= set(meta["versions"])


def test_manifest_is_complete_and_counts_rows(paper32, grid):
    for run in (paper32, grid):
        m = manifest(run.out)
        assert m["complete"] is True
        assert m["rows"] == count_rows(run.out) == len(run.rows)


def test_manifest_text_is_json_dumps_as_the_values_change(paper32):
    """The manifest is written as ``json.dumps(doc, indent=1)`` would write it, with the fixed
    keys' text reused from the first call while the other keys change."""
    doc = manifest(paper32.out)
    text = store.ManifestText(k for k in doc if k not in ("done", "rows", "complete"))
    assert text(doc) == json.dumps(doc, indent=1)
    doc.update(done={"0": 7, "3": 1}, rows=12345, complete=False, added={"a": [1.5, "x\ny"], "b": {}})
    assert text(doc) == json.dumps(doc, indent=1)
    assert text({}) == json.dumps({}, indent=1)


@given(
    st.dictionaries(
        st.text(max_size=5),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
            lambda inner: (
                st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
            ),
            max_leaves=12,
        ),
        max_size=6,
    )
)
def test_manifest_text_equals_json_dumps_for_any_document(doc):
    text = store.ManifestText(list(doc)[::2])
    assert text(doc) == text(doc) == json.dumps(doc, indent=1)


def test_labels_are_dictionary_encoded_and_compression_is_zstd(paper32):
    part = sorted(paper32.out.glob("part-*.parquet"))[0]
    pf = pq.ParquetFile(part)
    schema = pf.schema_arrow
    meta = pf.metadata
    names = [meta.schema.column(i).name for i in range(meta.num_columns)]
    for name in ("model", "machine", "strategy", "limit_reason"):
        assert pa.types.is_dictionary(schema.field(name).type), name
        encodings = meta.row_group(0).column(names.index(name)).encodings
        assert any("DICTIONARY" in e for e in encodings), (name, encodings)
    for i in range(meta.num_columns):
        assert meta.row_group(0).column(i).compression == "ZSTD", names[i]
    for name in ("p", "p1", "p2", "b", "global_batch", "S", "iterations"):
        assert pa.types.is_integer(schema.field(name).type), name
    # min/max where a --where can use them (configuration), none where it cannot (results)
    group = meta.row_group(0)
    assert group.column(names.index("p")).is_stats_set
    assert group.column(names.index("strategy")).is_stats_set
    assert not group.column(names.index("t_epoch_s")).is_stats_set
    assert schema.field("feasible").type == pa.bool_()


def test_no_temporaries_after_success(grid, paper32):
    assert temporaries(grid.out) == []
    assert temporaries(paper32.out) == []


# ----------------------------------------------------------------------------- reductions and filters


@pytest.mark.parametrize("second", ["gpu_hours", "mem_bytes"])
def test_keep_pareto_of_two_result_columns_equals_the_front_of_the_full_output(grid, tmp_path, second):
    """A second objective that is a result column, not a configuration column such as p:
    the device's pre-filter reads it materialised (pareto_2d)."""
    kept = run_spec(tmp_path, "pareto2", GRID_SPEC, "--chunk", CHUNK, "--keep", f"pareto:t_epoch_s,{second}")
    feasible = [r for r in grid.rows if r["feasible"]]
    objectives = np.array([[r["t_epoch_s"], r[second]] for r in feasible], dtype=np.float64)
    front = [r for r, keep in zip(feasible, pareto_mask(objectives), strict=True) if keep]
    assert 0 < len(front) < len(feasible)
    assert_same_rows(kept.rows, front)


@pytest.mark.parametrize(
    ("compact", "point_rows"),
    # candidates in one block; more, evaluated again point by point, in one call or in several
    [(None, None), (4, None), (4, 3)],
)
def test_keep_pareto_equals_the_front_of_the_full_output(grid, tmp_path, monkeypatch, compact, point_rows):
    if compact is not None:
        monkeypatch.setattr(program_module, "COMPACT_ROWS", compact)
        monkeypatch.setattr(reducer_module, "REDUCE_ROWS", 1)  # the host reduces at every chunk, not once
    if point_rows is not None:
        monkeypatch.setattr(program_module, "POINT_ROWS", point_rows)
    prepared: list[str] = []  # jobs whose points function was compiled ahead, not on first use
    real = prepare_points
    monkeypatch.setattr(
        program_module, "prepare_points", lambda job, *a: prepared.append(job.strategy) or real(job, *a)
    )
    fronts: list[np.ndarray] = []  # the host's front each chunk was given (known_front)
    real_front = known_front

    def spy_front(vectors, dtype):
        if vectors is not None:
            fronts.append(vectors)
        return real_front(vectors, dtype)

    monkeypatch.setattr(filters_module, "known_front", spy_front)
    kept = run_spec(tmp_path, "pareto", GRID_SPEC, "--chunk", CHUNK, "--keep", "pareto:t_epoch_s,p")
    # once a job had more candidates than it compacts, the later jobs' fallbacks were
    # prepared with their kernels
    assert bool(prepared) == (compact is not None), prepared
    feasible = [r for r in grid.rows if r["feasible"]]
    objectives = np.array([[r["t_epoch_s"], r["p"]] for r in feasible], dtype=np.float64)
    # reduced at every chunk, later chunks were given the front so far: objectives of real rows
    given = np.concatenate([f for f in fronts if len(f)] or [np.zeros((0, 2))])
    if compact is not None:
        assert len(given)
    seen = {tuple(v) for v in objectives.astype(np.float32).tolist()}
    assert all(tuple(v) in seen for v in given.astype(np.float32).tolist())
    front = [r for r, keep in zip(feasible, pareto_mask(objectives), strict=True) if keep]
    assert 0 < len(front) < len(feasible)
    assert_same_rows(kept.rows, front)
    assert manifest(kept.out)["rows"] == len(kept.rows)
    assert temporaries(kept.out) == []


def _count_spills(monkeypatch, rows: int) -> list[int]:
    """Spill a Pareto front to disk once ``rows`` rows are kept; returns a list that grows per spill."""
    monkeypatch.setattr(reducer_module, "SPILL_ROWS", rows)
    monkeypatch.setattr(reducer_module, "SPILL_ROWS_MAX", rows)  # whatever this process's size
    monkeypatch.setattr(reducer_module, "REDUCE_ROWS", 1)
    monkeypatch.setattr(reducer_module, "BATCH_ROWS", 5)  # spills read back in blocks of 5 rows
    spills: list[int] = []
    real = reducer_module.Reducer._spill
    monkeypatch.setattr(reducer_module.Reducer, "_spill", lambda self: spills.append(1) or real(self))
    return spills


@pytest.mark.parametrize("columns", ["t_epoch_s,p", "t_epoch_s,p,mem_bytes"])
def test_keep_pareto_spilled_to_disk_equals_the_front_of_the_full_output(
    grid, tmp_path, monkeypatch, columns
):
    """A front of many tied rows goes to disk 8 rows at a time: the result is still the full
    output's front, in its (job, index) order, and no spill file is left."""
    spills = _count_spills(monkeypatch, 8)
    kept = run_spec(tmp_path, "spilled", GRID_SPEC, "--chunk", CHUNK, "--keep", f"pareto:{columns}")
    feasible = [r for r in grid.rows if r["feasible"]]  # the full output, in (job, index) order
    names = columns.split(",")
    objectives = np.array([[r[c] for c in names] for r in feasible], dtype=np.float64)
    front = [r for r, keep in zip(feasible, pareto_mask(objectives), strict=True) if keep]
    assert len(front) > 3 * 8
    assert len(spills) >= 3
    assert_same_rows(kept.rows, front)
    key = lambda r: tuple(r[c] for c in GRID_KEY)  # noqa: E731
    assert [key(r) for r in kept.rows] == [key(r) for r in front]
    assert manifest(kept.out)["rows"] == len(front)
    assert sorted(f.name for f in kept.out.iterdir()) == [store.MANIFEST, "part-keep.parquet"]
    assert temporaries(kept.out) == []


@pytest.mark.parametrize(
    ("rss", "spills"),
    [(0, False), (reducer_module.SPILL_RSS - 1, False), (reducer_module.SPILL_RSS, True), (None, True)],
)
def test_a_front_spills_early_only_when_the_process_is_large(grid, tmp_path, monkeypatch, rss, spills):
    """From SPILL_ROWS rows a front goes to disk only when the process holds SPILL_RSS bytes
    or more, or its size cannot be read; below SPILL_ROWS_MAX it stays in memory otherwise.
    The result is the full output's front either way."""
    counted = _count_spills(monkeypatch, 8)
    monkeypatch.setattr(reducer_module, "SPILL_ROWS_MAX", 10**9)
    monkeypatch.setattr(reducer_module, "resident_bytes", lambda: rss)
    kept = run_spec(tmp_path, "spilled", GRID_SPEC, "--chunk", CHUNK, "--keep", "pareto:t_epoch_s,p")
    feasible = [r for r in grid.rows if r["feasible"]]
    objectives = np.array([[r["t_epoch_s"], r["p"]] for r in feasible], dtype=np.float64)
    front = [r for r, keep in zip(feasible, pareto_mask(objectives), strict=True) if keep]
    assert len(front) > 3 * 8
    assert bool(counted) == spills
    assert_same_rows(kept.rows, front)
    assert temporaries(kept.out) == []


def test_spill_due_thresholds(monkeypatch):
    """SPILL_ROWS rows spill in a large process, SPILL_ROWS_MAX rows in any."""
    small, large = reducer_module.SPILL_ROWS, reducer_module.SPILL_ROWS_MAX
    assert 0 < small < large
    monkeypatch.setattr(reducer_module, "resident_bytes", lambda: 0)
    assert [reducer_module.spill_due(n) for n in (small - 1, small, large - 1, large)] == [
        False,
        False,
        False,
        True,
    ]
    monkeypatch.setattr(reducer_module, "resident_bytes", lambda: reducer_module.SPILL_RSS)
    assert [reducer_module.spill_due(n) for n in (small - 1, small, large)] == [False, True, True]
    # this process's own size is read where /proc is
    if os.path.exists("/proc/self/statm"):
        monkeypatch.undo()
        assert reducer_module.resident_bytes() > 10 << 20


def test_keep_top_equals_the_smallest_of_the_full_output(grid, tmp_path):
    kept = run_spec(tmp_path, "top", GRID_SPEC, "--chunk", CHUNK, "--keep", "top:5:t_epoch_s")
    smallest = sorted(r["t_epoch_s"] for r in grid.rows if r["feasible"])[:5]
    # values to float32 rounding: the reducing program is fused differently by XLA
    assert sorted(r["t_epoch_s"] for r in kept.rows) == pytest.approx(smallest, rel=1e-6)
    assert all(r["feasible"] for r in kept.rows)
    full = {tuple(r[c] for c in GRID_KEY): r for r in grid.rows}
    twins = [full[tuple(r[c] for c in GRID_KEY)] for r in kept.rows]
    assert_same_rows(kept.rows, twins)  # kept rows are rows of the full output


# bandwidths out of order: digit order is not value order
SHUFFLED_SPEC = (
    'name = "shuffled"\nmodel = "resnet50"\nmachine = "abci"\nstrategies = ["data", "filter"]\n'
    "[axes]\np = { start = 1, stop = 24 }\nb = [8, 32]\n"
    "inter_bandwidth_Bps = [40e9, 10e9, 100e9, 25e9, 12.5e9]\n"
)


@pytest.mark.parametrize("keep", ["pareto:t_epoch_s,inter_bandwidth_Bps", "top:7:inter_bandwidth_Bps"])
@pytest.mark.parametrize("chunk", ["16", "1000"])  # reduced on the device; on the host
def test_keep_by_a_swept_machine_parameter_reduces_its_values(tmp_path, keep, chunk):
    """A swept machine parameter is held as its axis digit until written; a reduction by it
    orders rows by its values, not by the order the spec lists them in (it kept the
    rows of the first bandwidth listed as the least)."""
    every = run_spec(tmp_path, "every", SHUFFLED_SPEC, "--chunk", chunk).rows
    kept = run_spec(tmp_path, "kept", SHUFFLED_SPEC, "--chunk", chunk, "--keep", keep).rows
    feasible = [r for r in every if r["feasible"]]
    key = ("strategy", "p", "b", "inter_bandwidth_Bps")
    if keep.startswith("pareto"):
        objectives = np.array([[r["t_epoch_s"], r["inter_bandwidth_Bps"]] for r in feasible])
        want = [r for r, k in zip(feasible, pareto_mask(objectives), strict=True) if k]
        # the least bandwidth is on the front (its fastest row), though listed fourth
        assert min(r["inter_bandwidth_Bps"] for r in want) == 10e9
    else:  # 7 rows at 10e9: every one of them, none at 12.5e9 or 40e9
        want = [r for r in feasible if r["inter_bandwidth_Bps"] == 10e9][:7]
        assert len(want) == 7
    assert_same_rows(kept, want, key)


def _one_chunk_per_job(grid, tmp_path, monkeypatch, keep: str, name: str) -> int:
    """Runs GRID_SPEC with a chunk that holds every job and ``--keep keep``, checks the rows
    kept are those of the full output, and returns how many chunks the host reduced."""
    calls = []
    real = host_candidates
    monkeypatch.setattr(survivors_module, "host_candidates", lambda *a: calls.append(1) or real(*a))
    big = str(len(grid.rows))  # every job fits in one chunk
    kept = run_spec(tmp_path, name, GRID_SPEC, "--chunk", big, "--keep", keep)
    feasible = [r for r in grid.rows if r["feasible"]]
    if keep.startswith("pareto"):
        objectives = np.array([[r["t_epoch_s"], r["p"]] for r in feasible], dtype=np.float64)
        want = [r for r, k in zip(feasible, pareto_mask(objectives), strict=True) if k]
        assert_same_rows(kept.rows, want)
    else:  # best first, ties in row order (a stable sort of the full output)
        want = sorted(feasible, key=lambda r: r["mem_bytes"])[:15]
        key = lambda r: tuple(r[c] for c in GRID_KEY)  # noqa: E731
        assert [key(r) for r in kept.rows] == [key(r) for r in want]
    return len(calls)


@pytest.mark.parametrize("keep", ["pareto:t_epoch_s,p", "top:15:mem_bytes"])
def test_keep_of_jobs_within_one_chunk_reduces_on_the_host(grid, tmp_path, monkeypatch, keep):
    """Jobs of one chunk or less return every row and the host picks the candidates (their
    reducing programs would take longer to compile than to run): the same rows are kept."""
    assert _one_chunk_per_job(grid, tmp_path, monkeypatch, keep, "whole") == 3  # one chunk a job
    assert sorted(TRACES.values()) == [1, 1, 1]  # one program per job


@pytest.mark.parametrize("keep", ["pareto:t_epoch_s,p", "top:15:mem_bytes"])
def test_keep_of_large_jobs_reduces_on_the_device_whatever_the_chunk(grid, tmp_path, monkeypatch, keep):
    """Only small jobs are reduced on the host: with --chunk 2^24 the bench's tied grid (jobs
    of 0.6-7.8 M points) reduced every job on the host, 7.7 s against 1.0 s at 2^20. Here
    the cap is lowered below this grid's jobs; one chunk holds each, the device reduces it,
    and the rows kept are those of the full output."""
    monkeypatch.setattr(program_module, "HOST_REDUCE_MAX", 8)
    assert _one_chunk_per_job(grid, tmp_path, monkeypatch, keep, "device") == 0


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


def test_keep_top_breaks_ties_by_row_order(grid, tmp_path):
    """Memory does not depend on the bandwidth, so rows tie in tens and the 15th ties with the
    16th. The rows kept are the first in (job, flat index) order, the full output's row order,
    so a stable sort of the full output by memory gives them; chunks whose rows all tie keep
    only as many as can win."""
    kept = run_spec(tmp_path, "top-ties", GRID_SPEC, "--chunk", CHUNK, "--keep", "top:15:mem_bytes")
    ranked = sorted((r for r in grid.rows if r["feasible"]), key=lambda r: r["mem_bytes"])
    assert ranked[14]["mem_bytes"] == ranked[15]["mem_bytes"]
    key = lambda r: tuple(r[c] for c in GRID_KEY)  # noqa: E731
    assert [key(r) for r in kept.rows] == [key(r) for r in ranked[:15]]
    assert_same_rows(kept.rows, ranked[:15])


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


# ----------------------------------------------------------------------------- interrupt and resume


def _interrupt_after(monkeypatch, chunks: int) -> None:
    """Make ``sweep run`` raise KeyboardInterrupt (as SIGINT would) after ``chunks`` chunks."""
    import sweep.engine.run

    calls = [0]

    def progress(done, total, elapsed):
        calls[0] += 1
        if calls[0] == chunks:
            raise KeyboardInterrupt

    monkeypatch.setattr(sweep.engine.run, "tty_progress", lambda: progress)


def test_interrupt_then_resume_equals_a_clean_run(grid, tmp_path, monkeypatch):
    spec = tmp_path / "grid.toml"
    spec.write_text(GRID_SPEC)
    out = tmp_path / "out"
    _interrupt_after(monkeypatch, 40)
    result = sweep("run", spec, "-o", out, "--chunk", CHUNK)
    assert result.exit_code == 130, result.output
    assert "--resume" in result.stderr
    assert "Traceback" not in result.output
    assert temporaries(out) == []
    m = manifest(out)
    assert m["complete"] is False
    assert 0 < m["rows"] == count_rows(out) < len(grid.rows)
    monkeypatch.undo()
    result = sweep("run", spec, "-o", out, "--chunk", CHUNK, "--resume")
    assert result.exit_code == 0, result.output
    assert temporaries(out) == []
    assert manifest(out)["complete"] is True
    assert as_tuples(read_rows(out)) == as_tuples(grid.rows)


def test_resume_without_chunk_continues_with_the_runs_own(grid, tmp_path, monkeypatch):
    """--resume without --chunk takes the chunk the folder's run was written with (a run
    started on a GPU, whose reductions default to 2^24, may be resumed on a CPU); a
    --chunk given that differs is still refused (test_resume_with_a_changed_spec_exits_2)."""
    spec = tmp_path / "grid.toml"
    spec.write_text(GRID_SPEC)
    out = tmp_path / "out"
    _interrupt_after(monkeypatch, 40)
    assert sweep("run", spec, "-o", out, "--chunk", CHUNK).exit_code == 130
    monkeypatch.undo()
    result = sweep("run", spec, "-o", out, "--resume")
    assert result.exit_code == 0, result.output
    assert manifest(out)["run_key"]["chunk"] == CHUNK
    assert as_tuples(read_rows(out)) == as_tuples(grid.rows)


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


@pytest.mark.parametrize("point_rows", [3, 1 << 16])  # candidates evaluated again: 3 a call, or all at once
def test_survivors_reads_more_candidates_than_the_compaction_size(monkeypatch, point_rows):
    """Ties put more rows on a chunk's front than one compacted block holds: every one is
    read, with the values the full evaluation of the chunk gives it."""
    import tomllib

    from sweep.inputs.grid import parse_spec, plan

    monkeypatch.setattr(program_module, "COMPACT_ROWS", 4)
    monkeypatch.setattr(program_module, "POINT_ROWS", point_rows)
    job = plan(parse_spec(tomllib.loads(GRID_SPEC), "grid", Path("."))).jobs[0]
    assert job.strategy == "data"  # in-node p: all ten bandwidths tie, so fronts have >= 10 rows
    chunk, keep = 64, Keep("pareto", ("t_epoch_s", "p"))
    fn, compact = build_chunk_fn(job, chunk, keep, np.float32)
    full, _ = build_chunk_fn(job, chunk, Keep("all"), np.float32)
    assert compact == 4
    inputs = device_inputs(job, np.float32)
    ti, pi = RESULT_COLUMNS.index("t_epoch_s"), int_columns(job).index("p")
    again = Again(job, np.float32)
    evaluated: list[int] = []
    rows = Again.rows
    monkeypatch.setattr(Again, "rows", lambda self, local: evaluated.append(len(local)) or rows(self, local))
    for start in range(0, job.size, chunk):
        n_real = min(chunk, job.size - start)
        info = decode_info(job, start, chunk)
        out = fn(*inputs, info, np.int32(n_real), known_front(None, np.float32))
        found = survivors(out, again.at(start))
        # the chunk's front from its full output
        every = full(*inputs, info, np.int32(n_real), known_front(None, np.float32))
        where = np.flatnonzero(np.asarray(every.mask) & (np.asarray(every.limit) == 0))
        objectives = np.stack([np.asarray(every.floats)[ti, where], np.asarray(every.ints)[pi, where]], 1)
        front = positions(every, where[pareto_mask(objectives.astype(np.float64))])
        # every row of the front is read; the device may pass on a few more (the host's
        # reduction is exact), all of them read with their own values
        assert set(front.tolist()) <= set(found.local.tolist()), start
        assert len(found.local) == len(set(found.local.tolist())) == int(out.count)
        mine = np.stack([found.floats[ti], found.ints[pi]], 1).astype(np.float64)
        assert sorted(found.local[pareto_mask(mine)].tolist()) == sorted(front.tolist()), start
        at = {int(v): k for k, v in enumerate(positions(every, where).tolist())}
        picked = where[[at[int(v)] for v in found.local]]
        np.testing.assert_array_equal(found.floats, np.asarray(every.floats)[:, picked])
        np.testing.assert_array_equal(found.ints, np.asarray(every.ints)[:, picked])
        np.testing.assert_array_equal(found.limit, np.asarray(every.limit)[picked])
    assert evaluated and max(evaluated) > 4, "some chunk had more candidates than it compacts"
    assert again.used


@settings(deadline=None, max_examples=60)
@given(data=st.data())
def test_digits_at_equals_divmod(data):
    """Flat indices of a job back to axis digits, past 2**31 too, as divmod gives them."""
    radices = data.draw(st.lists(st.integers(1, 5000), min_size=1, max_size=5))
    job = Job(0, None, "data", {f"a{i}": np.arange(r) for i, r in enumerate(radices)})  # type: ignore[arg-type]
    size = math.prod(radices)
    index = np.array(data.draw(st.lists(st.integers(0, size - 1), min_size=1, max_size=20)), dtype=np.int64)
    got = digits_at(job, index)
    for k, flat in enumerate(index.tolist()):
        assert got[:, k].tolist() == _python_digits(job, flat)


def test_interrupt_then_resume_a_reduction(grid, tmp_path, monkeypatch):
    keep = "pareto:t_epoch_s,p"
    spec = tmp_path / "grid.toml"
    spec.write_text(GRID_SPEC)
    out = tmp_path / "out"
    _interrupt_after(monkeypatch, 40)
    result = sweep("run", spec, "-o", out, "--chunk", CHUNK, "--keep", keep)
    assert result.exit_code == 130, result.output
    assert temporaries(out) == []
    monkeypatch.undo()
    result = sweep("run", spec, "-o", out, "--chunk", CHUNK, "--keep", keep, "--resume")
    assert result.exit_code == 0, result.output
    rows = read_rows(out)
    feasible = [r for r in grid.rows if r["feasible"]]
    objectives = np.array([[r["t_epoch_s"], r["p"]] for r in feasible], dtype=np.float64)
    want = [r for r, k in zip(feasible, pareto_mask(objectives), strict=True) if k]
    assert_same_rows(rows, want)
    assert sorted(f.name for f in out.iterdir()) == [store.MANIFEST, "part-keep.parquet"]


def test_interrupt_then_resume_a_spilled_reduction(grid, tmp_path, monkeypatch):
    """The manifest of an interrupted run names its spills; a spill it does not name (written
    after the last checkpoint, its chunks not recorded) is dropped on resume, not counted twice."""
    keep = "pareto:t_epoch_s,p"
    spec = tmp_path / "grid.toml"
    spec.write_text(GRID_SPEC)
    out = tmp_path / "out"
    _count_spills(monkeypatch, 16)
    _interrupt_after(monkeypatch, 40)
    result = sweep("run", spec, "-o", out, "--chunk", CHUNK, "--keep", keep)
    assert result.exit_code == 130, result.output
    m = manifest(out)
    assert m["keep_spill"], "the interrupted run had spilled"
    assert all((out / name).is_file() for name in m["keep_spill"])
    orphan = out / "_spill-999999.parquet"
    orphan.write_bytes((out / m["keep_spill"][0]).read_bytes())
    monkeypatch.undo()
    _count_spills(monkeypatch, 16)
    result = sweep("run", spec, "-o", out, "--chunk", CHUNK, "--keep", keep, "--resume")
    assert result.exit_code == 0, result.output
    feasible = [r for r in grid.rows if r["feasible"]]
    objectives = np.array([[r["t_epoch_s"], r["p"]] for r in feasible], dtype=np.float64)
    want = [r for r, k in zip(feasible, pareto_mask(objectives), strict=True) if k]
    assert_same_rows(read_rows(out), want)
    assert sorted(f.name for f in out.iterdir()) == [store.MANIFEST, "part-keep.parquet"]


def test_failure_while_recording_leaves_no_temporaries(tmp_path, monkeypatch):
    """A disk-full error while recording a part leaves a half-written manifest temporary: cleaned up."""
    spec = tmp_path / "data.toml"
    spec.write_text(DATA_SPEC)
    out = tmp_path / "out"
    real = store.write_manifest
    calls = [0]

    def failing(path: Path, text: str, schema) -> None:
        calls[0] += 1
        if calls[0] == 6:  # the initial manifest, then one per part: fails recording the 5th part
            path.with_name(f".{path.name}.tmp").write_text(text[: len(text) // 2])
            raise OSError(28, "No space left on device")
        real(path, text, schema)

    monkeypatch.setattr(store, "write_manifest", failing)
    result = sweep_caught("run", spec, "-o", out, "--chunk", CHUNK)
    monkeypatch.undo()
    _assert_exit_2(result, f"{out}: stopped: No space left on device;", "rerun with --resume to continue")
    assert manifest(out)["complete"] is False
    assert temporaries(out) == []


def test_part_write_failure_then_resume(grid, tmp_path, monkeypatch):
    spec = tmp_path / "data.toml"
    spec.write_text(DATA_SPEC)
    out = tmp_path / "out"
    real = store.PartWriter.write
    calls = [0]

    def failing(self, name, table):
        calls[0] += 1
        if calls[0] == 5:
            raise OSError(28, "No space left on device")
        return real(self, name, table)

    monkeypatch.setattr(store.PartWriter, "write", failing)
    result = sweep_caught("run", spec, "-o", out, "--chunk", CHUNK)
    # one line, not a traceback: the folder, the system's reason, what is kept, how to go on
    _assert_exit_2(result, f"{out}: stopped: No space left on device;", "rows kept", "--resume")
    assert "Traceback" not in result.output
    monkeypatch.undo()
    assert temporaries(out) == []
    m = manifest(out)
    assert m["complete"] is False
    # Parts are written by several threads and may finish out of order, so the
    # chunks before the failed one are done and a later one may be too; the
    # manifest counts exactly the rows on disk, and the failed chunk is missing.
    data_rows = sum(1 for r in grid.rows if r["strategy"] == "data")
    assert m["rows"] == count_rows(out)
    assert 4 * CHUNK <= m["rows"] < data_rows
    result = sweep("run", spec, "-o", out, "--chunk", CHUNK, "--resume")
    assert result.exit_code == 0, result.output
    assert temporaries(out) == []
    assert as_tuples(read_rows(out)) == as_tuples([r for r in grid.rows if r["strategy"] == "data"])


def _assert_exit_2(result, *needles):
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    for needle in needles:
        assert needle in lines[0]


def test_second_run_into_a_used_folder_exits_2(grid):
    before = snapshot(grid.out)
    _assert_exit_2(sweep("run", grid.spec, "-o", grid.out, "--chunk", CHUNK), str(grid.out))
    assert snapshot(grid.out) == before


def test_resume_with_a_changed_spec_exits_2(grid, tmp_path):
    changed = tmp_path / "grid.toml"
    changed.write_text(GRID_SPEC.replace("b = [8, 16, 32, 64]", "b = [8, 16, 32]"))
    before = snapshot(grid.out)
    _assert_exit_2(
        sweep("run", changed, "-o", grid.out, "--chunk", CHUNK, "--resume"), str(grid.out), "the spec differs"
    )
    # the line names the option to repeat: a --keep run's default chunk changed once
    _assert_exit_2(
        sweep("run", grid.spec, "-o", grid.out, "--chunk", 32, "--resume"),
        str(grid.out),
        f"chunk was {CHUNK}, now 32",
    )
    assert snapshot(grid.out) == before


def test_resume_of_a_complete_run_writes_nothing(grid):
    before = snapshot(grid.out)
    result = sweep("run", grid.spec, "-o", grid.out, "--chunk", CHUNK, "--resume")
    assert result.exit_code == 0, result.output
    assert f"{len(grid.rows):,} rows" in result.stdout
    assert snapshot(grid.out) == before


def test_sigint_stops_a_subprocess_run_cleanly(tmp_path):
    """The real console entry point: SIGINT after the first part file -> exit 130, resumable folder."""
    spec = tmp_path / "long.toml"
    spec.write_text(
        'name = "long"\nmodel = "resnet50"\nmachine = "abci"\nstrategies = ["data"]\n'
        "[axes]\np = { start = 1, stop = 4000 }\nb = { start = 1, stop = 100 }\n"
    )
    out = tmp_path / "out"
    env = {**os.environ, "SWEEP_JAX_CACHE": ""}
    cmd = [sys.executable, "-m", "sweep.cli", "run", str(spec), "-o", str(out), "--chunk", "16"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 90
        while not list(out.glob("part-*.parquet")) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, stderr
    assert "--resume" in stderr
    assert "Traceback" not in stdout + stderr
    assert temporaries(out) == []
    m = manifest(out)
    assert m["complete"] is False
    parts = sorted(out.glob("part-*.parquet"))
    assert len(parts) == m["done"]["0"] >= 1
    assert m["rows"] == count_rows(out) == 16 * len(parts)


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


# ----------------------------------------------------------------------------- decoding


def _job(axes: dict[str, np.ndarray], index: int) -> Job:
    tiny = load_model(str(grids.MODELS / "tiny-cnn.toml"))
    return Job(index, Bound.of(tiny, load_machine("abci")), "data", axes)


def _python_digits(job: Job, flat: int) -> list[int]:
    digits = []
    for values in reversed(list(job.axes.values())):
        flat, d = divmod(flat, len(values))
        digits.append(d)
    return digits[::-1]


def _check_info(job: Job, start: int, chunk: int) -> np.ndarray:
    """decode_info: the outer digits of ``start // T`` and the window ``start % T`` (T = inner box)."""
    radices = [len(v) for v in job.axes.values()]
    j = inner_split(radices, chunk)
    info = decode_info(job, start, chunk)
    digits = _python_digits(job, start)
    assert info[:j, 0].tolist() == digits[:j], start
    inner = 0
    for d, r in zip(digits[j:], radices[j:], strict=True):
        inner = inner * r + d
    assert info[j, 0] == inner, start
    return info


def _device_digits(job: Job, chunk: int, starts, dtype=np.float32) -> None:
    """Run the real chunk function at each start; every real row's digits equal divmod's."""
    fn, _ = build_chunk_fn(job, chunk, Keep("all"), dtype)
    net, machine, values = device_inputs(job, dtype)
    names = int_columns(job)
    axis_names = list(job.axes)
    radices = [len(v) for v in job.axes.values()]
    for start in starts:
        n_real = min(chunk, job.size - start)
        info = _check_info(job, start, chunk)
        out = fn(net, machine, values, info, np.int32(n_real), known_front(None, np.float32))
        mask = np.asarray(out.mask)
        where = np.flatnonzero(mask)
        offsets = positions(out, where)  # outputs span whole inner boxes
        assert offsets.tolist() == list(range(n_real)), start
        ints = np.asarray(out.ints)[:, where]
        got = []
        for name in axis_names:
            row = ints[names.index(name)].astype(np.int64)
            if name in ("p", "b"):  # value columns: values are 1..n, so digit = value - 1
                row = row - 1
            got.append(row)
        got = np.stack(got, axis=1)
        want = np.stack(np.unravel_index(start + np.arange(n_real, dtype=np.int64), radices), axis=1)
        np.testing.assert_array_equal(got, want, err_msg=f"start {start}")


@pytest.fixture(params=["float32", "int32"])
def decode_by(request, monkeypatch):
    """Both decodes: float32 (chunks up to FLOAT_CHUNK) and int32 (larger chunks),
    the latter forced at these small chunks."""
    if request.param == "int32":
        monkeypatch.setattr(index_module, "FLOAT_CHUNK", 0)
    return request.param


@pytest.mark.parametrize("chunk", [16, 128, 1024])  # inner box of 1, 7 and 35 points
def test_device_decoding_small_radices_every_start(chunk, decode_by):
    job = _job(
        {
            "p": np.arange(1, 4),
            "b": np.arange(1, 6),
            "inter_bandwidth_Bps": np.linspace(1e9, 7e9, 7),
        },
        index=900,
    )
    assert job.size == 105
    _device_digits(job, chunk, range(job.size))


def test_device_decoding_beyond_2_31_points(decode_by):
    n = 3000
    job = _job(
        {
            "p": np.arange(1, 4),
            "b": np.arange(1, n + 1),
            "intra_bandwidth_Bps": np.linspace(1e10, 2e10, n),
            "inter_bandwidth_Bps": np.linspace(1e9, 2e9, n),
        },
        index=901,
    )
    assert job.size == 3 * n**3 > 2**36
    strides = [n**3, n**2, n]
    starts = {0, 2**31 - 7, 2**31, 2**32 - 9, job.size - 16, job.size - 5}
    for stride in strides:
        for m in (1, 2, 3, 7, job.size // stride - 1):
            starts.add(m * stride - 5)
            starts.add(m * stride - 16)
    starts = sorted(s for s in starts if 0 <= s < job.size)
    _device_digits(job, 16, starts)
    _device_digits(job, 1 << 16, starts)  # an inner box of 3000 points


@pytest.mark.parametrize("n", [97, 193, 49999])
def test_device_decoding_radices_whose_reciprocal_rounds_down(n, decode_by):
    """97 * float32(1/97) < 1: a decode by reciprocal multiply must still give digit 0 of the next p."""
    job = _job({"p": np.arange(1, 4), "b": np.arange(1, n + 1)}, index=903 + n)
    _device_digits(job, 64, sorted({0, n - 5, 2 * n - 7, job.size - 64}))


@pytest.mark.parametrize("chunk", [64, 1024, 8192])  # inner box of 1, 13 and 143 points
def test_decode_info_digits_are_the_start_digits(chunk, decode_by):
    job = _job({"p": np.arange(1, 8), "b": np.arange(1, 12), "S": np.arange(1, 14)}, index=902)
    for start in range(0, job.size, 37):
        _check_info(job, start, chunk)


def test_chunks_beyond_float32_decode_keep_the_same_rows(tmp_path):
    """A chunk of 5 M points, above FLOAT_CHUNK, decodes in int32 (the decode itself
    is checked point by point above, forced at small chunks): its top 50 and Pareto front
    equal those of 2^20-point chunks, row for row. 6.24 M points in one job, two chunks:
    13 p x 2 b x 400 bandwidths x 600 latencies."""
    from sweep.engine.run import run_sweep
    from sweep.engine.runstate import RunOptions
    from sweep.inputs.grid import load_spec, plan
    from sweep.reduce.keep import parse_keep

    spec = tmp_path / "big.toml"
    spec.write_text(
        f"""name = "big"
model = "{grids.MODELS / "tiny-cnn.toml"}"
machine = "abci"
strategies = ["data"]
[axes]
p = {{ log2 = [0, 12] }}
b = [8, 32]
inter_bandwidth_Bps = {{ linspace = [12.5e9, 100e9, 400] }}
inter_alpha_s = {{ linspace = [1e-6, 50e-6, 600] }}
"""
    )
    p = plan(load_spec(spec))
    assert p.jobs[0].size == 6_240_000 > 5_000_000 > FLOAT_CHUNK
    for keep in ("top:50:t_epoch_s", "pareto:t_epoch_s,p"):
        tables = []
        for chunk in (1 << 20, 5_000_000):
            out = tmp_path / f"{keep.split(':')[0]}-{chunk}"
            keeping = parse_keep(keep, numeric_columns(p.jobs[0]))
            run_sweep(p, RunOptions(out=out, chunk=chunk, keep=keeping))
            tables.append(pq.read_table(out / "part-keep.parquet").to_pylist())
        assert tables[0] == tables[1], keep
        assert len(tables[0]) >= 50


def test_program_chunk_fits_a_small_job():
    job = _job({"p": np.arange(1, 4), "b": np.arange(1, 36)}, index=950)  # 105 points
    assert program_chunk(job, 1 << 18) == 105
    assert program_chunk(job, 64) == 64  # a job of several chunks keeps the run's
    assert program_chunk(job, 105) == 105
    assert program_chunk(job, 106) == 105
    one = _job({"p": np.arange(1, 2)}, index=951)
    assert program_chunk(one, 1 << 20) == 1


# ----------------------------------------------------------------------------- pareto


def _objectives(k: int):
    pool = st.sampled_from([0.0, -0.0, 1.0, 1.5, 2.0, 3.0, 1e300, np.nan])
    rows = st.lists(st.lists(pool, min_size=k, max_size=k), min_size=0, max_size=30)
    # repeat some rows so identical points appear together
    return rows.map(lambda r: np.array(r + r[: len(r) // 3], dtype=np.float64).reshape(-1, k))


@settings(deadline=None, max_examples=200)
@given(objs=st.integers(1, 4).flatmap(_objectives))
def test_pareto_mask_equals_brute_force(objs):
    np.testing.assert_array_equal(pareto_mask(objs), pareto_brute(objs))


@settings(deadline=None, max_examples=100)
@given(
    objs=hnp.arrays(
        np.float64,
        st.tuples(st.integers(0, 40), st.integers(1, 4)),
        elements=st.integers(0, 4).map(float),
    )
)
def test_pareto_mask_equals_brute_force_on_small_integers(objs):
    np.testing.assert_array_equal(pareto_mask(objs), pareto_brute(objs))


@pytest.mark.parametrize(
    ("objs", "want"),
    [
        ([[0.0, np.inf]], [True]),
        ([[1.0, np.inf], [2.0, np.inf]], [True, False]),
        ([[1.0, np.inf], [0.5, 3.0]], [False, True]),  # (0.5, 3) dominates (1, inf)
        ([[1.0, np.inf], [0.5, np.inf]], [False, True]),
    ],
)
def test_pareto_mask_keeps_infinite_objectives(objs, want):
    objs = np.array(objs)
    assert pareto_brute(objs).tolist() == want
    assert pareto_mask(objs).tolist() == want


_front_points = jax.jit(front_points, static_argnums=2)


@settings(deadline=None, max_examples=100)
@given(
    objs=hnp.arrays(np.float32, (32, 2), elements=st.sampled_from([0.0, 1.0, 2.0, 3.0, 4.0, np.inf])),
    k=st.sampled_from([1, 3, 16]),
)
def test_front_points_are_the_distinct_points_of_the_front(objs, k):
    """The pre-filter's reference front: each point of the front of the finite rows once
    (ties collapse), by increasing first objective, padded with infinities; the count of
    points, or k + 1 when there are more than k."""
    finite = np.isfinite(objs).all(axis=1)
    rows = objs[finite].astype(np.float64)
    points = sorted({tuple(r) for r in rows[pareto_brute(rows)]}) if len(rows) else []
    f1, f2, count = (np.asarray(x) for x in _front_points(objs[:, 0], objs[:, 1], k))
    assert int(count) == min(len(points), k + 1)
    want = (points + [(np.inf, np.inf)] * k)[:k]
    np.testing.assert_array_equal(np.stack([f1, f2], axis=1), np.array(want, dtype=np.float32))


_device_pareto_fast = jax.jit(pareto_2d)


def assert_front_candidates(got: np.ndarray, objs: np.ndarray, ok: np.ndarray) -> None:
    """``got`` holds every row of the front of the ``ok`` rows (NaN never), and the front
    of ``got`` alone is that front: what the host's exact reduction needs of a chunk."""
    number = ok & ~np.isnan(objs).any(axis=1)
    want = np.zeros(len(ok), dtype=bool)
    want[number] = pareto_mask(objs[number].astype(np.float64))
    assert not (want & ~got).any(), "a row of the front was dropped"
    assert not (got & ~number).any(), "a row that is not a candidate was passed on"
    again = np.zeros(len(ok), dtype=bool)
    again[got] = pareto_mask(objs[got].astype(np.float64))
    np.testing.assert_array_equal(again, want)


def undominated_by_references(
    objs: np.ndarray, ok: np.ndarray, known: np.ndarray | None = None
) -> tuple[np.ndarray, int]:
    """What the pre-filter's short-front path keeps, by brute force: the rows (``ok``, no NaN)
    that no block reference dominates, rows with an infinite objective always; and how many
    distinct points the references' front has. Each block of about ``PARETO_BLOCK`` rows gives two
    references among its finite rows: the least (o1, o2) and the least (o2, o1). Points of a
    ``known`` front ``[points, 2]`` are references too, those no larger than the references'
    largest o1 (at their least o2) and largest o2 (at their least o1)."""
    number = ok & ~np.isnan(objs).any(axis=1)
    finite = number & np.isfinite(objs).all(axis=1)
    refs = []
    block = tile(len(objs), PARETO_BLOCK)
    for lo in range(0, len(objs), block):
        rows = objs[lo : lo + block][finite[lo : lo + block]]
        if len(rows):
            refs.append(rows[np.lexsort((rows[:, 1], rows[:, 0]))[0]])
            refs.append(rows[np.lexsort((rows[:, 0], rows[:, 1]))[0]])
    if not refs:
        return number, 0
    refs = np.unique(np.array(refs, dtype=np.float64), axis=0)
    if known is not None and len(known):
        last1 = refs[np.lexsort((refs[:, 0], refs[:, 1]))[0], 0]  # o1 at the least o2
        last2 = refs[np.lexsort((refs[:, 1], refs[:, 0]))[0], 1]  # o2 at the least o1
        near = known[(known[:, 0] <= last1) & (known[:, 1] <= last2)]
        refs = np.unique(np.concatenate([refs, near.astype(np.float64)]), axis=0)
    front = refs[pareto_brute(refs)]
    x = objs[:, None, :].astype(np.float64)
    f = front[None, :, :]
    dominated = ((f <= x).all(axis=2) & (f < x).any(axis=2)).any(axis=1)
    return number & ~(finite & dominated), len(front)


def assert_prefilter(
    got: np.ndarray, objs: np.ndarray, ok: np.ndarray, known: np.ndarray | None = None
) -> None:
    """The pre-filter's candidates (see :func:`assert_front_candidates`) drop no row that no
    reference dominates, and are exactly those when the references' front is short."""
    if known is None:
        assert_front_candidates(got, objs, ok)
    want, points = undominated_by_references(objs, ok, known)
    assert not (want & ~got).any(), "a row no reference dominates was dropped"
    if points <= PARETO_FRONT:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    "steps",
    [1, PARETO_SHORT, PARETO_SHORT + 1, PARETO_FRONT, PARETO_FRONT + 1, 40],
)
def test_device_pareto_prefilter_on_a_staircase(steps):
    """A front of ``steps`` points, one per block, each block's other rows dominated by its
    own point alone, and two rows with an infinite objective on the front: the candidates
    are exactly the front, whichever path the length of the front picks (at most
    PARETO_FRONT points: every row against each; more: the buckets)."""
    block = PARETO_BLOCK
    objs = np.zeros((steps * block, 2), np.float32)  # whole blocks: tile keeps them
    for j in range(steps):
        objs[j * block : (j + 1) * block] = (j + 0.5, steps - j + 0.5)  # above-right of step j only
        objs[j * block : (j + 1) * block : 2] = (j, steps - j + 0.5)  # above it, in its bucket
        objs[j * block + block // 2] = (j, steps - j)
    objs[-2:] = [(-1.0, np.inf), (np.inf, -1.0)]  # in the last block, with its step
    ok = np.ones(len(objs), dtype=bool)
    got = np.asarray(_device_pareto_fast(objs[:, 0], objs[:, 1], ok))
    want = np.zeros(len(objs), dtype=bool)
    want[[j * block + block // 2 for j in range(steps)] + [len(objs) - 2, len(objs) - 1]] = True
    np.testing.assert_array_equal(got, want)


@settings(deadline=None, max_examples=60)
@given(
    n=st.sampled_from([5, 300, 20_000]),
    seed=st.integers(0, 2**31),
    levels=st.sampled_from([3, 50, 10_000]),
)
def test_device_pareto_prefilter_keeps_the_front(n, seed, levels):
    """The O(n) pre-filter passes on every row of the front and nothing that is not a
    candidate (ties, inf and dropped rows included)."""
    rng = np.random.default_rng(seed)
    objs = rng.integers(0, levels, (n, 2)).astype(np.float32)
    objs[rng.random((n, 2)) < 0.01] = np.inf
    ok = rng.random(n) < 0.9
    got = np.asarray(_device_pareto_fast(objs[:, 0], objs[:, 1], ok))
    assert_prefilter(got, objs, ok)


@settings(deadline=None, max_examples=40)
@given(
    n=st.sampled_from([7, 600, 20_000]),
    seed=st.integers(0, 2**31),
    spread=st.sampled_from([1e-30, 1e-6, 1.0, 1e6, 1e30]),
    shift=st.sampled_from([-1e6, 0.0, 1e3]),
)
def test_device_pareto_prefilter_keeps_the_front_at_any_scale(n, seed, spread, shift):
    """Objectives over many orders of magnitude, negative ones, and values that differ
    only in their last bits: the buckets span the front's range of the first objective,
    so a tiny or huge range must still keep every row of the front."""
    rng = np.random.default_rng(seed)
    objs = (shift + spread * rng.standard_normal((n, 2)) ** 3).astype(np.float32)
    objs[rng.random(n) < 0.3, 0] = objs[0, 0]  # ties in the first objective
    ok = rng.random(n) < 0.95
    got = np.asarray(_device_pareto_fast(objs[:, 0], objs[:, 1], ok))
    assert_prefilter(got, objs, ok)


def sweep_like_chunk(rng, n: int, run: int, tie: int, flaw: str) -> tuple[np.ndarray, np.ndarray]:
    """``(objs [n, 2], ok)`` shaped like a sweep's chunk: the second objective constant over
    runs of ``run`` rows (p an outer axis), the first tied over runs of ``tie`` rows (a
    network setting that does not matter), with a ``flaw``: "none", "inf" (infinite
    objectives), "not ok" (rows that are not candidates), "odd rows" (scattered rows with a
    smaller second objective) or "nan" (NaN objectives, one where a block's best would be)."""
    o2 = np.repeat(rng.integers(1, 6, -(-n // run)), run)[:n].astype(np.float32)
    levels = rng.random(-(-n // tie)).astype(np.float32) * 10
    o1 = np.repeat(levels, tie)[:n] + o2  # more GPUs, a worse time at the same setting
    ok = np.ones(n, dtype=bool)
    if flaw == "inf":
        o1[rng.integers(0, n, 3)] = np.inf
    elif flaw == "not ok":
        ok = rng.random(n) < 0.9
    elif flaw == "odd rows":
        o2[rng.integers(0, n, 20)] = 0.5
    elif flaw == "nan":  # one a block's best would otherwise be, and scattered ones in either
        o1[int(np.argmin(o1))] = np.nan
        o1[rng.integers(0, n, 5)] = np.nan
        o2[rng.integers(0, n, 5)] = np.nan
    return np.stack([o1, o2], axis=1), ok


@settings(deadline=None, max_examples=60)
@given(
    n=st.sampled_from([300, 20_000, 70_000]),
    seed=st.integers(0, 2**31),
    run=st.sampled_from([1, 7, 128, 1000, 30_000]),
    tie=st.sampled_from([1, 5, 100, 100_000]),
    flaw=st.sampled_from(["none", "inf", "not ok", "odd rows", "nan"]),
)
def test_device_pareto_of_sweep_like_chunks(n, seed, run, tie, flaw):
    """Chunks shaped like a sweep's: the second objective constant over runs of rows (p an
    outer axis), the first tied over runs of ``tie`` rows (a network setting that does not
    matter). Most give the references a short front, which every row is compared with; the
    flaws (infinite objectives, rows that are not candidates, rows off their block's best)
    lengthen some, which then take the buckets. Every path must pass on the whole front,
    and nothing the host would not consider: a NaN objective (either one) is never on it."""
    objs, ok = sweep_like_chunk(np.random.default_rng(seed), n, run, tie, flaw)
    got = np.asarray(_device_pareto_fast(objs[:, 0], objs[:, 1], ok))
    assert_prefilter(got, objs, ok)


_device_pareto_known = jax.jit(pareto_2d, static_argnums=3)


@settings(deadline=None, max_examples=60)
@given(
    n=st.sampled_from([300, 20_000]),
    seed=st.integers(0, 2**31),
    run=st.sampled_from([1, 128, 30_000]),
    tie=st.sampled_from([1, 100, 100_000]),
    points=st.integers(0, 40),
    flaw=st.sampled_from(["none", "inf", "not ok", "odd rows", "nan"]),
)
def test_device_pareto_drops_what_a_known_front_dominates(n, seed, run, tie, points, flaw):
    """With the points of a front found before (``known``, as known_front gives
    them: a longer front thinned to PARETO_FRONT points; some equal to rows here): every
    row that neither another row nor a known point dominates is passed on (rows equal to
    a known point too), nothing that is not a candidate; and when the references' front
    with the known points near it is short, exactly the rows none of those dominates (so
    rows a known point dominates go)."""
    rng = np.random.default_rng(seed)
    objs, ok = sweep_like_chunk(rng, n, run, tie, flaw)
    # a front of earlier rows in the same range, some of them equal to rows of this chunk
    seen = np.concatenate(
        [rng.random((3 * points, 2)) * [12, 6] + [1, 0.5], objs[rng.integers(0, n, points)]]
    )
    seen = seen[np.isfinite(seen).all(axis=1)].astype(np.float32)
    vectors = np.unique(seen[pareto_mask(seen.astype(np.float64))].astype(np.float64), axis=0)
    known = known_front(vectors, np.float32)
    given_points = known.T[np.isfinite(known.T).all(axis=1)]
    got = np.asarray(_device_pareto_known(objs[:, 0], objs[:, 1], ok, False, known))
    number = ok & ~np.isnan(objs).any(axis=1)
    assert not (got & ~number).any(), "a row that is not a candidate was passed on"
    # the front of these rows and the known points: its rows must all be passed on
    both = np.concatenate([given_points, objs[number]]).astype(np.float64)
    on_front = np.zeros(n, dtype=bool)
    on_front[number] = pareto_mask(both)[len(given_points) :]
    assert not (on_front & ~got).any(), "a row of the front was dropped"
    assert got[number & ~np.isfinite(objs).all(axis=1)].all(), "a row with an infinite objective was dropped"
    assert_prefilter(got, objs, ok, given_points)


def test_known_front_points():
    """known_front: [2, PARETO_FRONT] points, padded with inf; infinite vectors
    left out; a longer front thinned evenly, its ends kept; a value float32 cannot hold
    rounded up, never down (a point must not dominate more than its row)."""
    none = known_front(None, np.float32)
    assert none.shape == (2, PARETO_FRONT) and np.isinf(none).all()
    v = np.array([[1.0, 5.0], [2.0, np.inf], [3.0, 2.0]])
    got = known_front(v, np.float32)
    np.testing.assert_array_equal(got[:, :2], [[1.0, 3.0], [5.0, 2.0]])
    assert np.isinf(got[:, 2:]).all()
    long = np.stack([np.arange(100.0), 100.0 - np.arange(100.0)], axis=1)
    got = known_front(long, np.float32)
    assert got.shape == (2, PARETO_FRONT) and np.isfinite(got).all()
    # 16 of 100 evenly: indices round(99 * j / 15), j = 0..15; the first 0, the last 99
    np.testing.assert_array_equal(got[0], np.round(np.linspace(0, 99, PARETO_FRONT)))
    # 0.1 is not a float32: its nearest float32 (0.100000001490116) is above it, kept;
    # 1 + 2^-30 rounds down to 1.0 in float32, so the next float32 up, 1 + 2^-23, is given
    got = known_front(np.array([[0.1, 1 + 2.0**-30]]), np.float32)
    assert got[0, 0] == np.float32(0.1) and got[0, 0] >= 0.1
    assert got[1, 0] == np.float32(1 + 2.0**-23)


_device_pareto_kd = jax.jit(pareto_kd)


@settings(deadline=None, max_examples=60)
@given(
    n=st.sampled_from([5, 600, 20_000]),
    k=st.sampled_from([3, 4]),
    seed=st.integers(0, 2**31),
    levels=st.sampled_from([3, 50, 10_000]),
    flaw=st.sampled_from(["none", "inf", "nan", "not ok"]),
)
def test_device_pareto_prefilter_of_more_objectives_keeps_the_front(n, k, seed, levels, flaw):
    """Three or four objectives: every row of the front is passed on, nothing that is not a
    candidate (NaN, not ok), and the front of what is passed on is the front."""
    rng = np.random.default_rng(seed)
    objs = rng.integers(0, levels, (n, k)).astype(np.float32)
    ok = np.ones(n, dtype=bool)
    if flaw == "inf":
        objs[rng.random((n, k)) < 0.01] = np.inf
    elif flaw == "nan":
        objs[rng.random((n, k)) < 0.01] = np.nan
    elif flaw == "not ok":
        ok = rng.random(n) < 0.9
    got = np.asarray(_device_pareto_kd(tuple(objs.T), ok))
    assert_front_candidates(got, objs, ok)


def test_device_pareto_prefilter_of_more_objectives_drops_what_the_best_dominates():
    """One row better in all three objectives than every other: it and its copies are all
    that is passed on, but for a row with an infinite objective, which never is dropped."""
    rng = np.random.default_rng(1)
    objs = (1 + rng.random((5000, 3))).astype(np.float32)
    objs[[7, 4000]] = (0.5, 0.5, 0.5)
    objs[123] = (np.inf, 2.0, 2.0)
    got = np.asarray(_device_pareto_kd(tuple(objs.T), np.ones(len(objs), dtype=bool)))
    assert np.flatnonzero(got).tolist() == [7, 123, 4000]


_top_k = jax.jit(top_k_candidates, static_argnums=(2, 3))


@settings(deadline=None, max_examples=80)
@given(
    n=st.sampled_from([7, 300, 5_000, 70_000]),
    seed=st.integers(0, 2**31),
    k=st.sampled_from([1, 3, 64, 65, 200]),
    levels=st.sampled_from([2, 50, 1_000_000]),
    flaw=st.sampled_from(["none", "inf", "nan", "few ok", "nan and inf"]),
)
def test_device_top_k_keeps_the_first_of_the_best(n, seed, k, levels, flaw):
    """The rows a chunk's top-k keeps: the k least objectives among ok rows (NaN never), ties
    to the lower position, the order the host breaks ties in. Small k picks by blocks, large k
    and chunks with fewer than k finite candidates go through a mask; both must agree. In the
    latter case every ok row with an infinite or NaN objective is passed on too (the host
    drops the NaN ones), and nothing else."""
    rng = np.random.default_rng(seed)
    obj = rng.integers(0, levels, n).astype(np.float32)
    ok = rng.random(n) < 0.9
    if flaw == "inf":
        obj[rng.random(n) < 0.3] = np.inf
    elif flaw == "nan":
        obj[rng.random(n) < 0.3] = np.nan
    elif flaw == "few ok":
        ok = rng.random(n) < 3 / n
    elif flaw == "nan and inf":  # few finite rows: the k-th is infinite
        u = rng.random(n)
        obj[u < 0.5] = np.nan
        obj[(u >= 0.5) & (u < 0.999)] = np.inf
    size = n
    mask, count, idx = (np.asarray(a) for a in _top_k(obj, ok, k, size))
    valid = np.flatnonzero(ok & ~np.isnan(obj))
    want = np.sort(valid[np.argsort(obj[valid], kind="stable")[:k]])
    got = np.flatnonzero(mask)
    assert int(count) == len(got)
    np.testing.assert_array_equal(np.sort(idx[: len(got)]), got)
    finite = np.isfinite(obj[valid]).sum()
    if finite >= k:
        np.testing.assert_array_equal(got, want)
    else:  # the finite rows, then every ok row scored infinite (NaN or inf)
        extra = np.flatnonzero(ok & ~np.isfinite(obj))
        np.testing.assert_array_equal(got, np.union1d(valid[np.isfinite(obj[valid])], extra))
        kept = got[~np.isnan(obj[got])]  # what the host keeps of them, then cuts to k
        np.testing.assert_array_equal(
            kept[np.argsort(obj[kept], kind="stable")][:k], want[np.argsort(obj[want], kind="stable")]
        )


@settings(deadline=None, max_examples=150)
@given(
    objs=hnp.arrays(
        np.float64,
        st.tuples(st.integers(1, 60), st.integers(1, 3)),
        # few values: ties; NaN and infinities
        elements=st.sampled_from([0.0, 1.0, 2.0, 3.0, -1.0, np.inf, -np.inf, np.nan]),
    ),
    k=st.integers(1, 8),
)
def test_host_prefilter_keeps_every_row_of_the_result(objs, k):
    """The host's pre-filter of a one-chunk job (host_candidates) passes on every row
    of the exact front and of the top-k (whatever the tie-break), and no row with a NaN
    objective."""
    columns = list(objs.T)
    passed = _undominated(columns)
    front = pareto_mask(objs)
    assert not (front & ~passed).any()
    assert not (passed & np.isnan(objs).any(axis=1)).any()
    first = columns[0]
    within = _within_top(first, k)
    number = np.flatnonzero(~np.isnan(first))
    for tiebreak in (number, number[::-1]):  # the k least, ties either way
        best = number[np.lexsort((tiebreak, first[number]))][:k]
        assert within[best].all()
    assert not (within & np.isnan(first)).any()


_compact = jax.jit(compact_indices, static_argnums=(1, 2))


@settings(deadline=None, max_examples=80)
@given(
    n=st.sampled_from([10, 300, 5_000, 70_000, 70_001]),
    seed=st.integers(0, 2**31),
    shape=st.sampled_from(["sparse", "run", "dense", "none"]),
    size=st.sampled_from([1, 7, 4096]),
)
def test_compact_equals_nonzero(n, seed, shape, size):
    """The blocked compaction counts the True entries exactly, and returns nonzero's indices
    whether they are few or many, in few blocks or spread: always when they fit, and when
    they do not, either nonzero's first ``size`` or nothing (``fill``)."""
    rng = np.random.default_rng(seed)
    mask = np.zeros(n, dtype=bool)
    if shape == "sparse":
        mask[rng.integers(0, n, 40)] = True
    elif shape == "run":
        a = int(rng.integers(0, n))
        mask[a : a + 3000] = True
    elif shape == "dense":
        mask = rng.random(n) < 0.5
    for fill in (0, n):
        count, got = (np.asarray(x) for x in _compact(mask, size, fill))
        found = np.flatnonzero(mask)
        assert int(count) == len(found)
        want = np.full(size, fill)
        want[: min(len(found), size)] = found[:size]
        if len(found) <= size:
            np.testing.assert_array_equal(got, want)
        else:
            assert (got == want).all() or (got == fill).all()


@pytest.mark.parametrize(
    ("n", "size", "want"),
    [
        (1 << 20, 512, 512),
        (1_050_000, 512, 500),
        (1_050_000, 256, 250),
        (1031, 512, 512),
        (2 * 1031, 256, 256),
    ],
)
def test_tile_divides_the_rows_when_it_can(n, size, want):
    """Blocks of about ``size`` that tile ``n`` (no padded copy), else ``size``: 1,050,000
    = 2,100 x 500 = 4,200 x 250; 1,031 is prime and above 2 x 512; 2,062 = 2 x 1,031 has
    no divisor in [128, 512]."""
    assert tile(n, size) == want


def test_pareto_mask_known_fronts():
    objs = np.array([[1.0, 5.0], [2.0, 2.0], [2.0, 2.0], [3.0, 1.0], [3.0, 3.0], [1.0, 5.0], [np.nan, 0.0]])
    assert pareto_mask(objs).tolist() == [True, True, True, True, False, True, False]
    three = np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [2.0, 2.0, 3.0], [0.0, 9.0, 9.0]])
    assert pareto_mask(three).tolist() == [True, True, False, True]


def test_written_is_whole_or_absent(tmp_path):
    """store.written: the file appears only on success; an OS error is one InputError naming the path."""
    out = tmp_path / "a.csv"
    with store.written(out) as tmp:
        tmp.write_text("x\n")
        assert not out.exists()
    assert out.read_text() == "x\n" and sorted(p.name for p in tmp_path.iterdir()) == ["a.csv"]
    with pytest.raises(RuntimeError), store.written(out) as tmp:  # a failing writer keeps the old file
        tmp.write_text("half")
        raise RuntimeError
    assert out.read_text() == "x\n" and sorted(p.name for p in tmp_path.iterdir()) == ["a.csv"]
    blocked = store.written(out / "b.png", keep_suffix=True)
    with pytest.raises(InputError, match=r"a\.csv/b\.png: cannot write: Not a directory$"), blocked as tmp:
        assert tmp.name == ".b.tmp.png"
        tmp.write_text("never")
    with pytest.raises(InputError, match=r"a\.csv: cannot write in the output folder: File exists$"):
        store.writable_folder(out)
