"""Pipeline stages and the envelopes of their sums (docs/model.md §10.4, §16).

The min-max contiguous partition of per-layer (or per-block) costs into ``p``
groups, the cut points of a transformer's blocks, and the upper envelope of
the per-stage lines that lets a kernel take the largest stage's value in a few
operations. :mod:`kernels.network` and :mod:`kernels.transformer` both build
their tables from these; neither imports the other.

Numpy only, no I/O.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from kernels import kinds


def contiguous_sums(cost: np.ndarray) -> np.ndarray:
    """Sorted distinct sums of every contiguous run of ``cost``: the candidates for t*."""
    prefix = np.concatenate([[0.0], np.cumsum(cost)])
    g = len(cost)
    return np.unique((prefix[None, :] - prefix[:, None])[np.triu_indices(g + 1, 1)])


def minmax_partition(cost: np.ndarray, p: int, candidates: np.ndarray | None = None) -> list[int]:
    """Exact min-max contiguous partition of ``cost`` into ``p`` groups (docs/model.md §10.4).

    Finds the smallest largest-group sum t* (binary search over the sums of
    contiguous runs, greedy feasibility check), then builds groups from the
    first layer on, each taking layers while its sum stays <= t* and enough
    layers remain to give every later group at least one. Returns the group
    start indices. Costs are exact integers (FLOPs), so comparisons are exact.
    ``candidates`` (from :func:`contiguous_sums`) may be passed to reuse them.
    """
    g = len(cost)
    if not 1 <= p <= g:
        raise ValueError(f"p={p} outside 1..{g}")
    if candidates is None:
        candidates = contiguous_sums(cost)
    values = [float(c) for c in cost]
    lower = max(max(values), sum(values) / p)

    def fits(limit: float) -> bool:
        count, run = 1, 0.0
        for c in values:
            if run + c > limit:
                count += 1
                if count > p:
                    return False
                run = c
            else:
                run += c
        return True

    lo = int(np.searchsorted(candidates, lower, side="left"))
    hi = len(candidates) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(candidates[mid]):
            hi = mid
        else:
            lo = mid + 1
    best = candidates[lo]
    starts, run = [0], 0.0
    for layer, c in enumerate(values):
        if layer > 0:
            groups_left_after = p - len(starts)  # groups still to open after this one
            if run + c > best or g - layer <= groups_left_after:
                starts.append(layer)
                run = 0.0
        run += c
    assert len(starts) == p, (len(starts), p)
    return starts


def partitions(flops: np.ndarray) -> list[list[int]]:
    """Group starts of the min-max partition of ``flops`` into p = 1..G groups (index p - 1)."""
    candidates = contiguous_sums(flops)
    return [minmax_partition(flops, p, candidates) for p in range(1, len(flops) + 1)]


def block_firsts(names: np.ndarray) -> np.ndarray:
    """Where each attention layer's block begins (docs/model.md §16): at the first norm after
    the residual stream's last write since the previous attention (an ``add``, or the
    ``embedding`` before the first block), the block's first layer in a pre-norm transformer,
    where norms inside the attention (multi-head latent attention's, §18) come after it; without
    such a write, at the last norm since the previous attention; without a norm, at the attention
    itself."""
    attention = np.flatnonzero(names == "attention")
    norms = np.flatnonzero(np.isin(names, kinds.NORMS))
    writes = np.flatnonzero((names == "add") | (names == "embedding"))
    firsts = []
    previous = np.concatenate([[-1], attention])[: len(attention)]
    for before, at in zip(previous, attention, strict=True):
        inside = norms[(norms > before) & (norms < at)]
        wrote = writes[(writes > before) & (writes < at)]
        after = inside[inside > wrote[-1]] if wrote.size else inside[-1:]
        firsts.append(int(after[0]) if after.size else int(inside[-1]) if inside.size else int(at))
    return np.array(firsts, dtype=np.int64)


def block_starts(names: np.ndarray) -> np.ndarray:
    """Where a transformer's blocks may be cut into pipeline stages (docs/model.md §16): where
    each block but the first begins (:func:`block_firsts`). Empty for a network without
    attention."""
    return block_firsts(names)[1:]


class Stages(NamedTuple):
    """The pipeline stages of a network for pp = 1..P (docs/model.md §10.4, §16).

    ``units`` are the layers where each unit a stage cannot split begins (every layer, or each
    block of a transformer); ``parts[pp - 1]`` the units where each of pp stages begins.
    Per-stage sums are sums of per-unit sums (:meth:`per_unit` once, then :meth:`sums` per pp),
    so a table is O(G + P^2) instead of O(G P); FLOPs and element counts are integers, so the
    two orders of summation agree to the last bit.
    """

    units: np.ndarray
    parts: list[list[int]]

    def per_unit(self, v: np.ndarray) -> np.ndarray:
        """Per-layer values summed per unit (along the first axis)."""
        return v if len(self.units) == len(v) else np.add.reduceat(v, self.units, axis=0)

    def sums(self, unit_values: np.ndarray, pp: int) -> np.ndarray:
        """Per-stage sums of :meth:`per_unit` values for pp stages."""
        return np.add.reduceat(unit_values, self.parts[pp - 1], axis=0)

    def layer_starts(self, pp: int) -> list[int]:
        """The layer where each of pp stages begins."""
        return [int(self.units[u]) for u in self.parts[pp - 1]]


def stage_partitions(names: np.ndarray, flops: np.ndarray) -> Stages:
    """The pipeline stages for pp = 1..P, docs/model.md §10.4, §16.

    A network with attention layers is cut only between its blocks (Megatron-LM places whole
    transformer layers on a stage, the embedding with the first, the final layernorm and the
    output layer with the last), P = the number of blocks: L / pp blocks on each stage when pp
    divides the L blocks, as Megatron-LM does, else the min-max partition of the blocks'
    training FLOPs. Any other network is cut between layers, P = G.
    """
    if not (names == "attention").any():
        return Stages(np.arange(len(flops)), partitions(flops))
    units = np.concatenate([[0], block_starts(names)]).astype(np.int64)
    cost = np.add.reduceat(flops, units)
    candidates = contiguous_sums(cost)
    n = len(cost)
    return Stages(
        units,
        [
            list(range(0, n, n // p)) if n % p == 0 else minmax_partition(cost, p, candidates)
            for p in range(1, n + 1)
        ],
    )


def placeable(blocks, pp, vp):
    """Whether Megatron-Core can place ``blocks`` transformer layers on ``pp`` stages of ``vp``
    model chunks each (docs/model.md §16), for numbers or arrays (numpy or JAX), elementwise.

    Every stage needs a block (``pp <= blocks``). Without interleaving (vp = 1) any split can
    be placed: pp dividing the blocks, ``blocks / pp`` each; otherwise with uneven first and last
    stages (``decoder_first_pipeline_num_layers`` and ``..._last_...``), the middle stages
    ``ceil(blocks / pp)`` each (DeepSeek-V3's 61 at pp 16: 3, 14 x 4, 2). Interleaved (vp > 1),
    Megatron-Core's ``pipeline_model_parallel_layout`` lists each chunk's layers, the embedding and
    the loss among them, so every chunk needs one of the ``blocks + 2``: ``pp vp <= blocks + 2``.
    Equal chunks are the default layout (Llama 3.1 405B's 126 blocks at pp 8, vp 8: 128 / 64 = 2
    layers a chunk, counting the embedding and the loss as layers); uneven ones are how
    Megatron-Bridge places DeepSeek-V3's 61 blocks on pp 8 x vp 4 = 32 chunks. In every case the
    fullest stage holds ``ceil(blocks / pp)`` blocks, the pp-stage row of
    :func:`stage_partitions` (min-max of the blocks' FLOPs when pp does not divide them).
    """
    return (pp >= 1) & (vp >= 1) & (pp <= blocks) & ((vp == 1) | (pp * vp <= blocks + 2))


def fullest_stage_blocks(blocks: int, pp: int) -> int:
    """The blocks on the fullest of pp stages as Megatron-LM places them (:func:`placeable`):
    ``ceil(blocks / pp)``, the stage that sets the pace and the memory (docs/model.md §16)."""
    return -(-blocks // pp)


def upper_envelope(slopes: np.ndarray, intercepts: np.ndarray) -> list[int]:
    """Indices of the lines ``a_i x + w_i`` that attain the maximum for some x >= 0, left to right.

    From the line highest at x = 0 (the steepest among ties), each next line is the steeper one
    met first (the steepest, then the first, among those met at the same x).
    """
    a = np.asarray(slopes, dtype=np.float64)
    w = np.asarray(intercepts, dtype=np.float64)
    top = w == w.max()
    cur = int(np.flatnonzero(top & (a == a[top].max()))[0])
    hull, x = [cur], 0.0
    while True:
        steeper = a > a[cur]
        if not steeper.any():
            return hull
        with np.errstate(divide="ignore", invalid="ignore"):
            meet = np.maximum((w[cur] - w) / (a - a[cur]), x)
        meet = np.where(steeper, meet, np.inf)
        first = meet == meet.min()
        best = int(np.flatnonzero(first & (a == a[first].max()))[0])
        hull.append(best)
        cur, x = best, float(meet[best])


def envelope_rows(hulls: list[tuple[list[float], list[float]]]) -> tuple[np.ndarray, np.ndarray]:
    """Zero-padded ``[len(hulls), H]`` slopes and intercepts of each row's envelope."""
    width = max(len(a) for a, _ in hulls)
    slopes = np.zeros((len(hulls), width))
    intercepts = np.zeros((len(hulls), width))
    for p, (a, w) in enumerate(hulls):
        slopes[p, : len(a)] = a
        intercepts[p, : len(w)] = w
    return slopes, intercepts


def decreasing_hulls(rows: list[tuple[np.ndarray, np.ndarray]]) -> list[list[int]]:
    """Per row, the stages whose lines ``total - split z`` form the upper envelope over z >= 0,
    largest total first."""
    return [upper_envelope(-s, t) for t, s in rows]


def envelope(rows: list[tuple[np.ndarray, np.ndarray]], hulls: list[list[int]] | None = None) -> np.ndarray:
    """Each row's envelope lines ``total - split z`` (z >= 0) as ``[P+1, H, 2, ...]``, zero-padded
    (row 0, no stages, is all zero). ``hulls`` picks the lines (default: each row's own
    envelope); a row's totals and splits may carry trailing axes (per-kind vectors)."""
    hulls = decreasing_hulls(rows) if hulls is None else hulls
    picked = [np.stack([t, s], axis=1)[h] for (t, s), h in zip(rows, hulls, strict=True)]
    out = np.zeros((len(picked) + 1, max(len(h) for h in picked), *picked[0].shape[1:]))
    for r, lines in enumerate(picked, start=1):
        out[r, : len(lines)] = lines
    return out


def stack_padded(tables: list[np.ndarray]) -> np.ndarray:
    """Envelope tables of one shape each, zero-padded to the widest, stacked on a new first axis."""
    width = max(t.shape[1] for t in tables)
    pad = lambda t: [(0, 0), (0, width - t.shape[1])] + [(0, 0)] * (t.ndim - 2)  # noqa: E731
    return np.stack([np.pad(t, pad(t)) for t in tables])
