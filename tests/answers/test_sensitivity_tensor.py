"""Sensitivities of one data+tensor+pipeline configuration, given as users give it (global batch,
micro-batch size, tp, pp, recompute, zero): the same point as ``estimate``, elasticities that
agree with finite differences of ``estimate``, a batch that does not split marked ``batch``."""

from __future__ import annotations

import math

import pytest

from sweep.answers.sensitivity import sensitivity
from sweep.engine.evaluate import estimate
from sweep.errors import InputError
from sweep.inputs.configs import Bound
from sweep.inputs.machines import load_machine
from sweep.inputs.models import load_model

MODEL, MACHINE, TENSOR = "gpt-l4-h256-a8-s128", "a100-ib800", "data+tensor+pipeline"


def _bound(**overrides) -> Bound:
    return Bound.of(load_model(MODEL), load_machine(MACHINE).with_overrides(overrides))


def test_global_batch_and_micro_batch_give_b_and_S():
    # p = 8 as tp 2 x pp 2 x dp 2: b = 16 / 2 = 8 per replica, S = 8 / 2 = 4 micro-batches
    t = sensitivity(_bound(), TENSOR, 8, None, own={"tp": 2, "pp": 2, "recompute": "full"},
                    global_batch=16, micro_batch=2)  # fmt: skip
    row = t.to_pylist()[0]
    assert (row["b"], row["S"], row["tp"], row["pp"], row["recompute"]) == (8, 4, 2, 2, "full")
    want = estimate(_bound(), TENSOR, 8, 8, S=4, own={"tp": 2, "pp": 2, "recompute": 2, "zero": 0})
    assert row["t_epoch_s"] == want["t_epoch_s"] and row["feasible"] == want["feasible"]


@pytest.mark.parametrize("param", ["inter_bandwidth_Bps", "gpu_flops", "intra_bandwidth_Bps"])
def test_elasticities_match_finite_differences_of_estimate(param):
    own = {"tp": 4, "pp": 2, "zero": 1}
    row = sensitivity(_bound(), TENSOR, 16, 4, S=2, own=own).to_pylist()[0]
    base = float(load_machine(MACHINE).value(param))
    h = 1e-5  # central difference of ln t over ln X, truncation error O(h^2)
    t = [estimate(_bound(**{param: base * math.exp(s)}), TENSOR, 16, 4, S=2, own={"tp": 4, "pp": 2, "recompute": 0, "zero": 1})
         for s in (-h, h)]  # fmt: skip
    fd = (math.log(t[1]["t_epoch_s"]) - math.log(t[0]["t_epoch_s"])) / (2 * h)
    assert row[f"e_{param}"] == pytest.approx(fd, rel=1e-5, abs=1e-9)


def test_a_batch_that_does_not_split_is_infeasible_and_bad_axes_are_refused():
    # 12 sequences over 8 / (2 x 2) = 2 replicas is 6 each; a micro-batch of 4 does not divide 6
    row = sensitivity(_bound(), TENSOR, 8, None, own={"tp": 2, "pp": 2}, global_batch=12,
                      micro_batch=4).to_pylist()[0]  # fmt: skip
    assert row["feasible"] is False and row["limit_reason"] == "batch"
    with pytest.raises(InputError, match="data has no axis 'tp'"):
        sensitivity(_bound(), "data", 8, 8, own={"tp": 2})
    with pytest.raises(InputError, match="recompute must be one of"):
        sensitivity(_bound(), TENSOR, 8, 8, own={"recompute": "most"})
    with pytest.raises(InputError, match="b or global_batch"):
        sensitivity(_bound(), TENSOR, 8, 8, global_batch=16)
