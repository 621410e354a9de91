"""The ``sweep`` command line (README.md, docs/queries.md): help texts, ``estimate``, listings, ``plan``, and
one-line errors with exit status 2 for bad input (README.md#errors).

Most commands run in-process through click's ``CliRunner``; a few go through the real
console entry point (``sweep.cli.main``) in a subprocess, which also turns click's own
usage errors into one line.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import jax
import pytest
from click.testing import CliRunner

from sweep.cli.main import cli
from sweep.output import store
from tests.helpers import paradl_dir

#: The output columns (docs/output-format.md#columns), in order, for a configuration without machine overrides.
SPEC_COLUMNS = (
    "model",
    "machine",
    "strategy",
    "p",
    "p1",
    "p2",
    "b",
    "global_batch",
    "S",
    "iterations",
    "t_comp_s",
    "t_comm_s",
    "t_epoch_s",
    "t_iter_s",
    "t_allreduce_s",
    "t_allgather_s",
    "t_halo_s",
    "t_p2p_s",
    "t_alltoall_s",
    "mem_bytes",
    "mem_states_bytes",
    "mem_activations_bytes",
    "feasible",
    "limit_reason",
    "gpu_hours",
    "samples_per_s",
    "tokens_per_s",
    "mfu",
    "params",
    "active_params",
    "flops_per_token",
    "energy_kwh",
    "cost_usd",
)
BUILTIN_MODELS = (
    "alexnet",
    "vgg16",
    "resnet50",
    "resnet152",
    "cosmoflow-128",
    "cosmoflow-256",
    "cosmoflow-512",
    # GPT-3 shapes of Brown et al. 2020, Table 2.1 (sweep/inputs/transformers.py)
    "gpt3-1.3b",
    "gpt3-13b",
    "gpt3-175b",
    # Llama presets (sweep/inputs/presets.py, ../shared/models/PRESETS.md)
    "llama2-7b",
    "llama2-13b",
    "llama2-70b",
    "llama3-8b",
    "llama3-70b",
    "llama3.1-8b",
    "llama3.1-70b",
    "llama3.1-405b",
    # mixtures of experts, latent attention and sliding windows (docs/model.md §17, §18)
    "mixtral-8x7b",
    "mixtral-8x22b",
    "qwen3-30b-a3b",
    "qwen3-235b-a22b",
    "deepseek-v3",
    "gpt-oss-120b",
)
IMAGENET_SAMPLES = 1_281_167
#: Weight elements of the built-in ResNet-50: torchvision's 25,557,032 without the
#: 2 * 26,560 batch-norm parameters and the 1,000 fc biases.
RESNET50_WEIGHTS = 25_557_032 - 2 * 26_560 - 1_000
ESTIMATE = ("estimate", "--model", "resnet50", "--machine", "abci", "--strategy", "data")
DATA_1024 = (*ESTIMATE, "--p", "1024", "--b", "32")
PARADL = paradl_dir()
RESNET_NET = str(PARADL / "RESNET50_ImageNet_profall.net_sc") if PARADL else ""


@pytest.fixture
def runner(monkeypatch) -> CliRunner:
    # no persistent XLA cache in the user's home from in-process runs
    monkeypatch.setenv("SWEEP_JAX_CACHE", "")
    return CliRunner()


def invoke(runner: CliRunner, *args: str):
    return runner.invoke(cli, list(args))


def assert_one_line_error(result, *needles: str) -> str:
    """Exit status 2, one ``error: ...`` line on stderr naming ``needles``, no traceback."""
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert isinstance(result.exception, SystemExit), result.exception
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error:"), lines[0]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert "Traceback" not in result.output
    assert result.stdout == ""
    return lines[0]


def sweep_subprocess(*args: str, console_script: bool = False, timeout: float = 120):
    """Run the real entry point: the installed ``sweep`` script or ``python -m sweep.cli``."""
    script = Path(sys.executable).with_name("sweep")
    if console_script and script.exists():
        cmd = [str(script), *args]
    else:
        cmd = [sys.executable, "-m", "sweep.cli", *args]
    env = {**os.environ, "SWEEP_JAX_CACHE": ""}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, check=False)


# ----------------------------------------------------------------------------- help


@pytest.mark.parametrize("command", sorted(cli.commands))
def test_every_command_help_has_an_example(runner, command):
    result = invoke(runner, command, "--help")
    assert result.exit_code == 0, result.output
    assert "Example" in result.output


def test_group_help_has_an_example_and_lists_commands(runner):
    result = invoke(runner, "--help")
    assert result.exit_code == 0
    assert "Example" in result.output
    for command in cli.commands:
        assert command in result.output


def test_the_required_commands_exist():
    assert {"run", "estimate", "plan", "models", "machines"} <= set(cli.commands)


# ----------------------------------------------------------------------------- estimate


def estimate_json(runner, *args: str) -> dict:
    result = invoke(runner, *args, "--json")
    assert result.exit_code == 0, (result.output, result.exception)
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1, "--json prints one object on one line"
    row = json.loads(lines[0])
    assert isinstance(row, dict)
    return row


def test_estimate_json_has_every_column_and_consistent_totals(runner):
    row = estimate_json(runner, *DATA_1024)
    assert set(row) == set(SPEC_COLUMNS)
    assert (row["model"], row["machine"], row["strategy"]) == ("resnet50", "abci", "data")
    assert (row["p"], row["p1"], row["p2"], row["b"], row["global_batch"]) == (1024, 1024, 1, 32, 32 * 1024)
    for name in ("p", "p1", "p2", "b", "global_batch", "S", "iterations"):
        assert isinstance(row[name], int), name
    assert row["iterations"] == math.ceil(IMAGENET_SAMPLES / (32 * 1024)) == 40
    assert row["t_epoch_s"] == pytest.approx(row["t_comp_s"] + row["t_comm_s"], rel=1e-12)
    assert row["t_iter_s"] == pytest.approx(row["t_epoch_s"] / row["iterations"], rel=1e-12)
    assert row["gpu_hours"] == pytest.approx(row["p"] * row["t_epoch_s"] / 3600, rel=1e-12)
    parts = (
        row["t_allreduce_s"] + row["t_allgather_s"] + row["t_halo_s"] + row["t_p2p_s"] + row["t_alltoall_s"]
    )
    assert row["t_comm_s"] == pytest.approx(parts, rel=1e-12)
    # data parallelism communicates by allreduce only
    assert row["t_allgather_s"] == row["t_halo_s"] == row["t_p2p_s"] == row["t_alltoall_s"] == 0
    assert row["feasible"] is True
    assert row["limit_reason"] is None
    assert row["t_comp_s"] > 0
    assert row["mem_bytes"] > 0


def ring_allreduce_epoch_s(p: int, b: int, bandwidth_Bps: float) -> float:
    """Data parallelism on ABCI by hand: I * 2(p-1)(alpha + W*beta/p) (docs/model.md §7 and §10.2).

    1024 GPUs = 256 nodes, beyond one rack (34 nodes): abci's third inter level,
    alpha = 40.98 us.
    """
    iterations = math.ceil(IMAGENET_SAMPLES / (b * p))
    alpha_s = 40.98e-6
    w_bytes = 4 * RESNET50_WEIGHTS
    return iterations * 2 * (p - 1) * (alpha_s + w_bytes / bandwidth_Bps / p)


def test_builtin_resnet50_weight_count():
    from sweep.inputs.models import load_model

    assert load_model("resnet50").describe()["weights"] == RESNET50_WEIGHTS == 25_502_912


def test_estimate_data_parallel_allreduce_by_hand(runner):
    row = estimate_json(runner, *DATA_1024)
    assert row["t_allreduce_s"] == pytest.approx(ring_allreduce_epoch_s(1024, 32, 12.5e9), rel=1e-9)
    assert row["t_comm_s"] == pytest.approx(row["t_allreduce_s"], rel=1e-12)


def test_estimate_set_adds_the_column_and_lowers_comm(runner):
    base = estimate_json(runner, *DATA_1024)
    faster = estimate_json(runner, *DATA_1024, "--set", "inter_bandwidth_Bps=25e9")
    assert set(faster) == set(SPEC_COLUMNS) | {"inter_bandwidth_Bps"}
    assert faster["inter_bandwidth_Bps"] == 25e9
    assert "inter_bandwidth_Bps" not in base
    assert faster["t_comm_s"] < base["t_comm_s"]
    assert faster["t_comp_s"] == base["t_comp_s"]
    assert faster["t_allreduce_s"] == pytest.approx(ring_allreduce_epoch_s(1024, 32, 25e9), rel=1e-9)
    assert faster["t_epoch_s"] == pytest.approx(faster["t_comp_s"] + faster["t_comm_s"], rel=1e-12)


def test_estimate_readable_prints_the_same_keys(runner):
    as_json = estimate_json(runner, *DATA_1024)
    result = invoke(runner, *DATA_1024)
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    keys = [line.split()[0] for line in lines]
    assert keys == list(as_json)
    values = {line.split()[0]: line.split(None, 1)[1].strip() for line in lines}
    assert values["strategy"] == "data"
    assert values["p"].replace(",", "") == "1024"
    assert float(values["t_epoch_s"]) == pytest.approx(as_json["t_epoch_s"], rel=1e-5)


@pytest.mark.parametrize("strategy", ["data+filter", "data+spatial"])
def test_estimate_hybrid_defaults_p2_to_gpus_per_node(runner, strategy):
    row = estimate_json(
        runner, "estimate", "--model", "resnet50", "--machine", "abci", "--strategy", strategy,
        "--p", "64", "--b", "32",
    )  # fmt: skip
    assert (row["p"], row["p1"], row["p2"], row["global_batch"]) == (64, 16, 4, 32 * 16)


def test_estimate_paradl_net_file(runner):
    if not RESNET_NET:
        pytest.skip("ParaDL example files not found")
    row = estimate_json(
        runner, "estimate", "--model", RESNET_NET, "--machine", "abci", "--strategy", "data",
        "--p", "16", "--b", "32",
    )  # fmt: skip
    assert row["model"] == "ResNet50"
    assert row["t_epoch_s"] > 0


# ----------------------------------------------------------------------------- bad input


def _write(path: Path, text: str, write: bool = True) -> str:
    if write:
        path.write_text(text)
    return str(path)


GOOD_NET = "Dataset|Tiny\nInput|100x3x8x8\nModel|tiny\nCONV_1|3x8x8|3x4x3x3|4x8x8|0.001\n"


def _bad_input_cases(tmp: Path, write: bool = True) -> dict[str, tuple[list[str], tuple[str, ...]]]:
    """name -> (estimate arguments, substrings the error line must contain); files go in ``tmp``."""
    rest = ["--machine", "abci", "--strategy", "data", "--p", "4", "--b", "32"]
    missing = str(tmp / "missing.net")
    bad_machine = _write(tmp / "bad-machine.toml", 'name = "x"\ngpu_flops = \n', write)
    wrong_fields = _write(tmp / "fields.net", GOOD_NET + "RELU_1|4x8x8|4x4x0x0\n", write)
    not_numeric = _write(tmp / "dims.net", GOOD_NET + "RELU_1|4x8x8|4x4x0x0|4xeightx8|0\n", write)
    short_lc = _write(tmp / "short.lc", "0 CONV_1 |1\n1 BNORM |0\n2 RELU |0\n", write)
    model = ["--model", "resnet50"]
    return {
        "missing model file": (["--model", missing, *rest], (missing,)),
        "unknown built-in model": (["--model", "resnet51", *rest], ("resnet51",)),
        "unknown machine": (
            [*model, "--machine", "abcd", "--strategy", "data", "--p", "4", "--b", "32"],
            ("abcd",),
        ),
        "unknown strategy": (
            [*model, "--machine", "abci", "--strategy", "dota", "--p", "4", "--b", "32"],
            ("dota",),
        ),
        "p = 0": ([*model, "--machine", "abci", "--strategy", "data", "--p", "0", "--b", "32"], ("--p",)),
        "b = 0": ([*model, "--machine", "abci", "--strategy", "data", "--p", "4", "--b", "0"], ("--b",)),
        "unknown --set key": ([*model, *rest, "--set", "bogus=1"], ("bogus",)),
        "zero bandwidth": ([*model, *rest, "--set", "inter_bandwidth_Bps=0"], ("inter_bandwidth_Bps",)),
        "negative bandwidth": (
            [*model, *rest, "--set", "intra_bandwidth_Bps=-1e9"],
            ("intra_bandwidth_Bps",),
        ),
        "efficiency over 1": ([*model, *rest, "--set", "efficiency=2"], ("efficiency",)),
        "--set without =": ([*model, *rest, "--set", "efficiency"], ("efficiency",)),
        "malformed machine TOML": (
            [*model, "--machine", bad_machine, "--strategy", "data", "--p", "4", "--b", "32"],
            (f"{bad_machine}:2",),
        ),
        ".net line with wrong field count": (["--model", wrong_fields, *rest], (f"{wrong_fields}:5",)),
        ".net non-numeric dimension": (["--model", not_numeric, *rest], (f"{not_numeric}:5", "eight")),
        ".lc with the wrong number of lines": (
            ["--model", RESNET_NET, "--lc", short_lc, *rest],
            (short_lc, "3"),
        ),
    }


BAD_INPUT_NAMES = list(_bad_input_cases(Path("."), write=False))


@pytest.mark.parametrize("case", BAD_INPUT_NAMES)
def test_estimate_bad_input_is_one_line_exit_2(runner, tmp_path, case):
    args, needles = _bad_input_cases(tmp_path)[case]
    if "--lc" in args and not RESNET_NET:
        pytest.skip("ParaDL example files not found")
    assert_one_line_error(invoke(runner, "estimate", *args, "--json"), *needles)


GPT3 = ("--model", "gpt3-175b", "--strategy", "data+tensor+pipeline", "--global-batch", "1536")


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        # GPT-3 175B has 96 heads
        (("--p", "1024", "--tp", "5"), ("--tp 5 does not divide the model's 96 key/value heads", "(heads)")),
        (
            ("--p", "1000", "--tp", "8", "--pp", "16"),
            ("--tp x --pp = 128 does not divide --p 1000", "(divides)"),
        ),
        (
            ("--p", "1024", "--tp", "8", "--pp", "16", "--precision", "fp8"),
            ("--precision fp8", "(precision)"),
        ),
        # 1,536 over 1024 / (8 x 16) = 8 replicas is 192 per replica: micro-batches of 5 do not divide it
        (
            ("--p", "1024", "--tp", "8", "--pp", "16", "--micro-batch", "5"),
            ("--global-batch 1536", "(batch)"),
        ),
        (("--p", "1024", "--tp", "8", "--vp", "2"), ("--vp 2 needs --pp > 1", "(schedule)")),
    ],
)
def test_estimate_refuses_a_configuration_that_cannot_run(runner, args, needles):
    """Issue 38, defects 3 and 7: the newcomer's impossible configurations on selene (an A100, no
    FP8 rate) are one-line errors, exit 2, naming the rule and the parameter, not rows."""
    assert_one_line_error(invoke(runner, "estimate", *GPT3, "--machine", "selene", *args), *needles)


def test_console_script_usage_error_is_one_line():
    """click's own usage errors (a missing option, a non-integer) also end in one line, exit 2."""
    proc = sweep_subprocess(*ESTIMATE, "--p", "many", "--b", "32", console_script=True)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), proc.stderr
    assert "--p" in lines[0]
    assert "Traceback" not in proc.stderr + proc.stdout


