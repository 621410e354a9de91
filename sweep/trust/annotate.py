"""``sweep run --interval LEVEL``: the prediction interval of every written row's ``t_epoch_s``.

After the engine has finished a dataset folder (and ``--keep`` reduced it),
each part file is read row group by row group, the rows of each job get
``t_epoch_s_lo`` and ``t_epoch_s_hi`` (:class:`sweep.trust.intervals.RowIntervals`,
the interval ``sweep estimate`` prints for one configuration) after
``t_epoch_s``, and the file is replaced whole (a temporary name, then a
rename). The level goes into each part file's metadata (``interval``) and,
last, into the manifest, whose schema then holds the two columns too: every
file of the folder keeps one schema. A part file already at the level is left
as it is, so a rerun with ``--resume`` finishes a pass that was stopped, and a
rerun at another level replaces the columns.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from kernels.strategies.registry import OWN_AXES
from sweep.errors import InputError
from sweep.inputs.grid import Job, Plan
from sweep.output import store
from sweep.trust.intervals import RowIntervals, posterior_params

#: The columns ``--interval`` adds, after ``t_epoch_s``.
LO, HI = "t_epoch_s_lo", "t_epoch_s_hi"
#: What a row's interval is computed from.
NEEDED: tuple[str, ...] = ("model", "machine", "strategy", "p", "b", "p2", "S", "t_epoch_s")
#: The key of the level in a part file's ``paradl_sweep`` metadata and in the manifest.
KEY = "interval"


def check(plan: Plan, level: float, columns: Sequence[str] | None, sharded: bool) -> None:
    """Refuse, before anything runs, a level outside (0, 1), a machine without a ``[calibration]``
    table, ``--columns`` without what the interval needs, and ``--shard``."""
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        raise InputError(f"interval must be a level in (0, 1), e.g. 0.8; got {level!r}", param="interval")
    for profile in plan.machines.values():
        if profile.posterior is None:
            raise InputError(
                f"interval needs a calibrated machine (a [calibration] table, written by sweep "
                f"calibrate): machine '{profile.name}' has none",
                param="interval",
            )
        posterior_params(profile)  # its names are checked as a fit's would be
    if sharded:
        raise InputError("interval cannot be given to a shard run", param=("interval", "shard"))
    if columns is not None:
        job = plan.jobs[0]
        missing = [c for c in (*NEEDED, *job.extra_columns, *job.machine_axes) if c not in columns]
        if missing:
            raise InputError(
                f"interval needs the column '{missing[0]}': add it to columns", param=("interval", "columns")
            )


def annotate(folder: Path, plan: Plan, level: float) -> int:
    """Add the interval columns at ``level`` to every part file of the finished run in ``folder``
    and record the level in its manifest; returns the part files rewritten."""
    doc = store.read_manifest(folder)
    if doc is None or not doc.get("complete"):
        raise InputError("interval: the run is not complete", str(folder), param="interval")
    schema = store.Schema.from_json(doc["schema"])
    options: dict[str, object] = {
        "compression": doc.get("compression") or "zstd",
        "use_dictionary": [*store.LABEL_COLUMNS, store.LIMIT_REASON, *schema.categories],
        "write_statistics": schema.statistics_columns(),
    }
    jobs = {(j.bound.model.name, j.bound.profile.name, j.strategy): _Job(j) for j in plan.jobs}
    rewritten = 0
    try:
        for path in sorted(folder.glob("part-*.parquet")):
            with pq.ParquetFile(path) as source:
                if _level(source.schema_arrow) == level and LO in source.schema_arrow.names:
                    continue
                target = with_interval(source.schema_arrow, level)
                split = [f.name for f in target if pa.types.is_floating(f.type)]
                tables = _annotated(source, target, jobs, level)
                store.write_parquet(path, tables, None, use_byte_stream_split=split, **options)
            rewritten += 1
        manifest = pq.read_schema(folder / store.MANIFEST)
        doc[KEY] = level
        store.write_manifest(
            folder / store.MANIFEST, json.dumps(doc, indent=1), with_interval(manifest, level)
        )
    except OSError as err:
        raise InputError(
            f"interval stopped: {err.strerror or err}; rerun it with resume to finish",
            str(folder),
            param=("interval", "resume"),
        ) from None
    return rewritten


def with_interval(schema: pa.Schema, level: float) -> pa.Schema:
    """``schema`` (a part file's or the manifest's) with :data:`LO` and :data:`HI` after
    ``t_epoch_s`` (in its float type) and ``interval`` in its ``paradl_sweep`` metadata."""
    names = [n for n in schema.names if n not in (LO, HI)]
    fields = [schema.field(n) for n in names]
    at = names.index("t_epoch_s") + 1
    kind = schema.field("t_epoch_s").type
    fields[at:at] = [pa.field(LO, kind), pa.field(HI, kind)]
    meta = json.loads((schema.metadata or {}).get(store.META_KEY, b"{}"))
    meta[KEY] = level
    return pa.schema(fields, metadata={store.META_KEY: json.dumps(meta).encode()})


def _level(schema: pa.Schema) -> float | None:
    meta = json.loads((schema.metadata or {}).get(store.META_KEY, b"{}"))
    return meta.get(KEY)


class _Job:
    """A job's :class:`RowIntervals`, made when its rows are first met (one compile per job)."""

    def __init__(self, job: Job):
        self.job = job
        self.rows: RowIntervals | None = None

    def bounds(self, columns: dict[str, np.ndarray], level: float) -> tuple[np.ndarray, np.ndarray]:
        if self.rows is None:
            self.rows = RowIntervals(self.job.bound, self.job.strategy, self.job.param_axes)
        return self.rows.bounds(columns, columns["t_epoch_s"], level)


