"""``kernels.terms.scale_terms``: multiplicative and additive overheads on a strategy's terms (calibration)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

import kernels
from kernels.terms import ADDITIVE_TERMS, OVERHEAD_TERMS, derive, scale_terms
from sweep.inputs.layers import to_arrays
from sweep.inputs.transformers import gpt
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


# --- derived columns: samples_per_s, tokens_per_s, mfu (docs/model.md §12) ---------------------


def _korthikanti_flops(B: int, L: int, s: int, h: int, V: int) -> float:
    """Model FLOPs per iteration of Korthikanti et al. 2022 (arXiv 2205.05198, §6):
    ``72 B L s h^2 (1 + s/6h + V/12hL)``."""
    return 72.0 * B * L * s * h * h * (1.0 + s / (6.0 * h) + V / (12.0 * h * L))


def _one_iteration(p: float, B: float, t_iter_s: float) -> kernels.Cost:
    """A cost of one iteration of ``t_iter_s`` seconds, all of it compute."""
    z = jnp.zeros((), jnp.float64)
    return kernels.Cost(
        p=z + p, p1=z + p, p2=z + 1, b=z + B, B=z + B, S=z + 1, iterations=z + 1, t_comp_s=z + t_iter_s,
        t_allreduce_s=z, t_allgather_s=z, t_halo_s=z, t_p2p_s=z, mem_bytes=z, limit=jnp.zeros((), jnp.int32),
    )  # fmt: skip


@pytest.fixture(scope="module")
def gpt_22b() -> kernels.Net:
    # Korthikanti et al. 2022, Table 3: 22B, 48 layers, hidden 6,144, 64 heads, s 2,048, V 51,200
    return kernels.build_net(to_arrays(gpt("22b", 48, 6144, 64, 2048, vocab=51_200)), 1_000)


def test_mfu_reproduces_korthikanti_22b(gpt_22b):
    # their 22B run with selective recomputation and sequence parallelism: tp 8 on 8 A100s,
    # global batch 4, 1.10 s per iteration (Table 5), MFU 41.5 % at 312 TFLOP/s (§6.3).
    # By hand: 72 * 4 * 48 * 2048 * 6144^2 = 1.06871e15; (1 + 2048/36864 + 51200/3538944)
    # = 1.070023; so 1.143544e15 FLOPs / (1.10 s * 8 * 312e12 FLOP/s) = 0.41651.
    machine = small_machine_of()._replace(gpu_flops=jnp.float64(312e12))
    d = derive(_one_iteration(8, 4, 1.10), gpt_22b, machine)
    assert float(d.mfu) == pytest.approx(0.41651, rel=1e-4)
    assert float(d.mfu) == pytest.approx(0.415, rel=0.01)  # the paper's figure
    assert float(d.samples_per_s) == pytest.approx(4 / 1.10, rel=1e-12)
    assert float(d.tokens_per_s) == pytest.approx(4 * 2048 / 1.10, rel=1e-12)


@pytest.mark.parametrize(
    ("L", "h", "a", "s", "V"), [(1, 8, 2, 4, 10), (3, 64, 4, 32, 100), (5, 96, 8, 16, 7)]
)
def test_model_flops_is_korthikanti_count(L, h, a, s, V):
    net = kernels.build_net(to_arrays(gpt("g", L, h, a, s, vocab=V)), 1_000)
    # per sample (B = 1): GEMMs, attention and logits, forward and backward, nothing elementwise
    assert float(net.model_flops) == pytest.approx(_korthikanti_flops(1, L, s, h, V), rel=1e-12)
    assert float(net.model_flops) < float(net.flops)  # layernorm, gelu and adds are not counted
    assert float(net.tokens) == s


def test_cnn_counts_its_convolutions_and_has_no_tokens():
    net = small_net_of()
    machine = small_machine_of()
    d = derive(_one_iteration(4, 8, 2.0), net, machine)
    assert float(net.tokens) == 0
    assert jnp.isnan(d.tokens_per_s)
    assert 0 < float(net.model_flops) <= float(net.flops)
    # mfu = F B / (t p R)
    want = float(net.model_flops) * 8 / (2.0 * 4 * float(machine.gpu_flops))
    assert float(d.mfu) == pytest.approx(want, rel=1e-12)
    assert float(d.samples_per_s) == 4.0


def test_without_net_and_machine_the_model_columns_are_nan(cost):
    d = derive(cost)
    assert jnp.isnan(d.mfu) and jnp.isnan(d.tokens_per_s)
    assert float(d.samples_per_s) == pytest.approx(float(cost.B) / float(d.t_iter_s), rel=1e-6)
