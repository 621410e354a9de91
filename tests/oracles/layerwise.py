"""Plain-Python evaluation of the ParaDL equations layer by layer, one configuration at a time.

The second baseline of the throughput benchmark, and a cross-check of
:func:`kernels.build_net`'s precomputed sums and tables. Where
:mod:`tests.oracles.reference` uses the network's per-layer sums prepared once,
this module evaluates docs/model.md §10 as it is written, as sums over the
layer list: every configuration loops over the layers, deciding which are
active for its GPU count and adding up each layer's compute, weight-update,
communication and memory terms (``Σ_l t_l``, ``Σ_{active, h>0}
2·[(α + B·δ·halo_x_l·β) + ...]``, ``Σ_{active, l<G} 3(p−1)(α + B·δ·y_l·β/p)``,
and so on).

:func:`prepare` reads a model's layers once into plain lists of per-layer
facts (FLOPs from the shapes per docs/model.md §3, weights, activations, halo
faces, split channel counts, active flags). The one thing prepared per GPU
count is pipeline's min-max partition: it is a search
(:func:`kernels.network.minmax_partition`), not an equation, and the stages'
sums are still added up layer by layer for each configuration.
:func:`evaluate` returns the same dict as :func:`tests.oracles.reference.evaluate`
and follows the same documented choices (see that module).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from kernels import ACTIVE_FAMILIES, KINDS, LayerArrays
from kernels.network import IN_PLACE, contiguous_sums, minmax_partition
from tests.oracles import reference

SPATIAL, FILTER, CHANNEL = (ACTIVE_FAMILIES.index(f) for f in ("spatial", "filter", "channel"))


@dataclass(frozen=True)
class Layer:
    """One layer's facts, plain Python (elements are per sample)."""

    kind: str
    flops: float  # training FLOPs, 3x forward
    w_elems: float
    act_elems: float  # x + y, 0 for an in-place layer (left out of memory)
    y_elems: float
    has_halo: bool  # h = floor((K1 - 1) / 2) > 0
    halo_x: float  # C h prod(X2, X3), 0 without a halo
    halo_dy: float  # F h prod(Y2, Y3)
    extent: float  # min(X1, Y1): the most GPUs the first spatial dimension splits over
    filter_channels: float  # F: the most GPUs filter parallelism splits this layer over
    channel_channels: float  # C (infinite for layer 0, which channel parallelism never splits)
    active_filter: bool
    active_channel: bool
    active_spatial: bool  # the fixed flag, used when spatial_fixed


@dataclass(frozen=True)
class Layers:
    """A network as a list of layers, on a machine (``m``: only its machine fields are read)."""

    D: float
    t_measured_s: float
    ref_rate_flops: float
    total_flops: float  # Σ flops_l, which spreads a measured per-sample time over layers
    layers: list[Layer]
    spatial_fixed: bool  # the spatial active set is overridden
    partitions: list[list[int]]  # [p] -> the first layer of each of p stages (row 0 unused)
    m: reference.Ref


def _prod(values) -> float:
    return float(math.prod(float(v) for v in values))


def _forward_flops(kind: str, x: list[float], w: list[float], y: list[float]) -> float:
    """docs/model.md §3, forward FLOPs per sample."""
    if kind == "conv":
        return 2.0 * w[0] * w[1] * _prod(w[2:]) * _prod(y[1:])
    if kind == "fc":
        return 2.0 * w[0] * w[1] * _prod(w[2:])
    if kind in ("pool_max", "pool_avg"):
        return x[0] * _prod(w[2:]) * _prod(y[1:])
    if kind in ("relu", "add", "dropout"):
        return _prod(y)
    if kind == "bnorm":
        return 4.0 * _prod(x)
    raise ValueError(f"unknown layer kind {kind!r}")


