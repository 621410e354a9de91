"""``sweep run --keep`` (sweep/reduce/keep.py, reducer.py): the rows kept are those the full
output's Pareto front or top-k gives (:func:`sweep.reduce.pareto.pareto_mask`, sorting),
whether reduced on the device, on the host, or spilled to disk."""

from __future__ import annotations

import numpy as np
import pytest

from sweep.engine import filters as filters_module
from sweep.engine import program as program_module
from sweep.engine.filters import known_front
from sweep.engine.program import prepare_points
from sweep.output import store
from sweep.reduce import reducer as reducer_module
from sweep.reduce.pareto import pareto_mask
from tests.runs import (
    CHUNK,
    GRID_KEY,
    GRID_SPEC,
    assert_same_rows,
    count_spills,
    distinct_front,
    manifest,
    run_spec,
    temporaries,
)


@pytest.mark.parametrize("second", ["gpu_hours", "mem_bytes"])
def test_keep_pareto_of_two_result_columns_equals_the_front_of_the_full_output(grid, tmp_path, second):
    """A second objective that is a result column, not a configuration column such as p:
    the device's pre-filter reads it materialised (pareto_2d)."""
    kept = run_spec(tmp_path, "pareto2", GRID_SPEC, "--chunk", CHUNK, "--keep", f"pareto:t_epoch_s,{second}")
    feasible = [r for r in grid.rows if r["feasible"]]
    objectives = np.array([[r["t_epoch_s"], r[second]] for r in feasible], dtype=np.float64)
    front = [r for r, keep in zip(feasible, pareto_mask(objectives), strict=True) if keep]
    assert 0 < len(front) < len(feasible)
    assert_same_rows(kept.rows, distinct_front(front, ["t_epoch_s", second]))


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
    distinct = distinct_front(front, ["t_epoch_s", "p"])
    assert 0 < len(distinct) < len(front) < len(feasible)  # the grid has ties on its front
    assert_same_rows(kept.rows, distinct)
    assert manifest(kept.out)["rows"] == len(kept.rows)
    assert temporaries(kept.out) == []


@pytest.mark.parametrize("columns", ["t_epoch_s,p", "t_epoch_s,p,mem_bytes"])
def test_keep_pareto_spilled_to_disk_equals_the_front_of_the_full_output(
    grid, tmp_path, monkeypatch, columns
):
    """A front of many tied rows goes to disk 8 rows at a time: the result is still the full
    output's front, in its (job, index) order, and no spill file is left (``:all``: a front
    of distinct optima holds a row per vector and never spills)."""
    spills = count_spills(monkeypatch, 8)
    kept = run_spec(tmp_path, "spilled", GRID_SPEC, "--chunk", CHUNK, "--keep", f"pareto:{columns}:all")
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
    counted = count_spills(monkeypatch, 8)
    monkeypatch.setattr(reducer_module, "SPILL_ROWS_MAX", 10**9)
    monkeypatch.setattr(reducer_module, "resident_bytes", lambda: rss)
    kept = run_spec(tmp_path, "spilled", GRID_SPEC, "--chunk", CHUNK, "--keep", "pareto:t_epoch_s,p:all")
    feasible = [r for r in grid.rows if r["feasible"]]
    objectives = np.array([[r["t_epoch_s"], r["p"]] for r in feasible], dtype=np.float64)
    front = [r for r, keep in zip(feasible, pareto_mask(objectives), strict=True) if keep]
    assert len(front) > 3 * 8
    assert bool(counted) == spills
    assert_same_rows(kept.rows, front)
    assert temporaries(kept.out) == []


def test_keep_top_equals_the_smallest_of_the_full_output(grid, tmp_path):
    kept = run_spec(tmp_path, "top", GRID_SPEC, "--chunk", CHUNK, "--keep", "top:5:t_epoch_s")
    smallest = sorted(r["t_epoch_s"] for r in grid.rows if r["feasible"])[:5]
    # values to float32 rounding: the reducing program is fused differently by XLA
    assert sorted(r["t_epoch_s"] for r in kept.rows) == pytest.approx(smallest, rel=1e-6)
    assert all(r["feasible"] for r in kept.rows)
    full = {tuple(r[c] for c in GRID_KEY): r for r in grid.rows}
    twins = [full[tuple(r[c] for c in GRID_KEY)] for r in kept.rows]
    assert_same_rows(kept.rows, twins)  # kept rows are rows of the full output


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
        want = distinct_front(want, ["t_epoch_s", "inter_bandwidth_Bps"])
    else:  # 7 rows at 10e9: every one of them, none at 12.5e9 or 40e9
        want = [r for r in feasible if r["inter_bandwidth_Bps"] == 10e9][:7]
        assert len(want) == 7
    assert_same_rows(kept, want, key)


@pytest.mark.parametrize("keep", ["pareto:t_epoch_s,p", "pareto:t_epoch_s,p,mem_bytes", "top:7:t_epoch_s"])
def test_keep_and_a_query_of_the_full_output_agree_on_ties(grid, tmp_path, keep):
    """One definition of distinct optima with tied counts: ``--keep`` (the device filters, then
    the reducer) and ``sweep pareto``/``top`` over the full output (row groups fed to the same
    reducer) keep the same rows, the same representative of each tied vector (least grid index)
    and the same counts."""
    from sweep.answers import query

    kept = run_spec(tmp_path, "cross", GRID_SPEC, "--chunk", CHUNK, "--keep", keep)
    kind, _, rest = keep.partition(":")
    if kind == "pareto":
        answer = query.pareto(grid.out, rest.split(","), batch_rows=500)
        assert any(t > 1 for t in answer.column(store.TIED).to_pylist())  # ties were decided
    else:
        k, _, by = rest.partition(":")
        answer = query.top(grid.out, by, int(k), rank=False, batch_rows=500)
    assert_same_rows(kept.rows, answer.to_pylist())
