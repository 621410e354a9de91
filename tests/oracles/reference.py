"""Plain-Python per-configuration evaluator of the ParaDL equations (docs/model.md §3-§10).

This is the baseline of the throughput benchmark and an independent cross-check
of the jitted kernels in :mod:`kernels.strategies`: one configuration at a time,
written the way the original ParaDL oracle script would be, with Python ``if``
statements and :mod:`math` only (no jax, no numpy once :func:`prepare` has run).

:func:`prepare` converts a :class:`kernels.Net` and a :class:`kernels.Machine`
(numpy leaves, e.g. ``sweep.models.bind(model, profile.name, profile.ref_rate_flops)``
and ``profile.pytree()``) into plain floats and lists once; :func:`evaluate`
then costs one configuration of one strategy and returns the terms of
docs/output-format.md#columns as a dict.

Where the equations are silent, the choices documented in the kernels are followed:

* ``limit`` is the first failing reason in the order batch, max_p, dataset, memory;
* a spatial group of one GPU exchanges no halo; a one-stage pipeline sends no
  point-to-point message;
* the hybrids use ``p1 = max(p / p2, 1)``; a p2 that does not divide p (or
  p < p2) makes the configuration ``max_p``;
* with a measured per-sample time T, the seconds per FLOP are
  ``T / sum(flops) * ref_rate / (gpu_flops * efficiency)`` (the measurement
  scaled to the machine's rate); otherwise ``1 / (gpu_flops * efficiency)``;
* only the ring gradient allreduce is implemented (``allreduce_algo`` = ring);
  any other algorithm code raises :class:`NotImplementedError`.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

#: The order of ``limit`` strings, the same as :data:`kernels.LIMITS`.
LIMITS = ("", "memory", "max_p", "batch", "dataset")
RING = 0  # allreduce_algo code of the ring algorithm (kernels.collectives.RING)

STRATEGY_NAMES = (
    "serial",
    "data",
    "spatial",
    "pipeline",
    "filter",
    "channel",
    "data+filter",
    "data+spatial",
)


@dataclass(frozen=True)
class Split:
    """Filter or channel sums over the active layers."""

    flops: float
    w_elems: float
    comm_y_elems: float
    comm_layers: float
    max_p: float


@dataclass(frozen=True)
class Ref:
    """A network and a machine as plain Python floats and lists of floats."""

    # network
    D: float
    G: float
    flops: float
    w_elems: float
    act_elems: float
    t_measured_s: float
    ref_rate_flops: float
    filter: Split
    channel: Split
    sp_neg_prefix_min: list[float]
    sp_flops: list[float]
    sp_act_elems: list[float]
    sp_halo_layers: list[float]
    sp_halo_elems: list[float]
    sp_y_last_elems: list[float]
    sp_max_p: list[float]
    pp_flops_max: list[float]
    pp_w_max: list[float]
    pp_y_boundary_max: list[float]
    pp_mem_act: list[list[float]]
    pp_mem_w: list[list[float]]
    # machine
    gpu_flops: float
    efficiency: float
    gpu_mem_bytes: float
    gpu_mem_bw_Bps: float
    gpus_per_node: float
    nics_per_node: float
    delta: float
    wu_passes: float
    intra_alpha_s: float
    intra_bandwidth_Bps: float
    allreduce_algo: int
    inter_span_nodes: list[float]
    inter_alpha_s: list[float]
    inter_bandwidth_Bps: list[float]


def _floats(values) -> list[float]:
    return [float(v) for v in values]


def _split(sums) -> Split:
    return Split(
        flops=float(sums.flops),
        w_elems=float(sums.w_elems),
        comm_y_elems=float(sums.comm_y_elems),
        comm_layers=float(sums.comm_layers),
        max_p=float(sums.max_p),
    )


def prepare(net, machine) -> Ref:
    """Plain-Python copy of a :class:`kernels.Net` and a :class:`kernels.Machine` (scalar leaves)."""
    sp, pp = net.spatial, net.pipeline
    return Ref(
        D=float(net.dataset_samples),
        G=float(net.n_layers),
        flops=float(net.flops),
        w_elems=float(net.w_elems),
        act_elems=float(net.act_elems),
        t_measured_s=float(net.t_measured_s),
        ref_rate_flops=float(net.ref_rate_flops),
        filter=_split(net.filter),
        channel=_split(net.channel),
        sp_neg_prefix_min=_floats(sp.neg_prefix_min),
        sp_flops=_floats(sp.flops),
        sp_act_elems=_floats(sp.act_elems),
        sp_halo_layers=_floats(sp.halo_layers),
        sp_halo_elems=_floats(sp.halo_elems),
        sp_y_last_elems=_floats(sp.y_last_elems),
        sp_max_p=_floats(sp.max_p),
        pp_flops_max=_floats(pp.flops_max),
        pp_w_max=_floats(pp.w_max),
        pp_y_boundary_max=_floats(pp.y_boundary_max),
        pp_mem_act=[_floats(row) for row in pp.mem_act],
        pp_mem_w=[_floats(row) for row in pp.mem_w],
        **machine_fields(machine),
    )


def machine_fields(machine) -> dict:
    """The machine part of a :class:`Ref`, from a :class:`kernels.Machine` (scalar leaves)."""
    return {
        "gpu_flops": float(machine.gpu_flops),
        "efficiency": float(machine.efficiency),
        "gpu_mem_bytes": float(machine.gpu_mem_bytes),
        "gpu_mem_bw_Bps": float(machine.gpu_mem_bw_Bps),
        "gpus_per_node": float(machine.gpus_per_node),
        "nics_per_node": float(machine.nics_per_node),
        "delta": float(machine.bytes_per_element),
        "wu_passes": float(machine.wu_passes),
        "intra_alpha_s": float(machine.intra_alpha_s),
        "intra_bandwidth_Bps": float(machine.intra_bandwidth_Bps),
        "allreduce_algo": int(machine.allreduce_algo),
        "inter_span_nodes": _floats(machine.inter_span_nodes),
        "inter_alpha_s": _floats(machine.inter_alpha_s),
        "inter_bandwidth_Bps": _floats(machine.inter_bandwidth_Bps),
    }


# ---------------------------------------------------------------------------------------------
# Sections 1-3: iterations, compute, memory, collectives, links.
# ---------------------------------------------------------------------------------------------


def iterations(D: float, B: float) -> float:
    """``I = ceil(D / B)``, exact even when the float quotient rounds onto an integer."""
    q = float(math.ceil(D / B))
    if (q - 1) * B >= D:
        q -= 1
    if q * B < D:
        q += 1
    return q


def sec_per_flop(r: Ref) -> float:
    """Seconds per training FLOP: measured time scaled to the machine's rate, else 1/rate."""
    rate = r.gpu_flops * r.efficiency
    if r.t_measured_s > 0:
        return r.t_measured_s / r.flops * r.ref_rate_flops / rate
    return 1.0 / rate


