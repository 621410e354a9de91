"""Compute from FLOPs as a per-kind roofline (docs/model.md §3), pinned to hand values.

The small network of tests/helpers.py: per sample, training FLOPs conv 5184, relu 144,
fc 1440; |x|+|y| conv 80, relu 96, fc 53. Machine: 1e12 FLOP/s, 4-byte elements; here
memory bandwidth 1e11 B/s, mem_passes = 1, efficiency_conv = 0.5, efficiency_fc = 0.25:

    conv  max(5184 / 0.5e12  = 1.0368e-8, 1 * 4 * 80 / 1e11 = 3.2e-9)  = 1.0368e-8  (compute)
    relu  max(144 / 1e12     = 1.44e-10,  4 * 96 / 1e11     = 3.84e-9) = 3.84e-9    (memory)
    fc    max(1440 / 0.25e12 = 5.76e-9,   4 * 53 / 1e11     = 2.12e-9) = 5.76e-9    (compute)
    sum 1.9968e-8 s per sample

Weight update u(w) = 3 * 4 * w / 1e11: u(294) = 3.528e-8, u(147) = 1.764e-8, u(240) = 2.88e-8.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

import kernels
from tests.helpers import assert_terms, config, small_machine_of, small_net_of

ROOFLINE = dict(gpu_mem_bw_Bps=1e11, mem_passes=1)


def roofline_machine(**changes):
    machine = kernels.with_params(small_machine_of(**ROOFLINE), efficiency_conv=0.5, efficiency_fc=0.25)
    return machine._replace(**changes)


# fmt: off
CASES = [
    # serial b = 8, I = 125: 1000 * 1.9968e-8 + 125 * 3.528e-8 = 1.9968e-5 + 4.41e-6
    ("serial", config(1, 8), 2.4378e-5),
    # data p = 2: 500 * 1.9968e-8 + 63 * 3.528e-8 (I = ceil(1000/16) = 63) = 9.984e-6 + 2.22264e-6
    ("data", config(2, 8), 1.220664e-5),
    # filter p = 2, conv and fc split: (1.0368e-8 + 5.76e-9) / 2 + relu 3.84e-9 = 1.1904e-8;
    # 1000 * 1.1904e-8 + 125 * u(147) = 1.1904e-5 + 2.205e-6
    ("filter", config(2, 8), 1.4109e-5),
    # pipeline p = 2, S = 2: groups {conv} (the larger FLOPs, 1.0368e-8) and {relu, fc};
    # 1000 * 3/2 * 1.0368e-8 + 125 * u(240) = 1.5552e-5 + 3.6e-6
    ("pipeline", config(2, 8, S=2), 1.9152e-5),
]
# fmt: on


@pytest.mark.parametrize(("strategy", "cfg", "want"), CASES)
def test_roofline_by_hand(strategy, cfg, want):
    cost = kernels.STRATEGIES[strategy](small_net_of(), roofline_machine(), cfg)
    assert_terms(cost, t_comp_s=want)


def test_defaults_are_the_papers_compute():
    """mem_passes = 0 and every efficiency_<kind> = 1: sum(F) / (gpu_flops * efficiency),
    1000 * 6768e-12 + 125 * 3.528e-6 = 4.47768e-4 (docs/model.md §10.1)."""
    cost = kernels.STRATEGIES["serial"](small_net_of(), small_machine_of(), config(1, 8))
    assert_terms(cost, t_comp_s=4.47768e-4)


def test_a_measured_time_ignores_the_roofline():
    """A measured per-sample time (1 us at the machine's own rate) is spread by FLOPs as the
    paper does: data p = 2, b = 8: 500 * 1e-6 + 63 * 3.528e-8 = 5.0222264e-4."""
    net = small_net_of(t_measured_s=1e-6, ref_rate_flops=1e12)
    cost = kernels.STRATEGIES["data"](net, roofline_machine(), config(2, 8))
    assert_terms(cost, t_comp_s=5.0222264e-4)


def test_kind_efficiency_is_differentiable():
    """d t_comp / d efficiency_conv at 0.5, conv compute-bound: -D * 5184 / (1e12 * 0.5^2)
    = -1000 * 5184 / 2.5e11 = -2.0736e-5, equal to a central difference."""
    net, cfg = small_net_of(), config(1, 8)

    def comp(e):
        return kernels.STRATEGIES["serial"](
            net, kernels.with_params(roofline_machine(), efficiency_conv=e), cfg
        ).t_comp_s

    grad = float(jax.grad(comp)(0.5))
    assert grad == pytest.approx(-2.0736e-5, rel=1e-12)
    h = 1e-6
    assert grad == pytest.approx(float(comp(0.5 + h) - comp(0.5 - h)) / (2 * h), rel=1e-6)


def test_mem_passes_and_bandwidth_are_differentiable():
    """relu is memory-bound: d t / d mem_passes = D * 4 * 96 / 1e11 = 3.84e-6 (the
    compute-bound kinds do not move)."""
    net, cfg = small_net_of(), config(1, 8)

    def comp(n):
        return kernels.STRATEGIES["serial"](
            net, kernels.with_params(roofline_machine(), mem_passes=n), cfg
        ).t_comp_s

    assert float(jax.grad(comp)(1.0)) == pytest.approx(3.84e-6, rel=1e-12)


def test_kind_entry_sets_one_kind_only():
    machine = roofline_machine()
    expected = np.ones(len(kernels.KINDS))
    expected[kernels.KINDS.index("conv")] = 0.5
    expected[kernels.KINDS.index("fc")] = 0.25
    np.testing.assert_array_equal(np.asarray(machine.kind_efficiency), expected)
