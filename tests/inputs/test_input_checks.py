"""Inputs checked as a careful user would wish (docs/inputs.md "Checks"): model shapes that
must chain, implausible machine magnitudes, options a strategy ignores, the hybrids' p2 rule
in sweeps, and the run summary's compile and evaluation figures."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from click.testing import CliRunner

from kernels.strategies.registry import OWN_AXES
from sweep.cli.main import cli
from sweep.errors import InputError, InputWarning
from sweep.inputs.configs import p2_fits, resolve
from sweep.inputs.grid import load_spec
from sweep.inputs.machines import load_machine
from sweep.inputs.models import load_model
from tests.cli.test_cli import assert_one_line_error, sweep_subprocess

LAYER = """
[[layer]]
name = "{name}"
kind = "{kind}"
x = {x}
w = {w}
y = {y}
"""


def _model(tmp_path: Path, *layers: tuple[str, str, list, list, list]) -> Path:
    path = tmp_path / "m.toml"
    text = "[model]\nname = 'm'\ndataset_samples = 1000\n" + "".join(
        LAYER.format(name=n, kind=k, x=x, w=w, y=y) for n, k, x, w, y in layers
    )
    path.write_text(text)
    return path


CONV1 = ("conv1", "conv", [3, 32, 32], [3, 16, 3, 3], [16, 32, 32])
RELU1 = ("relu1", "relu", [16, 32, 32], [16, 16, 0, 0], [16, 32, 32])


@pytest.fixture
def runner(monkeypatch) -> CliRunner:
    monkeypatch.setenv("SWEEP_JAX_CACHE", "")
    return CliRunner()


# ----------------------------------------------------------------------------- shapes chain


def test_toml_layers_that_do_not_chain_are_an_error_naming_both(runner, tmp_path):
    # conv2 reads 8 channels where relu1 wrote 16: 8*32*32 != 16*32*32
    conv2 = ("conv2", "conv", [8, 32, 32], [8, 8, 3, 3], [8, 32, 32])
    path = _model(tmp_path, CONV1, RELU1, conv2)
    with pytest.raises(InputError) as err:
        load_model(path)
    text = str(err.value)
    # the third [[layer]] header is line 19: 3 [model] lines, 7 per layer (a blank line, the
    # header, 5 keys), then the third's blank line: 3 + 2 * 7 + 2
    assert f"{path}:19" in text and "'conv2'" in text and "'relu1'" in text, text
    result = runner.invoke(
        cli,
        ["estimate", "--model", str(path), "--machine", "abci", "--strategy", "data", "--p", "4", "--b", "8"],
    )
    assert_one_line_error(result, "'conv2'", "'relu1'", f"{path}:19")


def test_flatten_into_fc_add_and_branches_chain(tmp_path):
    pool = ("pool", "pool_max", [16, 32, 32], [0, 0, 2, 2], [16, 16, 16])
    # a projection shortcut reads relu1's output (an earlier layer), not pool's
    proj = ("proj", "conv", [16, 32, 32], [16, 16, 2, 2], [16, 16, 16])
    add = ("add", "add", [16, 16, 16], [16, 16, 0, 0], [16, 16, 16])
    fc = ("fc", "fc", [16, 16, 16], [16, 10, 16, 16], [10, 1, 1])  # 4096 elements flattened
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = load_model(_model(tmp_path, CONV1, RELU1, pool, proj, add, fc))
    assert [layer.name for layer in model.layers] == ["conv1", "relu1", "pool", "proj", "add", "fc"]


def test_net_file_that_does_not_chain_is_an_error(tmp_path):
    path = tmp_path / "bad.net"
    path.write_text(
        "Input|1000x3x32x32\n"
        "CONV_1|3x32x32|3x16x3x3|16x32x32\n"
        "RELU_1|16x32x32|16x16x0x0|16x32x32\n"
        "CONV_2|8x32x32|8x8x3x3|8x32x32\n"
    )
    with pytest.raises(InputError, match=rf"{re.escape(str(path))}:4: .*'CONV_2'.*'RELU_1'"):
        load_model(path)


def test_shipped_paradl_typo_stays_a_warning(tmp_path):
    # COSMOFLOW.net_256 line 8 reads 32x2128x128x128 after a 32x128x128x128 output: ParaDL's typo
    from tests.helpers import paradl_dir

    with pytest.warns(UserWarning, match=r"COSMOFLOW\.net_256:8: .*'RELU'.*'CONV_2'.*known typo"):
        load_model(paradl_dir() / "COSMOFLOW.net_256")
    # the same mistake in a file of another name is an error
    copy = tmp_path / "mine.net_256"
    copy.write_text((paradl_dir() / "COSMOFLOW.net_256").read_text())
    with pytest.raises(InputError, match="'RELU'"):
        load_model(copy)


# ----------------------------------------------------------------------------- magnitudes

MACHINE = """
name = "slow"
gpu_flops = {flops}
gpu_mem_bytes = 16e9
gpu_mem_bw_Bps = 900e9
gpus_per_node = 4
[intra]
alpha_s = 5e-6
bandwidth_Bps = 50e9
[[inter]]
alpha_s = {alpha}
bandwidth_Bps = {bw}
"""


@pytest.mark.parametrize(
    ("values", "key", "unit"),
    [
        ({"bw": "100"}, "inter[0].bandwidth_Bps", "B/s"),  # meant 100 GB/s
        ({"flops": "125"}, "gpu_flops", "FLOP/s"),  # meant 125 TFLOP/s
        ({"alpha": "5"}, "inter[0].alpha_s", " s "),  # meant 5 us
    ],
)
def test_implausible_machine_file_values_warn(tmp_path, values, key, unit):
    path = tmp_path / "slow.toml"
    path.write_text(MACHINE.format(**{"flops": "125e12", "alpha": "5e-6", "bw": "12.5e9", **values}))
    with pytest.warns(UserWarning) as caught:
        load_machine(path)
    assert len(caught) == 1
    text = str(caught[0].message)
    assert f"key '{key}'" in text and unit in text, text


def test_plausible_machine_files_do_not_warn():
    from sweep.inputs.machines import builtin_names

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in builtin_names():
            load_machine(name)


def test_implausible_set_and_axis_warn_once(tmp_path):
    with pytest.warns(UserWarning, match=r"^set: key 'inter_bandwidth_Bps': 100 B/s"):
        load_machine("abci").with_overrides({"inter_bandwidth_Bps": 100})
    spec = tmp_path / "s.toml"
    spec.write_text(
        'models = ["resnet50"]\nmachines = ["abci"]\nstrategies = ["data"]\n'
        "[axes]\np = [4]\nb = [32]\ninter_bandwidth_Bps = [10, 100, 25e9]\n"
    )
    with pytest.warns(UserWarning) as caught:
        load_spec(spec)
    assert len(caught) == 1, [str(w.message) for w in caught]
    assert "key 'axes.inter_bandwidth_Bps'" in str(caught[0].message)


def test_the_cli_prints_the_warning_as_one_line(tmp_path):
    path = tmp_path / "slow.toml"
    path.write_text(MACHINE.format(flops="125e12", alpha="5e-6", bw="100"))
    args = ("--model", "resnet50", "--machine", str(path), "--strategy", "data", "--p", "8", "--b", "32")
    result = sweep_subprocess("estimate", *args)
    assert result.returncode == 0, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning: "), result.stderr
    assert "inter[0].bandwidth_Bps" in lines[0] and "B/s" in lines[0]


# ----------------------------------------------------------------------------- ignored options


def test_serial_with_more_than_one_gpu_is_an_error(runner):
    args = ["estimate", "--model", "resnet50", "--machine", "abci", "--strategy", "serial", "--b", "32"]
    assert_one_line_error(runner.invoke(cli, [*args, "--p", "8"]), "serial", "--p must be 1, got 8")
    assert runner.invoke(cli, [*args, "--p", "1"]).exit_code == 0


IGNORED = [
    ("data", ("--p2", "8"), "--p2 8 is ignored"),
    ("pipeline", ("--p2", "2"), "--p2 2 is ignored"),
    ("data+filter", ("--S", "4"), "--S 4 is ignored"),
    ("filter", ("--S", "2"), "--S 2 is ignored"),
    ("data", ("--tp", "2"), "--tp 2 is ignored"),
    ("pipeline", ("--recompute", "full"), "--recompute full is ignored"),
    ("data+spatial", ("--micro-batch", "4"), "--micro-batch 4 is ignored"),
]


@pytest.mark.parametrize(("strategy", "option", "message"), IGNORED)
def test_an_option_the_strategy_ignores_warns(strategy, option, message):
    """The library's warning names the parameter (``p2``); the CLI writes its flag (``--p2``)."""
    profile = load_machine("abci")
    name = option[0].lstrip("-").replace("-", "_")
    value = option[1] if name == "recompute" else int(option[1])
    own = {name: value} if name in OWN_AXES else {}
    given = {} if own else {name: value}
    with pytest.warns(
        InputWarning, match="^" + re.escape(message.removeprefix("--").replace("-", "_"))
    ) as got:
        resolve(profile, strategy, 8, 32, own=own, **given)
    assert got[0].message.param == (name,)


