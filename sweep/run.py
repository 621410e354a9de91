"""``sweep run``: drive the engine over a plan and stream rows to a Parquet dataset folder.

The main thread dispatches chunk i+1 to the device before copying chunk i
back; writer threads turn finished chunks into part files (temporary name,
then rename) and record each in the manifest, so an interrupted run resumes
from the chunks written. Reductions (``--keep``) merge each chunk's
survivors on the host, on a thread of their own, and checkpoint the running
result every few seconds.

Beyond one process: ``--shard K/N`` evaluates the K-th of N equal contiguous
parts of the concatenated index space into the same folder under its own
file names (``sweep merge`` then checks and seals the dataset), and
``--dask ADDRESS`` hands chunks to Dask workers (:mod:`sweep.cluster`).
Both drive the same :class:`_Run` bookkeeping: which chunks are done, the
rows written, the running reduction and the manifest.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import itertools
import os
import queue
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import jax
import numpy as np
import pyarrow as pa

from sweep import backend, engine, store
from sweep.engine import Keep
from sweep.errors import InputError
from sweep.evaluate import RESULT_COLUMNS
from sweep.grid import Job, Plan
from sweep.reducer import Reducer, write_state

CHECKPOINT_S = 5.0
KEEP_PART = "part-keep.parquet"
#: Part files written at once by a local run (one core each while encoding).
WRITER_THREADS = max(1, min(8, os.cpu_count() or 1))
#: The most rows --keep top:K may keep: they stay in memory (about 100 bytes each, three
#: times that while a reduction sorts them), unlike a Pareto front, which spills to disk.
MAX_TOP_K = 1 << 20
#: The manifest's large parts, which never change during a run: encoded once (the others at each save).
_MANIFEST_FIXED = ("run_key", "versions", "jobs", "schema")
#: Kernels traced and compiled at once ahead of the job computing.
PREPARE_THREADS = 2


class Interrupted(Exception):
    """The run was stopped by a signal after writing what it had finished."""


@dataclass(frozen=True)
class Shard:
    """Shard ``k`` (0-based) of ``n`` of a run's index space."""

    k: int
    n: int

    @property
    def tag(self) -> str:
        return store.shard_tag(self.k, self.n)

    def __str__(self) -> str:
        return f"{self.k}/{self.n}"


def parse_shard(text: str) -> Shard:
    """``K/N`` with ``0 <= K < N`` (a Slurm array ``--array=0-15`` passes ``$SLURM_ARRAY_TASK_ID/16``)."""
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not m or not 0 <= int(m[1]) < int(m[2]):
        raise InputError(f"--shard must be K/N with 0 <= K < N, got '{text}'")
    return Shard(int(m[1]), int(m[2]))


#: Points per chunk of a run that writes rows: larger chunks write no faster, and hold more.
ROWS_CHUNK = 1 << 18
#: Points per chunk of a ``--keep`` reduction. A call's fixed cost (XLA runs a reducing
#: program as a few hundred small steps) is spread over 4x the points: on 2 CPU cores,
#: Pareto kernels ran at 133-147 M configs/s against 72-105 with 2^18, top-1 at 208-395
#: against 103-201.
REDUCE_CHUNK = 1 << 20
#: Points per chunk of a reduction on a GPU, where a call's fixed cost (a few hundred
#: microseconds: kernels launched, conditionals waiting for the host) is what a chunk
#: spreads. On an H200 the eight strategies' kernels ran at 22 G configs/s top-1 and 15 G/s
#: Pareto against 1.5 and 1.3 at 2^20; the bench's tied grid end to end 1.20 s against 1.51.
#: A program of 2^24 points holds 0.3-0.4 GB of temporaries (XLA's memory analysis).
GPU_REDUCE_CHUNK = 1 << 24


