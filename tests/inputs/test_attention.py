"""Multi-head latent attention and sliding windows (sweep/inputs/attention.py; docs/model.md §18,
docs/inputs.md#transformer-models): the layers, parameters, FLOPs per token, kept activations,
block boundaries and tensor-parallel rule, each by hand."""

from __future__ import annotations

import numpy as np
import pytest

import kernels
from kernels import partition, transformer
from kernels.names import KINDS
from sweep.errors import InputError
from sweep.inputs import attention, blocks, presets
from sweep.inputs.layers import to_arrays
from sweep.inputs.models import load_model

#: A small latent-attention transformer: h = 64, a = 4 heads, query rank 16, key/value rank 8,
#: 6 + 2 rotary query/key features and 4 value features per head, SwiGLU f = 128.
SMALL = blocks.Block(
    layers=2, hidden=64, heads=4, seq=32, vocab=100, ffn=128, ffn_kind="swiglu", norm="rmsnorm",
    positions="rope", tied=False, q_rank=16, kv_rank=8, qk_nope_dim=6, qk_rope_dim=2, v_dim=4,
)  # fmt: skip


def with_(spec: blocks.Block, **fields) -> blocks.Block:
    return blocks.Block(**{**spec.__dict__, **fields})


def arrays_of(spec: blocks.Block):
    arrays = to_arrays(blocks.model(spec, "t", "test"))
    return np.array(KINDS)[arrays.kind], arrays


def test_latent_attention_layers_by_hand():
    """d_qk = 6 + 2 = 8: the down-projection 64 -> 16 + 8 + 2 = 26, the query up 16 -> 4 * 8 = 32,
    the key/value up 8 -> 4 (6 + 4) = 40; the core reads Q, K (32 each) and V (4 * 4 = 16), 80,
    and writes a d_v = 16; the output projection 16 -> 64."""
    got = {(lay.name, lay.kind, lay.x, lay.w, lay.y, lay.role) for lay in blocks.block(SMALL, 0)}
    assert {
        ("qkv_down_0", "linear", (64, 32), (64, 26, 1), (26, 32), "replicated"),
        ("q_norm_0", "rmsnorm", (16, 32), (1, 16, 1), (16, 32), "replicated"),
        ("q_up_0", "linear", (16, 32), (16, 32, 1), (32, 32), "column"),
        ("kv_norm_0", "rmsnorm", (8, 32), (1, 8, 1), (8, 32), "replicated"),
        ("kv_up_0", "linear", (8, 32), (8, 40, 1), (40, 32), "column"),
        ("attn_0", "attention", (80, 32), (0, 4, 1, 8, 1), (16, 32), "core"),
        ("proj_0", "linear", (16, 32), (16, 64, 1), (64, 32), "row"),
    } <= got
    # without a query bottleneck: a column-parallel q 64 -> 32 and a replicated kv_down 64 -> 10
    names = {lay.name: lay for lay in blocks.block(with_(SMALL, q_rank=0), 0)}
    assert names["q_0"].w == (64, 32, 1) and names["q_0"].role == "column"
    assert names["kv_down_0"].w == (64, 10, 1) and names["kv_down_0"].role == "replicated"
    assert "q_norm_0" not in names and "qkv_down_0" not in names


def test_latent_attention_parameters_by_hand():
    """Per block: the attention's 64 * 26 + 16 * 32 + 8 * 40 + 16 * 64 = 1,664 + 512 + 320 + 1,024
    = 3,520 and its norms 16 + 8 = 24; the block's norms 2 * 64 = 128 and SwiGLU 3 * 64 * 128 =
    24,576: 28,248, x 2 = 56,496; embedding and output 2 * 100 * 64 = 12,800, final norm 64:
    69,360."""
    assert attention.attention_params(SMALL) == 3_544
    assert blocks.params(SMALL) == 69_360
    assert int(np.prod(to_arrays(blocks.model(SMALL, "t", "test")).w, axis=1).sum()) == 69_360


def test_deepseek_v3_attention_parameters_by_hand():
    """DeepSeek-V3 (h 7,168, a 128, query rank 1,536, key/value rank 512, 128 + 64 query/key and
    128 value features): down 7168 * (1536 + 512 + 64) = 15,138,816; query up 1536 * 128 * 192 =
    37,748,736; key/value up 512 * 128 * 256 = 16,777,216; output 128 * 128 * 7168 = 117,440,512;
    norms 1,536 + 512: 187,107,328 per block."""
    spec = blocks.Block(
        layers=1, hidden=7168, heads=128, seq=16, vocab=10, ffn=16, norm="rmsnorm", q_rank=1536,
        kv_rank=512, qk_nope_dim=128, qk_rope_dim=64, v_dim=128,
    )  # fmt: skip
    assert attention.attention_params(spec) == 187_107_328


