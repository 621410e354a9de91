"""Exact Pareto fronts (all objectives minimised) and top-k, on numpy arrays.

Dominance: row j dominates row i when it is <= in every objective and < in
at least one. Rows equal in every objective do not dominate each other, so
duplicates on the front all stay. NaN objectives never enter a front.
"""

from __future__ import annotations

import numpy as np


def pareto_mask(objectives: np.ndarray) -> np.ndarray:
    """Boolean mask of the non-dominated rows of ``objectives`` ``[n, k]``.

    One objective: the rows equal to the least. Two: sort by (o1, o2) and
    compare each row with the running minimum of o2 over the rows strictly
    before its group of equal rows, O(n log n). Three or more:
    :func:`pareto_mask_blocked`, vectorised in blocks of distinct rows.
    """
    objs = np.asarray(objectives, dtype=np.float64)
    n, k = objs.shape
    if n == 0:
        return np.zeros(0, dtype=bool)
    finite = numbers(objs)
    if k == 2:
        return _pareto_mask_2(objs[:, 0], objs[:, 1], finite)
    if k > 2:
        return pareto_mask_blocked(objs)
    least = np.min(objs[finite, 0]) if finite.any() else np.nan
    return finite & (objs[:, 0] == least)


def numbers(objs: np.ndarray) -> np.ndarray:
    """Rows of ``objs`` ``[n, k]`` with no NaN; a column at a time (``isnan(objs).any(axis=1)``
    reduces over the short axis, several times slower)."""
    out = ~np.isnan(objs[:, 0])
    for j in range(1, objs.shape[1]):
        out &= ~np.isnan(objs[:, j])
    return out


def _pareto_mask_2(a: np.ndarray, b: np.ndarray, finite: np.ndarray) -> np.ndarray:
    """:func:`pareto_mask` of two objectives (see :func:`front_2`)."""
    return front_2(a, b, finite)[0]


