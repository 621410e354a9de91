"""Context parallelism (docs/model.md §20), by hand: the cp axis's rules, a rank's share of each
sample, the gradient group of dp * cp ranks, one ring-attention step, and the s^2 attention terms
of Llama 3.1 8B at 131,072 and 262,144 tokens."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import kernels
from kernels import context
from kernels.names import DIVIDES, KINDS, OK
from kernels.strategies.registry import REGISTRY
from sweep.inputs.layers import to_arrays
from sweep.inputs.models import load_model
from sweep.inputs.transformers import gpt
from tests.kernels.test_megatron import machine

TENSOR = jax.jit(kernels.STRATEGIES["data+tensor+pipeline"])
ENTRY = REGISTRY["data+tensor+pipeline"]
f64 = np.float64


def ring(samples=16):
    """GPT of one block, hidden 4, 2 heads (multi-head: g = a = 2 key/value heads of d = 2),
    sequence 4, vocabulary 8: 4 tokens split into 2 cp = 4 chunks for cp = 2."""
    return kernels.build_net(to_arrays(gpt("ring", 1, 4, 2, 4, vocab=8)), samples)


def cfg(p, b, S=1, tp=1, cp=1, recompute=0, zero=0):
    return kernels.Config(
        p=f64(p),
        b=f64(b),
        p2=f64(1),
        S=f64(S),
        tp=f64(tp),
        recompute=f64(recompute),
        zero=f64(zero),
        cp=f64(cp),
    )


def test_rules_need_cp_to_divide_p_and_the_sequence_in_2cp_chunks():
    net = ring()
    assert ENTRY.check(net, {"p": 4, "b": 1, "S": 1, "cp": 2}) is None
    # 2 cp = 4 chunks of a 4-token sequence; cp = 4 would need 8
    found = ENTRY.broken(net, {"p": 4, "b": 1, "S": 1, "cp": 4})
    assert found is not None and found.rule.code == DIVIDES and "sequence" in found.message
    # tp x pp x cp = 2 x 1 x 2 = 4 does not divide p = 6
    found = ENTRY.broken(net, {"p": 6, "b": 1, "S": 1, "tp": 2, "cp": 2})
    assert found is not None and "tp x pp x cp = 4" in found.message
    # the kernel's limit is the same rule's code
    assert int(TENSOR(net, machine(), cfg(4, 1, cp=4)).limit) == DIVIDES
    assert int(TENSOR(net, machine(), cfg(4, 1, cp=2)).limit) == OK
    # co-design tries cp = 1 and 2 only on 4 GPUs (3 does not divide p, 4 not the sequence)
    assert ENTRY.legal(net, 4, "cp") == (1, 2)


def test_replicas_and_the_gradient_group():
    """p = 4, cp = 2: dp = 4 / 2 = 2 replicas (p1), groups of tp pp cp = 2 GPUs (p2), B = b dp.
    ZeRO-1 shards the 12 optimizer bytes per weight over the dp cp = 4 ranks that reduce the
    gradients (Megatron-Core's distributed optimizer over the data-parallel group with cp):
    (2 + 2 + 12 / 4) = 7 bytes per weight against 4 + 12 / 2 = 10 with dp = 2 alone."""
    net = ring()
    c = TENSOR(net, machine(), cfg(4, 2, cp=2, zero=1))
    assert (float(c.p1), float(c.p2), float(c.B)) == (2, 2, 4)
    w = float(net.transformer.w[1, 0, 0])  # the one stage's weights (tp = 1)
    assert float(c.mem_states_bytes) == pytest.approx(7 * w, rel=1e-12)


def test_a_rank_holds_1_over_cp_of_each_sample():
    """b = 2 samples on cp = 2 ranks hold what b = 1 sample on one GPU holds: every activation,
    the logits and the s^2 scores alike are divided by cp; the compute per sample likewise (one
    GPU, b = 1, against two with cp = 2, b = 1: the same iterations and update, half the work)."""
    net = ring()
    m = machine(wu_passes=0.0)  # no weight update: the compute is the stages' work alone
    two = TENSOR(net, m, cfg(2, 2, cp=2))
    one = TENSOR(net, m, cfg(1, 1))
    assert float(two.mem_activations_bytes) == pytest.approx(float(one.mem_activations_bytes), rel=1e-12)
    half = TENSOR(net, m, cfg(2, 1, cp=2))
    assert float(half.iterations) == float(one.iterations) == 16
    assert float(half.t_comp_s) == pytest.approx(float(one.t_comp_s) / 2, rel=1e-12)


def test_one_ring_attention_step_by_hand():
    """p = 2, cp = 2, b = 2, S = 1 on a 100 B/s intra link (1 ms latency), 1,000 FLOP/s.

    A rank's share of the micro-batch: b / (S cp) = 1 sample. The chunk a step sends: the keys and
    values of s / cp = 2 tokens of both samples, 2 g d = 2 * 2 * 2 = 8 elements per token, 2 bytes
    each: 2 * 2 * 8 * 2 = 64 bytes, t = 1e-3 + 64 / 100 = 0.641 s (backward, with the gradients,
    128 bytes: 1.281 s). The step's compute: the attention core's forward 4 h s^2 = 4 * 4 * 16 =
    256 FLOPs per sample, over cp = 2 steps of the rank's one sample-share: 0.128 s (backward
    twice: 0.256 s). Exposed per attention layer: (cp - 1) [(0.641 - 0.128) + (1.281 - 0.256)] =
    0.513 + 1.025 = 1.538 s per micro-batch, S + pp - 1 = 1 slot per iteration, D / B = 16 / 2 = 8
    iterations: 12.304 s in t_p2p_s (no pipeline sends with pp = 1). Full recomputation runs the
    forward's ring once more: 8 * (2 * 0.513 + 1.025) = 16.408 s."""
    net = ring()
    m = machine(intra_bandwidth_Bps=100.0)
    c = TENSOR(net, m, cfg(2, 2, cp=2))
    assert float(c.iterations) == 8
    assert float(c.t_p2p_s) == pytest.approx(8 * (0.513 + 1.025), rel=1e-12)
    full = TENSOR(net, m, cfg(2, 2, cp=2, recompute=2))
    assert float(full.t_p2p_s) == pytest.approx(8 * (2 * 0.513 + 1.025), rel=1e-12)
    # a fast link hides every step: at 1,000 B/s, 0.065 s < 0.128 s and 0.129 s < 0.256 s
    assert float(TENSOR(net, machine(), cfg(2, 2, cp=2)).t_p2p_s) == 0
    # cp = 1 has no ring
    assert float(TENSOR(net, m, cfg(2, 2)).t_p2p_s) == 0


