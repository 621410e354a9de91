"""Pieces of the ``--keep`` reducer that spill a Pareto front to disk (:mod:`sweep.reduce.reducer`).

End-to-end runs that spill are tested against the full output in
``tests/reduce/test_keep.py`` (local), ``tests/engine/test_resume.py`` (interrupt and
resume) and ``tests/engine/test_distributed.py`` (shards and their merge).
"""

from __future__ import annotations

import itertools
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweep.reduce import reducer
from sweep.reduce.reducer import Members, merge_sorted


def _block(keys: list[int]):
    """A block whose rows are known by their identity (job 0, index = key)."""
    n = len(keys)
    ids = np.stack([np.zeros(n, np.int64), np.asarray(keys, np.int64)], axis=1)
    value = np.asarray(keys, np.float32)[None, :]
    return (
        np.zeros((1, n), np.int32),
        value,
        np.zeros(n, np.int8),
        ids,
        np.zeros(n, np.int32),
        np.ones(n, np.int64),
    )


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 60), max_size=30), max_size=5),
    st.integers(1, 7),
)
def test_merge_sorted_equals_sorting_the_union(runs, size):
    """Runs of sorted keys, in blocks of ``size`` rows (some empty), each known by its first
    key: merged, they are the sorted union, each row's columns kept together."""
    runs = [sorted(r) for r in runs]

    def blocks(keys):
        yield _block([])
        for lo in range(0, len(keys), size):
            yield _block(keys[lo : lo + size])

    out = list(merge_sorted([(r[0] if r else 0, blocks(r)) for r in runs]))
    got = [int(k) for b in out for k in b[3][:, 1]]
    assert got == sorted(k for r in runs for k in r)
    for b in out:
        assert (b[1][0] == b[3][:, 1]).all()


def test_merge_sorted_opens_runs_only_when_it_reaches_them():
    """Runs that do not overlap (the spills of a local run) are read one at a time."""
    opened: list[int] = []

    def run(i: int):
        opened.append(i)
        yield _block(list(range(10 * i, 10 * i + 10)))

    merged = merge_sorted([(10 * i, run(i)) for i in (2, 0, 1)])
    first = next(merged)
    assert first[3][:, 1].tolist() == list(range(10))
    assert opened == [0]
    assert [int(k) for b in merged for k in b[3][:, 1]] == list(range(10, 30))
    assert opened == [0, 1, 2]


values = st.sampled_from([0.0, -0.0, 1.0, 2.5, -3.0, np.inf, 1e-300, 7.0])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(values, values), max_size=20),
    st.lists(st.tuples(values, values), max_size=20),
    st.booleans(),
)
def test_members_equal_numeric_membership(vectors, queries, collide):
    """Membership is numeric equality of whole vectors (-0.0 equals 0.0), also when every
    vector has the same hash (the compare-each path)."""
    front = reducer._distinct(np.array(vectors, np.float64).reshape(-1, 2))
    q = np.array(queries, np.float64).reshape(-1, 2)
    real = reducer._hash
    if collide:
        reducer._hash = lambda objs: np.zeros(len(objs), np.uint64)  # type: ignore[assignment]
    try:
        got = Members(front)(q)
    finally:
        reducer._hash = real
    want = [any((v == row).all() for v in front) for row in q]
    assert got.tolist() == want
    assert len(front) == len({(a + 0.0, b + 0.0) for a, b in vectors})


def _schema(tied: bool = False):
    import pyarrow as pa

    from sweep.output import store

    return store.Schema(["m"], ["abci"], ["data"], ("p",), ("t_epoch_s",), pa.float32(), tied=tied)


def test_top_k_drops_candidates_whose_objective_is_nan():
    """The device may pass NaN objectives on (when fewer than k rows are finite); the host
    never keeps one, even when fewer than k rows are left."""
    from sweep.reduce.keep import Keep, Survivors

    r = reducer.Reducer(Keep("top", ("t_epoch_s",), 3), _schema())
    t = np.array([[np.nan, np.inf, 2.0, np.nan]], np.float32)
    found = Survivors(np.array([[1, 2, 3, 4]], np.int32), t, np.zeros(4, np.int8), np.arange(4))
    r.add(0, ("m", "abci", "data"), np.arange(4), found)
    rows = r.table().to_pylist()
    assert [(row["p"], row["t_epoch_s"]) for row in rows] == [(3, 2.0), (2, np.inf)]


