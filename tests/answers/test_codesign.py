"""Co-design inverse questions (sweep.codesign): thresholds found by grid + bisection agree with
direct evaluations of the kernels on both sides, and the CLI reports them."""

from __future__ import annotations

import functools
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from click.testing import CliRunner

from kernels import Config
from sweep.answers.codesign import Question, configurations, format_answer, parse_target, solve
from sweep.cli.main import cli
from sweep.engine.evaluate import point_fn
from sweep.errors import InputError
from sweep.inputs.configs import Bound
from sweep.inputs.machines import load_machine
from sweep.inputs.models import load_model


@pytest.fixture(scope="module")
def bound() -> Bound:
    return Bound.of(load_model("resnet50"), load_machine("abci"))


@functools.cache
def _kernel(strategy: str):
    return jax.jit(point_fn(strategy, ("inter_bandwidth_Bps",)))


def _t(bound: Bound, strategy: str, p: int, b: int, inter_bandwidth_Bps: float) -> float:
    """t_epoch_s of one configuration in float64, by the kernels directly (p2 = 4, S = p)."""
    f64 = functools.partial(jax.tree_util.tree_map, lambda a: jnp.asarray(a, jnp.float64))
    cfg = Config(*(jnp.asarray(float(v)) for v in (p, b, 4, p)))
    bw = jnp.asarray(inter_bandwidth_Bps, jnp.float64)
    _, derived = _kernel(strategy)(f64(bound.net), f64(bound.profile.pytree(np.float64)), cfg, (bw,))
    return float(derived.t_epoch_s)


def test_target_threshold_is_where_the_time_meets_it(bound):
    # t_epoch(data, p=1024, b=32) falls with bandwidth: ask for the time it has at 30 GB/s
    want = _t(bound, "data", 1024, 32, inter_bandwidth_Bps=30e9)
    q = Question(
        ("data",), "inter_bandwidth_Bps", 1024, b=(32,), target=parse_target(f"t_epoch_s <= {want!r}")
    )
    a = solve(bound, q)
    assert a.threshold == pytest.approx(30e9, rel=1e-9)
    assert a.smallest == a.threshold and a.largest == a.hi
    assert a.holds == [(a.threshold, a.hi)]
    assert "holds for inter_bandwidth_Bps >=" in a.verdict()
    assert a.best[0]["t_epoch_s"] == pytest.approx(want, rel=1e-9)
    assert a.best[0]["inter_bandwidth_Bps"] == a.threshold


def test_beats_crossing_matches_direct_evaluation(bound):
    # at a fixed global batch of 8192, data+filter (b = 32 per group of 4) against data (b = 8)
    q = Question(("data+filter",), "inter_bandwidth_Bps", 1024, B=(8192,), beats="data")
    a = solve(bound, q)
    assert len(a.crossings) == 1
    x = a.threshold
    assert 1e10 < x < 3e10
    assert a.holds == [(a.lo, x)]  # data+filter wins below the crossing
    below = {s: _t(bound, s, 1024, b, inter_bandwidth_Bps=x * (1 - 1e-6))
             for s, b in (("data", 8), ("data+filter", 32))}  # fmt: skip
    above = {s: _t(bound, s, 1024, b, inter_bandwidth_Bps=x * (1 + 1e-6))
             for s, b in (("data", 8), ("data+filter", 32))}  # fmt: skip
    assert below["data+filter"] < below["data"]
    assert above["data+filter"] > above["data"]
    at = {r["strategy"]: r for r in a.best}
    assert at["data"]["b"] == 8 and at["data+filter"]["b"] == 32 and at["data+filter"]["global_batch"] == 8192
    assert at["data"]["t_epoch_s"] == pytest.approx(at["data+filter"]["t_epoch_s"], rel=1e-9)


def test_memory_threshold_is_the_winning_configurations_memory(bound):
    q = Question(("data",), "gpu_mem_bytes", 1024, b=(16, 32, 64, 128), target=parse_target("t_epoch_s <= 6"))
    a = solve(bound, q)
    best = a.best[0]
    assert best["feasible"] and best["t_epoch_s"] <= 6
    assert a.threshold == pytest.approx(best["mem_bytes"], rel=1e-12)
    assert a.threshold >= best["mem_bytes"]


