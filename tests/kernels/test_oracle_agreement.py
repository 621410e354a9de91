"""Agreement with the original ParaDL oracle where the two models coincide.

For ParaDL's ``.net`` / ``.net_sc`` files imported WITHOUT an ``.lc`` file
(every layer active, docs/model.md §9), on machine ``abci`` with ``wu_passes = 0``
(no weight-update term, as ParaDL's script ran it):

* data parallelism: the gradient allreduce, the memory per GPU and the
  compute time;
* filter and channel parallelism: the allgather and allreduce parts of the
  communication and the compute time

equal the oracle's published formulas (docs/model.md §3-§10), evaluated here by
an INDEPENDENT plain-Python reference: its own ``.net`` parser and the abci
numbers typed from the paper's machine (docs/model.md §8). Nothing from ``kernels`` or ``sweep`` is
used on the reference side; ``sweep.evaluate.estimate`` is the code under test.

Reference formulas (delta = 4 bytes, T = the measured per-sample time, the
non-zero last field of the first layer):

* data, B = b*p, I = ceil(D/B), W = delta * sum of weights:
  allreduce ``I * 2(p-1)(alpha + W*beta/p)``; memory
  ``2*delta*b*sum_{not in-place}(x + y) + 2W``; compute ``D*T/p``.
* filter and channel, B = b, I = ceil(D/b), all layers active: per iteration,
  over the layers l < G (all but the last), allgather ``(p-1)(alpha + b*delta*y_l*beta/p)``
  and allreduce ``2(p-1)(alpha + b*delta*y_l*beta/p)`` (together ``3(p-1)(...)``);
  compute ``D*T/p`` (the whole network is split).

alpha, beta are those of the level for p GPUs: intra when p <= 4 GPUs per
node, else the first inter level whose span (17, 34, unbounded nodes) is at
least ceil(p/4) nodes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import paradl_dir

FOLDER = paradl_dir()
pytestmark = pytest.mark.skipif(
    FOLDER is None, reason="ParaDL example files not found in tests/data/paradl nor ../shared/paradl"
)

# --------------------------------------------------------------------------------------------
# The reference: abci typed from the paper (docs/model.md §8), and ParaDL's formulas in plain Python.
# --------------------------------------------------------------------------------------------

DELTA = 4  # bytes per element (fp32)
GPUS_PER_NODE = 4
INTRA = (9.0e-6, 50e9)  # alpha (s), bandwidth (B/s): NVLink inside a node
INTER = ((17, 40.31e-6, 12.5e9), (34, 40.49e-6, 12.5e9), (math.inf, 40.98e-6, 12.5e9))
IN_PLACE = ("RELU", "BNORM")  # no activations of their own (docs/model.md §6)


@dataclass(frozen=True)
class RefLayer:
    name: str
    x: int  # elements of one sample's input
    w: int  # weight elements (0 when the weight shape has a zero dimension)
    y: int  # elements of one sample's output

    @property
    def in_place(self) -> bool:
        return self.name.upper().startswith(IN_PLACE)


@dataclass(frozen=True)
class RefNet:
    samples: int  # D
    t_sample_s: float  # T, measured per-sample training time of the whole network
    layers: tuple[RefLayer, ...]


def elements(shape: str) -> int:
    """Product of the dimensions of ``CxHxW``-like text (0 when any dimension is 0)."""
    return math.prod(int(d) for d in shape.strip().split("x"))


def parse_paradl(path: Path) -> RefNet:
    """A ParaDL ``.net`` file: ``Input|DxCxHxW``, then ``NAME|x|w|y[|time]`` lines, ``#`` comments."""
    samples, t_sample, layers = None, None, []
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split("|")
        if fields[0] in ("Dataset", "Model"):
            continue
        if fields[0] == "Input":
            samples = int(fields[1].split("x")[0])
            continue
        if not layers:
            t_sample = float(fields[4])
        layers.append(RefLayer(fields[0], elements(fields[1]), elements(fields[2]), elements(fields[3])))
    assert samples is not None and t_sample
    return RefNet(samples, t_sample, tuple(layers))