@pytest.mark.parametrize(("strategy", "option", "message"), IGNORED)
def test_the_cli_warns_of_an_ignored_option_by_its_flag(runner, strategy, option, message):
    args = ["estimate", "--model", "resnet50", "--machine", "abci", "--strategy", strategy, "--p", "8"]
    with warnings.catch_warnings():
        warnings.simplefilter("always")  # shown as the CLI shows them, not raised
        result = runner.invoke(cli, [*args, "--b", "32", *option])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert len(lines) == 1 and lines[0].startswith(f"warning: {message}"), result.stderr


def test_options_the_strategy_uses_do_not_warn():
    profile = load_machine("abci")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # p1 = 8/2 = 4 groups, B = 32 * 4; pipeline keeps its S
        # (p, b, p2, S, p1, B) as written
        assert tuple(resolve(profile, "data+filter", 8, 32, p2=2))[:6] == (8, 32, 2, 1, 4, 128)
        assert tuple(resolve(profile, "pipeline", 8, 32, S=4))[:6] == (8, 32, 8, 4, 1, 32)
        # defaults: p2 = gpus_per_node = 4 on abci, S = p
        assert tuple(resolve(profile, "data+spatial", 8, 32))[:6] == (8, 32, 4, 1, 2, 64)
        assert tuple(resolve(profile, "pipeline", 8, 32))[:6] == (8, 32, 8, 8, 1, 32)
        assert tuple(resolve(profile, "data", 8, 32))[:6] == (8, 32, 1, 1, 8, 256)


