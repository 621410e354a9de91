"""A network as a pytree of per-layer sums and lookup tables (docs/model.md §3, §9, §10).

:func:`build_net` turns per-layer shapes into everything the strategy kernels
need, precomputed once per network so that a kernel call is O(1):

* totals over all layers (FLOPs, weights, activations);
* sums over the active layers of filter and channel parallelism;
* spatial tables indexed by the number of active layers of the default
  prefix rule (which depends on the group size), or one entry for a fixed
  override;
* pipeline tables indexed by the number of stages p = 1..P (P = G, or the
  blocks of a transformer, :func:`kernels.partition.stage_partitions`): the min-max
  contiguous partition's largest group FLOPs and weights, its largest stage
  boundary, and every group's activations and weights for the memory bound.

Every FLOPs and traffic sum is also kept by layer kind (``flops_kind``,
``traffic_kind``, one entry per :data:`KINDS`), so that compute time can be a
per-kind roofline (docs/model.md §3) and still one O(KINDS) expression per
configuration. Numpy only, no I/O; nothing here depends on the machine.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from kernels import kinds
from kernels._types import Array
from kernels.names import KINDS  # the layer kinds, re-exported here where the tables use them
from kernels.partition import (  # re-exported: the partition's home before it had its own module
    Stages,
    contiguous_sums,
    envelope_rows,
    minmax_partition,
    partitions,
    stage_partitions,
    upper_envelope,
)
from kernels.transformer import TransformerTable, transformer_table

__all__ = ["KINDS", "contiguous_sums", "minmax_partition", "partitions", "upper_envelope"]

#: Layer kinds that work in place: no activations of their own (:attr:`kernels.kinds.Kind.in_place`).
IN_PLACE: frozenset[str] = frozenset(k.name for k in kinds.TABLE if k.in_place)
#: Layer kinds whose FLOPs the model-FLOPs utilisation counts (docs/model.md §12): the matrix
#: multiplies (convolutions, fully connected and linear layers, attention's two batched products).
MODEL_FLOPS_KINDS: frozenset[str] = frozenset(k.name for k in kinds.TABLE if k.model_flops)
#: What a layer of each kind keeps for its backward pass (docs/model.md §6.2): its input ``x``
#: (the weight gradient of conv and fc, batch-norm's normalisation), its output ``y`` (the mask
#: of relu and dropout, max pooling's argmax), or nothing (:attr:`kernels.kinds.Kind.saves`).
SAVES: dict[str, str] = {k.name: k.saves for k in kinds.TABLE}
#: Strategy families that a per-layer ``active`` flag can target.
ACTIVE_FAMILIES: tuple[str, ...] = ("spatial", "filter", "channel")


class LayerArrays(NamedTuple):
    """Per-layer shapes, spatial extents padded with 1 to three dimensions.

    ``x[l] = [C, X1, X2, X3]``, ``w[l] = [C, F, K1, K2, K3]`` (a zero means no
    weights), ``y[l] = [F, Y1, Y2, Y3]``; ``kind[l]`` indexes :data:`KINDS`.
    ``active[f, l]`` is the fixed active flag of family ``f`` of
    :data:`ACTIVE_FAMILIES`, used where ``overridden[f]`` is true. ``role[l]`` is the layer's
    tensor-parallel role code (:data:`kernels.kinds.ROLES`, docs/model.md §16), as a block
    builder states it; None derives every role by :func:`kernels.transformer.derive_roles`.
    """

    kind: np.ndarray
    x: np.ndarray
    w: np.ndarray
    y: np.ndarray
    active: np.ndarray
    overridden: np.ndarray
    role: np.ndarray | None = None


class SplitSums(NamedTuple):
    """Sums over the active layers of filter or channel parallelism (docs/model.md §9)."""

    flops: Array  # training FLOPs per sample of active layers
    w_elems: Array  # weights of active layers
    comm_y_elems: Array  # sum of y_l over active layers l < G
    comm_layers: Array  # number of active layers l < G
    max_p: Array  # smallest split channel count among active layers
    flops_kind: Array  # [KINDS] flops by layer kind (docs/model.md §3)
    traffic_kind: Array  # [KINDS] |x|+|y| by layer kind, per sample (docs/model.md §3)


class SpatialTable(NamedTuple):
    """Spatial sums by number of active layers (default prefix rule) or one override entry.

    ``neg_prefix_min[k] = -min(x1, y1 over layers 0..k)`` over the allowed
    prefix; the default active count for a group of n GPUs is the number of
    its entries <= -n. Table rows are indexed by that count. The ``saved``
    and ``work`` rows are the training memory's (docs/model.md §6.2).
    """

    neg_prefix_min: Array  # [K] nondecreasing; empty when overridden
    flops: Array  # [K+1] active training FLOPs per sample
    act_elems: Array  # [K+1] active non-in-place x+y per sample
    halo_layers: Array  # [K+1] active layers with a halo (h > 0)
    halo_elems: Array  # [K+1] sum of halo_x + halo_dy per sample
    y_last_elems: Array  # [K+1] output of the last active layer per sample
    max_p: Array  # [K+1] smallest split extent among active layers (0 if none)
    saved_elems: Array  # [K+1] activations the active layers keep for the backward pass, per sample
    work_active: Array  # [K+1] largest |x|+|y| among active layers, per sample (0 if none)
    work_rest: Array  # [K+1] largest |x|+|y| among inactive layers, per sample (0 if none)
    flops_kind: Array  # [K+1, KINDS] active flops by layer kind
    traffic_kind: Array  # [K+1, KINDS] active |x|+|y| by layer kind, per sample


class PipelineTable(NamedTuple):
    """Min-max contiguous partition for p = 0..P stages (row 0 unused; P = ``Net.n_stages``).

    The memory bound ``max_i 2 delta (B act_i + w_i)`` is a maximum of lines
    in B; only the groups on its upper envelope for B >= 0 are kept (a few
    per p), so a kernel evaluates it in O(H) instead of O(p).
    """

    flops_max: Array  # [G+1] largest group training FLOPs
    w_max: Array  # [G+1] largest group weight sum
    y_boundary_max: Array  # [G+1] largest output of a group's last layer, groups i < p
    mem_act: Array  # [G+1, H] slopes: non-in-place x+y of the groups on the memory envelope
    mem_w: Array  # [G+1, H] intercepts: weights of those groups (zero-padded)
    keep_act: Array  # [G+1, H'] as mem_act for the training memory: activations kept, per sample
    keep_w: Array  # [G+1, H'] weights of those groups (zero-padded)
    flops_kind_max: Array  # [G+1, KINDS] flops by kind of the group with the largest flops
    traffic_kind_max: Array  # [G+1, KINDS] |x|+|y| by kind of that group, per sample


class Net(NamedTuple):
    """Everything a strategy kernel needs about one network (docs/model.md §9, §10)."""

    dataset_samples: Array
    n_layers: Array
    #: the most pipeline stages: the blocks of a transformer, else the layers (docs/model.md §10.4, §16)
    n_stages: Array
    flops: Array  # training FLOPs per sample, all layers
    w_elems: Array
    act_elems: Array  # non-in-place x+y per sample
    t_measured_s: Array  # measured per-sample training time, 0 when none
    ref_rate_flops: Array  # gpu_flops*efficiency the measurement belongs to
    saved_elems: Array  # activations training keeps for the backward pass, per sample (§6.2)
    work_elems: Array  # largest |x|+|y| of one layer, per sample (§6.2)
    flops_kind: Array  # [KINDS] training FLOPs per sample by layer kind (§3)
    traffic_kind: Array  # [KINDS] |x|+|y| per sample by layer kind, the roofline's traffic (§3)
    filter: SplitSums
    channel: SplitSums
    spatial: SpatialTable
    pipeline: PipelineTable
    transformer: TransformerTable
    model_flops: Array  # training FLOPs per sample of the matrix-multiply kinds, the MFU's count (§12)
    tokens: Array  # positions per sample of the embedding's input (a sequence's tokens), 0 without one


def forward_flops(kind: np.ndarray, x: np.ndarray, w: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Forward FLOPs per sample and layer, docs/model.md §3: each kind's rule
    (:attr:`kernels.kinds.Kind.flops`).

    conv ``2 C F prod(K) prod(Y)``; fc ``2 C F prod(K)``; pooling
    ``C prod(K) prod(Y)`` with C = x[0]; relu, add, dropout ``|y|``; bnorm ``4|x|``.
    Transformer kinds (docs/model.md §16): linear ``2 C F prod(Y)`` with C = x[0],
    F = y[0] (from the activations, so a tied layer without weights counts too);
    attention ``2 s k (a d_qk + h)`` with h = y[0], s = prod(Y), k keys per query (``4 h s^2``
    without a window or latent widths, docs/model.md §18); layernorm ``4|x|``; gelu ``|y|``;
    embedding 0 (a table lookup).
    """
    out = np.zeros(len(kind), dtype=np.float64)
    for code, record in enumerate(kinds.TABLE):
        rows = kind == code
        if rows.any():
            out[rows] = record.flops(x[rows], w[rows], y[rows])
    return out


