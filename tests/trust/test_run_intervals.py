"""``sweep run --interval LEVEL`` (sweep.trust.annotate, sweep.trust.intervals.RowIntervals): every
written row's ``t_epoch_s_lo`` / ``t_epoch_s_hi``, by hand for a posterior of known covariance.

The calibrated machine is ``abci`` with a ``[calibration]`` table written by hand: a factor on
every allreduce and a factor on data's compute (and, for :class:`RowIntervals` against ``sweep
estimate``, the inter-node bandwidth). For a row of data parallelism,
``t_epoch = o_comp T_comp + o_ar T_ar`` (docs/model.md §13: data's only communication is its
allreduce), so ``d log t / d log o_ar = t_allreduce_s / t_epoch_s`` and
``d log t / d log o_comp = t_comp_s / t_epoch_s`` at ``o = 1``: both read off the row.
"""

from __future__ import annotations

import json
import math
import tomllib

import numpy as np
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from sweep import api
from sweep.cli.main import cli
from sweep.engine import backend
from sweep.errors import InputError
from sweep.inputs.configs import Bound
from sweep.inputs.machine_toml import to_toml
from sweep.inputs.machines import load_machine, parse_machine
from sweep.inputs.models import load_model
from sweep.trust import annotate
from sweep.trust.intervals import RowIntervals, estimate_interval

COV = [[0.04, 0.01, 0.0], [0.01, 0.09, 0.0], [0.0, 0.0, 0.25]]
SPREAD = 0.1
#: Standard normal quantiles: z_0.9 and z_0.975 (tables).
Z80, Z95 = 1.2815515655446004, 1.959963984540054
SPEC = """
name = "iv"
model = "resnet50"
machine = "{machine}"
strategies = ["data", "data+filter"]
[axes]
p = [4, 8, 64]
b = [32, 64]
inter_bandwidth_Bps = [10e9, 20e9]
"""
#: The columns this spec wrote before --interval existed (docs/output-format.md#columns; t_alltoall_s since
#: mixtures of experts, docs/model.md §17).
COLUMNS = [
    "model", "machine", "strategy", "p", "p1", "p2", "b", "global_batch", "S", "iterations",
    "inter_bandwidth_Bps", "t_comp_s", "t_comm_s", "t_epoch_s", "t_iter_s", "t_allreduce_s",
    "t_allgather_s", "t_halo_s", "t_p2p_s", "t_alltoall_s", "mem_bytes", "mem_states_bytes", "mem_activations_bytes",
    "gpu_hours", "samples_per_s", "tokens_per_s", "mfu", "params", "active_params", "flops_per_token",
    "energy_kwh", "cost_usd", "feasible", "limit_reason",
]  # fmt: skip


def calibrated(bandwidth: bool = False, gpt: bool = False):
    """``abci`` with a posterior on the two factors (``COV[:2, :2]``), or all three parameters;
    ``gpt``: with what GPT models need (GEMMs by shape) taken from ``selene`` as its base."""
    doc = tomllib.loads(to_toml(load_machine("abci")))
    doc["name"] = "abci-fit"
    if gpt:
        doc["base"] = "selene"
    n = 3 if bandwidth else 2
    doc["calibration"] = {
        "structure": "by hand", "cv": "model", "cv_accuracy": 0.8, "spread_log": SPREAD,
        "params": ["collective.allreduce", "overheads.data.compute", "inter_bandwidth_Bps"][:n],
        "log_values": [0.0, 0.0, math.log(12.5e9)][:n], "floors": [0.0] * n,
        "covariance": [row[:n] for row in COV[:n]],
    }  # fmt: skip
    return parse_machine(doc, "abci-fit.toml")


@pytest.fixture
def runner(monkeypatch) -> CliRunner:
    monkeypatch.setenv("SWEEP_JAX_CACHE", "")  # no persistent XLA cache from in-process runs
    return CliRunner()


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    folder = tmp_path_factory.mktemp("iv")
    (folder / "abci-fit.toml").write_text(to_toml(calibrated()))
    path = folder / "iv.toml"
    path.write_text(SPEC.format(machine=folder / "abci-fit.toml"))
    return path


@pytest.fixture(scope="module")
def every_row(spec):
    """Every row, x64, with 80 % intervals."""
    out = spec.parent / "all"
    api.run(spec, out, x64=True, interval=0.8)
    return out


