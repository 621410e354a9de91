"""The device's filters of a chunk (sweep/engine/filters.py): the Pareto pre-filters (two
objectives, a known front, more objectives), top-k, compaction and tiling pass on every row
the host's exact reduction needs (:func:`sweep.reduce.pareto.pareto_mask`, brute force) and
nothing it would not consider."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

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
from sweep.reduce.pareto import pareto_brute, pareto_mask

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
