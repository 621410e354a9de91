"""Elasticities by autodiff (sweep.sensitivity): jax.grad agrees with central differences,
obeys the model's scaling law, and works per configuration, per sweep row and on the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from click.testing import CliRunner

from kernels import Config
from sweep.answers.sensitivity import (
    PARAMS,
    SKIPPED,
    format_sensitivity,
    metric_fn,
    sensitivities,
    sensitivity,
)
from sweep.cli.main import cli
from sweep.errors import InputError
from sweep.inputs.configs import Bound
from sweep.inputs.machines import load_machine
from sweep.inputs.models import load_model
from tests.answers.query_data import small_sweep


@pytest.fixture(scope="module")
def bound() -> Bound:
    return Bound.of(load_model("resnet50"), load_machine("abci"))


def _f64(tree):
    return jax.tree_util.tree_map(lambda a: jnp.asarray(a, jnp.float64), tree)


# configurations away from the model's kinks (NIC sharing, level changes)
CONFIGS = [
    ("data+filter", 1024, 32, 4, 1024),
    ("data", 64, 32, 4, 64),
    ("spatial", 4, 32, 4, 4),
    ("pipeline", 8, 32, 4, 4),
]


@pytest.mark.parametrize(("strategy", "p", "b", "p2", "S"), CONFIGS, ids=[c[0] for c in CONFIGS])
def test_grad_agrees_with_central_differences(bound, strategy, p, b, p2, S):
    table = sensitivity(bound, strategy, p, b, p2, S)
    row = table.to_pylist()[0]
    h = jax.jit(metric_fn(strategy, ()))
    args = (
        _f64(bound.net),
        _f64(bound.profile.pytree(np.float64)),
        Config(*(jnp.float64(v) for v in (p, b, p2, S))),
        (),
    )
    t0 = float(h(jnp.zeros(len(PARAMS)), *args))
    assert t0 == pytest.approx(row["t_epoch_s"], rel=1e-12)
    eps = 1e-5
    steps = np.eye(len(PARAMS)) * eps
    plus = jax.vmap(lambda s: h(s, *args))(jnp.asarray(steps))
    minus = jax.vmap(lambda s: h(s, *args))(jnp.asarray(-steps))
    fd = (np.asarray(plus) - np.asarray(minus)) / (2 * eps * t0)
    for i, name in enumerate(PARAMS):
        assert row[f"e_{name}"] == pytest.approx(fd[i], abs=1e-4), name


# within one leaf switch (<= 17 nodes): deeper levels add latency that inter_alpha_s does not scale
LAW_CONFIGS = [("data+filter", 64, 32, 4, 64), *CONFIGS[1:]]


@pytest.mark.parametrize(("strategy", "p", "b", "p2", "S"), LAW_CONFIGS, ids=[c[0] for c in LAW_CONFIGS])
def test_time_scaling_law(bound, strategy, p, b, p2, S):
    """Every term is work / rate + messages * latency: faster rates and shorter latencies by a factor
    c make the epoch c times shorter, so (Euler) the rate elasticities minus the latency ones sum to -1."""
    row = sensitivity(bound, strategy, p, b, p2, S).to_pylist()[0]
    rates = ("gpu_flops", "gpu_mem_bw_Bps", "intra_bandwidth_Bps", "inter_bandwidth_Bps")
    latencies = ("intra_alpha_s", "inter_alpha_s")
    total = sum(row[f"e_{k}"] for k in rates) - sum(row[f"e_{k}"] for k in latencies)
    assert total == pytest.approx(-1.0, abs=1e-9)
    assert row["e_efficiency"] == pytest.approx(row["e_gpu_flops"], rel=1e-12)
    assert row["e_gpu_mem_bytes"] == 0.0
    assert row["e_wu_passes"] == pytest.approx(-row["e_gpu_mem_bw_Bps"], rel=1e-12)


def test_report_names_the_lever_and_the_skipped(bound):
    table = sensitivity(bound, "data", 1024, 32)
    row = table.to_pylist()[0]
    assert set(SKIPPED) == {
        "gpus_per_node", "nics_per_node", "allreduce_algo", "memory_model",
        # GEMM-shape integers, 0/1 switches and a choice: no derivative (docs/model.md §16)
        "gpu_sms", "gemm_tile_m", "gemm_tile_n", "scatter_gather", "overlap_grad_reduce", "attention",
        "selective_recompute",
    }  # fmt: skip
    assert not any(f"e_{k}" in table.column_names for k in SKIPPED)
    magnitudes = {k: abs(row[f"e_{k}"]) for k in PARAMS}
    assert row["lever"] == max(magnitudes, key=lambda k: magnitudes[k])
    text = format_sensitivity(table)
    assert "not differentiated: gpus_per_node (integer-valued)" in text
    assert f"pays off most: {row['lever']}" in text
    with pytest.raises(InputError, match="unknown metric"):
        sensitivity(bound, "data", 8, 32, metric="mem")
    # the library names the parameter; the CLI writes its flag (--p)
    with pytest.raises(InputError, match=r"^p must be a whole number >= 1") as err:
        sensitivity(bound, "data", 0, 32)
    assert err.value.param == ("p",)


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    return small_sweep(tmp_path_factory)


def test_every_row_of_a_sweep(small, bound):
    table = sensitivities(small, where="p >= 16 and b == 32")
    assert table.num_rows == 2 * 3 * 3  # strategies x p x bandwidths
    bws = sorted(set(table.column("inter_bandwidth_Bps").to_pylist()))
    assert bws == [12.5e9, 25e9, 50e9]
    rows = {(r["strategy"], r["p"], r["inter_bandwidth_Bps"]): r for r in table.to_pylist()}
    direct = sensitivity(bound, "data", 32, 32).to_pylist()[0]  # abci's own 12.5 GB/s
    got = rows[("data", 32, 12.5e9)]
    for k in PARAMS:
        assert got[f"e_{k}"] == pytest.approx(direct[f"e_{k}"], rel=1e-6, abs=1e-7), k
    with pytest.raises(InputError, match="at most 5"):
        sensitivities(small, max_rows=5)


def test_cli_sensitivity(small, tmp_path):
    runner = CliRunner()
    one = [
        "sensitivity",
        "--model",
        "resnet50",
        "--machine",
        "abci",
        "--strategy",
        "data",
        "--p",
        "64",
        "--b",
        "32",
    ]
    r = runner.invoke(cli, [*one, "--json"])
    assert r.exit_code == 0, r.output
    row = json.loads(r.stdout)
    assert row["lever"] in PARAMS and "e_gpu_flops" in row
    r = runner.invoke(cli, ["sensitivity", str(small), "--where", "p == 64", "-o", str(tmp_path / "e.csv")])
    assert r.exit_code == 0, r.output
    assert len((tmp_path / "e.csv").read_text().splitlines()) == 1 + 2 * 2 * 3
    r = runner.invoke(cli, ["sensitivity", "--model", "resnet50"])
    assert r.exit_code == 2 and r.stderr.startswith("error: give DIR or a configuration")
    r = runner.invoke(cli, ["sensitivity", str(small), "--model", "resnet50"])
    assert r.exit_code == 2 and "not both" in r.stderr


def test_calibrated_overheads_count_as_in_estimate():
    """A profile's [overheads] reach the sensitivity metric exactly as they reach estimate."""
    import dataclasses

    from sweep.engine.evaluate import estimate

    jax.config.update("jax_enable_x64", True)
    calibrated = dataclasses.replace(
        load_machine("abci"), overheads={"data": {"compute": 2.0, "allreduce": 3.0, "per_sample_s": 1e-3}}
    )
    b = Bound.of(load_model("resnet50"), calibrated)
    want = estimate(b, "data", 64, 32)["t_epoch_s"]
    plain = estimate(Bound.of(load_model("resnet50"), load_machine("abci")), "data", 64, 32)["t_epoch_s"]
    assert want > 2 * plain  # the overheads do change the answer
    got = sensitivity(b, "data", 64, 32).column("t_epoch_s")[0].as_py()
    assert got == pytest.approx(want, rel=1e-12)
