"""Co-design questions of the NVL72 era, the software re-optimised at every value
(docs/tutorial-codesign.md): a memory fit (``target = "feasible"``), an MFU target (the best
configuration is the greatest ``mfu``), and a whole-number parameter (``gpus_per_node``, the
NVLink domain) answered on its whole numbers. Each answer is checked by a property that does not
read the answer's own arithmetic: the value makes the run fit or reach the target, a slightly
smaller one does not."""

from __future__ import annotations

import itertools
import math

import pytest

import sweep
from sweep.answers.codesign import Question, format_answer, parse_target, solve
from sweep.errors import InputError
from sweep.inputs.configs import Bound
from sweep.inputs.machines import load_machine
from sweep.inputs.models import load_model

FSDP = {"tp": [1], "pp": [1], "cp": [1], "zero": [3]}


def test_hbm_that_makes_fsdp_only_llama3_70b_fit():
    """FSDP only (zero 3, tp = pp = 1) on 512 H100s, a global batch of 2,048 sequences (4 a
    replica): the least HBM at which some configuration (recomputation, micro-batch) fits is the
    least memory any configuration needs, which the estimates of all nine give independently."""
    [a] = sweep.codesign(
        "llama3-70b", "dgx-h100", "data+tensor+pipeline", "gpu_mem_bytes",
        p=512, global_batch=2048, target="feasible", grid=64, **FSDP,
    )  # fmt: skip
    need = min(
        sweep.estimate("llama3-70b", "dgx-h100", "data+tensor+pipeline", p=512, global_batch=2048,
                       tp=1, pp=1, zero=3, recompute=r, micro_batch=m, set={"gpu_mem_bytes": 1e15})["mem_bytes"]
        for r, m in itertools.product(("none", "selective", "full"), (1, 2, 4))
    )  # fmt: skip
    assert a.threshold == pytest.approx(need, rel=1e-9)
    assert "holds for gpu_mem_bytes >=" in a.verdict()
    best = a.best[0]
    assert best["feasible"] and best["zero"] == 3 and best["tp"] == best["pp"] == 1
    # at the answer the run fits; just below, no configuration does (the fastest that fails: memory)
    at = sweep.estimate("llama3-70b", "dgx-h100", "data+tensor+pipeline", p=512, global_batch=2048, tp=1, pp=1,
                        zero=3, recompute=best["recompute"], micro_batch=best["micro_batch"],
                        set={"gpu_mem_bytes": a.threshold})  # fmt: skip
    assert at["feasible"]
    assert a.other_at < a.threshold and not any(r["feasible"] for r in a.other)
    assert a.other[0]["limit_reason"] == "memory"
    assert "a configuration of data+tensor+pipeline is feasible" in format_answer(a)


def test_an_mfu_target_takes_the_greatest_mfu():
    """``mfu >= X`` holds where the best (greatest) MFU over the configurations reaches X: with
    two configurations whose MFUs straddle X, it holds (the least would not)."""
    bound = Bound.of(load_model("gpt3-1.3b"), load_machine("dgx-h100"))
    mfus = {
        tp: sweep.estimate("gpt3-1.3b", "dgx-h100", "data+tensor+pipeline", p=8, global_batch=64, tp=tp,
                           pp=1, zero=0, recompute="none", micro_batch=1)["mfu"]
        for tp in (1, 8)
    }  # fmt: skip
    assert mfus[1] != mfus[8]
    x = (mfus[1] + mfus[8]) / 2
    q = Question(
        ("data+tensor+pipeline",), "inter_bandwidth_Bps", 8, B=(64,), micro_batch=(1,),
        own=(("tp", (1, 8)), ("pp", (1,)), ("zero", (0,)), ("recompute", (0,))),
        target=parse_target(f"mfu >= {x!r}"), grid=16,
    )  # fmt: skip
    a = solve(bound, q)
    assert a.holds == [(a.lo, a.hi)]  # 8 GPUs in one node: the inter-node link does not matter
    assert a.best[0]["mfu"] == pytest.approx(max(mfus.values()), rel=1e-12)


