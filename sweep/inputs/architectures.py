r"""Built-in models generated from their architecture (docs/inputs.md#built-in-models).

Each network is written as what it is — stages, blocks, kernel sizes,
strides, paddings — and every layer's input and output shape is inferred from
the previous one with the usual convolution arithmetic

.. math::

    Y = \left\lfloor \frac{X + 2P - K}{S} \right\rfloor + 1

(no dilation, ``ceil_mode = False`` pooling, as in PyTorch). No per-layer
shape table is typed in anywhere.

Weight shapes follow ParaDL's ``.net`` files: conv ``C x F x K...``; fc
``C x F x X...`` (the kernel covers the input, AlexNet's FC6 is
``256x4096x6x6``); pooling ``0x0xK...``; relu, bnorm, add and dropout
``C x C x 0...`` (no weights: batch-norm scale/shift are not counted, as in
ParaDL). Biases are not counted either, so a layer's weight count is
``C * F * prod(K)``. Layer names follow ParaDL's files too (weighted layers
numbered, ``RELU``/``BNORM``/``MPOOL``... bare), so that ParaDL's ``.lc``
files apply to built-ins with the same layer list (``vgg16`` with
``filter_vgg.lc``; ``cosmoflow-512`` with ``spatial_cosmolow.lc``).

Data sets: the ImageNet models use D = 1,281,167 samples, the real
ImageNet-1k (ILSVRC 2012) training set; ParaDL's ``.net`` files round it to
1,280,000, so epoch times differ from theirs by 0.09 %. CosmoFlow uses
D = 1,584 samples, as ParaDL's ``COSMOFLOW.net``.

Measured per-sample training times (``measured_s["abci"]``) are the values in
ParaDL's profiled files, taken on networks whose shapes differ slightly from
these (226x226 input, no ResNet projection shortcuts, a 'same'-padded
256^3 CosmoFlow): the cost model only uses the total and spreads it over the
layers in proportion to their FLOPs (docs/model.md §3).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from sweep.inputs.layers import Layer, Model

Shape = tuple[int, ...]

#: ImageNet-1k training images (ILSVRC 2012); ParaDL's files use 1,280,000.
IMAGENET_TRAIN = 1_281_167
#: CosmoFlow training samples, as in ParaDL's COSMOFLOW.net.
COSMOFLOW_TRAIN = 1_584
#: ImageNet input of the torchvision models: 3 channels, 224x224.
IMAGENET_INPUT: Shape = (3, 224, 224)
#: ParaDL's profiled per-sample training times on ABCI (one V100), seconds.
MEASURED_ABCI_S = {
    "alexnet": 0.610938e-3,
    "vgg16": 8.245589e-3,
    "resnet50": 3.119502e-3,
    "cosmoflow-256": 0.263518,
    "cosmoflow-512": 2.108143,
}


# --------------------------------------------------------------------------
# Layers: one shape in, one Layer out.
# --------------------------------------------------------------------------


def out_extent(n: int, kernel: int, stride: int = 1, pad: int = 0) -> int:
    """Output extent of a convolution or pooling window: ``floor((n + 2 pad - kernel) / stride) + 1``."""
    return (n + 2 * pad - kernel) // stride + 1


def _window(name: str, x: Shape, kernel: int, stride: int, pad: int) -> Shape:
    y = tuple(out_extent(n, kernel, stride, pad) for n in x[1:])
    if min(y) < 1:
        raise ValueError(f"{name}: window {kernel} stride {stride} pad {pad} leaves no output from {x}")
    return y


def conv(name: str, x: Shape, filters: int, kernel: int, stride: int = 1, pad: int = 0) -> Layer:
    """A convolution with a cubic ``kernel`` over every spatial dimension of ``x = (C, X...)``."""
    spatial = _window(name, x, kernel, stride, pad)
    return Layer(name, "conv", x, (x[0], filters) + (kernel,) * len(spatial), (filters, *spatial))


def pool(name: str, kind: str, x: Shape, kernel: int, stride: int | None = None, pad: int = 0) -> Layer:
    """Max or average pooling (``kind`` ``pool_max``/``pool_avg``); stride defaults to the kernel."""
    if kind not in ("pool_max", "pool_avg"):
        raise ValueError(f"{name}: not a pooling kind: {kind}")
    spatial = _window(name, x, kernel, kernel if stride is None else stride, pad)
    return Layer(name, kind, x, (0, 0) + (kernel,) * len(spatial), (x[0], *spatial))


def elementwise(name: str, kind: str, x: Shape) -> Layer:
    """A shape-preserving layer without weights: relu, bnorm, add or dropout (``w = C x C x 0...``)."""
    if kind not in ("relu", "bnorm", "add", "dropout"):
        raise ValueError(f"{name}: not an element-wise kind: {kind}")
    return Layer(name, kind, x, (x[0], x[0]) + (0,) * (len(x) - 1), x)


def fc(name: str, x: Shape, out: int) -> Layer:
    """A fully connected layer: a convolution whose kernel covers the whole input."""
    return Layer(name, "fc", x, (x[0], out, *x[1:]), (out,) + (1,) * (len(x) - 1))


def _model(name: str, layers: list[Layer], dataset: str, samples: int, source: str, notes: str) -> Model:
    measured = MEASURED_ABCI_S.get(name)
    return Model(
        name=name,
        dataset_samples=samples,
        layers=layers,
        dataset=dataset,
        measured_s={"abci": measured} if measured is not None else {},
        source=source,
        notes=notes,
    )


# --------------------------------------------------------------------------
# AlexNet and VGG16: plain stacks.
# --------------------------------------------------------------------------

#: torchvision AlexNet features: (filters, kernel, stride, pad, max-pool 3/2 after it).
ALEXNET_CONVS = (
    (64, 11, 4, 2, True),
    (192, 5, 1, 2, True),
    (384, 3, 1, 1, False),
    (256, 3, 1, 1, False),
    (256, 3, 1, 1, True),
)
#: Hidden widths of the AlexNet and VGG classifiers, then 1000 classes.
CLASSIFIER = (4096, 4096)
CLASSES = 1000


def alexnet() -> Model:
    """AlexNet as in torchvision (Krizhevsky 2014 "one weird trick" widths), 224x224 input.

    Conv 11x11/4 pad 2 gives 55x55; three 3x3/2 max pools take it to 6x6;
    classifier dropout, fc, relu, dropout, fc, relu, fc in torchvision's order.
    torchvision's adaptive average pool to 6x6 is the identity here and left out.
    """
    layers: list[Layer] = []
    x = IMAGENET_INPUT
    for i, (filters, kernel, stride, pad, pooled) in enumerate(ALEXNET_CONVS, start=1):
        layers += [conv(f"CONV{i}", x, filters, kernel, stride, pad)]
        layers += [elementwise("RELU", "relu", layers[-1].y)]
        if pooled:
            layers += [pool("MPOOL", "pool_max", layers[-1].y, 3, 2)]
        x = layers[-1].y
    for i, width in enumerate(CLASSIFIER, start=6):
        layers += [elementwise("DROPOUT", "dropout", x)]
        layers += [fc(f"FC{i}", layers[-1].y, width)]
        layers += [elementwise("RELU", "relu", layers[-1].y)]
        x = layers[-1].y
    layers += [fc(f"FC{6 + len(CLASSIFIER)}", x, CLASSES)]
    return _model(
        "alexnet",
        layers,
        "ImageNet",
        IMAGENET_TRAIN,
        "built-in: Krizhevsky 2014 (arXiv:1404.5997), torchvision alexnet",
        "torchvision widths 64-192-384-256-256 at 224x224; ParaDL's ALEXNET file is the 96-256 "
        "Caffe variant at 226x226, whose measured time is used here.",
    )


#: VGG16 (configuration D): convs per stage and their width; 3x3 pad 1 convs, 2x2/2 max pool per stage.
VGG16_STAGES = ((2, 64), (2, 128), (3, 256), (3, 512), (3, 512))


def vgg16() -> Model:
    """VGG16 (Simonyan & Zisserman 2015, configuration D) without batch norm, as torchvision's vgg16."""
    layers: list[Layer] = []
    x = IMAGENET_INPUT
    for stage, (convs, width) in enumerate(VGG16_STAGES, start=1):
        for i in range(1, convs + 1):
            layers += [conv(f"CONV{stage}_{i}", x, width, 3, 1, 1)]
            layers += [elementwise("RELU", "relu", layers[-1].y)]
            x = layers[-1].y
        layers += [pool("MPOOL", "pool_max", x, 2)]
        x = layers[-1].y
    for i, width in enumerate(CLASSIFIER, start=6):
        layers += [fc(f"FC{i}", x, width)]
        layers += [elementwise("RELU", "relu", layers[-1].y)]
        layers += [elementwise("DROPOUT", "dropout", layers[-1].y)]
        x = layers[-1].y
    layers += [fc(f"FC{6 + len(CLASSIFIER)}", x, CLASSES)]
    return _model(
        "vgg16",
        layers,
        "ImageNet",
        IMAGENET_TRAIN,
        "built-in: Simonyan & Zisserman 2015 (configuration D), torchvision vgg16",
        "No batch norm; 224x224 input (ParaDL's VGG file uses 226x226).",
    )