def test_console_script_input_error_and_success(tmp_path):
    bad = _write(tmp_path / "dims.net", GOOD_NET + "RELU_1|4x8x8|4x4x0x0|4xeightx8|0\n")
    proc = sweep_subprocess("estimate", "--model", bad, "--machine", "abci", "--strategy", "data",
                            "--p", "4", "--b", "32")  # fmt: skip
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {bad}:5"), proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    proc = sweep_subprocess(*DATA_1024, "--json")
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)
    assert set(row) == set(SPEC_COLUMNS)
    assert row["t_allreduce_s"] == pytest.approx(ring_allreduce_epoch_s(1024, 32, 12.5e9), rel=1e-9)


# ----------------------------------------------------------------------------- listings


def test_models_lists_the_builtins(runner):
    result = invoke(runner, "models")
    assert result.exit_code == 0, result.output
    names = [line.split()[0] for line in result.stdout.strip().splitlines()[1:]]
    assert names == list(BUILTIN_MODELS)
    row = next(line for line in result.stdout.splitlines() if line.startswith("resnet50 "))
    assert f"{RESNET50_WEIGHTS:,}" in row


def test_machines_lists_the_builtins(runner):
    result = invoke(runner, "machines")
    assert result.exit_code == 0, result.output
    names = [line.split()[0] for line in result.stdout.strip().splitlines()]
    assert "abci" in names
    assert {"dgx-a100", "dgx-h100", "dgx-h200"} <= set(names)