def test_flops_per_token_on_the_real_widths_and_keys():
    """Per block the attention's linear weights 6 * 3,520 = 21,120 and the core 6 a (d_qk + d_v) s
    = 6 * 4 * 12 * 32 = 9,216: 30,336, x 2 = 60,672; SwiGLU 18 L h f = 18 * 2 * 64 * 128 = 294,912;
    logits 6 h V = 38,400: 393,984. A 8-token window on block 0 (pattern [1, 0]): its core
    6 * 4 * 12 * 8 = 2,304, 6,912 fewer: 387,072. The layer list's model FLOPs per token agree."""
    windowed = with_(SMALL, window=8, window_pattern=(1, 0))
    for spec, by_hand in ((SMALL, 393_984), (windowed, 387_072)):
        assert blocks.flops_per_token(spec) == by_hand
        net = kernels.build_net(to_arrays(blocks.model(spec, "t", "test")), 1)
        assert float(net.model_flops) / 32 == by_hand


def test_windows_on_grouped_query_attention_by_hand():
    """gpt-oss-like: h = 64, a = 8 heads of d = 16, g = 2, s = 64, window 16 on every other block
    starting with block 0, 4 blocks. Core per token 12 a d k: full 12 * 128 * 64 = 98,304, windowed
    12 * 128 * 16 = 24,576; the layers' w [0, 8, 1, 1, 16] on blocks 0 and 2, [0, 8, 1] on 1 and 3;
    scores kept per block a s k: 8 * 64 * 16 = 8,192 against 32,768."""
    spec = blocks.Block(
        layers=4, hidden=64, heads=8, kv_heads=2, head_dim=16, seq=64, vocab=10, ffn=64,
        window=16, window_pattern=(1, 0),
    )  # fmt: skip
    full = with_(spec, window=0, window_pattern=())
    assert blocks.flops_per_token(full) - blocks.flops_per_token(spec) == 2 * (98_304 - 24_576)
    attn = [lay for lay in blocks.layers(spec) if lay.kind == "attention"]
    assert [lay.w for lay in attn] == [(0, 8, 1, 1, 16), (0, 8, 1), (0, 8, 1, 1, 16), (0, 8, 1)]
    arrays = to_arrays(blocks.model(spec, "w", "test"))
    scores = kernels.network.softmax_elems(arrays.kind, arrays.w, arrays.y)
    assert scores[scores > 0].tolist() == [8_192.0, 32_768.0, 8_192.0, 32_768.0]
    # every block windowed when the pattern is empty; a window as long as s is no window
    assert all(attention.windowed(with_(spec, window_pattern=()), i) for i in range(4))
    assert blocks.flops_per_token(with_(spec, window=64)) == blocks.flops_per_token(full)


def test_latent_block_activations_by_hand():
    """Per token in 16-bit elements (docs/model.md §16, §18): replicated, the block's norms' and the
    down-projection's inputs 3 * 64, the query and key/value norms' and up-projections' inputs
    2 * (16 + 8), the dropout masks 2 * 32, the FFN's input 64: 368; split over tp, Q, K and V 80,
    the scores 5 a s / 2 = 5 * 4 * 32 / 2 = 320, the projection's input 16, the SwiGLU's 256 and the
    down projection's 128: 800."""
    names, arrays = arrays_of(SMALL)
    total, split, _, _ = transformer.korthikanti(names, arrays.x, arrays.w, arrays.y, arrays.role)
    block = transformer.block_mask(names)
    assert total[block].sum() / 2 / 32 == 368 + 800
    assert split[block].sum() / 2 / 32 == 800


def test_blocks_begin_at_their_first_norm_not_at_the_latent_norms():
    """The query and key/value norms sit inside the attention: a block (its pipeline cut, full
    recomputation's kept input) begins at ln1, after the last residual add."""
    names, arrays = arrays_of(SMALL)
    layer = [lay.name for lay in blocks.layers(SMALL)]
    assert [layer[i] for i in partition.block_firsts(names)] == ["ln1_0", "ln1_1"]
    assert [layer[i] for i in partition.block_starts(names)] == ["ln1_1"]
    assert layer[int(np.flatnonzero(transformer.block_mask(names))[0])] == "ln1_0"
    kept = transformer.tensor_roles(
        names, arrays.x, arrays.w, arrays.y, np.zeros(len(names)), arrays.role
    ).kept
    assert [layer[i] for i in np.flatnonzero(kept)] == ["ln1_0", "ln1_1"]


