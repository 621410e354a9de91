"""Built-in models from their architecture (sweep/inputs/architectures.py, docs/inputs.md#built-in-models).

Known facts checked: published parameter counts (minus the biases and
batch-norm parameters, which ParaDL's weight count leaves out), published
multiply-accumulate counts, ParaDL's CosmoFlow file, and that shapes chain.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest

import grids
from kernels import KINDS
from kernels.network import forward_flops
from sweep.inputs import architectures
from sweep.inputs.architectures import BUILTIN, conv, out_extent
from sweep.inputs.layers import Layer, Model, bind, to_arrays
from sweep.inputs.models import apply_lc, load_model, load_model_toml, parse_net

#: ParaDL's example files, beside the repository (``../shared/paradl/``).
PARADL = Path(__file__).resolve().parents[3] / "shared" / "paradl"
needs_paradl = pytest.mark.skipif(not PARADL.is_dir(), reason=f"ParaDL example files not found at {PARADL}")

IMAGENET = ("alexnet", "vgg16", "resnet50", "resnet152")


def weights(model: Model) -> int:
    return sum(math.prod(layer.w) for layer in model.layers)


def test_builtin_names():
    assert set(BUILTIN) == {
        "alexnet",
        "vgg16",
        "resnet50",
        "resnet152",
        "cosmoflow-128",
        "cosmoflow-256",
        "cosmoflow-512",
    }
    for name, make in BUILTIN.items():
        assert make().name == name


# Published totals are torchvision's parameter counts (weights + biases + batch-norm gamma/beta).
# The bias and batch-norm counts below are worked out by hand from the architecture.
WEIGHTS = {
    # AlexNet (torchvision): 61,100,840 parameters. Biases, one per output channel/unit:
    # convs 64 + 192 + 384 + 256 + 256 = 1,152; fcs 4096 + 4096 + 1000 = 9,192; total 10,344.
    # 61,100,840 - 10,344 = 61,090,496.
    "alexnet": 61_100_840 - 10_344,
    # VGG16 (torchvision, no BN): 138,357,544 parameters. Biases: convs 2*64 + 2*128 + 3*256
    # + 3*512 + 3*512 = 4,224; fcs 4096 + 4096 + 1000 = 9,192; total 13,416.
    # 138,357,544 - 13,416 = 138,344,128.
    "vgg16": 138_357_544 - 13_416,
    # ResNet-50 (torchvision): 25,557,032 parameters. Convs have no bias; the fc has 1,000.
    # BN channels: stem 64; a bottleneck of width w has BNs of w, w, 4w = 6w channels, plus 4w
    # for the projection of each stage's first block:
    #   stage 2: 3*6*64  + 256  =  1,408
    #   stage 3: 4*6*128 + 512  =  3,584
    #   stage 4: 6*6*256 + 1024 = 10,240
    #   stage 5: 3*6*512 + 2048 = 11,264
    # total 64 + 1,408 + 3,584 + 10,240 + 11,264 = 26,560 channels, 2 parameters each = 53,120.
    # 25,557,032 - 53,120 - 1,000 = 25,502,912.
    "resnet50": 25_557_032 - 2 * 26_560 - 1_000,
    # ResNet-152 (torchvision): 60,192,808 parameters; blocks (3, 8, 36, 3):
    #   stage 2: 3*6*64   + 256  =  1,408
    #   stage 3: 8*6*128  + 512  =  6,656
    #   stage 4: 36*6*256 + 1024 = 56,320
    #   stage 5: 3*6*512  + 2048 = 11,264
    # total 64 + 1,408 + 6,656 + 56,320 + 11,264 = 75,712 BN channels = 151,424 parameters.
    # 60,192,808 - 151,424 - 1,000 = 60,040,384.
    "resnet152": 60_192_808 - 2 * 75_712 - 1_000,
    # CosmoFlow (ParaDL's COSMOFLOW.net, no biases there): convs 4*16*27 + 16*32*27 + 32*64*27
    # + 64*128*27 + 128*256*8 + 256*256*8 + 256*128*8 = 1,340,608; fcs 128*2048 + 2048*256
    # + 256*4 = 787,456; total 2,128,064.
    "cosmoflow-512": 2_128_064,
}


@pytest.mark.parametrize("name", sorted(WEIGHTS))
def test_weight_count_matches_published(name):
    assert (
        WEIGHTS[name]
        == {
            "alexnet": 61_090_496,
            "vgg16": 138_344_128,
            "resnet50": 25_502_912,
            "resnet152": 60_040_384,
            "cosmoflow-512": 2_128_064,
        }[name]
    )
    model = BUILTIN[name]()
    assert weights(model) == WEIGHTS[name]
    assert model.describe()["weights"] == WEIGHTS[name]


LAYERS = {
    # 5 conv + 5 relu + 3 max pool + 2 dropout + 3 fc + 2 relu
    "alexnet": 20,
    # 13 conv + 13 relu + 5 max pool + 3 fc + 2 relu + 2 dropout
    "vgg16": 38,
    # stem 4 (conv, bnorm, relu, pool); 16 blocks x 10; 4 projections x 2; avg pool + fc
    "resnet50": 4 + 16 * 10 + 4 * 2 + 2,
    # 3 + 8 + 36 + 3 = 50 blocks
    "resnet152": 4 + 50 * 10 + 4 * 2 + 2,
    # 7 conv + 7 relu + (6, 5, 3) avg pools + 3 fc + 2 relu
    "cosmoflow-512": 7 + 7 + 6 + 3 + 2,
    "cosmoflow-256": 7 + 7 + 5 + 3 + 2,
    "cosmoflow-128": 7 + 7 + 3 + 3 + 2,
}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_layer_counts(name):
    layers = BUILTIN[name]().layers
    assert len(layers) == LAYERS[name]
    counts = {kind: sum(layer.kind == kind for layer in layers) for kind in KINDS}
    if name.startswith("resnet"):
        blocks = (LAYERS[name] - 14) // 10
        assert counts["conv"] == 1 + 3 * blocks + 4
        assert counts["bnorm"] == counts["conv"]
        assert counts["add"] == blocks
        assert counts["relu"] == 1 + 3 * blocks


# Published forward cost in multiply-accumulates at 224x224, torchvision's model table
# ("GFLOPS" there counts MACs): conv + fc only; docs/model.md §3 counts 2 FLOPs per MAC.
GMACS = {"alexnet": 0.71, "vgg16": 15.47, "resnet50": 4.09, "resnet152": 11.51}


@pytest.mark.parametrize("name", sorted(GMACS))
def test_forward_flops_match_published_macs(name):
    arrays = to_arrays(BUILTIN[name]())
    flops = forward_flops(arrays.kind, arrays.x, arrays.w, arrays.y)
    weighted = np.isin(np.array(KINDS)[arrays.kind], ["conv", "fc"])
    assert flops[weighted].sum() == pytest.approx(2 * GMACS[name] * 1e9, rel=0.02)


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_shapes_chain(name):
    """Each layer reads the previous output; a projection shortcut reads its block's input."""
    layers = BUILTIN[name]().layers
    by_name = {layer.name: layer for layer in layers if layer.kind == "conv"}
    for prev, cur in itertools.pairwise(layers):
        if cur.name.endswith("_proj"):
            block = cur.name.removesuffix("_proj")  # CONV_3a_proj: the block's first conv is CONV_3a1
            assert cur.x == by_name[f"{block}1"].x, cur.name
            assert cur.y == prev.y, f"{cur.name}: shortcut and main path must meet at the ADD"
        else:
            assert cur.x == prev.y, f"{cur.name} reads {cur.x}, previous output is {prev.y}"
        assert min(cur.x) >= 1 and min(cur.y) >= 1


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_weight_shape_conventions(name):
    """ParaDL's conventions: no weights (a zero) for element-wise layers and pools; fc covers x."""
    for layer in BUILTIN[name]().layers:
        rank = len(layer.x)
        assert len(layer.w) == rank + 1 and len(layer.y) == rank
        if layer.kind in ("relu", "bnorm", "add", "dropout"):
            assert layer.w == (layer.x[0], layer.x[0]) + (0,) * (rank - 1)
            assert layer.y == layer.x
        elif layer.kind.startswith("pool"):
            assert layer.w[:2] == (0, 0) and layer.y[0] == layer.x[0]
        elif layer.kind == "fc":
            assert layer.w[0] == layer.x[0] and layer.w[2:] == layer.x[1:]
            assert layer.y[1:] == (1,) * (rank - 1)
        else:
            assert layer.kind == "conv" and layer.w[0] == layer.x[0] and layer.w[1] == layer.y[0]