@dataclass
class RunOptions:
    out: Path
    #: Points per device chunk; 0 picks :data:`REDUCE_CHUNK` for a ``--keep`` reduction, else
    #: :data:`ROWS_CHUNK`; :func:`run_sweep` then picks :data:`GPU_REDUCE_CHUNK` for a
    #: reduction on a GPU, or a resumed run's own chunk (:func:`_settle_chunk`).
    chunk: int = 0
    x64: bool = False
    keep: Keep = field(default_factory=lambda: Keep("all"))
    only_feasible: bool = False
    columns: tuple[str, ...] | None = None
    resume: bool = False
    overwrite: bool = False
    compression: str = "zstd"
    #: Evaluate only this part of the index space (files named with its tag).
    shard: Shard | None = None
    #: Dask scheduler address, ``"local:N"`` for a local cluster, or a ``distributed.Client``.
    dask: Any = None
    #: Called on the Dask worker as ``hook(job, chunk)`` before each chunk (tests kill workers with it).
    task_hook: Callable[[int, int], None] | None = None
    #: Whether ``chunk`` was given rather than left to the default.
    chunk_given: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        self.chunk_given = bool(self.chunk)
        if not self.chunk:
            self.chunk = REDUCE_CHUNK if self.keep.reduces else ROWS_CHUNK


@dataclass
class Timings:
    """Where a local run's seconds went (``sweep run --timings``). The main thread's parts
    add up to its time from the first job to the end; the other threads' are summed over
    them and overlap the main thread's."""

    #: Main thread: waiting for a job's program (loaded or compiled on other threads).
    programs: float = 0.0
    #: Main thread: queuing chunks (a CPU may compute a chunk then, in the caller's thread).
    queue: float = 0.0
    #: Main thread: waiting for a queued chunk's results.
    device: float = 0.0
    #: Main thread: turning results into rows, or into a reduction's candidates.
    host: float = 0.0
    #: Of ``host``: evaluating a reducing chunk's candidates again (:class:`engine.Again`).
    again: float = 0.0
    #: Main thread: the reduction's result written, the manifest sealed.
    finish: float = 0.0
    #: Other threads: jobs' programs made ready (read back, lowered, compiled, loaded).
    prepare: float = 0.0
    #: How many programs were made ready.
    prepared: int = 0
    #: Other threads: part files encoded, or candidates merged into the reduction.
    sink: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, name: str, seconds: float) -> None:
        with self.lock:
            setattr(self, name, getattr(self, name) + seconds)

    def timed(self, name: str, fn: Callable) -> Callable:
        """``fn``, its calls' seconds added to ``name``."""

        def call(*args):
            began = time.perf_counter()
            try:
                return fn(*args)
            finally:
                self.add(name, time.perf_counter() - began)

        return call

    def describe(self) -> str:
        main = self.programs + self.queue + self.device + self.host + self.finish
        return (
            f"main thread {main:.2f} s: programs awaited {self.programs:.2f}, chunks queued "
            f"{self.queue:.2f}, results awaited {self.device:.2f}, host {self.host:.2f} (candidates "
            f"evaluated again {self.again:.2f}), final write {self.finish:.2f}; other threads: "
            f"{self.prepared} program(s) made ready {self.prepare:.2f} s, writing or merging "
            f"{self.sink:.2f} s"
        )


@dataclass
class RunSummary:
    rows: int
    points: int
    chunks: int
    seconds: float
    folder: Path
    #: Where the chunks ran (the manifest's ``devices``).
    devices: str = ""
    #: Where a local run's time went; None for a Dask run or one with nothing to do.
    timings: Timings | None = None

    @property
    def points_per_s(self) -> float:
        return self.points / self.seconds if self.seconds > 0 else float("inf")


def parse_keep(text: str | None, columns: tuple[str, ...]) -> Keep:
    """``pareto:COL,COL[,...]`` or ``top:K:COL``; columns must be float result columns."""
    if not text or text == "all":
        return Keep("all")
    kind, _, rest = text.partition(":")
    if kind == "pareto":
        cols = tuple(c.strip() for c in rest.split(",") if c.strip())
        if len(cols) < 1:
            raise InputError("--keep pareto needs columns, e.g. pareto:t_epoch_s,p")
        keep = Keep("pareto", cols)
    elif kind == "top":
        k_text, _, col = rest.partition(":")
        try:
            k = int(k_text)
        except ValueError:
            raise InputError(f"--keep top:K:COL needs an integer K, got '{k_text}'") from None
        if k < 1 or not col:
            raise InputError("--keep top:K:COL needs K >= 1 and a column")
        if k > MAX_TOP_K:
            raise InputError(
                f"--keep top:K:COL holds K rows in memory: K must be <= {MAX_TOP_K:,}, got {k:,}"
                " (for more, write the rows, e.g. with --only-feasible, and query them with sweep top)"
            )
        keep = Keep("top", (col.strip(),), k)
    else:
        raise InputError(f"--keep must be all, pareto:COLS or top:K:COL, got '{text}'")
    for c in keep.columns:
        if c not in columns:
            raise InputError(f"--keep: unknown or non-numeric column '{c}' (known: {', '.join(columns)})")
    return keep