def test_latent_attention_tensor_parallel_rule_and_gemm_classes():
    """Latent attention has a = g key/value heads, which tp must divide (4 here); the core's GEMM
    class is (CORE, a d_v = 16, a = 4, s = 32, a d_qk = 32, keys 32), windowed keys 8."""
    _, arrays = arrays_of(with_(SMALL, window=8, window_pattern=(1, 0)))
    net = kernels.build_net(arrays, 1)
    assert float(net.transformer.heads) == 4
    shapes = {tuple(row) for row in np.asarray(net.transformer.gemm_shape) if row[0] == transformer.CORE}
    assert shapes == {(2.0, 16.0, 4.0, 32.0, 32.0, 32.0), (2.0, 16.0, 4.0, 32.0, 32.0, 8.0)}


MLA = """
[model]
name = "small-mla"
[transformer]
layers = 2
hidden = 64
heads = 4
q_rank = 16
kv_rank = 8
qk_nope_dim = 6
qk_rope_dim = 2
v_dim = 4
ffn = 128
ffn_kind = "swiglu"
norm = "rmsnorm"
positions = "rope"
tied_embeddings = false
vocab = 100
seq = 32
window = 8
window_pattern = [1, 0]
"""


def test_a_model_file_states_latent_attention_and_windows(tmp_path):
    path = tmp_path / "mla.toml"
    path.write_text(MLA)
    assert load_model(path).layers == blocks.layers(with_(SMALL, window=8, window_pattern=(1, 0)))


@pytest.mark.parametrize(
    "edit, message",
    [
        (("window_pattern = [1, 0]", "window_pattern = [2]"), "transformer.window_pattern'.*1 .windowed"),
        (("window = 8\n", ""), "transformer.window'.*needs a window"),
        (("kv_rank = 8", "kv_rank = 0"), "transformer.kv_rank'.*state kv_rank > 0"),
        (("v_dim = 4", "v_dim = 0"), "transformer.v_dim'.*needs v_dim >= 1"),
        (("heads = 4", "heads = 4\nkv_heads = 2"), "transformer.kv_heads'.*not kv_heads"),
        (("q_rank = 16", "q_rank = -1"), "transformer.q_rank'.*integer >= 0"),
    ],
)
def test_attention_key_errors_name_the_key(tmp_path, edit, message):
    path = tmp_path / "bad.toml"
    path.write_text(MLA.replace(*edit))
    with pytest.raises(InputError, match=message):
        load_model(path)


def test_an_estimate_of_latent_attention_and_its_tp_rule(tmp_path):
    from sweep.api import estimate

    path = tmp_path / "mla.toml"
    path.write_text(MLA)

    def row(tp: int):
        return estimate(
            model=str(path), machine="dgx-h100", strategy="data+tensor+pipeline",
            p=8, global_batch=8, tp=tp, pp=1, micro_batch=1,
        )  # fmt: skip

    assert row(4)["flops_per_token"] == 387_072 and row(4)["params"] == 69_360
    with pytest.raises(InputError) as err:
        row(8)
    assert err.value.param == ("tp",)


def test_deepseek_v3_parameters_by_hand():
    """PRESETS.md: 671B total, 37B active. By hand: attention 187,107,328 x 61 = 11,413,547,008;
    block norms 2 * 7,168 x 61 = 874,496; 3 dense SwiGLU FFNs 3 * 3 * 7168 * 18432 = 1,189,085,184;
    58 MoE blocks of router 7168 * 256 = 1,835,008, 256 routed experts of 3 * 7168 * 2048 =
    44,040,192 and one shared: 11,320,164,352 each, 656,569,532,416; embedding and output
    2 * 129280 * 7168 = 1,853,358,080; final norm 7,168: 671,026,404,352. Active: 8 routed experts
    of 58 blocks, (1,835,008 + 9 * 44,040,192) * 58 = 23,095,410,688 instead: 37,552,282,624
    (+1.5 % of 37B; its multi-token-prediction module not counted, as in the 671B)."""
    assert blocks.params(presets.block_of("deepseek-v3")) == 671_026_404_352
    assert int(np.prod(to_arrays(load_model("deepseek-v3")).w, axis=1).sum()) == 671_026_404_352
    assert blocks.active_params(presets.block_of("deepseek-v3")) == 37_552_282_624
    assert abs(671_026_404_352 / 671e9 - 1) < 0.02 and abs(37_552_282_624 / 37e9 - 1) < 0.03