# ----------------------------------------------------------------------------- plan and specs

SPEC_HEAD = 'name = "tiny"\nmodel = "resnet50"\nmachine = "abci"\n'


def test_plan_prints_per_strategy_sizes(runner, tmp_path):
    spec = _write(
        tmp_path / "plan.toml",
        SPEC_HEAD
        + 'strategies = ["serial", "data", "pipeline", "data+filter"]\n'
        + "[axes]\np = { log2 = [0, 6] }\nb = [16, 32, 64]\np2 = [2, 4]\nS = [1, 2, 4, 8, 16]\n"
        + "inter_bandwidth_Bps = { linspace = [10e9, 40e9, 4] }\n",
    )
    result = invoke(runner, "plan", spec)
    assert result.exit_code == 0, result.output
    n_p, n_b, n_p2, n_s, n_bw = 7, 3, 2, 5, 4
    expected = {
        "serial": n_b * n_bw,
        "data": n_p * n_b * n_bw,
        "pipeline": n_p * n_b * n_s * n_bw,
        "data+filter": n_p * n_b * n_p2 * n_bw,
    }
    sizes = {}
    for line in result.stdout.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[2] in expected:
            size = int(fields[3].replace(",", ""))
            axes = [int(n) for n in re.findall(r"\[(\d+)\]", line)]
            assert size == math.prod(axes), line
            sizes[fields[2]] = size
    assert sizes == expected
    assert f"{sum(expected.values()):,} points" in result.stdout
    # 12 + 84 + 420 + 168 = 684 points: 684 / 8e6 rows/s = 0.09 ms
    assert "~0.0 s writing every row" in result.stdout
    assert "compiles 4 kernel(s)" in result.stdout


