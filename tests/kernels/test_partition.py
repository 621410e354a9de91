"""Pipeline stages (kernels/partition.py, docs/model.md §10.4, §16): a transformer is cut between
its blocks only, so pp is at most the blocks; other networks between layers."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import kernels
from kernels import partition
from kernels.names import KINDS
from sweep.inputs.layers import to_arrays
from sweep.inputs.transformers import gpt


def names_of(model) -> np.ndarray:
    return np.array(KINDS)[to_arrays(model).kind]


def test_gpt_blocks_start_at_their_first_layernorm():
    # embed, then 10 layers per block (ln1 first), then ln_f and out: blocks 1 and 2 begin at
    # 1 + 10 = 11 and 21
    np.testing.assert_array_equal(partition.block_starts(names_of(gpt("g", 3, 8, 2, 4, vocab=10))), [11, 21])
    # without layernorms, a block begins at its attention
    names = np.array(["linear", "attention", "linear", "attention", "linear"])
    np.testing.assert_array_equal(partition.block_starts(names), [3])
    assert partition.block_starts(np.array(["conv", "relu", "fc"])).size == 0


def test_gpt_stages_are_whole_blocks():
    """GPT of 4 blocks, h = 8, s = 4, V = 10. Training FLOPs of a block: 3 s (24 h^2 + 4 s h + 8 h
    + 2 h + 4 h) = 12 (1,536 + 128 + 112) = 21,312; the tail (ln_f, out) 3 s (4 h + 2 h V) =
    12 * 192 = 2,304 (embed 0). Units 21,312 x 3 and 23,616 (87,552 in all): pp = 2 puts two
    blocks on each stage (42,624 | 44,928); pp = 3: t* = 42,624 (2 | 1 | 1 blocks: 42,624,
    21,312, 23,616); pp = 4 one block each, the last with the tail: 23,616."""
    model = gpt("g", 4, 8, 2, 4, vocab=10)
    names = names_of(model)
    net = kernels.build_net(to_arrays(model), 100)
    stages = partition.stage_partitions(names, np.ones(len(names)))
    assert len(stages.parts) == 4 and float(net.n_stages) == 4
    np.testing.assert_array_equal(net.pipeline.flops_max, [0, 87_552, 44_928, 42_624, 23_616])
    assert stages.layer_starts(2) == [0, 21]
    assert float(net.n_layers) == 1 + 40 + 2


def test_gpt_stages_split_the_blocks_evenly_when_pp_divides_them():
    """Megatron-LM puts L / pp blocks on each stage whatever the embedding and output layer cost
    (docs/model.md §16); only a pp that does not divide the blocks takes the min-max partition.
    GPT of 4 blocks, h = 8, s = 4, V = 1,000: a block 21,312 training FLOPs (as above), the tail
    3 s (4 h + 2 h V) = 12 (32 + 16,000) = 192,384. pp = 2: two blocks each, the last stage
    2 * 21,312 + 192,384 = 235,008 (the min-max split would be 3 | 1: 213,696); pp = 3 does not
    divide 4: min-max, 2 | 1 | 1 blocks, the largest the last block and the tail: 213,696."""
    model = gpt("g", 4, 8, 2, 4, vocab=1000)
    net = kernels.build_net(to_arrays(model), 100)
    np.testing.assert_array_equal(net.pipeline.flops_max[2:4], [235_008, 213_696])
    stages = partition.stage_partitions(names_of(model), np.ones(len(names_of(model))))
    assert stages.parts[1] == [0, 2] and stages.parts[3] == [0, 1, 2, 3]


def test_cnn_stages_are_layers(small_net):
    assert float(small_net.n_stages) == float(small_net.n_layers) == 3


@settings(deadline=None, max_examples=40)
@given(st.integers(1, 6), st.integers(1, 6))
def test_stage_sums_equal_layer_sums(blocks, pp):
    """Per-stage sums of per-block sums are the per-layer sums over the stage, to the last bit
    (integer FLOPs), and every stage holds whole blocks."""
    model = gpt("g", blocks, 8, 2, 4, vocab=10)
    names = names_of(model)
    flops = 3.0 * kernels.network.forward_flops(
        to_arrays(model).kind, *(to_arrays(model)[i] for i in (1, 2, 3))
    )
    stages = partition.stage_partitions(names, flops)
    pp = min(pp, blocks)
    starts = stages.layer_starts(pp)
    assert set(starts[1:]) <= set(partition.block_starts(names).tolist())
    np.testing.assert_array_equal(stages.sums(stages.per_unit(flops), pp), np.add.reduceat(flops, starts))


def test_megatron_places_blocks_that_pp_vp_does_not_divide():
    """docs/model.md §16, by hand. Without interleaving any pp up to the blocks is placed (uneven
    first and last stages): DeepSeek-V3's 61 at pp 16 (3 + 14 x 4 + 2), and 126 at pp 8.
    Interleaved, Megatron-Core's pipeline layout gives every chunk a layer of the blocks, the
    embedding or the loss: Llama 3.1 405B's 126 at pp 8, vp 8 (64 <= 128) and vp 4; DeepSeek-V3's
    61 at pp 8, vp 4 (32 <= 63, Megatron-Bridge's uneven layout) and at pp 16, vp 2 (32 <= 63);
    126 at pp 4, vp 5 (20 <= 128); not 61 at pp 16, vp 4 (64 > 63), nor 2 blocks at pp 2, vp 3
    (6 > 4); pp beyond the blocks never."""
    cases = [
        ((61, 16, 1), True),
        ((126, 8, 1), True),
        ((96, 8, 4), True),
        ((126, 8, 8), True),
        ((126, 8, 4), True),
        ((127, 8, 8), True),
        ((126, 4, 5), True),
        ((61, 16, 2), True),
        ((61, 8, 4), True),
        ((61, 16, 4), False),
        ((2, 2, 3), False),
        ((2, 2, 2), True),
        ((4, 8, 1), False),
    ]
    for (blocks, pp, vp), want in cases:
        assert bool(partition.placeable(blocks, pp, vp)) is want, (blocks, pp, vp)
    # arrays (a sweep's axes) elementwise, as the kernel calls it
    got = partition.placeable(np.float64(126.0), np.array([8.0, 4.0]), np.array([8.0, 33.0]))
    assert got.tolist() == [True, False]  # 64 <= 128; 132 > 128


def test_the_fullest_stage_holds_ceil_blocks_over_pp():
    """126 blocks at pp 8 (docs/model.md §16): Megatron-LM's placement puts 16 blocks on each
    middle stage (8 chunks of 2), 15 on the first and last, beside the embedding and the loss;
    ceil(126 / 8) = 16, and the min-max partition of the stage table's pp = 8 row has the same
    fullest stage, 16 blocks (it fills the first seven, 7 x 16 + 14: the remainder sits
    elsewhere, but the fullest stage, which sets the pace and the memory, is the same)."""
    assert partition.fullest_stage_blocks(126, 8) == 16
    assert partition.fullest_stage_blocks(61, 16) == 4
    model = gpt("g", 126, 8, 2, 4, vocab=10)
    names = names_of(model)
    a = to_arrays(model)
    flops = 3.0 * kernels.network.forward_flops(a.kind, a.x, a.w, a.y)
    stages = partition.stage_partitions(names, flops)
    starts = stages.parts[8 - 1]
    sizes = np.diff([*starts, len(stages.units)])
    assert sizes.max() == 16 and sizes.sum() == 126 and len(sizes) == 8