def test_gpt_oss_120b_parameters_by_hand():
    """PRESETS.md: 116.8B total, 5.1B active. Per block: attention 2880 (64 + 16) 64 + 4096 * 2880
    = 26,542,080; norms 5,760; router 2880 * 128 = 368,640; 128 experts of 3 * 2880^2 = 24,883,200
    each: 3,185,049,600; 3,211,966,080 x 36 = 115,630,778,880; embedding and output 2 * 201088 *
    2880 = 1,158,266,880; final norm 2,880: 116,789,048,640. Biases, not counted: q, k, v
    (64 + 16) 64 = 5,120, output 2,880, router 128, experts 128 * 3 * 2,880 = 1,105,920, and the
    sinks 64: 1,114,112 a block, 40,108,032 in all: with them 116,829,156,672, the model card's
    116.83B. Active 5,710,443,840: the model card's 5.13B leaves out the input embedding (its
    20b: 24 * 26,542,080 + 24 * (4 * 24,883,200 + 2880 * 32) + 579,133,440 = 3.61B, as published),
    so 5,710,443,840 - 201088 * 2880 = 5,131,310,400 against it."""
    spec = presets.block_of("gpt-oss-120b")
    assert blocks.params(spec) == 116_789_048_640
    assert blocks.params(spec) + 36 * 1_114_112 == 116_829_156_672
    assert blocks.active_params(spec) == 5_710_443_840
    assert abs(blocks.params(spec) / 116.8e9 - 1) < 0.02
    assert abs((blocks.active_params(spec) - 201_088 * 2880) / 5.1e9 - 1) < 0.03


def test_gpt_oss_120b_flops_per_token_by_hand():
    """Per block the attention's linear layers 6 * 26,542,080 = 159,252,480, x 36 = 5,733,089,280;
    the cores 6 a (d_qk + d_v) k = 6 * 64 * 128 k: 201,326,592 at k = s = 4,096 on the 18 odd
    blocks, 6,291,456 at the 128-token window on the 18 even ones: 3,737,124,864; the experts
    18 h k f = 18 * 2880 * 4 * 2880 = 597,196,800 x 36 = 21,499,084,800 (the router not counted);
    logits 6 h V = 6 * 2880 * 201088 = 3,474,800,640: 34,444,099,584. The layer list agrees."""
    assert blocks.flops_per_token(presets.block_of("gpt-oss-120b")) == 34_444_099_584
    arrays = to_arrays(load_model("gpt-oss-120b"))
    net = kernels.build_net(arrays, 1)
    assert float(net.model_flops) / 4096 == 34_444_099_584
    attn = [w for kind, w in zip(np.array(KINDS)[arrays.kind], arrays.w, strict=True) if kind == "attention"]
    assert [int(w[4]) for w in attn[:4]] == [128, 1, 128, 1] and len(attn) == 36


def test_a_layer_file_states_an_attention_layers_widths_and_window(tmp_path):
    """A hand-written ``[[layer]]`` attention may state w = [0, a, 1, d_qk, W] (its x has one
    position extent, so five entries where other layers have three): a = 2, d_qk = 3, d_v = 2,
    s = 8, W = 4: forward 2 s k (a d_qk + a d_v) = 2 * 8 * 4 * 10 = 640. A d_qk its x does not
    fit is refused, naming the rule."""
    norm = 'name = "ln"\nkind = "layernorm"\nx = [16, 8]\nw = [2, 16, 1]\ny = [16, 8]'
    core = 'name = "a"\nkind = "attention"\nx = [16, 8]\nw = [0, 2, 1, 3, 4]\ny = [4, 8]'
    path = tmp_path / "m.toml"
    body = "".join(f"\n[[layer]]\n{layer}\n" for layer in (norm, core))
    path.write_text(f'[model]\nname = "m"\ndataset_samples = 100\n{body}')
    arrays = to_arrays(load_model(path))
    assert kernels.network.forward_flops(arrays.kind, arrays.x, arrays.w, arrays.y)[1] == 640
    path.write_text(path.read_text().replace("w = [0, 2, 1, 3, 4]", "w = [0, 2, 1, 5, 4]"))
    with pytest.raises(InputError, match="key/value heads dividing"):
        load_model(path)
