"""A mixture of experts under data+tensor+pipeline with expert parallelism (kernels/experts.py,
kernels/strategies/moe.py, docs/model.md §17): the all-to-all, the expert memory and the rules,
by hand."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import kernels
from kernels import collectives
from kernels.gemm import slowdown
from kernels.strategies.registry import entry
from sweep import api
from sweep.inputs.blocks import Block, layers
from sweep.inputs.layers import Model, to_arrays
from sweep.inputs.transformers import gpt
from tests.kernels.test_megatron import machine

f64 = np.float64
TENSOR = jax.jit(kernels.STRATEGIES["data+tensor+pipeline"])
ENTRY = entry("data+tensor+pipeline")


def cfg(p, b, S, tp=1, pp=1, ep=1, etp=1, recompute=0):
    return kernels.Config(*(f64(v) for v in (p, b, 1, S, tp, pp, recompute)), ep=f64(ep), etp=f64(etp))


def tiny_moe(samples=16):
    """One block, hidden 4, 2 heads, sequence 2, vocabulary 8, 4 GeLU experts of width 4, top 2."""
    spec = Block(layers=1, hidden=4, heads=2, seq=2, vocab=8, ffn=4, experts=4, top_k=2)
    return kernels.build_net(to_arrays(Model("tiny-moe", samples, layers(spec))), samples)


def test_alltoall_by_hand():
    # 16 GPUs, 8 per node, 1,600 bytes each: 100 bytes to each peer. Inside: 7 x (1 ms + 100 x
    # 1 ms/kB) = 0.707 s; outside, at once: 8 x (1 ms + 100 x 2 ms/kB) = 1.608 s, the longer
    assert float(collectives.alltoall_s(16, 8, 1600.0, 1e-3, 1e-3, 1e-3, 2e-3)) == pytest.approx(
        1.608, rel=1e-12
    )
    # 4 GPUs in a node of 8: 3 x (1 ms + 400 x 1 ms/kB) = 1.203 s, nothing leaves the node
    assert float(collectives.alltoall_s(4, 8, 1600.0, 1e-3, 1e-3, 1e-3, 2e-3)) == pytest.approx(
        1.203, rel=1e-12
    )
    assert float(collectives.alltoall_s(1, 8, 1600.0, 1e-3, 1e-3, 1e-3, 2e-3)) == 0.0


def test_tiny_moe_alltoall_through_the_kernel():
    """p = 4, ep = 4, tp = pp = 1 (dp = 4), b = 1, S = 1; 16 samples: B = 4, I = 4.

    Per micro-batch (one sample), the block's dispatch and combine forward and backward: 4
    all-to-alls of h k s = 4 x 2 x 2 = 16 elements, 32 bytes per GPU. The ep group (4 GPUs) is a
    node of 4: 3 x (1 ms + 8 bytes x 1 ms/B) = 27 ms each, 108 ms per micro-batch; one micro-batch
    slot per iteration: t_alltoall_s = 4 x 0.108 = 0.432 s. moe_imbalance = 2 doubles it."""
    net = tiny_moe()
    c = TENSOR(net, machine(), cfg(4, 1, 1, ep=4))
    assert float(c.iterations) == 4
    assert float(c.t_alltoall_s) == pytest.approx(0.432, rel=1e-12)
    twice = TENSOR(net, machine(moe_imbalance=2.0), cfg(4, 1, 1, ep=4))
    assert float(twice.t_alltoall_s) == pytest.approx(0.864, rel=1e-12)
    # full recomputation runs the forward's two again: 6 all-to-alls, 0.648 s
    full = TENSOR(net, machine(), cfg(4, 1, 1, ep=4, recompute=2))
    assert float(full.t_alltoall_s) == pytest.approx(0.648, rel=1e-12)
    # ep = 1: each GPU holds every expert, nothing moves
    assert float(TENSOR(net, machine(), cfg(4, 1, 1)).t_alltoall_s) == 0.0


def test_tiny_moe_expert_weights_split_over_ep():
    """The experts' weights: 2 GEMMs x 4 experts x 4 x 4 = 128, held 128 / ep per GPU; the rest
    of the block (the router's 4 x 4 = 16 among them) whole with tp = 1. States per weight with
    2-byte elements, no ZeRO: 2 + 2 + 12 = 16 bytes, so ep 1 -> 4 saves 16 x 96 = 1,536 bytes."""
    net = tiny_moe()
    one, four = (TENSOR(net, machine(), cfg(4, 1, 1, ep=ep)) for ep in (1, 4))
    assert float(one.mem_states_bytes) - float(four.mem_states_bytes) == pytest.approx(1536.0, rel=1e-12)


@pytest.mark.parametrize("ep", [1, 8, 64])
def test_qwen3_235b_expert_memory_by_hand(ep):
    """Qwen3-235B-A22B: 94 blocks of 128 SwiGLU experts, 3 x 4,096 x 1,536 weights each:
    94 x 128 x 18,874,368 = 227,096,395,776 expert weights of the 235,093,610,496, so
    7,997,214,720 others (attention, norms, routers, embeddings). tp = pp = 1 on 64 H100s, no
    ZeRO: 2 bytes of weight, 2 of gradient, 12 of FP32 optimizer state per weight, every GPU
    all the others and 1/ep of the experts: 16 x (7,997,214,720 + 227,096,395,776 / ep) bytes.
    ep 1: 3,761,497,767,936 B; ep 8: 582,148,227,072 B; ep 64: 184,729,534,464 B."""
    row = api.estimate("qwen3-235b-a22b", "dgx-h100", "data+tensor+pipeline", p=64, global_batch=64, ep=ep)
    expected = {1: 3_761_497_767_936, 8: 582_148_227_072, 64: 184_729_534_464}[ep]
    assert row["mem_states_bytes"] == pytest.approx(expected, rel=1e-12)
    assert row["params"] == 235_093_610_496 and row["active_params"] == 22_190_739_456


def test_the_expert_rules():
    moe = tiny_moe()
    dense = kernels.build_net(to_arrays(gpt("tiny", 1, 4, 2, 2, vocab=8)), 16)
    # ep divides the 4 experts; ep x etp divides the p / pp GPUs of a stage; dense: ep = etp = 1
    assert ENTRY.check(moe, {"p": 4, "b": 1, "S": 1, "ep": 4}) is None
    assert "does not divide the model's 4 experts" in ENTRY.check(moe, {"p": 3, "b": 1, "S": 1, "ep": 3})
    assert "does not divide the 2 GPUs of a stage" in ENTRY.check(
        moe, {"p": 4, "b": 1, "S": 1, "pp": 2, "ep": 4}
    )
    assert "needs a mixture of experts" in ENTRY.check(dense, {"p": 2, "b": 1, "S": 1, "ep": 2})
    assert "etp 3 does not divide" in ENTRY.check(moe, {"p": 3, "b": 1, "S": 1, "etp": 3})
    # co-design's list of ep at 8 GPUs: the divisors of the 4 experts and of 8
    assert ENTRY.legal(moe, 8, "ep") == (1, 2, 4)
    assert ENTRY.legal(dense, 8, "ep") == (1,)


def test_the_grouped_gemms_take_the_ep_groups_tokens():
    """By shape (gpu_sms > 0): the expert GEMMs of one GPU see micro k s / E x ep etp / tp rows
    each; more ep, fuller tiles: with 4 experts of 4 x 4, tiles of 128 and ep 1 vs 4, the compute
    time per expert FLOP falls (the wave quantisation of a 1-row GEMM against a 4-row one)."""
    net = tiny_moe()
    shaped = machine(gpu_sms=4.0, gemm_tile_m=128.0, gemm_tile_n=128.0, gpu_mem_bw_Bps=1e12)
    one = TENSOR(net, shaped, cfg(4, 1, 1, ep=1))
    four = TENSOR(net, shaped, cfg(4, 1, 1, ep=4))
    assert float(four.t_comp_s) < float(one.t_comp_s)


def test_an_expert_gemm_is_a_linear_one_of_its_groups_tokens():
    """kernels.gemm.slowdown of a grouped expert GEMM class (3, C, F, k s / E) at tp = 2, ep etp
    = 8, etp = 2: micro (k s / E) 8 / 2 token rows by C x F / 2, the shape of a column-parallel
    linear (0, C, F, s') at tp = 2 with s' = (k s / E) x 4."""
    m = machine(gpu_sms=132.0, gemm_tile_m=128.0, gemm_tile_n=128.0, gpu_mem_bw_Bps=3e12)
    expert = slowdown(m, np.array([3.0, 4096.0, 3072.0, 256.0]), 2.0, 2.0, 1e15, 8.0, 2.0)
    linear = slowdown(m, np.array([0.0, 4096.0, 3072.0, 1024.0]), 2.0, 2.0, 1e15)
    assert float(expert) == pytest.approx(float(linear), rel=1e-12) and float(expert) > 1.0
