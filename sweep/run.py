"""``sweep run``: drive the engine over a plan and stream rows to a Parquet dataset folder.

The main thread dispatches chunk i+1 to the device before copying chunk i
back; a writer thread turns finished chunks into part files (temporary name,
then rename) and records each in the manifest, so an interrupted run resumes
from the last chunk written. Reductions (``--keep``) merge each chunk's
survivors on the host and checkpoint the running result every few seconds.
"""

from __future__ import annotations

import json
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from sweep import engine, store
from sweep.engine import Keep
from sweep.errors import InputError
from sweep.evaluate import RESULT_COLUMNS
from sweep.grid import Plan
from sweep.pareto import pareto_mask, top_k_order

CHECKPOINT_S = 5.0
KEEP_PART = "part-keep.parquet"


class Interrupted(Exception):
    """The run was stopped by a signal after writing what it had finished."""


@dataclass
class RunOptions:
    out: Path
    chunk: int = 1 << 18
    x64: bool = False
    keep: Keep = field(default_factory=lambda: Keep("all"))
    only_feasible: bool = False
    columns: tuple[str, ...] | None = None
    resume: bool = False
    overwrite: bool = False
    compression: str = "zstd"


@dataclass
class RunSummary:
    rows: int
    points: int
    chunks: int
    seconds: float
    folder: Path

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
        keep = Keep("top", (col.strip(),), k)
    else:
        raise InputError(f"--keep must be all, pareto:COLS or top:K:COL, got '{text}'")
    for c in keep.columns:
        if c not in columns:
            raise InputError(f"--keep: unknown or non-numeric column '{c}' (known: {', '.join(columns)})")
    return keep


class _Writer(threading.Thread):
    """Builds and writes queued part files in order, recording each in the manifest.

    Turning a chunk's arrays into an Arrow table and compressing it happen
    here, off the thread that feeds the device.
    """

    def __init__(
        self, writer: store.PartWriter, schema: store.Schema, on_done: Callable[[int, int, int], None]
    ):
        super().__init__(daemon=True)
        self.writer = writer
        self.schema = schema
        self.on_done = on_done
        self.jobs: queue.Queue = queue.Queue(maxsize=2)
        self.error: BaseException | None = None

    def run(self) -> None:
        while True:
            item = self.jobs.get()
            if item is None:
                return
            job, chunk, labels, ints, floats, limit = item
            try:
                if self.error is None:
                    table = self.schema.table(labels, ints, floats, limit)
                    self.writer.write(store.part_name(job, chunk), table)
                    self.on_done(job, chunk, len(table))
            except BaseException as err:  # surfaced by the main thread
                self.error = err

    def put(self, item) -> None:
        if self.error is not None:
            raise self.error
        self.jobs.put(item)

    def close(self) -> None:
        self.jobs.put(None)
        self.join()
        if self.error is not None:
            raise self.error


