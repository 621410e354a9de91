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
``--dask ADDRESS`` hands chunks to Dask workers (:mod:`sweep.engine.cluster`).
Both drive the same :class:`RunState` bookkeeping: which chunks are done, the
rows written, the running reduction and the manifest.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import itertools
import os
import queue
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace

import jax
import numpy as np

from sweep.engine import backend, devices, filters, index, program, survivors
from sweep.engine.runstate import (
    GPU_REDUCE_CHUNK,
    PLAN_ROW_BYTES,
    Interrupted,
    RunOptions,
    RunState,
    RunSummary,
    Timings,
    chunk_rows,
)
from sweep.errors import InputError
from sweep.inputs.grid import Job, Plan
from sweep.output import store

#: Part files written at once by a local run (one core each while encoding).
WRITER_THREADS = max(1, min(8, os.cpu_count() or 1))
#: Kernels traced and compiled at once ahead of the job computing.
PREPARE_THREADS = 2


class _Workers:
    """Runs ``handle(*item)`` for each queued item on ``threads`` threads, off the main thread.

    The main thread feeds the device; the workers turn finished chunks into
    part files (Parquet encoding holds one core per file, so several files are
    written at once and may finish out of order: the manifest keeps track, see
    :class:`DoneChunks`), or merge a reduction's candidates (one thread, in chunk
    order). The queue holds at most two items a thread, so chunks waiting stay
    few. A worker's error stops the others' work and is raised by the next
    :meth:`put` or by :meth:`close`.
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


def run_sweep(
    plan: Plan, opts: RunOptions, progress: Callable[[int, int, float], None] | None = None
) -> RunSummary:
    """Evaluate every job of ``plan`` (or the shard ``opts.shard`` of it) into the folder ``opts.out``.

    Chunks run on every local device (:func:`sweep.engine.program.build_chunk_fn`),
    or on Dask workers when ``opts.dask`` is set (:func:`sweep.engine.cluster.execute`).
    """
    began = time.perf_counter()
    backend.start()  # unless JAX is already running in this process
    # float64 needs JAX's x64 mode while the run traces kernels (on several threads): on for
    # the run, then put back
    with backend.settings(**({"jax_enable_x64": True} if opts.x64 else {})):
        summary = _run(plan, opts, progress)
    summary.wall = time.perf_counter() - began
    return summary


def check_free_space(plan: Plan, opts: RunOptions) -> None:
    """Refuse a run that writes every row when the disk of its folder has less free space than
    ``sweep plan`` estimates it writes (:data:`PLAN_ROW_BYTES` a row, for this shard's part and
    less the rows a resumed folder holds): one line saying both, before anything is written."""
    if opts.keep.reduces or not opts.space_check:
        return
    points = plan.size if opts.shard is None else -(-plan.size // opts.shard.n)
    if opts.resume and opts.shard is None and opts.out.is_dir():
        manifest = store.load_manifest(opts.out)
        points -= int(manifest.rows or 0) if manifest is not None else 0
    need = max(points, 0) * PLAN_ROW_BYTES
    existing = opts.out.absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    free = shutil.disk_usage(existing).free
    if need > free:
        raise InputError(
            f"writing every row needs ~{need / 1e9:,.3g} GB ({points:,} rows at ~{PLAN_ROW_BYTES} bytes, "
            f"sweep plan's estimate) but {free / 1e9:,.3g} GB are free: keep a reduction (keep), "
            "sweep fewer points, write elsewhere, or pass space_check=False",
            str(opts.out),
            param=("keep", "space_check=False"),
        )


def _run(plan: Plan, opts: RunOptions, progress: Callable[[int, int, float], None] | None) -> RunSummary:
    opts = _settle_chunk(opts)
    check_free_space(plan, opts)
    run = RunState(plan, opts)
    if run.complete:
        return RunSummary(
            int(run.previous.rows or 0), 0, 0, 0.0, run.folder, run.manifest.devices or "",
            shard=opts.shard, reduced=opts.keep.reduces,
        )  # fmt: skip
    client, owned = None, []
    if opts.dask is not None:  # before the first manifest: a bad address leaves nothing behind
        from sweep.engine import cluster

        client, owned = cluster.connect(opts.dask)
    old_term = signal.getsignal(signal.SIGTERM)
    main_thread = threading.current_thread() is threading.main_thread()
    if main_thread:
        signal.signal(signal.SIGTERM, _raise_interrupt)
    hint = "rerun the same command" if run.tag else "rerun with resume=True"  # how to continue a stop
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
            f"interrupted: {run.manifest.rows:,} rows in {run.folder}; {hint} to continue"
        ) from None
    except OSError as err:
        # a full disk, a folder gone or made read-only: keep what is finished, as an interrupt does
        with contextlib.suppress(OSError):
            run.interrupted()
        with contextlib.suppress(OSError):
            store.remove_temporaries(run.folder, run.tag)
        what = os.strerror(err.errno) if err.errno else str(err)
        raise InputError(
            f"stopped: {what}; {run.manifest.rows:,} rows kept; fix it and {hint} to continue",
            str(run.folder),
            param="resume=True",
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
        doc = store.load_manifest(opts.out)
        key = doc.run_key if doc is not None else None
        chunk = key.get("chunk") if isinstance(key, dict) else None
        if type(chunk) is int and 1 <= chunk <= index.MAX_CHUNK:
            return replace(opts, chunk=chunk)
    if opts.keep.reduces and opts.dask is None and devices.local_devices()[0].platform != "cpu":
        return replace(opts, chunk=GPU_REDUCE_CHUNK)
    return opts


def _execute_local(run: RunState, progress: Callable[[int, int, float], None] | None) -> None:
    """Every chunk not done yet, on this process's devices: dispatch chunk i+1, then collect chunk i."""
    _LocalLoop(run, progress).execute()


