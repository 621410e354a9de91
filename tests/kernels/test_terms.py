"""``kernels.terms.scale_terms``: multiplicative and additive overheads on a strategy's terms (calibration)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

import kernels
from kernels.terms import ADDITIVE_TERMS, OVERHEAD_TERMS, derive, scale_terms
from tests.helpers import config, small_machine_of, small_net_of

COLUMN = {
    "compute": "t_comp_s",
    "allreduce": "t_allreduce_s",
    "allgather": "t_allgather_s",
    "halo": "t_halo_s",
    "p2p": "t_p2p_s",
}


@pytest.fixture(scope="module")
def cost() -> kernels.Cost:
    # data+spatial on 4 GPUs in groups of 2 has compute, allreduce, allgather and halo
    return kernels.STRATEGIES["data+spatial"](small_net_of(), small_machine_of(), config(4, 8, p2=2))


def test_factors_of_one_change_nothing(cost):
    assert scale_terms(cost) == cost
    assert scale_terms(cost, **dict.fromkeys(OVERHEAD_TERMS, 1.0)) == cost
    assert scale_terms(cost, **dict.fromkeys(ADDITIVE_TERMS, 0.0)) == cost


@pytest.mark.parametrize("term", OVERHEAD_TERMS)
def test_each_factor_scales_its_own_term_only(cost, term):
    scaled = scale_terms(cost, **{term: 2.5})
    for name, column in COLUMN.items():
        factor = 2.5 if name == term else 1.0
        assert float(getattr(scaled, column)) == pytest.approx(
            factor * float(getattr(cost, column)), rel=1e-15
        )
    for field in ("p", "p1", "p2", "b", "B", "S", "iterations", "mem_bytes", "limit"):
        assert getattr(scaled, field) is getattr(cost, field)


def test_derived_totals_follow(cost):
    assert float(cost.t_halo_s) > 0 and float(cost.t_allgather_s) > 0
    scaled = derive(scale_terms(cost, compute=2.0, allreduce=3.0, allgather=0.5, halo=4.0, p2p=7.0))
    comm = 3 * cost.t_allreduce_s + 0.5 * cost.t_allgather_s + 4 * cost.t_halo_s + 7 * cost.t_p2p_s
    assert float(scaled.t_comm_s) == pytest.approx(float(comm), rel=1e-14)
    assert float(scaled.t_epoch_s) == pytest.approx(float(2 * cost.t_comp_s + comm), rel=1e-14)


def test_traceable_and_differentiable(cost):
    def t_epoch(log_factor):
        return derive(scale_terms(cost, halo=jnp.exp(log_factor))).t_epoch_s

    grad = jax.jit(jax.grad(t_epoch))(0.0)
    assert float(grad) == pytest.approx(float(cost.t_halo_s), rel=1e-12)


def test_additive_overheads_add_to_compute_per_iteration(cost):
    """``T'_comp = o_comp T_comp + I (per_iter_s + per_sample_s b)``; nothing else moves."""
    its, b = float(cost.iterations), float(cost.b)
    assert its > 1 and b == 8  # b: samples per data-parallel replica (per group of p2 GPUs)
    scaled = scale_terms(cost, compute=2.0, halo=3.0, per_iter_s=0.01, per_sample_s=1e-3)
    want = 2.0 * float(cost.t_comp_s) + its * (0.01 + 1e-3 * b)  # the factor does not scale the addition
    assert float(scaled.t_comp_s) == pytest.approx(want, rel=1e-14)
    assert float(scaled.t_halo_s) == pytest.approx(3.0 * float(cost.t_halo_s), rel=1e-14)
    for column in ("t_allreduce_s", "t_allgather_s", "t_p2p_s"):
        assert float(getattr(scaled, column)) == float(getattr(cost, column))
    per_iter = derive(scale_terms(cost, per_iter_s=0.25)).t_iter_s - derive(cost).t_iter_s
    assert float(per_iter) == pytest.approx(0.25, rel=1e-9)


def test_additive_overheads_are_differentiable(cost):
    def t_epoch(per_sample_s, per_iter_s):
        return derive(scale_terms(cost, per_sample_s=per_sample_s, per_iter_s=per_iter_s)).t_epoch_s

    d_sample, d_iter = jax.jit(jax.grad(t_epoch, argnums=(0, 1)))(0.0, 0.0)  # at 0: a traced 0 still counts
    assert float(d_sample) == pytest.approx(float(cost.iterations * cost.b), rel=1e-12)
    assert float(d_iter) == pytest.approx(float(cost.iterations), rel=1e-12)
