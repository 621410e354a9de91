"""A job's flat index space: chunks, mixed-radix digits, shards (``--shard K/N``).

A chunk is a contiguous range ``[start, start + C)`` of flat indices. The
host decodes the chunk start into mixed-radix digits (Python integers, so
grids beyond 2**31 points work in int32 on the device); the device adds the
local offset with carries (:func:`decode_info`, then :func:`outer_digits`). :func:`spans` cuts the
concatenated index space of all jobs into the equal contiguous shards of
``sweep run --shard K/N``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from sweep.engine.evaluate import CONFIG_COLUMNS, RESULT_COLUMNS
from sweep.engine.filters import floor_div
from sweep.inputs.grid import Job

#: Chunks up to this many points decode their points in float32, whose whole numbers are exact
#: below 2**24 and whose division vectorises on CPUs (integer division does not); larger
#: chunks decode in int32.
FLOAT_CHUNK = 1 << 22
#: Largest chunk. Its device memory grows with it: a GPU's fixed cost per call is what a
#: larger chunk spreads (docs/performance.md#gpu-figures-one-h200).
MAX_CHUNK = 1 << 26


def _big_stride(chunk: int) -> int:
    """Outer strides above this use the carry-by-threshold form (:func:`decode_info`): the
    plain form adds a stride's remainder and a box count, which must stay exact (below
    2**24 in float32, 2**31 in int32); the threshold form needs box counts below it."""
    return 1 << 23 if chunk <= FLOAT_CHUNK else 1 << 30


def int_columns(job: Job) -> tuple[str, ...]:
    """Rows of a chunk's int32 matrix: configuration columns, then swept machine parameters (digits)."""
    return (*CONFIG_COLUMNS, *job.extra_columns, *job.machine_axes)


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
    its points, and a GPU copies every row it returns). Not rounded up to a power of two:
    that nearly doubles the points of some jobs (the program evaluates whole inner boxes)."""
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


def digits_at(job: Job, index: np.ndarray) -> np.ndarray:
    """The axis digits ``[axes, n]`` of flat indices ``index`` of ``job`` (the first axis slowest)."""
    return mixed_radix(np.asarray(index, dtype=np.int64), [len(v) for v in job.axes.values()]).astype(
        np.int32
    )


def mixed_radix(rest, radices: Sequence[int], xp=np):
    """The digits ``[len(radices), n]`` of the whole numbers ``rest`` in the mixed radix
    ``radices``, the first slowest, and what is above them dropped (``xp``: numpy on the host,
    jax.numpy on the device)."""
    digits = []
    for radix in reversed(radices):
        rest, digit = xp.divmod(rest, radix)
        digits.append(digit)
    return xp.stack(digits[::-1]) if digits else xp.zeros((0, *rest.shape), rest.dtype)


def outer_digits(info, offset, n_outer: int, box: int, n_box: int, radix: np.ndarray, by_floats: bool):
    """``(digits [n_outer, n_box], window, at)``: the outer axes' digits of the ``n_box`` boxes
    from the one holding local offset ``offset``, the offset's position in its box, and (in
    float arithmetic) the offset as a float, else None.

    A mixed-radix decode of the outer indices, digit = (q + carry) mod r
    (:func:`decode_info` gives ``info``). For chunks up to
    :data:`FLOAT_CHUNK` it runs in exact small-integer float
    arithmetic, which vectorises on CPUs, where integer division does not.
    """
    if by_floats:
        at = offset.astype(jnp.float32)
        w = info[n_outer, 0].astype(jnp.float32) + at  # first point, from the start of box o
        q = floor_div(w, jnp.float32(box))
        window = (w - q * box).astype(jnp.int32)
        fi = info[:n_outer].astype(jnp.float32)
        k = q + jnp.arange(n_box, dtype=jnp.float32)
        carry = jnp.where(
            info[:n_outer, 4:5] == 1,
            (k[None, :] >= fi[:, 3:4]).astype(jnp.float32),
            floor_div(fi[:, 1:2] + k[None, :], fi[:, 2:3]),
        )
        total = fi[:, 0:1] + carry
        return (total - radix * floor_div(total, radix)).astype(jnp.int32), window, at
    w = info[n_outer, 0] + offset
    q = w // box
    window = w - q * box
    k = q + jnp.arange(n_box, dtype=jnp.int32)
    carry = jnp.where(
        info[:n_outer, 4:5] == 1,
        (k[None, :] >= info[:n_outer, 3:4]).astype(jnp.int32),
        (info[:n_outer, 1:2] + k[None, :]) // info[:n_outer, 2:3],
    )
    return (info[:n_outer, 0:1] + carry) % radix.astype(np.int32), window, None


def row_digits(outer, idx, job: Job, n_outer: int):
    """Every axis's digit of a chunk's rows ``idx`` (positions in its inner boxes), ``[axes, rows]``:
    the outer axes' of their box (``outer``, :func:`outer_digits`), the inner axes' decoded from
    the position in the box, the last axis the fastest."""
    radices = [len(v) for v in job.axes.values()][n_outer:]
    inner = mixed_radix(idx, radices, jnp)
    return jnp.concatenate([outer[:, idx // math.prod(radices)], inner.astype(outer.dtype)])