def update_s(r: Ref, w_elems: float) -> float:
    """Weight update per iteration: ``wu_passes * delta * w / gpu_mem_bw``."""
    return r.wu_passes * r.delta * w_elems / r.gpu_mem_bw_Bps


def share(active: float, total: float, parts: float) -> float:
    """``sum_active / parts + sum_inactive``."""
    return active / parts + (total - active)


def memory(r: Ref, act_elems: float, w_elems: float) -> float:
    """``2 delta (activations + weights)``."""
    return 2.0 * r.delta * (act_elems + w_elems)


def ring_allreduce(p: float, m: float, alpha: float, beta: float) -> float:
    """``2(p-1)(alpha + (m/p) beta)``; 0 for p = 1."""
    if p <= 1:
        return 0.0
    return 2.0 * (p - 1) * (alpha + m * beta / p)


def ring_allgather(p: float, m: float, alpha: float, beta: float) -> float:
    """``(p-1)(alpha + (m/p) beta)``; 0 for p = 1."""
    if p <= 1:
        return 0.0
    return (p - 1) * (alpha + m * beta / p)


def gradient_allreduce(r: Ref, p: float, m: float, alpha: float, beta: float) -> float:
    """The gradient allreduce with the machine's algorithm: ring only here."""
    if r.allreduce_algo != RING:
        raise NotImplementedError(f"allreduce_algo code {r.allreduce_algo}: only ring (0) is implemented")
    return ring_allreduce(p, m, alpha, beta)