def level(p: int) -> tuple[float, float]:
    """(alpha s, beta s/B) of a ring over p contiguous GPUs on abci."""
    if p <= GPUS_PER_NODE:
        alpha, bandwidth = INTRA
    else:
        nodes = math.ceil(p / GPUS_PER_NODE)
        alpha, bandwidth = next((a, bw) for span, a, bw in INTER if span >= nodes)
    return alpha, 1.0 / bandwidth


def ref_data(net: RefNet, p: int, b: int) -> dict:
    """ParaDL's data parallelism, wu_passes = 0."""
    iterations = math.ceil(net.samples / (b * p))
    weight_bytes = DELTA * sum(lay.w for lay in net.layers)
    alpha, beta = level(p)
    activations = b * sum(lay.x + lay.y for lay in net.layers if not lay.in_place)
    return {
        "iterations": iterations,
        "t_comp_s": net.samples * net.t_sample_s / p,
        "t_allreduce_s": iterations * 2 * (p - 1) * (alpha + weight_bytes * beta / p),
        "t_allgather_s": 0.0,
        "mem_bytes": 2 * DELTA * activations + 2 * weight_bytes,
    }


def ref_filter_channel(net: RefNet, p: int, b: int) -> dict:
    """ParaDL's filter (and channel: same expression) parallelism, every layer active, wu_passes = 0."""
    iterations = math.ceil(net.samples / b)
    alpha, beta = level(p)
    step = sum(alpha + b * DELTA * lay.y * beta / p for lay in net.layers[:-1])  # l < G
    return {
        "iterations": iterations,
        "t_comp_s": net.samples * net.t_sample_s / p,
        "t_allgather_s": iterations * (p - 1) * step,
        "t_allreduce_s": iterations * 2 * (p - 1) * step,
    }


# --------------------------------------------------------------------------------------------
# The code under test.
# --------------------------------------------------------------------------------------------

FILES = (
    "ALEXNET_ImageNet_profall.net_sc",
    "RESNET50_ImageNet_profall.net_sc",
    "VGG_ImageNet_profall.net_sc",
    "COSMOFLOW.net",
    "COSMOFLOW.net_256",  # a typo in it (RELU input 32x2128x128x128) draws a warning
)
# p = 2, 4: intra; 16, 64: 4 and 16 nodes, first inter level; 128: 32 nodes, second;
# 1024: 256 nodes, third (unbounded).
POINTS = ((2, 64), (4, 32), (16, 32), (64, 32), (128, 8), (1024, 16))
REL = 1e-9


@pytest.fixture(scope="module")
def bound():
    """``name -> Bound`` of each ParaDL file (no .lc) on abci with wu_passes = 0, built once."""
    from sweep.inputs.configs import Bound
    from sweep.inputs.machines import load_machine
    from sweep.inputs.models import load_model

    profile = load_machine("abci").with_overrides({"wu_passes": 0, "memory_model": "paradl"})
    cache: dict = {}

    def get(name: str):
        if name not in cache:
            if name == "COSMOFLOW.net_256":
                with pytest.warns(UserWarning, match="known typo"):
                    model = load_model(FOLDER / name)
            else:
                model = load_model(FOLDER / name)
            cache[name] = Bound.of(model, profile)
        return cache[name]

    return get


def estimate(bound, name: str, strategy: str, p: int, b: int) -> dict:
    """One configuration through ``sweep.evaluate.estimate`` (all output columns, docs/output-format.md#columns)."""
    from sweep.engine.evaluate import estimate as run

    return run(bound(name), strategy, p, b)


