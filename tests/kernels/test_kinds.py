"""The layer-kind table (kernels/kinds.py, docs/model.md §1): one record per kind, read by the
network and transformer tables."""

import numpy as np
import pytest

from kernels import activations, kinds, network, transformer
from kernels.names import KINDS


def test_kinds_are_the_table_names_in_code_order():
    assert tuple(k.name for k in kinds.TABLE) == KINDS
    # the CNN kinds keep their codes (ParaDL files and stored networks index them)
    assert KINDS[:8] == ("conv", "fc", "pool_max", "pool_avg", "relu", "bnorm", "add", "dropout")
    assert all(k.saves in ("x", "y", "") and k.role in kinds.ROLES for k in kinds.TABLE)


def test_the_tables_read_the_records():
    # docs/model.md §6, §12, §16: relu and bnorm work in place; the matrix multiplies count
    # toward the MFU; the GEMM kinds are timed by FLOPs, every other kind is memory-bound
    assert {"relu", "bnorm"} == network.IN_PLACE
    # (an MoE's router is left out of the model FLOPs as Megatron-LM leaves it, §17)
    assert {"conv", "fc", "linear", "attention", "experts"} == network.MODEL_FLOPS_KINDS
    assert set(activations.GEMM_KINDS) == {"conv", "fc", "linear", "experts", "router"}
    assert network.SAVES["relu"] == "y" and network.SAVES["pool_avg"] == "" and network.SAVES["linear"] == "x"
    # filter and channel split conv and fc by default (§9); the GEMMs timed by shape are the
    # linear layers and attention cores, the FP8 ones the linear layers only (§16)
    assert [k.name for k in kinds.TABLE if k.filter_channel] == ["conv", "fc"]
    # (and an MoE's grouped expert GEMMs, §17)
    assert [k.name for k in kinds.TABLE if k.by_shape] == ["linear", "attention", "experts"]
    assert [k.name for k in kinds.TABLE if k.fp8] == ["linear", "experts"]
    # Megatron-LM's GPT layer (docs/model.md §16): attention 5 kernels forward, 7 backward
    assert transformer.OPS_PER_KIND["attention"] == (5, 7) and transformer.OPS_PER_KIND["conv"] == (1, 1)


@pytest.mark.parametrize(
    "kind, x, w, y, broken",
    [
        ("gelu", (4096, 2048), (0, 0, 0), (4096, 2048), None),
        ("gelu", (4096, 2048), (0, 0, 0), (1024, 2048), "y = x"),
        ("layernorm", (1024, 2048), (2, 1024, 1), (1024, 1024), "y = x"),
        ("attention", (3072, 2048), (0, 16, 1), (1024, 2048), None),
        ("attention", (1024, 2048), (0, 16, 1), (1024, 2048), "3h"),
        ("attention", (3072, 1024), (0, 16, 1), (1024, 2048), "3h"),
        ("attention", (3072, 2048), (0, 7, 1), (1024, 2048), "heads dividing"),
        # grouped-query attention: a = 8 heads of d = 1024 / 8 = 128, g = 2 key/value heads:
        # x[0] = (8 + 2 * 2) 128 = 1,536; g = 3 (x[0] = 1,792) does not divide 8
        ("attention", (1536, 2048), (0, 8, 1), (1024, 2048), None),
        ("attention", (1792, 2048), (0, 8, 1), (1024, 2048), "key/value heads dividing"),
        # the query width a d = 4,096 need not be h: y = [a d, s]
        ("attention", (5120, 16), (0, 32, 1), (4096, 16), None),
        ("rmsnorm", (1024, 2048), (1, 1024, 1), (1024, 2048), None),
        ("rmsnorm", (1024, 2048), (1, 1024, 1), (512, 2048), "y = x"),
        ("swiglu", (8192, 2048), (8192, 4096, 0), (4096, 2048), None),
        ("swiglu", (4096, 2048), (4096, 4096, 0), (4096, 2048), "[2f, s...]"),
        ("linear", (1024, 2048), (1024, 4096, 1), (4096, 2048), None),
        ("linear", (1024, 2048), (0, 0, 0), (50257, 2048), None),  # tied to the embedding
        ("linear", (1024, 2048), (1024, 4096, 1), (4096, 1024), "same positions"),
        ("linear", (1024, 2048), (1024, 4000, 1), (4096, 2048), "x[0], y[0]"),
        # 8 experts of SwiGLU width 14,336 on the k s = 2 x 4,096 dispatched tokens (docs/model.md §17)
        ("experts", (4096, 8192), (4096, 28672, 8), (28672, 8192), None),
        ("experts", (4096, 8192), (4096, 28672, 8), (28672, 4096), "dispatched tokens"),
        ("experts", (4096, 8192), (4096, 14336, 8), (28672, 8192), "experts]"),
        ("router", (4096, 4096), (4096, 8, 1), (8, 4096), None),
        ("embedding", (1, 2048), (52305, 1024, 1), (1024, 2048), None),
        ("embedding", (1, 2048), (52305, 512, 1), (1024, 2048), "y[0] features"),
        ("conv", (3, 224, 224), (3, 64, 7, 7), (64, 112, 112), None),
    ],
)
def test_shape_rules(kind, x, w, y, broken):
    got = kinds.check_shapes(kind, x, w, y)
    assert got is None if broken is None else broken in got