class _LocalLoop:
    """The local run's loop and what it keeps between chunks (:func:`_execute_local`).

    Part files are encoded on several threads; a reduction merges candidates on
    one, in order, while the main thread waits for the next chunk. The next few
    jobs' kernels are prepared on other threads while a job computes (a warm start
    traces and lowers each kernel, as long as a small job's chunks take), at most
    :data:`PREPARE_THREADS` jobs ahead, so a plan of many jobs does not hold every
    compiled kernel at once.
    """

    def __init__(self, run: RunState, progress: Callable[[int, int, float], None] | None):
        self.run, self.opts, self.progress = run, run.opts, progress
        timings = self.timings = run.timings = Timings()
        if run.reducer is None:
            self.sink = _Workers(timings.timed("sink", run.write_part), WRITER_THREADS, "sweep-write")
        else:
            self.sink = _Workers(timings.timed("sink", run.add_survivors), 1, "sweep-reduce")
        self.prepare = timings.timed("prepare", program.prepare)
        self.work = _pending_work(run)  # (span, its chunks left, the first of them) of each job
        self.pool = ThreadPoolExecutor(max_workers=PREPARE_THREADS, thread_name_prefix="sweep-prepare")
        self.ahead: collections.deque = collections.deque()  # kernels of jobs i, i+1, ... being prepared
        self.submitted = 0
        # A reducing chunk with more candidates than it compacts (ties) has them evaluated again
        # (survivors.Again), by a second kernel compiled on first use on the main thread. Once one
        # job of a run needed it, the jobs after it likely will: their fallbacks are prepared
        # ahead with their kernels.
        self.fallbacks: dict[int, Future] = {}
        self.tied = False
        # A Pareto reduction of two objectives passes each chunk the front its reducer holds so
        # far (filters.known_front), which drops the rows earlier jobs dominate. Not when an
        # objective is a swept machine parameter: the device reduces it by rank (see
        # program.build_chunk_fn), the host by value.
        keep = self.opts.keep
        by_axis = any(c in run.schema.axis_values for c in keep.columns)
        two = keep.kind == "pareto" and len(keep.columns) == 2
        self.fronts = run.reducer if two and not by_axis else None
        self.given: list = [None, filters.known_front(None, run.dtype)]  # the vectors read last, their points

    def execute(self) -> None:
        """Chunk i+1 is queued before chunk i is collected, across jobs too: a job's last chunk
        computes while the next job's program is awaited and its first chunk queued."""
        run, opts, timings = self.run, self.opts, self.timings
        self.sink.start()
        pending: tuple | None = None
        try:
            for i, (span, units, head) in enumerate(self.work):
                self._prepare_ahead(i)
                began = time.perf_counter()
                fn, (net, machine, values), whole = self.ahead.popleft().result()
                timings.programs += time.perf_counter() - began
                job = span.job
                size = index.program_chunk(job, opts.chunk)  # as the job's program was compiled
                # its fallback as prepared by the time a chunk needs it (the previous job's last
                # chunk, collected after this job's first is queued, may be what asks for it)
                again = survivors.Again(job, run.dtype, points=functools.partial(self._fallback, i, job))
                for _span, number, start, n_real in itertools.chain([head], units):
                    began = time.perf_counter()
                    info = index.decode_info(job, start, size)
                    out = fn(net, machine, values, info, np.int32(n_real), self._known())
                    timings.queue += time.perf_counter() - began
                    if pending is not None:
                        self._collect(*pending)
                    pending = (i, job, whole, again, number, start, n_real, out)
            if pending is not None:
                self._collect(*pending)
        except BaseException:
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.sink.close(raise_error=False)
            raise
        self.pool.shutdown(wait=False)
        self.sink.close()

    def _prepare_ahead(self, i: int) -> None:
        """Submit the kernels of the jobs up to ``i + PREPARE_THREADS`` not submitted yet."""
        opts = self.opts
        while self.submitted < len(self.work) and self.submitted <= i + PREPARE_THREADS:
            upcoming = self.work[self.submitted][0].job
            size = index.program_chunk(upcoming, opts.chunk)
            self.ahead.append(self.pool.submit(self.prepare, upcoming, size, opts.keep, self.run.dtype))
            self.timings.prepared += 1
            if self.tied:
                self._prepare_fallback(self.submitted)
            self.submitted += 1

    def _fallback(self, k: int, job: Job) -> tuple[Callable, tuple]:
        made = self.fallbacks.pop(k, None)
        return made.result() if made is not None else program.prepare_points(job, self.run.dtype)

    def _prepare_fallback(self, k: int) -> None:
        job = self.work[k][0].job
        if (
            self.run.reducer is not None
            and k not in self.fallbacks
            and not program.reduced_on_host(job, self.opts.chunk, self.opts.keep)
        ):
            self.fallbacks[k] = self.pool.submit(program.prepare_points, job, self.run.dtype)

    def _known(self) -> np.ndarray:
        vectors = self.fronts.vectors if self.fronts is not None else None
        given = self.given
        if vectors is not given[0]:  # the reducer replaces its vectors, never changes them
            given[:] = [vectors, filters.known_front(vectors, self.run.dtype)]
        return given[1]

    def _collect(
        self, k: int, job: Job, whole: bool, again: survivors.Again, number: int, start: int, n_real: int, out
    ) -> None:
        """Hand chunk ``number`` of ``work[k]``'s job to the writers or the reducer."""
        run, timings = self.run, self.timings
        began = time.perf_counter()
        jax.block_until_ready(out)
        ready = time.perf_counter()
        timings.device += ready - began
        if run.reducer is None:
            rows = chunk_rows(job, out, self.opts.only_feasible)
            self.sink.put((run.part_name(job.index, number), job.index, number, *rows))
        else:
            if whole:
                found = survivors.host_candidates(out, self.opts.keep, job)
            else:
                before = again.seconds
                found = survivors.survivors(out, again.at(start))
                timings.again += again.seconds - before
                if again.used and not self.tied:
                    self.tied = True
                    for later in range(k + 1, self.submitted):
                        self._prepare_fallback(later)
            self.sink.put((job, number, start, found))
        run.advance(n_real, self.progress)
        timings.host += time.perf_counter() - ready


def _pending_work(run: RunState) -> list[tuple]:
    """``(span, its chunks left, the first of them)`` of each span with chunks left, in order."""
    work = []
    for span in run.spans:
        units = run.units(span)
        head = next(units, None)
        if head is not None:
            work.append((span, units, head))
    return work


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


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