@pytest.fixture(scope="module")
def swept(bound):
    """``(name, strategy) -> {(p, b): row}`` for all of :data:`POINTS` at once.

    The same per-point function as ``sweep.evaluate.estimate`` (``point_fn``, which applies
    the profile's overrides with ``kernels.with_params``), vmapped over the points and
    jitted: one eager ``estimate`` per point would take a quarter of a second each.
    """
    import jax
    import jax.numpy as jnp

    from kernels import LIMITS, Config
    from sweep.engine.evaluate import point_fn

    cache: dict = {}

    def get(name: str, strategy: str) -> dict:
        if (name, strategy) not in cache:
            b_ = bound(name)
            names = tuple(b_.profile.overrides)
            values = tuple(jnp.asarray(b_.profile.overrides[k], jnp.float64) for k in names)
            ps = jnp.asarray([p for p, _ in POINTS], jnp.float64)
            bs = jnp.asarray([b for _, b in POINTS], jnp.float64)
            cfg = Config(ps, bs, jnp.full_like(ps, 4.0), ps)  # p2 unused; S = p unused
            f = jax.jit(jax.vmap(point_fn(strategy, names), in_axes=(None, None, 0, None)))
            cost, derived = f(b_.net, b_.profile.pytree(), cfg, values)
            merged = {**cost._asdict(), **derived._asdict()}
            rows = {}
            for i, point in enumerate(POINTS):
                row = {k: float(v[i]) for k, v in merged.items() if k != "limit"}
                row["limit"] = LIMITS[int(cost.limit[i])]
                rows[point] = row
            cache[name, strategy] = rows
        return cache[name, strategy]

    return get


def assert_columns(got: dict, want: dict, rel: float = REL) -> None:
    for column, value in want.items():
        if value == 0:
            assert got[column] == 0, column
        else:
            assert got[column] == pytest.approx(value, rel=rel, abs=0), column


@pytest.mark.parametrize("name", FILES)
@pytest.mark.parametrize(("p", "b"), POINTS, ids=[f"p{p}-b{b}" for p, b in POINTS])
def test_data_parallel_equals_oracle(swept, name, p, b):
    got = swept(name, "data")[p, b]
    want = ref_data(parse_paradl(FOLDER / name), p, b)
    assert got["B"] == b * p
    assert_columns(got, want)


@pytest.mark.parametrize("strategy", ["filter", "channel"])
@pytest.mark.parametrize("name", FILES)
@pytest.mark.parametrize(("p", "b"), POINTS, ids=[f"p{p}-b{b}" for p, b in POINTS])
def test_filter_channel_equal_oracle(swept, strategy, name, p, b):
    got = swept(name, strategy)[p, b]
    want = ref_filter_channel(parse_paradl(FOLDER / name), p, b)
    assert got["B"] == b
    # Over its limit (p > the smallest channel count) the point is infeasible, but the
    # formulas still apply: communication and compute are compared all the same.
    assert got["limit"] in ("", "max_p", "memory")
    assert_columns(got, want)
    assert got["t_comm_s"] == pytest.approx(want["t_allgather_s"] + want["t_allreduce_s"], rel=REL)


def test_level_choice():
    """The reference's level table: intra up to 4 GPUs, then by nodes = ceil(p/4)."""
    assert level(4) == (9.0e-6, 1 / 50e9)
    assert level(5) == level(64) == level(68) == (40.31e-6, 1 / 12.5e9)  # 2..17 nodes
    assert level(69) == level(136) == (40.49e-6, 1 / 12.5e9)  # 18..34 nodes
    assert level(137) == level(4096) == (40.98e-6, 1 / 12.5e9)


# --------------------------------------------------------------------------------------------
# Worked numbers: ResNet-50, data parallel, p = 64, b = 32, abci, wu_passes = 0.
# --------------------------------------------------------------------------------------------