def test_resnet50_projections_and_stages():
    layers = BUILTIN["resnet50"]().layers
    proj = [layer for layer in layers if layer.name.endswith("_proj")]
    assert [p.name for p in proj] == ["CONV_2a_proj", "CONV_3a_proj", "CONV_4a_proj", "CONV_5a_proj"]
    assert [(p.x, p.y) for p in proj] == [
        ((64, 56, 56), (256, 56, 56)),
        ((256, 56, 56), (512, 28, 28)),
        ((512, 28, 28), (1024, 14, 14)),
        ((1024, 14, 14), (2048, 7, 7)),
    ]
    # ParaDL's order inside a block, projection before the ADD.
    start = next(i for i, layer in enumerate(layers) if layer.name == "CONV_3a1")
    kinds = [layer.kind for layer in layers[start : start + 12]]
    assert kinds == [
        "conv",
        "bnorm",
        "relu",
        "conv",
        "bnorm",
        "relu",
        "conv",
        "bnorm",
        "conv",
        "bnorm",
        "add",
        "relu",
    ]
    assert layers[start + 3].w == (128, 128, 3, 3) and layers[start + 3].y == (128, 28, 28)  # v1.5 stride
    assert [layer.kind for layer in layers[:4]] == ["conv", "bnorm", "relu", "pool_max"]
    assert layers[0].y == (64, 112, 112) and layers[3].y == (64, 56, 56)
    assert (layers[-2].kind, layers[-2].w, layers[-2].y) == ("pool_avg", (0, 0, 7, 7), (2048, 1, 1))
    assert (layers[-1].kind, layers[-1].w) == ("fc", (2048, 1000, 1, 1))


