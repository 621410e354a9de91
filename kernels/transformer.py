"""Per-network tables of the data+tensor+pipeline strategy (docs/model.md §16).

Megatron-style tensor parallelism splits some layers' work over ``tp`` GPUs and
replicates the rest, by each layer's role (:data:`kernels.kinds.ROLES`, one code per layer
in ``LayerArrays.role``, as a block builder or a model file states it):

* a column-parallel ``linear`` (the filter split): its FLOPs and weights are divided by tp,
  its output is split, and its input's gradient is allreduced in the backward pass;
* a row-parallel ``linear`` (the channel split): FLOPs and weights divided by tp, its output
  allreduced in the forward pass and replicated after it;
* an attention core splits its heads (FLOPs, scores);
* a vocabulary-parallel ``embedding`` splits its table and allreduces its output in the
  forward pass;
* a split element-wise layer (GeLU between a column- and a row-parallel linear) divides its
  work and activations; a replicated one (layernorm, add, conv, fc, ...) is whole on every rank.

A layer list that states no roles gets them from :func:`derive_roles`: read front to back
with one flag, *split*, that says whether the activations flowing between layers are
divided over the ``tp`` group, a linear on whole activations is column-parallel and one on
split activations row-parallel (each toggles the flag), attention sets the flag, element-wise
kinds follow it, every other kind clears it.

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

from kernels import kinds
from kernels._types import Array
from kernels.activations import (
    SCORE_PASSES,
    block_mask,
    korthikanti,
    memory_traffic,
    op_again,
    op_kept,
)
from kernels.experts import ExpertTable, expert_table
from kernels.partition import (
    Stages,
    block_firsts,
    decreasing_hulls,
    envelope,
    stack_padded,
)
from kernels.strategies.registry import RECOMPUTE  # noqa: F401  (the ``recompute`` axis's codes, §16)

#: The tables' recomputation modes: the ``recompute`` axis's codes, and OP, selective recomputation
#: under torchtitan's per-operation policy (machine ``selective_recompute``, docs/model.md §21).
NONE, SELECTIVE, FULL, OP = 0, 1, 2, 3
MODES = 4


class StageMisc(NamedTuple):
    """Scalars per recomputation mode r and stage count pp (each ``[MODES, P+1]``) of the largest
    stage, by term (docs/model.md §16): the tensor-parallel allreduces per micro-batch and their
    elements per sample; the pipeline send, the output of the partition's largest stage boundary
    (the pipeline table's); for full recomputation the total and split activations of one block
    (recomputed at a time; under OP what it does not keep); the host's operations launched per micro-batch; the memory-bound
    kernels' traffic per sample (total, split) and the attention scores' part of it (all split
    over tp), which a fused attention does not move."""

    ar_count: Array
    ar_elems: Array
    y_boundary: Array
    work_total: Array
    work_split: Array
    ops: Array
    traffic_total: Array
    traffic_split: Array
    scores: Array
    scores_split: Array


class TransformerTable(NamedTuple):
    """What :func:`kernels.strategies.megatron.data_tensor_pipeline` reads, per recomputation
    mode r (:data:`RECOMPUTE`) and stage count pp, packed so that one configuration reads a
    few rows.

    Per-sample quantities of the largest stage of the pp-stage partition, as the upper
    envelope of lines ``total - split z`` (last axis: total, split), zero-padded: training
    FLOPs (selective adds the attention core's forward, full is 4/3 of none, OP the forward of
    half the GEMMs and of the memory-bound kinds inside the blocks), activations kept per
    micro-batch in flight (x+y and attention scores; selective without the attention layers';
    full the block inputs and the layers' outside the blocks; OP :func:`op_kept`'s), weights; ``misc`` the scalars of
    :class:`StageMisc`.
    """

    heads: Array  # key/value heads tp must divide (gcd over attention layers; 1 if none)
    flops: Array  # [MODES, P+1, H, 2]
    #: the per-kind FLOPs and |x|+|y| of each line of ``flops`` (its stage), for the roofline
    flops_kind: Array  # [MODES, P+1, H, 2, KINDS]
    traffic_kind: Array  # [MODES, P+1, H, 2, KINDS]
    act: Array  # [MODES, P+1, H, 2]
    w: Array  # [P+1, H, 2]
    misc: StageMisc  # each [MODES, P+1]
    #: the training FLOPs of each line of ``flops`` by GEMM class, and each class's shape
    #: (:func:`gemm_classes`), for the GEMMs' time by shape (docs/model.md §16)
    gemm_flops: Array  # [MODES, P+1, H, 2, C]
    #: role, then (C, F, s, C, s) of a linear or (h, a, s, a d_qk, keys) of an attention core
    gemm_shape: Array  # [C, 6]
    #: the first stage's line of ``act`` (total, split), which holds the most micro-batches in
    #: flight under 1F1B (docs/model.md §16)
    act_first: Array  # [MODES, P+1, 2]
    #: a mixture of experts' expert weights and all-to-alls (docs/model.md §17; zeros when dense)
    moe: ExpertTable
    #: the logits per sample: the last layer's output elements when it is a linear (the output
    #: layer the loss reads, vocabulary-parallel over tp), else 0 (docs/model.md §20)
    logits: Array = 0.0


#: Roles of a GEMM class (docs/model.md §16): a column-parallel linear (output features split over
#: tp), a row-parallel linear (input features split), an attention core (heads split), a grouped
#: expert GEMM (its tokens split over tp, its experts over ep, its features over etp; §17).
COLUMN, ROW, CORE, EXPERT = 0, 1, 2, 3
#: A layer's tensor-parallel role codes (:data:`kernels.kinds.ROLES`; not the GEMM classes' above).
ROLE_REPLICATED, ROLE_COLUMN, ROLE_ROW = kinds.REPLICATED, kinds.COLUMN, kinds.ROW
ROLE_CORE, ROLE_VOCAB, ROLE_SPLIT, ROLE_EXPERT = kinds.CORE, kinds.VOCAB, kinds.SPLIT, kinds.EXPERT

#: Operations (GPU kernels, each one framework call) a layer of each kind launches per micro-batch
#: in the forward and in the backward pass, as Megatron-LM's GPT layer does (docs/model.md §16):
#: a fused layernorm (apex: one kernel forward, input and weight gradients backward); a linear
#: layer one GEMM forward, the data- and weight-gradient GEMMs backward (bias adds are fused into
#: the element-wise kernels); the attention core QK^T (baddbmm), fused scale-mask-softmax,
#: dropout, the weighted sum (bmm) and the context permute, each with its backward (two GEMMs
#: for each batched product); a residual add is the fused bias-dropout-add, bias-gelu one fused
#: kernel, each with its gradient and the bias' gradient backward; the embedding the vocabulary-
#: parallel lookup (mask, lookup, zero the foreign rows), the position lookup and their sum.
#: Other kinds launch one kernel each way (:attr:`kernels.kinds.Kind.ops`).
OPS_PER_KIND: dict[str, tuple[int, int]] = {k.name: k.ops for k in kinds.TABLE}


class _Layers(NamedTuple):
    split: np.ndarray  # FLOPs divided by tp
    w_split: np.ndarray
    act_split: np.ndarray
    ar_fwd: np.ndarray  # elements allreduced in the forward pass, per sample
    ar_bwd: np.ndarray
    kept: np.ndarray  # block input kept by full recomputation
    row: np.ndarray  # 1 for a row-parallel linear


def derive_roles(names: np.ndarray) -> np.ndarray:
    """Each layer's tensor-parallel role code (:data:`kernels.kinds.ROLES`) by the rule of the
    module docstring, for a layer list that states none (a model file written by hand): read
    front to back with the *split* flag, a linear is column-parallel on whole activations and
    row-parallel on split ones (toggling the flag), an element-wise "split" kind is split only on
    split activations, attention splits the flag on, the embedding and every replicated kind
    off. A SwiGLU gate beside its up projection would be misread: block builders state roles."""
    out = np.zeros(len(names), dtype=np.int64)
    state = False  # activations split over tp
    for i, name in enumerate(names):
        role = kinds.BY_NAME[str(name)].role
        if role == "column":
            out[i] = ROLE_ROW if state else ROLE_COLUMN
            state = not state
        elif role == "split":
            out[i] = ROLE_SPLIT if state else ROLE_REPLICATED
        else:
            out[i] = kinds.ROLES.index(role)
            state = role == "core"
    return out


def tensor_roles(
    names: np.ndarray, x: np.ndarray, w: np.ndarray, y: np.ndarray, act: np.ndarray, role: np.ndarray
) -> _Layers:
    """Per layer: the tensor-parallel split of FLOPs, weights, activations and the allreduces of
    its role code (:data:`kernels.kinds.ROLES`, module docstring): column- and row-parallel
    linears, attention cores and the vocabulary-parallel embedding divide their work by tp,
    a split element-wise layer its work and activations; full recomputation keeps the input of
    the norm where each attention core's block begins (:func:`kernels.partition.block_firsts`:
    the block's input)."""
    x_elems, y_elems = np.prod(x, axis=1), np.prod(y, axis=1)
    w_elems = np.prod(w, axis=1)
    out = _Layers(*(np.zeros(len(names)) for _ in range(7)))
    first = dict(
        zip(np.flatnonzero(names == "attention").tolist(), block_firsts(names).tolist(), strict=True)
    )
    for i, r in enumerate(role):
        if r == ROLE_COLUMN:
            out.split[i], out.w_split[i] = 1.0, w_elems[i]
            out.act_split[i] = y_elems[i]
            out.ar_bwd[i] = x_elems[i]
        elif r == ROLE_ROW:
            out.split[i], out.w_split[i], out.row[i] = 1.0, w_elems[i], 1.0
            out.act_split[i] = x_elems[i]
            out.ar_fwd[i] = y_elems[i]
        elif r == ROLE_CORE:
            out.split[i], out.act_split[i] = 1.0, act[i]
            if names[first[i]] in kinds.NORMS:
                out.kept[first[i]] = x_elems[first[i]]
        elif r == ROLE_VOCAB:
            out.split[i], out.w_split[i] = 1.0, w_elems[i]
            out.ar_fwd[i] = y_elems[i]
        elif r in (ROLE_SPLIT, ROLE_EXPERT):
            # an expert layer's weights are split over ep x etp, not tp (kernels.experts)
            out.split[i], out.act_split[i] = 1.0, act[i]
    return out


def gemm_classes(names: np.ndarray, x: np.ndarray, w: np.ndarray, y: np.ndarray, row: np.ndarray):
    """Each layer's GEMM class (-1: none) and the classes' shapes ``[C, 6]`` (docs/model.md §16):
    a linear ``[C, s] -> [F, s]`` is (COLUMN or ROW, C, F, s, C, s), an attention core of ``a``
    heads over ``h = a d_v`` value features is (CORE, h, a, s, a d_qk, k) with ``a d_qk`` its
    query/key features and ``k`` the keys each query attends to (:func:`kernels.kinds.
    attention_widths`; h and s without latent widths or a window); layers of one shape share a
    class. A network without GEMMs has one empty class (role COLUMN, shape 1 x 1 x 1, no FLOPs)."""
    seq = np.prod(y[:, 1:], axis=1)
    linear, attention, experts = names == "linear", names == "attention", names == "experts"
    # an expert GEMM's rows per expert and sample, k s / E (its tokens' copies spread over E)
    seq = np.where(experts, seq / np.where(experts, w[:, 2], 1.0), seq)
    qk, _, keys = kinds.attention_widths(w, y)
    shape = np.stack(
        [
            np.where(attention, CORE, np.where(experts, EXPERT, np.where(row > 0, ROW, COLUMN))),
            np.where(attention, y[:, 0], x[:, 0]),
            np.where(attention, w[:, 1], y[:, 0]),
            seq,
            np.where(attention, qk, x[:, 0]),
            np.where(attention, keys, seq),
        ],
        axis=1,
    )
    gemm = linear | attention | experts
    if not gemm.any():
        return np.full(len(names), -1), np.array([[COLUMN, 1.0, 1.0, 1.0, 1.0, 1.0]])
    shapes, index = np.unique(shape[gemm], axis=0, return_inverse=True)
    cls = np.full(len(names), -1)
    cls[gemm] = index.ravel()
    return cls, shapes


class _Compute(NamedTuple):
    """Per layer, the compute term's quantities: training FLOPs ``[G]``, FLOPs and ``|x|+|y|``
    by kind ``[G, KINDS]`` and FLOPs by GEMM class ``[G, C]``; each with its part split over tp
    and the attention core's forward (what selective recomputation runs again)."""

    flops: np.ndarray
    flops_split: np.ndarray
    attn_fwd: np.ndarray
    fk: np.ndarray
    fk_split: np.ndarray
    attn_fk: np.ndarray
    tk: np.ndarray
    tk_split: np.ndarray
    attn_tk: np.ndarray
    gk: np.ndarray
    gk_split: np.ndarray
    attn_gk: np.ndarray
    #: the forward torchtitan's per-operation policy runs again (:func:`op_again`), its split part
    op_fwd: np.ndarray
    op_fwd_split: np.ndarray
    op_fk: np.ndarray
    op_fk_split: np.ndarray
    op_tk: np.ndarray
    op_tk_split: np.ndarray
    op_gk: np.ndarray
    op_gk_split: np.ndarray


class _Memory(NamedTuple):
    """Per layer, the memory term's quantities: activations kept per sample without and with
    selective recomputation and under the per-operation policy (total and split over tp),
    weights, and what full recomputation keeps: the block inputs, and the activations of the
    layers outside the blocks, which it does not checkpoint."""

    act: np.ndarray
    act_split: np.ndarray
    act_sel: np.ndarray
    act_split_sel: np.ndarray
    act_op: np.ndarray
    act_split_op: np.ndarray
    w: np.ndarray
    w_split: np.ndarray
    kept: np.ndarray
    kept_split: np.ndarray


class _Tensor(NamedTuple):
    """Per layer, the tensor-parallel allreduces: their count and elements per sample, in the
    forward and in the backward pass."""

    fwd_count: np.ndarray
    bwd_count: np.ndarray
    fwd_elems: np.ndarray
    bwd_elems: np.ndarray


class _Host(NamedTuple):
    """Per layer, the host's operations per micro-batch (forward and backward, the attention
    cores' forward again, every forward again) and, per recomputation mode, the memory-bound
    kernels' traffic per sample, its part split over tp, and the attention scores' part."""

    ops: np.ndarray
    ops_sel: np.ndarray
    ops_full: np.ndarray
    ops_op: np.ndarray
    traffic_none: np.ndarray
    traffic_selective: np.ndarray
    traffic_full: np.ndarray
    split_none: np.ndarray
    split_selective: np.ndarray
    split_full: np.ndarray
    scores_none: np.ndarray
    scores_selective: np.ndarray
    scores_full: np.ndarray
    traffic_op: np.ndarray
    split_op: np.ndarray
    scores_op: np.ndarray


class _Lines(NamedTuple):
    """Per stage count pp = 1..P (list index pp - 1), the stages' lines (total, split) of each
    table before its envelope is taken."""

    flops: list
    flops_sel: list
    fk: list
    fk_sel: list
    tk: list
    tk_sel: list
    gk: list
    gk_sel: list
    w: list
    act: list
    act_sel: list
    kept: list
    flops_op: list
    fk_op: list
    tk_op: list
    gk_op: list
    act_op: list


def _compute_terms(names, x, w, y, flops, fk, tk, roles: _Layers) -> tuple[_Compute, np.ndarray]:
    """The compute term per layer, and the GEMM classes' shapes (:func:`gemm_classes`)."""
    attention = names == "attention"
    split = roles.split[:, None]
    cls, shapes = gemm_classes(names, x, w, y, roles.row)
    gk = np.zeros((len(names), len(shapes)))
    gk[cls >= 0, cls[cls >= 0]] = flops[cls >= 0]
    # training FLOPs are three forwards (§3): the fraction of one that OP runs again
    again = op_again(names) / 3.0
    compute = _Compute(
        flops=flops,
        flops_split=flops * roles.split,
        attn_fwd=np.where(attention, flops / 3.0, 0.0),
        fk=fk,
        fk_split=fk * split,
        attn_fk=fk * attention[:, None] / 3.0,
        tk=tk,
        tk_split=tk * split,
        attn_tk=tk * attention[:, None] / 3.0,
        gk=gk,
        gk_split=gk * split,
        attn_gk=gk * attention[:, None] / 3.0,
        op_fwd=flops * again,
        op_fwd_split=flops * roles.split * again,
        op_fk=fk * again[:, None],
        op_fk_split=fk * split * again[:, None],
        op_tk=tk * again[:, None],
        op_tk_split=tk * split * again[:, None],
        op_gk=gk * again[:, None],
        op_gk_split=gk * split * again[:, None],
    )
    return compute, shapes


def _memory_terms(names, x, w, y, act, role, roles: _Layers) -> _Memory:
    """The memory term per layer: inside the blocks Korthikanti et al.'s count, elsewhere x + y."""
    in_block = block_mask(names)
    kt, ks, kt_sel, ks_sel = korthikanti(names, x, w, y, role)
    kt_op, ks_op = op_kept(names, x, w, y, role, roles.kept)
    return _Memory(
        act=np.where(in_block, kt, act),
        act_split=np.where(in_block, ks, roles.act_split),
        act_sel=np.where(in_block, kt_sel, act),
        act_split_sel=np.where(in_block, ks_sel, roles.act_split),
        act_op=np.where(in_block, kt_op, act),
        act_split_op=np.where(in_block, ks_op, roles.act_split),
        # the expert weights are kernels.experts' (split over ep x etp, not tp)
        w=np.where(role == ROLE_EXPERT, 0.0, np.prod(w, axis=1)),
        w_split=roles.w_split,
        # full recomputation checkpoints the blocks: the layers outside them keep theirs
        kept=np.where(in_block, roles.kept, act),
        kept_split=np.where(in_block, 0.0, roles.act_split),
    )


def _block_work(names, x, w, y, act, role, roles: _Layers) -> tuple[tuple[float, float], tuple[float, float]]:
    """One block's activations while full recomputation rebuilds it (Korthikanti et al.'s
    count), total and split, without attention the whole network's; and what torchtitan's
    per-operation policy rebuilds of it beside what it keeps (:func:`op_kept`)."""
    attention = names == "attention"
    in_block = block_mask(names)
    kt, ks = (np.where(in_block, v, 0.0) for v in korthikanti(names, x, w, y, role)[:2])
    kt_op, ks_op = (np.where(in_block, v, 0.0) for v in op_kept(names, x, w, y, role, roles.kept))
    blocks = max(int(attention.sum()), 1)
    if not attention.any():
        return (act.sum(), roles.act_split.sum()), (0.0, 0.0)
    full = (kt.sum() / blocks, ks.sum() / blocks)
    return full, (full[0] - kt_op.sum() / blocks, full[1] - ks_op.sum() / blocks)


def _tensor_terms(roles: _Layers) -> _Tensor:
    """The tensor-parallel communication term per layer."""
    return _Tensor(
        (roles.ar_fwd > 0).astype(float), (roles.ar_bwd > 0).astype(float), roles.ar_fwd, roles.ar_bwd
    )


def _host_terms(names, x, y, act, roles: _Layers) -> _Host:
    """The host's operations and the memory-bound traffic per layer: forward once and backward
    twice; recomputation the forward again; the attention scores' part of it (what a fused
    attention never moves), all split over tp."""
    attention = names == "attention"
    traffic, traffic_split = memory_traffic(names, x, y, act, roles.split)
    fwd_ops, bwd_ops = (np.array([OPS_PER_KIND.get(k, (1, 1))[j] for k in names], float) for j in (0, 1))
    scores = SCORE_PASSES * np.where(attention, act - np.prod(x, axis=1) - np.prod(y, axis=1), 0.0)
    total, split, score = [], [], []
    op = op_again(names)
    for mode, again in enumerate((0.0 * traffic, traffic * attention, traffic, traffic * op)):
        total.append(3.0 * traffic + again)
        split.append(3.0 * traffic_split + again * (traffic_split > 0))
        score.append((3.0 + (mode in (SELECTIVE, FULL))) * scores)
    ops = [fwd_ops + bwd_ops, fwd_ops * attention, fwd_ops, fwd_ops * op]
    return _Host(*(ops + total[:3] + split[:3] + score[:3] + [total[3], split[3], score[3]]))


def _stage_sums(record, units, stages: Stages, pp: int):
    """Each field of a per-layer record summed over each of pp stages; one stage takes the
    network's plain sums, as the data strategy does."""
    if pp == 1:
        return type(record)(*(v.sum(axis=0, keepdims=True) for v in record))
    return type(record)(*(stages.sums(u, pp) for u in units))


def _add_lines(lines: _Lines, c: _Compute, m: _Memory) -> None:
    """Append one stage count's lines (total, split) of the compute and memory tables."""
    lines.flops.append((c.flops, c.flops_split))
    lines.flops_sel.append((c.flops + c.attn_fwd, c.flops_split + c.attn_fwd))
    lines.fk.append((c.fk, c.fk_split))
    lines.fk_sel.append((c.fk + c.attn_fk, c.fk_split + c.attn_fk))
    lines.tk.append((c.tk, c.tk_split))
    lines.tk_sel.append((c.tk + c.attn_tk, c.tk_split + c.attn_tk))
    lines.gk.append((c.gk, c.gk_split))
    lines.gk_sel.append((c.gk + c.attn_gk, c.gk_split + c.attn_gk))
    lines.w.append((m.w, m.w_split))
    lines.act.append((m.act, m.act_split))
    lines.act_sel.append((m.act_sel, m.act_split_sel))
    lines.kept.append((m.kept, m.kept_split))
    lines.flops_op.append((c.flops + c.op_fwd, c.flops_split + c.op_fwd_split))
    lines.fk_op.append((c.fk + c.op_fk, c.fk_split + c.op_fk_split))
    lines.tk_op.append((c.tk + c.op_tk, c.tk_split + c.op_tk_split))
    lines.gk_op.append((c.gk + c.op_gk, c.gk_split + c.op_gk_split))
    lines.act_op.append((m.act_op, m.act_split_op))


def _fill_misc(misc: StageMisc, pp: int, t: _Tensor, h: _Host, boundary: float, work) -> None:
    """Row pp of every mode of :class:`StageMisc` from one stage count's sums."""
    misc.y_boundary[:, pp] = boundary
    fc, bc, fe, be = t
    # OP keeps the reduce-scatters' outputs (torchtitan's policy saves them): no allreduce again
    misc.ar_count[:2, pp], misc.ar_elems[:2, pp] = (fc + bc).max(), (fe + be).max()
    misc.ar_count[OP, pp], misc.ar_elems[OP, pp] = (fc + bc).max(), (fe + be).max()
    misc.ar_count[FULL, pp], misc.ar_elems[FULL, pp] = (2 * fc + bc).max(), (2 * fe + be).max()
    (
        (misc.work_total[FULL, pp], misc.work_split[FULL, pp]),
        (misc.work_total[OP, pp], misc.work_split[OP, pp]),
    ) = work
    # per micro-batch: forward and backward, full recomputation a second forward, selective
    # the attention cores' forward again, OP its share of the blocks' forward
    misc.ops[:, pp] = (
        h.ops.max(),
        (h.ops + h.ops_sel).max(),
        (h.ops + h.ops_full).max(),
        (h.ops + h.ops_op).max(),
    )
    modes = zip((*h[4:7], h.traffic_op), (*h[7:10], h.split_op), (*h[10:13], h.scores_op), strict=True)
    for mode, (total, split, scores) in enumerate(modes):
        misc.traffic_total[mode, pp] = total.max()
        misc.traffic_split[mode, pp] = split.max()
        misc.scores[mode, pp] = misc.scores_split[mode, pp] = scores.max()


def _boundary(y_elems: np.ndarray, stages: Stages, pp: int) -> float:
    """The pipeline sends' message: the largest stage boundary's output, as the pipeline table."""
    return max((y_elems[hi - 1] for hi in stages.layer_starts(pp)[1:]), default=0.0)


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
    role: np.ndarray | None = None,
) -> TransformerTable:
    """The tables of one network (docs/model.md §16) for pp = 1..P stages of ``stages``.

    ``flops`` are training FLOPs per sample and ``act`` non-in-place activations
    per layer, ``fk`` and ``tk`` each layer's FLOPs and ``|x|+|y|`` in the column of its
    kind (``[G, KINDS]``), as :func:`kernels.network.build_net` computes them; ``role`` each
    layer's tensor-parallel role code (default :func:`derive_roles`). Row 1 (one
    stage) uses the network's plain sums, as the data strategy does, and every
    row's totals are the same sums the pipeline table takes, so the strategies
    that coincide agree to the last bit (docs/model.md §16). Each term (compute, memory,
    tensor-parallel communication, host and traffic, pipeline sends) has its own per-layer
    record, summed per stage alike.
    """
    role = derive_roles(names) if role is None else role
    roles = tensor_roles(names, x, w, y, act, role)
    compute, shapes = _compute_terms(names, x, w, y, flops, fk, tk, roles)
    layer = (
        compute,
        _memory_terms(names, x, w, y, act, role, roles),
        _tensor_terms(roles),
        _host_terms(names, x, y, act, roles),
    )
    units = [[stages.per_unit(v) for v in record] for record in layer]
    lines = _Lines(*([] for _ in _Lines._fields))
    n = len(stages.parts)
    misc = StageMisc(*(np.zeros((MODES, n + 1)) for _ in StageMisc._fields))
    work = _block_work(names, x, w, y, act, role, roles)
    y_elems = np.prod(y, axis=1)
    for pp in range(1, n + 1):
        c, m, t, h = (_stage_sums(r, u, stages, pp) for r, u in zip(layer, units, strict=True))
        _add_lines(lines, c, m)
        _fill_misc(misc, pp, t, h, _boundary(y_elems, stages, pp), work)
    moe = expert_table(names, x, w, y, role, stages)
    table = _envelopes(lines, misc, np.float64(kv_groups(names, x, w, y)), shapes, moe)
    last_linear = len(names) > 0 and names[-1] == "linear"
    return table._replace(logits=np.float64(np.prod(y[-1]) if last_linear else 0.0))


