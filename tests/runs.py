"""Small sweeps run through the CLI, shared by the run, dataset, ``--keep`` and resume tests.

Runs go through click's ``CliRunner`` on small grids written to a temporary folder with
small chunks, so every job spans many chunks. The grid (``GRID_SPEC``) and the paper's
sweep run once per session (the ``grid`` and ``paper32`` fixtures of ``tests/conftest.py``)
and are shared by the tests that only read their output.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from click.testing import CliRunner

import grids
from sweep.cli.main import cli
from sweep.engine.program import TRACES
from sweep.output import store
from sweep.reduce import reducer as reducer_module

PAPER_SPEC = grids.SWEEPS / "paper-resnet50-vgg16.toml"
CHUNK = 64

# The shared grid: three strategies (one pure, pipeline with S, a hybrid with p2), a swept
# machine parameter and a fixed [set] override. p2 values 3, 8 and 16 skip many p.
GRID_P = list(range(1, 25))
GRID_B = [8, 16, 32, 64]
GRID_P2 = [2, 3, 4, 8, 16]
GRID_S = [1, 4, 16]
GRID_BW = [1e10 * k for k in range(1, 11)]  # linspace [10e9, 100e9, 10], exact
GRID_SET = {"wu_passes": 2.0}
GRID_AXES = "\n".join(
    [
        "[axes]",
        "p = { start = 1, stop = 24 }",
        "b = [8, 16, 32, 64]",
        "p2 = [2, 3, 4, 8, 16]",
        "S = [1, 4, 16]",
        "inter_bandwidth_Bps = { linspace = [10e9, 100e9, 10] }",
        "",
        "[set]",
        "wu_passes = 2",
        "",
    ]
)
GRID_SPEC = (
    'name = "grid"\nmodel = "resnet50"\nmachine = "abci"\n'
    'strategies = ["data", "pipeline", "data+filter"]\n' + GRID_AXES
)
# data alone: without the p2 and S axes, which no strategy of it uses (an error in a spec)
DATA_AXES = GRID_AXES.replace("p2 = [2, 3, 4, 8, 16]\n", "").replace("S = [1, 4, 16]\n", "")
DATA_SPEC = 'name = "grid-data"\nmodel = "resnet50"\nmachine = "abci"\nstrategies = ["data"]\n' + DATA_AXES
GRID_KEY = ("strategy", "p", "b", "p2", "S", "inter_bandwidth_Bps")


@dataclass
class Run:
    spec: Path
    out: Path
    stdout: str
    traces: dict
    rows: list[dict]


def sweep(*args) -> object:
    """``sweep ARGS`` in-process; exceptions other than SystemExit propagate."""
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def sweep_caught(*args) -> object:
    return CliRunner().invoke(cli, [str(a) for a in args])


def read_rows(folder: Path) -> list[dict]:
    """Every row of a dataset folder, as dicts (dictionary columns decoded)."""
    return ds.dataset(folder, format="parquet").to_table().to_pylist()


def count_rows(folder: Path) -> int:
    return ds.dataset(folder, format="parquet").count_rows()


def manifest(folder: Path) -> dict:
    doc = store.read_manifest(folder)
    assert doc is not None, f"no manifest in {folder}"
    return doc


def temporaries(folder: Path) -> list[str]:
    return sorted(f.name for f in folder.iterdir() if f.name.endswith(".tmp"))


def as_tuples(rows: list[dict], columns=None) -> list[tuple]:
    """Rows as sorted tuples (order-independent comparison)."""
    if not rows:
        return []
    columns = columns or list(rows[0])
    return sorted(tuple(r[c] for c in columns) for r in rows)


def assert_same_rows(got: list[dict], want: list[dict], key=GRID_KEY) -> None:
    """The same configurations, integers and labels exactly, floats to float32 rounding.

    A ``--keep`` run compiles a different program than a full run and XLA fuses
    it differently, so a float32 value may differ in its last bit.
    """
    assert len(got) == len(want)
    index = {tuple(r[c] for c in key): r for r in want}
    assert len(index) == len(want), "key identifies a row"
    for r in got:
        twin = index[tuple(r[c] for c in key)]
        assert r.keys() == twin.keys()
        for c, v in r.items():
            if isinstance(v, float):
                assert v == pytest.approx(twin[c], rel=1e-6, abs=1e-30), c
            else:
                assert v == twin[c], c


def distinct_front(front: list[dict], names) -> list[dict]:
    """What ``--keep pareto`` keeps of the rows ``front`` of an exact front, in grid order: the
    first row of each distinct vector of the ``names`` columns, with a ``tied`` count of the
    rows that share it."""
    counts = collections.Counter(tuple(r[c] for c in names) for r in front)
    seen: set[tuple] = set()
    out = []
    for r in front:
        vector = tuple(r[c] for c in names)
        if vector not in seen:
            seen.add(vector)
            out.append({**r, store.TIED: counts[vector]})
    return out


def run_spec(tmp: Path, name: str, text: str, *options) -> Run:
    spec = tmp / f"{name}.toml"
    spec.write_text(text)
    out = tmp / f"{name}-out"
    TRACES.clear()
    result = sweep("run", spec, "-o", out, *options)
    assert result.exit_code == 0, result.output
    return Run(spec, out, result.stdout, dict(TRACES), read_rows(out))


def shared_run(tmp_path_factory, name: str, text: str, *options) -> Run:
    """:func:`run_spec` for a run shared by many tests (a session or module fixture): in-process
    ``sweep run`` must not point XLA's persistent cache at the user's home."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SWEEP_JAX_CACHE", "")
        return run_spec(tmp_path_factory.mktemp(name), name, text, *options)


def count_spills(monkeypatch, rows: int) -> list[int]:
    """Spill a Pareto front to disk once ``rows`` rows are kept; returns a list that grows per spill."""
    monkeypatch.setattr(reducer_module, "SPILL_ROWS", rows)
    monkeypatch.setattr(reducer_module, "SPILL_ROWS_MAX", rows)  # whatever this process's size
    monkeypatch.setattr(reducer_module, "REDUCE_ROWS", 1)
    monkeypatch.setattr(reducer_module, "BATCH_ROWS", 5)  # spills read back in blocks of 5 rows
    spills: list[int] = []
    real = reducer_module.Reducer._spill
    monkeypatch.setattr(reducer_module.Reducer, "_spill", lambda self: spills.append(1) or real(self))
    return spills
