"""What the layers of a transformer's blocks keep for the backward pass (docs/model.md §16,
§21): which layers make the blocks, Korthikanti et al.'s count per layer kind, and torchtitan's
per-operation selective recomputation; and what the memory-bound kernels move. Numpy only, no
I/O."""

from __future__ import annotations

import numpy as np

from kernels import kinds
from kernels.partition import block_firsts, block_starts

#: Kinds whose time is their FLOPs (GEMMs); the others are memory-bound (docs/model.md §16,
#: :attr:`kernels.kinds.Kind.memory_bound`).
GEMM_KINDS = tuple(k.name for k in kinds.TABLE if not k.memory_bound)
#: Passes over the attention scores in the forward pass: QK^T writes them, softmax reads and
#: writes them, dropout reads and writes them, the weighted sum reads them.
SCORE_PASSES = 6.0
#: A layer's tensor-parallel role codes (:data:`kernels.kinds.ROLES`).
ROLE_COLUMN, ROLE_ROW, ROLE_CORE = kinds.COLUMN, kinds.ROW, kinds.CORE
ROLE_SPLIT, ROLE_EXPERT = kinds.SPLIT, kinds.EXPERT


def block_mask(names: np.ndarray) -> np.ndarray:
    """The layers of a transformer's blocks (docs/model.md §16): from each block's first layer
    (:func:`kernels.partition.block_firsts`) to the layer before the next block's, the last block as long as the one before it
    (through its last ``add`` when it is the only one)."""
    attention = np.flatnonzero(names == "attention")
    out = np.zeros(len(names), dtype=bool)
    if not attention.size:
        return out
    first = int(block_firsts(names)[0])
    starts = [first, *block_starts(names).tolist()]
    if len(starts) > 1:
        end = starts[-1] + starts[-1] - starts[-2]
    else:
        adds = np.flatnonzero((names == "add") & (np.arange(len(names)) > attention[0]))
        end = int(adds[-1]) + 1 if adds.size else int(attention[0]) + 1
    out[first : min(end, len(names))] = True
    return out


def korthikanti(names: np.ndarray, x: np.ndarray, w: np.ndarray, y: np.ndarray, role: np.ndarray):
    """Activations each layer of a transformer block keeps for its backward pass, per sample, in
    16-bit elements, as Korthikanti et al. 2022 count them (§4.1, Table 2): each kind's
    :attr:`kernels.kinds.Kind.block_kept` and ``block_scores``, split over tp where the layer's
    role splits its input (row-parallel, attention core, split element-wise). A GPT block
    (layernorms, QKV, attention, projection, add, MLP-up, GeLU, MLP-down, add) comes to
    ``s h (34 + 5 a s / h)`` bytes, of which ``s h (24 + 5 a s / h)`` split over tp (the rest,
    10 s h: the layernorms' and column-parallel linears' inputs and the dropout masks,
    replicated), and without the attention core's ``5 a s^2`` (selective recomputation, or a
    fused attention) ``34 s h`` of which ``24 s h`` split. Returns per layer (total, split,
    selective total, selective split)."""
    kept, scores = np.zeros(len(names)), np.zeros(len(names))
    for record in kinds.TABLE:
        rows = names == record.name
        if rows.any() and record.block_kept is not None:
            kept[rows] = record.block_kept(x[rows], w[rows], y[rows])
        if rows.any() and record.block_scores is not None:
            scores[rows] = record.block_scores(x[rows], w[rows], y[rows])
    split = np.isin(role, (ROLE_ROW, ROLE_CORE, ROLE_SPLIT, ROLE_EXPERT))
    total = kept + scores
    return total, np.where(split, total, 0.0), kept, np.where(split, kept, 0.0)


def op_again(names: np.ndarray) -> np.ndarray:
    """The fraction of each layer's forward that torchtitan's per-operation selective
    recomputation runs again in the backward pass (docs/model.md §21): inside the blocks, half
    of each GEMM's (it keeps every other matmul's output) and all of a memory-bound layer's
    (norms, activations, adds); none of the attention core's (it keeps its output), nor of the
    layers outside the blocks (only the blocks are checkpointed)."""
    in_block = block_mask(names)
    gemm = np.isin(names, GEMM_KINDS) & (names != "attention")
    again = np.where(gemm, 0.5, np.where(names == "attention", 0.0, 1.0))
    return np.where(in_block, again, 0.0)


def op_kept(names: np.ndarray, x: np.ndarray, w: np.ndarray, y: np.ndarray, role: np.ndarray, kept):
    """Activations each layer of a block keeps under torchtitan's per-operation selective
    recomputation, per sample, in 16-bit elements, and the part split over tp (docs/model.md
    §21): the block's input (``kept``, full recomputation's), the attention core's output and its
    FP32 log-sum-exp per head and query (``2 a s``), and half of each GEMM's output (every
    other matmul's, split with it where the layer's output is: column-parallel and expert
    layers). 0 for every other layer of a block."""
    y_elems = np.prod(y, axis=1)
    attention = names == "attention"
    gemm = np.isin(names, GEMM_KINDS) & ~attention
    total = (
        kept
        + np.where(attention, y_elems + 2.0 * w[:, 1] * y[:, 1], 0.0)
        + np.where(gemm, y_elems / 2.0, 0.0)
    )
    split_out = attention | (gemm & np.isin(role, (ROLE_COLUMN, ROLE_EXPERT)))
    return total, np.where(split_out, total - kept, 0.0)


def memory_traffic(names, x, y, act, split) -> tuple[np.ndarray, np.ndarray]:
    """Per layer, the elements per sample a memory-bound kernel reads and writes in the forward
    pass (docs/model.md §16), and the part of it split over tp: its input and output (x + y) for
    every kind but the GEMMs, and for attention :data:`SCORE_PASSES` passes over its ``a s^2``
    scores (``act - x - y``). Split where the layer's work is (attention, the element-wise kinds
    between a column- and a row-parallel layer), not for the embedding, whose output is whole."""
    x_elems, y_elems = np.prod(x, axis=1), np.prod(y, axis=1)
    attention = names == "attention"
    scores = np.where(attention, act - x_elems - y_elems, 0.0)
    gemm = np.isin(names, GEMM_KINDS)
    traffic = np.where(gemm, 0.0, x_elems + y_elems + SCORE_PASSES * scores)
    return traffic, traffic * split * (names != "embedding")