def prepare(
    arrays: LayerArrays,
    dataset_samples: float,
    machine,
    t_measured_s: float = 0.0,
    ref_rate_flops: float = 1.0,
) -> Layers:
    """Per-layer facts of ``arrays`` (:func:`sweep.models.to_arrays`) on ``machine`` (a :class:`kernels.Machine`).

    ``t_measured_s`` and ``ref_rate_flops`` as in :func:`kernels.build_net`.
    """
    kinds = [KINDS[int(k)] for k in arrays.kind]
    fixed = [bool(f) for f in arrays.overridden]  # per family: the active set is overridden
    layers = []
    for i, kind in enumerate(kinds):
        x = [float(v) for v in arrays.x[i]]
        w = [float(v) for v in arrays.w[i]]
        y = [float(v) for v in arrays.y[i]]
        h = math.floor((w[2] - 1) / 2) if w[2] > 0 else 0.0
        weighted = kind in ("conv", "fc")
        active = [bool(arrays.active[f][i]) for f in range(len(ACTIVE_FAMILIES))]
        layers.append(
            Layer(
                kind=kind,
                flops=3.0 * _forward_flops(kind, x, w, y),
                w_elems=_prod(w),
                act_elems=0.0 if kind in IN_PLACE else _prod(x) + _prod(y),
                y_elems=_prod(y),
                has_halo=h > 0,
                halo_x=x[0] * h * _prod(x[2:]),
                halo_dy=y[0] * h * _prod(y[2:]),
                extent=min(x[1], y[1]),
                filter_channels=y[0],
                channel_channels=math.inf if i == 0 else x[0],
                active_filter=active[FILTER] if fixed[FILTER] else weighted,
                active_channel=active[CHANNEL] if fixed[CHANNEL] else weighted and i > 0,
                active_spatial=active[SPATIAL],
            )
        )
    flops = np.array([layer.flops for layer in layers])
    candidates = contiguous_sums(flops)
    partitions: list[list[int]] = [[]] + [
        minmax_partition(flops, p, candidates) for p in range(1, len(layers) + 1)
    ]
    return Layers(
        D=float(dataset_samples),
        t_measured_s=float(t_measured_s),
        ref_rate_flops=float(ref_rate_flops),
        total_flops=float(flops.sum()),
        layers=layers,
        spatial_fixed=fixed[SPATIAL],
        partitions=partitions,
        m=_machine(machine),
    )


def _machine(machine) -> reference.Ref:
    """The machine as a :class:`reference.Ref`; its network fields are None: nothing here reads them."""
    fields = reference.machine_fields(machine)
    network = [f.name for f in dataclasses.fields(reference.Ref) if f.name not in fields]
    values: dict[str, Any] = {**dict.fromkeys(network), **fields}
    return reference.Ref(**values)


# ---------------------------------------------------------------------------------------------
# Per-layer terms (docs/model.md §3-§8).
# ---------------------------------------------------------------------------------------------


def _sec_per_flop(n: Layers) -> float:
    """``t_l = T flops_l / Σ flops`` scaled to the machine's rate, else ``flops_l / rate``, per FLOP."""
    rate = n.m.gpu_flops * n.m.efficiency
    if n.t_measured_s > 0:
        return n.t_measured_s / n.total_flops * n.ref_rate_flops / rate
    return 1.0 / rate


def _update_per_elem(n: Layers) -> float:
    """``u_l = wu_passes δ w_l / gpu_mem_bw``, per weight element."""
    return n.m.wu_passes * n.m.delta / n.m.gpu_mem_bw_Bps


def _weights(n: Layers) -> float:
    total = 0.0
    for layer in n.layers:
        total += layer.w_elems
    return total


def _spatial_active(n: Layers, groups: float) -> list[bool]:
    """Active layers of a spatial group of ``groups`` GPUs (docs/model.md §9, spatial).

    By default the longest prefix before the first fc layer whose every
    layer splits over that many (``min(X1, Y1) >= groups``); else the fixed set.
    """
    if n.spatial_fixed:
        return [layer.active_spatial for layer in n.layers]
    active, prefix = [], True
    for layer in n.layers:
        prefix = prefix and layer.kind != "fc" and layer.extent >= groups
        active.append(prefix)
    return active


def _spatial_terms(n: Layers, groups: float, batch: float, alpha: float, beta: float):
    """(compute s per sample, halo s, allgather s per iteration, memory bytes, most GPUs) of a group."""
    m = n.m
    spf = _sec_per_flop(n)
    comp = halo = act = weights = 0.0
    most, y_last = math.inf, 0.0
    for layer, on in zip(n.layers, _spatial_active(n, groups), strict=True):
        t = layer.flops * spf
        weights += layer.w_elems
        if on:
            comp += t / groups
            act += layer.act_elems / groups
            most = min(most, layer.extent)
            y_last = layer.y_elems
            if groups > 1 and layer.has_halo:
                halo += 2.0 * (
                    (alpha + batch * m.delta * layer.halo_x * beta)
                    + (alpha + batch * m.delta * layer.halo_dy * beta)
                )
        else:
            comp += t
            act += layer.act_elems
    gather = 2.0 * reference.ring_allgather(groups, batch * m.delta * y_last, alpha, beta)
    mem = 2.0 * m.delta * (batch * act + weights)
    return comp, halo, gather, mem, (0.0 if most == math.inf else most)