def run_sweep(
    plan: Plan, opts: RunOptions, progress: Callable[[int, int, float], None] | None = None
) -> RunSummary:
    """Evaluate every job of ``plan`` and write the dataset folder ``opts.out``."""
    if opts.x64:
        jax.config.update("jax_enable_x64", True)
    dtype = np.float64 if opts.x64 else np.float32
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
    run_key = {
        "spec": plan.spec.text,
        "chunk": opts.chunk,
        "x64": opts.x64,
        "keep": opts.keep.describe(),
        "only_feasible": opts.only_feasible,
        "columns": list(schema.columns) if schema.columns else None,
    }
    folder = opts.out
    previous = store.prepare_folder(folder, opts.resume, opts.overwrite, run_key)
    done = {int(k): v for k, v in (previous or {}).get("done", {}).items()}
    rows_written = int((previous or {}).get("rows", 0))
    manifest: dict[str, Any] = {
        "format": 1,
        "name": plan.spec.name,
        "spec_path": plan.spec.path,
        "run_key": run_key,
        "versions": store.versions(),
        "jobs": [
            {
                "index": j.index,
                "model": j.bound.model.name,
                "machine": j.bound.profile.name,
                "strategy": j.strategy,
                "axes": {k: v.tolist() for k, v in j.axes.items()},
                "points": j.size,
                "chunks": engine.n_chunks(j, opts.chunk),
            }
            for j in jobs
        ],
        "done": done,
        "rows": rows_written,
        "complete": False,
    }
    if previous and previous.get("complete"):
        return RunSummary(previous["rows"], 0, 0, 0.0, folder)
    lock = threading.Lock()

    def save_manifest() -> None:
        store.atomic_write_text(folder / store.MANIFEST, json.dumps(manifest, indent=1))

    def on_done(job: int, chunk: int, rows: int) -> None:
        with lock:
            done[job] = chunk + 1
            manifest["rows"] += rows
            save_manifest()

    save_manifest()
    arrow_schema = schema.arrow()
    part_writer = store.PartWriter(folder, arrow_schema, opts.compression)
    writer = _Writer(part_writer, schema, on_done)
    writer.start()
    reducer = _Reducer(opts.keep, schema, folder, part_writer, previous) if opts.keep.reduces else None
    total_points = plan.size
    points_done = sum(min(done.get(j.index, 0) * opts.chunk, j.size) for j in jobs)
    start_time = time.perf_counter()
    points_this_run = 0
    chunks_this_run = 0
    old_term = signal.getsignal(signal.SIGTERM)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        for job in jobs:
            first = done.get(job.index, 0)
            count = engine.n_chunks(job, opts.chunk)
            if first >= count:
                continue
            fn, _compact = engine.build_chunk_fn(job, opts.chunk, opts.keep, dtype)
            net, machine, values = engine.device_inputs(job, dtype)
            pending = None
            for number in range(first, count + 1):
                current = None
                if number < count:
                    start = number * opts.chunk
                    info = engine.decode_info(job, start, opts.chunk)
                    n_real = min(opts.chunk, job.size - start)
                    current = (number, start, n_real, fn(net, machine, values, info, np.int32(n_real)))
                if pending is not None:
                    p_number, p_start, p_real, outputs = pending
                    if reducer is None:
                        writer.put((job.index, p_number, *_chunk_rows(job, outputs, opts.only_feasible)))
                    else:
                        reducer.add(job, p_number, p_start, outputs)
                        with lock:
                            done[job.index] = p_number + 1
                        reducer.maybe_checkpoint(manifest, lock, save_manifest)
                    points_done += p_real
                    points_this_run += p_real
                    chunks_this_run += 1
                    if progress is not None:
                        progress(points_done, total_points, time.perf_counter() - start_time)
                pending = current
        writer.close()
        if reducer is not None:
            manifest["rows"] = reducer.finish()
        manifest["complete"] = True
        save_manifest()
    except KeyboardInterrupt:
        writer.close()
        if reducer is not None:
            reducer.checkpoint(manifest, lock, save_manifest)
        save_manifest()
        store.remove_temporaries(folder)
        raise Interrupted(
            f"interrupted: {manifest['rows']:,} rows in {folder}; rerun with --resume to continue"
        ) from None
    except BaseException:
        writer.close()
        store.remove_temporaries(folder)
        raise
    finally:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, old_term)
    seconds = time.perf_counter() - start_time
    return RunSummary(manifest["rows"], points_this_run, chunks_this_run, seconds, folder)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def _chunk_rows(job, out: engine.ChunkOut, only_feasible: bool):
    """(labels, ints, floats, limit) of a chunk's rows to write, on the host."""
    ints, floats, limit, mask = (np.asarray(a) for a in (out.ints, out.floats, out.limit, out.mask))
    if only_feasible:
        mask = mask & (limit == 0)
    if not mask.all():
        sel = np.flatnonzero(mask)
        ints, floats, limit = ints[:, sel], floats[:, sel], limit[sel]
    return _labels(job), ints, floats, limit


def _labels(job) -> tuple[str, str, str]:
    return (job.bound.model.name, job.bound.profile.name, job.strategy)