def link(r: Ref, n: float, bandwidth_share: float = 1.0) -> tuple[float, float]:
    """(alpha, beta) of a contiguous group of n GPUs: intra inside a node, else its inter level.

    The level is the first whose ``span_nodes`` >= ceil(n / gpus_per_node), the
    last one if none; ``bandwidth_share`` divides the inter-node bandwidth only.
    """
    if n <= r.gpus_per_node:
        return r.intra_alpha_s, 1.0 / r.intra_bandwidth_Bps
    nodes = math.ceil(n / r.gpus_per_node)
    level = len(r.inter_span_nodes) - 1
    for i, span in enumerate(r.inter_span_nodes):
        if span >= nodes:
            level = i
            break
    return r.inter_alpha_s[level], bandwidth_share / r.inter_bandwidth_Bps[level]


def nic_share(r: Ref, talkers: float) -> float:
    """``max(1, k / nics_per_node)``."""
    return max(1.0, talkers / r.nics_per_node)


def limit(r: Ref, mem: float, over_max_p: bool, over_batch: bool, over_data: bool) -> str:
    """First failing reason, in the order batch, max_p, dataset (B > D), memory."""
    if over_batch:
        return "batch"
    if over_max_p:
        return "max_p"
    if over_data:
        return "dataset"
    if mem > r.gpu_mem_bytes:
        return "memory"
    return ""


def _result(its, comp, allreduce=0.0, allgather=0.0, halo=0.0, p2p=0.0, mem=0.0, why="") -> dict:
    return {
        "t_comp_s": comp,
        "t_allreduce_s": allreduce,
        "t_allgather_s": allgather,
        "t_halo_s": halo,
        "t_p2p_s": p2p,
        "mem_bytes": mem,
        "iterations": its,
        "limit": why,
    }


# ---------------------------------------------------------------------------------------------
# Section 4: one function per strategy.
# ---------------------------------------------------------------------------------------------


def serial(r: Ref, p: float, b: float, p2: float, S: float) -> dict:
    """comp ``D sum(t) + I sum(u)``; mem ``2 delta A(B) + 2W``; B = b, p = 1."""
    B = b
    its = iterations(r.D, B)
    comp = r.D * r.flops * sec_per_flop(r) + its * update_s(r, r.w_elems)
    mem = memory(r, B * r.act_elems, r.w_elems)
    return _result(its, comp, mem=mem, why=limit(r, mem, False, B < 1, B > r.D))


def data(r: Ref, p: float, b: float, p2: float, S: float) -> dict:
    """B = b p; comp ``(D/p) sum(t) + I sum(u)``; comm ``I T_ar(p, W)``; mem ``2 delta A(b) + 2W``."""
    B = b * p
    its = iterations(r.D, B)
    comp = r.D / p * r.flops * sec_per_flop(r) + its * update_s(r, r.w_elems)
    alpha, beta = link(r, p)
    allreduce = its * gradient_allreduce(r, p, r.delta * r.w_elems, alpha, beta)
    mem = memory(r, b * r.act_elems, r.w_elems)
    return _result(its, comp, allreduce=allreduce, mem=mem, why=limit(r, mem, p < 1, p > B, B > r.D))


def _spatial_row(r: Ref, n: float) -> int:
    """Table row of a group of n GPUs: the number of default-prefix layers with extents >= n."""
    return bisect.bisect_right(r.sp_neg_prefix_min, -n)