def _bad_specs() -> dict[str, tuple[str, tuple[str, ...]]]:
    """name -> (spec text, substrings the error line must contain)."""
    axes = "[axes]\np = [4]\nb = [32]\n"
    data = 'strategies = ["data"]\n'
    big = "\n".join(
        f"{k} = {{ linspace = [1e9, 2e9, 1000] }}"
        for k in ("inter_bandwidth_Bps", "intra_bandwidth_Bps", "gpu_mem_bw_Bps", "gpu_flops")
    )
    return {
        "unknown axis": (SPEC_HEAD + data + axes + "bogus_axis = [1, 2]\n", ("axes.bogus_axis",)),
        "empty axis": (SPEC_HEAD + data + "[axes]\np = []\nb = [32]\n", ("axes.p",)),
        "wrong axis type": (SPEC_HEAD + data + '[axes]\np = ["a"]\nb = [32]\n', ("axes.p",)),
        "zero p": (SPEC_HEAD + data + "[axes]\np = [0, 4]\nb = [32]\n", ("axes.p",)),
        "zero bandwidth axis": (
            SPEC_HEAD + data + axes + "inter_bandwidth_Bps = [0.0, 1e9]\n",
            ("inter_bandwidth_Bps",),
        ),
        "unknown strategy": (SPEC_HEAD + 'strategies = ["data", "dota"]\n' + axes, ("strategies", "dota")),
        "missing b axis": (SPEC_HEAD + data + "[axes]\np = [4]\n", ("axes.b",)),
        "unknown top-level key": ("colour = 1\n" + SPEC_HEAD + data + axes, ("colour",)),
        "unknown machine parameter in set": (SPEC_HEAD + data + axes + "[set]\nbogus = 1\n", ("bogus",)),
        "malformed TOML": (SPEC_HEAD + data + "[axes\np = [4]\nb = [32]\n", (":5",)),
        # ranges too long are refused before their values are built (1e12 values took 13 GB)
        "range of 1e12 values": (
            SPEC_HEAD + data + "[axes]\np = [4]\nb = { start = 1, stop = 1e12 }\n",
            ("axes.b", "1,000,000,000,000 values, more than 4,194,304"),
        ),
        "linspace of 1e9 values": (
            SPEC_HEAD + data + axes + "inter_alpha_s = { linspace = [1e-6, 2e-6, 1000000000] }\n",
            ("axes.inter_alpha_s", "1,000,000,000 values"),
        ),
        "range whose length overflows": (
            SPEC_HEAD + data + axes + "inter_alpha_s = { start = -1e308, stop = 1e308, step = 1e-308 }\n",
            ("axes.inter_alpha_s", "inf values"),
        ),
        "log2 exponent past float64": (
            SPEC_HEAD + data + "[axes]\np = { log2 = [0, 30000000] }\nb = [32]\n",
            ("axes.p", "-1074..1023"),
        ),
        "infinite batch": (SPEC_HEAD + data + "[axes]\np = [4]\nb = [inf]\n", ("axes.b", "got inf")),
        "infinite range end": (
            SPEC_HEAD + data + "[axes]\np = [4]\nb = { start = 1, stop = inf }\n",
            ("axes.b", "finite"),
        ),
        "over 10^12 points without --yes": (
            SPEC_HEAD + data + "[axes]\np = { start = 1, stop = 1000 }\nb = [32]\n" + big + "\n",
            ("--yes",),
        ),
    }


