"""Dense transformers as data (sweep/inputs/blocks.py, sweep/inputs/presets.py; docs/inputs.md
#transformer-models, docs/model.md §12 and §16): the layer list, the Llama presets' parameter
counts against PRESETS.md, Megatron-LM's FLOPs per token by hand, grouped-query attention's
tensor-parallel rule and SwiGLU's activations."""

from __future__ import annotations

import numpy as np
import pytest

import kernels
from kernels import transformer
from kernels.names import KINDS
from sweep.errors import InputError
from sweep.inputs import blocks, presets
from sweep.inputs.layers import to_arrays
from sweep.inputs.models import load_model
from sweep.inputs.transformers import gpt

#: Total parameters of ../shared/models/PRESETS.md (Hugging Face config.json shapes).
PUBLISHED = {
    "llama2-7b": 6.74e9,
    "llama2-13b": 13.0e9,
    "llama2-70b": 69.0e9,
    "llama3-8b": 8.03e9,
    "llama3.1-8b": 8.03e9,
    "llama3-70b": 70.55e9,
    "llama3.1-70b": 70.55e9,
    "llama3.1-405b": 405.85e9,
}


def weights(model) -> int:
    return int(np.prod(to_arrays(model).w, axis=1).sum())


def net_of(model):
    return kernels.build_net(to_arrays(model), model.dataset_samples)


def test_the_gpt_block_is_the_gpt_builders_layer_for_layer():
    spec = blocks.Block(layers=3, hidden=64, heads=4, seq=32, vocab=100, ffn=256)
    built = blocks.model(spec, "k", "test")
    reference = gpt("k", 3, 64, 4, 32, vocab=100)
    assert built.layers == reference.layers
    assert [layer.role for layer in built.layers] == [layer.role for layer in reference.layers]
    assert built.dataset_samples == reference.dataset_samples


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_preset_parameters_within_2_percent_of_the_published(name):
    model = load_model(name)
    assert abs(weights(model) / PUBLISHED[name] - 1) < 0.02
    # the closed form and the layer list agree
    assert blocks.params(presets.block_of(name)) == weights(model)


def test_llama2_7b_parameters_by_hand():
    """Per block: RMSNorms 2 h = 8,192; QKV h (a + 2g) d = 4096 * 96 * 128 = 50,331,648;
    projection 4096^2 = 16,777,216; SwiGLU 3 h f = 3 * 4096 * 11008 = 135,266,304: 202,383,360;
    x 32 = 6,476,267,520; embedding and untied output 2 * 32000 * 4096 = 262,144,000; final norm
    4,096: 6,738,415,616 (Hugging Face: 6,738,415,616)."""
    assert weights(load_model("llama2-7b")) == 6_738_415_616


def test_token_budgets_and_sequence_suffix():
    # Llama 2: 2.0T tokens / 4,096 = 488,281,250 sequences; Llama 3: 15T / 8,192 = 1,831,054,687.5
    assert load_model("llama2-7b").dataset_samples == 488_281_250
    assert load_model("llama3-8b").dataset_samples == 1_831_054_687
    short = load_model("llama3-8b-s4096")  # 15T / 4,096 = 3,662,109,375
    assert short.dataset_samples == 3_662_109_375 and short.layers[0].x == (1, 4096)
    assert short.name == "llama3-8b-s4096"
    with pytest.raises(InputError, match="unknown model"):
        load_model("llama9-8b")


def test_gqa_shapes_and_attention_at_the_query_width():
    """h = 2048, a = 32 query heads, g = 4 key/value heads of d = 128 (Qwen3-30B-A3B's attention):
    QKV width (32 + 8) 128 = 5,120, attention output a d = 4,096 (twice h), forward FLOPs
    4 a d s^2 = 4 * 4096 * 16^2 = 4,194,304."""
    spec = blocks.Block(layers=1, hidden=2048, heads=32, kv_heads=4, head_dim=128, seq=16, vocab=10, ffn=64)
    layer = {lay.name: lay for lay in blocks.layers(spec)}
    assert layer["qkv_0"].w == (2048, 5120, 1) and layer["attn_0"].x == (5120, 16)
    assert layer["attn_0"].y == (4096, 16) and layer["proj_0"].w == (4096, 2048, 1)
    arrays = to_arrays(blocks.model(spec, "q", "test"))
    flops = kernels.network.forward_flops(arrays.kind, arrays.x, arrays.w, arrays.y)
    assert flops[3] == 4_194_304  # embed, ln1_0, qkv_0, attn_0


