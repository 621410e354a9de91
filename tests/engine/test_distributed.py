"""Sweeps beyond one device: forced CPU devices, ``--shard K/N`` + ``sweep merge``, and Dask.

Every mode must give the same dataset as one local run on one device: the
same rows with the same values (compared order-independently, since chunk
boundaries differ between modes), and for ``--keep`` the same rows in the
same order. The reference is one in-process run of a small grid (tiny-cnn,
a pure strategy and a hybrid whose p2 skips points, a swept machine
parameter); expected reductions are computed from its rows on the host,
with ties broken by position in the grid as the engine documents.

Killed work: a shard process that dies mid-run leaves only complete part
files and finishes when rerun; a Dask worker that dies mid-task has its
chunk rerun elsewhere, and every chunk has exactly one part file.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import jax
import numpy as np
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import grids
from sweep.cli.main import cli
from sweep.engine.index import n_chunks, numeric_columns, spans
from sweep.engine.run import run_sweep
from sweep.engine.runstate import DoneChunks, Interrupted, RunOptions, Shard, parse_shard
from sweep.errors import InputError
from sweep.inputs.grid import load_spec, parse_spec, plan
from sweep.output import store
from sweep.reduce import reducer as reducer_module
from sweep.reduce.keep import parse_keep
from sweep.reduce.pareto import pareto_mask
from tests.helpers import python_on_cpu_devices
from tests.runs import distinct_front

ROOT = Path(__file__).resolve().parents[2]
CHUNK = 16
TOP = "top:7:t_epoch_s"
PARETO = "pareto:t_epoch_s,p"
SPEC = f"""name = "dist"
model = "{grids.MODELS / "tiny-cnn.toml"}"
machine = "abci"
strategies = ["data", "data+filter"]
[axes]
p = {{ log2 = [0, 6] }}
b = [8, 32]
p2 = [2, 4]
inter_bandwidth_Bps = {{ linspace = [12.5e9, 100e9, 5] }}
"""


# ----------------------------------------------------------------------------- helpers


@pytest.fixture(scope="module", autouse=True)
def _no_home_jax_cache():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SWEEP_JAX_CACHE", "")
        yield


@pytest.fixture(scope="module")
def spec(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("spec") / "dist.toml"
    path.write_text(SPEC)
    return path


def rows_of(folder: Path) -> list[dict]:
    """Rows in file-name order: for local and sharded runs that is grid order."""
    return ds.dataset(folder, format="parquet").to_table().to_pylist()


def as_set(rows: list[dict]) -> list[tuple]:
    return sorted(tuple(r.values()) for r in rows)


def keep_rows(folder: Path) -> list[dict]:
    return pq.read_table(folder / "part-keep.parquet").to_pylist()


def sweep(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def run_api(spec: Path, out: Path, keep: str | None = None, **options):
    """``run_sweep`` with ``--chunk 16``, ``--keep keep`` and other :class:`RunOptions` fields."""
    p = plan(load_spec(spec))
    opts = RunOptions(
        out=out, chunk=options.pop("chunk", CHUNK), keep=parse_keep(keep, numeric_columns(p.jobs[0]))
    )
    for key, value in options.items():
        setattr(opts, key, value)
    return run_sweep(p, opts)


@pytest.fixture(scope="module")
def reference(spec, tmp_path_factory) -> list[dict]:
    """Every row of one single-device local run, in grid order."""
    out = tmp_path_factory.mktemp("reference") / "out"
    run_api(spec, out)
    return rows_of(out)


def expected_pareto(rows: list[dict], ties: bool = False) -> list[dict]:
    """The front of ``rows`` (grid order): every tied row (``ties``, ``pareto:...:all``), or
    the first of each distinct optimum with its ``tied`` count."""
    feasible = [r for r in rows if r["feasible"]]
    mask = pareto_mask(np.array([[r["t_epoch_s"], r["p"]] for r in feasible]))
    front = [r for r, k in zip(feasible, mask, strict=True) if k]
    return front if ties else distinct_front(front, ["t_epoch_s", "p"])


def expected_top(rows: list[dict], k: int = 7) -> list[dict]:
    feasible = [r for r in rows if r["feasible"]]
    return sorted(feasible, key=lambda r: r["t_epoch_s"])[:k]  # stable: ties in grid order


def temporaries(folder: Path) -> list[str]:
    return [f.name for f in folder.iterdir() if f.name.endswith(".tmp")]


def spec_plan():
    return plan(parse_spec(tomllib.loads(SPEC), "dist.toml", ROOT, SPEC))


def test_reference_has_ties_and_skipped_points(reference):
    """The grid exercises what the modes could get wrong: top-k ties and hybrid skips."""
    assert 0 < len(reference) < spec_plan().size
    top = expected_top(reference)
    assert len({r["t_epoch_s"] for r in top}) < len(top)


@pytest.mark.parametrize("chunk", [1, 128, 1 << 18])
def test_chunk_size_does_not_change_a_bit(spec, reference, tmp_path, chunk):
    """Chunks of 1 and 16 points decode every axis; 128 points vmap the 5 bandwidths (an
    inner box holds at most chunk / 16 points), 2^18 the whole job. Each layout gives XLA
    other broadcasts to simplify (it turned t_epoch / I, with I broadcast over the inner
    box, into a product by 1 / I), and every row and column must come out bit for bit the
    same."""
    run_api(spec, tmp_path / "out", chunk=chunk)
    assert rows_of(tmp_path / "out") == reference


# ----------------------------------------------------------------------------- index space


@pytest.mark.parametrize("n", [1, 2, 3, 7, 500])
def test_shard_spans_partition_the_index_space(n):
    p = spec_plan()
    seen: list[tuple[int, int]] = []
    sizes = []
    for k in range(n):
        parts = spans(p.jobs, k, n)
        sizes.append(sum(s.hi - s.lo for s in parts))
        seen.extend((s.job.index, i) for s in parts for i in range(s.lo, s.hi))
    assert seen == [(j.index, i) for j in p.jobs for i in range(j.size)], "contiguous, in order, once"
    assert max(sizes) - min(sizes) <= 1, "equal parts"


def test_parse_shard():
    assert parse_shard("3/16") == Shard(3, 16)
    assert Shard(3, 16).tag == "s0003of0016"
    assert store.part_name(1, 12, "s0003of0016") == "part-s0003of0016-j0001-c000000012.parquet"
    for bad in ("16/16", "-1/4", "1/0", "a/b", "3"):
        with pytest.raises(InputError, match=r"^shard must be K/N with 0 <= K < N, got "):
            parse_shard(bad)


def test_bad_shard_option_is_one_line_exit_2(spec, tmp_path):
    result = sweep("run", spec, "-o", tmp_path / "out", "--shard", "4/4")
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0 and "--shard" in result.output


def test_done_chunks_out_of_order_round_trip():
    done = DoneChunks()
    for number in (2, 0, 4):
        done.mark(7, number)
    assert done.to_json() == ({7: 1}, {7: [2, 4]})
    again = DoneChunks(*json.loads(json.dumps(done.to_json())))  # as read back from the manifest
    assert [again.has(7, c) for c in range(6)] == [True, False, True, False, True, False]
    again.mark(7, 1)
    again.mark(7, 3)
    assert again.to_json() == ({7: 5}, {})


# ----------------------------------------------------------------------------- local devices

MULTI_DEVICE = """
import sys
from pathlib import Path
import jax
from sweep.engine import filters, index, program
from sweep.reduce import reducer
from sweep.inputs.grid import load_spec, parse_spec, plan
from sweep.engine.run import run_sweep
from sweep.engine.runstate import RunOptions
from sweep.reduce.keep import parse_keep
from sweep.engine import backend