class _Workers:
    """Runs ``handle(*item)`` for each queued item on ``threads`` threads, off the main thread.

    The main thread feeds the device; the workers turn finished chunks into
    part files (Parquet encoding holds one core per file, about 5.3 M rows/s
    of a 24-column chunk measured, so several files are written at once and may
    finish out of order: the manifest keeps track, see :class:`_Done`), or
    merge a reduction's candidates (one thread, in chunk order). The queue
    holds at most two items a thread, so chunks waiting stay few. A worker's
    error stops the others' work and is raised by the next :meth:`put` or
    by :meth:`close`.
    """

    def __init__(self, handle: Callable[..., None], threads: int, name: str):
        self.handle = handle
        self.jobs: queue.Queue = queue.Queue(maxsize=2 * threads)
        self.threads = [
            threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True) for i in range(threads)
        ]
        self.error: BaseException | None = None

    def start(self) -> _Workers:
        for thread in self.threads:
            thread.start()
        return self

    def _work(self) -> None:
        while True:
            item = self.jobs.get()
            if item is None:
                return
            try:
                if self.error is None:
                    self.handle(*item)
            except BaseException as err:  # surfaced by the main thread
                self.error = err

    def put(self, item: tuple) -> None:
        if self.error is not None:
            raise self.error
        self.jobs.put(item)

    def close(self, raise_error: bool = True) -> None:
        """Finish the queued items (none more after an error) and stop the threads."""
        for _ in self.threads:
            self.jobs.put(None)
        for thread in self.threads:
            thread.join()
        if self.error is not None and raise_error:
            raise self.error


class _Done:
    """Finished chunks per job: a contiguous prefix, and any finished out of order beyond it.

    The manifest keeps them as ``done`` (job -> chunks finished from the
    first) and ``done_extra`` (job -> chunk numbers finished past the
    prefix: part files written in parallel, or by Dask workers, complete out
    of order).
    """

    def __init__(self, manifest: dict):
        self.prefix = {int(k): int(v) for k, v in manifest.get("done", {}).items()}
        self.extra = {int(k): {int(c) for c in v} for k, v in manifest.get("done_extra", {}).items()}

    def has(self, job: int, number: int) -> bool:
        return number < self.prefix.get(job, 0) or number in self.extra.get(job, ())

    def mark(self, job: int, number: int) -> None:
        extra = self.extra.setdefault(job, set())
        extra.add(number)
        first = self.prefix.get(job, 0)
        while first in extra:
            extra.remove(first)
            first += 1
        self.prefix[job] = first
        if not extra:
            del self.extra[job]

    def count(self, job: int) -> int:
        return self.prefix.get(job, 0) + len(self.extra.get(job, ()))

    def points(self, span: engine.Span, chunk: int) -> int:
        """Points of ``span`` in finished chunks."""
        job = span.job.index
        first = min(self.prefix.get(job, 0) * chunk, span.hi - span.lo)
        return first + sum(span.unit(c, chunk)[1] for c in self.extra.get(job, ()))

    def to_json(self) -> tuple[dict, dict]:
        return dict(self.prefix), {j: sorted(v) for j, v in self.extra.items()}