def kv_groups(names: np.ndarray, x: np.ndarray, w: np.ndarray, y: np.ndarray) -> int:
    """The attention heads tp must divide (docs/model.md §16, Megatron-LM's rule): the key/value
    heads g of each attention layer (:func:`kernels.kinds.kv_heads`; g = a, the heads, for
    multi-head attention), their gcd; 1 without attention. Each rank holds g / tp key/value heads
    and the a / tp query heads that share them."""
    attention = np.flatnonzero(names == "attention")
    groups = [
        kinds.kv_heads(x[i, 0], w[i, 1], y[i, 0], w[i, 3] if w.shape[1] > 3 else 1) or int(w[i, 1])
        for i in attention
    ]
    return int(np.gcd.reduce(np.array(groups, dtype=np.int64))) if groups else 1


def _envelopes(
    lines: _Lines, misc: StageMisc, heads, shapes: np.ndarray, moe: ExpertTable
) -> TransformerTable:
    """The tables' upper envelopes per recomputation mode (none, selective, full, OP)."""
    hulls = [decreasing_hulls(v) for v in (lines.flops, lines.flops_sel, lines.flops_op)]

    def modes(plain, sel, op):  # full recomputation: 4/3 of none, on none's hulls
        none = envelope(plain, hulls[0])
        return stack_padded([none, envelope(sel, hulls[1]), none * (4.0 / 3.0), envelope(op, hulls[2])])

    return TransformerTable(
        heads=heads,
        flops=modes(lines.flops, lines.flops_sel, lines.flops_op),
        flops_kind=modes(lines.fk, lines.fk_sel, lines.fk_op),
        traffic_kind=modes(lines.tk, lines.tk_sel, lines.tk_op),
        act=stack_padded([envelope(v) for v in (lines.act, lines.act_sel, lines.kept, lines.act_op)]),
        w=envelope(lines.w),
        misc=misc,
        gemm_flops=modes(lines.gk, lines.gk_sel, lines.gk_op),
        gemm_shape=shapes.astype(np.float64),
        act_first=_first_lines([lines.act, lines.act_sel, lines.kept, lines.act_op]),
        moe=moe,
    )


def _first_lines(modes: list[list]) -> np.ndarray:
    """Each mode's first-stage line (total, split) per stage count, ``[modes, P+1, 2]`` (row 0,
    no stages, zero)."""
    out = np.zeros((len(modes), len(modes[0]) + 1, 2))
    for m, rows in enumerate(modes):
        for r, (total, split) in enumerate(rows, start=1):
            out[m, r] = total[0], split[0]
    return out
