"""Mixtures of experts as data (sweep/inputs/moe.py, docs/model.md §17): the MoE presets' counts
against ../shared/models/PRESETS.md, the layer list of an MoE block, the model file's keys."""

from __future__ import annotations

import math

import pytest

from sweep.errors import InputError
from sweep.inputs import blocks
from sweep.inputs.blocks import Block
from sweep.inputs.presets import PRESETS, block_of, is_preset

#: PRESETS.md's "params total / active" column, in billions (recomputed there from the shapes and
#: checked against the published figures).
PUBLISHED = {
    "mixtral-8x7b": (46.7, 12.9),
    "mixtral-8x22b": (140.6, 39.2),
    "qwen3-30b-a3b": (30.5, 3.3),
    "qwen3-235b-a22b": (235.1, 22.2),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_moe_presets_count_their_published_parameters(name):
    """Issue 39's check: totals within 2 %, active within 3 %."""
    spec = block_of(name)
    total, active = PUBLISHED[name]
    assert blocks.params(spec) / 1e9 == pytest.approx(total, rel=0.02)
    assert blocks.active_params(spec) / 1e9 == pytest.approx(active, rel=0.03)
    assert is_preset(name) and is_preset(f"{name}-s8192") and block_of(f"{name}-s8192").seq == 8192


def test_qwen3_30b_weights_by_hand():
    """Qwen3-30B-A3B (L 48, h 2048, a 32, g 4, d 128, 128 experts of f 768, top 8, V 151,936):
    per block RMSNorms 2 x 2,048 = 4,096; Q, K, V 2,048 x (32 + 8) x 128 = 10,485,760; output
    4,096 x 2,048 = 8,388,608; router 2,048 x 128 = 262,144; experts 128 x 3 x 2,048 x 768 =
    603,979,776 (8 of them active: 37,748,736). Block 623,120,384, active 56,889,344 (x 48:
    29,909,778,432 and 2,730,688,512). Embedding and output 2 x 151,936 x 2,048 = 622,329,856,
    final norm 2,048: 30,532,110,336 in all (PRESETS.md's 30.5B), 3,353,020,416 active (3.3B)."""
    spec = block_of("qwen3-30b-a3b")
    per_block = 4_096 + 10_485_760 + 8_388_608 + 262_144 + 603_979_776
    active_block = 4_096 + 10_485_760 + 8_388_608 + 262_144 + 37_748_736
    rest = 622_329_856 + 2_048
    assert blocks.params(spec) == 48 * per_block + rest == 30_532_110_336
    assert blocks.active_params(spec) == 48 * active_block + rest == 3_353_020_416


def test_qwen3_30b_flops_per_token_by_hand():
    """Megatron-LM's count, 12 L h^2 [(1 + g/a + s/h)(a d / h) + (f/h) k m + V / (2 L h)] with
    L 48, h 2,048, a 32, g 4, d 128, s 4,096, f 768, k 8, m 3/2, V 151,936:
    12 x 48 x 2,048^2 = 2,415,919,104; (1 + 0.125 + 2) x 2 = 6.25; 0.375 x 8 x 1.5 = 4.5;
    151,936 / 196,608 = 0.772786458...; 2,415,919,104 x 11.522786458... = 27,838,119,936."""
    assert blocks.flops_per_token(block_of("qwen3-30b-a3b")) == 27_838_119_936


def test_an_moe_block_lists_its_router_and_experts():
    # hidden 8, sequence 4, 4 experts of width 6 (SwiGLU), top 2: k s = 8 dispatched copies;
    # one shared expert of width 6; block 0 dense (ffn 16), block 1 a mixture of experts
    spec = Block(layers=2, hidden=8, heads=2, seq=4, vocab=16, ffn=16, ffn_kind="swiglu", experts=4,
                 top_k=2, expert_ffn=6, shared_experts=1, dense_layers=1)  # fmt: skip
    by_name = {layer.name: layer for layer in blocks.layers(spec)}
    assert "up_0" in by_name and "router_0" not in by_name
    assert (by_name["router_1"].kind, by_name["router_1"].w, by_name["router_1"].role) == (
        "router",
        (8, 4, 1),
        "replicated",
    )
    up, down = by_name["exp_up_1"], by_name["exp_down_1"]
    assert (up.kind, up.x, up.w, up.y, up.role) == ("experts", (8, 8), (8, 12, 4), (12, 8), "expert")
    assert (down.x, down.w, down.y) == ((6, 8), (6, 8, 4), (8, 8))
    assert by_name["exp_swiglu_1"].role == "expert" and by_name["sh_up_1"].w == (8, 12, 1)
    # weights: the list's own sum is params(); active counts 2 of the 4 experts
    listed = sum(math.prod(layer.w) for layer in blocks.layers(spec))
    assert blocks.params(spec) == listed
    assert blocks.params(spec) - blocks.active_params(spec) == 2 * 3 * 8 * 6


def test_moe_keys_in_a_model_file(tmp_path):
    table = {"layers": 2, "hidden": 8, "heads": 2, "seq": 4, "vocab": 16, "experts": 4, "top_k": 2,
             "expert_ffn": 6, "shared_experts": 0, "dense_layers": 0}  # fmt: skip
    spec = blocks.from_toml(table, tmp_path / "m.toml")
    assert (spec.experts, spec.top_k, spec.expert_ffn, spec.shared_experts) == (4, 2, 6, 0)
    with pytest.raises(InputError, match="top_k"):
        blocks.model(Block(**{**spec.__dict__, "top_k": 5}), "m", "")
    with pytest.raises(InputError, match="dense_layers"):
        blocks.model(Block(**{**spec.__dict__, "dense_layers": 2}), "m", "")
    with pytest.raises(InputError, match="must be an integer >= 0"):
        blocks.from_toml({**table, "experts": -1}, tmp_path / "m.toml")


def test_presets_keep_their_names():
    assert {"mixtral-8x7b", "mixtral-8x22b", "qwen3-30b-a3b", "qwen3-235b-a22b", "llama3-8b"} <= set(PRESETS)
    assert not is_preset("qwen3-30b-a3b-s") and not is_preset("mixtral")
