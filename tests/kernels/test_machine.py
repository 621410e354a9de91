"""Topology lookups of docs/model.md §8 (kernels/machine.py) on the small machine.

Small machine (tests/helpers.py): 2 GPUs and 1 NIC per node; intra alpha 1e-6 s,
1e10 B/s; inter level 0 spans 2 nodes (1e-5 s, 1e9 B/s), level 1 unbounded
(2e-5 s, 5e8 B/s).
"""

from __future__ import annotations

import numpy as np
import pytest

import kernels
from kernels import machine as mach
from tests.helpers import small_machine_of

INTRA = (1e-6, 1e-10)
LEVEL0 = (1e-5, 1e-9)
LEVEL1 = (2e-5, 2e-9)


@pytest.mark.parametrize(
    ("n", "want"),
    [
        (1, INTRA),  # one GPU: inside a node
        (2, INTRA),  # n <= gpus_per_node
        (3, LEVEL0),  # ceil(3/2) = 2 nodes <= span 2
        (4, LEVEL0),
        (5, LEVEL1),  # 3 nodes: past level 0, the last level is unbounded
        (1000, LEVEL1),
    ],
)
def test_link_levels(small_machine, n, want):
    lk = mach.link(small_machine, np.float64(n))
    assert float(lk.alpha_s) == pytest.approx(want[0], rel=1e-12)
    assert float(lk.beta_s_per_byte) == pytest.approx(want[1], rel=1e-12)


def test_bandwidth_share_divides_only_inter_bandwidth(small_machine):
    # NIC sharing by 2: inter beta 1e-9 -> 2e-9; the intra link is untouched.
    assert float(mach.link(small_machine, 4.0, 2.0).beta_s_per_byte) == pytest.approx(2e-9, rel=1e-12)
    assert float(mach.link(small_machine, 4.0, 2.0).alpha_s) == pytest.approx(1e-5, rel=1e-12)
    assert float(mach.link(small_machine, 2.0, 2.0).beta_s_per_byte) == pytest.approx(1e-10, rel=1e-12)


def test_nic_share(small_machine):
    # max(1, k / nics_per_node) with 1 NIC per node.
    assert float(mach.nic_share(small_machine, 2.0)) == 2.0
    assert float(mach.nic_share(small_machine, 1.0)) == 1.0
    assert float(mach.nic_share(small_machine, 0.5)) == 1.0
    two_nics = small_machine_of(nics_per_node=2)
    assert float(mach.nic_share(two_nics, 2.0)) == 1.0
    assert float(mach.nic_share(two_nics, 8.0)) == 4.0


def test_with_params_inter_levels(small_machine):
    # inter_bandwidth_Bps sets every level; inter_alpha_s sets level 0 and keeps level 1's
    # extra latency (2e-5 - 1e-5 = 1e-5) over it.
    m = kernels.with_params(small_machine, inter_bandwidth_Bps=4e9, inter_alpha_s=3e-5)
    np.testing.assert_allclose(np.asarray(m.inter_bandwidth_Bps), [4e9, 4e9], rtol=1e-12)
    np.testing.assert_allclose(np.asarray(m.inter_alpha_s), [3e-5, 4e-5], rtol=1e-12)
    m = kernels.with_params(small_machine, intra_bandwidth_Bps=2e10, gpu_flops=5e11)
    assert float(m.intra_bandwidth_Bps) == 2e10
    assert float(m.gpu_flops) == 5e11
    with pytest.raises(KeyError):
        kernels.with_params(small_machine, no_such_parameter=1.0)


def test_gradient_allreduce_algorithms(small_machine):
    # p = 8 GPUs (4 nodes -> level 1: 2e-5 s, 2e-9 s/B), m = 1000 B.
    lk = mach.link(small_machine, 8.0)
    # ring: 2 * 7 * (2e-5 + 125 * 2e-9) = 14 * 2.025e-5 = 2.835e-4
    ring = mach.gradient_allreduce_s(small_machine, 8.0, 1000.0, lk)
    assert float(ring) == pytest.approx(2.835e-4, rel=1e-12)
    # hierarchical: intra T_rs(2, 1000) = 1e-6 + 500e-10 = 1.05e-6, inter
    # T_ar(4, 500) = 6 * (2e-5 + 125 * 2e-9) = 1.215e-4, intra T_ag(2, 1000) = 1.05e-6:
    # 1.236e-4.
    hier_machine = kernels.with_params(small_machine, allreduce_algo=kernels.ALLREDUCE_ALGOS["hierarchical"])
    hier = mach.gradient_allreduce_s(hier_machine, 8.0, 1000.0, lk)
    assert float(hier) == pytest.approx(1.236e-4, rel=1e-12)
    # tree: log2(8) * (2e-5 + 1000 * 2e-9) = 3 * 2.2e-5 = 6.6e-5; auto picks it.
    tree_machine = kernels.with_params(small_machine, allreduce_algo=kernels.ALLREDUCE_ALGOS["tree"])
    assert float(mach.gradient_allreduce_s(tree_machine, 8.0, 1000.0, lk)) == pytest.approx(6.6e-5, rel=1e-12)
    auto_machine = kernels.with_params(small_machine, allreduce_algo=kernels.ALLREDUCE_ALGOS["auto"])
    assert float(mach.gradient_allreduce_s(auto_machine, 8.0, 1000.0, lk)) == pytest.approx(6.6e-5, rel=1e-12)
