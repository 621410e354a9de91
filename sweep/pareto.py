"""Exact Pareto fronts (all objectives minimised) and top-k, on numpy arrays.

Dominance: row j dominates row i when it is <= in every objective and < in
at least one. Rows equal in every objective do not dominate each other, so
duplicates on the front all stay. NaN objectives never enter a front.
"""

from __future__ import annotations

import numpy as np


def pareto_mask(objectives: np.ndarray) -> np.ndarray:
    """Boolean mask of the non-dominated rows of ``objectives`` ``[n, k]``.

    Two objectives: sort by (o1, o2) and compare each row with the running
    minimum of o2 over the rows strictly before its group of equal rows,
    O(n log n). Three or more: rows in lexicographic order, each checked
    against the front kept so far (a dominating row sorts earlier, and
    dominance is transitive), in blocks.
    """
    objs = np.asarray(objectives, dtype=np.float64)
    n, k = objs.shape
    if n == 0:
        return np.zeros(0, dtype=bool)
    finite = np.asarray(~np.isnan(objs).any(axis=1), dtype=bool)
    order = np.lexsort(objs[:, ::-1].T)
    order = order[finite[order]]
    s = objs[order]
    if len(s) == 0:
        return np.zeros(n, dtype=bool)
    head = np.ones(len(s), dtype=bool)
    head[1:] = (s[1:] != s[:-1]).any(axis=1)
    head_idx = np.maximum.accumulate(np.where(head, np.arange(len(s)), 0))
    if k == 1:
        keep = s[:, 0] == s[0, 0]
    elif k == 2:
        cm = np.minimum.accumulate(s[:, 1])
        cm_excl = np.concatenate([[np.inf], cm[:-1]])
        keep = cm_excl[head_idx] > s[:, 1]
    else:
        keep_heads = np.zeros(len(s), dtype=bool)
        front = np.empty((0, k))
        for i in np.flatnonzero(head):
            row = s[i]
            if front.size and ((front <= row).all(axis=1) & (front < row).any(axis=1)).any():
                continue
            keep_heads[i] = True
            front = np.vstack([front, row])
        keep = keep_heads[head_idx]
    out = np.zeros(n, dtype=bool)
    out[order[keep]] = True
    return out


def pareto_brute(objectives: np.ndarray) -> np.ndarray:
    """O(n^2) reference for :func:`pareto_mask` (tests)."""
    objs = np.asarray(objectives, dtype=np.float64)
    n = len(objs)
    out = np.zeros(n, dtype=bool)
    for i in range(n):
        if np.isnan(objs[i]).any():
            continue
        dominated = False
        for j in range(n):
            if (
                j != i
                and not np.isnan(objs[j]).any()
                and (objs[j] <= objs[i]).all()
                and (objs[j] < objs[i]).any()
            ):
                dominated = True
                break
        out[i] = not dominated
    return out


def top_k_order(values: np.ndarray, tiebreak: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k smallest ``values``, ties broken by ``tiebreak`` (ascending); NaN last."""
    vals = np.where(np.isnan(values), np.inf, values)
    order = np.lexsort((tiebreak, vals))
    return order[:k]