def test_resnet152_block_names():
    names = [layer.name for layer in BUILTIN["resnet152"]().layers if layer.kind == "conv"]
    assert len(set(names)) == len(names)
    assert {"CONV_3b7_3", "CONV_4a_proj", "CONV_4b35_1", "CONV_5c3"} <= set(names)
    assert names[-3:] == ["CONV_5c1", "CONV_5c2", "CONV_5c3"]


def test_alexnet_and_vgg_torchvision_shapes():
    alex = BUILTIN["alexnet"]().layers
    assert alex[0].y == (64, 55, 55)
    fc6 = next(layer for layer in alex if layer.name == "FC6")
    assert fc6.w == (256, 4096, 6, 6)
    vgg = BUILTIN["vgg16"]().layers
    fc6 = next(layer for layer in vgg if layer.name == "FC6")
    assert fc6.w == (512, 4096, 7, 7)


@needs_paradl
def test_cosmoflow_512_is_paradl_file():
    ours = BUILTIN["cosmoflow-512"]()
    theirs = parse_net(PARADL / "COSMOFLOW.net")
    assert len(ours.layers) == len(theirs.layers)
    for a, b in zip(ours.layers, theirs.layers, strict=True):
        assert (a.name, a.kind, a.x, a.w, a.y) == (b.name, b.kind, b.x, b.w, b.y)
    assert ours.dataset_samples == theirs.dataset_samples == 1_584
    assert ours.measured_s["abci"] == pytest.approx(theirs.measured_s["abci"], rel=1e-6)