def hand_half(row: dict, z: float) -> float:
    """``z sqrt(J C J^T + sigma^2)`` of a data row, with ``J = (t_ar / t, t_comp / t, 0)``."""
    a, c = row["t_allreduce_s"] / row["t_epoch_s"], row["t_comp_s"] / row["t_epoch_s"]
    var = COV[0][0] * a * a + 2 * COV[0][1] * a * c + COV[1][1] * c * c
    return z * math.sqrt(var + SPREAD**2)


def test_every_row_carries_an_interval_that_brackets_t_epoch_s_and_matches_the_hand_width(every_row):
    table = ds.dataset(every_row).to_table()
    names = table.schema.names
    assert names == [*COLUMNS[:14], "t_epoch_s_lo", "t_epoch_s_hi", *COLUMNS[14:]]
    rows = table.to_pylist()
    assert len(rows) == 2 * 3 * 2 * 2
    for r in rows:
        assert r["t_epoch_s_lo"] < r["t_epoch_s"] < r["t_epoch_s_hi"]
    data = [r for r in rows if r["strategy"] == "data"]
    assert any(r["t_allreduce_s"] > 0.1 * r["t_epoch_s"] for r in data)  # the covariance matters
    for r in data:
        half = hand_half(r, Z80)
        assert r["t_epoch_s_hi"] == pytest.approx(r["t_epoch_s"] * math.exp(half), rel=1e-9)
        assert r["t_epoch_s_lo"] == pytest.approx(r["t_epoch_s"] * math.exp(-half), rel=1e-9)
    # the level is recorded in every part file and in the manifest, whose schema has the columns
    for part in every_row.glob("part-*.parquet"):
        assert json.loads(pq.read_schema(part).metadata[b"paradl_sweep"])["interval"] == 0.8
    assert pq.read_schema(every_row / "_manifest.parquet").names == names
    manifest = api.open(every_row).manifest
    assert manifest is not None and manifest.interval == 0.8 and manifest.complete


def test_rows_agree_with_sweep_estimates_interval(every_row):
    """Rebuilt from the row's columns (p, b, p2, S, the swept bandwidth, which this posterior also
    holds), each row's interval is what ``sweep estimate --set`` gives its configuration."""
    profile = calibrated(bandwidth=True)
    rows = ds.dataset(every_row).to_table().to_pylist()
    with backend.computation(x64=True):
        for strategy in ("data", "data+filter"):
            mine = [r for r in rows if r["strategy"] == strategy]
            config = {k: np.array([r[k] for r in mine]) for k in ("p", "b", "p2", "S", "inter_bandwidth_Bps")}
            t_epoch = np.array([r["t_epoch_s"] for r in mine])
            lo, hi = RowIntervals(
                Bound.of(load_model("resnet50"), profile), strategy, ["inter_bandwidth_Bps"]
            ).bounds(config, t_epoch)
            for r, a, b in [(mine[0], lo[0], hi[0]), (mine[-1], lo[-1], hi[-1])]:
                one = api.estimate(
                    "resnet50", profile, strategy, p=r["p"], b=r["b"],
                    p2=r["p2"] if strategy == "data+filter" else None,
                    set={"inter_bandwidth_Bps": r["inter_bandwidth_Bps"]},
                )  # fmt: skip
                assert one["t_epoch_s"] == pytest.approx(r["t_epoch_s"], rel=1e-12)
                assert a / r["t_epoch_s"] == pytest.approx(one["t_iter_s_lo"] / one["t_iter_s"], rel=1e-9)
                assert b / r["t_epoch_s"] == pytest.approx(one["t_iter_s_hi"] / one["t_iter_s"], rel=1e-9)
            # on 16 nodes (p = 64, last), the bandwidth's share widens the two factors' interval
            assert hi[-1] / lo[-1] > mine[-1]["t_epoch_s_hi"] / mine[-1]["t_epoch_s_lo"]


