"""The two memory models of docs/model.md §6: ParaDL's bound (§6.1) and what training keeps (§6.2).

The small network of tests/helpers.py: conv (x 2x4x4 = 32, y 3x4x4 = 48), relu (48, 48),
fc (x 48, y 5); weights conv 54, fc 240 (W = 294). What each layer keeps for the backward
pass: conv its input (32), relu its output (48), fc its input, the relu's output already
charged to the relu (0): saved = 80 per sample. The largest |x|+|y| of one layer is the
relu's, 96. With one optimizer state per weight the weights cost (2 + 1) * 294 = 882
elements. delta = 4 bytes.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import kernels
from kernels.names import LIMITS, MEMORY_MODELS
from tests.helpers import config, small_machine_of, small_net_of

TRAINING = MEMORY_MODELS["training"]


def test_network_tables_of_the_training_memory():
    net = small_net_of()
    assert float(net.saved_elems) == 80.0  # conv x 32 + relu y 48 + fc 0
    assert float(net.work_elems) == 96.0  # the relu's x + y
    t = net.spatial  # prefix rows: none, conv, conv+relu (the fc ends the prefix)
    np.testing.assert_array_equal(t.saved_elems, [0, 32, 80])
    np.testing.assert_array_equal(t.work_active, [0, 80, 96])
    np.testing.assert_array_equal(t.work_rest, [96, 96, 53])
    # p = 2: groups {conv} and {relu, fc}; kept 32 and 48, weights 54 and 240: the second
    # line is above the first for every B >= 0, the only one on the envelope
    np.testing.assert_array_equal(net.pipeline.keep_act[2], [48, 0])
    np.testing.assert_array_equal(net.pipeline.keep_w[2], [240, 0])


# fmt: off
CASES = [
    # serial, data: 4 * (8*80 + 8*96 + 882) = 4 * 2290 = 9160
    ("serial", config(1, 8), "small", {}, 9160),
    ("data", config(2, 8), "small", {}, 9160),
    # Adam-like optimizer_states = 2: weights 4 * 294 = 1176; 4 * (640 + 768 + 1176) = 10336
    ("data", config(2, 8), "small", {"optimizer_states": 2}, 10336),
    # filter p = 2: conv and fc split, weights 294/2 = 147, 3 * 147 = 441; 4 * (640 + 768 + 441) = 7396
    ("filter", config(2, 8), "small", {}, 7396),
    ("data+filter", config(4, 8, p2=2), "small", {}, 7396),
    # channel p = 3: the fc alone split, weights 240/3 + 54 = 134, 3 * 134 = 402; 4 * 1810 = 7240
    ("channel", config(3, 8), "small", {}, 7240),
    # spatial p = 2: conv and relu active; saved 80/2 = 40 per sample; workspace
    # max(96/2, fc 53) = 53; 4 * (8*40 + 8*53 + 882) = 4 * 1626 = 6504
    ("spatial", config(2, 8), "small", {}, 6504),
    ("data+spatial", config(4, 8, p2=2), "small", {}, 6504),
    # spatial override, the relu alone active: saved 48/2 + 32 = 56; workspace max(96/2, conv 80) = 80;
    # 4 * (8*56 + 8*80 + 882) = 4 * 1970 = 7880
    ("spatial", config(2, 8), "relu", {}, 7880),
    # pipeline p = 2, S = 2: stage {relu, fc} keeps 8*48 + 3*240 = 1104 (stage {conv}: 8*32 + 3*54 = 418);
    # one micro-batch (8/2 = 4 samples) of workspace 96: 4 * (1104 + 4*96) = 4 * 1488 = 5952
    ("pipeline", config(2, 8, S=2), "small", {}, 5952),
]
# fmt: on


@pytest.mark.parametrize(("strategy", "cfg", "net", "machine", "want"), CASES)
def test_training_memory_by_hand(strategy, cfg, net, machine, want):
    active = {"spatial": [False, True, False]} if net == "relu" else None
    m = small_machine_of(memory_model=TRAINING, **machine)
    cost = kernels.STRATEGIES[strategy](small_net_of(active), m, cfg)
    assert float(cost.mem_bytes) == pytest.approx(want, rel=1e-12)
    assert LIMITS[int(cost.limit)] == ""


def test_training_memory_is_below_paradl_and_the_key_switches_it():
    """Same configuration, both keys: data at b = 100 is over 1e5 bytes only under ParaDL's
    bound, 8 * (100*133 + 294) = 108752; training keeps 4 * (100*80 + 100*96 + 882) = 73928."""
    net, cfg = small_net_of(), config(2, 100)
    paradl = kernels.STRATEGIES["data"](net, small_machine_of(), cfg)
    training = kernels.STRATEGIES["data"](net, small_machine_of(memory_model=TRAINING), cfg)
    assert float(paradl.mem_bytes) == 108752 and LIMITS[int(paradl.limit)] == "memory"
    assert float(training.mem_bytes) == 73928 and LIMITS[int(training.limit)] == ""


def test_every_measured_run_fits_its_machine():
    """docs/model.md §6.2: every run of the shipped measurements ran, so the default memory
    model finds each feasible on its machine (ResNet-50 data parallel at 64 samples on a
    16 GB V100 among them). ParaDL's bound calls 38 of the 113 infeasible (issue 28)."""
    import sweep

    csv = "grids/measurements/abci_chainer_public.csv"
    default = sweep.validate(csv)
    assert len(default.measurements.runs) == 113
    assert [r for r in default.predictions.limit_reason if r] == []
    paradl = sweep.validate(csv, "abci", set={"memory_model": "paradl"})
    assert sum(r == "memory" for r in paradl.predictions.limit_reason) == 38