def _spatial_comm(r: Ref, row: int, n: float, batch: float, alpha: float, beta: float):
    """(halo, allgather) per iteration of a spatial group of n GPUs on ``batch`` samples."""
    if n > 1:
        halo = 2.0 * (2.0 * r.sp_halo_layers[row] * alpha + batch * r.delta * r.sp_halo_elems[row] * beta)
    else:
        halo = 0.0  # one GPU: no neighbours
    gather = 2.0 * ring_allgather(n, batch * r.delta * r.sp_y_last_elems[row], alpha, beta)
    return halo, gather


def _spatial_mem(r: Ref, row: int, n: float, batch: float) -> float:
    return memory(r, batch * share(r.sp_act_elems[row], r.act_elems, n), r.w_elems)


def spatial(r: Ref, p: float, b: float, p2: float, S: float) -> dict:
    """B = b; the active layers' first spatial dimension split over p GPUs."""
    B = b
    its = iterations(r.D, B)
    row = _spatial_row(r, p)
    comp = r.D * share(r.sp_flops[row], r.flops, p) * sec_per_flop(r) + its * update_s(r, r.w_elems)
    alpha, beta = link(r, p)
    halo, gather = _spatial_comm(r, row, p, B, alpha, beta)
    allreduce = gradient_allreduce(r, p, r.delta * r.w_elems, alpha, beta)
    mem = _spatial_mem(r, row, p, B)
    over_max_p = p > r.sp_max_p[row] or p < 1
    return _result(
        its,
        comp,
        allreduce=its * allreduce,
        allgather=its * gather,
        halo=its * halo,
        mem=mem,
        why=limit(r, mem, over_max_p, B < 1, B > r.D),
    )


def pipeline(r: Ref, p: float, b: float, p2: float, S: float) -> dict:
    """GPipe: p stages of the min-max partition, S micro-batches of B/S samples; B = b."""
    B = b
    its = iterations(r.D, B)
    G = len(r.pp_flops_max) - 1
    row = min(max(int(p), 1), G)  # terms of p > G are those of G stages (and max_p)
    tmax = r.pp_flops_max[row] * sec_per_flop(r)
    umax = update_s(r, r.pp_w_max[row])
    comp = r.D * (p + S - 1) / S * tmax + its * umax
    if p > 1:
        if p <= r.gpus_per_node:
            alpha, beta = r.intra_alpha_s, 1.0 / r.intra_bandwidth_Bps
        else:
            alpha, beta = r.inter_alpha_s[0], 1.0 / r.inter_bandwidth_Bps[0]
        hop = alpha + B / S * r.delta * r.pp_y_boundary_max[row] * beta
        p2p = its * 2.0 * (p + S - 2) * hop
    else:
        p2p = 0.0
    mem = max(2.0 * r.delta * (B * a + w) for a, w in zip(r.pp_mem_act[row], r.pp_mem_w[row], strict=True))
    why = limit(r, mem, p > r.G or p < 1, S > B or S < 1, B > r.D)
    return _result(its, comp, p2p=p2p, mem=mem, why=why)


def _split_channels(r: Ref, sums: Split, p: float, b: float) -> dict:
    B = b
    its = iterations(r.D, B)
    shard_w = share(sums.w_elems, r.w_elems, p)
    comp = r.D * share(sums.flops, r.flops, p) * sec_per_flop(r) + its * update_s(r, shard_w)
    alpha, beta = link(r, p)
    # per active layer l < G: T_ag(p, B delta y_l) + T_ar(p, B delta y_l), summed over layers
    msg = B * r.delta * sums.comm_y_elems
    gather = ring_allgather(p, msg, sums.comm_layers * alpha, beta)
    reduce = ring_allreduce(p, msg, sums.comm_layers * alpha, beta)
    mem = memory(r, B * r.act_elems, shard_w)
    return _result(
        its,
        comp,
        allreduce=its * reduce,
        allgather=its * gather,
        mem=mem,
        why=limit(r, mem, p > sums.max_p or p < 1, B < 1, B > r.D),
    )


def filter_(r: Ref, p: float, b: float, p2: float, S: float) -> dict:
    """B = b; each active layer's F output channels split over p."""
    return _split_channels(r, r.filter, p, b)


