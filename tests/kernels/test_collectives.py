"""Collectives in the alpha-beta model, docs/model.md §7 (kernels/collectives.py)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from kernels import collectives as co

A, BETA = 1e-5, 1e-9  # 10 us per message, 1 GB/s


def close(got, want):
    assert float(got) == pytest.approx(want, rel=1e-12, abs=0)


def test_p2p():
    # alpha + m*beta = 1e-5 + 1000 * 1e-9 = 1.1e-5
    close(co.p2p_s(1000.0, A, BETA), 1.1e-5)


def test_ring_allreduce():
    # 2(p-1)(alpha + (m/p) beta), p = 4, m = 1000: 6 * (1e-5 + 250e-9) = 6.15e-5
    close(co.ring_allreduce_s(4.0, 1000.0, A, BETA), 6.15e-5)


def test_ring_allgather_and_reduce_scatter():
    # (p-1)(alpha + (m/p) beta), p = 4, m = 1000: 3 * (1e-5 + 250e-9) = 3.075e-5
    close(co.ring_allgather_s(4.0, 1000.0, A, BETA), 3.075e-5)
    close(co.ring_reduce_scatter_s(4.0, 1000.0, A, BETA), 3.075e-5)


def test_tree_allreduce():
    # log2(p)(alpha + m beta), p = 8, m = 1000: 3 * (1e-5 + 1e-6) = 3.3e-5
    close(co.tree_allreduce_s(8.0, 1000.0, A, BETA), 3.3e-5)


def test_auto_takes_the_cheaper_of_ring_and_tree():
    # Small message, p = 8: ring 14 * (1e-5 + 125e-9) = 1.4175e-4, tree 3.3e-5 -> tree.
    close(co.allreduce_s(co.RING, 8.0, 1000.0, A, BETA), 1.4175e-4)
    close(co.allreduce_s(co.TREE, 8.0, 1000.0, A, BETA), 3.3e-5)
    close(co.allreduce_s(co.AUTO, 8.0, 1000.0, A, BETA), 3.3e-5)
    # Large message m = 1e6: ring 14 * (1e-5 + 1.25e-4) = 1.89e-3,
    # tree 3 * (1e-5 + 1e-3) = 3.03e-3 -> ring.
    close(co.allreduce_s(co.AUTO, 8.0, 1e6, A, BETA), 1.89e-3)
    close(co.allreduce_s(co.TREE, 8.0, 1e6, A, BETA), 3.03e-3)


def test_algorithm_codes():
    assert co.ALLREDUCE_ALGOS == {"ring": 0, "tree": 1, "auto": 2, "hierarchical": 3}


def test_hierarchical_allreduce():
    # p = 8 GPUs, g = 2 per node, m = 1000 B; intra 1e-6 s, 1e-10 s/B; inter 1e-5 s, 1e-9 s/B.
    # intra reduce-scatter T_rs(2, 1000) = 1 * (1e-6 + 500e-10)       = 1.05e-6
    # inter allreduce     T_ar(4, 500)   = 6 * (1e-5 + 125e-9)        = 6.075e-5
    # intra allgather     T_ag(2, 1000)  = 1.05e-6
    # total 6.285e-5
    close(co.hierarchical_allreduce_s(8.0, 2.0, 1000.0, 1e-6, 1e-10, A, BETA), 6.285e-5)


def test_hierarchical_inside_one_node_is_a_plain_ring():
    # g is clipped to p: p = 2, g = 4 -> T_rs(2) + T_ar(1) + T_ag(2) = 2 * (1e-6 + 500e-10) = 2.1e-6,
    # equal to the intra ring allreduce T_ar(2, 1000).
    close(co.hierarchical_allreduce_s(2.0, 4.0, 1000.0, 1e-6, 1e-10, A, BETA), 2.1e-6)
    close(co.ring_allreduce_s(2.0, 1000.0, 1e-6, 1e-10), 2.1e-6)


@pytest.mark.parametrize(
    "fn",
    [
        co.ring_allreduce_s,
        co.ring_allgather_s,
        co.ring_reduce_scatter_s,
        co.tree_allreduce_s,
        lambda p, m, a, b: co.allreduce_s(co.AUTO, p, m, a, b),
        lambda p, m, a, b: co.hierarchical_allreduce_s(p, 2.0, m, a, b, a, b),
    ],
    ids=["ring_allreduce", "ring_allgather", "reduce_scatter", "tree", "auto", "hierarchical"],
)
def test_one_gpu_costs_nothing(fn):
    assert float(fn(1.0, 1e9, A, BETA)) == 0.0


def test_batched_arguments_broadcast():
    # Plain array math: a vector of p gives one cost per entry.
    p = jnp.array([1.0, 2.0, 4.0])
    got = np.asarray(co.ring_allreduce_s(p, 1000.0, A, BETA))
    # 0; 2 * (1e-5 + 5e-7) = 2.1e-5; 6.15e-5
    np.testing.assert_allclose(got, [0.0, 2.1e-5, 6.15e-5], rtol=1e-12)