class _Run:
    """One run (or shard of a run) of a plan: its schema, spans, done chunks, reduction and manifest."""

    def __init__(self, plan: Plan, opts: RunOptions):
        self.plan = plan
        self.opts = opts
        self.dtype = np.float64 if opts.x64 else np.float32
        self.tag = opts.shard.tag if opts.shard else None
        jobs = plan.jobs
        schema = store.Schema(
            models=list(plan.models),
            machines=list(plan.machines),
            strategies=list(plan.spec.strategies),
            int_columns=engine.int_columns(jobs[0]),
            float_columns=RESULT_COLUMNS,
            float_type=pa.float64() if opts.x64 else pa.float32(),
            metadata=_metadata(plan, opts),
            axis_values={k: plan.spec.axes[k] for k in jobs[0].machine_axes},
        )
        names = schema.all_names()
        if opts.columns is not None:
            bad = [c for c in opts.columns if c not in names]
            if bad:
                raise InputError(f"--columns: unknown column '{bad[0]}' (known: {', '.join(names)})")
            schema.columns = tuple(c for c in names if c in opts.columns)
        self.schema = schema
        self.run_key: dict[str, Any] = {
            "spec": plan.spec.text,
            "chunk": opts.chunk,
            "x64": opts.x64,
            "keep": opts.keep.describe(),
            "only_feasible": opts.only_feasible,
            "columns": list(schema.columns) if schema.columns else None,
        }
        if opts.shard is not None:
            self.run_key["shards"] = opts.shard.n
        self.folder = opts.out
        previous = store.prepare_folder(self.folder, opts.resume, opts.overwrite, self.run_key, self.tag)
        self.previous = previous or {}
        k, n = (opts.shard.k, opts.shard.n) if opts.shard else (0, 1)
        self.spans = engine.spans(jobs, k, n)
        self.done = _Done(self.previous)
        self.manifest: dict[str, Any] = {
            "format": 1,
            "name": plan.spec.name,
            "spec_path": plan.spec.path,
            "run_key": self.run_key,
            "versions": store.versions(),
            "jobs": [
                {
                    "index": s.job.index,
                    "model": s.job.bound.model.name,
                    "machine": s.job.bound.profile.name,
                    "strategy": s.job.strategy,
                    "axes": {k: v.tolist() for k, v in s.job.axes.items()},
                    "points": s.job.size,
                    "range": [s.lo, s.hi],
                    "chunks": s.chunks(opts.chunk),
                }
                for s in self.spans
            ],
            "done": {},
            "done_extra": {},
            "rows": int(self.previous.get("rows", 0)),
            "complete": False,
            "compression": opts.compression,
            "schema": schema.to_json(),
            # this run's, local or Dask's driver (a resumed run may have run elsewhere)
            "devices": "Dask workers" if opts.dask is not None else engine.describe_devices(),
        }
        if opts.shard is not None:
            self.manifest["shard"] = {"k": opts.shard.k, "n": opts.shard.n}
        self.lock = threading.Lock()
        self.manifest_text = store.ManifestText(_MANIFEST_FIXED)
        self.part_writer = store.PartWriter(
            self.folder, schema.arrow(), opts.compression, schema.statistics_columns()
        )
        self.reducer = None
        self.keep_seq = int(self.previous.get("keep_seq", 0))
        if opts.keep.reduces:
            prefix = f"_spill-{self.tag}-" if self.tag else "_spill-"
            self.reducer = Reducer(opts.keep, schema, self.folder, prefix)
            spills = list(self.previous.get("keep_spill", []))
            self.reducer.adopt(spills)
            self.manifest["keep_spill"] = spills
            if self.previous.get("keep_state"):
                self.reducer.load(self.folder / self.previous["keep_state"])
                self.manifest["keep_state"] = self.previous["keep_state"]
                self.manifest["keep_seq"] = self.keep_seq
        self.last_checkpoint = time.perf_counter()
        self.checkpoint_s = 0.0  # how long the last checkpoint took
        self.total_points = sum(s.hi - s.lo for s in self.spans)
        self.points_done = sum(self.done.points(s, opts.chunk) for s in self.spans)
        self.points_this_run = 0
        self.chunks_this_run = 0
        self.started = time.perf_counter()
        self.timings: Timings | None = None  # set by a local run

    @property
    def complete(self) -> bool:
        return bool(self.previous.get("complete"))

    def units(self, span: engine.Span | None = None) -> Iterator[tuple[engine.Span, int, int, int]]:
        """(span, chunk number, start, real points) of every chunk not done yet (of one span), in order."""
        chunk = self.opts.chunk
        for s in self.spans if span is None else [span]:
            first = self.done.prefix.get(s.job.index, 0)
            for number in range(first, s.chunks(chunk)):
                if not self.done.has(s.job.index, number):
                    yield (s, number, *s.unit(number, chunk))

    def part_name(self, job: int, number: int) -> str:
        return store.part_name(job, number, self.tag)

    def save_manifest(self) -> None:
        """Write the manifest (callers hold :attr:`lock` when other threads may record)."""
        self.manifest["done"], self.manifest["done_extra"] = self.done.to_json()
        store.atomic_write_text(
            self.folder / store.manifest_name(self.tag), self.manifest_text(self.manifest)
        )

    def record(self, job: int, number: int, rows: int) -> None:
        """A part file of chunk ``number`` of ``job`` with ``rows`` rows is in place."""
        with self.lock:
            self.done.mark(job, number)
            self.manifest["rows"] += rows
            self.save_manifest()

    def write_part(
        self, name: str, job: int, number: int, labels: tuple[str, str, str], ints, floats, limit
    ) -> None:
        """Write chunk ``number`` of job ``job`` (its columns on the host) as part file ``name``."""
        table = self.schema.table(labels, ints, floats, limit)
        self.part_writer.write(name, table)
        self.record(job, number, len(table))

    def add_survivors(self, job: Job, number: int, start: int, found: engine.Survivors) -> None:
        """Merge a reducing chunk's candidates and checkpoint every :data:`CHECKPOINT_S` seconds,
        or less often when writing the running result takes long (at most a tenth of the time)."""
        assert self.reducer is not None
        self.reducer.add(job.index, _labels(job), start + found.local.astype(np.int64), found)
        with self.lock:
            self.done.mark(job.index, number)
        spilled = self.reducer.spills != self.manifest["keep_spill"]  # rows left memory: record where
        if spilled or time.perf_counter() - self.last_checkpoint >= max(CHECKPOINT_S, 10 * self.checkpoint_s):
            self.checkpoint()

    def advance(self, points: int, progress: Callable[[int, int, float], None] | None) -> None:
        self.points_done += points
        self.points_this_run += points
        self.chunks_this_run += 1
        if progress is not None:
            progress(self.points_done, self.total_points, time.perf_counter() - self.started)

    def checkpoint(self) -> None:
        """Write the running reduction and the done chunks together (state file, then manifest).

        The state file holds the rows in memory; the manifest also lists the spills."""
        assert self.reducer is not None
        began = time.perf_counter()
        self.keep_seq += 1
        prefix = f"_keep-{self.tag}-" if self.tag else "_keep-"
        name = f"{prefix}{self.keep_seq:06d}.parquet"
        self._write_state(name)
        old = self.manifest.get("keep_state")
        with self.lock:
            self.manifest["keep_state"] = name
            self.manifest["keep_seq"] = self.keep_seq
            self.manifest["keep_spill"] = list(self.reducer.spills)
            self.save_manifest()
        if old and old != name:
            (self.folder / old).unlink(missing_ok=True)
        self.last_checkpoint = time.perf_counter()
        self.checkpoint_s = self.last_checkpoint - began

    def _write_state(self, name: str) -> None:
        assert self.reducer is not None
        write_state(self.folder / name, [self.reducer.state_table()])

    def finish(self) -> None:
        """Seal the run: the reduction's result, then ``complete`` in the manifest.

        A shard's reduction stays a state file (``_keep-sKofN.parquet``, with
        the row identities that ``sweep merge`` breaks ties by); an unsharded
        run writes ``part-keep.parquet``.
        """
        if self.reducer is not None:
            if self.tag is None:
                rows = self.part_writer.write_tables(KEEP_PART, self.reducer.tables())
                self.manifest.pop("keep_state", None)
            else:
                name = f"_keep-{self.tag}.parquet"
                rows = write_state(self.folder / name, self.reducer.state_tables())
                self.manifest["keep_state"] = name
            self.manifest["rows"] = rows
            self.manifest.pop("keep_spill", None)
        with self.lock:
            self.manifest["complete"] = True
            self.save_manifest()
        if self.reducer is not None:  # once the manifest no longer names them
            checkpoints = f"_keep-{self.tag}-*.parquet" if self.tag else "_keep-[0-9]*.parquet"
            for f in self.folder.glob(checkpoints):
                f.unlink()
            self.reducer.discard_spills()
        store.remove_temporaries(self.folder, self.tag)  # of a worker or shard killed mid-write

    def interrupted(self) -> None:
        if self.reducer is not None:
            self.checkpoint()
        with self.lock:
            self.save_manifest()
        store.remove_temporaries(self.folder, self.tag)

    def summary(self) -> RunSummary:
        seconds = time.perf_counter() - self.started
        return RunSummary(
            self.manifest["rows"],
            self.points_this_run,
            self.chunks_this_run,
            seconds,
            self.folder,
            self.manifest["devices"],
            self.timings,
        )