def front_2(a: np.ndarray, b: np.ndarray, finite: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The front of the rows (a, b) with ``finite`` (no NaN): its mask, and its distinct
    vectors ``[v, 2]`` by increasing a (then b decreases strictly), with few temporaries
    of the rows' length.

    Sort by (a, b); a group of equal rows survives when nothing sorts before
    it (it holds the lexicographic minimum) or every earlier row has a larger
    b (compared with the running minimum of b before the group). Fronts of
    millions of tied rows are reduced here, so memory matters.
    """
    n = len(a)
    order = np.lexsort((b, a))
    if not finite.all():
        order = order[finite[order]]
    out = np.zeros(n, dtype=bool)
    m = len(order)
    if m == 0:
        return out, np.zeros((0, 2))
    sb = b[order]
    head = np.empty(m, dtype=bool)
    head[0] = True
    sa = a[order]
    np.not_equal(sa[1:], sa[:-1], out=head[1:])
    head[1:] |= sb[1:] != sb[:-1]
    starts = np.flatnonzero(head)
    del head
    before = np.empty(m)  # least b strictly before each row
    before[0] = np.inf
    np.minimum.accumulate(sb[:-1], out=before[1:])
    # a group's verdict is decided at its first row: compare there, then spread over the group
    verdict = (starts == 0) | (before[starts] > sb[starts])
    del before
    out[order[np.repeat(verdict, np.diff(np.append(starts, m)))]] = True
    first = starts[verdict]
    return out, np.stack([sa[first], sb[first]], axis=1).astype(np.float64)


def dominated_2(front: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Rows (a, b) that a vector of ``front`` dominates: ``front`` ``[v, 2]`` is a front's
    distinct vectors by increasing first objective (:func:`front_2`), so its second
    decreases, and of the vectors with a first objective no larger than a row's, the last
    has the least second: only it need be compared. O(n log v). A NaN row is never
    dominated."""
    if not len(front):
        return np.zeros(len(a), dtype=bool)
    j = np.searchsorted(front[:, 0], a, side="right") - 1
    at = np.maximum(j, 0)
    f1, f2 = front[at, 0], front[at, 1]
    return (j >= 0) & ((f2 < b) | ((f2 == b) & (f1 < a)))


def distinct_optima(
    objectives: np.ndarray, key: np.ndarray, tied: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """One row per distinct row of ``objectives`` ``[n, k]`` (numeric equality; rows of a front
    hold no NaN): ``(rows, counts)``, the row of least ``key`` of each group of equal rows, in
    ascending row order, and the sum of ``tied`` over each group. This is how a front of
    distinct optima keeps the configuration of least grid index and counts those it stands for.
    """
    n = len(objectives)
    if n < 2:
        return np.arange(n), np.asarray(tied, np.int64).copy()
    order = np.lexsort((key, *np.asarray(objectives).T[::-1]))
    s = objectives[order]
    head = np.ones(n, dtype=bool)
    head[1:] = (s[1:] != s[:-1]).any(axis=1)
    starts = np.flatnonzero(head)
    counts = np.add.reduceat(np.asarray(tied, np.int64)[order], starts)
    first = order[starts]
    arrival = np.argsort(first)
    return first[arrival], counts[arrival]


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


def dominated_by(front: np.ndarray, objectives: np.ndarray, max_elems: int = 1 << 22) -> np.ndarray:
    """For each row of ``objectives`` ``[n, k]``, whether some row of ``front`` ``[f, k]`` dominates it.

    Same dominance as :func:`pareto_mask` (<= everywhere, < somewhere; equal rows do
    not dominate). Rows holding NaN are reported as not dominated; callers drop them.
    Two objectives: a staircase lookup, O((f + n) log f). Otherwise O(n f k)
    comparisons at worst, in ``max_elems``-sized pieces; with many rows the
    strongest front rows are tried first, one at a time, and settle most of them.
    """
    objs = np.asarray(objectives, dtype=np.float64)
    fr = np.asarray(front, dtype=np.float64)
    n, k = objs.shape
    out = np.zeros(n, dtype=bool)
    if n == 0 or len(fr) == 0:
        return out
    fr = fr[numbers(fr)]
    if len(fr) == 0:
        return out
    if k == 1:
        return objs[:, 0] > fr[:, 0].min()
    if k == 2:
        order = np.lexsort((fr[:, 1], fr[:, 0]))
        f1, cm = fr[order, 0], np.minimum.accumulate(fr[order, 1])
        sure = _surely_dominated_2d(f1, cm, objs) if n > 64 * len(fr) and n > 4096 else out
        rest = np.flatnonzero(~sure)
        r1, r2 = objs[rest, 0], objs[rest, 1]
        lt = np.searchsorted(f1, r1, side="left") - 1  # last front row with f1 < r1
        le = np.searchsorted(f1, r1, side="right") - 1  # last front row with f1 <= r1
        # NaN where no front row qualifies: it compares false (inf would not, against an inf row)
        m_lt = np.where(lt >= 0, cm[np.maximum(lt, 0)], np.nan)
        m_le = np.where(le >= 0, cm[np.maximum(le, 0)], np.nan)
        out = sure.copy()
        out[rest] = (m_lt <= r2) | (m_le < r2)
        return out & numbers(objs)  # NaN compares false, searchsorted puts it last
    sure = _surely_dominated_3d(fr, objs) if k == 3 and n > 64 * len(fr) and n > 4096 else out
    rest = np.flatnonzero(~sure)
    out = sure.copy()
    cols = np.ascontiguousarray(objs[rest].T)
    if len(rest) > 8 * len(fr):
        # many rows: front rows one at a time over contiguous columns, the strongest
        # (smallest sum of scaled objectives) first, dropping the rows already dominated
        with np.errstate(invalid="ignore"):  # an infinite objective gives a NaN key: tried last
            span = np.ptp(fr, axis=0)
            span[~(span > 0)] = 1.0
            strength = ((fr - fr.min(axis=0)) / span).sum(axis=1)
        dead = np.zeros(len(rest), dtype=bool)
        for f in fr[np.argsort(strength, kind="stable")]:
            dead |= _dominates(f[:, None], cols)[0]
            if dead.sum() * 4 > len(dead) or len(dead) == 0:
                out[rest[dead]] = True
                rest, cols, dead = rest[~dead], cols[:, ~dead], np.zeros(int((~dead).sum()), dtype=bool)
        out[rest[dead]] = True
        return out
    step = max(1, max_elems // len(fr))  # few rows: against the whole front, in pieces
    ft = np.ascontiguousarray(fr.T)
    for start in range(0, len(rest), step):
        out[rest[start : start + step]] = _dominates(ft, cols[:, start : start + step]).any(axis=0)
    return out


def _surely_dominated_3d(fr: np.ndarray, objs: np.ndarray, bins: int = 256) -> np.ndarray:
    """Rows a 3-objective front certainly dominates, by a table over a grid of the first two.

    Cell (a, b) holds the lowest third objective among front rows whose first two
    objectives are <= the cell's lower-left corner, so ``table[cell(o1, o2)] < o3``
    proves dominance (strictly better third objective, no worse first two). Never
    claims a row that is not dominated.
    """
    out = np.zeros(len(objs), dtype=bool)
    lo, hi = fr[:, :2].min(axis=0), fr[:, :2].max(axis=0)
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)) and np.all(hi > lo)):
        return out
    width = (hi - lo) / bins
    edges = lo[None, :] + width[None, :] * np.arange(bins + 1)[:, None]  # [bins + 1, 2]
    table = np.full((bins + 1, bins + 1), np.inf)
    cells = []
    for j in range(2):  # a front row goes to the first corner at or above it
        c = np.clip(np.ceil((fr[:, j] - lo[j]) / width[j]), 0, bins).astype(np.int64)
        c += (edges[c, j] < fr[:, j]) & (c < bins)
        cells.append(c)
    keep = edges[cells[0], 0] >= fr[:, 0]
    keep &= edges[cells[1], 1] >= fr[:, 1]
    np.minimum.at(table, (cells[0][keep], cells[1][keep]), fr[keep, 2])
    table = np.minimum.accumulate(np.minimum.accumulate(table, axis=0), axis=1)
    pos = []
    with np.errstate(invalid="ignore"):
        for j in range(2):  # a row reads the last corner at or below it
            q = np.floor(np.clip((objs[:, j] - lo[j]) / width[j], -1, bins))
            q = np.where(q >= 0, q, -1).astype(np.int64)  # NaN rows land at -1
            q -= edges[np.clip(q, 0, bins), j] > objs[:, j]
            pos.append(q)
        ok = (pos[0] >= 0) & (pos[1] >= 0)
        out[ok] = table[pos[0][ok], pos[1][ok]] < objs[ok, 2]
    return out


