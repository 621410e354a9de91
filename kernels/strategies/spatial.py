"""Spatial parallelism (docs/model.md §10.3)."""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from kernels import collectives, terms
from kernels import machine as mach
from kernels._types import Array
from kernels.machine import Link, Machine
from kernels.network import Net, SpatialTable
from kernels.terms import Config, Cost


class SpatialShare(NamedTuple):
    """The active layers of a spatial group of n GPUs, read from the table."""

    flops: Array
    act_elems: Array
    halo_layers: Array
    halo_elems: Array
    y_last_elems: Array
    over_max_p: Array
    flops_kind: Array
    traffic_kind: Array
    saved_elems: Array
    work_active: Array
    work_rest: Array


def spatial_share(table: SpatialTable, n) -> SpatialShare:
    """Active-layer sums for a group of ``n`` GPUs, docs/model.md §9.

    Default: the longest prefix before the first fc layer whose extents
    x[1], y[1] are all >= n (a table row per prefix length, found by binary
    search). With a fixed override the table has one row. A group that can
    split no layer, or exceeds the smallest split extent, is over ``max_p``.
    """
    row = jnp.searchsorted(table.neg_prefix_min, -n, side="right")
    return SpatialShare(
        flops=table.flops[row],
        act_elems=table.act_elems[row],
        halo_layers=table.halo_layers[row],
        halo_elems=table.halo_elems[row],
        y_last_elems=table.y_last_elems[row],
        over_max_p=(n > table.max_p[row]) | (n < 1),
        flops_kind=table.flops_kind[row],
        traffic_kind=table.traffic_kind[row],
        saved_elems=table.saved_elems[row],
        work_active=table.work_active[row],
        work_rest=table.work_rest[row],
    )


class SpatialTraffic(NamedTuple):
    """Per-iteration halo exchange and exit allgather of a spatial group."""

    halo_s: Array
    allgather_s: Array


def spatial_traffic(share: SpatialShare, n, batch, delta, lk: Link) -> SpatialTraffic:
    """Spatial exchange per iteration for ``batch`` samples, docs/model.md §10.3.

    .. math::
        T_{halo} = \\sum_{active, h>0} 2[(\\alpha + B\\delta\\,halo_x\\beta)
                   + (\\alpha + B\\delta\\,halo_{dy}\\beta)],\\quad
        T_{ag} = 2\\,T_{ag}(n, B\\delta y_{last})

    A group of one GPU has no neighbours and exchanges nothing.
    """
    halo = 2.0 * (
        2.0 * share.halo_layers * lk.alpha_s
        + collectives.p2p_s(batch * delta * share.halo_elems, 0.0, lk.beta_s_per_byte)
    )
    halo = jnp.where(n > 1, halo, 0.0)
    gather = 2.0 * collectives.ring_allgather_s(
        n, batch * delta * share.y_last_elems, lk.alpha_s, lk.beta_s_per_byte
    )
    return SpatialTraffic(halo, gather)


def spatial_memory(machine: Machine, net: Net, share: SpatialShare, n, batch):
    """Memory of one GPU of a spatial group of ``n``, docs/model.md §10.3.

    ParaDL's ``2 delta (B sum_a(x+y)/n + B sum_i(x+y)) + 2W``; for training
    (§6.2) the kept activations split the same way, and the workspace is the
    larger of an active layer's share and a whole inactive layer.
    """
    act = batch * terms.split_sum(share.act_elems, net.act_elems, n)
    saved = batch * terms.split_sum(share.saved_elems, net.saved_elems, n)
    work = batch * jnp.maximum(share.work_active / n, share.work_rest)
    return terms.choose_memory(
        machine,
        terms.memory_bytes(machine, act, net.w_elems),
        terms.training_memory_bytes(machine, saved, work, net.w_elems),
    )


def spatial(net: Net, machine: Machine, cfg: Config) -> Cost:
    """Spatial parallel, docs/model.md §10.3: p GPUs split the active layers' first spatial dim.

    .. math::
        T_{comp} = D(\\textstyle\\sum_a t/p + \\sum_i t) + I\\sum u,\\quad
        T_{comm} = I\\,[T_{halo} + 2T_{ag}(p, B\\delta y_{last}) + T_{ar}(p, W)]

    B = b, all on the link of the p GPUs.
    """
    p = cfg.p
    big_b = cfg.b
    its = terms.iterations(net.dataset_samples, big_b)
    share = spatial_share(net.spatial, p)
    comp = net.dataset_samples * terms.split_sample_s(
        net, machine, share.flops, share.flops_kind, share.traffic_kind, p
    ) + its * terms.update_s(machine, net.w_elems)
    lk = mach.link(machine, p)
    delta = machine.bytes_per_element
    traffic = spatial_traffic(share, p, big_b, delta, lk)
    allreduce = mach.gradient_allreduce_s(machine, p, delta * net.w_elems, lk)
    mem = spatial_memory(machine, net, share, p, big_b)
    one = jnp.ones_like(p)
    return Cost(
        p=p,
        p1=one,
        p2=p,
        b=cfg.b,
        B=big_b,
        S=one,
        iterations=its,
        t_comp_s=comp,
        t_allreduce_s=its * allreduce,
        t_allgather_s=its * traffic.allgather_s,
        t_halo_s=its * traffic.halo_s,
        t_p2p_s=terms.zeros_like(comp),
        mem_bytes=mem,
        limit=terms.limit_code(machine, mem, share.over_max_p, big_b < 1, terms.over_dataset(net, big_b)),
    )
