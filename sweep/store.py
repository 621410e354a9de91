"""Streaming Parquet output: a dataset folder of part files and a manifest (SPEC section 6).

Part files are written under a dot-name (which Arrow readers skip) and
renamed when complete, so a reader or an interrupted run never sees a
partial part file. ``_manifest.json`` (also written by rename) records the
spec, versions, the number of finished chunks per job, the rows written and
whether the run completed; ``--resume`` continues from it.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from kernels import LIMITS
from sweep.errors import InputError

MANIFEST = "_manifest.json"
META_KEY = b"paradl_sweep"


def versions() -> dict[str, str]:
    """Versions of the tool and the libraries that shaped the numbers."""
    out = {"python": platform.python_version()}
    for dist in ("paradl-sweep", "jax", "jaxlib", "numpy", "pyarrow"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:  # pragma: no cover
            out[dist] = "unknown"
    return out


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a dot-named temporary file and a rename."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def remove_temporaries(folder: Path) -> None:
    """Delete leftover ``.*.tmp`` files of an earlier interrupted run."""
    for tmp in folder.glob(".*.tmp"):
        tmp.unlink(missing_ok=True)


@dataclass
class Schema:
    """The output schema: identity columns, integer configuration, swept parameters, results.

    Configuration columns are int32 (the device computes them in int32);
    swept machine parameters are float64, mapped from their axis digit to
    the exact value in the spec; results are float32 (float64 with ``--x64``).
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

    def arrow(self) -> pa.Schema:
        fields = [
            pa.field(name, pa.dictionary(pa.int32(), pa.string()))
            for name in ("model", "machine", "strategy")
        ]
        for name in self.int_columns:
            fields.append(pa.field(name, pa.float64() if name in self.axis_values else pa.int32()))
        fields.extend(pa.field(name, self.float_type) for name in self.float_columns)
        fields.append(pa.field("feasible", pa.bool_()))
        fields.append(pa.field("limit", pa.dictionary(pa.int8(), pa.string())))
        schema = pa.schema(fields)
        if self.columns is not None:
            schema = pa.schema([schema.field(c) for c in self.columns])
        return schema.with_metadata({META_KEY: json.dumps(self.metadata).encode()})

    def all_names(self) -> list[str]:
        return ["model", "machine", "strategy", *self.int_columns, *self.float_columns, "feasible", "limit"]

    def table(
        self,
        labels: tuple[str, str, str] | np.ndarray,
        ints: np.ndarray,
        floats: np.ndarray,
        limit: np.ndarray,
    ) -> pa.Table:
        """A table from a chunk's ``ints [Fi, n]``, ``floats [Ff, n]`` and limit codes ``[n]``.

        ``labels`` is one (model, machine, strategy) for every row, or an
        ``[n, 3]`` array of them.
        """
        n = len(limit)
        wanted = set(self.all_names() if self.columns is None else self.columns)
        arrays: dict[str, pa.Array] = {}
        rows = labels if isinstance(labels, np.ndarray) and labels.ndim == 2 else None
        for j, (name, names) in enumerate(
            (("model", self.models), ("machine", self.machines), ("strategy", self.strategies))
        ):
            if name in wanted:
                if rows is not None:
                    codes = np.array([names.index(v) for v in rows[:, j]], dtype=np.int32)
                else:
                    codes = np.full(n, names.index(labels[j]), dtype=np.int32)
                arrays[name] = pa.DictionaryArray.from_arrays(codes, pa.array(names))
        for i, name in enumerate(self.int_columns):
            if name in wanted:
                col = ints[i]
                arrays[name] = pa.array(self.axis_values[name][col] if name in self.axis_values else col)
        ftype = self.float_type.to_pandas_dtype()
        for i, name in enumerate(self.float_columns):
            if name in wanted:
                arrays[name] = pa.array(floats[i].astype(ftype, copy=False))
        if "feasible" in wanted:
            arrays["feasible"] = pa.array(limit == 0)
        if "limit" in wanted:
            arrays["limit"] = pa.DictionaryArray.from_arrays(limit.astype(np.int8), pa.array(list(LIMITS)))
        schema = self.arrow()
        return pa.table([arrays[f.name] for f in schema], schema=schema)


class PartWriter:
    """Writes one complete part file per call, by temporary name and rename."""

    def __init__(self, folder: Path, schema: pa.Schema, compression: str = "zstd"):
        self.folder = folder
        self.schema = schema
        self.compression = compression

    def write(self, name: str, table: pa.Table) -> Path:
        final = self.folder / name
        tmp = self.folder / f".{name}.tmp"
        try:
            pq.write_table(
                table,
                tmp,
                compression=self.compression,
                row_group_size=max(len(table), 1),
                use_dictionary=["model", "machine", "strategy", "limit"],
            )
            os.replace(tmp, final)
        finally:
            tmp.unlink(missing_ok=True)
        return final


def part_name(job: int, chunk: int) -> str:
    return f"part-j{job:04d}-c{chunk:09d}.parquet"


def read_manifest(folder: Path) -> dict | None:
    path = folder / MANIFEST
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise InputError(f"unreadable manifest: {err}", str(path)) from None


def prepare_folder(folder: Path, resume: bool, overwrite: bool, run_key: dict) -> dict | None:
    """Check the output folder; returns the manifest to resume from, if any."""
    if folder.exists() and not folder.is_dir():
        raise InputError("output path exists and is not a folder", str(folder))
    folder.mkdir(parents=True, exist_ok=True)
    remove_temporaries(folder)
    manifest = read_manifest(folder)
    has_parts = any(folder.glob("part-*.parquet"))
    if overwrite:
        for f in folder.glob("part-*.parquet"):
            f.unlink()
        for f in folder.glob("_keep-*.parquet"):
            f.unlink()
        (folder / MANIFEST).unlink(missing_ok=True)
        return None
    if resume:
        if manifest is None:
            if has_parts:
                raise InputError("has part files but no manifest: cannot resume", str(folder))
            return None
        if manifest.get("run_key") != run_key:
            raise InputError(
                "was written by a different spec or options: cannot resume (use --overwrite)", str(folder)
            )
        return manifest
    if manifest is not None or has_parts:
        raise InputError("output folder already holds a sweep (use --resume or --overwrite)", str(folder))
    return None


def stderr_is_tty() -> bool:
    return sys.stderr.isatty()