def test_tp_must_divide_the_key_value_heads():
    # Megatron-LM splits the key/value heads over tp: llama3-70b's 8 (of 64 query heads),
    # llama2-7b's 32 (multi-head), a GPT's heads
    assert float(net_of(load_model("llama3-70b-s64")).transformer.heads) == 8
    assert float(net_of(load_model("llama2-7b-s64")).transformer.heads) == 32
    assert float(net_of(gpt("k", 2, 64, 4, 32, vocab=10)).transformer.heads) == 4


def test_tp_16_on_8_key_value_heads_is_refused():
    """Megatron's rule: tp divides the key/value heads (8 for Llama 3 70B's 64 query heads)."""
    from sweep.api import estimate
    from sweep.errors import InputError

    def row(tp: int):
        return estimate(
            model="llama3-70b-s64", machine="dgx-h100", strategy="data+tensor+pipeline",
            p=64, global_batch=64, tp=tp, pp=1, micro_batch=1,
        )  # fmt: skip

    assert row(8)["limit_reason"] in ("", "memory")
    with pytest.raises(InputError) as err:
        row(16)
    assert err.value.param == ("tp",) and str(err.value).endswith("8 key/value heads (heads)")


def test_flops_per_token_gpt3_175b_by_hand():
    """Megatron-LM's count for a GPT: 72 L h^2 + 12 L h s + 6 h V per token =
    72 * 96 * 12288^2 = 1,043,677,052,928, + 12 * 96 * 12288 * 2048 = 28,991,029,248,
    + 6 * 12288 * 50257 = 3,705,348,096: 1,076,373,430,272."""
    spec = blocks.Block(layers=96, hidden=12288, heads=96, seq=2048, vocab=50257, ffn=4 * 12288)
    assert blocks.flops_per_token(spec) == 1_076_373_430_272
    net = net_of(load_model("gpt3-175b"))
    assert float(net.model_flops) / 2048 == 1_076_373_430_272


def test_flops_per_token_llama3_70b_by_hand():
    """12 L h^2 = 12 * 80 * 8192^2 = 64,424,509,440; bracket (1 + 8/64 + 8192/8192)(64 * 128 /
    8192) = 2.125, (28672 / 8192) 3/2 = 5.25, 128256 / (2 * 80 * 8192) = 0.0978515625: 7.4728515625;
    product 481,434,796,032. Directly: QKV 6 h (a + 2g) d = 6 * 8192 * 10240 = 503,316,480,
    projection 6 * 8192^2 = 402,653,184, attention 12 a d s = 12 * 8192 * 8192 = 805,306,368,
    SwiGLU 18 h f = 18 * 8192 * 28672 = 4,227,858,432; per block 5,939,134,464, x 80 =
    475,130,757,120; logits 6 h V = 6 * 8192 * 128256 = 6,304,038,912: the same."""
    assert blocks.flops_per_token(presets.block_of("llama3-70b")) == 481_434_796_032
    net = net_of(load_model("llama3-70b"))
    assert float(net.model_flops) / 8192 == 481_434_796_032