BAD_SPEC_NAMES = list(_bad_specs())


@pytest.mark.parametrize("case", BAD_SPEC_NAMES)
def test_run_bad_spec_is_one_line_exit_2(runner, tmp_path, case):
    text, needles = _bad_specs()[case]
    spec = _write(tmp_path / "bad.toml", text)
    out = tmp_path / "out"
    result = invoke(runner, "run", spec, "-o", str(out), "--chunk", "64")
    line = assert_one_line_error(result, *needles)
    if case != "over 10^12 points without --yes":
        assert spec in line
    assert not out.exists() or not any(out.iterdir()), "nothing is written for a bad spec"


@pytest.mark.parametrize("case", [c for c in BAD_SPEC_NAMES if "10^12" not in c])
def test_plan_bad_spec_is_one_line_exit_2(runner, tmp_path, case):
    text, needles = _bad_specs()[case]
    spec = _write(tmp_path / "bad.toml", text)
    assert_one_line_error(invoke(runner, "plan", spec), spec, *needles)


def test_plan_of_a_missing_spec(runner, tmp_path):
    missing = str(tmp_path / "nope.toml")
    assert_one_line_error(invoke(runner, "plan", missing), missing)


@pytest.mark.parametrize(
    ("option", "needle"),
    [
        (("--keep", "bogus"), "bogus"),
        (("--keep", "top:x:t_epoch_s"), "x"),
        (("--keep", "pareto:nope"), "nope"),
        (("--keep", "top:0:t_epoch_s"), "K"),
        (("--keep", "top:1048577:t_epoch_s"), "K must be <= 1,048,576, got 1,048,577"),
        (("--columns", "nope"), "nope"),
        (("--columns", "p,nope"), "nope"),
        (("--chunk", "0"), "--chunk"),
        (("--columns", ",,,"), "--columns names no column"),
        (("--columns", ""), "--columns names no column"),
        (("--resume", "--overwrite"), "not both"),
    ],
)
def test_run_bad_options_are_one_line_exit_2(runner, tmp_path, option, needle):
    spec = _write(tmp_path / "ok.toml", SPEC_HEAD + 'strategies = ["data"]\n[axes]\np = [4]\nb = [32]\n')
    out = tmp_path / "out"
    result = invoke(runner, "run", spec, "-o", str(out), *option)
    assert_one_line_error(result, needle)
    assert not out.exists() or not any(out.iterdir()), "nothing is written for bad options"


