"""Collective-communication costs in the alpha-beta model (docs/model.md §7).

Every function takes the TOTAL message size ``m`` in bytes (the whole buffer
being reduced or gathered), a group size ``p``, the per-message latency
``alpha_s`` and the inverse bandwidth ``beta_s_per_byte``. All are plain array
math, so they trace under ``jit``/``vmap`` with any argument batched. A group
of one GPU costs nothing.

Reference: Thakur, Rabenseifner, Gropp, "Optimization of collective
communication operations in MPICH" (IJHPCA 2005), ring algorithms as in NCCL.
"""

from __future__ import annotations

import jax.numpy as jnp

# Codes of the gradient-allreduce algorithm, a scalar machine parameter.
RING, TREE, AUTO, HIERARCHICAL = 0, 1, 2, 3
ALLREDUCE_ALGOS = {"ring": RING, "tree": TREE, "auto": AUTO, "hierarchical": HIERARCHICAL}


def p2p_s(msg_bytes, alpha_s, beta_s_per_byte):
    """Point-to-point message, docs/model.md §7: ``alpha + m*beta``."""
    return alpha_s + msg_bytes * beta_s_per_byte


def ring_allreduce_s(p, msg_bytes, alpha_s, beta_s_per_byte):
    """Ring allreduce, docs/model.md §7: ``2(p-1)(alpha + (m/p)*beta)``; 0 for p = 1."""
    return 2.0 * (p - 1) * (alpha_s + msg_bytes * beta_s_per_byte / p)


def ring_allgather_s(p, msg_bytes, alpha_s, beta_s_per_byte):
    """Ring allgather (and reduce-scatter), docs/model.md §7: ``(p-1)(alpha + (m/p)*beta)``."""
    return (p - 1) * (alpha_s + msg_bytes * beta_s_per_byte / p)


ring_reduce_scatter_s = ring_allgather_s


def alltoall_s(p, local, msg_bytes, intra_alpha_s, intra_beta, inter_alpha_s, inter_beta):
    """All-to-all of ``m`` bytes per GPU over ``p`` GPUs, ``local`` of them in each node
    (docs/model.md §17): each GPU sends ``m / p`` to each of the other ``p - 1`` (pairwise
    exchange, as NCCL's all-to-all of point-to-point sends); the ``local - 1`` peers in its node
    over the intra-node link, the ``p - local`` others over the inter-node link at once.

    .. math:: T = \\max\\big((l-1)(\\alpha_{in} + \\tfrac{m}{p}\\beta_{in}),\\;
              (p-l)(\\alpha_{out} + \\tfrac{m}{p}\\beta_{out})\\big),\\quad l = \\min(local, p)

    0 for p = 1; a group inside one node (``local >= p``) is ``(p-1)(alpha + (m/p) beta)``, the
    ring all-gather's time.
    """
    local = jnp.clip(local, 1, p)
    inside = (local - 1) * (intra_alpha_s + msg_bytes * intra_beta / p)
    outside = (p - local) * (inter_alpha_s + msg_bytes * inter_beta / p)
    return jnp.maximum(inside, outside)


def tree_allreduce_s(p, msg_bytes, alpha_s, beta_s_per_byte):
    """Binary-tree allreduce, docs/model.md §7 (beyond the paper): ``log2(p)(alpha + m*beta)``."""
    return jnp.log2(jnp.maximum(p, 1)) * (alpha_s + msg_bytes * beta_s_per_byte)


def hierarchical_allreduce_s(p, g, msg_bytes, intra_alpha_s, intra_beta, inter_alpha_s, inter_beta):
    """Hierarchical allreduce, docs/model.md §7 (beyond the paper).

    Intra-node ring reduce-scatter over ``g`` GPUs, inter-node ring allreduce
    of ``m/g`` bytes over ``p/g`` nodes, intra-node ring allgather. ``g`` is
    clipped to ``[1, p]``, so a group inside one node is a plain intra ring.

    .. math:: T = T_{rs}(g, m) + T_{ar}(p/g, m/g) + T_{ag}(g, m)
    """
    g = jnp.clip(g, 1, p)
    return (
        ring_reduce_scatter_s(g, msg_bytes, intra_alpha_s, intra_beta)
        + ring_allreduce_s(p / g, msg_bytes / g, inter_alpha_s, inter_beta)
        + ring_allgather_s(g, msg_bytes, intra_alpha_s, intra_beta)
    )


def allreduce_s(algo, p, msg_bytes, alpha_s, beta_s_per_byte):
    """Allreduce by algorithm code: ring, tree, or ``auto`` (the cheaper of the two).

    ``HIERARCHICAL`` needs the topology and is resolved by
    :func:`kernels.machine.gradient_allreduce_s`; here it falls back to ring.
    """
    ring = ring_allreduce_s(p, msg_bytes, alpha_s, beta_s_per_byte)
    tree = tree_allreduce_s(p, msg_bytes, alpha_s, beta_s_per_byte)
    return jnp.where(algo == TREE, tree, jnp.where(algo == AUTO, jnp.minimum(ring, tree), ring))