backend.start()  # JAX's CPU client as a run starts it (no FMA), before it is asked for devices
assert len(jax.devices()) == 2, jax.devices()
reducer.REDUCE_ROWS = 1  # reduced at every chunk: later chunks are given the host's front
given = [0]
real_front = filters.known_front
filters.known_front = lambda v, dtype: given.append(0 if v is None else len(v)) or real_front(v, dtype)
spec, out = sys.argv[1], Path(sys.argv[2])
p = plan(load_spec(spec))
cols = index.numeric_columns(p.jobs[0])
for name, keep in (("all", None), ("pareto", "{pareto}"), ("top", "{top}")):
    # chunk 15 over 2 devices: each takes 8 points, one padded
    run_sweep(p, RunOptions(out=out / name, chunk=15, keep=parse_keep(keep, cols)))
print("traces", sorted(set(program.TRACES.values())))
index.FLOAT_CHUNK = 0  # each device's points decoded in int32, as chunks above 2^22 are
run_sweep(p, RunOptions(out=out / "all-int32", chunk=15))
print("front points given", max(given) > 0)
"""


ONE_CPU = """
import sys
from pathlib import Path
from sweep.inputs.grid import load_spec, plan
from sweep.engine.run import run_sweep
from sweep.engine.runstate import RunOptions

