"""Streaming Parquet output: a dataset folder of part files and a manifest (docs/output-format.md).

Part files are written under a dot-name (which Arrow readers skip) and
renamed when complete, so a reader or an interrupted run never sees a
partial part file. The manifest records the spec, versions, the number of
finished chunks per job, the rows written and whether the run completed;
``--resume`` continues from it. It is a Parquet file too,
``_manifest.parquet``: the data's schema, no rows, and the manifest's JSON
in the file's key-value metadata (:data:`MANIFEST_KEY`). Every file of a
finished folder is then Parquet of one schema, so readers that take every
file of a folder (Polars, DuckDB's ``*.parquet``) read the same rows as
those that skip ``_``-files (pyarrow.dataset, pandas).

A shard of a run (``--shard K/N``) writes into the same folder under names
that carry its tag (``part-s0003of0016-j0001-c000000012.parquet``,
``_manifest-s0003of0016.parquet``), so shards never write the same file;
``sweep merge`` checks their manifests and writes ``_manifest.parquet``.

This module names every file of a dataset folder: :data:`MANIFEST`,
:func:`manifest_name`, :func:`part_name`, :data:`KEEP_PART`,
:func:`state_name`, :func:`state_checkpoints`, :func:`spill_prefix`
and :func:`temporary`.
"""

from __future__ import annotations

import json
import os
import platform
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from kernels.names import LIMITS
from sweep.errors import InputError
from sweep.output import arrays
from sweep.output.categories import category_codes, choices_of  # noqa: F401  (re-exported)
from sweep.output.filenames import (  # noqa: F401  (re-exported: callers name them store.X)
    MANIFEST,
    MERGE_SPILL_PREFIX,
    SHARD_MANIFEST,
    manifest_name,
    part_name,
    shard_tag,
    spill_glob,
    spill_name,
    spill_prefix,
    spill_seq,
    state_checkpoints,
    state_name,
)
from sweep.output.manifest import Manifest
from sweep.output.ownership import check_own

#: The key of the manifest's JSON in the manifest file's key-value metadata.
MANIFEST_KEY = "paradl_manifest"
#: Manifests of versions before the Parquet one: recognised only to say so.
OLD_MANIFEST = "_manifest.json"
#: The error for a folder of such a version, given the old manifest's name.
OLD_VERSION = (
    "was written by an earlier version of paradl-sweep ({}): cannot continue it; "
    "use another folder or overwrite"
)
#: The file of a run's reduction (``--keep``): its kept rows, written once at the end.
KEEP_PART = "part-keep.parquet"
META_KEY = b"paradl_sweep"

#: Output column of each kernel field (:class:`kernels.Cost`) whose own name would mislead
#: an SQL engine: DuckDB reads names case-insensitively, so ``B`` would be ``b``, and
#: ``limit`` is a reserved word. The one place that maps fields to columns; every other
#: field is its own column (docs/output-format.md, changelog).
FIELD_COLUMNS = {"B": "global_batch", "limit": "limit_reason"}
#: Result columns that some networks do not have: null where the kernels give NaN (a CNN has no
#: tokens; a machine that states no power or price; a strategy without a memory split), as
#: ``sweep estimate --json`` writes null.
NULL_WHERE_NAN = frozenset(
    {"tokens_per_s", "flops_per_token", "energy_kwh", "cost_usd", "mem_states_bytes", "mem_activations_bytes"}
)
#: The label columns, dictionary-encoded strings.
LABEL_COLUMNS = ("model", "machine", "strategy")
#: The column of a configuration's limit reason, null where it has none.
LIMIT_REASON = FIELD_COLUMNS["limit"]
#: The column of a Pareto front of distinct optima: how many configurations of the grid
#: share the row's objective vector (the row is the one of least grid index among them).
TIED = "tied"


def column_name(field: str) -> str:
    """The output column of kernel field ``field``."""
    return FIELD_COLUMNS.get(field, field)


