"""The Python API (:mod:`sweep.api`): each function against the command it stands behind (the CLI
prints what the API returns), hand-computed values, and the promises of the module docstring:
``import sweep`` changes nothing, a call puts JAX's settings back, nothing prints, and queries
over an existing dataset never import JAX.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import jax
import pyarrow as pa
import pytest
from click.testing import CliRunner

import grids
import sweep
from sweep import api
from sweep.cli.main import cli
from sweep.cli.options import REPORT_PARAMS, flagged
from sweep.engine.evaluate import estimate
from sweep.errors import InputError, InputWarning
from sweep.inputs.machines import load_machine
from sweep.inputs.models import load_model

ROOT = Path(__file__).resolve().parents[1]
TINY = str(grids.MODELS / "tiny-cnn.toml")
PUBLIC = str(grids.MEASUREMENTS / "abci_chainer_public.csv")
#: A small grid: 3 strategies x p in {1, 4, 8} x b in {16, 32} on the shipped tiny CNN.
SPEC = {
    "name": "tiny",
    "model": TINY,
    "machine": "abci",
    "strategies": ["serial", "data", "data+filter"],
    "axes": {"p": [1, 4, 8], "b": [16, 32]},
}


@pytest.fixture()
def runner() -> CliRunner:
    return CliRunner()


def cli_out(runner: CliRunner, *args: str) -> str:
    result = runner.invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.fixture()
def x64_off():
    """JAX's x64 mode off for the test (the suite runs with it on), put back after."""
    jax.config.update("jax_enable_x64", False)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", True)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """:data:`SPEC` run to a dataset folder through the API."""
    out = tmp_path_factory.mktemp("api") / "tiny"
    api.run(SPEC, out)
    return out


# ------------------------------------------------------------------------------------- import


def python(code: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_import_sweep_changes_nothing_and_imports_no_jax():
    code = (
        "import os, sys; env = dict(os.environ); import jax; x64 = jax.config.jax_enable_x64; "
        "del sys.modules['jax']; import sweep; sweep.estimate; sweep.open; "
        "print(dict(os.environ) == env, 'jax' in sys.modules, jax.config.jax_enable_x64 == x64)"
    )
    # jax imported first only to read its setting: dropped from sys.modules, it must not come back
    assert python(code) == "True False True"


def test_the_api_names_are_sweeps_attributes():
    for name in api.__all__:
        if name != "MAX_EVALUATE_POINTS":
            assert getattr(sweep, name) is getattr(api, name)
    with pytest.raises(AttributeError):
        sweep.no_such_function  # noqa: B018


# ------------------------------------------------------------------------------------- estimate


def test_estimate_by_hand_serial():
    # tiny-cnn forward FLOPs per sample: conv 2*3*16*9*32*32 = 884,736; relu 16*32*32 = 16,384;
    # max pool 16*4*16*16 = 16,384; fc 2*16*10*16*16 = 81,920; sum 999,424, x3 for training =
    # 2,998,272. With no weight update (wu_passes = 0) serial computes D * sum(t):
    # 50,000 * 2,998,272 / 7.8e12 FLOP/s (abci, efficiency 1) = 0.0192196923... s.
    row = api.estimate(TINY, "abci", "serial", p=1, b=32, set={"wu_passes": 0})
    assert row["t_comp_s"] == pytest.approx(50_000 * 2_998_272 / 7.8e12, rel=1e-12)
    assert row["t_comm_s"] == 0
    assert row["iterations"] == math.ceil(50_000 / 32)  # 1,563
    assert row["t_epoch_s"] == pytest.approx(row["t_comp_s"], rel=1e-12)


def test_estimate_is_the_cli_json(runner):
    args = ("--model", TINY, "--machine", "abci", "--strategy", "data+filter", "--p", "8", "--b", "16")
    printed = json.loads(cli_out(runner, "estimate", *args, "--set", "inter_bandwidth_Bps=25e9", "--json"))
    row = api.estimate(TINY, "abci", "data+filter", p=8, b=16, set={"inter_bandwidth_Bps": 25e9})
    assert row == printed
    # loaded objects give the same row as names and paths
    loaded = api.estimate(load_model(TINY), load_machine("abci"), "data+filter", p=8, b=16,
                          set={"inter_bandwidth_Bps": 25e9})  # fmt: skip
    assert loaded == row
    # data: 8 GPUs x 16 samples = 128 an iteration, ceil(50,000 / 128) = 391 iterations
    data = api.estimate(TINY, "abci", "data", p=8, b=16)
    assert data["iterations"] == 391


def test_estimate_refuses_bad_input():
    with pytest.raises(InputError, match="strategy"):
        api.estimate(TINY, "abci", "no-such", p=1, b=1)
    with pytest.raises(InputError):
        api.estimate(TINY, "abci", "data", p=8, b=16, set={"no_such_param": 1.0})


@pytest.mark.usefixtures("x64_off")
def test_calls_put_x64_back():
    api.estimate(TINY, "abci", "data", p=8, b=16)
    assert jax.config.jax_enable_x64 is False
    api.evaluate(SPEC, x64=True)
    assert jax.config.jax_enable_x64 is False
    api.sensitivity(model=TINY, machine="abci", strategy="data", p=8, b=16)
    assert jax.config.jax_enable_x64 is False
    api.codesign(TINY, "abci", "data", "efficiency", p=8, b=16, target="t_epoch_s <= 1", grid=64)
    assert jax.config.jax_enable_x64 is False


def test_the_library_functions_put_x64_back_too(x64_off):
    from sweep.answers import codesign, sensitivity

    bound = api.bind(TINY, "abci")
    sensitivity.sensitivity(bound, "data", 8, 16)
    assert jax.config.jax_enable_x64 is False
    codesign.solve(bound, codesign.Question(("data",), "efficiency", 8, b=(16,), target=codesign.parse_target("t_epoch_s <= 1"), grid=64))  # fmt: skip
    assert jax.config.jax_enable_x64 is False


def test_no_state_carries_from_one_call_to_the_next():
    plain = api.estimate(TINY, "abci", "data", p=8, b=16)
    assert api.estimate(TINY, "abci", "data", p=8, b=16, set={"inter_bandwidth_Bps": 1e9}) != plain
    assert api.estimate(TINY, "abci", "data", p=8, b=16) == plain
    f32, f64 = api.evaluate(SPEC), api.evaluate(SPEC, x64=True)
    assert api.evaluate(SPEC).equals(f32)
    assert f64.schema.field("t_epoch_s").type == pa.float64()
    assert f32.column("t_epoch_s").to_pylist() == pytest.approx(f64.column("t_epoch_s").to_pylist(), rel=1e-6)


def test_estimate_leaves_x64_on_when_it_was_on():
    api.estimate(TINY, "abci", "data", p=8, b=16)
    assert jax.config.jax_enable_x64 is True


# ------------------------------------------------------------------------------------- grids


def test_evaluate_is_what_run_writes(folder):
    table = api.evaluate(SPEC)
    written = api.open(folder).to_table()
    assert table.column_names == written.column_names
    assert table.to_pylist() == written.to_pylist()
    plan = api.plan(SPEC)
    # serial 2 (b) + data 3 x 2 + data+filter 3 x 2 points; data+filter's p = 1 < p2 = 4 is skipped: 12 rows
    assert (plan.size, table.num_rows) == (14, 12)


def test_evaluate_counts_by_hand_and_takes_options():
    table = api.evaluate(SPEC)
    # serial uses b only (2 rows); data uses p x b (3 x 2 = 6 rows); data+filter too, less
    # p = 1 < p2 = gpus_per_node = 4, which cannot form a group (2 x 2 = 4 rows)
    counts = {s: table.column("strategy").to_pylist().count(s) for s in SPEC["strategies"]}
    assert counts == {"serial": 2, "data": 6, "data+filter": 4}
    assert table.schema.field("t_epoch_s").type == pa.float32()
    wide = api.evaluate(SPEC, x64=True, columns=["strategy", "p", "t_epoch_s", "feasible"])
    assert wide.column_names == ["strategy", "p", "t_epoch_s", "feasible"]
    assert wide.schema.field("t_epoch_s").type == pa.float64()
    feasible = api.evaluate(SPEC, only_feasible=True)
    assert feasible.num_rows == sum(table.column("feasible").to_pylist())


def test_evaluate_matches_estimate_row_by_row():
    table = api.evaluate(SPEC, x64=True)
    for row in table.to_pylist()[:6]:
        one = api.estimate(TINY, "abci", row["strategy"], p=row["p"], b=row["b"])
        assert row["t_epoch_s"] == pytest.approx(one["t_epoch_s"], rel=1e-12)


def test_evaluate_refuses_a_large_grid_before_computing():
    with pytest.raises(InputError, match="over 5 for an evaluation in memory"):
        api.evaluate(SPEC, max_points=5)
    # 2 x 8,192 x 1,024 + 1,024 = 16,778,240 points
    big = {**SPEC, "axes": {"p": list(range(1, 8193)), "b": list(range(1, 1025))}}
    with pytest.raises(InputError, match="10,000,000"):
        api.evaluate(big)


def test_run_summary_and_its_report(folder, tmp_path):
    summary = api.run(SPEC, tmp_path / "again", keep="pareto:t_epoch_s,p")
    assert summary.folder == tmp_path / "again" and summary.reduced
    front = api.open(tmp_path / "again").to_table()
    assert summary.rows == front.num_rows
    assert api.open(folder).pareto(["t_epoch_s", "p"]).num_rows == front.num_rows
    lines = summary.lines(timings=True)
    assert lines[0].startswith(f"{summary.rows:,} rows written to {summary.folder} ")
    assert lines[-1].startswith("timings: ")
    with pytest.raises(InputError, match="not both"):
        api.run(SPEC, tmp_path / "x", resume=True, overwrite=True)


def test_plan_report_by_hand():
    from sweep.engine.runstate import describe_plan

    lines = describe_plan(api.plan(SPEC))
    assert lines[0] == "sweep 'tiny': 3 jobs, 14 points"  # 2 + 6 + 6


# ------------------------------------------------------------------------------------- queries


def test_open_where_and_the_queries(folder):
    sw = api.open(folder)
    rows = sw.where("p == 4 and strategy == 'data'").to_pylist()
    assert [(r["p"], r["b"]) for r in rows] == [(4, 16), (4, 32)]
    every = sw.where().to_pylist()
    fastest = min((r for r in every if r["feasible"]), key=lambda r: r["t_epoch_s"])
    assert sw.best(per=[]).to_pylist()[0]["t_epoch_s"] == fastest["t_epoch_s"]
    top = sw.top("t_epoch_s", 2, per="strategy")
    assert top.num_rows == 6


def test_queries_and_help_never_import_jax(folder):
    for args in (
        ["pareto", str(folder), "--min", "t_epoch_s", "--min", "p"],
        ["top", str(folder), "--by", "t_epoch_s", "-k", "3"],
        ["best", str(folder), "--per", "p", "--rank"],
        ["--help"],
        ["pareto", "--help"],
    ):
        code = (
            "import sys\nfrom sweep.cli.main import main\n"
            f"sys.argv = ['sweep', *{args!r}]\n"
            "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
            # the limit names, the layer kinds, the parameter records and the strategy registry
            # (pure Python) are all of kernels a query reads
            "pure = {'kernels.names', 'kernels.kinds', 'kernels.params', 'kernels.partition', "
            "'kernels.strategies', 'kernels.strategies.registry'}\n"
            "print('JAX', 'jax' in sys.modules, any(m.startswith('kernels.') and m not in pure "
            "for m in sys.modules))"
        )
        last = python(code).splitlines()[-1]
        assert last == "JAX False False", (args, last)


# ------------------------------------------------------------------------------------- the rest


def test_codesign_is_the_cli_json(runner):
    args = ["--model", TINY, "--machine", "abci", "--param", "efficiency", "--strategy", "data",
            "--p", "4,8", "--b", "16,32", "--target", "t_epoch_s <= 0.01", "--grid", "64"]  # fmt: skip
    printed = [json.loads(line) for line in cli_out(runner, "codesign", *args, "--json").splitlines()]
    answers = api.codesign(TINY, "abci", "data", "efficiency", p=[4, 8], b=[16, 32], target="t_epoch_s <= 0.01", grid=64)  # fmt: skip
    assert [a.to_json() for a in answers] == printed
    assert len(answers) == 2


def test_codesign_threshold_by_hand():
    # serial with wu_passes = 0 is pure compute: t_epoch = 0.0192196923 s / efficiency (see
    # test_estimate_by_hand_serial), so t_epoch <= 0.04 holds for efficiency >= 0.0192196923 / 0.04
    [answer] = api.codesign(TINY, "abci", "serial", "efficiency", p=1, b=32, target="t_epoch_s <= 0.04",
                            set={"wu_passes": 0}, grid=256)  # fmt: skip
    assert answer.threshold == pytest.approx(50_000 * 2_998_272 / 7.8e12 / 0.04, rel=1e-9)


def test_sensitivity_is_the_cli_json(runner, folder):
    args = ["--model", TINY, "--machine", "abci", "--strategy", "data", "--p", "8", "--b", "16"]
    printed = json.loads(cli_out(runner, "sensitivity", *args, "--json"))
    table = api.sensitivity(model=TINY, machine="abci", strategy="data", p=8, b=16)
    row = table.to_pylist()[0]
    assert set(printed) == set(row)
    for k, v in printed.items():
        # JSON has null for a non-finite number and for limit_reason's null (feasible)
        assert (v is None and (row[k] is None or not math.isfinite(row[k]))) or row[k] == v, k
    # serial compute only: t = D * sum(t) / (gpu_flops * efficiency): elasticity -1 to gpu_flops
    serial = api.sensitivity(model=TINY, machine="abci", strategy="serial", p=1, b=32, set={"wu_passes": 0})
    assert serial.column("e_gpu_flops")[0].as_py() == pytest.approx(-1.0, rel=1e-12)
    rows = api.sensitivity(folder, where="strategy == 'data'")
    assert rows.num_rows == 6
    with pytest.raises(InputError, match="not both"):
        api.sensitivity(folder, model=TINY)


def test_validate_is_the_cli_report(runner, tmp_path):
    printed = cli_out(runner, "validate", PUBLIC, "--summary").splitlines()
    result = api.validate(PUBLIC)
    assert result.lines(rows=False) == printed
    assert result.summaries[-1].model == "all"
    assert result.summaries[-1].n == len(result.measurements.runs)
    out = api.validate(PUBLIC, out=tmp_path / "v.csv")
    assert out.written == [tmp_path / "v.csv"] and (tmp_path / "v.csv").is_file()


def test_calibrate_is_the_cli_report(runner, tmp_path):
    args = [PUBLIC, "--machine", "abci", "--fit", "overheads.data.all", "--cv", "0"]
    printed = cli_out(runner, "calibrate", *args).splitlines()
    result = api.calibrate(PUBLIC, "abci", fit="overheads.data.all", cv=0)
    # the same report, its parameters written as the CLI's flags
    assert [
        *(flagged(line, REPORT_PARAMS) for line in result.lines()),
        "(no -o: no machine file written)",
    ] == printed
    assert "structure: the parameters named (fit), priors x1" in result.lines()
    assert "structure: the parameters named (--fit), priors x1" in printed
    written = api.calibrate(PUBLIC, "abci", fit="overheads.data.all", cv=0, out=tmp_path / "fit.toml")
    assert written.written == tmp_path / "fit.toml"
    again = load_machine(str(tmp_path / "fit.toml"))
    assert again.name == "abci-calibrated"
    assert again.overheads["data"] == pytest.approx(result.profile.overheads["data"])


def test_nothing_prints(capsys, folder, tmp_path):
    api.estimate(TINY, "abci", "data", p=8, b=16)
    api.evaluate(SPEC)
    api.run(SPEC, tmp_path / "quiet")
    sw = api.open(folder)
    sw.pareto(["t_epoch_s", "p"]), sw.top("t_epoch_s", 1), sw.best(), sw.where("p == 1")
    api.codesign(TINY, "abci", "data", "efficiency", p=8, b=16, target="t_epoch_s <= 1", grid=64)
    api.sensitivity(model=TINY, machine="abci", strategy="data", p=8, b=16)
    api.validate(PUBLIC)
    api.calibrate(PUBLIC, "abci", fit="overheads.data.all", cv=0)
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


def test_the_readme_notebook_calls_are_real_signatures():
    import inspect

    text = (ROOT / "README.md").read_text()
    signature = "sweep.estimate(model, machine, strategy, *, p, b, p2=None, S=None, global_batch=None, "
    assert signature + "micro_batch=None, set=None, **settings)" in text
    params = inspect.signature(api.estimate).parameters
    assert [k for k in params][:10] == [
        "model", "machine", "strategy", "p", "b", "p2", "S", "global_batch", "micro_batch", "set"
    ]  # fmt: skip
    assert {"keep", "resume"} <= set(inspect.signature(api.run).parameters)
    from sweep.answers.query import Sweep

    assert all(callable(getattr(Sweep, m, None)) for m in ("pareto", "top", "best", "where"))


# ------------------------------------------------------------------- every argument checked


@pytest.mark.parametrize(
    ("given", "param"),
    [
        ({"p": 8.5, "b": 32}, "p"),
        ({"p": 8, "b": 32.7}, "b"),
        ({"p": "8", "b": 32}, "p"),
        ({"p": 8, "b": True}, "b"),
        ({"p": 8, "b": 32, "p2": 2.5}, "p2"),
        ({"p": 8, "global_batch": "256"}, "global_batch"),
        ({"p": 8, "b": 32, "tp": 1.5}, "tp"),
        ({"p": 8, "b": 32, "recompute": "half"}, "recompute"),
        ({"p": 8, "b": 32, "global_batch": 256}, "global_batch"),
        ({"p": 8}, "global_batch"),
        ({"p": 8, "b": 32, "flavour": 1}, "flavour"),
    ],
)
def test_estimate_checks_every_argument(given, param):
    """A fraction, text for a number, a bool or an unknown name is sweep.InputError naming the
    parameter, never a TypeError or a silent float (issue 34, defect 4)."""
    assert sweep.InputError is InputError
    with pytest.raises(sweep.InputError) as err:
        sweep.estimate("resnet50", "abci", "data+tensor+pipeline" if param == "tp" else "data", **given)
    assert param in err.value.param and param in str(err.value) and len(str(err.value).splitlines()) == 1


def test_global_batch_in_estimate():
    """b = global_batch / p1: equal rows; a global batch p1 does not divide is infeasible, batch."""
    by_b = api.estimate("resnet50", "abci", "data", p=8, b=32)
    by_global = api.estimate("resnet50", "abci", "data", p=8, global_batch=256)  # 256 / 8 = 32
    assert by_global == by_b
    # data+filter, p2 = 2: p1 = 8 / 2 = 4 groups; 100 / 4 = 25
    assert api.estimate("resnet50", "abci", "data+filter", p=8, p2=2, global_batch=100)["b"] == 25
    # 100 / 8 = 12.5: a configuration that cannot run (issue 38, defect 3), as a sweep's row infeasible
    with pytest.raises(sweep.InputError) as err:
        api.estimate("resnet50", "abci", "data", p=8, global_batch=100)
    assert err.value.param == ("global_batch",) and "(batch)" in str(err.value)
    odd = estimate(api.bind("resnet50", "abci"), "data", 8, global_batch=100)
    assert (odd["feasible"], odd["limit_reason"]) == (False, "batch")


GPT_TINY = "gpt-l2-h64-a4-s32-v100"  # 4 heads, 2 blocks


@pytest.mark.parametrize(
    ("given", "param", "rule"),
    [
        ({"p": 24, "global_batch": 24, "tp": 3}, ("tp",), "heads"),  # 3 does not divide 4 heads
        ({"p": 6, "global_batch": 24, "tp": 4}, ("p", "tp", "pp", "cp"), "divides"),  # 4 does not divide 6
        ({"p": 8, "global_batch": 25, "tp": 2, "pp": 2}, ("global_batch", "micro_batch"), "batch"),  # 25 / 2
        ({"p": 8, "global_batch": 32, "tp": 2, "precision": "fp8"}, ("precision",), "precision"),  # an A100
        ({"p": 4, "global_batch": 32, "tp": 4, "vp": 2}, ("vp", "pp"), "schedule"),  # vp 2 at pp 1
    ],
)
def test_estimate_refuses_a_configuration_that_cannot_run(given, param, rule):
    """Issue 38, defects 3 and 7: sweep.InputError naming the rule and the parameters, one line."""
    with pytest.raises(sweep.InputError) as err:
        sweep.estimate(GPT_TINY, "a100-ib800", "data+tensor+pipeline", **given)
    assert err.value.param == param and str(err.value).endswith(f"({rule})")
    assert len(str(err.value).splitlines()) == 1


def test_micro_batch_defaults_to_one():
    """Issue 38, defect 2: data+tensor+pipeline without S or micro_batch runs micro-batches of one
    sample (Megatron-LM's default): global batch 64 over p1 = 8 / (2 x 2) = 2 replicas is b = 32
    samples per replica in S = 32 micro-batches, the row of micro_batch = 1."""
    given = {"p": 8, "global_batch": 64, "tp": 2, "pp": 2}
    row = sweep.estimate(GPT_TINY, "a100-ib800", "data+tensor+pipeline", **given)
    assert (row["b"], row["S"]) == (32, 32)
    assert row == sweep.estimate(GPT_TINY, "a100-ib800", "data+tensor+pipeline", micro_batch=1, **given)


def test_sequence_parallelism_at_tp_1_warns():
    """Issue 38, defect 7: sp with tp 1 has nothing to split: an InputWarning naming sp."""
    with pytest.warns(InputWarning, match="sp 1 is ignored at tp 1") as caught:
        sweep.estimate(GPT_TINY, "a100-ib800", "data+tensor+pipeline", p=2, global_batch=8, pp=2, sp=1)
    assert any(getattr(w.message, "param", ()) == ("sp",) for w in caught)


# -- issue 38, defects 9 and 10: wrong types are InputErrors naming the parameter -------------------

WRONG = [
    # (call, the parameter named, words of the message)
    (lambda: sweep.codesign("gpt3-175b", "selene", "data+tensor+pipeline", "inter_bandwidth_Bps",
                            p="1024", target="t_iter_s <= 27"), "p", "whole number >= 1"),
    (lambda: sweep.codesign("resnet50", "abci", "data", "inter_bandwidth_Bps", p=[1024, "8"],
                            target="t_epoch_s <= 10"), "p", "or a list of them"),
    (lambda: sweep.evaluate(42), "spec", "sweep file's path"),
    (lambda: sweep.plan(None), "spec", "sweep file's path"),
    (lambda: sweep.estimate("resnet50", "abci", "data", p=4, b=32, set=["k=v"]), "set", "mapping"),
    (lambda: sweep.estimate("resnet50", "abci", "data", p=4, b=32, set={"gpu_mem_bytes": [1]}), "set",
     "gpu_mem_bytes must be a number"),
    (lambda: sweep.estimate(3, "abci", "data", p=4, b=32), "model", "a built-in name, a path or a Model"),
    (lambda: sweep.estimate("resnet50", 3.5, "data", p=4, b=32), "machine", "MachineProfile"),
    (lambda: sweep.estimate("gpt3-175b", "selene", "data+tensor+pipeline", p=8, global_batch=8, tp=1.5),
     "tp", "a name or a whole number"),
    (lambda: sweep.run(SPEC, x64="yes"), "x64", "True or False"),
    (lambda: sweep.evaluate(SPEC, columns=3), "columns", "a name or a list of names"),
    (lambda: sweep.validate(PUBLIC, out=5), "out", "a path"),
    (lambda: sweep.calibrate(PUBLIC, "abci", loss_scale=-1.0), "loss_scale", "a number > 0"),
    (lambda: sweep.sensitivity(model="resnet50", machine="abci", strategy="data", p=4, b="32"), "b",
     "whole number"),
    (lambda: sweep.open(7), "path", "a path"),
]  # fmt: skip


@pytest.mark.parametrize(("call", "param", "words"), WRONG, ids=[f"{i}-{w[1]}" for i, w in enumerate(WRONG)])
def test_wrong_argument_types_name_the_parameter(call, param, words):
    with pytest.raises(InputError) as err:
        call()
    assert err.value.param == (param,)
    assert str(err.value).startswith(f"{param}: ") or str(err.value).startswith(f"{param} must")
    assert words in str(err.value) and "--" not in str(err.value)


def test_query_object_checks_its_arguments(tmp_path):
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"p": [1, 2], "t_iter_s": [2.0, 1.0]}), tmp_path / "t.parquet")
    sw = sweep.open(tmp_path / "t.parquet")
    for call, param in [
        (lambda: sw.top("t_iter_s", "3"), "k"),
        (lambda: sw.top("t_iter_s", 0), "k"),
        (lambda: sw.top(3), "by"),
        (lambda: sw.pareto(["t_iter_s"], per=5), "per"),
        (lambda: sw.best(by="t_iter_s", columns=["nope"]), "columns"),
        (lambda: sw.where(3), "where"),
        (lambda: sw.where(columns=["nope"]), "columns"),
    ]:
        with pytest.raises(InputError) as err:
            call()
        assert err.value.param == (param,), (param, err.value)
    assert sw.top("t_iter_s", 1).column("p").to_pylist() == [2]


def test_the_cli_writes_the_parameters_as_its_flags(tmp_path):
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"p": [1, 2], "t_iter_s": [2.0, 1.0]}), tmp_path / "t.parquet")
    result = CliRunner().invoke(cli, ["top", str(tmp_path / "t.parquet"), "--by", "t_iter_s", "-k", "0"])
    assert result.exit_code == 2 and result.output == "error: -k must be a whole number >= 1, got 0\n"
    result = CliRunner().invoke(cli, ["pareto", str(tmp_path / "t.parquet"), "--min", "q"])
    assert result.exit_code == 2 and result.output.startswith("error: --min: unknown column 'q'")


def test_dir_of_the_package_lists_each_name_once():
    names = dir(sweep)
    assert names.count("InputError") == 1 and len(names) == len(set(names))
    assert {"estimate", "codesign", "InputError"} <= set(names)


def test_tokens_sets_the_run_a_transformer_trains_on():
    """GPT-3 175B on 1,536 sequences of 2,048 tokens an iteration: 300B tokens (the GPT default)
    are 300e9 / 2,048 = 146,484,375 sequences, ceil(/ 1,536) = 95,368 iterations; 1.5T tokens
    732,421,875 sequences, 476,838 iterations, and the run's time, GPU-hours, energy and cost
    grow with them. A CNN has no tokens."""
    split = dict(p=64, global_batch=1536, micro_batch=1, tp=8, pp=8, recompute="full")
    default = sweep.estimate("gpt3-175b", "dgx-h100", "data+tensor+pipeline", **split)
    same = sweep.estimate("gpt3-175b", "dgx-h100", "data+tensor+pipeline", tokens=300e9, **split)
    more = sweep.estimate("gpt3-175b", "dgx-h100", "data+tensor+pipeline", tokens=1.5e12, **split)
    assert default["iterations"] == same["iterations"] == 95_368
    assert same["t_epoch_s"] == default["t_epoch_s"]
    assert more["iterations"] == 476_838
    ratio = more["t_epoch_s"] / default["t_epoch_s"]
    # the per-sample work scales with the sequences (x 5 exactly), the per-iteration work with the
    # iterations (476,838 / 95,368 = 4.99998): the run takes between the two
    assert 476_838 / 95_368 <= ratio <= 5.0
    for column in ("gpu_hours", "energy_kwh", "cost_usd"):
        assert more[column] / default[column] == pytest.approx(ratio, rel=1e-12)
    with pytest.raises(InputError, match="tokens applies to transformer models") as err:
        sweep.estimate("resnet50", "abci", "data", p=8, b=32, tokens=1e9)
    assert err.value.param == ("tokens",)
    with pytest.raises(InputError, match="tokens"):
        sweep.estimate("gpt3-175b", "dgx-h100", "data+tensor+pipeline", tokens=-1, **split)
