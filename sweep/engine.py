"""The vectorized sweep engine: chunks of a job's flat index space through ``jit(vmap(kernel))``.

A chunk is a contiguous range ``[start, start + C)`` of flat indices. The
host decodes the chunk start into mixed-radix digits (Python integers, so
grids beyond 2**31 points work in int32 on the device); the device adds the
local offset with carries, gathers the axis values, evaluates the strategy
kernel for every point, and returns one float matrix of columns plus the
limit codes and a validity mask. The last chunk is padded to C, so each job
compiles once. JAX dispatches asynchronously: chunk i+1 is queued before
chunk i is copied back, so transfers overlap computation.

In-stream reductions (``--keep``) run on the device: a 2-objective Pareto
mask by sort and running minimum, or ``lax.top_k``; only survivors come back.

With several local devices (GPUs, or CPU devices forced with
``XLA_FLAGS=--xla_force_host_platform_device_count=N``) each chunk is split
over all of them with ``shard_map`` on a 1-D mesh: device d takes the
``chunk / N`` consecutive points from offset ``d * chunk / N`` and reduces
its own share; :func:`survivors` gathers the candidates on the host.
:func:`spans` cuts the concatenated index space of all jobs into the equal
contiguous shards of ``sweep run --shard K/N``.
"""

from __future__ import annotations

import collections
import copy
import functools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from kernels import Config, with_params
from sweep import traced
from sweep.evaluate import CONFIG_COLUMNS, RESULT_COLUMNS, point_fn
from sweep.grid import CONFIG_AXES, Job
from sweep.pareto import dominated_by, numbers

#: Chunks up to this many points decode their points in float32, whose whole numbers are exact
#: below 2**24 and whose division vectorises on CPUs (integer division does not); larger
#: chunks decode in int32.
FLOAT_CHUNK = 1 << 22
#: Largest chunk. Its device memory grows with it: a GPU's fixed cost per call is what a
#: larger chunk spreads (README, On a GPU).
MAX_CHUNK = 1 << 26


def _big_stride(chunk: int) -> int:
    """Outer strides above this use the carry-by-threshold form (:func:`decode_info`): the
    plain form adds a stride's remainder and a box count, which must stay exact (below
    2**24 in float32, 2**31 in int32); the threshold form needs box counts below it."""
    return 1 << 23 if chunk <= FLOAT_CHUNK else 1 << 30


#: Largest job a reduction evaluates whole and reduces on the host (:func:`prepare`). With
#: ``--chunk 2^24`` and no cap the bench's tied grid, whose jobs are 0.6-7.8 M points, reduced
#: every job on the host: 7.7 s warm against 1.0 s at 2^20 on 2 CPU cores, 8.9 s against 2.0 s
#: on an H200.
HOST_REDUCE_MAX = 1 << 20

#: Survivors a reducing chunk returns compacted (see :func:`survivors`).
COMPACT_ROWS = 4096
#: Candidates evaluated again per call when a chunk has more than it compacts (:class:`Again`).
POINT_ROWS = 1 << 16
#: Name of the mesh axis a chunk is split over when there are several devices.
AXIS = "d"
#: Number of traces (compilations) per (job index, strategy), for tests.
TRACES: dict[tuple[int, str], int] = {}


@dataclass(frozen=True)
class Keep:
    """An in-stream reduction: ``pareto`` over minimised columns, or ``top`` K by one column."""

    kind: str  # "all", "pareto", "top"
    columns: tuple[str, ...] = ()
    k: int = 0

    @property
    def reduces(self) -> bool:
        return self.kind != "all"

    def describe(self) -> str:
        if self.kind == "pareto":
            return "pareto:" + ",".join(self.columns)
        if self.kind == "top":
            return f"top:{self.k}:{self.columns[0]}"
        return "all"


def int_columns(job: Job) -> tuple[str, ...]:
    """Rows of a chunk's int32 matrix: configuration columns, then swept machine parameters (digits)."""
    return (*CONFIG_COLUMNS, *job.machine_axes)


def numeric_columns(job: Job) -> tuple[str, ...]:
    """Every numeric output column of a job, in output order."""
    return (*int_columns(job), *RESULT_COLUMNS)