# --------------------------------------------------------------------------
# ResNet: bottleneck v1.5.
# --------------------------------------------------------------------------

#: Bottleneck blocks per stage (conv2_x .. conv5_x) for each depth (He et al. 2016, table 1).
RESNET_BLOCKS = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3), 152: (3, 8, 36, 3)}
#: Bottleneck widths of the four stages; a block's output has 4x as many channels.
RESNET_WIDTHS = (64, 128, 256, 512)
EXPANSION = 4


def _block_tag(stage: int, block: int, blocks: int) -> str:
    """Block names as in He et al.'s Caffe models: ``2a, 2b, 2c``; in long stages ``4a, 4b1 .. 4b35``."""
    if blocks <= 6:
        return f"{stage}{'abcdef'[block]}"
    return f"{stage}a" if block == 0 else f"{stage}b{block}"


def bottleneck(tag: str, x: Shape, width: int, stride: int) -> list[Layer]:
    """One bottleneck block, v1.5 (stride on the 3x3 conv), in ParaDL's order.

    CONV 1x1, BNORM, RELU, CONV 3x3, BNORM, RELU, CONV 1x1, BNORM, then — when
    the block changes shape — the projection shortcut CONV 1x1/stride and
    BNORM, whose input is the block input ``x``; then ADD and RELU.
    """
    out = width * EXPANSION
    sep = "_" if tag[-1].isdigit() else ""  # CONV_2a1, but CONV_4b35_1
    layers = [conv(f"CONV_{tag}{sep}1", x, width, 1)]
    layers += [elementwise("BNORM", "bnorm", layers[-1].y), elementwise("RELU", "relu", layers[-1].y)]
    layers += [conv(f"CONV_{tag}{sep}2", layers[-1].y, width, 3, stride, 1)]
    layers += [elementwise("BNORM", "bnorm", layers[-1].y), elementwise("RELU", "relu", layers[-1].y)]
    layers += [conv(f"CONV_{tag}{sep}3", layers[-1].y, out, 1)]
    layers += [elementwise("BNORM", "bnorm", layers[-1].y)]
    if stride != 1 or x[0] != out:
        layers += [conv(f"CONV_{tag}_proj", x, out, 1, stride)]
        layers += [elementwise("BNORM", "bnorm", layers[-1].y)]
    if layers[-1].y != layers[6].y:
        raise ValueError(f"block {tag}: shortcut {layers[-1].y} and main path {layers[6].y} differ")
    layers += [elementwise("ADD", "add", layers[-1].y), elementwise("RELU", "relu", layers[-1].y)]
    return layers