def run_sweep(
    plan: Plan, opts: RunOptions, progress: Callable[[int, int, float], None] | None = None
) -> RunSummary:
    """Evaluate every job of ``plan`` (or the shard ``opts.shard`` of it) into the folder ``opts.out``.

    Chunks run on every local device (:func:`sweep.engine.build_chunk_fn`),
    or on Dask workers when ``opts.dask`` is set (:func:`sweep.cluster.execute`).
    """
    if opts.x64:
        jax.config.update("jax_enable_x64", True)
    backend.start()  # unless JAX is already running in this process
    opts = _settle_chunk(opts)
    run = _Run(plan, opts)
    if run.complete:
        return RunSummary(int(run.previous["rows"]), 0, 0, 0.0, run.folder, run.manifest["devices"])
    client, owned = None, []
    if opts.dask is not None:  # before the first manifest: a bad address leaves nothing behind
        from sweep import cluster

        client, owned = cluster.connect(opts.dask)
    old_term = signal.getsignal(signal.SIGTERM)
    main_thread = threading.current_thread() is threading.main_thread()
    if main_thread:
        signal.signal(signal.SIGTERM, _raise_interrupt)
    hint = "rerun the same command" if run.tag else "rerun with --resume"  # how to continue a stop
    try:
        with run.lock:
            run.save_manifest()
        if client is not None:
            cluster.execute(run, progress, client)
        else:
            _execute_local(run, progress)
        began = time.perf_counter()
        run.finish()
        if run.timings is not None:
            run.timings.finish = time.perf_counter() - began
    except KeyboardInterrupt:
        run.interrupted()
        raise Interrupted(
            f"interrupted: {run.manifest['rows']:,} rows in {run.folder}; {hint} to continue"
        ) from None
    except OSError as err:
        # a full disk, a folder gone or made read-only: keep what is finished, as an interrupt does
        with contextlib.suppress(OSError):
            run.interrupted()
        with contextlib.suppress(OSError):
            store.remove_temporaries(run.folder, run.tag)
        what = os.strerror(err.errno) if err.errno else str(err)
        raise InputError(
            f"stopped: {what}; {run.manifest['rows']:,} rows kept; fix it and {hint} to continue",
            str(run.folder),
        ) from None
    except BaseException:
        store.remove_temporaries(run.folder, run.tag)
        raise
    finally:
        for thing in owned:
            thing.close()
        if main_thread:
            signal.signal(signal.SIGTERM, old_term)
    return run.summary()