def test_p2_fits():
    assert p2_fits(8, 4) and p2_fits(4, 4) and p2_fits(8, 1)
    assert not p2_fits(2, 4) and not p2_fits(12, 8) and not p2_fits(8, 0)


# ----------------------------------------------------------------------------- hybrids' p2 in sweeps

SWEEP = """
name = "misfits"
models = ["resnet50"]
machines = ["abci"]
strategies = ["data+filter", "data+spatial", "data"]
[axes]
p = [1, 2, 4, 8, 12]
b = [32]
"""


def test_sweep_skips_hybrid_points_whose_p2_does_not_fit(runner, tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text(SWEEP)
    out = tmp_path / "out"
    result = runner.invoke(cli, ["run", str(spec), "-o", str(out), "--chunk", "8"])
    assert result.exit_code == 0, result.output
    table = ds.dataset(out, format="parquet").to_table().to_pylist()
    # abci: p2 = gpus_per_node = 4 divides 4, 8, 12 but not 1 or 2; data takes every p
    for strategy in ("data+filter", "data+spatial"):
        assert sorted(r["p"] for r in table if r["strategy"] == strategy) == [4, 8, 12]
    assert sorted(r["p"] for r in table if r["strategy"] == "data") == [1, 2, 4, 8, 12]
    assert len(table) == 11
    # the summary: compilation apart from evaluation, and evaluation's own speed
    found = re.search(r"compiling ([\d.]+) s, evaluating ([\d.]+) s at ([\d,]+) points/s", result.output)
    assert found, result.output
    assert "after start-up" not in result.output
    wall = float(re.search(r"evaluated in ([\d.]+) s", result.output).group(1))
    # both parts of the run after start-up, so together within the command's own time
    assert float(found.group(1)) + float(found.group(2)) <= wall + 0.01


def test_sweep_summary_figures_add_up(tmp_path):
    from sweep.engine.run import run_sweep
    from sweep.engine.runstate import RunOptions
    from sweep.inputs.grid import plan

    spec = tmp_path / "s.toml"
    spec.write_text(SWEEP)
    summary = run_sweep(plan(load_spec(spec)), RunOptions(out=tmp_path / "out", chunk=8))
    assert summary.timings is not None and summary.compile_s == summary.timings.programs
    # evaluation is the run's time less the main thread's waits for programs
    assert summary.evaluate_s == pytest.approx(summary.seconds - summary.compile_s)
    assert 0 < summary.evaluate_s <= summary.seconds
    assert summary.evaluate_points_per_s >= summary.points_per_s
    assert summary.points == 15  # 3 strategies x 5 values of p