run_sweep(plan(load_spec(sys.argv[1])), RunOptions(out=Path(sys.argv[2]), chunk=int(sys.argv[3])))
"""


def test_forced_cpu_devices_give_the_same_rows(spec, reference, tmp_path):
    script = MULTI_DEVICE.format(pareto=PARETO, top=TOP)
    out = python_on_cpu_devices(script, spec, tmp_path, devices=2, SWEEP_JAX_CACHE="")
    if jax.default_backend() != "cpu":
        # a GPU contracts a * b + c into one rounding where the CPU does not (docs/performance.md):
        # the rows to match bit for bit are one CPU device's
        python_on_cpu_devices(ONE_CPU, spec, tmp_path / "one", CHUNK, SWEEP_JAX_CACHE="")
        reference = rows_of(tmp_path / "one")
    assert "traces [1]" in out, "one compilation per job, sharded or not"
    assert "front points given True" in out  # the Pareto run's later chunks had the host's front
    assert as_set(rows_of(tmp_path / "all")) == as_set(reference)
    assert as_set(rows_of(tmp_path / "all-int32")) == as_set(reference)
    assert keep_rows(tmp_path / "pareto") == expected_pareto(reference)
    assert keep_rows(tmp_path / "top") == expected_top(reference)


# ----------------------------------------------------------------------------- shards

KILLED_SHARD = """
import os, sys, time
from pathlib import Path
from sweep.inputs.grid import load_spec, parse_spec, plan
from sweep.engine.run import run_sweep
from sweep.engine.runstate import RunOptions, Shard

calls = [0]
out = Path(sys.argv[2])

def progress(done, total, elapsed):
    calls[0] += 1
    if calls[0] == 6:  # 6 chunks queued; once a writer thread has finished a part file,
        deadline = time.time() + 60  # (they write while this thread waits) die mid-run
        while not list(out.glob("part-*.parquet")) and time.time() < deadline:
            time.sleep(0.01)
        os._exit(9)  # killed: no clean-up, a writer thread may be mid-file