def test_network_for_40_percent_mfu_of_llama31_405b_on_16k_gpus():
    """Llama 3.1 405B on 16,384 H100s, 2,048 sequences an iteration (Meta 2024, Table 4's
    batch), interleaved schedules and sequence parallelism allowed: the inter-node bandwidth
    from which the best configuration reaches 40 % MFU; the best there reaches it, the one
    just below does not."""
    [a] = sweep.codesign(
        "llama3.1-405b", "dgx-h100", "data+tensor+pipeline", "inter_bandwidth_Bps",
        p=16384, global_batch=2048, target="mfu >= 0.4", vp=[1, 2, 4, 8], sp=[0, 1], grid=64,
    )  # fmt: skip
    assert a.threshold is not None and "holds for inter_bandwidth_Bps >=" in a.verdict()
    best = a.best[0]
    assert best["feasible"] and best["mfu"] >= 0.4
    assert a.other_at < a.threshold and all(r["mfu"] < 0.4 or not r["feasible"] for r in a.other)
    # the same configuration by estimate, at the answer and 1e-6 below it
    config = {k: best[k] for k in ("tp", "pp", "cp", "zero", "recompute", "vp", "sp", "micro_batch")}
    for value, reaches in ((a.threshold, True), (a.threshold * (1 - 1e-6), False)):
        one = sweep.estimate("llama3.1-405b", "dgx-h100", "data+tensor+pipeline", p=16384, global_batch=2048,
                             set={"inter_bandwidth_Bps": value}, **config)  # fmt: skip
        assert (one["mfu"] >= 0.4) == reaches


M = "gpt-l4-h8192-a64-s2048"  # 64 heads: tp = 16 spans two 8-GPU nodes of dgx-h100


def _t_iter(gpus_per_node: int) -> float:
    return sweep.estimate(M, "dgx-h100", "data+tensor+pipeline", p=64, global_batch=64, tp=16, pp=1, zero=0,
                          recompute="none", micro_batch=1, set={"gpus_per_node": gpus_per_node})["t_iter_s"]  # fmt: skip


def test_gpus_per_node_is_answered_on_whole_numbers():
    """64 GPUs: from gpus_per_node = 64 on they are one NVLink domain, so the data-parallel
    gradient all-reduce leaves the inter-node links and the iteration is fastest. The target
    ``t_iter_s <=`` that time holds from 64 GPUs a node on (searched from 16): the answer is the
    whole number 64 and the report names 63 as the value just below, where it fails."""
    fast = _t_iter(64)
    assert fast < _t_iter(63)
    [a] = sweep.codesign(
        M, "dgx-h100", "data+tensor+pipeline", "gpus_per_node", p=64, global_batch=64,
        tp=[16], pp=[1], zero=[0], recompute=["none"], micro_batch=[1],
        target=f"t_iter_s <= {fast!r}", range=(16, 512),
    )  # fmt: skip
    assert a.threshold == 64.0 and a.other_at == 63.0 and a.crossings == [64.0]
    assert a.holds == [(64.0, 512.0)]
    assert "just below the threshold, at gpus_per_node = 63 (fails)" in format_answer(a)
    # the default range is every whole number from 1 to 64 x the profile's 8
    [d] = sweep.codesign(
        M, "dgx-h100", "data+tensor+pipeline", "gpus_per_node", p=64, global_batch=64,
        tp=[16], pp=[1], zero=[0], recompute=["none"], micro_batch=[1], target=f"t_iter_s <= {fast!r}",
    )  # fmt: skip
    assert (d.lo, d.hi) == (1.0, 512.0) and all(float(v).is_integer() for v in d.crossings)
    assert 64.0 in d.crossings and d.largest == 512.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"param": "gpus_per_node", "range": (7.2, 7.9)}, "gpus_per_node is a whole number >= 1"),
        ({"param": "gpus_per_node", "range": (1, 2e6)}, "whole numbers, more than"),
        ({"target": "t_iter_s <= 1e999"}, "not a finite number"),
        ({"target": "fits"}, "or be 'feasible'"),
    ],
)
def test_whole_numbers_and_targets_refused_clearly(kwargs, message):
    args = {"param": "inter_bandwidth_Bps", "target": "t_iter_s <= 1", **kwargs}
    with pytest.raises(InputError, match=message) as err:
        sweep.codesign("gpt3-1.3b", "dgx-h100", "data+tensor+pipeline", p=8, global_batch=8, **args)
    assert "\n" not in str(err.value) and err.value.param in (("range",), ("target",))


def test_feasible_target_text():
    assert parse_target("feasible").text() == "feasible" and parse_target(" feasible ").value == math.inf
