"""Hybrid strategies: data+filter and data+spatial (docs/model.md §10.7 and §10.8).

Their inter-group gradient allreduce is already hierarchical by construction
(docs/model.md §14), so ``allreduce_algo = hierarchical`` falls back to ring for
it; ring, tree and auto apply as for the pure strategies.

p = p1 * p2: the model-parallel strategy runs inside groups of p2 GPUs (by
default one node), data parallelism across the p1 groups, B = b * p1. They
reuse the pure strategies' pieces: :func:`~kernels.strategies.filter.layerwise_traffic`
and :func:`~kernels.strategies.spatial.spatial_traffic`.
"""

from __future__ import annotations

import jax.numpy as jnp

from kernels import collectives, terms
from kernels import machine as mach
from kernels.machine import Machine
from kernels.network import Net
from kernels.strategies.filter import layerwise_traffic
from kernels.strategies.spatial import spatial_memory, spatial_share, spatial_traffic
from kernels.terms import Config, Cost


def _grouping(cfg: Config):
    """(p1, p2, misfit): misfit when p2 does not divide p, or p < p2 (docs/model.md §2)."""
    p, p2 = cfg.p, cfg.p2
    misfit = (p2 < 1) | (p < p2) | (jnp.round(p / p2) * p2 != p)
    # misfit rows are infeasible (max_p); p1 >= 1 keeps their terms non-negative
    p1 = jnp.maximum(p / p2, 1.0)
    return p1, p2, misfit


def data_filter(net: Net, machine: Machine, cfg: Config) -> Cost:
    """Data+filter, docs/model.md §10.7.

    .. math::
        T_{comp} = \\tfrac{D}{p_1}(\\textstyle\\sum_a t/p_2 + \\sum_i t)
                   + I(\\sum_a u/p_2 + \\sum_i u)

        T_{comm} = I\\,[\\sum_{a,l<G} 3(p_2-1)(\\alpha_{p_2} + b\\delta y_l\\beta_{p_2}/p_2)
                   + T_{ar}(p_1, \\delta(\\sum_a w/p_2 + \\sum_i w))]

        M = 2\\delta A(b) + 2\\delta(\\sum_a w/p_2 + \\sum_i w)

    The inter-group allreduce uses the link of all p GPUs with the
    inter-node bandwidth divided by ``max(1, gpus_per_node/nics_per_node)``
    (every GPU of a node is in such a ring at once).
    """
    p1, p2, misfit = _grouping(cfg)
    big_b = cfg.b * p1
    its = terms.iterations(net.dataset_samples, big_b)
    sums = net.filter
    shard_w = terms.split_sum(sums.w_elems, net.w_elems, p2)
    comp = net.dataset_samples / p1 * terms.split_sample_s(
        net, machine, sums.flops, sums.flops_kind, sums.traffic_kind, p2
    ) + its * terms.update_s(machine, shard_w)
    delta = machine.bytes_per_element
    intra = layerwise_traffic(sums, p2, cfg.b, delta, mach.link(machine, p2))
    inter_lk = mach.link(machine, cfg.p, mach.nic_share(machine, machine.gpus_per_node))
    grad = collectives.allreduce_s(machine.allreduce_algo, p1, delta * shard_w, *inter_lk)
    mem = terms.replica_memory(machine, net, cfg.b, shard_w)
    zero = terms.zeros_like(comp)
    return Cost(
        p=cfg.p,
        p1=p1,
        p2=p2,
        b=cfg.b,
        B=big_b,
        S=jnp.ones_like(p1),
        iterations=its,
        t_comp_s=comp,
        t_allreduce_s=its * (intra.allreduce_s + grad),
        t_allgather_s=its * intra.allgather_s,
        t_halo_s=zero,
        t_p2p_s=zero,
        mem_bytes=mem,
        limit=terms.limit_code(
            machine, mem, misfit | (p2 > sums.max_p), cfg.b < 1, terms.over_dataset(net, big_b)
        ),
    )


def data_spatial(net: Net, machine: Machine, cfg: Config) -> Cost:
    """Data+spatial, docs/model.md §10.8.

    .. math::
        T_{comp} = \\tfrac{D}{p_1}(\\textstyle\\sum_a t/p_2 + \\sum_i t) + I\\sum u

        T_{comm} = I\\,[T_{halo}(b) + 2T_{ag}(p_2, b\\delta y_{last})
                   + T_{ar}(p_2, W) + T_{ar}(p_1, W)]

        M = 2\\delta(b\\textstyle\\sum_a(x+y)/p_2 + b\\sum_i(x+y)) + 2W

    Halo, allgather and the intra-group allreduce use the link of p2 GPUs; the
    leaders' allreduce uses the link of all p GPUs, the inter-node bandwidth
    divided by ``max(1, k/nics_per_node)`` with ``k = max(1, gpus_per_node/p2)``
    leaders per node. The active layers follow the group size p2.
    """
    p1, p2, misfit = _grouping(cfg)
    big_b = cfg.b * p1
    its = terms.iterations(net.dataset_samples, big_b)
    share = spatial_share(net.spatial, p2)
    comp = net.dataset_samples / p1 * terms.split_sample_s(
        net, machine, share.flops, share.flops_kind, share.traffic_kind, p2
    ) + its * terms.update_s(machine, net.w_elems)
    delta = machine.bytes_per_element
    weight_bytes = delta * net.w_elems
    group_lk = mach.link(machine, p2)
    traffic = spatial_traffic(share, p2, cfg.b, delta, group_lk)
    leaders = jnp.maximum(1.0, machine.gpus_per_node / p2)
    inter_lk = mach.link(machine, cfg.p, mach.nic_share(machine, leaders))
    algo = machine.allreduce_algo
    grad = collectives.allreduce_s(algo, p2, weight_bytes, *group_lk) + collectives.allreduce_s(
        algo, p1, weight_bytes, *inter_lk
    )
    mem = spatial_memory(machine, net, share, p2, cfg.b)
    return Cost(
        p=cfg.p,
        p1=p1,
        p2=p2,
        b=cfg.b,
        B=big_b,
        S=jnp.ones_like(p1),
        iterations=its,
        t_comp_s=comp,
        t_allreduce_s=its * grad,
        t_allgather_s=its * traffic.allgather_s,
        t_halo_s=its * traffic.halo_s,
        t_p2p_s=terms.zeros_like(comp),
        mem_bytes=mem,
        limit=terms.limit_code(
            machine, mem, misfit | share.over_max_p, cfg.b < 1, terms.over_dataset(net, big_b)
        ),
    )