def _split_terms(n: Layers, which: str, parts: float, batch: float, alpha: float, beta: float):
    """Filter or channel split over ``parts`` GPUs: (compute s per sample, update s, allgather s,
    allreduce s per iteration, shard weights, most GPUs)."""
    spf, upe = _sec_per_flop(n), _update_per_elem(n)
    comp = update = gather = reduce = shard_w = 0.0
    most = math.inf
    last = len(n.layers) - 1
    for i, layer in enumerate(n.layers):
        on = layer.active_filter if which == "filter" else layer.active_channel
        if on:
            comp += layer.flops * spf / parts
            update += layer.w_elems * upe / parts
            shard_w += layer.w_elems / parts
            most = min(most, layer.filter_channels if which == "filter" else layer.channel_channels)
            if i < last:  # T_ag(p, B δ y_l) + T_ar(p, B δ y_l) after every active layer but the last
                msg = batch * n.m.delta * layer.y_elems
                gather += reference.ring_allgather(parts, msg, alpha, beta)
                reduce += reference.ring_allreduce(parts, msg, alpha, beta)
        else:
            comp += layer.flops * spf
            update += layer.w_elems * upe
            shard_w += layer.w_elems
    return comp, update, gather, reduce, shard_w, most


def _sums(layers: list[Layer], spf: float, upe: float) -> tuple[float, float, float, float]:
    """Over ``layers``: (compute s per sample, update s per iteration, activations, weights);
    ``spf`` and ``upe`` are :func:`_sec_per_flop` and :func:`_update_per_elem`."""
    t = u = act = weights = 0.0
    for layer in layers:
        t += layer.flops * spf
        u += layer.w_elems * upe
        act += layer.act_elems
        weights += layer.w_elems
    return t, u, act, weights


def _act(n: Layers) -> float:
    total = 0.0
    for layer in n.layers:
        total += layer.act_elems
    return total


# ---------------------------------------------------------------------------------------------
# Section 4: one function per strategy.
# ---------------------------------------------------------------------------------------------


def serial(n: Layers, p: float, b: float, p2: float, S: float) -> dict:
    m, B = n.m, b
    its = reference.iterations(n.D, B)
    t, u, act, weights = _sums(n.layers, _sec_per_flop(n), _update_per_elem(n))
    mem = 2.0 * m.delta * (B * act + weights)
    return reference._result(
        its, n.D * t + its * u, mem=mem, why=reference.limit(m, mem, False, B < 1, B > n.D)
    )


def data(n: Layers, p: float, b: float, p2: float, S: float) -> dict:
    m, B = n.m, b * p
    its = reference.iterations(n.D, B)
    t, u, act, weights = _sums(n.layers, _sec_per_flop(n), _update_per_elem(n))
    alpha, beta = reference.link(m, p)
    allreduce = its * reference.gradient_allreduce(m, p, m.delta * weights, alpha, beta)
    mem = 2.0 * m.delta * (b * act + weights)
    return reference._result(
        its,
        n.D / p * t + its * u,
        allreduce=allreduce,
        mem=mem,
        why=reference.limit(m, mem, p < 1, p > B, B > n.D),
    )


def spatial(n: Layers, p: float, b: float, p2: float, S: float) -> dict:
    m, B = n.m, b
    its = reference.iterations(n.D, B)
    alpha, beta = reference.link(m, p)
    comp, halo, gather, mem, most = _spatial_terms(n, p, B, alpha, beta)
    weights = _weights(n)
    allreduce = reference.gradient_allreduce(m, p, m.delta * weights, alpha, beta)
    comp = n.D * comp + its * weights * _update_per_elem(n)
    why = reference.limit(m, mem, p > most or p < 1, B < 1, B > n.D)
    return reference._result(
        its, comp, allreduce=its * allreduce, allgather=its * gather, halo=its * halo, mem=mem, why=why
    )


