"""Per-network tables of a mixture of experts (docs/model.md §17).

A transformer whose FFN is a mixture of experts (:mod:`sweep.inputs.moe`) has, per MoE block, a
router and two grouped expert GEMMs (kind ``experts``, role ``expert``) on the ``k s`` copies of
its ``s`` tokens that the router dispatches to their ``k`` experts. The expert layers' FLOPs and
activations are in :mod:`kernels.transformer`'s lines, split over tp like every split layer; what
differs is kept here, per stage count pp = 1..P as the largest stage's scalar:

* the expert weights, which tp does not split: each GPU holds ``1 / (ep etp)`` of them;
* the all-to-alls per micro-batch that dispatch the tokens to the experts (before the first
  expert layer of a block) and combine them back (after the last), one each way in the forward
  pass and again in the backward pass, a third time with full recomputation; and their elements
  per sample (each message the ``k s`` copies of the ``h``-wide tokens).

A network without expert layers has zeros throughout, ``experts`` and ``width`` 1 (the rules
of the registry then hold only for ep = etp = 1). Numpy only, no I/O.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from kernels import kinds
from kernels._types import Array
from kernels.partition import Stages


class ExpertTable(NamedTuple):
    """What :mod:`kernels.strategies.moe` reads (module docstring)."""

    #: the experts ep must divide: the gcd of the expert layers' E (1 without experts)
    experts: Array
    #: the widths etp must divide: the gcd of the expert layers' input and output features
    width: Array
    #: the weights a token does not use: each expert layer's ``(1 - k / E)`` of its weights
    inactive: Array
    w: Array  # [P+1] the largest stage's expert weights
    a2a_count: Array  # [3, P+1] all-to-alls per micro-batch on the largest stage, per recompute mode
    a2a_elems: Array  # [3, P+1] their elements per sample, together


def expert_mask(role: np.ndarray) -> np.ndarray:
    """The layers inside a mixture of experts (role ``expert``)."""
    return role == kinds.EXPERT


def expert_table(
    names: np.ndarray, x: np.ndarray, w: np.ndarray, y: np.ndarray, role: np.ndarray, stages: Stages
) -> ExpertTable:
    """The table of one network (module docstring)."""
    embedding = np.flatnonzero(names == "embedding")
    tokens = float(np.prod(x[embedding[0], 1:])) if embedding.size else 0.0
    inside = expert_mask(role)
    gemm = inside & (names == "experts")
    w_elems = np.where(gemm, np.prod(w, axis=1), 0.0)
    before = np.concatenate([[False], inside[:-1]])
    after = np.concatenate([inside[1:], [False]])
    # the dispatch's message is the first expert layer's input, the combine's the last one's output
    dispatch, combine = gemm & ~before, gemm & ~after
    fwd_count = dispatch.astype(float) + combine.astype(float)
    fwd_elems = np.where(dispatch, np.prod(x, axis=1), 0.0) + np.where(combine, np.prod(y, axis=1), 0.0)
    n = len(stages.parts)
    table_w, count, elems = np.zeros(n + 1), np.zeros((3, n + 1)), np.zeros((3, n + 1))
    units = [stages.per_unit(v) for v in (w_elems, fwd_count, fwd_elems)]
    for pp in range(1, n + 1):
        ws, fc, fe = (stages.sums(u, pp) for u in units)
        table_w[pp] = ws.max()
        # forward and backward; full recomputation runs the forward's again
        count[:, pp] = 2.0 * fc.max(), 2.0 * fc.max(), 3.0 * fc.max()
        elems[:, pp] = 2.0 * fe.max(), 2.0 * fe.max(), 3.0 * fe.max()
    e = w[gemm, 2].astype(np.int64)
    widths = np.concatenate([x[gemm, 0], y[gemm, 0]]).astype(np.int64)
    k = np.prod(x[gemm, 1:], axis=1) / tokens if tokens > 0 else e
    return ExpertTable(
        experts=np.float64(np.gcd.reduce(e) if e.size else 1),
        width=np.float64(np.gcd.reduce(widths) if widths.size else 1),
        inactive=np.float64((w_elems[gemm] * (1.0 - k / np.maximum(e, 1))).sum()),
        w=table_w,
        a2a_count=count,
        a2a_elems=elems,
    )
