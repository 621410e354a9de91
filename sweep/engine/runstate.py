"""A run's state: its options, which chunks are done, the dataset folder's manifest,
the part writer and the reducer, checkpointed so ``--resume`` continues where it stopped.

The local loop (:mod:`sweep.engine.run`) and Dask (:mod:`sweep.engine.cluster`) drive the
same :class:`RunState`.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from sweep.engine import devices, index, program
from sweep.engine.evaluate import RESULT_COLUMNS
from sweep.errors import InputError
from sweep.inputs.grid import Job, Plan
from sweep.output import store
from sweep.output.manifest import FIXED_KEYS, Manifest
from sweep.reduce.keep import Keep, Survivors
from sweep.reduce.reducer import Reducer, write_state

CHECKPOINT_S = 5.0


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
        raise InputError(f"shard must be K/N with 0 <= K < N, got '{text}'", param="shard")
    return Shard(int(m[1]), int(m[2]))


#: Points per chunk of a run that writes rows: larger chunks write no faster, and hold more.
ROWS_CHUNK = 1 << 18
#: Points per chunk of a ``--keep`` reduction: a call's fixed cost (XLA runs a reducing
#: program as a few hundred small steps) is spread over more points than :data:`ROWS_CHUNK`.
REDUCE_CHUNK = 1 << 20
#: Points per chunk of a reduction on a GPU, where a call's fixed cost (kernels launched,
#: conditionals waiting for the host) is what a chunk spreads (docs/performance.md#gpu-figures-one-h200).
#: A program of 2^24 points holds a few hundred MB of temporaries.
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
    #: Whether a run that writes every row first checks the free space against its estimate
    #: (:func:`sweep.engine.run.check_free_space`; ``--no-space-check`` turns it off).
    space_check: bool = True
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
    #: Of ``host``: evaluating a reducing chunk's candidates again (:class:`survivors.Again`).
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
    """What a run did: rows in the folder, points evaluated by this call, and its times."""

    rows: int
    points: int
    chunks: int
    #: From the run's state set up to the end (what ``points_per_s`` divides by).
    seconds: float
    folder: Path
    #: Where the chunks ran (the manifest's ``devices``).
    devices: str = ""
    #: Where a local run's time went; None for a Dask run or one with nothing to do.
    timings: Timings | None = None
    #: From the call to :func:`~sweep.engine.run.run_sweep` to its return, start-up included.
    wall: float = 0.0
    #: The shard run, if any.
    shard: Shard | None = None
    #: Whether the run kept a reduction (``--keep pareto|top``) rather than every row.
    reduced: bool = False
    #: Seconds before the run: reading the spec and building its models' tables (the plan);
    #: a GPT model's tables take seconds, which :attr:`wall` does not hold.
    prepare_s: float = 0.0

    @property
    def points_per_s(self) -> float:
        """Points per second of the whole run after start-up, compilation included."""
        return self.points / self.seconds if self.seconds > 0 else float("inf")

    @property
    def compile_s(self) -> float | None:
        """Seconds of the run spent waiting for jobs' programs (traced, compiled or loaded from
        the caches on other threads, :attr:`Timings.programs`); None where unknown (a Dask run).
        Compilation that overlapped evaluation is not in it."""
        return self.timings.programs if self.timings is not None else None

    @property
    def evaluate_s(self) -> float:
        """Seconds of the run less :attr:`compile_s`: evaluation alone."""
        return max(self.seconds - (self.compile_s or 0.0), 0.0)

    @property
    def evaluate_points_per_s(self) -> float:
        """Points per second of evaluation alone (:attr:`evaluate_s`)."""
        return self.points / self.evaluate_s if self.evaluate_s > 0 else float("inf")

    def lines(self, timings: bool = False) -> list[str]:
        """What ``sweep run`` prints when done (``timings``: where the time went, too)."""
        what = f"shard {self.shard}: " if self.shard else ""
        kept = "kept (this shard's front or top-k) in" if self.shard and self.reduced else "written to"
        rate = self.points / self.wall if self.wall else 0
        if self.compile_s is None:  # a Dask run: the workers compile
            speed = f"{self.points_per_s:,.0f} points/s after start-up"
        else:
            speed = (
                f"compiling {self.compile_s:.2f} s, evaluating {self.evaluate_s:.2f} s at "
                f"{self.evaluate_points_per_s:,.0f} points/s"
            )
        out = [
            f"{what}{self.rows:,} rows {kept} {self.folder} ({self.points:,} points evaluated "
            f"in {self.wall:.2f} s, {rate:,.0f} points/s; {speed}; on {self.devices}"
            + (
                f"; before that, the spec and its models' tables took {self.prepare_s:.2f} s)"
                if self.prepare_s
                else ")"
            )
        ]
        if self.shard:
            out.append(f"when all {self.shard.n} shards are done: sweep merge {self.folder}")
        if timings:
            said = self.timings.describe() if self.timings else "none (a Dask run, or nothing left to run)"
            out.append(f"timings: {said}")
        return out


class DoneChunks:
    """Finished chunks per job: a contiguous prefix, and any finished out of order beyond it.

    The manifest keeps them as ``done`` (job -> chunks finished from the
    first) and ``done_extra`` (job -> chunk numbers finished past the
    prefix: part files written in parallel, or by Dask workers, complete out
    of order).
    """

    def __init__(self, done: Mapping | None = None, done_extra: Mapping | None = None):
        self.prefix = {int(k): int(v) for k, v in (done or {}).items()}
        self.extra = {int(k): {int(c) for c in v} for k, v in (done_extra or {}).items()}

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

    def points(self, span: index.Span, chunk: int) -> int:
        """Points of ``span`` in finished chunks."""
        job = span.job.index
        first = min(self.prefix.get(job, 0) * chunk, span.hi - span.lo)
        return first + sum(span.unit(c, chunk)[1] for c in self.extra.get(job, ()))

    def to_json(self) -> tuple[dict, dict]:
        return dict(self.prefix), {j: sorted(v) for j, v in self.extra.items()}


class RunState:
    """One run (or shard of a run) of a plan: its schema, spans, done chunks, reduction and manifest."""

    def __init__(self, plan: Plan, opts: RunOptions):
        self.plan = plan
        self.opts = opts
        self.dtype = np.float64 if opts.x64 else np.float32
        self.tag = opts.shard.tag if opts.shard else None
        self.schema = run_schema(plan, opts)
        self.run_key = run_key(plan, opts, self.schema)
        self.folder = opts.out
        previous = store.prepare_folder(self.folder, opts.resume, opts.overwrite, self.run_key, self.tag)
        #: The manifest this run resumes from (an empty one for a fresh run).
        self.previous = previous or Manifest()
        k, n = (opts.shard.k, opts.shard.n) if opts.shard else (0, 1)
        self.spans = index.spans(plan.jobs, k, n)
        self.done = DoneChunks(self.previous.done, self.previous.done_extra)
        self.manifest = new_manifest(plan, opts, self.schema, self.run_key, self.spans)
        self.manifest.rows = int(self.previous.rows or 0)
        self.lock = threading.Lock()
        self.manifest_text = store.ManifestText(FIXED_KEYS)
        self.part_writer = store.PartWriter(
            self.folder, self.schema.arrow(), opts.compression, self.schema.statistics_columns()
        )
        self.keep_seq = int(self.previous.keep_seq or 0)
        self.reducer = self._resume_reducer() if opts.keep.reduces else None
        self.last_checkpoint = time.perf_counter()
        self.checkpoint_s = 0.0  # how long the last checkpoint took
        self.total_points = sum(s.hi - s.lo for s in self.spans)
        self.points_done = sum(self.done.points(s, opts.chunk) for s in self.spans)
        self.points_this_run = 0
        self.chunks_this_run = 0
        self.started = time.perf_counter()
        self.timings: Timings | None = None  # set by a local run

    def _resume_reducer(self) -> Reducer:
        """The run's reducer, holding the spills and running state of the run it resumes, if any
        (recorded in :attr:`manifest` again)."""
        reducer = Reducer(self.opts.keep, self.schema, self.folder, store.spill_prefix(self.tag))
        spills = list(self.previous.keep_spill or [])
        reducer.adopt(spills)
        self.manifest.keep_spill = spills
        # a complete shard's result may be merged and gone; a complete run needs nothing
        if self.previous.keep_state and not self.previous.complete:
            reducer.load(self.folder / self.previous.keep_state)
            self.manifest.keep_state = self.previous.keep_state
            self.manifest.keep_seq = self.keep_seq
        return reducer

    @property
    def complete(self) -> bool:
        return bool(self.previous.complete)

    def units(self, span: index.Span | None = None) -> Iterator[tuple[index.Span, int, int, int]]:
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
        self.manifest.done, self.manifest.done_extra = self.done.to_json()
        store.write_manifest(
            self.folder / store.manifest_name(self.tag),
            self.manifest_text(self.manifest.to_json()),
            self.part_writer.schema,
        )

    def record(self, job: int, number: int, rows: int) -> None:
        """A part file of chunk ``number`` of ``job`` with ``rows`` rows is in place."""
        with self.lock:
            self.done.mark(job, number)
            self.manifest.rows += rows
            self.save_manifest()

    def write_part(
        self, name: str, job: int, number: int, labels: tuple[str, str, str], ints, floats, limit
    ) -> None:
        """Write chunk ``number`` of job ``job`` (its columns on the host) as part file ``name``."""
        table = self.schema.table(labels, ints, floats, limit)
        self.part_writer.write(name, table)
        self.record(job, number, len(table))

    def add_survivors(self, job: Job, number: int, start: int, found: Survivors) -> None:
        """Merge a reducing chunk's candidates and checkpoint every :data:`CHECKPOINT_S` seconds,
        or less often when writing the running result takes long (at most a tenth of the time)."""
        assert self.reducer is not None
        self.reducer.add(job.index, _labels(job), start + found.local.astype(np.int64), found)
        with self.lock:
            self.done.mark(job.index, number)
        spilled = self.reducer.spills != self.manifest.keep_spill  # rows left memory: record where
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
        name = store.state_name(self.tag, self.keep_seq)
        self._write_state(name)
        old = self.manifest.keep_state
        with self.lock:
            self.manifest.keep_state = name
            self.manifest.keep_seq = self.keep_seq
            self.manifest.keep_spill = list(self.reducer.spills)
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
                rows = self.part_writer.write_tables(store.KEEP_PART, self.reducer.tables())
                self.manifest.keep_state = None
            else:
                name = store.state_name(self.tag)
                rows = write_state(self.folder / name, self.reducer.state_tables())
                self.manifest.keep_state = name
            self.manifest.rows = rows
            self.manifest.keep_spill = None
        with self.lock:
            self.manifest.complete = True
            self.save_manifest()
        if self.reducer is not None:  # once the manifest no longer names them
            for f in self.folder.glob(store.state_checkpoints(self.tag)):
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
            self.manifest.rows,
            self.points_this_run,
            self.chunks_this_run,
            seconds,
            self.folder,
            self.manifest.devices or "",
            self.timings,
            shard=self.opts.shard,
            reduced=self.opts.keep.reduces,
        )


def run_schema(plan: Plan, opts: RunOptions) -> store.Schema:
    """The output schema of ``plan``'s rows, cut to ``opts.columns`` (checked here) when given."""
    job = plan.jobs[0]
    schema = store.Schema(
        models=list(plan.models),
        machines=list(plan.machines),
        strategies=list(plan.spec.strategies),
        int_columns=index.int_columns(job),
        float_columns=RESULT_COLUMNS,
        float_type=pa.float64() if opts.x64 else pa.float32(),
        metadata=_metadata(plan, opts),
        axis_values={k: plan.spec.axes[k] for k in job.machine_axes},
        tied=opts.keep.distinct,
    ).categorical()
    names = schema.all_names()
    if opts.columns is not None:
        bad = [c for c in opts.columns if c not in names]
        if bad:
            raise InputError(
                f"columns: unknown column '{bad[0]}' (known: {', '.join(names)})", param="columns"
            )
        # a front of distinct optima always says how many configurations each row stands for
        schema.columns = tuple(c for c in names if c in opts.columns or c == store.TIED)
    return schema