def pipeline(n: Layers, p: float, b: float, p2: float, S: float) -> dict:
    m, B = n.m, b
    its = reference.iterations(n.D, B)
    G = len(n.layers)
    stages = min(max(int(p), 1), G)  # p > G: the terms of G stages (and max_p)
    starts = n.partitions[stages]
    spf, upe = _sec_per_flop(n), _update_per_elem(n)
    tmax = umax = mem = boundary = 0.0
    ends = [*starts[1:], G]
    for first, end in zip(starts, ends, strict=True):
        # _sums inlined: a call per stage made this baseline about 8 % slower (up to 174 stages)
        t = u = act = weights = 0.0
        for layer in n.layers[first:end]:
            t += layer.flops * spf
            u += layer.w_elems * upe
            act += layer.act_elems
            weights += layer.w_elems
        tmax, umax = max(tmax, t), max(umax, u)
        mem = max(mem, 2.0 * m.delta * (B * act + weights))
        if end < G:  # the stage's last output goes to the next stage
            boundary = max(boundary, n.layers[end - 1].y_elems)
    comp = n.D * (p + S - 1) / S * tmax + its * umax
    p2p = 0.0
    if p > 1:
        if p <= m.gpus_per_node:
            alpha, beta = m.intra_alpha_s, 1.0 / m.intra_bandwidth_Bps
        else:
            alpha, beta = m.inter_alpha_s[0], 1.0 / m.inter_bandwidth_Bps[0]
        p2p = its * 2.0 * (p + S - 2) * (alpha + B / S * m.delta * boundary * beta)
    why = reference.limit(m, mem, p > G or p < 1, S > B or S < 1, B > n.D)
    return reference._result(its, comp, p2p=p2p, mem=mem, why=why)


def _split(n: Layers, which: str, p: float, b: float) -> dict:
    m, B = n.m, b
    its = reference.iterations(n.D, B)
    alpha, beta = reference.link(m, p)
    comp, update, gather, reduce, shard_w, most = _split_terms(n, which, p, B, alpha, beta)
    mem = 2.0 * m.delta * (B * _act(n) + shard_w)
    return reference._result(
        its,
        n.D * comp + its * update,
        allreduce=its * reduce,
        allgather=its * gather,
        mem=mem,
        why=reference.limit(m, mem, p > most or p < 1, B < 1, B > n.D),
    )


def filter_(n: Layers, p: float, b: float, p2: float, S: float) -> dict:
    return _split(n, "filter", p, b)


def channel(n: Layers, p: float, b: float, p2: float, S: float) -> dict:
    return _split(n, "channel", p, b)


def data_filter(n: Layers, p: float, b: float, p2: float, S: float) -> dict:
    m = n.m
    p1, misfit = reference._grouping(p, p2)
    B = b * p1
    its = reference.iterations(n.D, B)
    alpha2, beta2 = reference.link(m, p2)
    comp, update, gather, reduce, shard_w, most = _split_terms(n, "filter", p2, b, alpha2, beta2)
    # every GPU of a node is in an inter-group ring at once: NICs shared by gpus_per_node
    alpha, beta = reference.link(m, p, reference.nic_share(m, m.gpus_per_node))
    grad = reference.gradient_allreduce(m, p1, m.delta * shard_w, alpha, beta)
    mem = 2.0 * m.delta * (b * _act(n) + shard_w)
    return reference._result(
        its,
        n.D / p1 * comp + its * update,
        allreduce=its * (reduce + grad),
        allgather=its * gather,
        mem=mem,
        why=reference.limit(m, mem, misfit or p2 > most, b < 1, B > n.D),
    )


def data_spatial(n: Layers, p: float, b: float, p2: float, S: float) -> dict:
    m = n.m
    p1, misfit = reference._grouping(p, p2)
    B = b * p1
    its = reference.iterations(n.D, B)
    alpha2, beta2 = reference.link(m, p2)
    comp, halo, gather, mem, most = _spatial_terms(n, p2, b, alpha2, beta2)
    leaders = max(1.0, m.gpus_per_node / p2)  # group leaders per node talking off-node at once
    alpha, beta = reference.link(m, p, reference.nic_share(m, leaders))
    weights = _weights(n)
    inside = reference.gradient_allreduce(m, p2, m.delta * weights, alpha2, beta2)
    across = reference.gradient_allreduce(m, p1, m.delta * weights, alpha, beta)
    grad = inside + across
    why = reference.limit(m, mem, misfit or p2 > most or p2 < 1, b < 1, B > n.D)
    return reference._result(
        its,
        n.D / p1 * comp + its * weights * _update_per_elem(n),
        allreduce=its * grad,
        allgather=its * gather,
        halo=its * halo,
        mem=mem,
        why=why,
    )


STRATEGIES = {
    "serial": serial,
    "data": data,
    "spatial": spatial,
    "pipeline": pipeline,
    "filter": filter_,
    "channel": channel,
    "data+filter": data_filter,
    "data+spatial": data_spatial,
}


def evaluate(layers: Layers, strategy: str, p, b, p2=1, S=1) -> dict:
    """Per-epoch terms of one configuration, as :func:`tests.oracles.reference.evaluate`."""
    try:
        fn = STRATEGIES[strategy]
    except KeyError:
        raise ValueError(f"unknown strategy '{strategy}' (one of {', '.join(STRATEGIES)})") from None
    return fn(layers, float(p), float(b), float(p2), float(S))