def softmax_elems(kind: np.ndarray, w: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Attention scores kept for the backward pass, per sample: ``a s k`` for an attention
    layer with ``a = w[1]`` heads, ``s = prod(Y)`` positions and ``k`` keys per query (``s``, or
    a sliding window's ``min(W, s)``: :func:`kernels.kinds.attention_widths`), 0 for other kinds
    (docs/model.md §16, §18)."""
    attention = np.array(KINDS)[kind] == "attention"
    _, s, keys = kinds.attention_widths(w, y)
    return np.where(attention, w[:, 1] * (s * keys), 0.0)


def default_active(kind: np.ndarray) -> np.ndarray:
    """Default filter and channel masks, docs/model.md §9: the kinds whose record says so
    (:attr:`kernels.kinds.Kind.filter_channel`: conv and fc); channel skips layer 0."""
    filt = np.array([k.filter_channel for k in kinds.TABLE])[kind]
    chan = filt.copy()
    chan[0] = False
    return np.stack([filt, chan])


def saved_elems(kind: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Activation elements per sample that training keeps for the backward pass, per layer
    (docs/model.md §6.2).

    A layer that keeps its output is charged ``|y|``; one that keeps its input
    ``|x|``, unless the layer before it keeps its output (the same tensor,
    charged once, to the layer that made it).
    """
    names = np.array(KINDS)[kind]
    keeps = np.array([SAVES.get(n, "x") for n in names])
    x_elems = np.prod(x, axis=1)
    y_elems = np.prod(y, axis=1)
    before_keeps_y = np.concatenate([[False], keeps[:-1] == "y"])
    return np.where(keeps == "y", y_elems, 0.0) + np.where((keeps == "x") & ~before_keeps_y, x_elems, 0.0)


def by_kind(kind: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``[G, KINDS]``: each layer's value in the column of its kind, zeros elsewhere; summing
    rows over a set of layers gives the set's per-kind sums (docs/model.md §3)."""
    out = np.zeros((len(kind), len(KINDS)))
    out[np.arange(len(kind)), kind] = values
    return out


def _split_sums(active, flops, w_elems, y_elems, split_channels, fk, tk) -> SplitSums:
    comm = active.copy()
    comm[-1] = False  # no exchange after the network's last layer
    chans = split_channels[active]
    return SplitSums(
        flops=np.float64(flops[active].sum()),
        w_elems=np.float64(w_elems[active].sum()),
        comm_y_elems=np.float64(y_elems[comm].sum()),
        comm_layers=np.float64(comm.sum()),
        max_p=np.float64(chans.min() if chans.size else np.inf),
        flops_kind=fk[active].sum(axis=0),
        traffic_kind=tk[active].sum(axis=0),
    )


def halo_elems(x: np.ndarray, w: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Halo faces per sample along the first spatial dimension, docs/model.md §9.

    ``h = floor((K1 - 1)/2)`` with K1 = w[2]; ``halo_x = C h prod(x[2:])``,
    ``halo_dy = F h prod(y[2:])`` with C = x[0], F = y[0] (equal to the weight
    shape's C and F for conv layers; pooling layers have no weight channels).
    Returns (h > 0 mask, halo_x + halo_dy).
    """
    h = np.where(w[:, 2] > 0, np.floor((w[:, 2] - 1) / 2), 0)
    hx = x[:, 0] * h * np.prod(x[:, 2:], axis=1)
    hy = y[:, 0] * h * np.prod(y[:, 2:], axis=1)
    return h > 0, hx + hy


def _spatial_table(layers: LayerArrays, flops, act, in_place, saved, fk, tk) -> SpatialTable:
    names = np.array(KINDS)[layers.kind]
    work = act  # |x|+|y| of every layer, in place or not: a layer's input and output gradient
    has_halo, halo = halo_elems(layers.x, layers.w, layers.y)
    y_elems = np.prod(layers.y, axis=1)
    extent = np.minimum(layers.x[:, 1], layers.y[:, 1]).astype(np.float64)
    if layers.overridden[0]:
        a = layers.active[0].astype(bool)
        last = np.flatnonzero(a)
        return SpatialTable(
            neg_prefix_min=np.zeros(0),
            flops=np.array([flops[a].sum()]),
            act_elems=np.array([act[a & ~in_place].sum()]),
            halo_layers=np.array([float((a & has_halo).sum())]),
            halo_elems=np.array([halo[a & has_halo].sum()]),
            y_last_elems=np.array([y_elems[last[-1]] if last.size else 0.0]),
            max_p=np.array([extent[a].min() if a.any() else 0.0]),
            saved_elems=np.array([saved[a].sum()]),
            work_active=np.array([work[a].max() if a.any() else 0.0]),
            work_rest=np.array([work[~a].max() if (~a).any() else 0.0]),
            flops_kind=fk[a].sum(axis=0, keepdims=True),
            traffic_kind=tk[a].sum(axis=0, keepdims=True),
        )
    fc = np.flatnonzero(names == "fc")
    cap = int(fc[0]) if fc.size else len(names)
    prefix_min = np.minimum.accumulate(extent[:cap]) if cap else np.zeros(0)

    def cum(v):
        return np.concatenate([[0.0], np.cumsum(v[:cap])])

    return SpatialTable(
        neg_prefix_min=-prefix_min,
        flops=cum(flops),
        act_elems=cum(np.where(in_place, 0.0, act)),
        halo_layers=cum(has_halo.astype(np.float64)),
        halo_elems=cum(np.where(has_halo, halo, 0.0)),
        y_last_elems=np.concatenate([[0.0], y_elems[:cap]]),
        max_p=np.concatenate([[0.0], prefix_min]),
        saved_elems=cum(saved),
        work_active=np.concatenate([[0.0], np.maximum.accumulate(work[:cap])]),
        # row k: the largest of layers k..G-1, which the first k leave inactive
        work_rest=np.append(np.maximum.accumulate(work[::-1])[::-1], 0.0)[: cap + 1],
        flops_kind=np.concatenate([np.zeros((1, len(KINDS))), np.cumsum(fk[:cap], axis=0)]),
        traffic_kind=np.concatenate([np.zeros((1, len(KINDS))), np.cumsum(tk[:cap], axis=0)]),
    )


def _pipeline_table(flops, w_elems, act_nip, y_elems, saved, fk, tk, stages: Stages) -> PipelineTable:
    g, rows = len(flops), len(stages.parts)
    flops_max = np.zeros(rows + 1)
    fk_max = np.zeros((rows + 1, len(KINDS)))
    tk_max = np.zeros((rows + 1, len(KINDS)))
    w_max = np.zeros(rows + 1)
    y_bound = np.zeros(rows + 1)
    units = [stages.per_unit(v) for v in (act_nip, saved, w_elems, flops, fk, tk)]
    hulls: list[tuple[list[float], list[float]]] = [([], [])]
    keeps: list[tuple[list[float], list[float]]] = [([], [])]
    for p in range(1, rows + 1):
        bounds = [*stages.layer_starts(p), g]
        acts, kept, ws, group_flops = (stages.sums(v, p) for v in units[:4])
        flops_max[p] = group_flops.max()
        slowest = int(np.argmax(group_flops))
        fk_max[p] = stages.sums(units[4], p)[slowest]
        tk_max[p] = stages.sums(units[5], p)[slowest]
        w_max[p] = ws.max()
        y_bound[p] = max((y_elems[hi - 1] for hi in bounds[1:-1]), default=0.0)
        # the envelope of lines a B + c w is the same set of groups for every c > 0
        hull = upper_envelope(acts, ws)
        hulls.append(([acts[i] for i in hull], [ws[i] for i in hull]))
        hull = upper_envelope(kept, ws)
        keeps.append(([kept[i] for i in hull], [ws[i] for i in hull]))
    mem_act, mem_w = envelope_rows(hulls)
    keep_act, keep_w = envelope_rows(keeps)
    return PipelineTable(flops_max, w_max, y_bound, mem_act, mem_w, keep_act, keep_w, fk_max, tk_max)


def build_net(
    layers: LayerArrays,
    dataset_samples: int,
    t_measured_s: float = 0.0,
    ref_rate_flops: float = 1.0,
) -> Net:
    """Precompute a :class:`Net` from per-layer shapes (docs/model.md §3, §9, §10).

    ``t_measured_s`` is the network's measured per-sample training time on a
    machine whose ``gpu_flops * efficiency`` is ``ref_rate_flops``; 0 means
    compute time comes from FLOPs.
    """
    x, w, y = (np.asarray(a, dtype=np.float64) for a in (layers.x, layers.w, layers.y))
    layers = layers._replace(x=x, w=w, y=y)
    names = np.array(KINDS)[layers.kind]
    flops = 3.0 * forward_flops(layers.kind, x, w, y)
    w_elems = np.prod(w, axis=1)
    x_elems = np.prod(x, axis=1)
    y_elems = np.prod(y, axis=1)
    in_place = np.isin(names, list(IN_PLACE))
    act = x_elems + y_elems + softmax_elems(layers.kind, w, y)
    act_nip = np.where(in_place, 0.0, act)
    saved = saved_elems(layers.kind, x, y)
    fk, tk = by_kind(layers.kind, flops), by_kind(layers.kind, act)
    defaults = default_active(layers.kind)
    masks = [layers.active[f].astype(bool) if layers.overridden[f] else defaults[f - 1] for f in (1, 2)]
    stages = stage_partitions(names, flops)
    return Net(
        dataset_samples=np.float64(dataset_samples),
        n_layers=np.float64(len(flops)),
        n_stages=np.float64(len(stages.parts)),
        flops=np.float64(flops.sum()),
        w_elems=np.float64(w_elems.sum()),
        act_elems=np.float64(act_nip.sum()),
        t_measured_s=np.float64(t_measured_s),
        ref_rate_flops=np.float64(ref_rate_flops),
        saved_elems=np.float64(saved.sum()),
        work_elems=np.float64(act.max()),
        flops_kind=fk.sum(axis=0),
        traffic_kind=tk.sum(axis=0),
        filter=_split_sums(masks[0], flops, w_elems, y_elems, y[:, 0], fk, tk),
        channel=_split_sums(masks[1], flops, w_elems, y_elems, _channel_split(x), fk, tk),
        spatial=_spatial_table(layers, flops, act, in_place, saved, fk, tk),
        pipeline=_pipeline_table(flops, w_elems, act_nip, y_elems, saved, fk, tk, stages),
        transformer=transformer_table(names, x, w, y, flops, act_nip, stages, fk, tk, layers.role),
        model_flops=np.float64(flops[np.isin(names, list(MODEL_FLOPS_KINDS))].sum()),
        tokens=np.float64(tokens_per_sample(names, x)),
    )


def tokens_per_sample(names: np.ndarray, x: np.ndarray) -> float:
    """Tokens of one sample (docs/model.md §12): the positions of the first embedding layer's
    input, ``prod(x[1:])`` (``s`` for a GPT's ``x = [1, s]``); 0 for a network without one."""
    found = np.flatnonzero(names == "embedding")
    return float(np.prod(x[found[0], 1:])) if len(found) else 0.0


def _channel_split(x: np.ndarray) -> np.ndarray:
    """Channel counts limiting channel parallelism: x[0], the first layer excepted (docs/model.md §9)."""
    chans = x[:, 0].copy()
    chans[0] = np.inf
    return chans