@settings(max_examples=150, deadline=None)
@given(
    blocks=st.lists(
        st.lists(st.tuples(st.sampled_from([0, 1, 2, 3, 5, np.inf, np.nan]), st.integers(1, 4)), max_size=40),
        min_size=1,
        max_size=8,
    ),
    every=st.integers(1, 50),
    ties=st.booleans(),
)
def test_pareto_front_of_many_additions_equals_the_front_of_all_rows(blocks, every, ties):
    """Rows added a block at a time and reduced every ``every`` rows (the rows kept are
    merged with the new ones by their distinct vectors: ``Reducer._merge_2``) give the
    front of all the rows at once, infinities and NaN included, in identity order: with
    ``ties`` (``pareto:...:all``) every tied row, else the first row of each distinct
    vector with the number of rows that share it."""
    from sweep.reduce.keep import Keep, Survivors
    from sweep.reduce.pareto import pareto_brute

    r = reducer.Reducer(Keep("pareto", ("t_epoch_s", "p"), ties=ties), _schema(tied=not ties))
    rows, start = [], 0
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(reducer, "REDUCE_ROWS", every)
        for block in blocks:
            n = len(block)
            t = np.array([[x for x, _ in block]], np.float32).reshape(1, n)
            p = np.array([[y for _, y in block]], np.int32).reshape(1, n)
            found = Survivors(p, t, np.zeros(n, np.int8), np.arange(n))
            r.add(0, ("m", "abci", "data"), start + np.arange(n), found)
            rows += [(float(x), float(y)) for x, y in block]
            start += n
    objs = np.array(rows, dtype=np.float64).reshape(-1, 2)
    number = ~np.isnan(objs).any(axis=1)
    want = np.flatnonzero(number)[pareto_brute(objs[number])] if number.any() else []
    got = r.table().to_pylist()
    front = [rows[i] for i in want]
    if ties:
        assert [(row["t_epoch_s"], row["p"]) for row in got] == front
        return
    firsts = [v for i, v in enumerate(front) if v not in front[:i]]
    assert [(row["t_epoch_s"], row["p"]) for row in got] == firsts
    assert [row["tied"] for row in got] == [front.count(v) for v in firsts]


def test_spill_due_thresholds(monkeypatch):
    """SPILL_ROWS rows spill in a large process, SPILL_ROWS_MAX rows in any."""
    small, large = reducer.SPILL_ROWS, reducer.SPILL_ROWS_MAX
    assert 0 < small < large
    monkeypatch.setattr(reducer, "resident_bytes", lambda: 0)
    assert [reducer.spill_due(n) for n in (small - 1, small, large - 1, large)] == [
        False,
        False,
        False,
        True,
    ]
    monkeypatch.setattr(reducer, "resident_bytes", lambda: reducer.SPILL_RSS)
    assert [reducer.spill_due(n) for n in (small - 1, small, large)] == [False, True, True]
    # this process's own size is read where /proc is
    if os.path.exists("/proc/self/statm"):
        monkeypatch.undo()
        assert reducer.resident_bytes() > 10 << 20


@settings(max_examples=150, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.sampled_from([1.0, 2.0, 3.0, 4.0]), st.integers(1, 4), st.integers(1, 5)),
        min_size=1,
        max_size=60,
    ),
    cuts=st.lists(st.integers(0, 60), max_size=6),
    order=st.randoms(use_true_random=False),
    every=st.integers(1, 20),
)
def test_distinct_front_does_not_depend_on_blocks_arrival_or_reductions(rows, cuts, order, every):
    """Rows ``(t, p, tied)`` (``tied``: configurations a row already stands for, as a chunk
    or a shard hands them over), cut into blocks at ``cuts``, added in any order (Dask
    workers finish out of order), reduced every ``every`` rows: one row per distinct
    vector of the exact front, the one of least index, and ``tied`` the sum over the rows
    of the front that share its vector."""
    from sweep.reduce.keep import Keep, Survivors
    from sweep.reduce.pareto import pareto_brute

    objs = np.array([(t, p) for t, p, _ in rows], np.float64)
    on_front = pareto_brute(objs)
    want: dict[tuple, list[int]] = {}  # vector -> [least index, configurations]
    for i in np.flatnonzero(on_front):
        entry = want.setdefault(tuple(objs[i]), [int(i), 0])
        entry[1] += rows[i][2]
    bounds = sorted({0, len(rows), *(c for c in cuts if c < len(rows))})
    pieces = list(itertools.pairwise(bounds))
    order.shuffle(pieces)
    r = reducer.Reducer(Keep("pareto", ("t_epoch_s", "p")), _schema(tied=True))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(reducer, "REDUCE_ROWS", every)
        for lo, hi in pieces:
            n = hi - lo
            t = np.array([[x for x, _, _ in rows[lo:hi]]], np.float32)
            p = np.array([[y for _, y, _ in rows[lo:hi]]], np.int32)
            tied = np.array([z for _, _, z in rows[lo:hi]], np.int64)
            r.add(
                0,
                ("m", "abci", "data"),
                np.arange(lo, hi),
                Survivors(p, t, np.zeros(n, np.int8), np.arange(n), tied),
            )
    got = r.table().to_pylist()
    assert [(row["t_epoch_s"], row["p"]) for row in got] == [rows[i][:2] for i, _ in sorted(want.values())]
    assert [row["tied"] for row in got] == [count for _, count in sorted(want.values())]
