"""Device filters of a reducing chunk: compaction, the Pareto mask of two or more
objectives, top-k, and the known front a Pareto chunk starts from.

They run inside the chunk program, so only survivors come back to the host.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

#: Entries per block, and blocks gathered, in :func:`compact_indices`'s fast path.
NONZERO_BLOCK = 256
NONZERO_BLOCKS = 64


def tile(n: int, size: int) -> int:
    """Entries per block of ``n``: ``size``, or the divisor of ``n`` nearest it within a factor
    of two. Blocks that tile the array need no padded (or cut) copy of it; a chunk's rows
    are whole inner boxes, often a multiple of neither 256 nor 512 (100 bandwidths x 1,000
    latencies)."""
    if n % size == 0:
        return size
    near = [d for d in range(size // 2, 2 * size + 1) if n % d == 0]
    return min(near, key=lambda d: abs(d - size), default=size)


def first_true(mask, size: int, fill: int):
    """The indices (int32) of the first ``size`` True entries of ``mask``, ascending, padded with
    ``fill``: ``jnp.nonzero(mask, size=size, fill_value=fill)[0]`` with one prefix sum, not
    two (nonzero counts into a histogram and sums that again). On a CPU each prefix sum
    compiles to a tree of a dozen loops, and every loop of a program costs its compile and
    its load from the cache."""
    n = mask.shape[0]
    rank = jnp.cumsum(mask, dtype=jnp.int32) - 1  # how many True entries come before
    at = jnp.where(mask & (rank < size), rank, size)  # out of range: dropped
    return jnp.full(size, fill, jnp.int32).at[at].set(jnp.arange(n, dtype=jnp.int32), mode="drop")


def compact_indices(mask, size: int, fill: int = 0):
    """``(count, idx)``: how many entries of ``mask`` are True, and the first ``size`` of their
    indices, ascending, padded with ``fill`` (``jnp.nonzero(mask, size=size, fill_value=fill)``)
    when at most ``size`` are True or they lie in few blocks; else ``idx`` is all ``fill``.

    ``nonzero`` is a prefix sum and a scatter over the whole array, which
    costs more than evaluating the chunk on a CPU. The True entries of a
    chunk usually lie in few places (a front, or rows tied on it, are runs of
    neighbouring points), so when they fall in at most
    :data:`NONZERO_BLOCKS` blocks of about :data:`NONZERO_BLOCK` entries
    (:func:`tile`), only those blocks are counted and searched; otherwise
    the whole array is counted, and searched when the count fits.
    """
    n = mask.shape[0]
    width, picks = tile(n, NONZERO_BLOCK), NONZERO_BLOCKS
    groups = -(-n // width)

    def whole(_):
        count = jnp.sum(mask, dtype=jnp.int32)
        idx = jax.lax.cond(
            count <= size,
            lambda m: first_true(m, size, fill),
            # of m: under shard_map both branches must vary over the devices alike
            lambda m: jnp.full(size, fill, jnp.int32) + m[0].astype(jnp.int32) * 0,
            mask,
        )
        return count, idx

    if groups <= picks:
        return whole(None)
    blocks = mask if n == groups * width else jnp.pad(mask, (0, groups * width - n))
    blocks = blocks.reshape(groups, width)
    # a byte maximum per block: cheaper than any() or a count of the whole mask on a CPU
    busy = jnp.max(blocks.astype(jnp.uint8), axis=1) > 0

    def few(_):
        which = first_true(busy, picks, groups)
        rows = jnp.where((which < groups)[:, None], blocks[jnp.minimum(which, groups - 1)], False)
        j = first_true(rows.reshape(-1), size, -1)
        found = which[jnp.maximum(j, 0) // width] * width + jnp.maximum(j, 0) % width
        return jnp.sum(rows, dtype=jnp.int32), jnp.where(j >= 0, found, fill).astype(jnp.int32)

    return jax.lax.cond(jnp.sum(busy) <= picks, few, whole, None)


def block_min(x, size: int):
    """The minimum of each run of ``size`` consecutive entries of ``x``, the last run partial.

    The whole runs are reduced through a reshape and the rest through a
    slice, so no padded copy of ``x`` is made (a chunk-sized copy per use on
    a CPU, which cost more than the reductions themselves).
    """
    full = x.shape[0] // size
    least = jnp.min(x[: full * size].reshape(full, size), axis=1)
    if x.shape[0] > full * size:
        least = jnp.concatenate([least, jnp.min(x[full * size :])[None]])
    return least


#: Rows per block of the Pareto pre-filter (each gives two reference rows).
PARETO_BLOCK = 512
#: Buckets of the first objective in the Pareto pre-filter.
PARETO_BUCKETS = 4096
#: Points of the references' front the Pareto pre-filter compares every row with.
PARETO_FRONT = 16
#: Points of a short front, compared with the rows in a cheaper branch of the pre-filter.
PARETO_SHORT = 4


def front_points(r1, r2, k: int):
    """The distinct points of the front of the finite rows (r1, r2), by increasing r1:
    ``(f1[k], f2[k], count)``, padded with infinities; ``count`` is how many there are,
    ``k + 1`` when more than ``k`` (then only the first ``k`` are given).

    The points are picked one at a time, each the least (r1, r2) among the rows
    below the last one's r2 (a row with an r2 no smaller is dominated by it or
    equal to it): ``k`` masked minimums of the rows, much cheaper than a sort
    of the rows by (r1, r2) and a running minimum of r2, which gives the same points.

    On a CPU the steps are a loop, not unrolled: unrolled, they were a third of a
    Pareto program's loops, each of which costs its compile and its load from the
    cache, and the loop runs as fast. Elsewhere (a GPU) they stay unrolled.
    """
    inf = jnp.asarray(jnp.inf, r1.dtype)
    finite = jnp.isfinite(r1) & jnp.isfinite(r2)
    r1, r2 = jnp.where(finite, r1, inf), jnp.where(finite, r2, inf)

    def step(j, carry):  # y: the last point's r2 (-inf once there are no more)
        y, f1, f2 = carry
        below = r2 < y
        a = jnp.min(jnp.where(below, r1, inf))
        b = jnp.min(jnp.where(below & (r1 == a), r2, inf))
        return jnp.where(a < inf, b, -inf), f1.at[j].set(a), f2.at[j].set(b)

    # infinity, of r1: under shard_map a loop's carry must vary over the devices as its result does
    start = jnp.where(jnp.isnan(r1[0]), inf, inf)
    none = jnp.broadcast_to(start, (k,))
    unroll = 1 if jax.default_backend() == "cpu" else k
    y, f1, f2 = jax.lax.fori_loop(0, k, step, (start, none, none), unroll=unroll)
    count = jnp.sum(f1 < inf) + jnp.any(r2 < y)
    return f1, f2, count.astype(jnp.int32)


def pareto_2d(o1, o2, ok, materialise: bool = True, known=None, runs: bool = False):
    """Candidates for the front of a chunk under two minimised objectives, in O(n).

    A superset of the front (:func:`sweep.reduce.pareto.pareto_mask`) of the ``ok``
    rows whose objectives are not NaN, and most often exactly that front; the host's
    reduction (:class:`sweep.reduce.reducer.Reducer`) is exact over whatever is
    passed on, so only the number of candidates depends on how close it is.

    Every block of about :data:`PARETO_BLOCK` neighbouring rows (:func:`tile`) gives two
    reference rows, R1 (the least o1, ties by o2) and R2 (the least o2, ties
    by o1), and a row that a reference dominates is dropped. Domination is
    transitive, so only the points of the references' own front matter
    (:func:`front_points` of the ``2 * n / PARETO_BLOCK`` references). In a
    sweep's chunk that front is short (a second objective such as p takes few
    values in a chunk), and when it has at most :data:`PARETO_FRONT` points
    (:data:`PARETO_SHORT`, the usual case, takes a cheaper branch) every row
    is compared with each of them (:func:`_by_front`): the rows left are exactly
    those no reference dominates. That is cheaper than the bucket lookup a longer
    front takes (:func:`_by_buckets`), a gather per row.

    The rows enter through one array ``x`` (:func:`_competing`), materialised
    once: on a CPU each array derived from the chunk's rows is a pass over memory
    of its own (XLA fuses no two outputs into one loop), so o1, o2, ok and the
    masks are not each kept as arrays. ``o2`` is materialised first when
    ``materialise`` (a result column, which XLA would otherwise compute from the
    cost model's terms in every pass that reads it); a configuration column such
    as p is cheap to read again.

    ``known`` (``[2, PARETO_FRONT]``, padded with infinities) may hold points of the front
    of rows seen before, outside this chunk (the host's running front, see
    :func:`known_front`): they join the references (:func:`_with_known`), so a row one
    of them dominates is dropped too.

    With ``runs``, returns ``(mask, follows, a, b)``: ``follows`` marks the candidates equal in
    both objectives to the candidate just before them (:func:`run_counts`), read from the
    materialised rows ``a`` and ``b`` (the objectives as compared; see :func:`follows_candidate`).
    """
    n = o1.shape[0]
    if materialise:
        o2 = jax.lax.optimization_barrier(o2)
    x = _competing(o1, o2, ok)
    size = tile(n, PARETO_BLOCK)
    groups = -(-n // size)
    block_refs = _block_references(x, o2, size, groups)
    refs1, refs2 = _references(*block_refs)
    if known is not None:
        refs1, refs2 = _with_known(refs1, refs2, known)
    f1, f2, n_front = front_points(refs1, refs2, PARETO_FRONT)
    by_buckets = functools.partial(_by_buckets, o2=o2, block_refs=block_refs, refs=(refs1, refs2), size=size)
    # a short front (the usual case) compares every row with fewer points
    tier = jnp.where(n_front <= PARETO_SHORT, 0, jnp.where(n_front <= PARETO_FRONT, 1, 2))
    branches = [_by_front(f1, f2, o2, PARETO_SHORT), _by_front(f1, f2, o2, PARETO_FRONT), by_buckets]
    mask = jax.lax.switch(tier, branches, x)
    if not runs:
        return mask
    b = _second(x, o2)  # x is NaN for a row always kept: it follows none
    return mask, follows_previous(mask, [x, b]), x, b


def follows_previous(mask, objectives):
    """Entries of ``mask`` whose previous entry is in ``mask`` too with equal ``objectives``
    (a list of arrays; NaN equals nothing): the rest of a run of tied candidates."""
    same = mask[1:] & mask[:-1]
    for o in objectives:
        same &= o[1:] == o[:-1]
    return jnp.concatenate([jnp.zeros(1, bool), same])


def follows_candidate(mask, objectives):
    """Entries of ``mask`` equal in ``objectives`` to the previous entry in ``mask``, across
    the entries between them that are not (:func:`follows_previous` with gaps: infeasible
    rows split runs of ties over memory sizes). A running maximum and a gather per
    objective over the chunk, so taken only when the runs without gaps overflow."""
    n = mask.shape[0]
    pos = jnp.arange(n, dtype=jnp.int32)
    last = jax.lax.cummax(jnp.where(mask, pos, -1))  # the last candidate at or before each entry
    prev = jnp.concatenate([jnp.full(1, -1, jnp.int32), last[:-1]])
    at = jnp.maximum(prev, 0)
    same = mask & (prev >= 0)
    for o in objectives:
        same &= o[at] == o
    return same


def run_counts(follows, idx, count):
    """How many candidates each of the run heads ``idx`` stands for: itself and the
    ``follows`` entries up to the next head (``count`` heads in all, the rest padding).

    Tied candidates lie in runs of neighbouring points (the inner axes of a chunk are
    often parameters its strategy does not depend on): a chunk hands over the first
    point of each run and the run's length, so a front of tied configurations reaches the
    host as its distinct optima. Every follower lies between its head and the next head,
    so a head's count is 1 + the followers before the next head: a difference of the
    prefix sum of ``follows``, computed only where some entry follows.
    """

    def counted(_):
        before = jnp.cumsum(follows, dtype=jnp.int32)
        at = before[idx]
        j = jnp.arange(idx.shape[0])
        later = jnp.where(j + 1 < count, jnp.roll(at, -1), before[-1])
        return 1 + later - at

    def single(_):  # of idx: under shard_map both branches must vary over the devices alike
        return jnp.ones(idx.shape, jnp.int32) + idx * 0

    return jax.lax.cond(jnp.any(follows), counted, single, None)


def _competing(o1, o2, ok):
    """The rows as one array, materialised: o1 where the row competes (``ok``, both objectives
    finite), NaN where it is always kept (``ok``, an infinite objective: never dropped, never
    a reference) and inf where it is dropped (not ``ok``, or a NaN objective; the host's front
    never holds one). o2 is read where this is finite (:func:`_second`)."""
    inf = jnp.asarray(jnp.inf, o1.dtype)
    good = ok & ~(jnp.isnan(o1) | jnp.isnan(o2))
    fin = good & jnp.isfinite(o1) & jnp.isfinite(o2)
    return jax.lax.optimization_barrier(jnp.where(fin, o1, jnp.where(good, jnp.nan, inf)))


def _second(x, o2):
    """o2 where the row competes (:func:`_competing`), else inf."""
    inf = jnp.asarray(jnp.inf, x.dtype)
    return jnp.where(x < inf, o2, inf)


def _block_references(x, o2, size: int, groups: int):
    """``(a_min, b_at, a_at, b_min)``: each block's R1 = (a_min, b_at) and R2 = (a_at, b_min).

    The blocks are the rows of a ``[groups, size]`` matrix, so a block's value
    broadcasts along its row (a broadcast back over a flat array indexes by
    division, slower on a CPU); a length no block size tiles is padded with
    dropped rows. The rows always kept (NaN in ``x``) are made infinite for the
    block minima of o1: a block minimum with a NaN is NaN, and a block with one
    row always kept would give no R1.
    """
    n = x.shape[0]
    inf = jnp.asarray(jnp.inf, x.dtype)

    def blocks(v):
        v = v if n == groups * size else jnp.pad(v, (0, groups * size - n), constant_values=inf)
        return v.reshape(groups, size)

    a2, b2 = blocks(x), blocks(_second(x, o2))
    a_min, b_min = jnp.min(jnp.where(jnp.isnan(a2), inf, a2), axis=1), jnp.min(b2, axis=1)
    b_at = jnp.min(jnp.where(a2 == a_min[:, None], b2, inf), axis=1)
    a_at = jnp.min(jnp.where(b2 == b_min[:, None], a2, inf), axis=1)
    return a_min, b_at, a_at, b_min


def _references(a_min, b_at, a_at, b_min):
    """Every block's R1 and R2 as two arrays (o1, o2); a reference that is not finite
    (R2 of a block with no row competing may be NaN) becomes (inf, inf): it dominates
    nothing, and stays out of the buckets' range."""
    inf = jnp.asarray(jnp.inf, a_min.dtype)
    refs1 = jnp.concatenate([a_min, a_at])
    refs2 = jnp.concatenate([b_at, b_min])
    real = jnp.isfinite(refs1) & jnp.isfinite(refs2)
    return jnp.where(real, refs1, inf), jnp.where(real, refs2, inf)


def _with_known(refs1, refs2, known):
    """The references with the ``known`` points that can matter: those no larger than the
    references' largest o1 (at their least o2) and largest o2 (at their least o1). A row no
    reference dominates lies within both bounds, so a point beyond either dominates only
    rows dropped anyway, and would only lengthen the front."""
    inf = jnp.asarray(jnp.inf, refs1.dtype)
    k1, k2 = known[0].astype(refs1.dtype), known[1].astype(refs1.dtype)
    least1, least2 = jnp.min(refs1), jnp.min(refs2)
    near = (k1 <= jnp.min(jnp.where(refs2 == least2, refs1, inf))) & (
        k2 <= jnp.min(jnp.where(refs1 == least1, refs2, inf))
    )
    return jnp.concatenate([refs1, jnp.where(near, k1, inf)]), jnp.concatenate(
        [refs2, jnp.where(near, k2, inf)]
    )


def _by_front(f1, f2, o2, k: int):
    """``keep(x)``: rows no point of the front dominates, of its first ``k`` points (the rest
    are padding).

    The points have increasing f1 and decreasing f2, so among those with f1 <= x
    (or f1 < x) the last has the least f2: a row is dominated when that f2 is below
    its o2 (or no more than it). Two selects per point, over the rows, which is
    cheaper than comparing each row with every point (``[rows, points]``, then ``any``).
    """
    inf = jnp.asarray(jnp.inf, f1.dtype)

    def keep(x):
        a, b = x, _second(x, o2)
        below = at = jnp.full(a.shape, inf)  # least f2 of the points with f1 <= a; f1 < a
        for j in range(k):
            below = jnp.where(f1[j] <= a, f2[j], below)
            at = jnp.where(f1[j] < a, f2[j], at)
        dominated = (below < b) | (at <= b)
        return jnp.isnan(x) | ((x < inf) & ~dominated)

    return keep


def _by_buckets(x, *, o2, block_refs, refs, size: int):
    """Rows of a long front's chunk that no reference is known to dominate.

    A row is dropped when its block's R1 or R2 dominates it, or when a reference
    with a smaller o1 does, found by :data:`PARETO_BUCKETS` buckets of o1 (a
    monotone map, so an earlier bucket has a smaller o1) over the front's range
    of o1: from the least o1 to the o1 of the reference with the least o2;
    beyond it, every row is dominated by that reference or ties it. (An exact
    sort of the rows left made the program far larger, slower to compile, and
    the chunk no faster.)
    """
    n = x.shape[0]
    inf = jnp.asarray(jnp.inf, x.dtype)
    groups = -(-n // size)
    a_min, b_at, a_at, b_min = block_refs
    refs1, refs2 = refs

    def spread(v):  # a value per block -> one per row
        return jnp.broadcast_to(v[:, None], (groups, size)).reshape(-1)[:n]

    finite = x < inf
    a, b = jnp.where(finite, x, inf), _second(x, o2)
    a1, b1, a2, b2 = spread(a_min), spread(b_at), spread(a_at), spread(b_min)
    by_r1 = (a1 <= a) & (b1 <= b) & ((a1 < a) | (b1 < b))
    by_r2 = (a2 <= a) & (b2 <= b) & ((a2 < a) | (b2 < b))
    candidate = jnp.isnan(x) | (finite & ~(by_r1 | by_r2))
    # the references' least o2 per bucket of o1, over [least o1, o1 at the least o2]
    lo = jnp.min(refs1)
    hi = jnp.min(jnp.where(refs2 == jnp.min(refs2), refs1, inf))
    scale = jnp.where(hi > lo, (PARETO_BUCKETS - 2) / (hi - lo), 0)

    def bucket(v):  # up to hi in buckets 0 .. PARETO_BUCKETS - 2, beyond it in the last
        at = jnp.floor((v - lo) * scale)  # NaN where v and lo are both infinite: bucket 0
        at = jnp.where(at >= 0, jnp.minimum(at, PARETO_BUCKETS - 2), 0)
        return jnp.where(v > hi, PARETO_BUCKETS - 1, at).astype(jnp.int32)

    least = jnp.full((PARETO_BUCKETS,), inf, b.dtype).at[bucket(refs1)].min(refs2)
    before = jnp.concatenate([jnp.full((1,), inf, b.dtype), jax.lax.cummin(least)[:-1]])
    return candidate & ~(finite & (before[bucket(a)] <= b))


#: Weighted sums the Pareto pre-filter of three or more objectives minimises (see :func:`pareto_kd`).
PARETO_WEIGHTS = 16


def pareto_weights(k: int) -> np.ndarray:
    """``[PARETO_WEIGHTS, k]`` positive weights: each objective nearly alone, then fixed mixes."""
    near = np.full((k, k), 1e-3) + np.eye(k)
    mixes = np.random.default_rng(0).dirichlet(np.ones(k), max(PARETO_WEIGHTS - k, 0)) + 1e-3
    return np.concatenate([near, mixes])[:PARETO_WEIGHTS]


def pareto_kd(objectives, ok):
    """Candidates for the front of a chunk under three or more minimised objectives.

    A superset of the front of the ``ok`` rows whose objectives are not NaN
    (the host's reduction is exact), as :func:`pareto_2d` is for two. Each
    block of :data:`PARETO_BLOCK` rows gives, per objective, the row with
    its least value; among these references, the one with the least
    weighted sum of objectives (each scaled to the references' range) is on
    their front, for each of :data:`PARETO_WEIGHTS` positive weightings. A
    row one of those points dominates is dropped; rows with an infinite
    objective are never dropped, rows with a NaN one always. Without it,
    every feasible row of a chunk went to the host.
    """
    n, k = objectives[0].shape[0], len(objectives)
    inf = jnp.asarray(jnp.inf, objectives[0].dtype)
    objs = [jnp.where(ok, o, jnp.nan) for o in objectives]
    ok = ~functools.reduce(jnp.logical_or, [jnp.isnan(o) for o in objs])
    finite = functools.reduce(jnp.logical_and, [jnp.isfinite(o) for o in objs], ok)
    # materialised once: the block reductions, the references and the final mask each read them
    x = jax.lax.optimization_barrier(jnp.stack([jnp.where(finite, o, inf) for o in objs]))
    groups = -(-n // PARETO_BLOCK)
    padded = jnp.pad(x, ((0, 0), (0, groups * PARETO_BLOCK - n)), constant_values=inf)
    at = jnp.argmin(padded.reshape(k, groups, PARETO_BLOCK), axis=2)  # [k, groups]: each block's least
    rows = (at + jnp.arange(groups)[None, :] * PARETO_BLOCK).reshape(-1)  # [k * groups] row numbers
    refs = padded[:, rows]  # [k, references]: each a row of the chunk
    real = functools.reduce(jnp.logical_and, [jnp.isfinite(r) for r in refs])
    lo = jnp.min(jnp.where(real, refs, inf), axis=1, keepdims=True)
    hi = jnp.max(jnp.where(real, refs, -inf), axis=1, keepdims=True)
    scaled = (refs - lo) / jnp.where(hi > lo, hi - lo, 1)
    weights = jnp.asarray(pareto_weights(k), x.dtype)
    score = jnp.where(real[None, :], weights @ jnp.where(real, scaled, 0), inf)  # [weights, refs]
    points = refs[:, jnp.argmin(score, axis=1)]  # [k, weights]; infinite where no reference is finite
    le = functools.reduce(jnp.logical_and, [points[i][None, :] <= x[i][:, None] for i in range(k)])
    lt = functools.reduce(jnp.logical_or, [points[i][None, :] < x[i][:, None] for i in range(k)])
    dominated = jnp.any(le & lt, axis=1)
    return ok & ~(finite & dominated)


#: Rows per block in :func:`top_k_rows`.
TOP_BLOCK = 256


def top_by_blocks(k: int, n: int) -> bool:
    """Whether a top-k of ``n`` rows picks blocks (:func:`top_k_rows`): while the k blocks
    hold at most half the rows. On a CPU ``lax.top_k`` over a whole chunk is a sort, several
    times slower than picking blocks."""
    return 2 * k * TOP_BLOCK <= n


def top_k_rows(score, k: int):
    """Positions of the ``k`` smallest entries of ``score`` (ties: the lower position; NaN: not
    a candidate), and whether all are finite.

    The k best rows lie in the k blocks of :data:`TOP_BLOCK` rows with the
    least minima (ties: the lower block): a row outside them is beaten by
    the best row of each of those k blocks. So one pass takes the block
    minima, and ``lax.top_k`` (which keeps the lower index first among
    equals) picks k blocks, then k rows among their ``k * TOP_BLOCK``:
    no pass over the chunk to build a mask and compact it, and no padded
    copy of the chunk (the last, partial block is taken apart). Infinite
    scores cannot be told from non-candidates here, so a caller uses the
    picks only when all are finite.
    """
    n = score.shape[0]
    inf = jnp.asarray(jnp.inf, score.dtype)
    s = jnp.where(jnp.isnan(score), inf, score)
    groups = -(-n // TOP_BLOCK)
    minima = block_min(s, TOP_BLOCK)
    _, which = jax.lax.top_k(-minima, min(k, groups))
    which = jnp.sort(which)  # gathered rows in position order, so ties still go to the lower position
    at = (which[:, None] * TOP_BLOCK + jnp.arange(TOP_BLOCK, dtype=which.dtype)[None, :]).reshape(-1)
    best, pos = jax.lax.top_k(-jnp.where(at < n, s[jnp.minimum(at, n - 1)], inf), k)
    return at[pos].astype(jnp.int32), jnp.all(jnp.isfinite(best))


def top_k_candidates(objective, ok, k: int, size: int):
    """(mask, count, positions) of a chunk's top-k candidates, positions compacted to ``size``.

    The ``k`` rows with the least objective among ``ok`` rows, ties to the
    lower position (the host breaks ties by flat index, in the same order).
    While k is small against the chunk (:func:`top_by_blocks`) the rows are
    picked by blocks (:func:`top_k_rows`), and when fewer than k rows have
    a finite objective every ``ok`` row is a candidate. For larger k, by a
    mask below the k-th smallest objective, found with ``lax.top_k`` over
    the chunk (a sort on a CPU, far slower than the least one).

    The objective enters only through ``score``: the objective where ``ok``
    (infinite where it is NaN) and NaN where not. Deriving a second mask from
    the objective (``ok & ~isnan``) made XLA compute the whole cost model
    twice, once for each. A NaN objective never qualifies, yet when fewer
    than k rows have a finite one, ``ok`` rows with a NaN objective are
    passed on with the infinite ones (all may be more than k), and the host
    drops them (:meth:`sweep.reduce.reducer.Reducer.add`); otherwise the candidates
    are exact.
    """
    n = objective.shape[0]
    inf = jnp.asarray(jnp.inf, objective.dtype)
    score = jnp.where(ok, jnp.where(jnp.isnan(objective), inf, objective), jnp.nan)

    def compact(mask):
        return (mask, *compact_indices(mask, size))

    if not top_by_blocks(k, n):
        s = jnp.where(jnp.isnan(score), inf, score)
        kth = jnp.min(s) if k == 1 else -jax.lax.top_k(-s, min(k, n))[0][-1]
        better, tied = score < kth, score == kth  # NaN (not ok) is neither
        return compact(jnp.where(jnp.isinf(kth), better | tied, first_k(better, tied, k)))
    picks, exact = top_k_rows(score, k)

    def by_blocks(_):
        mask = jnp.zeros(n, bool).at[picks].set(True)
        # k, computed from per-device data as the other branch's count is (under shard_map
        # both branches must vary over the device axis alike)
        count = (picks[0] * 0 + k).astype(jnp.int32)
        return mask, count, jnp.pad(jnp.sort(picks), (0, size - k))

    def every(_):  # fewer than k rows with a finite objective: the k-th is infinite
        return compact(~jnp.isnan(score))

    return jax.lax.cond(exact, by_blocks, every, None)


def first_k(better, tied, k: int):
    """``better`` and the first ``k - sum(better)`` entries of ``tied``, in position order.

    The top-k rows of a chunk: the host breaks ties by row identity (job,
    flat index), and positions in a chunk are in flat-index order, so of the
    rows tied with the k-th only the first few can be kept. Keeping every
    tied row instead overflows the compaction when a whole chunk ties (a
    configuration inside one node has the same time for every network
    setting), which then costs a second, full evaluation of the chunk.
    """
    room = k - jnp.sum(better)

    def some(_):
        return better | (tied & (jnp.cumsum(tied.astype(jnp.int32)) <= room))

    return jax.lax.cond(jnp.sum(tied) <= room, lambda _: better | tied, some, None)


def floor_div(a, d):
    """``floor(a / d)`` for whole numbers below 2**24 held as floats, exact.

    XLA may compute ``a / d`` as ``a * (1/d)``, which can land one ulp either
    side of a whole quotient (97 * (1/97) < 1), so correct in both directions.
    """
    q = jnp.floor(a / d)
    q = jnp.where(q * d > a, q - 1, q)
    return jnp.where((q + 1) * d <= a, q + 1, q)


def known_front(vectors: np.ndarray | None, dtype) -> np.ndarray:
    """A chunk function's ``known`` argument: ``[2, PARETO_FRONT]`` points of ``vectors``
    (distinct vectors of a front of two objectives by increasing first objective, as
    :attr:`sweep.reduce.reducer.Reducer.vectors` holds them; None for none), padded with infinities.

    A longer front gives points spread evenly along it; infinite objectives are
    left out (such a point dominates only rows the pre-filter already keeps or drops).
    A value ``dtype`` cannot hold exactly is rounded up, so a point never dominates
    more than its row would.
    """
    out = np.full((2, PARETO_FRONT), np.inf, dtype)
    if vectors is None or not len(vectors):
        return out
    finite = vectors[np.isfinite(vectors).all(axis=1)]
    if len(finite) > PARETO_FRONT:
        finite = finite[np.linspace(0, len(finite) - 1, PARETO_FRONT).round().astype(np.int64)]
    points = finite.T.astype(dtype)
    below = points < finite.T
    points[below] = np.nextafter(points[below], np.asarray(np.inf, dtype))
    out[:, : len(finite)] = points
    return out