def test_cosmoflow_smaller_volumes_keep_early_pools():
    for n, pools_after in ((256, [1, 2, 3, 4, 6]), (128, [1, 2, 3])):
        layers = BUILTIN[f"cosmoflow-{n}"]().layers
        assert layers[0].x == (4, n, n, n)
        convs_before = [
            sum(prev.kind == "conv" for prev in layers[:i])
            for i, lay in enumerate(layers)
            if lay.kind == "pool_avg"
        ]
        assert convs_before == pools_after
        assert [layer.y[0] for layer in layers if layer.kind == "conv"] == [16, 32, 64, 128, 256, 256, 128]
        assert [layer.y[0] for layer in layers if layer.kind == "fc"] == [2048, 256, 4]


@needs_paradl
@pytest.mark.parametrize(
    ("name", "lc"), [("vgg16", "filter_vgg.lc"), ("cosmoflow-512", "spatial_cosmolow.lc")]
)
def test_paradl_lc_files_apply(name, lc):
    """Built-ins use ParaDL's layer names, so a .lc file for the same layer list applies."""
    model = apply_lc(BUILTIN[name](), PARADL / lc)
    assert any(layer.active["filter"] for layer in model.layers)


def test_datasets_and_measured_times():
    expected = {
        "resnet50": 3.119502e-3,
        "vgg16": 8.245589e-3,
        "alexnet": 0.610938e-3,
        "cosmoflow-512": 2.108143,
        "cosmoflow-256": 0.263518,
    }
    for name, make in BUILTIN.items():
        model = make()
        if name.startswith("cosmoflow"):
            assert (model.dataset, model.dataset_samples) == ("CosmoFlow", 1_584)
        else:
            assert (model.dataset, model.dataset_samples) == ("ImageNet", 1_281_167)
        assert model.measured_s == ({"abci": expected[name]} if name in expected else {})
        assert model.source.startswith("built-in:") and model.notes
        assert all(layer.active == {} for layer in model.layers)  # the defaults of docs/model.md §9


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_builtins_bind(name):
    model = load_model(name)
    net = bind(model, "abci", 7.8e12)
    assert float(net.n_layers) == len(model.layers)
    assert float(net.w_elems) == weights(model)
    assert float(net.dataset_samples) == model.dataset_samples


def test_shape_inference_primitives():
    assert out_extent(224, 11, 4, 2) == 55
    assert out_extent(224, 7, 2, 3) == 112
    assert out_extent(112, 3, 2, 1) == 56
    assert out_extent(126, 3, 2) == 62
    layer = conv("C", (4, 8, 8, 8), 16, 3)
    assert layer == Layer("C", "conv", (4, 8, 8, 8), (4, 16, 3, 3, 3), (16, 6, 6, 6))
    with pytest.raises(ValueError, match="no output"):
        conv("C", (4, 2, 2), 16, 3)
    with pytest.raises(ValueError, match="pooling kind"):
        architectures.pool("P", "relu", (4, 8, 8), 2)


def test_tiny_cnn_model_file():
    path = grids.MODELS / "tiny-cnn.toml"
    model = load_model_toml(path)
    assert model.name == "tiny-cnn" and model.dataset_samples == 50_000
    assert [layer.kind for layer in model.layers] == ["conv", "relu", "pool_max", "fc"]
    for prev, cur in itertools.pairwise(model.layers):
        assert cur.x == prev.y
    assert [layer.active for layer in model.layers] == [
        {"spatial": True},
        {"spatial": True},
        {"spatial": True},
        {"spatial": False},
    ]
    arrays = to_arrays(model)
    assert arrays.overridden.tolist() == [True, False, False]
    assert arrays.active[0].tolist() == [True, True, True, False]
    net = bind(model, "abci", 7.8e12)
    assert float(net.w_elems) == 3 * 16 * 9 + 16 * 10 * 16 * 16
    assert load_model(path).layers == model.layers