def test_never_always_and_falling(bound):
    never = solve(
        bound, Question(("data",), "inter_bandwidth_Bps", 4, b=(1,), target=parse_target("t_epoch_s < 1"))
    )
    assert never.holds == [] and never.threshold is None and "never holds" in never.verdict()
    always = solve(
        bound, Question(("data",), "inter_bandwidth_Bps", 8, b=(32,), target=parse_target("t_epoch_s < 1e9"))
    )
    assert always.holds == [(always.lo, always.hi)] and "whole range" in always.verdict()
    want = _t(bound, "data", 64, 32, inter_bandwidth_Bps=20e9)
    falling = solve(
        bound,
        Question(
            ("data",), "inter_bandwidth_Bps", 64, b=(32,), target=parse_target(f"t_epoch_s >= {want!r}")
        ),
    )
    assert falling.largest == pytest.approx(20e9, rel=1e-9)
    assert "<=" in falling.verdict()


def test_configurations_respect_hybrid_groups_and_global_batch(bound):
    q = Question(("data+filter",), "gpu_flops", 64, B=(256, 100), p2=(2, 4, 3))
    rows = configurations(bound, "data+filter", q)
    assert {tuple(r) for r in rows.tolist()} == {(64, 8, 2, 64), (64, 16, 4, 64)}
    assert configurations(bound, "data", Question(("data",), "gpu_flops", 64, B=(256, 100))).tolist() == [
        [64, 4, 4, 64]
    ]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"param": "scatter_gather"}, "a switch"),
        ({"param": "allreduce_algo"}, "a choice"),
        ({"param": "nope"}, "unknown machine parameter"),
        ({"target": None}, r"give a target \(.t_epoch_s <= 10.\) or beats"),
        ({"beats": "data"}, "beats data is also one of strategies"),
        ({"b": None}, "give samples per replica"),
        ({"lo": 5.0, "hi": 1.0}, "0 <= LO < HI"),
        ({"p": 3, "strategies": ("data+filter",)}, "no configuration"),
        ({"grid": 1}, "^grid must be in 2..1,048,576, got 1$"),
        ({"grid": 100_000_000}, "^grid must be in 2..1,048,576, got 100,000,000$"),  # 2.6 GB before
    ],
)
def test_question_errors(bound, kwargs, message):
    base = {
        "strategies": ("data",),
        "param": "gpu_flops",
        "p": 8,
        "b": (32,),
        "target": parse_target("t_epoch_s < 1"),
    }
    base.update(kwargs)
    with pytest.raises(InputError, match=message):
        solve(bound, Question(**base))


def test_target_parsing():
    assert parse_target(" t_epoch_s<=1e1 ").value == 10.0
    with pytest.raises(InputError, match="unknown metric"):
        parse_target("t_epoch <= 1")
    with pytest.raises(InputError, match="must look like"):
        parse_target("t_epoch_s == 1")


def test_cli_codesign_json_and_text(bound):
    runner = CliRunner()
    args = ["codesign", "--model", "resnet50", "--machine", "abci", "--param", "inter_bandwidth_Bps",
            "--strategy", "data+filter", "--beats", "data", "--p", "1024", "--B", "8192"]  # fmt: skip
    r = runner.invoke(cli, [*args, "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert 1e10 < out["threshold"] < 3e10 and out["holds"][0][1] == out["threshold"]
    text = format_answer(
        solve(bound, Question(("data+filter",), "inter_bandwidth_Bps", 1024, B=(8192,), beats="data"))
    )
    assert "answer:   holds for inter_bandwidth_Bps <=" in text and "p2=4" in text
    bad = runner.invoke(cli, [*args[:-2], "--b", "8", "--B", "8192"])
    assert bad.exit_code == 2 and bad.stderr.startswith("error: ") and len(bad.stderr.splitlines()) == 1
    bad = runner.invoke(cli, [*args[:6], "attention", *args[7:]])
    assert bad.exit_code == 2 and "a choice (standard, flash)" in bad.stderr


def test_calibrated_overheads_move_the_threshold_as_estimate_does():
    """With an allreduce overhead, the threshold is where estimate (which applies it) meets the target."""
    import dataclasses

    from sweep.engine.evaluate import estimate

    jax.config.update("jax_enable_x64", True)
    calibrated = dataclasses.replace(load_machine("abci"), overheads={"data": {"allreduce": 2.0}})
    cal = Bound.of(load_model("resnet50"), calibrated)
    at_30 = Bound.of(load_model("resnet50"), calibrated.with_overrides({"inter_bandwidth_Bps": 30e9}))
    want = estimate(at_30, "data", 1024, 32)["t_epoch_s"]
    assert want > _t(cal, "data", 1024, 32, inter_bandwidth_Bps=30e9)  # the overhead counts
    q = Question(
        ("data",), "inter_bandwidth_Bps", 1024, b=(32,), target=parse_target(f"t_epoch_s <= {want!r}")
    )
    assert solve(cal, q).threshold == pytest.approx(30e9, rel=1e-9)