def resnet(depth: int) -> Model:
    """ResNet-50/101/152 (He et al. 2016) with bottleneck v1.5 blocks, as torchvision's resnetN.

    Stem conv 7x7/2 pad 3, BNORM, RELU, max pool 3x3/2 pad 1 (224 -> 112 -> 56);
    four stages of bottlenecks, the first block of stages 3-5 striding by 2;
    global average pool 7x7 and a 2048x1000 fc.
    """
    layers = [conv("CONV_1", IMAGENET_INPUT, 64, 7, 2, 3)]
    layers += [elementwise("BNORM", "bnorm", layers[-1].y), elementwise("RELU", "relu", layers[-1].y)]
    layers += [pool("MPOOL", "pool_max", layers[-1].y, 3, 2, 1)]
    x = layers[-1].y
    for stage, (blocks, width) in enumerate(zip(RESNET_BLOCKS[depth], RESNET_WIDTHS, strict=True), start=2):
        for block in range(blocks):
            stride = 2 if block == 0 and stage > 2 else 1
            layers += bottleneck(_block_tag(stage, block, blocks), x, width, stride)
            x = layers[-1].y
    layers += [pool("APOOL", "pool_avg", x, x[1])]
    layers += [fc("FC", layers[-1].y, CLASSES)]
    return _model(
        f"resnet{depth}",
        layers,
        "ImageNet",
        IMAGENET_TRAIN,
        f"built-in: He et al. 2016, torchvision resnet{depth}",
        "Bottleneck v1.5 (stride 2 in the 3x3 conv); projection shortcut conv+bnorm listed before "
        "the ADD of each stage's first block; 224x224 input (ParaDL's RESNET50 file uses 226x226 "
        "and leaves the projections out).",
    )