class _Reducer:
    """Running Pareto front or top-k over chunk survivors, checkpointed for ``--resume``."""

    def __init__(self, keep: Keep, schema: store.Schema, folder: Path, writer, previous: dict | None):
        self.keep = keep
        self.schema = schema
        self.folder = folder
        self.writer = writer
        self.names = (*schema.int_columns, *schema.float_columns)
        self.obj_rows = [self.names.index(c) for c in keep.columns]
        self.values = np.zeros((len(self.names), 0))  # ints then floats, as float64 (exact for both)
        self.limit = np.zeros(0, dtype=np.int8)
        self.ids = np.zeros((0, 2), dtype=np.int64)  # job index, flat index within the job
        self.labels = np.empty((0, 3), dtype=object)  # model, machine, strategy
        self.last_checkpoint = time.perf_counter()
        self.seq = 0
        state = (previous or {}).get("keep_state")
        if state:
            self._load(folder / state)
            self.seq = int((previous or {}).get("keep_seq", 0))

    def add(self, job, number: int, start: int, out: engine.ChunkOut) -> None:
        count = int(out.count)
        if count <= out.sel.shape[0]:
            ints = np.asarray(out.c_ints)[:, :count]
            floats = np.asarray(out.c_floats)[:, :count]
            limit = np.asarray(out.c_limit)[:count]
            local = np.asarray(out.sel)[:count]
        else:  # more candidates than the compacted block (many ties): read them from the full arrays
            local = np.flatnonzero(np.asarray(out.mask))
            ints = np.asarray(out.ints)[:, local]
            floats = np.asarray(out.floats)[:, local]
            limit = np.asarray(out.limit)[local]
        ids = np.stack([np.full(len(local), job.index), start + local.astype(np.int64)], axis=1)
        block = np.concatenate([ints.astype(np.float64), floats.astype(np.float64)])
        self.values = np.concatenate([self.values, block], axis=1)
        self.limit = np.concatenate([self.limit, limit.astype(np.int8)])
        self.ids = np.concatenate([self.ids, ids])
        self.labels = np.concatenate(
            [self.labels, np.tile(np.array(_labels(job), dtype=object), (len(local), 1))]
        )
        self._reduce()

    def _reduce(self) -> None:
        if self.values.shape[1] == 0:
            return
        if self.keep.kind == "pareto":
            keep = np.flatnonzero(pareto_mask(self.values[self.obj_rows].T))
            keep = keep[np.lexsort((self.ids[keep, 1], self.ids[keep, 0]))]
        else:
            order_key = self.ids[:, 0] * (1 << 40) + self.ids[:, 1]
            keep = top_k_order(self.values[self.obj_rows[0]], order_key, self.keep.k)
        self.values = self.values[:, keep]
        self.limit = self.limit[keep]
        self.ids = self.ids[keep]
        self.labels = self.labels[keep]

    def table(self) -> pa.Table:
        ni = len(self.schema.int_columns)
        ints = np.rint(self.values[:ni]).astype(np.int32)
        return self.schema.table(self.labels, ints, self.values[ni:], self.limit)

    def maybe_checkpoint(self, manifest: dict, lock, save) -> None:
        if time.perf_counter() - self.last_checkpoint >= CHECKPOINT_S:
            self.checkpoint(manifest, lock, save)

    def checkpoint(self, manifest: dict, lock, save) -> None:
        """Write the running result and the done counts together (state file, then manifest)."""
        self.seq += 1
        name = f"_keep-{self.seq:06d}.parquet"
        tmp = self.folder / f".{name}.tmp"
        pq.write_table(self._state_table(), tmp)
        tmp.replace(self.folder / name)
        old = manifest.get("keep_state")
        with lock:
            manifest["keep_state"] = name
            manifest["keep_seq"] = self.seq
            save()
        if old and old != name:
            (self.folder / old).unlink(missing_ok=True)
        self.last_checkpoint = time.perf_counter()

    def _state_table(self) -> pa.Table:
        cols: dict[str, Any] = {f"v{i}": self.values[i] for i in range(self.values.shape[0])}
        cols["limit"] = self.limit
        cols["job"] = self.ids[:, 0]
        cols["index"] = self.ids[:, 1]
        for j, name in enumerate(("model", "machine", "strategy")):
            cols[name] = pa.array([str(v) for v in self.labels[:, j]], pa.string())
        return pa.table(cols)

    def _load(self, path: Path) -> None:
        t = pq.read_table(path)
        n = len(self.names)
        self.values = (
            np.stack([t.column(f"v{i}").to_numpy() for i in range(n)]) if len(t) else np.zeros((n, 0))
        )
        self.limit = t.column("limit").to_numpy().astype(np.int8)
        self.ids = np.stack([t.column("job").to_numpy(), t.column("index").to_numpy()], axis=1).astype(
            np.int64
        )
        labels = [t.column(c).to_pylist() for c in ("model", "machine", "strategy")]
        self.labels = np.array(list(zip(*labels, strict=True)), dtype=object).reshape(len(t), 3)

    def finish(self) -> int:
        table = self.table()
        self.writer.write(KEEP_PART, table)
        for f in self.folder.glob("_keep-*.parquet"):
            f.unlink()
        return len(table)


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