# Weights by hand (conv weight shape C x F x K x K; BNORM, ADD, pooling and RELU lines have a
# zero in their weight shape, so no weights; this file has no projection shortcuts):
#   CONV_1   3*64*7*7                                               =      9,408
#   stage 2  a: 64*64 + 64*64*9 + 64*256 = 4,096+36,864+16,384      =     57,344
#            b, c: 256*64 + 36,864 + 16,384 = 69,632 each, x2       =    139,264
#                                                         stage 2   =    196,608
#   stage 3  a: 256*128 + 128*128*9 + 128*512 = 32,768+147,456+65,536 = 245,760
#            b..d: 512*128 + 147,456 + 65,536 = 278,528 each, x3    =    835,584
#                                                         stage 3   =  1,081,344
#   stage 4  a: 512*256 + 256*256*9 + 256*1024 = 131,072+589,824+262,144 = 983,040
#            b..f: 1024*256 + 589,824 + 262,144 = 1,114,112 each, x5 = 5,570,560
#                                                         stage 4   =  6,553,600
#   stage 5  a: 1024*512 + 512*512*9 + 512*2048 = 524,288+2,359,296+1,048,576 = 3,932,160
#            b, c: 2048*512 + 2,359,296 + 1,048,576 = 4,456,448 each, x2 = 8,912,896
#                                                         stage 5   = 12,845,056
#   FC6      2048*1000                                              =  2,048,000
#   total    9,408 + 196,608 + 1,081,344 + 6,553,600 + 12,845,056 + 2,048,000 = 22,734,016
RESNET50_WEIGHTS = 22_734_016
RESNET50_WEIGHT_BYTES = 90_936_064  # 4 * 22,734,016

# Activations of one sample, sum of (x + y) over the non-in-place layers (CONV, MPOOL, ADD,
# APOOL, FC; RELU and BNORM left out). Sizes: 64x56x56 = 200,704; 256x56x56 = 802,816;
# 128x28x28 = 100,352; 512x28x28 = 401,408; 256x14x14 = 50,176; 1024x14x14 = 200,704;
# 512x7x7 = 25,088; 2048x7x7 = 100,352.
#   CONV_1   3x226x226 + 64x113x113 = 153,228 + 817,216               =    970,444
#   MPOOL    817,216 + 200,704                                          =  1,017,920
#   stage 2  a: (200,704+200,704) + (200,704+200,704) + (200,704+802,816) + ADD 2*802,816
#               = 401,408 + 401,408 + 1,003,520 + 1,605,632             =  3,411,968
#            b, c: (802,816+200,704) + 401,408 + 1,003,520 + 1,605,632
#               = 4,014,080 each, x2                                    =  8,028,160
#                                                          stage 2      = 11,440,128
#   stage 3  a: (802,816+100,352) + 2*100,352 + (100,352+401,408) + 2*401,408
#               = 903,168 + 200,704 + 501,760 + 802,816                 =  2,408,448
#            b..d: (401,408+100,352) + 200,704 + 501,760 + 802,816
#               = 2,007,040 each, x3                                    =  6,021,120
#                                                          stage 3      =  8,429,568
#   stage 4  a: (401,408+50,176) + 2*50,176 + (50,176+200,704) + 2*200,704
#               = 451,584 + 100,352 + 250,880 + 401,408                 =  1,204,224
#            b..f: (200,704+50,176) + 100,352 + 250,880 + 401,408
#               = 1,003,520 each, x5                                    =  5,017,600
#                                                          stage 4      =  6,221,824
#   stage 5  a: (200,704+25,088) + 2*25,088 + (25,088+100,352) + 2*100,352
#               = 225,792 + 50,176 + 125,440 + 200,704                  =    602,112
#            b, c: (100,352+25,088) + 50,176 + 125,440 + 200,704
#               = 501,760 each, x2                                      =  1,003,520
#                                                          stage 5      =  1,605,632
#   APOOL    100,352 + 2,048                                            =    102,400
#   FC6      2,048 + 1,000                                              =      3,048
#   total    970,444 + 1,017,920 + 11,440,128 + 8,429,568 + 6,221,824 + 1,605,632
#            + 102,400 + 3,048                                          = 29,790,964
RESNET50_ACTIVATIONS = 29_790_964