def _annotated(
    source: pq.ParquetFile, target: pa.Schema, jobs: dict[tuple[str, str, str], _Job], level: float
) -> Iterator[pa.Table]:
    """``source``'s row groups, one table each, with the interval columns (at least one table)."""
    wanted = [*NEEDED, *OWN_AXES, *(a for j in jobs.values() for a in j.job.machine_axes)]
    kind = target.field(LO).type.to_pandas_dtype()
    for i in range(max(source.num_row_groups, 1)):
        table = source.read_row_group(i) if source.num_row_groups else source.schema_arrow.empty_table()
        table = table.drop_columns([c for c in (LO, HI) if c in table.column_names])
        lo, hi = np.full(len(table), math.nan), np.full(len(table), math.nan)
        if len(table):
            cols = {c: _values(c, table.column(c)) for c in dict.fromkeys(wanted) if c in table.column_names}
            keys = np.stack([cols["model"], cols["machine"], cols["strategy"]], axis=1).astype(str)
            groups, inverse = np.unique(keys, axis=0, return_inverse=True)
            for g, key in enumerate(groups):
                rows = np.flatnonzero(inverse.reshape(-1) == g)
                lo[rows], hi[rows] = jobs[tuple(key)].bounds({c: v[rows] for c, v in cols.items()}, level)
        at = table.column_names.index("t_epoch_s") + 1
        table = table.add_column(at, LO, pa.array(lo.astype(kind)))
        table = table.add_column(at + 1, HI, pa.array(hi.astype(kind)))
        yield table.replace_schema_metadata(target.metadata).cast(target)


def _values(name: str, column: pa.ChunkedArray) -> np.ndarray:
    """A column as numpy: a dictionary-encoded label decoded to strings, a categorical setting's
    names to their codes (:func:`sweep.output.store.category_codes`), numbers as they are."""
    if store.choices_of(name):
        return store.category_codes(name, column)
    array = column.combine_chunks()
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    return array.to_numpy(zero_copy_only=False)
