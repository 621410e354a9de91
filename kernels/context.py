"""Context parallelism of data+tensor+pipeline (docs/model.md §20): the sequence split over
``cp`` GPUs and ring attention's exposed time.

Each of a replica's ``cp`` context-parallel ranks holds ``s / cp`` tokens of every sample, in
Megatron-Core's and torchtitan's load-balanced causal split: the sequence cut into ``2 cp``
chunks, rank i holding chunks i and ``2 cp - 1 - i``, so that every rank's causal attention
work is the same. Every per-token quantity (the linear layers' FLOPs, the activations, the
memory-bound traffic, the tensor-parallel collectives, the pipeline's sends) is divided by cp,
and so is the ``s^2`` attention core: each rank computes its ``s / cp`` queries against all
``s`` keys, its share of the whole's work. The kernel takes a rank's share of a micro-batch,
``b / (S cp)`` samples, for the micro-batch (:func:`share`).

Ring attention (Transformer Engine's ``AttnFuncWithCPAndKVP2P``, which Megatron-Core calls):
per attention layer and micro-batch, ``cp - 1`` steps each send the keys and values of one
rank's ``s / cp`` tokens (``2 g d / tp`` elements per token: g key/value heads of d features,
split over tp) to the next rank of the ring and receive the previous rank's, while the rank
computes its queries against the chunk it holds. The backward pass runs the ring again, each
step sending the keys and values and the gradients accumulated for them (twice the bytes)
beside the step's backward compute (twice the forward's); full recomputation runs the
forward's ring once more. With the causal load balancing each step's compute is ``1 / cp`` of
the rank's attention work, on every rank alike, so a step exposes only what its transfer
outlasts that compute.
"""

from __future__ import annotations

import jax.numpy as jnp

from kernels import collectives
from kernels import machine as mach
from kernels.machine import Machine
from kernels.names import KINDS
from kernels.network import Net
from kernels.transformer import CORE

_ATTENTION = KINDS.index("attention")


def share(micro, cp):
    """A rank's share of a micro-batch of ``micro`` samples, in samples: ``micro / cp``."""
    return micro / cp


def gradient_group(dp, cp):
    """The ranks that reduce (and ZeRO shards) a weight's gradients: the ``dp`` replicas' ``cp``
    context-parallel ranks each, ``dp cp`` (Megatron-Core's data-parallel group with context
    parallelism; torchtitan's ``dp_shard_cp`` mesh)."""
    return dp * cp


def kv_elements(net: Net):
    """Key and value elements per token of one attention layer, ``2 g d`` (g key/value heads,
    d = h / a features per head), from the attention cores' GEMM shapes (h, a, s) and the
    key/value heads of the table; 0 without attention."""
    table = net.transformer
    shape = table.gemm_shape
    per = 2.0 * table.heads * shape[:, 1] / jnp.maximum(shape[:, 2], 1.0)
    return jnp.max(jnp.where(shape[:, 0] == CORE, per, 0.0))


def attention_flops(net: Net, row, z):
    """Training FLOPs per sample of the attention cores on the stage that has the most of them
    (no recomputation), after tp's split (the cores split their heads)."""
    lines = net.transformer.flops_kind[0, row, ..., _ATTENTION]
    return jnp.max(lines[..., 0] - lines[..., 1] * z)


def ring_s(net: Net, machine: Machine, own, row, z, micro, delta, mode):
    """Ring attention's exposed time per micro-batch on a rank of the largest stage
    (docs/model.md §20); ``micro`` is the rank's share of the micro-batch (:func:`share`),
    ``mode`` the recomputation code (2: full recomputation runs the forward's ring again).

    .. math::
        m = \\mu\\, s\\, \\tfrac{2 g d}{tp}\\, \\delta, \\quad
        c = \\frac{\\mu F_{att}}{3\\,L\\,cp\\,R_{att}}, \\quad
        T = L\\,(cp - 1)\\,[(1 + [r = full])\\max(0, t(m) - c) + \\max(0, t(2m) - 2c)]

    with ``mu`` the rank's share of the micro-batch in samples, s the sequence, ``F_att`` the
    stage's attention training FLOPs per sample (:func:`attention_flops`, the forward a third),
    L the stage's attention layers (one per block), ``R_att`` the attention rate and
    ``t(m) = alpha + m beta`` a send on the cp group's link. Ranks are ordered tp fastest, then
    cp (Megatron-Core's ``tp-cp-ep-dp-pp``): a cp group is ``cp`` GPUs ``tp`` apart, spanning
    ``tp cp``; where it leaves a node, the ``min(tp, gpus_per_node)`` rings with members on a
    node send through its NICs at once. Zero for cp = 1."""
    cp, tp = own.cp, own.tp
    tokens = net.tokens
    chunk = micro * tokens * kv_elements(net) / tp * delta
    share_nics = jnp.minimum(tp, machine.gpus_per_node) / machine.nics_per_node
    lk = mach.link(machine, tp * cp, share_nics)
    layers = jnp.maximum(jnp.ceil(net.n_stages / own.pp), 1.0)
    rate = machine.gpu_flops * machine.efficiency * machine.kind_efficiency[_ATTENTION]
    step = micro * attention_flops(net, row, z) / (3.0 * layers * cp * rate)
    forward = jnp.maximum(collectives.p2p_s(chunk, *lk) - step, 0.0)
    backward = jnp.maximum(collectives.p2p_s(2.0 * chunk, *lk) - 2.0 * step, 0.0)
    again = jnp.where(mode == 2, 1.0, 0.0)
    return jnp.where(cp > 1, layers * (cp - 1.0) * ((1.0 + again) * forward + backward), 0.0)