@pytest.mark.parametrize(
    ("name", "s", "share"),
    [
        # attention 12 h s^2 per layer against 6 N per token of the linear layers, per sample:
        # h = 4096, 32 layers; linear weights per layer qkv 4096 * 6144 + proj 4096^2 + up 4096 *
        # 28672 + down 14336 * 4096 = 218,103,808, with the output 4096 * 128,256: N = 7,504,658,432
        ("llama3.1-8b-s131072", 131072, 0.8207),
        ("llama3.1-8b-s262144", 262144, 0.9015),
    ],
)
def test_long_sequences_s2_attention_terms(name, s, share):
    """The s^2 attention terms of a 131k and a 262k run by hand: per sample 32 * 12 * 4096 * s^2
    training FLOPs in the attention cores (131,072: 2.7022e16; 262,144: 1.0809e17) against the
    linear layers' 6 * 7,504,658,432 * s (5.9019e15; 1.1804e16): attention is 2.7022 / (2.7022 +
    0.59019) = 82.07 % and 10.809 / (10.809 + 1.1804) = 90.15 % of the work. With cp = 4 or 8 a rank's
    share of each is 1 / cp (context.attention_flops: the stage's, which the ring's steps split)."""
    net = kernels.build_net(to_arrays(load_model(name)), 1)
    attention = 32 * 12 * 4096 * float(s) ** 2
    linear = 6 * 7_504_658_432 * float(s)
    assert float(net.flops_kind[KINDS.index("attention")]) == pytest.approx(attention, rel=1e-12)
    assert float(net.flops_kind[KINDS.index("linear")]) == pytest.approx(linear, rel=1e-12)
    assert attention / (attention + linear) == pytest.approx(share, abs=1e-4)
    assert float(context.attention_flops(net, 1, 0.0)) == pytest.approx(attention, rel=1e-12)
    # 2 g d = 2 * 8 * 128 = 2,048 key/value elements per token pass around the ring
    assert float(context.kv_elements(net)) == 2048