def channel(r: Ref, p: float, b: float, p2: float, S: float) -> dict:
    """B = b; each active layer's C input channels split over p (same sums as filter)."""
    return _split_channels(r, r.channel, p, b)


def _grouping(p: float, p2: float) -> tuple[float, bool]:
    """(p1, misfit): p1 = max(p/p2, 1); misfit when p2 < 1, p < p2 or p2 does not divide p."""
    misfit = p2 < 1 or p < p2 or round(p / p2) * p2 != p
    return max(p / p2, 1.0), misfit


def data_filter(r: Ref, p: float, b: float, p2: float, S: float) -> dict:
    """Filter inside groups of p2, data across p1 = p/p2 groups; B = b p1."""
    p1, misfit = _grouping(p, p2)
    B = b * p1
    its = iterations(r.D, B)
    sums = r.filter
    shard_w = share(sums.w_elems, r.w_elems, p2)
    comp = r.D / p1 * share(sums.flops, r.flops, p2) * sec_per_flop(r) + its * update_s(r, shard_w)
    alpha2, beta2 = link(r, p2)
    msg = b * r.delta * sums.comm_y_elems
    gather = ring_allgather(p2, msg, sums.comm_layers * alpha2, beta2)
    reduce = ring_allreduce(p2, msg, sums.comm_layers * alpha2, beta2)
    # every GPU of a node is in an inter-group ring at once: NICs shared by gpus_per_node
    alpha, beta = link(r, p, nic_share(r, r.gpus_per_node))
    grad = gradient_allreduce(r, p1, r.delta * shard_w, alpha, beta)
    mem = memory(r, b * r.act_elems, shard_w)
    return _result(
        its,
        comp,
        allreduce=its * (reduce + grad),
        allgather=its * gather,
        mem=mem,
        why=limit(r, mem, misfit or p2 > sums.max_p, b < 1, B > r.D),
    )


def data_spatial(r: Ref, p: float, b: float, p2: float, S: float) -> dict:
    """Spatial inside groups of p2, data across p1 = p/p2 groups; B = b p1."""
    p1, misfit = _grouping(p, p2)
    B = b * p1
    its = iterations(r.D, B)
    row = _spatial_row(r, p2)
    comp = r.D / p1 * share(r.sp_flops[row], r.flops, p2) * sec_per_flop(r) + its * update_s(r, r.w_elems)
    alpha2, beta2 = link(r, p2)
    halo, gather = _spatial_comm(r, row, p2, b, alpha2, beta2)
    leaders = max(1.0, r.gpus_per_node / p2)  # group leaders per node talking off-node at once
    alpha, beta = link(r, p, nic_share(r, leaders))
    weight_bytes = r.delta * r.w_elems
    grad = gradient_allreduce(r, p2, weight_bytes, alpha2, beta2) + gradient_allreduce(
        r, p1, weight_bytes, alpha, beta
    )
    mem = _spatial_mem(r, row, p2, b)
    over_max_p = misfit or p2 > r.sp_max_p[row] or p2 < 1
    return _result(
        its,
        comp,
        allreduce=its * grad,
        allgather=its * gather,
        halo=its * halo,
        mem=mem,
        why=limit(r, mem, over_max_p, b < 1, B > r.D),
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


def evaluate(ref: Ref, strategy: str, p, b, p2=1, S=1) -> dict:
    """Per-epoch terms of one configuration (docs/model.md §10 and §12).

    Returns ``t_comp_s, t_allreduce_s, t_allgather_s, t_halo_s, t_p2p_s,
    mem_bytes, iterations`` as floats and ``limit`` as one of
    ``'', 'memory', 'max_p', 'batch'``. ``p2`` is used by the hybrids only,
    ``S`` by pipeline only.
    """
    try:
        fn = STRATEGIES[strategy]
    except KeyError:
        raise ValueError(f"unknown strategy '{strategy}' (one of {', '.join(STRATEGIES)})") from None
    return fn(ref, float(p), float(b), float(p2), float(S))