def test_swiglu_gqa_block_activations_by_hand():
    """llama3-8b at s = 8,192, per token in 16-bit elements (docs/model.md §16): replicated
    5 h = 20,480 (two RMSNorm inputs, the QKV and gate-up inputs, two dropout masks of h / 2);
    split Q, K, V (32 + 16) 128 = 6,144, scores 5 a s / 2 = 5 * 32 * 8192 / 2 = 655,360, the
    projection's input a d = 4,096, the swiglu input 2f = 28,672, the down projection's input
    f = 14,336: 708,608; total 729,088."""
    arrays = to_arrays(load_model("llama3-8b"))
    names = np.array(KINDS)[arrays.kind]
    total, split, _, _ = transformer.korthikanti(names, arrays.x, arrays.w, arrays.y, arrays.role)
    block = transformer.block_mask(names)
    s, layers = 8192, 32
    assert total[block].sum() / layers / s == 729_088
    assert split[block].sum() / layers / s == 708_608


def test_the_gpt_block_keeps_34_and_24():
    """The GPT block through the same builder: s h (34 + 5 a s / h) bytes, 24 s h + 5 a s^2 split
    (Korthikanti et al. 2022, Table 2); h = 64, a = 4, s = 32: 17 * 2048 + 10240 = 45,056
    elements, 12 * 2048 + 10240 = 34,816 split."""
    spec = blocks.Block(layers=1, hidden=64, heads=4, seq=32, vocab=10, ffn=256)
    arrays = to_arrays(blocks.model(spec, "k", "test"))
    names = np.array(KINDS)[arrays.kind]
    total, split, _, _ = transformer.korthikanti(names, arrays.x, arrays.w, arrays.y, arrays.role)
    block = transformer.block_mask(names)
    assert total[block].sum() == 45_056 and split[block].sum() == 34_816


LLAMA3_8B = """
[model]
name = "my-llama"
[transformer]
layers = 32
hidden = 4096
heads = 32
kv_heads = 8
head_dim = 128
ffn = 14336
ffn_kind = "swiglu"
norm = "rmsnorm"
positions = "rope"
tied_embeddings = false
vocab = 128256
seq = 8192
tokens = 15_000_000_000_000
"""


def test_a_transformer_table_in_a_model_file_is_the_preset(tmp_path):
    path = tmp_path / "llama.toml"
    path.write_text(LLAMA3_8B)
    model = load_model(path)
    assert model.name == "my-llama"
    assert model.layers == load_model("llama3-8b").layers
    assert model.dataset_samples == load_model("llama3-8b").dataset_samples


@pytest.mark.parametrize(
    "edit, message",
    [
        (("kv_heads = 8", "kv_heads = 5"), "transformer.kv_heads'.*5 key/value heads do not divide"),
        (("heads = 32", "heads = 32\nwidth = 3"), "transformer.width'.*unknown key"),
        (("layers = 32\n", ""), "missing key 'layers'"),
        (('norm = "rmsnorm"', 'norm = "batchnorm"'), "transformer.norm'.*layernorm, rmsnorm"),
        (("tied_embeddings = false", "tied_embeddings = 0"), "transformer.tied_embeddings'.*true or false"),
        (("seq = 8192", "seq = 0"), "transformer.seq'.*integer >= 1"),
    ],
)
def test_transformer_table_errors_name_the_key(tmp_path, edit, message):
    path = tmp_path / "bad.toml"
    path.write_text(LLAMA3_8B.replace(*edit))
    with pytest.raises(InputError, match=message):
        load_model(path)


def test_estimate_columns_for_a_preset():
    """``params`` the weights, ``flops_per_token`` Megatron's count, ``mfu`` = flops_per_token
    tokens_per_s / (p gpu_flops)."""
    from sweep.api import estimate

    row = estimate(
        model="llama3-8b-s1024", machine="dgx-h100", strategy="data+tensor+pipeline",
        p=8, global_batch=8, tp=8, pp=1, micro_batch=1,
    )  # fmt: skip
    assert row["params"] == row["active_params"] == weights(load_model("llama3-8b-s1024"))
    assert row["flops_per_token"] == blocks.flops_per_token(presets.block_of("llama3-8b-s1024"))
    gpu_flops = 989e12
    assert row["mfu"] == pytest.approx(
        row["flops_per_token"] * row["tokens_per_s"] / (8 * gpu_flops), rel=1e-12
    )
