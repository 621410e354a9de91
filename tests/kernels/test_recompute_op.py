"""Selective recomputation under torchtitan's per-operation policy (docs/model.md §21), by hand
on the tiny GPTs of test_megatron and on Llama 3.1 8B's block."""

from __future__ import annotations

import numpy as np
import pytest

import kernels
from kernels.names import KINDS, SELECTIVE_POLICIES
from kernels.transformer import block_mask, op_again, op_kept, tensor_roles
from sweep.inputs.layers import to_arrays
from sweep.inputs.presets import load_preset
from sweep.inputs.transformers import gpt
from tests.kernels.test_megatron import LOGITS_TP2, TENSOR, WORKSPACE, cfg, machine, tiny

OP = machine(selective_recompute=float(SELECTIVE_POLICIES["op"]))


def tiny2():
    return kernels.build_net(to_arrays(gpt("tiny2", 2, 4, 2, 2, vocab=8)), 16)


def test_op_keeps_every_other_matmul_and_the_attention_by_hand():
    """The tiny GPTs (h 4, 2 heads, s 2, vocabulary 8) at tp 2, micro-batch 2, per sample in
    16-bit elements. A block keeps its input 8, half of qkv's 24 (12, split), the attention's
    output 8 and its log-sum-exp 2 a s = 8 (16, split), half of proj's 8 (4), of up's 32 (16,
    split) and of down's 8 (4): 60, of which 44 split, 60 - 22 = 38 at tp 2. Outside the block:
    embedding 2 + 8, ln_f 8 + 8, out 8 + 16 (16 split): 42 at tp 2. While a block is rebuilt, the
    rest of it beside what it keeps: Korthikanti's 156 (116 split) less 60 (44 split), 96 - 36 =
    60. The loss's logits 40 (LOGITS_TP2 / 4). Two blocks: 2 * 38 + 42 + 40 + 60 = 218, times
    delta 2 and micro-batch 2: 872 bytes; without recomputation 2 * 98 + 42 + 40 = 278: 1,112."""
    net = tiny2()
    op = TENSOR(net, OP, cfg(4, 4, 2, tp=2, recompute=1))
    none = TENSOR(net, OP, cfg(4, 4, 2, tp=2, recompute=0))
    assert float(op.mem_activations_bytes) == pytest.approx(4 * (2 * 38 + 42 + 60) + LOGITS_TP2, rel=1e-12)
    assert float(none.mem_activations_bytes) == pytest.approx(4 * (2 * 98 + 42) + LOGITS_TP2, rel=1e-12)
    assert float(op.mem_bytes) == pytest.approx(float(op.mem_states_bytes) + 872 + WORKSPACE, rel=1e-12)
    # one block: what it keeps and what is rebuilt make the whole block, as without recomputation
    one = [TENSOR(tiny(), OP, cfg(4, 4, 2, tp=2, recompute=r)) for r in (1, 0)]
    assert float(one[0].mem_activations_bytes) == pytest.approx(
        float(one[1].mem_activations_bytes), rel=1e-12
    )


def test_op_runs_half_the_matmuls_and_the_memory_bound_layers_again_by_hand():
    """The tiny GPT's forward FLOPs per sample (test_megatron's worked example): the op policy
    runs again half of qkv 192, proj 64, up 256 and down 256 (96 + 32 + 128 + 128, split) and all
    of gelu 32 (split), ln1 32, add 8, ln2 32, add 8 (replicated), not the attention's 64 nor
    ln_f's or out's: 416 / 2 + 80 = 288 at tp 2. 8 samples per replica per epoch at 1,000
    FLOP/s: 2.304 s more than without recomputation. Megatron-LM's policy (the attention core
    again, 64 / 2 = 32 per sample) adds 0.256 s."""
    base = TENSOR(tiny(), OP, cfg(4, 4, 2, tp=2, recompute=0))
    op = TENSOR(tiny(), OP, cfg(4, 4, 2, tp=2, recompute=1))
    attention = TENSOR(tiny(), machine(), cfg(4, 4, 2, tp=2, recompute=1))
    assert float(op.t_comp_s) - float(base.t_comp_s) == pytest.approx(8 * 288 / 1e3, rel=1e-12)
    assert float(attention.t_comp_s) - float(base.t_comp_s) == pytest.approx(8 * 32 / 1e3, rel=1e-12)
    # the policy changes selective recomputation only
    for r in (0, 2):
        a, b = (TENSOR(tiny(), m, cfg(4, 4, 2, tp=2, recompute=r)) for m in (machine(), OP))
        assert float(a.t_comp_s) == float(b.t_comp_s) and float(a.mem_bytes) == float(b.mem_bytes)


def test_llama3_8b_block_keeps_29760_elements_per_token():
    """Llama 3.1 8B's block (h 4,096, 32 query and 8 key/value heads of 128, SwiGLU f 14,336)
    under the op policy keeps per token its input 4,096, the attention's output 4,096 and
    log-sum-exp 2 * 32 = 64, and half of the fused qkv's (32 + 16) * 128 = 6,144, proj's 4,096,
    the gate-and-up's 2 * 14,336 and down's 4,096 outputs: (6,144 + 4,096 + 28,672 + 4,096) / 2 =
    21,504; 29,760 in all (torchtitan's own split keeps wq 4,096, wv 1,024, w1 14,336 and w2
    4,096: 31,744 with the input and the attention's, 6.3 % more). It runs again half of each
    block GEMM and every memory-bound layer of the blocks, none of the attention."""
    m = to_arrays(load_preset("llama3.1-8b"))
    names, x, w, y, role = np.array(KINDS)[m.kind], m.x, m.w, m.y, m.role
    act = np.prod(x, axis=1) + np.prod(y, axis=1)
    kept = tensor_roles(names, x, w, y, act, role).kept
    total, _ = op_kept(names, x, w, y, role, kept)
    s = 8192
    assert total[block_mask(names)].sum() == pytest.approx(32 * 29_760 * s, rel=1e-12)
    again = op_again(names)
    gemm = (names == "linear") & block_mask(names)
    assert set(again[gemm].tolist()) == {0.5} and again[names == "attention"].sum() == 0.0
    assert set(again[np.isin(names, ("rmsnorm", "swiglu", "add")) & block_mask(names)].tolist()) == {1.0}
    assert again[~block_mask(names)].sum() == 0.0
