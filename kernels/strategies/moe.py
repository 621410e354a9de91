"""A mixture of experts under data+tensor+pipeline parallelism with expert parallelism
(docs/model.md §17): what :mod:`kernels.strategies.megatron` adds for the expert layers.

Megatron-Core's expert parallelism regroups the ``n = p / pp`` GPUs of a pipeline stage (its
``tp x dp`` ranks) for the expert layers into ``etp x ep x edp``, etp fastest: each expert's FFN
is split over ``etp`` GPUs, the experts over ``ep`` of those groups (``E / ep`` per GPU), and
``edp = n / (ep etp)`` replicas of the experts reduce their gradients. Tensor parallelism with
experts runs sequence-parallel, each of the tp ranks routing its own ``1/tp`` of the tokens, so
the expert layers' FLOPs and activations are split over tp (:mod:`kernels.transformer`'s lines)
and their GEMMs see the tokens of the ``ep etp`` GPUs that share their experts.

Per micro-batch the tokens go to their experts and back by all-to-alls over the ep group (it
spans ``ep etp`` consecutive GPUs: NVLink while they fit a node, else partly the NICs), each
GPU's message its ``micro s k / tp`` token copies of ``h`` elements; with etp > 1 the etp group
all-gathers the tokens after the dispatch and reduce-scatters them before the combine. The
busiest expert's load over the mean (``moe_imbalance``) stretches the expert GEMMs and the
all-to-alls. Pure JAX, no I/O.
"""

from __future__ import annotations

import jax.numpy as jnp

from kernels import collectives
from kernels import machine as mach
from kernels.machine import Machine
from kernels.network import Net


def group(own):
    """GPUs of an expert-parallel group: ``ep etp``."""
    return own.ep * own.etp


def weights(net: Net, row, own):
    """The largest stage's expert weights one GPU holds: ``1 / (ep etp)`` of them."""
    return net.transformer.moe.w[row] / group(own)


def replicas(p, own):
    """The expert-data-parallel replicas ``edp = (p / pp) / (ep etp)``, at least 1."""
    return jnp.maximum(p / own.pp / group(own), 1.0)


def alltoall_s(machine: Machine, net: Net, mode, row, own, micro_bytes):
    """One micro-batch's dispatches and combines on the largest stage (module docstring):
    ``n`` all-to-alls of ``micro_bytes e / (n tp)`` bytes per GPU over ep, with etp > 1 an
    all-gather and a reduce-scatter of ``etp`` times that over etp each, times ``moe_imbalance``;
    0 without experts."""
    table = net.transformer.moe
    count, elems = table.a2a_count[mode, row], table.a2a_elems[mode, row]
    each = micro_bytes * elems / jnp.maximum(count, 1.0) / own.tp
    span = group(own)
    # every GPU of a node takes part, sharing the node's NICs; ep members per node: etp apart
    share = mach.nic_share(machine, machine.gpus_per_node)
    out = mach.link(machine, span, share)
    local = jnp.maximum(jnp.floor(machine.gpus_per_node / own.etp), 1.0)
    a2a = collectives.alltoall_s(
        own.ep, local, each, machine.intra_alpha_s, 1.0 / machine.intra_bandwidth_Bps, *out
    )
    gather = collectives.ring_allgather_s(
        own.etp, each * own.etp, *mach.link(machine, own.etp, 1.0 / machine.nics_per_node)
    )
    return jnp.where(count > 0, count * (a2a + gather) * machine.moe_imbalance, 0.0)


def gradient_s(machine: Machine, p, own, msg_bytes):
    """The expert weights' gradient reduction per iteration over the edp replicas: an all-reduce
    (a reduce-scatter with ZeRO-2/3), the group ``ep etp`` GPUs apart and spanning the stage's
    ``p / pp``; the ``min(ep etp, gpus_per_node)`` groups with members on a node share its NICs.
    0 without expert weights."""
    n = replicas(p, own)
    share = jnp.minimum(group(own), machine.gpus_per_node) / machine.nics_per_node
    lk = mach.link(machine, p / own.pp, share)
    full = collectives.allreduce_s(machine.allreduce_algo, n, msg_bytes, *lk)
    scatter = collectives.ring_reduce_scatter_s(n, msg_bytes, *lk)
    return jnp.where(msg_bytes > 0, jnp.where(own.zero >= 2, scatter, full), 0.0)
