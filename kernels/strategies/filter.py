"""Filter and channel parallelism (docs/model.md §10.5 and §10.6)."""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp

from kernels import collectives, terms
from kernels import machine as mach
from kernels._types import Array
from kernels.machine import Link, Machine
from kernels.network import Net, SplitSums
from kernels.terms import Config, Cost


class LayerwiseTraffic(NamedTuple):
    """Per-iteration layer-wise exchange of filter/channel parallelism."""

    allgather_s: Array
    allreduce_s: Array


def layerwise_traffic(sums: SplitSums, p, batch, delta, lk: Link) -> LayerwiseTraffic:
    """Filter/channel exchange per iteration, docs/model.md §10.5.

    After every active layer l < G one allgather and one allreduce of the
    layer's output for ``batch`` samples (filter: gather outputs forward,
    reduce input gradients backward; channel: the reverse order):

    .. math:: \\sum_{active, l<G} T_{ag}(p, B\\delta y_l) + T_{ar}(p, B\\delta y_l)
              = \\sum 3(p-1)(\\alpha + B\\delta y_l \\beta / p)

    Each collective is summed over layers as ``n*alpha`` plus the total bytes,
    which is the same sum term by term.
    """
    msg = batch * delta * sums.comm_y_elems
    # ring_allgather_s is linear in (alpha, m): n layers' alphas and their summed bytes.
    ag = collectives.ring_allgather_s(p, msg, sums.comm_layers * lk.alpha_s, lk.beta_s_per_byte)
    ar = collectives.ring_allreduce_s(p, msg, sums.comm_layers * lk.alpha_s, lk.beta_s_per_byte)
    return LayerwiseTraffic(ag, ar)


def _split_channels(net: Net, machine: Machine, cfg: Config, sums: SplitSums) -> Cost:
    p = cfg.p
    big_b = cfg.b
    its = terms.iterations(net.dataset_samples, big_b)
    per_sample = terms.split_sample_s(net, machine, sums.flops, sums.flops_kind, sums.traffic_kind, p)
    comp = net.dataset_samples * per_sample + its * (
        terms.update_s(machine, terms.split_sum(sums.w_elems, net.w_elems, p))
    )
    traffic = layerwise_traffic(sums, p, big_b, machine.bytes_per_element, mach.link(machine, p))
    mem = terms.replica_memory(machine, net, big_b, terms.split_sum(sums.w_elems, net.w_elems, p))
    zero = terms.zeros_like(comp)
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
        t_allreduce_s=its * traffic.allreduce_s,
        t_allgather_s=its * traffic.allgather_s,
        t_halo_s=zero,
        t_p2p_s=zero,
        mem_bytes=mem,
        limit=terms.limit_code(
            machine, mem, (p > sums.max_p) | (p < 1), big_b < 1, terms.over_dataset(net, big_b)
        ),
    )


def filter_(net: Net, machine: Machine, cfg: Config) -> Cost:
    """Filter parallel, docs/model.md §10.5: each active layer's F output channels split over p.

    .. math::
        T_{comp} = D(\\textstyle\\sum_a t/p + \\sum_i t) + I(\\sum_a u/p + \\sum_i u),\\quad
        M = 2\\delta A(B) + 2\\delta(\\sum_a w/p + \\sum_i w)

    B = b; needs p <= min F over active layers.
    """
    return _split_channels(net, machine, cfg, net.filter)


def channel(net: Net, machine: Machine, cfg: Config) -> Cost:
    """Channel parallel, docs/model.md §10.6: as filter with the C input channels split.

    Same compute, memory and total communication as filter over the channel
    active set; needs p <= min C over active layers other than the first.
    """
    return _split_channels(net, machine, cfg, net.channel)