# ------------------------------------------------------------ layer by layer, on the built-ins


def _layer_facts(name):
    """Per-layer kept activations (the rule of docs/model.md §6.2 written out in a loop), |x|+|y|,
    weights and FLOPs of a built-in model, and its kernels Net."""
    from kernels.network import forward_flops
    from sweep.inputs.architectures import BUILTIN
    from sweep.inputs.layers import bind, to_arrays

    model = BUILTIN[name]()
    kept, work, weights = [], [], []
    for i, layer in enumerate(model.layers):
        x, y = float(np.prod(layer.x)), float(np.prod(layer.y))
        before_keeps_output = i > 0 and model.layers[i - 1].kind in ("relu", "dropout", "pool_max")
        if layer.kind in ("relu", "dropout", "pool_max"):
            kept.append(y)
        elif layer.kind in ("conv", "fc", "bnorm") and not before_keeps_output:
            kept.append(x)
        else:
            kept.append(0.0)
        work.append(x + y)
        weights.append(float(np.prod(layer.w)))  # 0 for a layer without weights
    a = to_arrays(model)
    flops = 3 * forward_flops(a.kind, a.x, a.w, a.y)
    return model, np.array(kept), np.array(work), np.array(weights), flops, bind(model, "none", 1.0)


@pytest.mark.parametrize("name", ["resnet50", "vgg16"])
def test_training_memory_layer_by_layer(name):
    """Every strategy's training memory equals the sums of docs/model.md §6.2 taken over the
    layer list (one optimizer state per weight, 4-byte elements), for a few group sizes."""
    from kernels.network import minmax_partition

    model, kept, work, weights, flops, net = _layer_facts(name)
    machine = small_machine_of(memory_model=TRAINING, gpu_mem_bytes=1e15)
    delta, b = 4.0, 16.0
    w_all = 3.0 * weights.sum()

    def run(strategy, cfg):
        return float(kernels.STRATEGIES[strategy](net, machine, cfg).mem_bytes)

    assert run("data", config(8, b)) == pytest.approx(
        delta * (b * kept.sum() + b * work.max() + w_all), rel=1e-12
    )
    # filter: conv and fc weights split over p = 2
    conv_fc = np.isin([layer.kind for layer in model.layers], ["conv", "fc"])
    shard = weights[conv_fc].sum() / 2 + weights[~conv_fc].sum()
    want = delta * (b * kept.sum() + b * work.max() + 3.0 * shard)
    assert run("filter", config(2, b)) == pytest.approx(want, rel=1e-12)
    # spatial: the longest prefix before the first fc whose extents are all >= n
    for n in (2, 4, 8):
        active = np.zeros(len(model.layers), dtype=bool)
        for i, layer in enumerate(model.layers):
            if layer.kind == "fc" or min(layer.x[1], layer.y[1]) < n:
                break
            active[i] = True
        saved = kept[active].sum() / n + kept[~active].sum()
        workspace = max(work[active].max() / n, work[~active].max())
        want = delta * (b * saved + b * workspace + w_all)
        assert run("spatial", config(n, b)) == pytest.approx(want, rel=1e-12), n
        assert run("data+spatial", config(2 * n, b, p2=n)) == pytest.approx(want, rel=1e-12), n
    # pipeline: every stage's kept activations for all S micro-batches and its weights, plus one
    # micro-batch of the largest layer's workspace
    for p, s in ((2, 2), (4, 8), (16, 4)):
        starts = [*minmax_partition(flops, p), len(model.layers)]
        stages = [slice(lo, hi) for lo, hi in itertools.pairwise(starts)]
        biggest = max(delta * (b * kept[g].sum() + 3.0 * weights[g].sum()) for g in stages)
        want = biggest + delta * b / s * work.max()
        assert run("pipeline", config(p, b, S=s)) == pytest.approx(want, rel=1e-12), (p, s)
