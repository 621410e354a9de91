"""A small grid evaluated in memory: every row of a plan as one Arrow table, no files.

What :func:`sweep.evaluate` runs. The same chunk programs as ``sweep run``
(:func:`sweep.engine.program.prepare`), the same schema
(:func:`sweep.engine.runstate.run_schema`) and the same row order (job by job,
chunk by chunk, as the part files sort), so the table equals what ``sweep run``
writes with the same options, read back. The rows are held at once, so the
grid's size is capped at :data:`MAX_POINTS`; larger grids stream to a folder
with :func:`sweep.run`.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from sweep.engine import backend, filters, index, program
from sweep.engine.runstate import RunOptions, chunk_rows, run_schema
from sweep.errors import InputError
from sweep.inputs.grid import Plan
from sweep.reduce.keep import Keep

#: The most points :func:`evaluate_plan` takes: about 1 GB of float32 rows (22 columns).
MAX_POINTS = 10_000_000


def check_size(plan: Plan, max_points: int = MAX_POINTS) -> None:
    """Refuse (:class:`InputError`) a plan of more than ``max_points`` points."""
    if plan.size > max_points:
        raise InputError(
            f"{plan.size:,} points is over {max_points:,} for an evaluation in memory: "
            "run it to a folder (sweep.run, or 'sweep run') and query that"
        )


def evaluate_plan(plan: Plan, opts: RunOptions, max_points: int = MAX_POINTS) -> pa.Table:
    """Every row of ``plan`` (``opts``: precision, ``only_feasible``, ``columns``, ``chunk``).

    Refuses (:class:`InputError`) a plan of more than ``max_points`` points, and a
    reduction (``opts.keep``): run those to a folder.
    """
    check_size(plan, max_points)
    if opts.keep.reduces:
        raise InputError(
            "an evaluation in memory keeps every row: run a keep reduction with sweep.run", param="keep"
        )
    schema = run_schema(plan, opts)
    dtype = np.float64 if opts.x64 else np.float32
    tables = []
    backend.start()  # unless JAX is already running in this process
    with backend.settings(**({"jax_enable_x64": True} if opts.x64 else {})):
        for span in index.spans(plan.jobs):
            job = span.job
            size = index.program_chunk(job, opts.chunk)
            fn, (net, machine, values), _ = program.prepare(job, size, Keep("all"), dtype)
            for number in range(span.chunks(opts.chunk)):
                start, n_real = span.unit(number, opts.chunk)
                info = index.decode_info(job, start, size)
                out = fn(net, machine, values, info, np.int32(n_real), filters.known_front(None, dtype))
                tables.append(schema.table(*chunk_rows(job, out, opts.only_feasible)))
    if not tables:
        return schema.arrow().empty_table()
    return pa.concat_tables(tables)