def test_estimate_hybrid_p2_not_dividing_p(runner):
    args = ("estimate", "--model", "resnet50", "--machine", "abci", "--strategy", "data+filter")
    result = invoke(runner, *args, "--p", "6", "--b", "8", "--p2", "4", "--json")
    assert result.exit_code == 2
    assert_one_line_error(result, "p2")
    # the default p2 (gpus_per_node = 4 on abci) must divide p as well
    result = invoke(runner, *args, "--p", "2", "--b", "8", "--json")
    assert result.exit_code == 2
    assert_one_line_error(result, "p2")


def test_plan_resolves_relative_paths_against_the_spec_folder(runner, tmp_path, monkeypatch):
    folder = tmp_path / "specs"
    (folder / "nets").mkdir(parents=True)
    _write(folder / "nets" / "tiny.net", GOOD_NET)
    _write(
        folder / "rel.toml",
        'name = "rel"\nmodel = "nets/tiny.net"\nmachine = "abci"\nstrategies = ["data"]\n'
        "[axes]\np = [1, 2]\nb = [4]\n",
    )
    monkeypatch.chdir(tmp_path)
    result = invoke(runner, "plan", "specs/rel.toml")
    assert result.exit_code == 0, result.output
    assert "tiny" in result.stdout
    assert "2 points" in result.stdout


