"""The strategy registry (kernels/strategies/registry.py): entries agree with the kernels' Config."""

import pytest

import kernels
from kernels.strategies import PAPER_STRATEGIES
from kernels.strategies.registry import OWN_AXES, REGISTRY, SHARED_AXES, Axis, entry
from kernels.terms import Config


def test_every_axis_is_a_config_field():
    # Config = shared axes then each own axis, one field per registry name, in that order
    assert Config._fields == (*SHARED_AXES, *OWN_AXES)


def test_kernels_by_name():
    assert tuple(kernels.STRATEGIES) == tuple(REGISTRY)
    assert kernels.STRATEGIES["data"].__name__ == "data"
    assert "data+tensor+pipeline" not in PAPER_STRATEGIES and len(PAPER_STRATEGIES) == 8


def test_replica_groups():
    # tp 4 x pp 2 = 8 GPUs a replica; a hybrid's group is p2; data's one GPU; spatial's all p
    assert entry("data+tensor+pipeline").group(64, 4, {"tp": 4, "pp": 2}) == 8
    assert entry("data+filter").group(64, 4, {}) == 4
    assert entry("data").group(64, 4, {}) == 1
    assert entry("spatial").group(64, 4, {}) == 64
    assert entry("pipeline").S_is_p and not entry("data+tensor+pipeline").S_is_p


def test_axis_codes():
    recompute = OWN_AXES["recompute"]
    assert recompute.code("full") == 2 and recompute.code(1) == 1 and recompute.label(2) == "full"
    assert OWN_AXES["tp"].code(8.0) == 8
    for bad, axis in ((8.5, "tp"), ("8", "tp"), (True, "tp"), (0, "tp"), (4, "zero"), ("most", "recompute")):
        with pytest.raises(ValueError, match=axis):
            OWN_AXES[axis].code(bad)
    assert Axis("x", 1, "").label(3) == 3


def test_unknown_strategy_names_the_known():
    with pytest.raises(KeyError, match="known: serial, data"):
        entry("tensor")
