"""A reducing chunk's candidates on the host: read from the device's compacted block,
evaluated again when there are more than it holds (:class:`Again`), or picked by the
host from a chunk of every row (:func:`host_candidates`)."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from sweep.engine import program
from sweep.engine.evaluate import RESULT_COLUMNS
from sweep.engine.index import axis_ranks, digits_at, int_columns
from sweep.engine.program import ChunkOut
from sweep.inputs.grid import Job
from sweep.reduce.keep import Keep, Survivors
from sweep.reduce.pareto import dominated_by, numbers


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
    ``K`` candidates (a front of distinct optima: the first of each run of tied
    candidates, and ``tied``, the run's length). When a device has more (ties: below
    8 GPUs every network setting gives the same time), the candidates are read from
    ``mask`` and ``again`` evaluates every column of each of them.
    """
    counts = np.atleast_1d(np.asarray(out.count)).astype(np.int64)
    width = out.sel.shape[0] // len(counts)
    if (counts > width).any():  # every candidate, one configuration each
        return again.rows(positions(out, np.flatnonzero(np.asarray(out.mask))))
    cols = np.concatenate([d * width + np.arange(c) for d, c in enumerate(counts)]).astype(np.int64)
    return Survivors(
        np.asarray(out.c_ints)[:, cols],
        np.asarray(out.c_floats)[:, cols],
        np.asarray(out.c_limit)[cols],
        np.asarray(out.sel)[cols].astype(np.int64),
        None if out.tied is None else np.asarray(out.tied)[cols].astype(np.int64),
    )


class Again:
    """Every column of chosen configurations of a job's chunks, evaluated again: the
    candidates of a reducing chunk that has more than it compacts (:func:`survivors`).

    Configurations are evaluated one by one, :data:`program.POINT_ROWS` a call, on one
    device: no term is shared across a box of points, yet for a chunk with many
    rows tied on its front this is several times faster than evaluating the
    whole chunk with every column kept, or the reducing program again page
    by page.
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
            make = self.supplier or (lambda: program.prepare_points(self.job, self.dtype))
            self.compiled["fn"], self.compiled["inputs"] = make()
        fn, inputs = self.compiled["fn"], self.compiled["inputs"]
        digits = digits_at(self.job, self.start + local)
        parts = []
        for lo in range(0, len(local), program.POINT_ROWS):
            page = digits[:, lo : lo + program.POINT_ROWS]
            n = page.shape[1]
            floats, ints, limit = fn(*inputs, np.pad(page, ((0, 0), (0, program.POINT_ROWS - n))))
            parts.append((np.asarray(ints)[:, :n], np.asarray(floats)[:, :n], np.asarray(limit)[:n]))
        ints, floats, limit = (np.concatenate(p, axis=-1) for p in zip(*parts, strict=True))
        return Survivors(ints, floats, limit, np.asarray(local, dtype=np.int64))


def host_candidates(out: ChunkOut, keep: Keep, job: Job) -> Survivors:
    """A reduction's candidates from a chunk of every row (see :func:`prepare`).

    The rows the host's reduction could keep: real and feasible, and not
    beaten by rows of the chunk itself, judged on the objective columns alone
    before any other column is gathered. For a Pareto front, a row that a
    reference row dominates goes: for each objective, the row least in it
    (ties by the others in turn), which is on the front. For top-k, a row
    whose objective is more than the k-th least goes (ties stay; the host
    breaks them). A row with a NaN objective goes (no result holds one). It
    costs about as much as picking every feasible row, and leaves the host's
    reduction fewer rows to merge.
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