def test_plan_of_a_shipped_sweep_by_name(runner):
    result = invoke(runner, "plan", "paper-resnet50-vgg16")
    assert result.exit_code == 0, result.output
    assert "728 points" in result.stdout


def test_run_writes_to_outputs_spec_name_by_default(runner, tmp_path, monkeypatch):
    spec = _write(tmp_path / "one.toml", SPEC_HEAD + 'strategies = ["serial"]\n[axes]\nb = [16, 32]\n')
    monkeypatch.chdir(tmp_path)
    result = invoke(runner, "run", spec, "--chunk", "8")
    assert result.exit_code == 0, result.output
    assert "2 rows written" in result.stdout
    # where it ran: a CUDA jaxlib that fell back to the CPU shows here
    platform = jax.default_backend()
    assert f"; on {len(jax.local_devices())} {platform}" in result.stdout
    folder = tmp_path / "outputs" / "tiny"
    assert (folder / "_manifest.parquet").is_file()
    devices = store.read_manifest(folder)["devices"]
    assert devices.startswith(f"{len(jax.local_devices())} {platform}")
    assert len(list(folder.glob("part-*.parquet"))) == 1


def test_describe_devices_names_accelerators_and_counts():
    class Device:
        def __init__(self, platform, kind):
            self.platform, self.device_kind = platform, kind

    from sweep.engine.devices import describe_devices

    assert describe_devices([Device("cpu", "cpu")] * 2) == "2 cpu"
    h200 = Device("gpu", "NVIDIA H200")
    assert describe_devices([h200, h200]) == "2 gpu (NVIDIA H200)"
    assert (
        describe_devices([h200, Device("gpu", "NVIDIA H100")]) == "1 gpu (NVIDIA H200), 1 gpu (NVIDIA H100)"
    )