def test_a_resume_at_095_rewrites_the_columns_wider(spec, tmp_path):
    out = tmp_path / "o"
    api.run(spec, out, x64=True, interval=0.8)
    narrow = ds.dataset(out).to_table().to_pylist()
    api.run(spec, out, x64=True, resume=True, interval=0.95)  # the run is complete: only the pass
    wide = ds.dataset(out).to_table().to_pylist()
    assert len(wide) == len(narrow)
    for a, b in zip(narrow, wide, strict=True):
        assert b["t_epoch_s"] == a["t_epoch_s"]
        assert b["t_epoch_s_lo"] < a["t_epoch_s_lo"] and b["t_epoch_s_hi"] > a["t_epoch_s_hi"]
        # the half-width in log scales with z: z_0.975 / z_0.9
        ratio = math.log(b["t_epoch_s_hi"] / b["t_epoch_s"]) / math.log(a["t_epoch_s_hi"] / a["t_epoch_s"])
        assert ratio == pytest.approx(Z95 / Z80, rel=1e-9)
    assert api.open(out).manifest.interval == 0.95


def test_a_pareto_front_carries_the_intervals_of_its_rows(spec, every_row, tmp_path):
    out = tmp_path / "front"
    api.run(spec, out, x64=True, keep="pareto:t_epoch_s,p", interval=0.8)
    assert sorted(p.name for p in out.glob("*.parquet")) == ["_manifest.parquet", "part-keep.parquet"]
    front = ds.dataset(out).to_table().to_pylist()
    assert front
    key = ("strategy", "p", "b", "inter_bandwidth_Bps")
    every = {tuple(r[k] for k in key): r for r in ds.dataset(every_row).to_table().to_pylist()}
    for r in front:
        same = every[tuple(r[k] for k in key)]
        assert (r["t_epoch_s_lo"], r["t_epoch_s_hi"]) == pytest.approx(
            (same["t_epoch_s_lo"], same["t_epoch_s_hi"])
        )


def test_float32_columns_and_a_sweep_without_interval_writes_the_columns_it_did(spec, tmp_path):
    plain = tmp_path / "plain"
    api.run(spec, plain)
    assert pq.read_schema(plain / "_manifest.parquet").names == COLUMNS
    assert ds.dataset(plain).schema.names == COLUMNS
    assert api.open(plain).manifest.interval is None
    # the same folder, completed with --resume --interval: float32 like t_epoch_s, bracketing it
    api.run(spec, plain, resume=True, interval=0.8)
    table = ds.dataset(plain).to_table()
    assert str(table.schema.field("t_epoch_s_lo").type) == "float"
    t, lo, hi = (table.column(c).to_numpy() for c in ("t_epoch_s", "t_epoch_s_lo", "t_epoch_s_hi"))
    assert np.all(lo < t) and np.all(t < hi)


def test_a_stopped_pass_is_finished_by_resume(spec, tmp_path, monkeypatch):
    """A disk error in the middle of the pass: one line; the files are whole (one annotated, one
    not), the manifest does not claim the level, and --resume finishes."""
    out = tmp_path / "o"
    api.run(spec, out, x64=True)  # the engine's part (it writes part files the same way)
    real = annotate.store.write_parquet
    calls = []

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(*args, **kwargs)

    monkeypatch.setattr(annotate.store, "write_parquet", flaky)
    with pytest.raises(InputError, match="No space left on device; rerun it with resume to finish"):
        api.run(spec, out, x64=True, resume=True, interval=0.8)
    monkeypatch.undo()
    parts = sorted(out.glob("part-*.parquet"))
    assert ["t_epoch_s_lo" in pq.read_schema(p).names for p in parts] == [True, False]
    assert not list(out.glob(".*")) and api.open(out).manifest.interval is None
    api.run(spec, out, x64=True, resume=True, interval=0.8)
    assert all("t_epoch_s_lo" in pq.read_schema(p).names for p in parts)
    assert api.open(out).manifest.interval == 0.8


