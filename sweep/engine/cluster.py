"""``sweep run --dask``: chunks evaluated and written by Dask workers, tracked by the driver.

Each Dask task is one chunk of one job. The worker builds the job's chunk
function once per process (:data:`_BUILT`, keyed by a hash of the job and
the options, so a worker compiles each job once however many of its chunks
it runs), evaluates the chunk on its local devices and

- writes the chunk's part file itself, by temporary name and rename, under
  the same deterministic name a local run uses, and returns the row count;
- or, for ``--keep``, returns the chunk's candidate rows, which the driver
  merges into its running front or top-k exactly as a local run does.

The driver keeps a bounded window of tasks in flight, records each finished
chunk in the manifest (out-of-order chunks in ``done_extra``) and
checkpoints reductions, so ``--resume`` works as for a local run. Dask
reruns the task of a worker that died (up to the scheduler's
``allowed-failures``) and retries a task that raised (:data:`RETRIES`). A
rerun writes the same file name and the rename is atomic, so a chunk never
has two part files; its result reaches the driver once, so a reduction
never counts a chunk twice.

Dask (``distributed``) is an optional dependency: ``pip install "paradl-sweep[dask]"``.
"""

from __future__ import annotations

import hashlib
import logging
import pickle
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from sweep.engine import backend, filters, index, program, survivors
from sweep.errors import InputError
from sweep.inputs.grid import Job
from sweep.output import store
from sweep.reduce.keep import Keep, Survivors

if TYPE_CHECKING:  # pragma: no cover
    from sweep.engine.runstate import RunState

#: Retries of a task that raised (a dead worker's tasks are rerun by the scheduler anyway).
RETRIES = 2
#: Tasks in flight per worker thread: enough to keep workers busy, few enough to bound memory.
WINDOW_PER_THREAD = 3
#: Built chunk functions a worker process keeps (one per job of the runs it served last).
CACHE_SIZE = 32

#: A worker process's built chunk functions, by :func:`job_key` (at most :data:`CACHE_SIZE`,
#: oldest dropped first). The key hashes everything a function depends on, so a kept one
#: gives what a new one would.
_BUILT: dict[str, tuple[Callable, tuple, survivors.Again, int]] = {}


@dataclass(frozen=True)
class JobTask:
    """What a worker needs for the chunks of one job (pickled into each task; tens of kB)."""

    job: Job
    key: str  # hash of what the compiled function depends on
    chunk: int
    keep: Keep
    x64: bool
    only_feasible: bool
    folder: str
    compression: str
    schema: store.Schema
    tag: str | None
    hook: Callable[[int, int], None] | None
    cache_dir: str | None


def _cache_dir() -> str | None:
    """The persistent XLA cache folder set in this process (``sweep run`` sets one), if any."""
    import jax

    return getattr(jax.config, "jax_compilation_cache_dir", None) or None


def job_key(job: Job, chunk: int, keep: Keep, x64: bool) -> str:
    """A hash of everything a job's compiled chunk function depends on."""
    return hashlib.sha256(pickle.dumps((job.bound, job.strategy, job.axes, chunk, keep, x64))).hexdigest()


def evaluate_chunk(task: JobTask, number: int, start: int, n_real: int) -> int | Survivors:
    """Worker side: evaluate chunk ``number`` of ``task.job``; write it, or return its candidates."""
    if task.hook is not None:
        task.hook(task.job.index, number)
    backend.start()  # a worker's first chunk: its XLA pool sized as a local run's
    # the driver's precision and compilation cache, for this chunk only: a worker may share
    # its process with other work (a threaded cluster, or the driver's own process)
    options: dict[str, object] = {"jax_enable_x64": task.x64}
    if task.cache_dir and _cache_dir() != task.cache_dir:
        options["jax_compilation_cache_dir"] = task.cache_dir
        options["jax_persistent_cache_min_compile_time_secs"] = 0.0
    with backend.settings(**options):
        return _evaluate(task, number, start, n_real)


