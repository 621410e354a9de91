"""The two memory models of docs/model.md §6: ParaDL's bound (§6.1) and what training keeps (§6.2).

The small network of tests/helpers.py: conv (x 2x4x4 = 32, y 3x4x4 = 48), relu (48, 48),
fc (x 48, y 5); weights conv 54, fc 240 (W = 294). What each layer keeps for the backward
pass: conv its input (32), relu its output (48), fc its input, the relu's output already
charged to the relu (0): saved = 80 per sample. The largest |x|+|y| of one layer is the
relu's, 96. With one optimizer state per weight the weights cost (2 + 1) * 294 = 882
elements. delta = 4 bytes.
"""

from __future__ import annotations

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