def test_row_intervals_rebuild_data_tensor_pipeline_and_pipeline_configurations():
    """tp, pp, recompute, zero and S from the row's columns: the same interval and time as
    ``sweep estimate`` (one configuration through :class:`~sweep.trust.problem.Problem`)."""
    profile = calibrated(bandwidth=True, gpt=True)
    with backend.computation(x64=True):
        for model, strategy, kw in [
            (
                "gpt3-1.3b",
                "data+tensor+pipeline",
                {"p": 64, "b": 8, "tp": 4, "pp": 2, "recompute": 1, "zero": 1},
            ),
            ("resnet50", "pipeline", {"p": 4, "b": 64, "S": 8}),
        ]:
            row = api.estimate(model, profile, strategy, **kw)
            config = {
                k: np.array([row[k]])
                for k in ("p", "b", "p2", "S", "tp", "pp", "recompute", "zero")
                if k in row
            }
            bound = Bound.of(load_model(model), profile)
            rows = RowIntervals(bound, strategy)
            t, _ = rows.jacobian(config)
            lo, hi = rows.bounds(config, np.array([row["t_iter_s"]]))
            assert t[0] == pytest.approx(row["t_iter_s"], rel=1e-12)
            assert (lo[0], hi[0]) == pytest.approx(estimate_interval(bound, row), rel=1e-9)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--interval", "0.8"], "machine 'abci' has none"),
        (["--interval", "1"], "--interval must be a level in (0, 1)"),
        (["--interval", "0"], "--interval must be a level in (0, 1)"),
        (
            ["--interval", "0.8", "--columns", "model,machine,strategy,p,b,p2,S"],
            "needs the column 't_epoch_s'",
        ),
        (["--interval", "0.8", "--shard", "0/2"], "cannot be given to a --shard run"),
    ],
)
def test_cli_interval_errors_are_one_line_and_write_nothing(runner, tmp_path, spec, args, needle):
    path = spec
    if "has none" in needle:  # the plain built-in machine: no [calibration]
        path = tmp_path / "plain.toml"
        path.write_text(SPEC.format(machine="abci"))
    out = tmp_path / "never"
    result = runner.invoke(cli, ["run", str(path), "-o", str(out), *args])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], result.stderr
    assert not out.exists()


def test_polars_and_duckdb_read_an_interval_folder_as_pyarrow_does(every_row):
    """Every file of the folder, the manifest among them, has the columns: Polars (which takes
    every file) and DuckDB read the same rows and intervals."""
    duckdb = pytest.importorskip("duckdb")
    pl = pytest.importorskip("polars")
    names = ["strategy", "p", "b", "inter_bandwidth_Bps", "t_epoch_s", "t_epoch_s_lo", "t_epoch_s_hi"]
    table = ds.dataset(every_row).to_table(columns=names)
    want = sorted(zip(*(table.column(c).to_pylist() for c in names), strict=True))
    df = pl.scan_parquet(every_row).collect().with_columns(pl.col(pl.Categorical).cast(pl.String))
    assert sorted(df.select(names).rows()) == want
    assert sorted(duckdb.sql(f"select {', '.join(names)} from '{every_row}/*.parquet'").fetchall()) == want


def test_an_interrupted_run_gets_its_intervals_when_resumed(spec, every_row, tmp_path):
    """The pass runs once the run is complete: an interrupted run has none; its --resume writes
    every row's, the same as a run that was never stopped."""
    from sweep.engine.runstate import Interrupted

    calls = []

    def stop(done, total, seconds):
        calls.append(done)
        if len(calls) == 2:
            raise KeyboardInterrupt

    out = tmp_path / "o"
    with pytest.raises(Interrupted):
        api.run(spec, out, x64=True, chunk=4, interval=0.8, progress=stop)
    written = list(out.glob("part-*.parquet"))
    assert written and not any("t_epoch_s_lo" in pq.read_schema(p).names for p in written)
    api.run(spec, out, x64=True, chunk=4, resume=True, interval=0.8)
    key = ("strategy", "p", "b", "inter_bandwidth_Bps", "t_epoch_s", "t_epoch_s_lo", "t_epoch_s_hi")
    rows = sorted(tuple(r[k] for k in key) for r in ds.dataset(out).to_table().to_pylist())
    assert rows == sorted(tuple(r[k] for k in key) for r in ds.dataset(every_row).to_table().to_pylist())
    assert len(list(out.glob("part-*.parquet"))) > 2


def test_cli_run_interval_says_what_it_added(runner, spec, tmp_path):
    out = tmp_path / "cli"
    result = runner.invoke(
        cli, ["run", str(spec), "-o", str(out), "--interval", "0.9", "--keep", "top:3:t_epoch_s"]
    )
    assert result.exit_code == 0, result.output
    assert (
        result.stdout.splitlines()[-1]
        == "t_epoch_s_lo, t_epoch_s_hi: the 90 % prediction interval of t_epoch_s"
    )
    top = ds.dataset(out).to_table()
    assert top.num_rows == 3 and api.open(out).manifest.interval == 0.9
    assert all(
        lo < t < hi
        for lo, t, hi in zip(
            *(top.column(c).to_pylist() for c in ("t_epoch_s_lo", "t_epoch_s", "t_epoch_s_hi")), strict=True
        )
    )
