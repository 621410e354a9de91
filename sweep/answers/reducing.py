"""A query's running answer per group, decided by the engine's reducer (:class:`sweep.reduce.reducer.Reducer`):
an exact screen first, then the reducer, so ``sweep pareto``/``sweep top`` keep what ``sweep run --keep``
keeps, ties and tied counts included (docs/queries.md)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from sweep.output import store
from sweep.reduce.keep import Keep, Survivors
from sweep.reduce.pareto import dominated_by, numbers, pareto_mask
from sweep.reduce.reducer import Reducer


@dataclass
class GroupState:
    """The running answer of one group: the engine's reducer over it, and what it keeps so far
    (objective values, dataset positions, tied counts, carried columns), for the next screen."""

    reducer: Reducer
    vals: np.ndarray
    rows: np.ndarray
    carry: pa.Table | None = None
    tied: np.ndarray | None = None  # a front of distinct optima: the rows each row stands for


@dataclass
class GroupReducer:
    """How a group's running answer absorbs candidates: a screen (exact: it passes every row
    that can be in the answer), then the engine's reducer (:class:`sweep.reduce.reducer.Reducer`),
    which decides, ties and counts included, as it does for ``sweep run --keep``."""

    screen: Callable[[GroupState, np.ndarray], np.ndarray]  # candidates worth merging
    keep: Keep  # what the reducer keeps, over objective columns v0, v1, ...
    distinct: bool = False  # one row per distinct vector kept, with tied counts

    def new(self) -> Reducer:
        """A reducer of one group, in memory (a query's answer never spills)."""
        names = tuple(f"v{i}" for i in range(len(self.keep.columns)))
        schema = store.Schema([], [], [], (), names, pa.float64())
        return Reducer(self.keep, schema, None)


def pareto_reducer(k: int, distinct: bool) -> GroupReducer:
    def screen(state: GroupState, vals: np.ndarray) -> np.ndarray:
        ok = numbers(vals)
        if len(state.rows):
            # duplicates on the front (rows tied in every objective) dominate nothing more
            front = state.vals if k <= 2 else np.unique(state.vals, axis=0)
            ok &= ~dominated_by(front, vals)
        elif len(vals) > 1 << 16:
            # a first large batch: screen with the front of a sample of itself (exact:
            # a dominated row is never on the front), so the exact merge sorts few rows
            sample = vals[:: len(vals) >> 12]
            sample = sample[numbers(sample)]
            sel = pareto_mask(sample)
            ok &= ~dominated_by(sample[sel], vals)
        return ok

    keep = Keep("pareto", tuple(f"v{i}" for i in range(k)), ties=not distinct)
    return GroupReducer(screen, keep, distinct)


def top_reducer(k: int) -> GroupReducer:
    def screen(state: GroupState, vals: np.ndarray) -> np.ndarray:
        if len(state.rows) < k:
            return np.ones(len(vals), dtype=bool)
        kth = np.max(state.vals[:, 0])
        v = np.where(np.isnan(vals[:, 0]), np.inf, vals[:, 0])
        return v < kth  # later rows lose ties: positions only grow during the scan

    return GroupReducer(screen, Keep("top", ("v0",), k))


def absorb(
    state: GroupState, reducer: GroupReducer, vals: np.ndarray, rows: np.ndarray, tied: np.ndarray
) -> None:
    """Feed candidate rows (objectives, dataset positions, counts) to the group's reducer and
    take back what it keeps. A top-k query counts NaN as +inf (docs/queries.md)."""
    if reducer.keep.kind == "top":
        vals = np.where(np.isnan(vals), np.inf, vals)
    n = len(rows)
    found = Survivors(np.zeros((0, n), np.int32), vals.T, np.zeros(n, np.int8), rows, tied)
    state.reducer.add(0, ("", "", ""), rows, found)
    state.vals, ids, counts = state.reducer.held()
    state.rows = ids[:, 1]
    state.tied = counts