def run_key(plan: Plan, opts: RunOptions, schema: store.Schema) -> dict[str, Any]:
    """What shapes a run's rows: the spec and the options a ``--resume`` must repeat."""
    key: dict[str, Any] = {
        "spec": plan.spec.text,
        "chunk": opts.chunk,
        "x64": opts.x64,
        "keep": opts.keep.describe(),
        "only_feasible": opts.only_feasible,
        "columns": list(schema.columns) if schema.columns else None,
    }
    if opts.shard is not None:
        key["shards"] = opts.shard.n
    if schema.categories:  # names, not codes: a folder of an earlier version's codes is not resumed
        key["categories"] = sorted(schema.categories)
    return key


def new_manifest(
    plan: Plan, opts: RunOptions, schema: store.Schema, key: dict[str, Any], spans: list[index.Span]
) -> Manifest:
    """The manifest of a run starting: its jobs (of this shard), nothing done yet."""
    jobs = [
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
        for s in spans
    ]
    return Manifest(
        name=plan.spec.name,
        spec_path=plan.spec.path,
        run_key=key,
        versions=store.versions(),
        jobs=jobs,
        done={},
        done_extra={},
        compression=opts.compression,
        schema=schema.to_json(),
        # this run's, local or Dask's driver (a resumed run may have run elsewhere)
        devices="Dask workers" if opts.dask is not None else devices.describe_devices(),
        shard={"k": opts.shard.k, "n": opts.shard.n} if opts.shard is not None else None,
    )