def test_run_into_a_folder_that_cannot_be_made_is_one_line(runner, tmp_path):
    spec = _write(tmp_path / "ok.toml", SPEC_HEAD + 'strategies = ["data"]\n[axes]\np = [4]\nb = [32]\n')
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a folder\n")
    out = blocker / "out"
    result = invoke(runner, "run", spec, "-o", str(out))
    assert_one_line_error(result, str(out), "cannot write in the output folder: Not a directory")
    assert blocker.read_text() == "a file, not a folder\n"


NOT_UTF8 = b"\x7fELF\x02\x01\x01\x00" + bytes(
    range(0xC0, 0x100)
)  # the start of a binary, then bytes UTF-8 rejects


@pytest.mark.parametrize(
    ("name", "command"),
    [
        ("spec.toml", ("plan", "{f}")),
        (
            "model.toml",
            ("estimate", "--model", "{f}", "--machine", "abci", "--strategy", "data", "--p", "4", "--b", "8"),
        ),
        (
            "model.net",
            ("estimate", "--model", "{f}", "--machine", "abci", "--strategy", "data", "--p", "4", "--b", "8"),
        ),
        (
            "box.toml",
            (
                "estimate",
                "--model",
                "resnet50",
                "--machine",
                "{f}",
                "--strategy",
                "data",
                "--p",
                "4",
                "--b",
                "8",
            ),
        ),
        ("runs.csv", ("validate", "{f}")),
    ],
)
def test_a_binary_input_file_is_one_line(runner, tmp_path, name, command):
    """A file that is not UTF-8 text (a binary given by mistake) names itself; no UnicodeDecodeError."""
    f = tmp_path / name
    f.write_bytes(NOT_UTF8)
    result = invoke(runner, *(a.format(f=f) for a in command))
    assert_one_line_error(result, str(f), "not UTF-8 text (byte 8)")


def test_a_binary_layer_config_is_one_line(runner, tmp_path):
    if PARADL is None:
        pytest.skip("ParaDL example files not found")
    lc = tmp_path / "bad.lc"
    lc.write_bytes(NOT_UTF8)
    args = ("--machine", "abci", "--strategy", "data", "--p", "4", "--b", "8")
    result = invoke(runner, "estimate", "--model", RESNET_NET, "--lc", str(lc), *args)
    assert_one_line_error(result, str(lc), "not UTF-8 text")


def test_files_with_a_byte_order_mark_are_read(runner, tmp_path):
    """Windows editors and spreadsheet exports start UTF-8 files with a BOM: read as if it were not there."""
    bom = "\ufeff"
    spec = tmp_path / "bom.toml"
    spec.write_text(
        bom + SPEC_HEAD + 'strategies = ["data"]\n[axes]\np = [4, 8]\nb = [32]\n', encoding="utf-8"
    )
    result = invoke(runner, "plan", str(spec))
    assert result.exit_code == 0, result.output
    assert "p[2] x b[1]" in result.stdout
    runs = tmp_path / "runs.csv"
    runs.write_text(
        bom + "model,strategy,p,b,p2,machine,iter_time_s\nresnet50,data,8,32,4,abci,0.1\n", encoding="utf-8"
    )
    result = invoke(runner, "validate", str(runs))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1].split()[:3] == ["all", "all", "1"]