run_sweep(plan(load_spec(sys.argv[1])), RunOptions(out=out, chunk={chunk}, shard=Shard(0, 2)), progress)
"""


@pytest.fixture(scope="module")
def sharded(spec, reference, tmp_path_factory) -> Path:
    """Shard 0 of 2 killed mid-run in a subprocess and rerun, shard 1 run, then merged."""
    out = tmp_path_factory.mktemp("sharded") / "out"
    proc = subprocess.run(
        [sys.executable, "-c", KILLED_SHARD.format(chunk=CHUNK), str(spec), str(out)],
        capture_output=True,
        text=True,
        env={**os.environ, "SWEEP_JAX_CACHE": ""},
        cwd=ROOT,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 9, proc.stderr
    parts = sorted(out.glob("part-*.parquet"))
    assert parts, "the killed shard wrote some part files"
    for part in parts:  # complete files only
        assert pq.read_metadata(part).num_rows >= 0
    own = store.read_manifest(out, "_manifest-s0000of0002.parquet")
    assert own["complete"] is False
    result = sweep("merge", out)
    assert result.exit_code == 2, "an unfinished shard cannot be merged"
    # rerun the same command (a requeued array task): it resumes, then the other shard
    for k in (0, 1):
        result = sweep("run", spec, "-o", out, "--chunk", CHUNK, "--shard", f"{k}/2")
        assert result.exit_code == 0, result.output
        assert f"shard {k}/2" in result.output
    result = sweep("merge", out)
    assert result.exit_code == 0, result.output
    return out


def test_shards_killed_and_rerun_give_the_same_rows(sharded, reference):
    assert as_set(rows_of(sharded)) == as_set(reference)
    assert rows_of(sharded) == reference, "shards and their chunks are in grid order"
    assert temporaries(sharded) == []
    names = {f.name for f in sharded.glob("part-*.parquet")}
    assert names and all(n.startswith(("part-s0000of0002-", "part-s0001of0002-")) for n in names)
    merged = store.read_manifest(sharded)
    assert merged["complete"] is True
    assert merged["shards"] == 2
    assert merged["rows"] == len(reference)
    assert merged["run_key"]["shards"] == 2


def test_shard_boundary_cuts_a_job_off_chunk_boundaries(sharded, spec):
    p = plan(load_spec(spec))
    lo = spans(p.jobs, 1, 2)[0].lo
    assert lo % CHUNK != 0, "the second shard's chunks start mid-job, off the one-run chunk grid"
    m = store.read_manifest(sharded, "_manifest-s0001of0002.parquet")
    assert m["jobs"][0]["range"][0] == lo


def test_rerunning_a_finished_shard_writes_nothing(sharded, spec):
    before = {f.name: f.stat().st_mtime_ns for f in sharded.iterdir()}
    result = sweep("run", spec, "-o", sharded, "--chunk", CHUNK, "--shard", "1/2")
    assert result.exit_code == 0, result.output
    assert {f.name: f.stat().st_mtime_ns for f in sharded.iterdir()} == before


def test_merge_names_missing_and_unfinished_shards(sharded, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(sharded, broken)
    (broken / store.MANIFEST).unlink()
    (broken / "_manifest-s0001of0002.parquet").unlink()
    m0 = broken / "_manifest-s0000of0002.parquet"
    doc = {**store.read_manifest(broken, m0.name), "complete": False}
    store.write_manifest(m0, json.dumps(doc), pq.read_schema(m0))
    result = sweep("merge", broken)
    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    assert "s0000of0002 (incomplete" in line and "s0001of0002 (missing)" in line
    assert not (broken / store.MANIFEST).exists()


def test_merge_notices_a_deleted_part_file(sharded, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(sharded, broken)
    next(broken.glob("part-s0001of0002-*.parquet")).unlink()
    result = sweep("merge", broken)
    assert result.exit_code == 2
    assert "s0001of0002 (1 files missing)" in result.output


def test_a_shard_refuses_a_folder_of_another_sweep(sharded, spec):
    result = sweep("run", spec, "-o", sharded, "--chunk", CHUNK + 1, "--shard", "0/2")
    assert result.exit_code == 2
    assert "--overwrite" in result.output


def test_shards_with_keep_top_merge_to_the_one_run_result(spec, reference, tmp_path):
    out = tmp_path / "top"
    for k in (0, 1):
        run_api(spec, out, TOP, shard=Shard(k, 2))
    assert not (out / "part-keep.parquet").exists()
    result = sweep("merge", out)
    assert result.exit_code == 0, result.output
    assert keep_rows(out) == expected_top(reference)
    assert rows_of(out) == expected_top(reference), "the folder reads as the merged result only"
    assert store.read_manifest(out)["rows"] == 7
    assert not (out / store.state_name(store.shard_tag(0, 2))).exists(), "merged, then deleted"
    before = {f.name: f.stat().st_mtime_ns for f in out.iterdir()}
    assert sweep("merge", out).exit_code == 0, "merging again is harmless"
    run_api(spec, out, TOP, shard=Shard(1, 2))  # a requeued finished shard: nothing to do
    assert {f.name: f.stat().st_mtime_ns for f in out.iterdir()} == before


def test_shards_with_a_spilled_pareto_merge_to_the_one_run_result(spec, reference, tmp_path, monkeypatch):
    """Each shard's front and the merge's spill to disk after 2 rows (``:all``: a front of
    distinct optima never spills): the merged result is still the front of the full output,
    in grid order, and no spill file remains."""
    monkeypatch.setattr(reducer_module, "SPILL_ROWS", 2)
    monkeypatch.setattr(reducer_module, "SPILL_ROWS_MAX", 2)
    monkeypatch.setattr(reducer_module, "REDUCE_ROWS", 1)
    monkeypatch.setattr(reducer_module, "BATCH_ROWS", 1)
    spills: list[str] = []
    real = reducer_module.Reducer._spill
    monkeypatch.setattr(
        reducer_module.Reducer, "_spill", lambda self: spills.append(self.prefix) or real(self)
    )
    out = tmp_path / "pareto"
    for k in (0, 1):
        run_api(spec, out, PARETO + ":all", shard=Shard(k, 2))
    (out / "_spill-merge-000099.parquet").write_bytes(b"left by a merge that was killed")
    assert sweep("merge", out).exit_code == 0
    want = expected_pareto(reference, ties=True)
    assert len(want) > 2
    assert {"_spill-s0000of0002-", "_spill-s0001of0002-", "_spill-merge-"} <= set(spills)
    assert keep_rows(out) == want
    assert store.read_manifest(out)["rows"] == len(want)
    assert not list(out.glob("_spill-*")) and not temporaries(out)


# ----------------------------------------------------------------------------- Dask


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    import logging

    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        silence_logs=logging.ERROR,
    )
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


def test_dask_worker_killed_mid_run_gives_the_same_rows(client, spec, reference, tmp_path):
    marker = tmp_path / "killed-once"

    def kill_once(job: int, chunk: int) -> None:
        if (job, chunk) == (1, 2) and not marker.exists():
            marker.touch()
            os._exit(1)  # the worker process dies with the task in hand

    out = tmp_path / "out"
    summary = run_api(spec, out, dask=client, task_hook=kill_once)
    assert marker.exists(), "a worker was killed"
    assert as_set(rows_of(out)) == as_set(reference)
    p = plan(load_spec(spec))
    want = {store.part_name(j.index, c) for j in p.jobs for c in range(n_chunks(j, CHUNK))}
    assert {f.name for f in out.glob("part-*.parquet")} == want, "one part file per chunk"
    assert {f.name for f in out.iterdir()} == {*want, store.MANIFEST}, "nothing else left (Polars reads all)"
    m = store.read_manifest(out)
    assert m["complete"] is True
    assert m["rows"] == summary.rows == len(reference)
    assert m["done"] == {str(j.index): n_chunks(j, CHUNK) for j in p.jobs}


def test_dask_interrupted_then_resumed_gives_the_same_rows(client, spec, reference, tmp_path):
    out = tmp_path / "out"
    p = plan(load_spec(spec))
    calls = [0]

    def interrupt(done, total, elapsed):
        calls[0] += 1
        if calls[0] == 4:
            raise KeyboardInterrupt  # as Ctrl-C in the driver

    opts = RunOptions(out=out, chunk=CHUNK, dask=client)
    with pytest.raises(Interrupted, match="rerun with resume=True to continue"):
        run_sweep(p, opts, interrupt)
    m = store.read_manifest(out)
    assert m["complete"] is False and m["rows"] > 0
    opts.resume = True
    run_sweep(p, opts)
    assert as_set(rows_of(out)) == as_set(reference)
    assert len(list(out.glob("part-*.parquet"))) == sum(n_chunks(j, CHUNK) for j in p.jobs)
    assert store.read_manifest(out)["rows"] == len(reference)


def test_dask_keep_pareto_merges_the_workers_survivors(client, spec, reference, tmp_path):
    out = tmp_path / "out"
    run_api(spec, out, PARETO, dask=client)
    assert keep_rows(out) == expected_pareto(reference)
    assert rows_of(out) == expected_pareto(reference)


def test_dask_with_shards_and_keep_pareto(client, spec, reference, tmp_path):
    """Shards on a cluster (the workers reuse the functions they built for the test above)."""
    out = tmp_path / "out"
    for k in (0, 1):
        run_api(spec, out, PARETO, dask=client, shard=Shard(k, 2))
    assert sweep("merge", out).exit_code == 0
    assert keep_rows(out) == expected_pareto(reference)
    tags = [store.shard_tag(k, 2) for k in (0, 1)]
    want = {store.KEEP_PART, store.MANIFEST, *(store.manifest_name(t) for t in tags)}
    assert {f.name for f in out.iterdir()} == want, "the shards' results are merged and gone"


def test_dask_bad_local_count_is_an_input_error(spec, tmp_path):
    pytest.importorskip("distributed")
    result = sweep("run", spec, "-o", tmp_path / "out", "--dask", "local:0")
    assert result.exit_code == 2
    assert "local:N" in result.output
    assert result.output.startswith("error: --dask local:N needs a worker count N >= 1, got 'local:0'")


def test_missing_dask_is_one_line(spec, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import fails as if not installed
    result = sweep("run", spec, "-o", tmp_path / "out", "--dask", "local:2")
    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    assert "paradl-sweep[dask]" in line
    assert line.startswith("error: --dask needs Dask: pip install")


def test_run_help_mentions_the_distributed_options():
    result = sweep("run", "--help")
    assert "--shard" in result.output and "--dask" in result.output and "sweep merge" in result.output