def inner_split(radices: Sequence[int], chunk: int) -> int:
    """How many leading axes are *outer*; the rest form the chunk's inner box.

    The inner box is the longest suffix of axes with at most ``chunk // 16``
    points (so evaluating a whole box beyond a chunk's ends wastes at most
    about 1/8 of the work). Inner axes are vmapped one by one, outer points
    are decoded from the flat index: see :func:`build_chunk_fn`.
    """
    j, box = len(radices), 1
    while j > 0 and box * radices[j - 1] <= max(chunk // 16, 1):
        j -= 1
        box *= radices[j]
    return j


def decode_info(job: Job, start: int, chunk: int) -> np.ndarray:
    """Where the chunk starting at ``start`` begins, as int32 rows for the device.

    With ``j`` outer axes (:func:`inner_split`) and an inner box of ``T``
    points, the chunk starts at outer index ``o = start // T``, point
    ``w = start % T`` of that box. Rows ``0..j-1`` hold, per outer axis,
    ``[digit of o, m, R, threshold, big]`` for the carry-adding decode; the
    last row is ``[w, 0, 0, 0, 0]``.
    """
    radices = [len(v) for v in job.axes.values()]
    j = inner_split(radices, chunk)
    outer, w = divmod(start, math.prod(radices[j:]))
    limit = _big_stride(chunk)
    rows = []
    for i in range(j):
        stride = math.prod(radices[i + 1 : j])
        q, m = divmod(outer, stride)
        big = stride > limit
        rows.append(
            [
                q % radices[i],
                0 if big else m,
                1 if big else stride,
                min(stride - m, limit) if big else 0,
                int(big),
            ]
        )
    rows.append([w, 0, 0, 0, 0])
    return np.asarray(rows, dtype=np.int32).reshape(j + 1, 5)


def axis_ranks(job: Job, axis: str) -> np.ndarray:
    """The rank of each value of a swept machine parameter, by digit (equal values, equal ranks).

    Such a column is carried as axis digits, in the order the spec lists the values; a
    reduction by it compares ranks, which order rows as the values do, exactly in any dtype.
    """
    return np.unique(job.axes[axis], return_inverse=True)[1].reshape(-1)


def program_chunk(job: Job, chunk: int) -> int:
    """The points a job's program evaluates per call: the run's ``chunk``, or for a job of one
    chunk or less its size. The job is still one chunk; its program evaluates, and returns,
    no more points than that (a chunk of 2^18 for a job of 50 points evaluated 5,000 times
    its points, and a GPU copies every row it returns). Rounded up to a power of two, as
    before a1288ee, the bench tied grid's serial job of 600,000 points evaluated 1.2 M (the
    program evaluates whole inner boxes), against 700,000 at its own size."""
    return min(chunk, max(job.size, 1))


def n_chunks(job: Job, chunk: int) -> int:
    return -(-job.size // chunk)


class Span(NamedTuple):
    """The flat indices ``[lo, hi)`` of one job that a run (or a shard of it) evaluates, in chunks."""

    job: Job
    lo: int
    hi: int

    def chunks(self, chunk: int) -> int:
        return -(-(self.hi - self.lo) // chunk)

    def unit(self, number: int, chunk: int) -> tuple[int, int]:
        """(start index within the job, real points) of chunk ``number`` of the span."""
        start = self.lo + number * chunk
        return start, min(chunk, self.hi - start)


def spans(jobs: Sequence[Job], k: int = 0, n: int = 1) -> list[Span]:
    """The jobs' parts in shard ``k`` of ``n``: equal contiguous ranges of the concatenated index space.

    Shard k takes global indices ``[T k / n, T (k + 1) / n)`` (floored) of the
    ``T = sum(job sizes)`` points; a job cut by a shard boundary is split
    between two shards, whose chunks then start at the boundary.
    """
    total = sum(job.size for job in jobs)
    first, last = total * k // n, total * (k + 1) // n
    out = []
    base = 0
    for job in jobs:
        lo, hi = max(first - base, 0), min(last - base, job.size)
        if hi > lo:
            out.append(Span(job, lo, hi))
        base += job.size
    return out


#: Entries per block, and blocks gathered, in :func:`_compact`'s fast path.
NONZERO_BLOCK = 256
NONZERO_BLOCKS = 64


def _tile(n: int, size: int) -> int:
    """Entries per block of ``n``: ``size``, or the divisor of ``n`` nearest it within a factor
    of two. Blocks that tile the array need no padded (or cut) copy of it, 0.3-0.5 ms of a
    2^20-row chunk on a CPU; a chunk's rows are whole inner boxes, often a multiple of
    neither 256 nor 512 (100 bandwidths x 1,000 latencies)."""
    if n % size == 0:
        return size
    near = [d for d in range(size // 2, 2 * size + 1) if n % d == 0]
    return min(near, key=lambda d: abs(d - size), default=size)


def _first_true(mask, size: int, fill: int):
    """The indices (int32) of the first ``size`` True entries of ``mask``, ascending, padded with
    ``fill``: ``jnp.nonzero(mask, size=size, fill_value=fill)[0]`` with one prefix sum, not
    two (nonzero counts into a histogram and sums that again). On a CPU each prefix sum
    compiles to a tree of a dozen loops, and every loop of a program costs its compile and
    its load from the cache."""
    n = mask.shape[0]
    rank = jnp.cumsum(mask, dtype=jnp.int32) - 1  # how many True entries come before
    at = jnp.where(mask & (rank < size), rank, size)  # out of range: dropped
    return jnp.full(size, fill, jnp.int32).at[at].set(jnp.arange(n, dtype=jnp.int32), mode="drop")


def _compact(mask, size: int, fill: int = 0):
    """``(count, idx)``: how many entries of ``mask`` are True, and the first ``size`` of their
    indices, ascending, padded with ``fill`` (``jnp.nonzero(mask, size=size, fill_value=fill)``)
    when at most ``size`` are True or they lie in few blocks; else ``idx`` is all ``fill``.

    ``nonzero`` is a prefix sum and a scatter over the whole array, which
    costs more than evaluating the chunk on a CPU. The True entries of a
    chunk usually lie in few places (a front, or rows tied on it, are runs of
    neighbouring points), so when they fall in at most
    :data:`NONZERO_BLOCKS` blocks of about :data:`NONZERO_BLOCK` entries
    (:func:`_tile`), only those blocks are counted and searched; otherwise
    the whole array is counted, and searched when the count fits.
    """
    n = mask.shape[0]
    width, picks = _tile(n, NONZERO_BLOCK), NONZERO_BLOCKS
    groups = -(-n // width)

    def whole(_):
        count = jnp.sum(mask, dtype=jnp.int32)
        idx = jax.lax.cond(
            count <= size,
            lambda m: _first_true(m, size, fill),
            # of m: under shard_map both branches must vary over the devices alike
            lambda m: jnp.full(size, fill, jnp.int32) + m[0].astype(jnp.int32) * 0,
            mask,
        )
        return count, idx

    if groups <= picks:
        return whole(None)
    blocks = mask if n == groups * width else jnp.pad(mask, (0, groups * width - n))
    blocks = blocks.reshape(groups, width)
    # a byte maximum per block: 4x faster than any() or a count of the whole mask on a CPU
    busy = jnp.max(blocks.astype(jnp.uint8), axis=1) > 0

    def few(_):
        which = _first_true(busy, picks, groups)
        rows = jnp.where((which < groups)[:, None], blocks[jnp.minimum(which, groups - 1)], False)
        j = _first_true(rows.reshape(-1), size, -1)
        found = which[jnp.maximum(j, 0) // width] * width + jnp.maximum(j, 0) % width
        return jnp.sum(rows, dtype=jnp.int32), jnp.where(j >= 0, found, fill).astype(jnp.int32)

    return jax.lax.cond(jnp.sum(busy) <= picks, few, whole, None)


def _block_min(x, size: int):
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


def _front_points(r1, r2, k: int):
    """The distinct points of the front of the finite rows (r1, r2), by increasing r1:
    ``(f1[k], f2[k], count)``, padded with infinities; ``count`` is how many there are,
    ``k + 1`` when more than ``k`` (then only the first ``k`` are given).

    The points are picked one at a time, each the least (r1, r2) among the rows
    below the last one's r2 (a row with an r2 no smaller is dominated by it or
    equal to it): ``k`` masked minimums of the rows. A sort of the rows by
    (r1, r2) and a running minimum of r2 gave the same points, and took 20
    times as long (1.36 ms against 0.07 ms for the 4,096 references of a 2^20
    chunk on a CPU: a fifth of the whole pre-filter).

    On a CPU the steps are a loop: unrolled, they were 80 of a Pareto program's 233
    loops, and each loop costs its compile and its load from the cache (a warm run
    loads every job's program: 90 ms apiece). As a loop the kernel ran as fast (ResNet-50
    on abci, 2^20-point chunks: data 261 -> 270 M/s, filter 266 -> 271, data+spatial 192
    -> 191, serial 216 -> 207; one run, alternated). Elsewhere they stay unrolled, as
    measured on a GPU (a loop there was not measured).
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


def _pareto_2d(o1, o2, ok, materialise: bool = True, known=None):
    """Candidates for the front of a chunk under two minimised objectives, in O(n).

    A superset of the front (:func:`sweep.pareto.pareto_mask`) of the ``ok``
    rows whose objectives are not NaN, and most often exactly that front; the host's
    reduction (:class:`sweep.reducer.Reducer`) is exact over whatever is
    passed on, so only the number of candidates depends on how close it is.

    Every block of about :data:`PARETO_BLOCK` neighbouring rows (:func:`_tile`) gives two
    reference rows, R1 (the least o1, ties by o2) and R2 (the least o2, ties
    by o1), and a row that a reference dominates is dropped. Domination is
    transitive, so only the points of the references' own front matter
    (:func:`_front_points` of the ``2 * n / PARETO_BLOCK`` references). In a
    sweep's chunk that front is short (a second objective such as p takes few
    values in a chunk), and when it has at most :data:`PARETO_FRONT` points
    (:data:`PARETO_SHORT`, the usual case, takes a cheaper branch) every row
    is compared with each of them: the rows left are exactly those no reference
    dominates. On the bench's tie-free grid this made the kernel 1.5-2.1x
    faster (54 -> 81-115 M configs/s) than the per-row bucket lookup below,
    whose gather of a 4,096-entry table costs about 20 ms per 2^20 rows.

    A longer front takes the buckets: a row is dropped when its block's R1
    or R2 dominates it, or when a reference with a smaller o1 does, found
    by :data:`PARETO_BUCKETS` buckets of o1 (a monotone map, so an earlier
    bucket has a smaller o1) over the front's range of o1: from the least o1
    to the o1 of the reference with the least o2; beyond it, every row is
    dominated by that reference or ties it. An exact sort of the rows left
    was tried: the sorts, of a few fixed sizes to fit the count, made the
    program 2.3x larger (1.6 MB of code: 4 s to compile, 0.3 s to load from
    the compilation cache, per kernel) and the chunk no faster.

    On a CPU each array derived from the chunk's rows is a pass over memory
    of its own (XLA fuses no two outputs into one loop), 0.3-0.7 ms per 2^20
    rows, against about 1.5 ms for the cost model itself; so the rows enter
    through one array ``x``, materialised once: o1 where the row competes
    (``ok``, both objectives finite), NaN where it is always kept (``ok``, an
    infinite objective: never dropped, never a reference) and inf where it is
    dropped (not ``ok``, or a NaN objective; the host's front never holds
    one); o2 is read where ``x`` is finite. With o1, o2, ok, the finite mask
    and both masked objectives each an array, the pre-filter took twice as
    long (kernel, all eight strategies: 122 -> 168-182 M configs/s). The NaN
    rows are made infinite for the block minima of o1, which costs the kernel
    4 %: a block minimum with a NaN is NaN, and a block with one row always
    kept would give no R1. ``o2`` is materialised first when ``materialise``
    (a result column, which XLA would otherwise compute from the cost model's
    terms in every pass that reads it); a configuration column such as p is
    cheap to read again.

    ``known`` (``[2, PARETO_FRONT]``, padded with infinities) may hold points of the front
    of rows seen before, outside this chunk (the host's running front, see
    :func:`known_front`): they join the references, so a row one of them dominates is
    dropped too. Only those no larger than the references' largest o1 (at their least
    o2) and largest o2 (at their least o1) do: a row no reference dominates lies within
    both bounds, so a point beyond either dominates only rows dropped anyway, and would
    only lengthen the front. On the bench's tied grid, 1.3 M of the 2.0 M rows tied on
    fronts of single chunks were dominated by rows of earlier jobs.
    """
    n = o1.shape[0]
    inf = jnp.asarray(jnp.inf, o1.dtype)
    if materialise:
        o2 = jax.lax.optimization_barrier(o2)
    good = ok & ~(jnp.isnan(o1) | jnp.isnan(o2))
    fin = good & jnp.isfinite(o1) & jnp.isfinite(o2)
    # one array: the first objective where it competes, NaN where always kept, inf where dropped
    x = jax.lax.optimization_barrier(jnp.where(fin, o1, jnp.where(good, jnp.nan, inf)))
    size = _tile(n, PARETO_BLOCK)
    groups = -(-n // size)

    def spread(v):  # a value per block -> one per row
        return jnp.broadcast_to(v[:, None], (groups, size)).reshape(-1)[:n]

    def second(x):  # o2 where the row competes, else inf
        return jnp.where(x < inf, o2, inf)

    def blocks(v):  # [groups, size]; a length no block size tiles is padded (dropped rows)
        v = v if n == groups * size else jnp.pad(v, (0, groups * size - n), constant_values=inf)
        return v.reshape(groups, size)

    # blocks as the rows of a matrix: a block's value broadcasts along its row (a broadcast
    # back over a flat array indexes by division, 2x slower on a CPU)
    a2, b2 = blocks(x), blocks(second(x))
    a_min, b_min = jnp.min(jnp.where(jnp.isnan(a2), inf, a2), axis=1), jnp.min(b2, axis=1)
    b_at = jnp.min(jnp.where(a2 == a_min[:, None], b2, inf), axis=1)  # R1 = (a_min, b_at)
    a_at = jnp.min(jnp.where(b2 == b_min[:, None], a2, inf), axis=1)  # R2 = (a_at, b_min)
    refs1 = jnp.concatenate([a_min, a_at])
    refs2 = jnp.concatenate([b_at, b_min])
    # R2 of a block with no row competing may be NaN: left out of the buckets' range too
    real = jnp.isfinite(refs1) & jnp.isfinite(refs2)
    refs1, refs2 = jnp.where(real, refs1, inf), jnp.where(real, refs2, inf)
    if known is not None:  # points outside the references' box dominate no row here: left out
        k1, k2 = known[0].astype(o1.dtype), known[1].astype(o1.dtype)
        least1, least2 = jnp.min(refs1), jnp.min(refs2)
        near = (k1 <= jnp.min(jnp.where(refs2 == least2, refs1, inf))) & (
            k2 <= jnp.min(jnp.where(refs1 == least1, refs2, inf))
        )
        refs1 = jnp.concatenate([refs1, jnp.where(near, k1, inf)])
        refs2 = jnp.concatenate([refs2, jnp.where(near, k2, inf)])
    f1, f2, n_front = _front_points(refs1, refs2, PARETO_FRONT)

    def by_front(k: int):
        """Rows no point of the front dominates, of its first ``k`` points (the rest are padding).

        The points have increasing f1 and decreasing f2, so among those with f1 <= x
        (or f1 < x) the last has the least f2: a row is dominated when that f2 is below
        its o2 (or no more than it). Two selects per point, over the rows: comparing each
        row with every point ([rows, points], then ``any``) took 2.5 ms of a 2^20 chunk
        with 16 points, this 1.7 ms, and 0.7 ms with 4.
        """

        def keep(x):
            a, b = x, second(x)
            below = at = jnp.full(a.shape, inf)  # least f2 of the points with f1 <= a; f1 < a
            for j in range(k):
                below = jnp.where(f1[j] <= a, f2[j], below)
                at = jnp.where(f1[j] < a, f2[j], at)
            dominated = (below < b) | (at <= b)
            return jnp.isnan(x) | ((x < inf) & ~dominated)

        return keep

    def by_buckets(x):
        finite = x < inf
        a, b = jnp.where(finite, x, inf), second(x)
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

    # a short front (the usual case) compares every row with fewer points
    tier = jnp.where(n_front <= PARETO_SHORT, 0, jnp.where(n_front <= PARETO_FRONT, 1, 2))
    return jax.lax.switch(tier, [by_front(PARETO_SHORT), by_front(PARETO_FRONT), by_buckets], x)


#: Weighted sums the Pareto pre-filter of three or more objectives minimises (see :func:`_pareto_kd`).
PARETO_WEIGHTS = 16


def _pareto_weights(k: int) -> np.ndarray:
    """``[PARETO_WEIGHTS, k]`` positive weights: each objective nearly alone, then fixed mixes."""
    near = np.full((k, k), 1e-3) + np.eye(k)
    mixes = np.random.default_rng(0).dirichlet(np.ones(k), max(PARETO_WEIGHTS - k, 0)) + 1e-3
    return np.concatenate([near, mixes])[:PARETO_WEIGHTS]


def _pareto_kd(objectives, ok):
    """Candidates for the front of a chunk under three or more minimised objectives.

    A superset of the front of the ``ok`` rows whose objectives are not NaN
    (the host's reduction is exact), as :func:`_pareto_2d` is for two. Each
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
    weights = jnp.asarray(_pareto_weights(k), x.dtype)
    score = jnp.where(real[None, :], weights @ jnp.where(real, scaled, 0), inf)  # [weights, refs]
    points = refs[:, jnp.argmin(score, axis=1)]  # [k, weights]; infinite where no reference is finite
    le = functools.reduce(jnp.logical_and, [points[i][None, :] <= x[i][:, None] for i in range(k)])
    lt = functools.reduce(jnp.logical_or, [points[i][None, :] < x[i][:, None] for i in range(k)])
    dominated = jnp.any(le & lt, axis=1)
    return ok & ~(finite & dominated)


#: Rows per block in :func:`_top_k_rows`.
TOP_BLOCK = 256


def top_by_blocks(k: int, n: int) -> bool:
    """Whether a top-k of ``n`` rows picks blocks (:func:`_top_k_rows`): while the k blocks
    hold at most half the rows. On a CPU ``lax.top_k`` over a whole 2^18-row chunk is a sort
    (64 ms); by blocks, all eight strategies ran top-5 at 126 M configs/s and top-500 at 80,
    against 21 and 8 before."""
    return 2 * k * TOP_BLOCK <= n


def _top_k_rows(score, k: int):
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
    minima = _block_min(s, TOP_BLOCK)
    _, which = jax.lax.top_k(-minima, min(k, groups))
    which = jnp.sort(which)  # gathered rows in position order, so ties still go to the lower position
    at = (which[:, None] * TOP_BLOCK + jnp.arange(TOP_BLOCK, dtype=which.dtype)[None, :]).reshape(-1)
    best, pos = jax.lax.top_k(-jnp.where(at < n, s[jnp.minimum(at, n - 1)], inf), k)
    return at[pos].astype(jnp.int32), jnp.all(jnp.isfinite(best))


def _top_k(objective, ok, k: int, size: int):
    """(mask, count, positions) of a chunk's top-k candidates, positions compacted to ``size``.

    The ``k`` rows with the least objective among ``ok`` rows, ties to the
    lower position (the host breaks ties by flat index, in the same order).
    While k is small against the chunk (:func:`top_by_blocks`) the rows are
    picked by blocks (:func:`_top_k_rows`), and when fewer than k rows have
    a finite objective every ``ok`` row is a candidate. For larger k, by a
    mask below the k-th smallest objective, found with ``lax.top_k`` over
    the chunk (a sort on a CPU: about 64 ms for 2^18 rows, against 0.6 ms
    for the least one).

    The objective enters only through ``score``: the objective where ``ok``
    (infinite where it is NaN) and NaN where not. Deriving a second mask from
    the objective (``ok & ~isnan``) made XLA compute the whole cost model
    twice, once for each. A NaN objective never qualifies, yet when fewer
    than k rows have a finite one, ``ok`` rows with a NaN objective are
    passed on with the infinite ones (all may be more than k), and the host
    drops them (:meth:`sweep.reducer.Reducer.add`); otherwise the candidates
    are exact.
    """
    n = objective.shape[0]
    inf = jnp.asarray(jnp.inf, objective.dtype)
    score = jnp.where(ok, jnp.where(jnp.isnan(objective), inf, objective), jnp.nan)

    def compact(mask):
        return (mask, *_compact(mask, size))

    if not top_by_blocks(k, n):
        s = jnp.where(jnp.isnan(score), inf, score)
        kth = jnp.min(s) if k == 1 else -jax.lax.top_k(-s, min(k, n))[0][-1]
        better, tied = score < kth, score == kth  # NaN (not ok) is neither
        return compact(jnp.where(jnp.isinf(kth), better | tied, _first_k(better, tied, k)))
    picks, exact = _top_k_rows(score, k)

    def by_blocks(_):
        mask = jnp.zeros(n, bool).at[picks].set(True)
        # k, computed from per-device data as the other branch's count is (under shard_map
        # both branches must vary over the device axis alike)
        count = (picks[0] * 0 + k).astype(jnp.int32)
        return mask, count, jnp.pad(jnp.sort(picks), (0, size - k))

    def every(_):  # fewer than k rows with a finite objective: the k-th is infinite
        return compact(~jnp.isnan(score))

    return jax.lax.cond(exact, by_blocks, every, None)


def _first_k(better, tied, k: int):
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


def _floor_div(a, d):
    """``floor(a / d)`` for whole numbers below 2**24 held as floats, exact.

    XLA may compute ``a / d`` as ``a * (1/d)``, which can land one ulp either
    side of a whole quotient (97 * (1/97) < 1), so correct in both directions.
    """
    q = jnp.floor(a / d)
    q = jnp.where(q * d > a, q - 1, q)
    return jnp.where((q + 1) * d <= a, q + 1, q)


class ChunkOut(NamedTuple):
    """What a chunk returns. Column matrices are ``[columns, rows]`` so each column is contiguous.

    The device evaluates whole inner boxes, so arrays span a few more rows
    than the chunk: ``mask`` marks the rows that are the chunk's (and, for a
    reduction, candidates), in chunk order; the row at position ``i`` of a
    device's block is the chunk's point ``i - lead``. ``ints`` holds the
    configuration columns and, for swept machine parameters, the axis digit
    (the host maps it to the exact float64 value); ``floats`` the result
    columns. A reduction returns no full columns, only its candidates
    compacted to ``K`` rows (``sel`` their chunk offsets, ``count`` how many
    are real); when ``count > K`` a Pareto chunk leaves the block unfilled
    and :func:`survivors` evaluates the candidates at ``mask`` again.
    """

    floats: Any
    ints: Any
    limit: Any
    mask: Any  # arrays, or PartitionSpecs when describing shard_map outputs
    lead: Any
    # reductions only: candidates compacted to K rows
    c_floats: Any = None
    c_ints: Any = None
    c_limit: Any = None
    sel: Any = None
    count: Any = None


# The reductions jitted on their own: traced and lowered once per chunk width and
# reused by every job of a run (tracing them took about half of a warm start).
_pareto_2d_jit = jax.jit(_pareto_2d, static_argnums=3)
_pareto_kd_jit = jax.jit(_pareto_kd)
_top_k_jit = jax.jit(_top_k, static_argnums=(2, 3))
_compact_jit = jax.jit(_compact, static_argnums=(1, 2))


def _configuration_fn(job: Job, dtype) -> Callable:
    """``one(net, machine, at) -> (floats, ints, limit, fits)``: every column of one
    configuration of ``job``; ``at`` maps each axis to (value, digit)."""
    machine_axes = job.machine_axes
    point = point_fn(job.strategy, machine_axes, overheads=job.bound.profile.overheads)
    hybrid = "p2" in job.axes
    fixed = dict(job.bound.profile.overrides)

    def one(net, machine, at):
        if fixed:
            machine = with_params(machine, **{k: jnp.asarray(v, dtype) for k, v in fixed.items()})
        swept = tuple(at[k][0].astype(dtype) for k in machine_axes)
        m_eff = (
            with_params(machine, **dict(zip(machine_axes, swept, strict=True))) if machine_axes else machine
        )
        p = at["p"][0].astype(dtype) if "p" in at else jnp.asarray(1, dtype)
        b = at["b"][0].astype(dtype)
        p2 = at["p2"][0].astype(dtype) if "p2" in at else m_eff.gpus_per_node.astype(dtype)
        s = at["S"][0].astype(dtype) if "S" in at else p
        cost, derived = point(net, machine, Config(p, b, p2, s), swept)
        # Materialise the terms once: without the barrier XLA's CPU fusion recomputes
        # shared subexpressions for every output column (measured 2-4x slower).
        cost, derived = jax.lax.optimization_barrier((cost, derived))
        merged = {**cost._asdict(), **derived._asdict()}
        floats = tuple(jnp.asarray(merged[c], dtype) for c in RESULT_COLUMNS)
        ints = tuple(jnp.round(merged[c]).astype(jnp.int32) for c in CONFIG_COLUMNS) + tuple(
            at[k][1] for k in machine_axes
        )
        fits = jnp.ones((), bool)
        if hybrid:
            fits = (p >= p2) & (jnp.round(p / p2) * p2 == p)
        return floats, ints, cost.limit.astype(jnp.int8), fits

    return one


def build_chunk_fn(job: Job, chunk: int, keep: Keep, dtype, devices=None):
    """A jitted ``f(net, machine, values, info, n_real, known) -> ChunkOut`` and its compaction size.

    ``mask`` marks the rows to keep: real (not padding), a configuration the
    strategy can take (hybrids skip p2 not dividing p), and, for a ``keep``
    reduction, a candidate. ``known`` (:func:`known_front`) is read by a Pareto
    reduction of two objectives only: points of a front found before, which
    drop the rows they dominate (see :func:`_pareto_2d`).

    With several ``devices`` (default: every local device) the chunk is
    padded to a multiple of their number N and split with ``shard_map`` over
    a 1-D mesh: device d evaluates the ``chunk / N`` consecutive points from
    offset ``d * chunk / N`` and compacts its own candidates, so outputs are
    ``N`` blocks side by side and ``count`` has one entry per device (see
    :func:`survivors`); the compaction size is per device.
    """
    axis_names = tuple(job.axes)
    icols = int_columns(job)
    radices = [len(v) for v in job.axes.values()]
    n_outer = inner_split(radices, chunk)
    box = math.prod(radices[n_outer:])
    one = _configuration_fn(job, dtype)

    def nest(net, machine, values, at, i):
        """Columns over the inner box: one vmap per inner axis, so a term is computed
        once per value of the axes it depends on (vmap batches only what varies)."""
        if i == len(axis_names):
            return one(net, machine, at)
        name = axis_names[i]

        def inner(value, digit):
            return nest(net, machine, values, {**at, name: (value, digit)}, i + 1)

        return jax.vmap(inner)(values[i], jnp.arange(radices[i], dtype=jnp.int32))

    def outer_point(net, machine, values, digits):
        at = {axis_names[i]: (values[i][digits[i]], digits[i]) for i in range(n_outer)}
        return nest(net, machine, values, at, n_outer)

    radix = np.asarray(radices[:n_outer], np.float32)[:, None]
    by_floats = chunk <= FLOAT_CHUNK
    ranks = {c: axis_ranks(job, c) for c in keep.columns if c in job.machine_axes}

    def run(net, machine, values, info, n_real, known, offset, size):
        """``size`` points at local offsets ``offset + arange(size)`` of the chunk (``offset``
        int32).

        The points lie in ``n_box`` consecutive inner boxes from outer index
        ``o + q``; every point of those boxes is evaluated and the window of
        ``size`` points cut out.
        """
        n_box = (size - 1) // box + 2 if box > 1 else size
        # Mixed-radix decode of the outer indices: digit = (q + carry) mod r.
        if by_floats:
            # in exact small-integer float arithmetic (vectorises on CPUs, where integer
            # division does not)
            at = offset.astype(jnp.float32)
            w = info[n_outer, 0].astype(jnp.float32) + at  # first point, from the start of box o
            q = _floor_div(w, jnp.float32(box))
            window = (w - q * box).astype(jnp.int32)
            fi = info[:n_outer].astype(jnp.float32)
            k = q + jnp.arange(n_box, dtype=jnp.float32)
            carry = jnp.where(
                info[:n_outer, 4:5] == 1,
                (k[None, :] >= fi[:, 3:4]).astype(jnp.float32),
                _floor_div(fi[:, 1:2] + k[None, :], fi[:, 2:3]),
            )
            total = fi[:, 0:1] + carry
            digits = (total - radix * _floor_div(total, radix)).astype(jnp.int32)
        else:
            w = info[n_outer, 0] + offset
            q = w // box
            window = w - q * box
            k = q + jnp.arange(n_box, dtype=jnp.int32)
            carry = jnp.where(
                info[:n_outer, 4:5] == 1,
                (k[None, :] >= info[:n_outer, 3:4]).astype(jnp.int32),
                (info[:n_outer, 1:2] + k[None, :]) // info[:n_outer, 2:3],
            )
            digits = (info[:n_outer, 0:1] + carry) % radix.astype(np.int32)
        floats, ints, limit, fits = jax.vmap(outer_point, in_axes=(None, None, None, 0))(
            net, machine, values, digits.T
        )

        # Columns over the whole boxes, [column, n_box * box]; the chunk's points are
        # the window [window, window + size). Reductions never copy the window out.
        width = n_box * box
        pos = jnp.arange(width, dtype=jnp.int32) - window  # offset from this device's first point
        if by_floats:
            k = at + pos.astype(jnp.float32)
            mask = (pos >= 0) & (pos < size) & (k < n_real) & fits.reshape(-1)
        else:
            mask = (pos >= 0) & (pos < size) & (offset + pos < n_real) & fits.reshape(-1)
        limit = limit.reshape(-1)
        lead = window - offset  # output position minus chunk offset
        if not keep.reduces:
            # stacked in the columns' own shape, then flattened: a stack of flattened columns
            # indexed every element back into the boxes by division (1.7x slower on a CPU)
            stack = lambda cols: jnp.stack(cols).reshape(len(cols), -1)  # noqa: E731
            return ChunkOut(stack(floats), stack(ints), limit, mask, lead)
        flat = {name: c.reshape(-1) for name, c in zip(RESULT_COLUMNS, floats, strict=True)}
        flat.update((name, c.reshape(-1)) for name, c in zip(icols, ints, strict=True))
        ok = mask & (limit == 0)
        objective = [
            jnp.asarray(ranks[c], dtype)[flat[c]] if c in ranks else flat[c].astype(dtype)
            for c in keep.columns
        ]
        if keep.kind == "pareto":
            # candidates on the device, a superset of the front; the host's reduction is exact
            if len(objective) == 2:
                # a configuration column (p) is cheap to read again; a result column is not
                mask = _pareto_2d_jit(objective[0], objective[1], ok, keep.columns[1] not in icols, known)
            else:
                mask = _pareto_kd_jit(tuple(objective), ok)
            # more than fit are read from ``mask`` (:func:`survivors`), and not compacted
            # unless they lie in few blocks (a prefix sum and a scatter over the chunk,
            # 10-18 ms of a tied 2^20 chunk's 20-30 on a CPU)
            count, idx = _compact_jit(mask, compact)
        else:
            mask, count, idx = _top_k_jit(objective[0], ok, keep.k, compact)
        gather = lambda names: jnp.stack([flat[c][idx] for c in names])  # noqa: E731
        return ChunkOut(
            None, None, None, mask, lead, gather(RESULT_COLUMNS), gather(icols), limit[idx], idx - lead, count
        )

    n_dev = len(devices) if devices is not None else len(local_devices())
    per = -(-chunk // n_dev)  # points per device; the chunk is padded to n_dev * per
    # top-k rarely has more than k candidates (see :func:`_top_k`), and every compacted row
    # costs each result column once more: 4096 rows made top-1 about 15 % slower
    compact = min(per, keep.k if keep.kind == "top" else max(COMPACT_ROWS, keep.k))
    TRACES[(job.index, job.strategy)] = 0

    if n_dev == 1:

        def single(net, machine, values, info, n_real, known):
            TRACES[(job.index, job.strategy)] += 1  # runs at trace time only
            return run(net, machine, values, info, n_real, known, jnp.int32(0), chunk)

        return jax.jit(single), compact

    mesh = device_mesh(devices)

    def part(net, machine, values, info, n_real, known):
        offset = (jax.lax.axis_index(AXIS) * per).astype(jnp.int32)
        out = run(net, machine, values, info, n_real, known, offset, per)
        out = out._replace(lead=out.lead.reshape(1))
        return out if out.count is None else out._replace(count=out.count.reshape(1))

    cols, rows = P(None, AXIS), P(AXIS)  # [columns, points] blocks side by side; [points]
    if keep.reduces:
        specs = ChunkOut(None, None, None, rows, rows, cols, cols, rows, rows, rows)
    else:
        specs = ChunkOut(cols, cols, rows, rows, rows)
    sharded = jax.shard_map(part, mesh=mesh, in_specs=P(), out_specs=specs)

    def multi(net, machine, values, info, n_real, known):
        TRACES[(job.index, job.strategy)] += 1  # runs at trace time only
        return sharded(net, machine, values, info, n_real, known)

    return jax.jit(multi), compact


def local_devices() -> list:
    """The devices a chunk is spread over: every local device of JAX's default backend."""
    return jax.local_devices()


def describe_devices(devices=None) -> str:
    """Where chunks run, for a person: ``"1 gpu (NVIDIA H200)"``, ``"2 cpu"`` (a CUDA jaxlib
    that fell back to the CPU shows here)."""
    devices = devices if devices is not None else local_devices()
    kinds = collections.Counter((d.platform, d.device_kind) for d in devices)
    return ", ".join(
        f"{n} {platform}" + (f" ({kind})" if platform != "cpu" else "")
        for (platform, kind), n in kinds.items()
    )


def device_mesh(devices=None) -> Mesh:
    """A 1-D mesh (axis ``"d"``) over ``devices`` (default :func:`local_devices`)."""
    return Mesh(np.asarray(devices if devices is not None else local_devices()), (AXIS,))


class Survivors(NamedTuple):
    """A reducing chunk's candidate rows on the host; ``local`` are their offsets in the chunk."""

    ints: np.ndarray
    floats: np.ndarray
    limit: np.ndarray
    local: np.ndarray


def positions(out: ChunkOut, where: np.ndarray) -> np.ndarray:
    """Chunk offsets of output positions ``where`` (device blocks side by side, see :class:`ChunkOut`)."""
    lead = np.atleast_1d(np.asarray(out.lead)).astype(np.int64)
    block = np.asarray(out.mask).shape[0] // len(lead)
    device = where // block
    return where - device * block - lead[device]


def _rows_at(every: ChunkOut, where: np.ndarray, local: np.ndarray) -> Survivors:
    """Rows ``where`` of a chunk evaluated with every column kept, at chunk offsets ``local``."""
    return Survivors(
        np.asarray(every.ints)[:, where],
        np.asarray(every.floats)[:, where],
        np.asarray(every.limit)[where],
        local,
    )


def survivors(out: ChunkOut, again: Again) -> Survivors:
    """Copy a reducing chunk's candidates to the host.

    One device returns one block and a scalar ``count``; ``N`` devices return
    ``N`` blocks side by side and ``count[N]``. A block holds a device's first
    ``K`` candidates. When a device has more (ties: below 8 GPUs every
    network setting gives the same time), the candidates are read from
    ``mask`` and ``again`` evaluates every column of each of them.
    """
    counts = np.atleast_1d(np.asarray(out.count)).astype(np.int64)
    width = out.sel.shape[0] // len(counts)
    if (counts > width).any():
        return again.rows(positions(out, np.flatnonzero(np.asarray(out.mask))))
    cols = np.concatenate([d * width + np.arange(c) for d, c in enumerate(counts)]).astype(np.int64)
    return Survivors(
        np.asarray(out.c_ints)[:, cols],
        np.asarray(out.c_floats)[:, cols],
        np.asarray(out.c_limit)[cols],
        np.asarray(out.sel)[cols].astype(np.int64),
    )


def digits_at(job: Job, index: np.ndarray) -> np.ndarray:
    """The axis digits ``[axes, n]`` of flat indices ``index`` of ``job`` (the first axis slowest)."""
    rest = np.asarray(index, dtype=np.int64)
    digits = []
    for radix in reversed([len(v) for v in job.axes.values()]):
        rest, digit = np.divmod(rest, radix)
        digits.append(digit)
    return np.stack(digits[::-1]).astype(np.int32)


def build_points_fn(job: Job, dtype) -> Any:
    """A jitted ``f(net, machine, values, digits[axes, POINT_ROWS]) -> (floats, ints, limit)``:
    every column of each configuration the digits name, laid out as :class:`ChunkOut`'s."""
    one = _configuration_fn(job, dtype)
    names = tuple(job.axes)

    def points(net, machine, values, digits):
        def at(d):
            return one(net, machine, {name: (values[i][d[i]], d[i]) for i, name in enumerate(names)})

        floats, ints, limit, _fits = jax.vmap(at, in_axes=1)(digits)
        return jnp.stack(floats), jnp.stack(ints), limit

    return jax.jit(points)


class Again:
    """Every column of chosen configurations of a job's chunks, evaluated again: the
    candidates of a reducing chunk that has more than it compacts (:func:`survivors`).

    Configurations are evaluated one by one, :data:`POINT_ROWS` a call, on one
    device: no term is shared across a box of points, yet a 2^20-point chunk
    of the bench grid with 200,000 rows tied on its front took 12 ms here,
    against 94 ms to evaluate the whole chunk with every column kept and
    pick the rows (the fallback this replaced), or a page per 4,096 rows
    of the reducing program again (19 ms each).
    """

    def __init__(self, job: Job, dtype, points: Callable[[], tuple[Callable, tuple]] | None = None) -> None:
        """``points``, if given, returns the compiled points function and its inputs
        (:func:`prepare_points`, e.g. ``future.result``); else they are made on first use."""
        self.job, self.dtype = job, dtype
        # shared by copies: the compiled function and its inputs, once there are
        self.compiled: dict[str, Any] = {}
        self.supplier = points
        self.start = 0

    def at(self, start: int) -> Again:
        """A copy for the chunk that starts at flat index ``start`` of the job; the compiled
        function is shared, so threads may evaluate different chunks at once."""
        bound = copy.copy(self)
        bound.start = start
        return bound

    @property
    def used(self) -> bool:
        """Whether a chunk of this job needed :meth:`rows`."""
        return "fn" in self.compiled

    @property
    def seconds(self) -> float:
        """Time spent in :meth:`rows` for this job's chunks, the first use's preparing included."""
        return float(self.compiled.get("seconds", 0.0))

    def rows(self, local: np.ndarray) -> Survivors:
        """Every column of the points at chunk offsets ``local``."""
        began = time.perf_counter()
        try:
            return self._rows(local)
        finally:
            self.compiled["seconds"] = self.seconds + time.perf_counter() - began

    def _rows(self, local: np.ndarray) -> Survivors:
        if "fn" not in self.compiled:
            make = self.supplier or (lambda: prepare_points(self.job, self.dtype))
            self.compiled["fn"], self.compiled["inputs"] = make()
        fn, inputs = self.compiled["fn"], self.compiled["inputs"]
        digits = digits_at(self.job, self.start + local)
        parts = []
        for lo in range(0, len(local), POINT_ROWS):
            page = digits[:, lo : lo + POINT_ROWS]
            n = page.shape[1]
            floats, ints, limit = fn(*inputs, np.pad(page, ((0, 0), (0, POINT_ROWS - n))))
            parts.append((np.asarray(ints)[:, :n], np.asarray(floats)[:, :n], np.asarray(limit)[:n]))
        ints, floats, limit = (np.concatenate(p, axis=-1) for p in zip(*parts, strict=True))
        return Survivors(ints, floats, limit, np.asarray(local, dtype=np.int64))


def known_front(vectors: np.ndarray | None, dtype) -> np.ndarray:
    """A chunk function's ``known`` argument: ``[2, PARETO_FRONT]`` points of ``vectors``
    (distinct vectors of a front of two objectives by increasing first objective, as
    :attr:`sweep.reducer.Reducer.vectors` holds them; None for none), padded with infinities.

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


def prepare(job: Job, chunk: int, keep: Keep, dtype, devices=None) -> tuple[Callable, tuple, bool]:
    """The job's chunk function, compiled, its device inputs, and whether it returns every row.

    Tracing and lowering (or reading the module an earlier run kept, see
    :mod:`sweep.traced`) and compiling (or loading from the persistent
    cache) happen here rather than at the first call, so a run can prepare the next
    jobs' kernels on other threads while this one computes: tracing holds
    the GIL but XLA's compute threads do not need it, and XLA compiles
    without it. The result is called like :func:`build_chunk_fn`'s function.

    A reduction over a small job of one chunk gains little on the device and
    its program takes several times longer to compile (4 s against 0.6 s for
    a Pareto kernel on a CPU), so such a job returns every row and the host
    picks the candidates (:func:`host_candidates`; :func:`reduced_on_host`
    says which jobs); the kept rows are the same.
    """
    whole = reduced_on_host(job, chunk, keep)
    inputs = device_inputs(job, dtype, devices)
    return compile_chunk_fn(job, chunk, Keep("all") if whole else keep, dtype, inputs, devices), inputs, whole


def reduced_on_host(job: Job, chunk: int, keep: Keep) -> bool:
    """Whether a reduction evaluates ``job`` whole, every row to the host (:func:`prepare`):
    a job of one chunk of at most :data:`HOST_REDUCE_MAX` points. The host's reduction runs
    at a few million rows a second, the device's at hundreds of millions and more."""
    return keep.reduces and job.size <= min(chunk, HOST_REDUCE_MAX)


def compile_chunk_fn(job: Job, chunk: int, keep: Keep, dtype, inputs: tuple, devices=None) -> Callable:
    """:func:`build_chunk_fn`'s function compiled for ``inputs`` (:func:`device_inputs`), from
    the module a run before this one kept when there is one (:mod:`sweep.traced`)."""
    devices = devices if devices is not None else local_devices()
    return traced.compile_kept(
        job,
        ("chunk", chunk, keep, np.dtype(dtype).name),
        devices,
        lambda: build_chunk_fn(job, chunk, keep, dtype, devices)[0],
        (*inputs, decode_info(job, 0, chunk), np.int32(0), known_front(None, dtype)),
    )


def prepare_points(job: Job, dtype) -> tuple[Callable, tuple]:
    """:func:`build_points_fn`'s function, compiled for one device, and its inputs on that
    device: what :meth:`Again.rows` calls, prepared ahead by a run once one of its jobs
    needed it (the inputs too, so the main thread does not make them again)."""
    devices = local_devices()[:1]
    inputs = device_inputs(job, dtype, devices)
    digits = np.zeros((len(job.axes), POINT_ROWS), np.int32)
    fn = traced.compile_kept(
        job,
        ("points", POINT_ROWS, np.dtype(dtype).name),
        devices,
        lambda: build_points_fn(job, dtype),
        (*inputs, digits),
    )
    return fn, inputs


def host_candidates(out: ChunkOut, keep: Keep, job: Job) -> Survivors:
    """A reduction's candidates from a chunk of every row (see :func:`prepare`).

    The rows the host's reduction could keep: real and feasible, and not
    beaten by rows of the chunk itself, judged on the objective columns alone
    before any other column is gathered. For a Pareto front, a row that a
    reference row dominates goes: for each objective, the row least in it
    (ties by the others in turn), which is on the front. For top-k, a row
    whose objective is more than the k-th least goes (ties stay; the host
    breaks them). A row with a NaN objective goes (no result holds one). The
    bench's tied grid's one-chunk serial job has 300,000 feasible rows, 100,000
    of them on the front: 23-71 ms to pick them all, 24-29 ms with this, and
    the host's reduction has a third of the rows to merge.
    """
    ok = np.asarray(out.mask) & (np.asarray(out.limit) == 0)
    where = np.flatnonzero(ok)
    objectives = [_host_objective(out, job, column, where) for column in keep.columns]
    if keep.kind == "top":
        where = where[_within_top(objectives[0], keep.k)]
    else:
        where = where[_undominated(objectives)]
    return _rows_at(out, where, positions(out, where))


def _host_objective(out: ChunkOut, job: Job, column: str, where: np.ndarray) -> np.ndarray:
    """``column`` of the rows ``where`` of a chunk of every row, as float64 (a swept machine
    parameter as the ranks of its values, :func:`axis_ranks`, as the device reduces it)."""
    if column in RESULT_COLUMNS:
        return np.asarray(out.floats)[RESULT_COLUMNS.index(column), where].astype(np.float64)
    digits = np.asarray(out.ints)[int_columns(job).index(column), where]
    if column in job.machine_axes:
        digits = axis_ranks(job, column)[digits]
    return digits.astype(np.float64)


def _within_top(objective: np.ndarray, k: int) -> np.ndarray:
    """The rows whose objective is a number no more than the k-th least number."""
    number = ~np.isnan(objective)
    if number.sum() <= k:
        return number
    kth = np.partition(objective[number], k - 1)[k - 1]
    return number & (objective <= kth)


def _undominated(objectives: list[np.ndarray]) -> np.ndarray:
    """Rows with no NaN objective that none of the reference rows dominates (see
    :func:`host_candidates`): a superset of the front of the rows."""
    objs = np.stack(objectives, axis=1)
    number = numbers(objs)
    if not number.any():
        return number
    refs = []
    for first in range(objs.shape[1]):
        least = number.copy()  # the lexicographic minimum, objective ``first`` first
        for j in (first, *(j for j in range(objs.shape[1]) if j != first)):
            least &= objs[:, j] == np.min(objs[least, j])
        refs.append(objs[np.argmax(least)])
    return number & ~dominated_by(np.asarray(refs), objs)


def device_inputs(job: Job, dtype, devices=None):
    """The job's net, base machine and axis value arrays as device arrays.

    With several ``devices`` (default: every local device) they are
    replicated on each once, so a chunk call does not copy them again.
    """
    net = jax.tree_util.tree_map(lambda a: np.asarray(a, dtype), job.bound.net)
    machine = job.bound.profile.pytree(np.float64)
    machine = jax.tree_util.tree_map(lambda a: np.asarray(a, dtype), machine)
    values = tuple(
        np.asarray(v, np.int32) if name in CONFIG_AXES else np.asarray(v, dtype)
        for name, v in job.axes.items()
    )
    inputs = (net, machine, values)
    devices = devices if devices is not None else local_devices()
    if len(devices) == 1:
        # device_put, not jnp.asarray: that applies a conversion primitive to each leaf,
        # which compiles (or looks up in the persistent cache) a program per new shape,
        # 0.1-0.3 s a run for the seven jobs of a co-design grid, against 0.01 s
        return jax.device_put(inputs)
    return jax.device_put(inputs, NamedSharding(device_mesh(devices), P()))