# D = 1,280,000; B = 32 * 64 = 2,048; I = 1,280,000 / 2,048 = 625 exactly.
# 64 GPUs = 16 nodes <= 17: first inter level, alpha 40.31e-6 s, 12.5e9 B/s.
# Allreduce per iteration 2*63*(40.31e-6 + 90,936,064/64/12.5e9)
#   = 126 * (40.31e-6 + 1,420,876/12.5e9) = 126 * (40.31e-6 + 113.67008e-6)
#   = 126 * 153.98008e-6 = 0.01940149008 s;  per epoch x625 = 12.1259313 s.
RESNET50_ALLREDUCE_S = 12.1259313
# Memory 2*4*32*29,790,964 + 2*90,936,064 = 7,626,486,784 + 181,872,128 = 7,808,358,912 B
# (docs/model.md §15 prints 7.80836e9: data memory does not depend on wu_passes nor the .lc).
RESNET50_MEM_BYTES = 7_808_358_912
# Compute 1,280,000 * 0.003119502 / 64 = 20,000 * 0.003119502 = 62.39004 s
# (docs/model.md §15's 62.5795 adds the SGD update 625 * 3*4*22,734,016/900e9 = 0.18945 s).
RESNET50_COMP_S = 62.39004


def test_resnet50_hand_counts_match_parser():
    net = parse_paradl(FOLDER / "RESNET50_ImageNet_profall.net_sc")
    assert net.samples == 1_280_000
    assert net.t_sample_s == 0.003119502
    assert sum(lay.w for lay in net.layers) == RESNET50_WEIGHTS
    assert DELTA * RESNET50_WEIGHTS == RESNET50_WEIGHT_BYTES
    assert sum(lay.x + lay.y for lay in net.layers if not lay.in_place) == RESNET50_ACTIVATIONS


def test_resnet50_worked_numbers_reference():
    """The hand arithmetic above, redone in floating point, agrees with the reference."""
    allreduce = 2 * 63 * (40.31e-6 + RESNET50_WEIGHT_BYTES / 64 / 12.5e9) * 625
    assert allreduce == pytest.approx(RESNET50_ALLREDUCE_S, rel=1e-12)
    assert 2 * 4 * 32 * RESNET50_ACTIVATIONS + 2 * RESNET50_WEIGHT_BYTES == RESNET50_MEM_BYTES
    compute = 1_280_000 * 0.003119502 / 64
    assert compute == pytest.approx(RESNET50_COMP_S, rel=1e-12)
    want = ref_data(parse_paradl(FOLDER / "RESNET50_ImageNet_profall.net_sc"), 64, 32)
    assert want["iterations"] == 625
    assert want["t_allreduce_s"] == pytest.approx(RESNET50_ALLREDUCE_S, rel=1e-12)
    assert want["mem_bytes"] == RESNET50_MEM_BYTES
    assert want["t_comp_s"] == pytest.approx(RESNET50_COMP_S, rel=1e-12)


def test_resnet50_worked_numbers_code(bound):
    """The code under test gives the hand-derived literals."""
    got = estimate(bound, "RESNET50_ImageNet_profall.net_sc", "data", 64, 32)
    assert (got["global_batch"], got["iterations"], got["limit_reason"]) == (2048, 625, None)
    assert got["t_allreduce_s"] == pytest.approx(RESNET50_ALLREDUCE_S, rel=1e-9)
    assert got["t_allgather_s"] == got["t_halo_s"] == got["t_p2p_s"] == 0
    assert got["mem_bytes"] == pytest.approx(RESNET50_MEM_BYTES, rel=1e-9)
    assert got["t_comp_s"] == pytest.approx(RESNET50_COMP_S, rel=1e-9)
    assert got["t_comm_s"] == pytest.approx(RESNET50_ALLREDUCE_S, rel=1e-9)