# --------------------------------------------------------------------------
# CosmoFlow: 3-D, valid convolutions.
# --------------------------------------------------------------------------

#: CosmoFlow conv stages as in ParaDL's COSMOFLOW.net: (filters, kernel, stride), valid padding,
#: each followed by a RELU and (while the volume allows, see :func:`cosmoflow`) a 2x2x2 average pool.
COSMOFLOW_CONVS = ((16, 3, 1), (32, 3, 1), (64, 3, 2), (128, 3, 1), (256, 2, 1), (256, 2, 1), (128, 2, 1))
#: Fully connected widths; every fc but the last is followed by a RELU.
COSMOFLOW_FCS = (2048, 256, 4)
COSMOFLOW_CHANNELS = 4


def _min_input(convs: tuple[tuple[int, int, int], ...]) -> int:
    """Smallest extent that the valid convolutions ``convs`` (filters, kernel, stride) turn into >= 1."""
    n = 1
    for _, kernel, stride in reversed(convs):
        n = (n - 1) * stride + kernel
    return n


def cosmoflow(n: int) -> Model:
    """CosmoFlow (Mathuriya et al., SC'18) on an ``n``^3 volume of 4 channels, ParaDL's layer structure.

    Seven valid convolutions (:data:`COSMOFLOW_CONVS`) each followed by a
    RELU and a 2x2x2 average pool, the last conv without pool, then fc
    2048, 256, 4 with RELUs between. For n = 512 this is ParaDL's
    ``COSMOFLOW.net`` layer for layer. Smaller volumes cannot take every
    pool: a pool is kept only when the convolutions after it can still
    produce at least one voxel from its output (the first pools are kept,
    the later ones dropped, as LBANN's CosmoFlow varies its later pools with
    the input width). n = 256 drops the fifth pool, n = 128 the last three.
    """
    layers: list[Layer] = []
    x: Shape = (COSMOFLOW_CHANNELS, n, n, n)
    for i, (filters, kernel, stride) in enumerate(COSMOFLOW_CONVS, start=1):
        layers += [conv(f"CONV_{i}", x, filters, kernel, stride)]
        layers += [elementwise("RELU", "relu", layers[-1].y)]
        x = layers[-1].y
        rest = COSMOFLOW_CONVS[i:]
        if rest and out_extent(min(x[1:]), 2, 2) >= _min_input(rest):
            layers += [pool("APOOL", "pool_avg", x, 2)]
            x = layers[-1].y
    for i, width in enumerate(COSMOFLOW_FCS, start=1):
        layers += [fc(f"FC_{i}", x, width)]
        if i < len(COSMOFLOW_FCS):
            layers += [elementwise("RELU", "relu", layers[-1].y)]
        x = layers[-1].y
    pools = sum(layer.kind == "pool_avg" for layer in layers)
    notes = f"{n}^3 x 4 input, valid 3-D convolutions, {pools} average pools; leaky ReLU counted as relu."
    if n == 256:
        notes += " The measured time is that of ParaDL's COSMOFLOW.net_256, a 'same'-padded variant."
    return _model(
        f"cosmoflow-{n}",
        layers,
        "CosmoFlow",
        COSMOFLOW_TRAIN,
        "built-in: Mathuriya et al. SC'18 / Oyama et al. TPDS'21, layer structure of ParaDL's COSMOFLOW.net",
        notes,
    )


#: Built-in model constructors by name (docs/inputs.md#built-in-models).
BUILTIN: dict[str, Callable[[], Model]] = {
    "alexnet": alexnet,
    "vgg16": vgg16,
    "resnet50": partial(resnet, 50),
    "resnet152": partial(resnet, 152),
    "cosmoflow-128": partial(cosmoflow, 128),
    "cosmoflow-256": partial(cosmoflow, 256),
    "cosmoflow-512": partial(cosmoflow, 512),
}