#: Rates and sizes :func:`describe_plan` estimates with: the low end of what the project's 2-core
#: machine measures warm (docs/performance.md), and bytes a row with room for grids that compress
#: less than the shipped co-design outputs.
PLAN_ROWS_PER_S, PLAN_KEEP_PER_S, PLAN_ROW_BYTES = 8e6, 5e7, 8


def describe_plan(plan: Plan) -> list[str]:
    """``sweep plan``'s report: the grid's size per job, and what running it will cost."""
    lines = [f"sweep '{plan.spec.name}': {len(plan.jobs)} jobs, {plan.size:,} points"]
    for job in plan.jobs:
        axes = " x ".join(f"{k}[{len(v)}]" for k, v in job.axes.items())
        lines.append(
            f"  {job.bound.model.name:<16} {job.bound.profile.name:<10} {job.strategy:<13} {job.size:>16,}  {axes}"
        )
    rate, keep_rate, row_bytes = PLAN_ROWS_PER_S, PLAN_KEEP_PER_S, PLAN_ROW_BYTES
    lines.append(
        f"estimate: ~{_seconds(plan.size / rate)} writing every row ({rate:,.0f} rows/s, "
        f"~{plan.size * row_bytes / 1e9:,.2f} GB of Parquet); ~{_seconds(plan.size / keep_rate)} with keep "
        f"({keep_rate:,.0f} configurations/s); less with only_feasible"
    )
    lines.append(
        f"a first run of the spec also compiles {len(plan.jobs)} kernel(s), 0.3-3 s each on 2 cores;"
        " later runs load them from the cache"
    )
    return lines


def _seconds(s: float) -> str:
    return f"{s:,.0f} s" if s >= 10 else f"{s:.1f} s"


def chunk_rows(job: Job, out: program.ChunkOut, only_feasible: bool):
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
