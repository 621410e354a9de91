"""Per-network tables of the data+tensor+pipeline strategy (docs/model.md §16).

Megatron-style tensor parallelism splits some layers' work over ``tp`` GPUs and
replicates the rest. Which is which follows from the layer list alone, read
front to back with one flag, *split*, that says whether the activations
flowing between layers are divided over the ``tp`` group:

* ``linear`` reading replicated activations is column-parallel (the filter
  split): its FLOPs and weights are divided by tp, its output is split, and
  its input's gradient is allreduced in the backward pass;
* ``linear`` reading split activations is row-parallel (the channel split):
  FLOPs and weights divided by tp, its output allreduced in the forward pass
  and replicated after it;
* ``attention`` splits its heads (FLOPs, scores) and keeps the flag;
* ``embedding`` splits its table over the vocabulary and allreduces its
  output in the forward pass;
* element-wise kinds (gelu, relu, dropout) follow the flag; every other kind
  (layernorm, add, conv, fc, ...) is replicated and replicates the flag.

On GPT this is Megatron's block: column QKV, split attention, row output
projection, column MLP-up, split GeLU, row MLP-down: two allreduces forward and
two backward per block. Per pipeline stage (the min-max partition of
:func:`kernels.partition.stage_partitions`, one per pp) the tables hold each quantity as
lines ``total_i - split_i z`` in ``z = 1 - 1/tp`` (the part of the split work
that tp removes); a kernel takes the maximum over the few lines of their upper
envelope, so an evaluation is O(H) for any tp, like the pipeline's memory bound.

Numpy only, no I/O.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from kernels._types import Array
from kernels.partition import Stages, block_starts, decreasing_hulls, envelope, stack_padded
from kernels.strategies.registry import RECOMPUTE  # noqa: F401  (the ``recompute`` axis's codes, §16)

NONE, SELECTIVE, FULL = 0, 1, 2


class TransformerTable(NamedTuple):
    """What :func:`kernels.strategies.megatron.data_tensor_pipeline` reads, per recomputation
    mode r (:data:`RECOMPUTE`) and stage count pp, packed so that one configuration reads a
    few rows.

    Per-sample quantities of the largest stage of the pp-stage partition, as the upper
    envelope of lines ``total - split z`` (last axis: total, split), zero-padded: training
    FLOPs (selective adds the attention core's forward, full is 4/3 of none), activations
    kept per micro-batch in flight (x+y and attention scores; selective without the
    attention layers'; full the block inputs, one line), weights. ``misc[r, pp]`` holds the
    tensor-parallel allreduces per micro-batch, their elements per sample, the output of
    the partition's largest stage boundary (the pipeline table's), for full
    recomputation the total and split activations of one block (recomputed at a time), the
    operations launched per micro-batch, the memory-bound kernels' traffic per sample (total,
    split) and the attention scores' part of it (all split over tp), which a fused attention
    does not move.
    """

    heads: Array  # attention heads tp must divide (gcd over attention layers; 1 if none)
    flops: Array  # [3, P+1, H, 2]
    #: the per-kind FLOPs and |x|+|y| of each line of ``flops`` (its stage), for the roofline
    flops_kind: Array  # [3, P+1, H, 2, KINDS]
    traffic_kind: Array  # [3, P+1, H, 2, KINDS]
    act: Array  # [3, P+1, H, 2]
    w: Array  # [P+1, H, 2]
    misc: Array  # [3, P+1, 10]
    #: the training FLOPs of each line of ``flops`` by GEMM class, and each class's shape
    #: (:func:`gemm_classes`), for the GEMMs' time by shape (docs/model.md §16)
    gemm_flops: Array  # [3, P+1, H, 2, C]
    gemm_shape: Array  # [C, 4]: role, then (C, F, s) of a linear or (h, a, s) of an attention core


#: Columns of :attr:`TransformerTable.misc`.
(
    AR_COUNT,
    AR_ELEMS,
    Y_BOUNDARY,
    WORK_TOTAL,
    WORK_SPLIT,
    OPS,
    TRAFFIC_TOTAL,
    TRAFFIC_SPLIT,
    SCORES,
    SCORES_SPLIT,
) = range(10)
#: Kinds whose time is their FLOPs (GEMMs); the others are memory-bound (docs/model.md §16).
GEMM_KINDS = ("linear", "conv", "fc")
#: Roles of a GEMM class (docs/model.md §16): a column-parallel linear (output features split over
#: tp), a row-parallel linear (input features split), an attention core (heads split).
COLUMN, ROW, CORE = 0, 1, 2
#: Passes over the attention scores in the forward pass: QK^T writes them, softmax reads and
#: writes them, dropout reads and writes them, the weighted sum reads them.
SCORE_PASSES = 6.0

#: Operations (GPU kernels, each one framework call) a layer of each kind launches per micro-batch
#: in the forward and in the backward pass, as Megatron-LM's GPT layer does (docs/model.md §16):
#: a fused layernorm (apex: one kernel forward, input and weight gradients backward); a linear
#: layer one GEMM forward, the data- and weight-gradient GEMMs backward (bias adds are fused into
#: the element-wise kernels); the attention core QK^T (baddbmm), fused scale-mask-softmax,
#: dropout, the weighted sum (bmm) and the context permute, each with its backward (two GEMMs
#: for each batched product); a residual add is the fused bias-dropout-add, bias-gelu one fused
#: kernel, each with its gradient and the bias' gradient backward; the embedding the vocabulary-
#: parallel lookup (mask, lookup, zero the foreign rows), the position lookup and their sum.
#: Kinds not listed launch one kernel each way.
OPS_PER_KIND: dict[str, tuple[int, int]] = {
    "layernorm": (1, 2),
    "linear": (1, 2),
    "attention": (5, 7),
    "add": (1, 2),
    "gelu": (1, 2),
    "embedding": (4, 3),
}


class _Layers(NamedTuple):
    split: np.ndarray  # FLOPs divided by tp
    w_split: np.ndarray
    act_split: np.ndarray
    ar_fwd: np.ndarray  # elements allreduced in the forward pass, per sample
    ar_bwd: np.ndarray
    kept: np.ndarray  # block input kept by full recomputation
    row: np.ndarray  # 1 for a row-parallel linear


def tensor_roles(names: np.ndarray, x: np.ndarray, w: np.ndarray, y: np.ndarray, act: np.ndarray) -> _Layers:
    """Per layer: the tensor-parallel split of FLOPs, weights, activations and the allreduces
    (rules in the module docstring)."""
    g = len(names)
    x_elems, y_elems = np.prod(x, axis=1), np.prod(y, axis=1)
    w_elems = np.prod(w, axis=1)
    out = _Layers(*(np.zeros(g) for _ in range(7)))
    state = False  # activations split over tp
    last_norm = -1
    for i, kind in enumerate(names):
        if kind == "linear":
            out.split[i], out.w_split[i] = 1.0, w_elems[i]
            if state:  # row-parallel
                out.row[i] = 1.0
                out.act_split[i] = x_elems[i]
                out.ar_fwd[i] = y_elems[i]
            else:  # column-parallel
                out.act_split[i] = y_elems[i]
                out.ar_bwd[i] = x_elems[i]
            state = not state
        elif kind == "attention":
            out.split[i], out.act_split[i] = 1.0, act[i]
            state = True
            if last_norm >= 0:
                out.kept[last_norm] = x_elems[last_norm]
        elif kind == "embedding":
            out.split[i], out.w_split[i] = 1.0, w_elems[i]
            out.ar_fwd[i] = y_elems[i]
            state = False
        elif kind in ("gelu", "relu", "dropout"):
            out.split[i] = 1.0 if state else 0.0
            out.act_split[i] = act[i] if state else 0.0
        else:
            if kind == "layernorm":
                last_norm = i
            state = False
    return out


def gemm_classes(names: np.ndarray, x: np.ndarray, w: np.ndarray, y: np.ndarray, row: np.ndarray):
    """Each layer's GEMM class (-1: none) and the classes' shapes ``[C, 4]`` (docs/model.md §16):
    a linear ``[C, s] -> [F, s]`` is (COLUMN or ROW, C, F, s), an attention core of ``a`` heads
    over ``h`` features is (CORE, h, a, s); layers of one shape share a class. A network without
    GEMMs has one empty class (role COLUMN, shape 1 x 1 x 1, no FLOPs)."""
    seq = np.prod(y[:, 1:], axis=1)
    linear, attention = names == "linear", names == "attention"
    shape = np.stack(
        [
            np.where(attention, CORE, np.where(row > 0, ROW, COLUMN)),
            np.where(attention, y[:, 0], x[:, 0]),
            np.where(attention, w[:, 1], y[:, 0]),
            seq,
        ],
        axis=1,
    )
    gemm = linear | attention
    if not gemm.any():
        return np.full(len(names), -1), np.array([[COLUMN, 1.0, 1.0, 1.0]])
    shapes, index = np.unique(shape[gemm], axis=0, return_inverse=True)
    cls = np.full(len(names), -1)
    cls[gemm] = index.ravel()
    return cls, shapes


def block_mask(names: np.ndarray) -> np.ndarray:
    """The layers of a transformer's blocks (docs/model.md §16): from each block's first layer
    (:func:`kernels.partition.block_starts`; the first block's at the last layernorm before its
    attention) to the layer before the next block's, the last block as long as the one before it
    (through its last ``add`` when it is the only one)."""
    attention = np.flatnonzero(names == "attention")
    out = np.zeros(len(names), dtype=bool)
    if not attention.size:
        return out
    norms = np.flatnonzero((names == "layernorm") & (np.arange(len(names)) < attention[0]))
    first = int(norms[-1]) if norms.size else int(attention[0])
    starts = [first, *block_starts(names).tolist()]
    if len(starts) > 1:
        end = starts[-1] + starts[-1] - starts[-2]
    else:
        adds = np.flatnonzero((names == "add") & (np.arange(len(names)) > attention[0]))
        end = int(adds[-1]) + 1 if adds.size else int(attention[0]) + 1
    out[first : min(end, len(names))] = True
    return out


def korthikanti(names: np.ndarray, y: np.ndarray, w: np.ndarray):
    """Activations a transformer block keeps for its backward pass, per sample, in 16-bit elements
    at its attention layer (0 at its other layers), as Korthikanti et al. 2022 count them (§4.1,
    Table 2): ``s h (34 + 5 a s / h)`` bytes, of which ``s h (24 + 5 a s / h)`` split over tp
    (the rest, 10 s h: the two layernorms' inputs and the dropout masks, replicated), and without
    the attention core's ``5 a s^2`` (selective recomputation, or a fused attention) ``34 s h`` of
    which ``24 s h`` split. Returns (total, split, selective total, selective split)."""
    attention = names == "attention"
    h, a, seq = y[:, 0], w[:, 1], np.prod(y[:, 1:], axis=1)
    core = np.where(attention, 5.0 * a * seq * seq / 2.0, 0.0)
    rest, rest_split = (
        np.where(attention, 34.0 * seq * h / 2.0, 0.0),
        np.where(attention, 24.0 * seq * h / 2.0, 0.0),
    )
    return rest + core, rest_split + core, rest, rest_split


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


def transformer_table(
    names: np.ndarray,
    x: np.ndarray,
    w: np.ndarray,
    y: np.ndarray,
    flops: np.ndarray,
    act: np.ndarray,
    stages: Stages,
    fk: np.ndarray,
    tk: np.ndarray,
) -> TransformerTable:
    """The tables of one network (docs/model.md §16) for pp = 1..P stages of ``stages``.

    ``flops`` are training FLOPs per sample and ``act`` non-in-place activations
    per layer, ``fk`` and ``tk`` each layer's FLOPs and ``|x|+|y|`` in the column of its
    kind (``[G, KINDS]``), as :func:`kernels.network.build_net` computes them. Row 1 (one
    stage) uses the network's plain sums, as the data strategy does, and every
    row's totals are the same sums the pipeline table takes, so the strategies
    that coincide agree to the last bit (docs/model.md §16).
    """
    roles = tensor_roles(names, x, w, y, act)
    in_block = block_mask(names)
    kt, ks, kt_sel, ks_sel = korthikanti(names, y, w)
    attention = names == "attention"
    w_elems = np.prod(w, axis=1)
    y_elems = np.prod(y, axis=1)
    attn_fwd = np.where(attention, flops / 3.0, 0.0)
    split_flops = flops * roles.split
    blocks = max(int(attention.sum()), 1)
    # one block's activations while full recomputation rebuilds it (Korthikanti et al.'s count)
    work = (kt.sum() / blocks, ks.sum() / blocks) if attention.any() else (act.sum(), roles.act_split.sum())

    rows: dict[str, list] = {
        k: []
        for k in (
            "flops",
            "flops_sel",
            "w",
            "act",
            "act_sel",
            "kept",
            "fk",
            "fk_sel",
            "tk",
            "tk_sel",
            "gk",
            "gk_sel",
        )
    }
    split = roles.split[:, None]
    misc = np.zeros((3, len(stages.parts) + 1, 10))
    traffic, traffic_split = memory_traffic(names, x, y, act, roles.split)
    fwd_ops, bwd_ops = (np.array([OPS_PER_KIND.get(k, (1, 1))[j] for k in names], float) for j in (0, 1))
    layer = {
        "f": flops,
        "fs": split_flops,
        "attn_fwd": attn_fwd,
        "a": np.where(in_block, kt, act),
        "asp": np.where(in_block, ks, roles.act_split),
        "a_sel": np.where(in_block, kt_sel, act),
        "asp_sel": np.where(in_block, ks_sel, roles.act_split),
        "fk": fk,
        "fks": fk * split,
        "tk": tk,
        "tks": tk * split,
        "afk": fk * attention[:, None] / 3.0,
        "atk": tk * attention[:, None] / 3.0,
        "w": w_elems,
        "ws": roles.w_split,
        "kept": roles.kept,
        "fc": (roles.ar_fwd > 0).astype(float),
        "bc": (roles.ar_bwd > 0).astype(float),
        "fe": roles.ar_fwd,
        "be": roles.ar_bwd,
        "ops": fwd_ops + bwd_ops,
        "ops_sel": fwd_ops * attention,
        "ops_full": fwd_ops,
    }
    # memory-bound traffic: forward once and backward twice; recomputation the forward again
    # the attention scores' part of it (what a fused attention never moves), all split over tp
    scores = SCORE_PASSES * np.where(attention, act - np.prod(x, axis=1) - y_elems, 0.0)
    for mode, again in enumerate((0.0 * traffic, traffic * attention, traffic)):
        layer[f"c{mode}"] = 3.0 * traffic + again
        layer[f"cs{mode}"] = 3.0 * traffic_split + again * (traffic_split > 0)
        layer[f"sc{mode}"] = (3.0 + (mode > 0)) * scores
    cls, shapes = gemm_classes(names, x, w, y, roles.row)
    gk = np.zeros((len(names), len(shapes)))
    gk[cls >= 0, cls[cls >= 0]] = flops[cls >= 0]
    layer |= {"gk": gk, "gks": gk * split, "agk": gk * attention[:, None] / 3.0}
    unit = {k: stages.per_unit(v) for k, v in layer.items()}
    for pp in range(1, len(stages.parts) + 1):
        # one stage: the network's plain sums, as the data strategy takes them
        s = lambda k, pp=pp: layer[k].sum(axis=0, keepdims=True) if pp == 1 else stages.sums(unit[k], pp)  # noqa: E731
        f, fs, afwd = s("f"), s("fs"), s("attn_fwd")
        a, asp = s("a"), s("asp")
        rows["flops"].append((f, fs))
        rows["flops_sel"].append((f + afwd, fs + afwd))
        kinds = {k: s(k) for k in ("fk", "fks", "tk", "tks", "afk", "atk")}
        rows["fk"].append((kinds["fk"], kinds["fks"]))
        rows["fk_sel"].append((kinds["fk"] + kinds["afk"], kinds["fks"] + kinds["afk"]))
        rows["tk"].append((kinds["tk"], kinds["tks"]))
        rows["tk_sel"].append((kinds["tk"] + kinds["atk"], kinds["tks"] + kinds["atk"]))
        g, gs, ag = s("gk"), s("gks"), s("agk")
        rows["gk"].append((g, gs))
        rows["gk_sel"].append((g + ag, gs + ag))
        rows["w"].append((s("w"), s("ws")))
        rows["act"].append((a, asp))
        rows["act_sel"].append((s("a_sel"), s("asp_sel")))
        rows["kept"].append((np.array([s("kept").max()]), np.zeros(1)))
        fc, bc, fe, be = s("fc"), s("bc"), s("fe"), s("be")
        # the largest stage boundary's output, as the pipeline table
        misc[:, pp, Y_BOUNDARY] = max((y_elems[hi - 1] for hi in stages.layer_starts(pp)[1:]), default=0.0)
        misc[:2, pp, AR_COUNT], misc[:2, pp, AR_ELEMS] = (fc + bc).max(), (fe + be).max()
        misc[FULL, pp, AR_COUNT], misc[FULL, pp, AR_ELEMS] = (2 * fc + bc).max(), (2 * fe + be).max()
        misc[FULL, pp, WORK_TOTAL], misc[FULL, pp, WORK_SPLIT] = work
        # per micro-batch: forward and backward, full recomputation a second forward, selective
        # the attention cores' forward again
        ops = s("ops")
        misc[:, pp, OPS] = ops.max(), (ops + s("ops_sel")).max(), (ops + s("ops_full")).max()
        for mode in range(3):
            misc[mode, pp, TRAFFIC_TOTAL] = s(f"c{mode}").max()
            misc[mode, pp, TRAFFIC_SPLIT] = s(f"cs{mode}").max()
            misc[mode, pp, SCORES] = misc[mode, pp, SCORES_SPLIT] = s(f"sc{mode}").max()
    heads = w[attention, 1].astype(np.int64)
    hulls, sel = decreasing_hulls(rows["flops"]), decreasing_hulls(rows["flops_sel"])
    plain = envelope(rows["flops"], hulls)
    fk_plain, tk_plain = envelope(rows["fk"], hulls), envelope(rows["tk"], hulls)
    gk_plain = envelope(rows["gk"], hulls)
    return TransformerTable(
        heads=np.float64(np.gcd.reduce(heads) if heads.size else 1),
        flops=stack_padded([plain, envelope(rows["flops_sel"], sel), plain * (4.0 / 3.0)]),
        flops_kind=stack_padded([fk_plain, envelope(rows["fk_sel"], sel), fk_plain * (4.0 / 3.0)]),
        traffic_kind=stack_padded([tk_plain, envelope(rows["tk_sel"], sel), tk_plain * (4.0 / 3.0)]),
        act=stack_padded([envelope(rows["act"]), envelope(rows["act_sel"]), envelope(rows["kept"])]),
        w=envelope(rows["w"]),
        misc=misc,
        gemm_flops=stack_padded([gk_plain, envelope(rows["gk_sel"], sel), gk_plain * (4.0 / 3.0)]),
        gemm_shape=shapes.astype(np.float64),
    )