def _settle_chunk(opts: RunOptions) -> RunOptions:
    """``opts`` with the chunk a run takes where ``--chunk`` was not given: a ``--resume``
    continues with the chunk its folder's run was written with (which may have run on
    another kind of device), and a reduction on local GPUs runs :data:`GPU_REDUCE_CHUNK`
    (a Dask run keeps the CPU's default: the driver does not know its workers' devices)."""
    if opts.chunk_given:
        return opts
    if opts.resume and opts.shard is None and opts.out.is_dir():
        manifest = store.read_manifest(opts.out)
        key = manifest.get("run_key") if isinstance(manifest, dict) else None
        chunk = key.get("chunk") if isinstance(key, dict) else None
        if type(chunk) is int and 1 <= chunk <= engine.MAX_CHUNK:
            return replace(opts, chunk=chunk)
    if opts.keep.reduces and opts.dask is None and engine.local_devices()[0].platform != "cpu":
        return replace(opts, chunk=GPU_REDUCE_CHUNK)
    return opts


def _execute_local(run: _Run, progress: Callable[[int, int, float], None] | None) -> None:
    """Every chunk not done yet, on this process's devices: dispatch chunk i+1, then collect chunk i."""
    opts = run.opts
    timings = run.timings = Timings()
    # Part files are encoded on several threads; a reduction merges candidates on one, in
    # order, while this thread waits for the next chunk (0.25 s of every second of the
    # bench's tied 5.5e7-point Pareto grid went to merging on this thread).
    if run.reducer is None:
        sink = _Workers(timings.timed("sink", run.write_part), WRITER_THREADS, "sweep-write").start()
    else:
        sink = _Workers(timings.timed("sink", run.add_survivors), 1, "sweep-reduce").start()
    prepare = timings.timed("prepare", engine.prepare)
    # Jobs with chunks left. The next few jobs' kernels are prepared on other threads
    # while a job computes: a warm start traces and lowers each kernel (0.3-0.8 s
    # apiece on a CPU, as long as a small job's chunks take). At most PREPARE_THREADS
    # jobs ahead, so a plan of many jobs does not hold every compiled kernel at once.
    work = []
    for span in run.spans:
        units = run.units(span)
        head = next(units, None)
        if head is not None:
            work.append((span, units, head))
    pool = ThreadPoolExecutor(max_workers=PREPARE_THREADS, thread_name_prefix="sweep-prepare")
    ahead: collections.deque = collections.deque()  # kernels of jobs i, i+1, ... being prepared
    submitted = 0
    # A reducing chunk with more candidates than it compacts (ties: below 8 GPUs every network
    # setting ties) has them evaluated again (engine.Again), by a second kernel compiled on
    # first use on the main thread (0.4-0.9 s, or 0.04-0.13 s from the caches). Once one job of a run needed
    # it, the jobs after it likely will: their fallbacks are prepared ahead with their kernels.
    fallbacks: dict[int, Future] = {}

    def fallback(k: int, job: Job) -> tuple[Callable, tuple]:
        made = fallbacks.pop(k, None)
        return made.result() if made is not None else engine.prepare_points(job, run.dtype)

    def prepare_fallback(k: int) -> None:
        job = work[k][0].job
        if (
            run.reducer is not None
            and k not in fallbacks
            and not engine.reduced_on_host(job, opts.chunk, opts.keep)
        ):
            fallbacks[k] = pool.submit(engine.prepare_points, job, run.dtype)

    # A Pareto reduction of two objectives passes each chunk the front its reducer holds so far
    # (engine.known_front): the bench's tied grid had 2.0 M rows tied on the fronts of single
    # chunks, 1.3 M of them dominated by rows of earlier jobs, each evaluated again and merged.
    # Not when an objective is a swept machine parameter: the device reduces it by rank (see
    # engine.build_chunk_fn), the host by value.
    by_axis = any(c in run.schema.axis_values for c in opts.keep.columns)
    fronts = (
        run.reducer if opts.keep.kind == "pareto" and len(opts.keep.columns) == 2 and not by_axis else None
    )
    given: list = [None, engine.known_front(None, run.dtype)]  # the vectors read last, their points

    def known() -> np.ndarray:
        vectors = fronts.vectors if fronts is not None else None
        if vectors is not given[0]:  # the reducer replaces its vectors, never changes them
            given[:] = [vectors, engine.known_front(vectors, run.dtype)]
        return given[1]

    tied = False

    def collect(
        k: int, job: Job, whole: bool, again: engine.Again, number: int, start: int, n_real: int, out
    ) -> None:
        """Hand chunk ``number`` of ``work[k]``'s job to the writers or the reducer."""
        nonlocal tied
        began = time.perf_counter()
        jax.block_until_ready(out)
        ready = time.perf_counter()
        timings.device += ready - began
        if run.reducer is None:
            rows = chunk_rows(job, out, opts.only_feasible)
            sink.put((run.part_name(job.index, number), job.index, number, *rows))
        else:
            if whole:
                found = engine.host_candidates(out, opts.keep, job)
            else:
                before = again.seconds
                found = engine.survivors(out, again.at(start))
                timings.again += again.seconds - before
                if again.used and not tied:
                    tied = True
                    for later in range(k + 1, submitted):
                        prepare_fallback(later)
            sink.put((job, number, start, found))
        run.advance(n_real, progress)
        timings.host += time.perf_counter() - ready

    # Chunk i+1 is queued before chunk i is collected, across jobs too: a job's last chunk
    # computes while the next job's program is awaited and its first chunk queued (on 2 CPU
    # cores the tied grid's main thread waited 80 ms in all for programs, nothing queued).
    pending: tuple | None = None
    try:
        for i, (span, units, head) in enumerate(work):
            while submitted < len(work) and submitted <= i + PREPARE_THREADS:
                upcoming = work[submitted][0].job
                size = engine.program_chunk(upcoming, opts.chunk)
                ahead.append(pool.submit(prepare, upcoming, size, opts.keep, run.dtype))
                timings.prepared += 1
                if tied:
                    prepare_fallback(submitted)
                submitted += 1
            began = time.perf_counter()
            fn, (net, machine, values), whole = ahead.popleft().result()
            timings.programs += time.perf_counter() - began
            job = span.job
            size = engine.program_chunk(job, opts.chunk)  # as the job's program was compiled
            # its fallback as prepared by the time a chunk needs it (the previous job's last
            # chunk, collected after this job's first is queued, may be what asks for it)
            again = engine.Again(job, run.dtype, points=functools.partial(fallback, i, job))
            for _span, number, start, n_real in itertools.chain([head], units):
                began = time.perf_counter()
                info = engine.decode_info(job, start, size)
                out = fn(net, machine, values, info, np.int32(n_real), known())
                timings.queue += time.perf_counter() - began
                if pending is not None:
                    collect(*pending)
                pending = (i, job, whole, again, number, start, n_real, out)
        if pending is not None:
            collect(*pending)
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        sink.close(raise_error=False)
        raise
    pool.shutdown(wait=False)
    sink.close()


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def chunk_rows(job: Job, out: engine.ChunkOut, only_feasible: bool):
    """(labels, ints, floats, limit) of a chunk's rows to write, on the host."""
    ints, floats, limit, mask = (np.asarray(a) for a in (out.ints, out.floats, out.limit, out.mask))
    if only_feasible:
        mask = mask & (limit == 0)
    where = np.flatnonzero(mask)
    sel: slice | np.ndarray = where
    if len(where) and where[-1] - where[0] + 1 == len(where):  # one contiguous window: views, no copy
        sel = slice(int(where[0]), int(where[-1]) + 1)
    ints, floats, limit = ints[:, sel], floats[:, sel], limit[sel]
    return _labels(job), ints, floats, limit


