"""ZeRO-2/3 (FSDP), resharding and HSDP of data+tensor+pipeline, by hand (docs/model.md §16).

The machine and GPTs are test_megatron's: 1,000 FLOP/s, links of 1 ms and 1,000 B/s, 4 GPUs and
one NIC per node, 2-byte elements, no overlap of the gradient reduction.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

import kernels
from kernels.names import DIVIDES, OK
from sweep.inputs.layers import to_arrays
from sweep.inputs.transformers import gpt
from tests.kernels.test_megatron import LOGITS_TP2, WORKSPACE, machine

f64 = np.float64
TENSOR = jax.jit(kernels.STRATEGIES["data+tensor+pipeline"])
#: test_megatron's worked example: one block, hidden 4, 2 heads, sequence 2, vocabulary 8;
#: 140 weights per GPU at tp = 2, 1.824 s of training per sample, 140 activation elements.
ONE = kernels.build_net(to_arrays(gpt("tiny", 1, 4, 2, 2, vocab=8)), 16)
#: Two blocks: weights embed 40, a block 208 (of which qkv 48, proj 16, up 64, down 64 split),
#: ln_f 8 = 464; at tp = 2: 464 - (40 + 2 * 192) / 2 = 252 per GPU, 126 per block.
#: Training FLOPs per sample 2 * 2,832 + 96 + 384 = 6,144, split 2 * 2,592 + 384 = 5,568:
#: at tp = 2, 6,144 - 2,784 = 3,360, 3.36 s per sample at 1,000 FLOP/s.
TWO = kernels.build_net(to_arrays(gpt("tiny2", 2, 4, 2, 2, vocab=8)), 16)


def cfg(p, b, S, tp=1, zero=0, reshard=1, dp_shard=0):
    own = {"tp": tp, "pp": 1, "recompute": 0, "zero": zero, "vp": 1, "sp": 0, "precision": 0}
    own |= {"reshard": reshard, "dp_shard": dp_shard}
    return kernels.Config(p=f64(p), b=f64(b), p2=f64(1), S=f64(S), **{k: f64(v) for k, v in own.items()})


def test_memory_is_states_plus_activations_and_zero_0_1_unchanged():
    """The worked example (p 4, tp 2, dp 2, b 4, S 2): states (2 delta + 12) * 140 = 2,240 (ZeRO-1:
    (4 + 6) * 140 = 1,400), activations delta * micro 2 * 140 = 560 and the loss's logits
    (test_megatron's)."""
    for zero, states in ((0, 2240), (1, 1400)):
        c = TENSOR(ONE, machine(), cfg(4, 4, 2, tp=2, zero=zero))
        assert float(c.mem_states_bytes) == pytest.approx(states, rel=1e-12)
        assert float(c.mem_activations_bytes) == pytest.approx(560 + LOGITS_TP2, rel=1e-12)
        # mem_bytes: their sum and the workspace (docs/model.md §20)
        assert float(c.mem_bytes) == float(c.mem_states_bytes) + float(c.mem_activations_bytes) + WORKSPACE
        assert float(c.t_allgather_s) == 0


def test_zero_2_by_hand():
    """ZeRO-2 on the worked example: gradients sharded over dp = 2 too: weights 2 + gradients
    2 / 2 + optimizer 12 / 2 = 9 bytes per weight, 9 * 140 = 1,260; activations 560 as before.
    The gradient all-reduce (ring of 2 over 280 bytes: 2(1e-3 + 0.14) = 0.282 s) becomes a
    reduce-scatter (1e-3 + 0.14 = 0.141 s) in t_allreduce_s and the gather of the updated
    weights (0.141 s) in t_allgather_s: the same 0.282 s per iteration in all, I = 2."""
    c = TENSOR(ONE, machine(), cfg(4, 4, 2, tp=2, zero=2))
    assert float(c.mem_states_bytes) == pytest.approx(1260, rel=1e-12)
    assert float(c.mem_activations_bytes) == pytest.approx(560 + LOGITS_TP2, rel=1e-12)
    # tensor-parallel: 2 slots of 6 allreduces of 0.034 s (test_megatron's 0.204 per micro-batch)
    assert float(c.t_allreduce_s) == pytest.approx(2 * (0.141 + 2 * 0.204), rel=1e-12)
    assert float(c.t_allgather_s) == pytest.approx(2 * 0.141, rel=1e-12)
    assert int(c.limit) == OK


def test_zero_3_by_hand_one_block():
    """ZeRO-3, one block: weights, gradients and optimizer state all sharded, (2 + 2 + 12) / 2 = 8
    bytes per weight, 8 * 140 = 1,120. Gathered: the block (nothing to prefetch) and its
    unsharded gradients, 2 * 140 weights of 2 bytes = 560 beside the 560 of activations.
    Each micro-batch gathers the block (1e-3 + 280 / 2 / 1000 = 0.141 s) in the forward, nothing
    to hide it, and reduce-scatters its gradients (0.141 s) at the end of the backward; with
    reshard, the backward's gather of the last block is no extra (it is the one the forward kept
    for one block). Per iteration S = 2 of each; I = 2."""
    c = TENSOR(ONE, machine(), cfg(4, 4, 2, tp=2, zero=3))
    assert float(c.mem_states_bytes) == pytest.approx(1120, rel=1e-12)
    assert float(c.mem_activations_bytes) == pytest.approx(560 + 560 + LOGITS_TP2, rel=1e-12)
    assert float(c.t_allgather_s) == pytest.approx(2 * 2 * 0.141, rel=1e-12)
    assert float(c.t_allreduce_s) == pytest.approx(2 * (2 * 0.141 + 2 * 0.204), rel=1e-12)


def test_zero_3_prefetch_exposes_what_outlasts_the_block():
    """Two blocks on a slow link (100 B/s): each block's gather and reduce-scatter move 2 * 126
    = 252 bytes, (2 - 1)(1e-3 + 252 / 2 / 100) = 1.261 s. A block's compute per micro-batch of 2
    samples is 2 * 3.36 / 2 = 3.36 s: forward 1.12 s, backward 2.24 s.
    Forward per micro-batch: the first gather 1.261 + (2 - 1) max(1.261 - 1.12, 0) = 1.402 s.
    Backward, resharding: the last reduce-scatter 1.261 + max(1.261 + 1.261 - 2.24, 0) = 1.543 s;
    without resharding no second gather: 1.261 + max(1.261 - 2.24, 0) = 1.261 s.
    Per iteration S = 2 of each, I = 2; the zero-0 all-reduce it replaces: ring of 2 over 504
    bytes, 2(1e-3 + 2.52) = 5.042 s per iteration."""
    m = machine(intra_bandwidth_Bps=100.0)
    base = TENSOR(TWO, m, cfg(4, 4, 2, tp=2))
    for reshard, backward in ((1, 1.543), (0, 1.261)):
        c = TENSOR(TWO, m, cfg(4, 4, 2, tp=2, zero=3, reshard=reshard))
        assert float(c.t_allgather_s) == pytest.approx(2 * 2 * 1.402, rel=1e-12)
        extra = float(c.t_allreduce_s) - float(base.t_allreduce_s)
        assert extra == pytest.approx(2 * (2 * backward - 5.042), rel=1e-9)
        # states: 8 bytes per weight, 8 * 252 = 2,016; gathered: two blocks (or, not resharding,
        # the whole stage's 252 weights) and a block's gradients, 3 * 126 * 2 bytes = 756
        assert float(c.mem_states_bytes) == pytest.approx(2016, rel=1e-12)
        added = float(c.mem_activations_bytes) - float(base.mem_activations_bytes)
        assert added == pytest.approx(756, rel=1e-12)


def test_hsdp_shards_within_groups_and_reduces_across():
    """HSDP, p = 8 (two nodes of 4), tp 1, dp 8 in groups of dp_shard = 2, 64 samples, b 4, S 2:
    I = 64 / 32 = 2. One block at tp 1: 256 weights, 512 bytes. States (2 + 2 + 12) / 2 = 8 per
    weight: 2,048. Within a group (2 GPUs, one node): gather and reduce-scatter
    (1e-3 + 512 / 2 / 1000) = 0.257 s each per micro-batch. Across the 4 groups (stride 2,
    spanning both nodes; a node's 2 groups' rings share its one NIC: 2 / 1000 s per byte): a ring
    all-reduce of the 256-byte shard, 2 * 3 (1e-3 + 256 * 0.002 / 4) = 0.774 s per iteration."""
    net = kernels.build_net(to_arrays(gpt("tiny", 1, 4, 2, 2, vocab=8)), 64)
    c = TENSOR(net, machine(), cfg(8, 4, 2, zero=3, dp_shard=2))
    assert float(c.mem_states_bytes) == pytest.approx(2048, rel=1e-12)
    assert float(c.t_allgather_s) == pytest.approx(2 * 2 * 0.257, rel=1e-12)
    assert float(c.t_allreduce_s) == pytest.approx(2 * (2 * 0.257 + 0.774), rel=1e-12)
    # dp_shard 3 does not divide the 8 replicas
    assert int(TENSOR(net, machine(), cfg(8, 4, 2, zero=3, dp_shard=3)).limit) == DIVIDES


def test_cnn_rows_leave_the_split_unknown():
    """A strategy that does not split its memory writes NaN (null in the output)."""
    data = kernels.STRATEGIES["data"](ONE, machine(), cfg(4, 4, 1))
    assert np.isnan(float(data.mem_states_bytes)) and np.isnan(float(data.mem_activations_bytes))


def test_zero_3_under_a_pipeline_keeps_the_stage_gathered_by_hand():
    """ZeRO-3 with pp = 2 (docs/model.md §20), as PyTorch's pipeline schedules run FSDP2: the stage
    stays gathered from the first micro-batch's forward to the step and its gradients accumulate
    unsharded in FP32. test_megatron's pp = 2 example (p 4, dp 2, b 4, S 2): the largest stage's
    248 weights, shards (2 + 2 + 12) / 2 = 8 bytes each, 1,984; activations the first stage's two
    micro-batches, 2 * 2 * 2 * 166 = 1,328, plus (2 + 4) * 248 = 1,488 gathered and accumulated.
    The gradients are reduce-scattered once per iteration, in FP32: a ring of 2 over 4 * 248 =
    992 bytes, 1e-3 + 992 / 2 / 1000 = 0.497 s, I = 2 iterations; the stage (one block) is
    gathered once, in the first micro-batch's forward, with no compute before it to hide behind:
    a ring of 2 over 2 * 248 = 496 bytes, 1e-3 + 496 / 2 / 1000 = 0.249 s per iteration (against
    S = 2 gathers and reduce-scatters per iteration without a pipeline)."""
    net = kernels.build_net(to_arrays(gpt("tiny2", 2, 4, 2, 2, vocab=8)), 16)
    c = TENSOR(net, machine(), kernels.Config(*(np.float64(v) for v in (4, 4, 1, 2, 1, 2, 0, 3))))
    assert float(c.mem_states_bytes) == pytest.approx(1984, rel=1e-12)
    assert float(c.mem_activations_bytes) == pytest.approx(1328 + 1488, rel=1e-12)
    assert float(c.t_allreduce_s) == pytest.approx(2 * 0.497, rel=1e-12)
    assert float(c.t_allgather_s) == pytest.approx(2 * 0.249, rel=1e-12)
