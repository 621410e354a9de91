"""Every strategy x every command (estimate, evaluate, codesign, sensitivity, validate): each
works, or refuses on purpose with one line and exit status 2 (never a traceback)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from kernels.strategies.registry import REGISTRY
from sweep import api
from sweep.cli.main import cli

GPT = ("gpt-l4-h256-a8-s128", "a100-ib800")  # 4 blocks, 8 heads: tp 2 and pp 2 are legal
CNN = ("resnet50", "abci")
COMMANDS = ("estimate", "evaluate", "codesign", "sensitivity", "validate")


def _setup(strategy: str) -> tuple[tuple[str, str], dict[str, str]]:
    """The model and machine a strategy is asked about, and its configuration as CLI options."""
    if strategy == "data+tensor+pipeline":
        return GPT, {"p": "8", "b": "4", "S": "2", "tp": "2", "pp": "2"}
    p = "1" if strategy == "serial" else "8"
    return CNN, {"p": p, "b": "8", **({"p2": "4"} if REGISTRY[strategy].uses("p2") else {})}


def _flags(options: dict[str, str], skip=()) -> list[str]:
    return [x for k, v in options.items() if k not in skip for x in (f"--{k}", v)]


def _validate_csv(tmp_path, strategy: str, model: str, machine: str, options: dict[str, str]) -> str:
    cols = ["model", "strategy", "machine", *options, "iter_time_s"]
    path = tmp_path / "runs.csv"
    path.write_text(
        ",".join(cols) + "\n" + ",".join([model, strategy, machine, *options.values(), "0.5"]) + "\n"
    )
    return str(path)


def _invoke(command: str, strategy: str, tmp_path):
    (model, machine), options = _setup(strategy)
    runner = CliRunner()
    base = ["--model", model, "--machine", machine, "--strategy", strategy]
    if command == "estimate":
        return runner.invoke(cli, ["estimate", *base, *_flags(options), "--json"])
    if command == "sensitivity":
        return runner.invoke(cli, ["sensitivity", *base, *_flags(options), "--json"])
    if command == "codesign":
        lists = _flags(options, skip=("p",))
        args = ["codesign", *base, "--param", "inter_bandwidth_Bps", "--target", "t_epoch_s <= 1e12"]
        return runner.invoke(cli, [*args, "--p", options["p"], *lists, "--grid", "8", "--json"])
    if command == "validate":
        csv = _validate_csv(tmp_path, strategy, model, machine, options)
        return runner.invoke(cli, ["validate", csv, "--summary"])
    assert command == "evaluate"
    spec = {"name": "matrix", "model": model, "machine": machine, "strategies": [strategy]}
    # only the axes the strategy uses: an axis no strategy of a spec uses is an error (serial has no p)
    spec["axes"] = {k: [int(v)] for k, v in options.items() if REGISTRY[strategy].uses(k)}
    table = api.evaluate(spec)
    return table


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("strategy", list(REGISTRY))
def test_every_strategy_and_command_works_or_refuses_in_one_line(strategy, command, tmp_path):
    out = _invoke(command, strategy, tmp_path)
    if command == "evaluate":  # the library: a table with the strategy's row
        assert out.num_rows == 1 and out.column("strategy").to_pylist() == [strategy]
        return
    assert out.exception is None or isinstance(out.exception, SystemExit), out.output
    if out.exit_code == 2:  # refused on purpose: one line, no traceback
        lines = [x for x in out.output.splitlines() if x.strip()]
        assert len(lines) == 1 and "Traceback" not in out.output, out.output
        assert strategy in REFUSED.get(command, ()), f"{command} refused {strategy}: {out.output}"
        return
    assert out.exit_code == 0, out.output
    assert strategy not in REFUSED.get(command, ())
    if command in ("estimate", "sensitivity"):
        row = json.loads(out.stdout.splitlines()[0])
        assert row["strategy"] == strategy and row["t_epoch_s"] > 0
    elif command == "codesign":
        answer = json.loads(out.stdout)
        assert answer["strategies"] == [strategy] and answer["best"][0]["strategy"] == strategy
    else:
        assert strategy in out.output


#: Commands that refuse a strategy on purpose (none today).
REFUSED: dict[str, tuple[str, ...]] = {}