def _labels(job: Job) -> tuple[str, str, str]:
    return (job.bound.model.name, job.bound.profile.name, job.strategy)


def _metadata(plan: Plan, opts: RunOptions) -> dict:
    return {
        "tool": "paradl-sweep",
        "versions": store.versions(),
        "spec": plan.spec.text,
        "spec_path": plan.spec.path,
        "models": {name: m.describe() for name, m in plan.models.items()},
        "machines": {name: m.describe() for name, m in plan.machines.items()},
        "x64": opts.x64,
        "keep": opts.keep.describe(),
        "units": "SI: seconds (_s), bytes (_bytes), bytes/s (_Bps), FLOP/s (gpu_flops)",
    }


def format_progress(done: int, total: int, elapsed: float) -> str:
    rate = done / elapsed if elapsed > 0 else 0.0
    eta = (total - done) / rate if rate > 0 else float("inf")
    pct = 100.0 * done / total if total else 100.0
    eta_text = f"{eta:,.0f} s" if np.isfinite(eta) else "?"
    return f"\r{done:,}/{total:,} points ({pct:5.1f}%)  {rate:,.0f} points/s  ETA {eta_text}   "


def tty_progress() -> Callable[[int, int, float], None] | None:
    if not sys.stderr.isatty():
        return None
    last = [0.0]

    def show(done: int, total: int, elapsed: float) -> None:
        if elapsed - last[0] >= 0.25 or done >= total:
            last[0] = elapsed
            sys.stderr.write(format_progress(done, total, elapsed))
            sys.stderr.flush()

    return show
