"""Interrupted and failed runs, and ``--resume`` (sweep/engine/runstate.py, run.py): a run
stopped by SIGINT or a failing disk leaves a resumable folder with no temporaries, one
error line, and resumed it equals a clean run; a used folder or a changed spec is refused."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from sweep.output import store
from sweep.reduce.pareto import pareto_mask
from tests.runs import (
    CHUNK,
    DATA_SPEC,
    GRID_SPEC,
    as_tuples,
    assert_same_rows,
    count_rows,
    count_spills,
    distinct_front,
    manifest,
    read_rows,
    sweep,
    sweep_caught,
    temporaries,
)


def _interrupt_after(monkeypatch, chunks: int) -> None:
    """Make ``sweep run`` raise KeyboardInterrupt (as SIGINT would) after ``chunks`` chunks."""
    import sweep.engine.run

    calls = [0]

    def progress(done, total, elapsed):
        calls[0] += 1
        if calls[0] == chunks:
            raise KeyboardInterrupt

    monkeypatch.setattr(sweep.engine.run, "tty_progress", lambda: progress)


def test_interrupt_then_resume_equals_a_clean_run(grid, tmp_path, monkeypatch):
    spec = tmp_path / "grid.toml"
    spec.write_text(GRID_SPEC)
    out = tmp_path / "out"
    _interrupt_after(monkeypatch, 40)
    result = sweep("run", spec, "-o", out, "--chunk", CHUNK)
    assert result.exit_code == 130, result.output
    assert "--resume" in result.stderr
    assert "Traceback" not in result.output
    assert temporaries(out) == []
    m = manifest(out)
    assert m["complete"] is False
    assert 0 < m["rows"] == count_rows(out) < len(grid.rows)
    monkeypatch.undo()
    result = sweep("run", spec, "-o", out, "--chunk", CHUNK, "--resume")
    assert result.exit_code == 0, result.output
    assert temporaries(out) == []
    assert manifest(out)["complete"] is True
    assert as_tuples(read_rows(out)) == as_tuples(grid.rows)


def test_resume_without_chunk_continues_with_the_runs_own(grid, tmp_path, monkeypatch):
    """--resume without --chunk takes the chunk the folder's run was written with (a run
    started on a GPU, whose reductions default to 2^24, may be resumed on a CPU); a
    --chunk given that differs is still refused (test_resume_with_a_changed_spec_exits_2)."""
    spec = tmp_path / "grid.toml"
    spec.write_text(GRID_SPEC)
    out = tmp_path / "out"
    _interrupt_after(monkeypatch, 40)
    assert sweep("run", spec, "-o", out, "--chunk", CHUNK).exit_code == 130
    monkeypatch.undo()
    result = sweep("run", spec, "-o", out, "--resume")
    assert result.exit_code == 0, result.output
    assert manifest(out)["run_key"]["chunk"] == CHUNK
    assert as_tuples(read_rows(out)) == as_tuples(grid.rows)


def test_interrupt_then_resume_a_reduction(grid, tmp_path, monkeypatch):
    keep = "pareto:t_epoch_s,p"
    spec = tmp_path / "grid.toml"
    spec.write_text(GRID_SPEC)
    out = tmp_path / "out"
    _interrupt_after(monkeypatch, 40)
    result = sweep("run", spec, "-o", out, "--chunk", CHUNK, "--keep", keep)
    assert result.exit_code == 130, result.output
    assert temporaries(out) == []
    monkeypatch.undo()
    result = sweep("run", spec, "-o", out, "--chunk", CHUNK, "--keep", keep, "--resume")
    assert result.exit_code == 0, result.output
    rows = read_rows(out)
    feasible = [r for r in grid.rows if r["feasible"]]
    objectives = np.array([[r["t_epoch_s"], r["p"]] for r in feasible], dtype=np.float64)
    want = [r for r, k in zip(feasible, pareto_mask(objectives), strict=True) if k]
    assert_same_rows(rows, distinct_front(want, ["t_epoch_s", "p"]))
    assert sorted(f.name for f in out.iterdir()) == [store.MANIFEST, "part-keep.parquet"]


def test_interrupt_then_resume_a_spilled_reduction(grid, tmp_path, monkeypatch):
    """The manifest of an interrupted run names its spills; a spill it does not name (written
    after the last checkpoint, its chunks not recorded) is dropped on resume, not counted twice
    (``:all``: a front of distinct optima never spills)."""
    keep = "pareto:t_epoch_s,p:all"
    spec = tmp_path / "grid.toml"
    spec.write_text(GRID_SPEC)
    out = tmp_path / "out"
    count_spills(monkeypatch, 16)
    _interrupt_after(monkeypatch, 40)
    result = sweep("run", spec, "-o", out, "--chunk", CHUNK, "--keep", keep)
    assert result.exit_code == 130, result.output
    m = manifest(out)
    assert m["keep_spill"], "the interrupted run had spilled"
    assert all((out / name).is_file() for name in m["keep_spill"])
    orphan = out / "_spill-999999.parquet"
    orphan.write_bytes((out / m["keep_spill"][0]).read_bytes())
    monkeypatch.undo()
    count_spills(monkeypatch, 16)
    result = sweep("run", spec, "-o", out, "--chunk", CHUNK, "--keep", keep, "--resume")
    assert result.exit_code == 0, result.output
    feasible = [r for r in grid.rows if r["feasible"]]
    objectives = np.array([[r["t_epoch_s"], r["p"]] for r in feasible], dtype=np.float64)
    want = [r for r, k in zip(feasible, pareto_mask(objectives), strict=True) if k]
    assert_same_rows(read_rows(out), want)
    assert sorted(f.name for f in out.iterdir()) == [store.MANIFEST, "part-keep.parquet"]


def test_failure_while_recording_leaves_no_temporaries(tmp_path, monkeypatch):
    """A disk-full error while recording a part leaves a half-written manifest temporary: cleaned up."""
    spec = tmp_path / "data.toml"
    spec.write_text(DATA_SPEC)
    out = tmp_path / "out"
    real = store.write_manifest
    calls = [0]

    def failing(path: Path, text: str, schema) -> None:
        calls[0] += 1
        if calls[0] == 6:  # the initial manifest, then one per part: fails recording the 5th part
            path.with_name(f".{path.name}.tmp").write_text(text[: len(text) // 2])
            raise OSError(28, "No space left on device")
        real(path, text, schema)

    monkeypatch.setattr(store, "write_manifest", failing)
    result = sweep_caught("run", spec, "-o", out, "--chunk", CHUNK)
    monkeypatch.undo()
    _assert_exit_2(result, f"{out}: stopped: No space left on device;", "rerun with --resume to continue")
    assert manifest(out)["complete"] is False
    assert temporaries(out) == []


def test_part_write_failure_then_resume(grid, tmp_path, monkeypatch):
    spec = tmp_path / "data.toml"
    spec.write_text(DATA_SPEC)
    out = tmp_path / "out"
    real = store.PartWriter.write
    calls = [0]

    def failing(self, name, table):
        calls[0] += 1
        if calls[0] == 5:
            raise OSError(28, "No space left on device")
        return real(self, name, table)

    monkeypatch.setattr(store.PartWriter, "write", failing)
    result = sweep_caught("run", spec, "-o", out, "--chunk", CHUNK)
    # one line, not a traceback: the folder, the system's reason, what is kept, how to go on
    _assert_exit_2(result, f"{out}: stopped: No space left on device;", "rows kept", "--resume")
    assert "Traceback" not in result.output
    monkeypatch.undo()
    assert temporaries(out) == []
    m = manifest(out)
    assert m["complete"] is False
    # Parts are written by several threads and may finish out of order, so the
    # chunks before the failed one are done and a later one may be too; the
    # manifest counts exactly the rows on disk, and the failed chunk is missing.
    data_rows = sum(1 for r in grid.rows if r["strategy"] == "data")
    assert m["rows"] == count_rows(out)
    assert 4 * CHUNK <= m["rows"] < data_rows
    result = sweep("run", spec, "-o", out, "--chunk", CHUNK, "--resume")
    assert result.exit_code == 0, result.output
    assert temporaries(out) == []
    assert as_tuples(read_rows(out)) == as_tuples([r for r in grid.rows if r["strategy"] == "data"])


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {f.name: (f.stat().st_size, f.stat().st_mtime_ns) for f in folder.iterdir()}


def _assert_exit_2(result, *needles):
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    for needle in needles:
        assert needle in lines[0]


def test_second_run_into_a_used_folder_exits_2(grid):
    before = snapshot(grid.out)
    _assert_exit_2(sweep("run", grid.spec, "-o", grid.out, "--chunk", CHUNK), str(grid.out))
    assert snapshot(grid.out) == before


def test_resume_with_a_changed_spec_exits_2(grid, tmp_path):
    changed = tmp_path / "grid.toml"
    changed.write_text(GRID_SPEC.replace("b = [8, 16, 32, 64]", "b = [8, 16, 32]"))
    before = snapshot(grid.out)
    _assert_exit_2(
        sweep("run", changed, "-o", grid.out, "--chunk", CHUNK, "--resume"), str(grid.out), "the spec differs"
    )
    # the line names the option to repeat: a --keep run's default chunk changed once
    _assert_exit_2(
        sweep("run", grid.spec, "-o", grid.out, "--chunk", 32, "--resume"),
        str(grid.out),
        f"chunk was {CHUNK}, now 32",
    )
    assert snapshot(grid.out) == before


def test_resume_of_a_complete_run_writes_nothing(grid):
    before = snapshot(grid.out)
    result = sweep("run", grid.spec, "-o", grid.out, "--chunk", CHUNK, "--resume")
    assert result.exit_code == 0, result.output
    assert f"{len(grid.rows):,} rows" in result.stdout
    assert snapshot(grid.out) == before


def test_sigint_stops_a_subprocess_run_cleanly(tmp_path):
    """The real console entry point: SIGINT after the first part file -> exit 130, resumable folder."""
    spec = tmp_path / "long.toml"
    spec.write_text(
        'name = "long"\nmodel = "resnet50"\nmachine = "abci"\nstrategies = ["data"]\n'
        "[axes]\np = { start = 1, stop = 4000 }\nb = { start = 1, stop = 100 }\n"
    )
    out = tmp_path / "out"
    env = {**os.environ, "SWEEP_JAX_CACHE": ""}
    cmd = [sys.executable, "-m", "sweep.cli", "run", str(spec), "-o", str(out), "--chunk", "16"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 90
        while not list(out.glob("part-*.parquet")) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, stderr
    assert "--resume" in stderr
    assert "Traceback" not in stdout + stderr
    assert temporaries(out) == []
    m = manifest(out)
    assert m["complete"] is False
    parts = sorted(out.glob("part-*.parquet"))
    assert len(parts) == m["done"]["0"] >= 1
    assert m["rows"] == count_rows(out) == 16 * len(parts)