def _dominates(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``[i, j]``: column i of ``a`` ``[k, m]`` dominates column j of ``b`` ``[k, n]`` (objectives in
    rows; one 2-D comparison per objective, so no reduction over the short objective axis)."""
    le = a[0][:, None] <= b[0][None, :]
    lt = a[0][:, None] < b[0][None, :]
    for j in range(1, len(a)):
        le &= a[j][:, None] <= b[j][None, :]
        lt |= a[j][:, None] < b[j][None, :]
    return le & lt


def _surely_dominated_2d(f1: np.ndarray, cm: np.ndarray, objs: np.ndarray, bins: int = 4096) -> np.ndarray:
    """Rows a 2-objective front certainly dominates, by a uniform-bin table of its staircase.

    ``f1`` is the front's first objective ascending and ``cm`` the running
    minimum of its second. Bin b holds the lowest o2 among front rows with o1
    <= the bin's left edge, so ``table[bin(o1)] < o2`` proves dominance. Most
    rows of a large batch lie far above the staircase and are settled here
    with arithmetic and a gather from a small table; the rest need the exact
    search. Never claims a row that is not dominated.
    """
    out = np.zeros(len(objs), dtype=bool)
    lo, hi = f1[0], f1[-1]
    if not (np.isfinite(lo) and np.isfinite(hi) and hi > lo):
        return out
    width = (hi - lo) / bins
    edges = lo + width * np.arange(bins + 1)
    last = np.searchsorted(f1, edges, side="right") - 1
    table = np.where(last >= 0, cm[np.maximum(last, 0)], np.inf)
    with np.errstate(invalid="ignore"):
        pos = np.floor(np.clip((objs[:, 0] - lo) / width, -1, bins))
        pos = np.where(pos >= 0, pos, -1).astype(np.int64)  # NaN rows land at -1
        pos -= edges[np.clip(pos, 0, bins)] > objs[:, 0]  # rounding: keep edge <= o1
        return (pos >= 0) & (table[np.clip(pos, 0, bins)] < objs[:, 1])


def pareto_mask_blocked(objectives: np.ndarray, block: int = 512) -> np.ndarray:
    """:func:`pareto_mask` for any number of objectives, vectorised in blocks (same result).

    Distinct rows in lexicographic order (a dominating row always sorts
    earlier), taken ``block`` at a time: drop those the front so far
    dominates, then those another row of the block dominates, and add the
    rest to the front; duplicates of a front row stay. O(n log n + n f k)
    for a front of f rows; two objectives go to :func:`pareto_mask`'s
    O(n log n) sweep.
    """
    objs = np.asarray(objectives, dtype=np.float64)
    n, k = objs.shape
    if k <= 2 or n == 0:  # pareto_mask's own cases (it sends three or more here)
        return pareto_mask(objs)
    finite = numbers(objs)
    order = np.lexsort(objs[:, ::-1].T)
    order = order[finite[order]]
    s = objs[order]
    out = np.zeros(n, dtype=bool)
    if len(s) == 0:
        return out
    head = np.ones(len(s), dtype=bool)
    head[1:] = (s[1:] != s[:-1]).any(axis=1)
    heads = np.flatnonzero(head)
    u = s[heads]
    keep_u = np.zeros(len(u), dtype=bool)
    front = np.empty((0, k))
    for start in range(0, len(u), block):
        blk = u[start : start + block]
        alive = np.flatnonzero(~dominated_by(front, blk))
        cand = np.ascontiguousarray(blk[alive].T)
        good = alive[~_dominates(cand, cand).any(axis=0)]  # [j, i]: row j dominates row i
        keep_u[start + good] = True
        front = np.concatenate([front, blk[good]])
    head_idx = np.maximum.accumulate(np.where(head, np.arange(len(s)), 0))
    keep = keep_u[np.searchsorted(heads, head_idx)]
    out[order[keep]] = True
    return out