def test_kv_heads_from_the_shapes():
    # (a + 2g) d for a d: a = 32, d = 128: g = 8 from 6,144; multi-head g = a from 3 h
    assert kinds.kv_heads(6144, 32, 4096) == 8 and kinds.kv_heads(3 * 4096, 32, 4096) == 32
    assert kinds.kv_heads(4096, 32, 4096) is None and kinds.kv_heads(4096 + 128, 32, 4096) is None
    assert kinds.NORMS == ("layernorm", "rmsnorm")


def test_forward_flops_by_rule():
    # one layer of each of three kinds, by hand: linear 2 C F s = 2*8*16*4 = 1024;
    # attention 4 h s^2 = 4*8*4^2 = 512; embedding 0
    code = [KINDS.index(k) for k in ("linear", "attention", "embedding")]
    x = np.array([[8, 4, 1, 1], [24, 4, 1, 1], [1, 4, 1, 1]], float)
    w = np.array([[8, 16, 1, 1, 1], [0, 2, 1, 1, 1], [100, 8, 1, 1, 1]], float)
    y = np.array([[16, 4, 1, 1], [8, 4, 1, 1], [8, 4, 1, 1]], float)
    assert network.forward_flops(np.array(code), x, w, y).tolist() == [1024.0, 512.0, 0.0]


@pytest.mark.parametrize(
    "x, w, y, broken",
    [
        # multi-head latent attention's core: a = 2 heads, d_qk = 3, d_v = 4 / 2 = 2, g = a:
        # x[0] = a d_qk + g (d_qk + d_v) = 6 + 10 = 16
        ((16, 8), (0, 2, 1, 3, 1), (4, 8), None),
        ((16, 8), (0, 2, 1, 3, 4), (4, 8), None),  # a window of 4 keys
        ((15, 8), (0, 2, 1, 3, 1), (4, 8), "key/value heads dividing"),
        ((16, 8), (0, 2, 1, 3, 4, 1), (4, 8), "[0, heads, 1, d_qk, window]"),
        ((16, 8), (0, 2, 2, 3, 1), (4, 8), "w[2] = 1"),
        ((16, 8), (0, 2, 1, 0, 1), (4, 8), "each >= 1"),
        # a window on multi-head attention: d_qk 1 (d_v), W = 4
        ((12, 8), (0, 2, 1, 1, 4), (4, 8), None),
    ],
)
def test_attention_widths_and_windows_shape_rules(x, w, y, broken):
    got = kinds.check_shapes("attention", x, w, y)
    assert got is None if broken is None else broken in got


def test_kv_heads_with_query_key_heads_of_their_own_width():
    # a = 4 heads, d_v = 8 / 4 = 2, d_qk = 3, g = 2: a d_qk + g (d_qk + d_v) = 12 + 10 = 22
    assert kinds.kv_heads(22, 4, 8, 3) == 2
    # latent attention, g = a = 2, d_qk = 3, d_v = 2: 6 + 10 = 16; 1 is the default (d_qk = d_v)
    assert kinds.kv_heads(16, 2, 4, 3) == 2 and kinds.kv_heads(16, 2, 4) is None
    assert kinds.kv_heads(3 * 4, 2, 4, 1) == 2


def test_attention_flops_and_scores_on_the_real_widths_and_keys():
    """a = 2 heads, d_qk = 3, d_v = 2 (y[0] = 4), s = 8. Forward 2 s k (a d_qk + a d_v):
    full k = 8: 2 * 8 * 8 * (6 + 4) = 1,280; window W = 4: 2 * 8 * 4 * 10 = 640; W = 16 > s is
    no window: 1,280. Scores kept a s k: 128, 64, 128; Korthikanti's 5 a s k / 2: 320, 160, 320."""
    code = np.full(3, KINDS.index("attention"))
    x = np.array([[16, 8, 1, 1]] * 3, float)
    w = np.array([[0, 2, 1, 3, 1], [0, 2, 1, 3, 4], [0, 2, 1, 3, 16]], float)
    y = np.array([[4, 8, 1, 1]] * 3, float)
    assert network.forward_flops(code, x, w, y).tolist() == [1280.0, 640.0, 1280.0]
    assert network.softmax_elems(code, w, y).tolist() == [128.0, 64.0, 128.0]
    assert kinds.BY_NAME["attention"].block_scores(x, w, y).tolist() == [320.0, 160.0, 320.0]
    # the defaults (w [0, a, 1] padded with ones) keep 4 h s^2 = 4 * 4 * 64 = 1,024
    plain = np.array([[0, 2, 1, 1, 1]], float)
    assert network.forward_flops(code[:1], np.array([[12, 8, 1, 1]], float), plain, y[:1]).tolist() == [
        1024.0
    ]