def limit_reason(code: int) -> str | None:
    """The ``limit_reason`` value of a :data:`kernels.LIMITS` code: None for a feasible one (0)."""
    return LIMITS[code] or None


def versions() -> dict[str, str]:
    """Versions of the tool and the libraries that shaped the numbers."""
    out = {"python": platform.python_version()}
    for dist in ("paradl-sweep", "jax", "jaxlib", "numpy", "pyarrow"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:  # pragma: no cover
            out[dist] = "unknown"
    return out


def temporary(path: Path) -> Path:
    """A dot-named temporary beside ``path``, unique to this writer.

    Two processes writing the same file (a Dask task retried while its first
    attempt still runs) each write their own temporary; the renames are
    atomic, so the file is one complete copy either way.
    """
    return path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a dot-named temporary file and a rename."""
    tmp = temporary(path)
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


@contextmanager
def written(path: Path, keep_suffix: bool = False) -> Iterator[Path]:
    """Write a user's output file whole or not at all: yields a dot-named temporary to write.

    On success the temporary is renamed onto ``path``; in any case it is
    removed. An operating system error (a folder that cannot take files, a
    full disk) becomes a one-line :class:`InputError` naming ``path``.
    ``keep_suffix`` ends the temporary in ``path``'s suffix, for writers that
    choose the format by it (matplotlib).
    """
    tmp = path.with_name(f".{path.stem}.tmp{path.suffix}" if keep_suffix else f".{path.name}.tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    except OSError as err:
        raise InputError(f"cannot write: {_reason(err)}", str(path)) from None
    finally:
        with suppress(OSError):
            tmp.unlink(missing_ok=True)


def writable_folder(folder: Path) -> None:
    """Create ``folder`` if needed and check that files can be made in it, or raise :class:`InputError`."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = temporary(folder / "probe")
        probe.touch()
        probe.unlink()
    except OSError as err:
        raise InputError(f"cannot write in the output folder: {_reason(err)}", str(folder)) from None


def _reason(err: OSError) -> str:
    """The system's words for an error number ('No such file or directory'), not a temporary's name."""
    return os.strerror(err.errno) if err.errno else str(err)


def remove_temporaries(folder: Path, tag: str | None = None) -> None:
    """Delete leftover ``.*.tmp`` files of an earlier interrupted run (only shard ``tag``'s, if given)."""
    for tmp in folder.glob(".*.tmp"):
        if tag is None or f"-{tag}" in tmp.name:
            tmp.unlink(missing_ok=True)


@dataclass
class Schema:
    """The output schema: identity columns, integer configuration, swept parameters, results.

    Configuration columns are int32 (the device computes them in int32);
    swept machine parameters are float64, mapped from their axis digit to
    the exact value in the spec; results are float32 (float64 with ``--x64``).
    A categorical column (:attr:`categories`: ``recompute``, a swept
    ``memory_model``) is written as its names, dictionary-encoded: its
    int32 codes are the indices, its names the dictionary.
    A Pareto front of distinct optima (``--keep pareto:COLS``) ends with
    :data:`TIED`, int64: how many configurations each row stands for.
    """

    models: list[str]
    machines: list[str]
    strategies: list[str]
    int_columns: tuple[str, ...]  # configuration columns, then swept machine parameters (digits)
    float_columns: tuple[str, ...]  # result columns
    float_type: pa.DataType
    metadata: dict[str, str] = field(default_factory=dict)
    columns: tuple[str, ...] | None = None  # subset to write, None = all
    axis_values: dict[str, np.ndarray] = field(default_factory=dict)  # machine axes: digit -> value
    tied: bool = False  # a TIED column last
    #: int columns written as names (:func:`choices_of`): column -> names in code order. Set by
    #: :meth:`categorical`; a schema stored before it (no key) writes codes, as it did.
    categories: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def categorical(self) -> Schema:
        """This schema with every categorical int column (:func:`choices_of`) written as names."""
        self.categories = {c: choices_of(c) for c in self.int_columns if choices_of(c)}
        return self

    @property
    def float_dtype(self) -> np.dtype:
        """The numpy type of the result columns (``to_pandas_dtype`` would import pandas)."""
        return np.dtype(np.float64 if self.float_type == pa.float64() else np.float32)

    def arrow(self) -> pa.Schema:
        fields = [
            pa.field(name, pa.dictionary(pa.int32(), pa.string()))
            for name in ("model", "machine", "strategy")
        ]
        for name in self.int_columns:
            if name in self.categories:
                fields.append(pa.field(name, pa.dictionary(pa.int32(), pa.string())))
            else:
                fields.append(pa.field(name, pa.float64() if name in self.axis_values else pa.int32()))
        fields.extend(pa.field(name, self.float_type) for name in self.float_columns)
        fields.append(pa.field("feasible", pa.bool_()))
        fields.append(pa.field(LIMIT_REASON, pa.dictionary(pa.int8(), pa.string())))
        if self.tied:
            fields.append(pa.field(TIED, pa.int64()))
        schema = pa.schema(fields)
        if self.columns is not None:
            schema = pa.schema([schema.field(c) for c in self.columns])
        return schema.with_metadata({META_KEY: json.dumps(self.metadata).encode()})

    def all_names(self) -> list[str]:
        return [
            "model",
            "machine",
            "strategy",
            *self.int_columns,
            *self.float_columns,
            "feasible",
            LIMIT_REASON,
            *([TIED] if self.tied else []),
        ]

    def statistics_columns(self) -> list[str]:
        """Columns whose row-group min/max a sweep writes: labels, configuration and swept axes.

        A chunk is a contiguous range of the grid, so these are narrow per row
        group and a ``--where`` on them skips most groups; the result columns
        span nearly their whole range in every group, so their statistics would
        prune nothing (and cost up to a fifth of the encoding time on
        incompressible floats).
        """
        written = self.all_names() if self.columns is None else list(self.columns)
        return [c for c in written if c not in self.float_columns]

    def table(
        self,
        labels: tuple[str, str, str] | np.ndarray,
        ints: np.ndarray,
        floats: np.ndarray,
        limit: np.ndarray,
        tied: np.ndarray | None = None,
    ) -> pa.Table:
        """A table from a chunk's ``ints [Fi, n]``, ``floats [Ff, n]`` and limit codes ``[n]``
        (and, with :attr:`tied`, each row's count ``tied [n]``; None: one each).

        ``labels`` is one (model, machine, strategy) for every row, an
        ``[n, 3]`` array of them, or an ``[n, 3]`` integer array of their
        positions in :attr:`models`, :attr:`machines` and :attr:`strategies`.
        """
        n = len(limit)
        wanted = set(self.all_names() if self.columns is None else self.columns)
        columns: dict[str, pa.Array] = {}
        rows = labels if isinstance(labels, np.ndarray) and labels.ndim == 2 else None
        for j, (name, names) in enumerate(
            (("model", self.models), ("machine", self.machines), ("strategy", self.strategies))
        ):
            if name in wanted:
                if rows is not None and np.issubdtype(rows.dtype, np.integer):
                    codes = rows[:, j].astype(np.int32)
                elif rows is not None:
                    uniq, inverse = np.unique(rows[:, j].astype(str), return_inverse=True)
                    codes = np.array([names.index(v) for v in uniq], dtype=np.int32)[inverse.reshape(-1)]
                else:
                    codes = np.full(n, names.index(labels[j]), dtype=np.int32)
                columns[name] = arrays.dictionary(codes, names)
        for i, name in enumerate(self.int_columns):
            if name in wanted:
                col = ints[i]
                if name in self.categories:  # codes: an axis digit's value, or the code itself
                    codes = self.axis_values[name][col] if name in self.axis_values else col
                    columns[name] = arrays.dictionary(codes, self.categories[name])
                elif name in self.axis_values:
                    columns[name] = arrays.numeric(self.axis_values[name][col], pa.float64())
                else:
                    columns[name] = arrays.numeric(col, pa.int32())
        for i, name in enumerate(self.float_columns):
            if name in wanted:
                valid = ~np.isnan(floats[i]) if name in NULL_WHERE_NAN else None
                columns[name] = arrays.numeric(floats[i], self.float_type, valid)
        if "feasible" in wanted:
            columns["feasible"] = arrays.flags(limit == 0)
        if LIMIT_REASON in wanted:
            columns[LIMIT_REASON] = arrays.limit_reasons(limit)
        if self.tied and TIED in wanted:
            columns[TIED] = arrays.numeric(np.ones(n, np.int64) if tied is None else tied, pa.int64())
        schema = self.arrow()
        return pa.Table.from_arrays([columns[f.name] for f in schema], schema=schema)

    def to_json(self) -> dict:
        """Everything needed to rebuild the schema (``sweep merge`` writes tables from it)."""
        return {
            "models": self.models,
            "machines": self.machines,
            "strategies": self.strategies,
            "int_columns": list(self.int_columns),
            "float_columns": list(self.float_columns),
            "float_type": str(self.float_type),
            "metadata": self.metadata,
            "columns": list(self.columns) if self.columns is not None else None,
            "axis_values": {k: [float(x) for x in v] for k, v in self.axis_values.items()},
            "tied": self.tied,
            "categories": {k: list(v) for k, v in self.categories.items()},
        }

    @classmethod
    def from_json(cls, doc: dict) -> Schema:
        return cls(
            models=list(doc["models"]),
            machines=list(doc["machines"]),
            strategies=list(doc["strategies"]),
            int_columns=tuple(doc["int_columns"]),
            float_columns=tuple(doc["float_columns"]),
            float_type=pa.type_for_alias(doc["float_type"]),
            metadata=doc["metadata"],
            columns=tuple(doc["columns"]) if doc["columns"] is not None else None,
            axis_values={k: np.asarray(v, dtype=np.float64) for k, v in doc["axis_values"].items()},
            tied=bool(doc.get("tied", False)),
            categories={k: tuple(v) for k, v in doc.get("categories", {}).items()},
        )


class PartWriter:
    """Writes one complete part file per call, by temporary name and rename."""

    def __init__(
        self, folder: Path, schema: pa.Schema, compression: str = "zstd", statistics: list[str] | None = None
    ):
        self.folder = folder
        self.schema = schema
        self.compression = compression
        # min/max per row group for these columns (default all): what a --where can prune by
        self.statistics: bool | list[str] = True if statistics is None else statistics
        # Floating-point columns are stored byte-stream-split (Parquet's BYTE_STREAM_SPLIT):
        # the same encoding time, and zstd then compresses a sweep's part files several
        # times smaller.
        self.split = [f.name for f in schema if pa.types.is_floating(f.type)]

    def write(self, name: str, table: pa.Table) -> Path:
        """One table as one row group."""
        self.write_tables(name, [table], max(len(table), 1))
        return self.folder / name

    def write_tables(self, name: str, tables: Iterable[pa.Table], row_group_size: int | None = None) -> int:
        """Tables (at least one) one after another into one part file; returns the rows written."""
        return write_parquet(
            self.folder / name,
            tables,
            row_group_size,
            compression=self.compression,
            use_dictionary=[
                f.name for f in self.schema if pa.types.is_dictionary(f.type) or f.name in LABEL_COLUMNS
            ],
            use_byte_stream_split=self.split,
            write_statistics=self.statistics,
        )


def write_parquet(
    path: Path, tables: Iterable[pa.Table], row_group_size: int | None = None, **options
) -> int:
    """Tables (at least one, maybe empty) into one Parquet file, streamed: a temporary name,
    then a rename. ``row_group_size`` defaults to one row group a table; ``options`` go to
    :class:`pyarrow.parquet.ParquetWriter`. Returns the rows written."""
    tmp = temporary(path)
    rows = 0
    try:
        writer = None
        for table in tables:
            if writer is None:
                writer = pq.ParquetWriter(tmp, table.schema, **options)
            writer.write_table(table, row_group_size=row_group_size or max(len(table), 1))
            rows += len(table)
        if writer is None:
            raise ValueError(f"{path.name}: no table to write")
        writer.close()
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return rows


class ManifestText:
    """``json.dumps(doc, indent=1)`` of a manifest, with the values of its ``fixed`` keys encoded once.

    A run saves its manifest after every part file. The job list (every axis
    value of every job) and the schema never change and are most of the text;
    encoding them at every save cost a large share of the writers' time. A
    fixed key's value must not change after the first call.
    """

    def __init__(self, fixed: Iterable[str]):
        self.fixed = frozenset(fixed)
        self.cache: dict[str, str] = {}

    def __call__(self, doc: dict) -> str:
        if not doc:
            return "{}"
        parts = []
        for key, value in doc.items():
            text = self.cache.get(key)
            if text is None:
                # one level deeper than json.dumps puts it; a JSON string holds no raw newline
                text = json.dumps(value, indent=1).replace("\n", "\n ")
                if key in self.fixed:
                    self.cache[key] = text
            parts.append(f" {json.dumps(key)}: {text}")
        return "{\n" + ",\n".join(parts) + "\n}"


def write_manifest(path: Path, text: str, schema: pa.Schema) -> None:
    """Write manifest ``text`` (JSON) as ``path``: a Parquet file of ``schema`` (the data's)
    with no rows and ``text`` under :data:`MANIFEST_KEY`, by temporary name and rename."""
    tmp = temporary(path)
    try:
        writer = pq.ParquetWriter(tmp, schema)
        writer.add_key_value_metadata({MANIFEST_KEY: text})
        writer.close()
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def read_manifest(folder: Path, name: str = MANIFEST) -> dict | None:
    """The manifest ``name`` in ``folder`` as a dict, None if there is none."""
    path = folder / name
    if not path.exists():
        return None
    try:
        meta = pq.read_metadata(path).metadata or {}
        return json.loads(meta[MANIFEST_KEY.encode()])
    except KeyError:
        raise InputError(f"not a manifest: no '{MANIFEST_KEY}' metadata", str(path)) from None
    except (OSError, ValueError, pa.ArrowException) as err:  # ValueError: bad JSON or UTF-8
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise InputError(f"unreadable manifest: {first}", str(path)) from None


def load_manifest(folder: Path, name: str = MANIFEST) -> Manifest | None:
    """The manifest ``name`` in ``folder``, typed (:class:`~sweep.output.manifest.Manifest`);
    None if there is none. :func:`read_manifest` gives the document as stored."""
    doc = read_manifest(folder, name)
    if doc is None:
        return None
    if not isinstance(doc, dict):
        raise InputError("not a manifest: its document is not a JSON object", str(folder / name))
    return Manifest.from_json(doc)


def old_manifests(folder: Path) -> list[Path]:
    """Manifests an earlier version wrote (``_manifest.json``, ``_manifest-sKofN.json``)."""
    return [*folder.glob(OLD_MANIFEST), *folder.glob("_manifest-s*of*.json")]


def shard_manifests(folder: Path) -> dict[tuple[int, int], Path]:
    """The shard manifests in ``folder``, by (k, n)."""
    out = {}
    for path in folder.glob("_manifest-s*of*.parquet"):
        m = SHARD_MANIFEST.fullmatch(path.name)
        if m:
            out[(int(m[1]), int(m[2]))] = path
    return out


def _remove(paths) -> None:
    for f in paths:
        f.unlink(missing_ok=True)


def prepare_folder(
    folder: Path, resume: bool, overwrite: bool, run_key: dict, tag: str | None = None
) -> Manifest | None:
    """Check the output folder; returns the manifest to resume from, if any.

    A shard (``tag``) looks only at its own files, resumes from its own
    manifest whenever the run key matches (a requeued job array task reruns
    the same command), and refuses a folder holding a different sweep.
    """
    if folder.exists() and not folder.is_dir():
        raise InputError("output path exists and is not a folder", str(folder))
    check_own(folder)
    writable_folder(folder)
    if tag is not None:
        return _prepare_shard(folder, overwrite, run_key, tag)
    remove_temporaries(folder)
    old = old_manifests(folder)
    manifest = None if overwrite else load_manifest(folder)
    has_parts = any(folder.glob("part-*.parquet")) or bool(shard_manifests(folder)) or bool(old)
    if overwrite:
        _remove(folder.glob("part-*.parquet"))
        _remove(folder.glob("_keep-*.parquet"))
        _remove(folder.glob("_spill-*.parquet"))
        _remove(shard_manifests(folder).values())
        _remove(old)
        (folder / MANIFEST).unlink(missing_ok=True)
        return None
    if resume and manifest is None and old:
        raise InputError(OLD_VERSION.format(old[0].name), str(folder), param="overwrite")
    if resume:
        if manifest is None:
            if has_parts:
                raise InputError("has part files but no manifest: cannot resume", str(folder))
            return None
        if manifest.run_key != run_key:
            raise InputError(
                f"was written by {_key_change(manifest.run_key, run_key)}: cannot resume "
                "(repeat its spec and options, or use overwrite)",
                str(folder),
                param="overwrite",
            )
        return manifest
    if manifest is not None or has_parts:
        raise InputError(
            "output folder already holds a sweep (use resume or overwrite)",
            str(folder),
            param=("resume", "overwrite"),
        )
    return None


def _prepare_shard(folder: Path, overwrite: bool, run_key: dict, tag: str) -> Manifest | None:
    if any(folder.glob("part-j*.parquet")):
        raise InputError("holds an unsharded sweep: use another folder", str(folder))
    remove_temporaries(folder, tag)
    own = manifest_name(tag)
    if overwrite:  # this shard's files only; a merge of the old shards no longer holds
        _remove(folder.glob(f"part-{tag}-*.parquet"))
        _remove(folder.glob(state_checkpoints(tag)))
        _remove([folder / state_name(tag)])
        _remove(folder.glob(f"{spill_prefix(tag)}*.parquet"))
        _remove([folder / own, folder / MANIFEST, folder / f"_manifest-{tag}.json", folder / OLD_MANIFEST])
        return None
    if old := old_manifests(folder):
        raise InputError(OLD_VERSION.format(old[0].name), str(folder), param="overwrite")
    for path in [folder / MANIFEST, *(p for p in shard_manifests(folder).values() if p.name != own)]:
        other = load_manifest(folder, path.name)
        if other is not None and other.run_key != run_key:
            raise InputError(
                f"holds a different sweep or shard count ({path.name}): use another folder or overwrite",
                str(folder),
                param="overwrite",
            )
    manifest = load_manifest(folder, own)
    if manifest is None:
        if any(folder.glob(f"part-{tag}-*.parquet")):
            raise InputError(
                f"has part files of shard {tag} but no manifest (use overwrite)",
                str(folder),
                param="overwrite",
            )
        return None
    if manifest.run_key != run_key:
        raise InputError(
            f"shard {tag} was written by {_key_change(manifest.run_key, run_key)} "
            "(repeat its spec and options, or use overwrite)",
            str(folder),
            param="overwrite",
        )
    return manifest


def _key_change(old: dict | None, new: dict) -> str:
    """What differs between a folder's run key and this run's, for an error line: a resume
    must repeat the spec and the options of the run it continues, ``--chunk`` among them."""
    old = old or {}
    names = [k for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
    said = ["the spec differs" if k == "spec" else f"{k} was {old.get(k)}, now {new.get(k)}" for k in names]
    return "another run (" + "; ".join(said) + ")"