def _evaluate(task: JobTask, number: int, start: int, n_real: int) -> int | Survivors:
    from sweep.engine.runstate import chunk_rows

    dtype = np.float64 if task.x64 else np.float32
    built = _BUILT.get(task.key)
    if built is None:
        inputs = program.device_inputs(task.job, dtype)
        size = index.program_chunk(task.job, task.chunk)
        fn = program.compile_chunk_fn(task.job, size, task.keep, dtype, inputs)
        # one Again per kernel, so its fallback compiles once per worker
        built = (fn, inputs, survivors.Again(task.job, dtype), size)
        while len(_BUILT) >= CACHE_SIZE:
            _BUILT.pop(next(iter(_BUILT)))
        _BUILT[task.key] = built
    fn, inputs, again, size = built
    info = index.decode_info(task.job, start, size)
    out = fn(*inputs, info, np.int32(n_real), filters.known_front(None, dtype))
    if task.keep.reduces:
        return survivors.survivors(out, again.at(start))
    table = task.schema.table(*chunk_rows(task.job, out, task.only_feasible))
    writer = store.PartWriter(
        Path(task.folder), task.schema.arrow(), task.compression, task.schema.statistics_columns()
    )
    writer.write(store.part_name(task.job.index, number, task.tag), table)
    return len(table)


def connect(address: Any):
    """A ``distributed.Client`` for a scheduler address, ``local:N``, or a client given as is.

    Returns ``(client, owned)``: ``owned`` lists what this call started and
    the caller closes.
    """
    try:
        import distributed
    except ImportError:
        raise InputError(
            'dask needs Dask: pip install "paradl-sweep[dask]" (or "dask[distributed]")', param="dask"
        ) from None
    if isinstance(address, distributed.Client):
        return address, []
    text = str(address).strip()
    if text.startswith("local:"):
        try:
            n = int(text.removeprefix("local:"))
        except ValueError:
            n = 0
        if n < 1:
            raise InputError(f"dask local:N needs a worker count N >= 1, got '{text}'", param="dask")
        cluster = distributed.LocalCluster(
            n_workers=n,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        )
        client = distributed.Client(cluster)
        return client, [client, cluster]
    try:
        client = distributed.Client(text, timeout="30s")
    except (OSError, TimeoutError, ValueError) as err:
        raise InputError(f"dask: cannot reach the scheduler at '{text}': {err}", param="dask") from None
    return client, [client]


def execute(run: RunState, progress: Callable[[int, int, float], None] | None, client) -> None:
    """Driver side: submit every chunk not done yet to ``client``, and record results as they arrive."""
    import distributed

    opts = run.opts
    cache_dir = _cache_dir()
    tasks: dict[int, JobTask] = {}
    for span in run.spans:
        job = span.job
        tasks[job.index] = JobTask(
            job=job,
            key=job_key(job, opts.chunk, opts.keep, opts.x64),
            chunk=opts.chunk,
            keep=opts.keep,
            x64=opts.x64,
            only_feasible=opts.only_feasible,
            folder=str(Path(run.folder).resolve()),
            compression=opts.compression,
            schema=run.schema,
            tag=run.tag,
            hook=opts.task_hook,
            cache_dir=cache_dir,
        )
    threads = sum(client.nthreads().values()) or 1
    window = max(2, WINDOW_PER_THREAD * threads)
    token = uuid.uuid4().hex[:12]
    units = run.units()
    meta: dict[str, tuple[Job, int, int, int]] = {}
    inflight: dict[str, Any] = {}
    queue = distributed.as_completed(loop=client.loop)

    def submit_next() -> None:
        unit = next(units, None)
        if unit is None:
            return
        span, number, start, n_real = unit
        job = span.job
        key = f"paradl-{token}-{run.tag or 'all'}-j{job.index:04d}-c{number:09d}"
        future = client.submit(
            evaluate_chunk, tasks[job.index], number, start, n_real, key=key, pure=False, retries=RETRIES
        )
        meta[future.key] = (job, number, start, n_real)
        inflight[future.key] = future
        queue.add(future)

    for _ in range(window):
        submit_next()
    try:
        for future in queue:
            job, number, start, n_real = meta.pop(future.key)
            inflight.pop(future.key)
            try:
                result = future.result()
            except distributed.KilledWorker as err:
                raise RuntimeError(
                    f"chunk {number} of job {job.index} killed its workers too often: {err}"
                ) from None
            future.release()
            if isinstance(result, Survivors):
                run.add_survivors(job, number, start, result)
            else:
                run.record(job.index, number, int(result))
            run.advance(n_real, progress)
            submit_next()
    finally:
        for future in inflight.values():
            future.cancel()
