"""Query results on the terminal and in files: a readable column choice, an aligned text
table, and Parquet, CSV or JSON files written whole or not at all."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa

from kernels.names import SCALAR_PARAMS
from sweep.errors import InputError
from sweep.output import store

#: The swept machine-parameter columns (:mod:`kernels.names` holds them without importing JAX).
MACHINE_PARAMS = SCALAR_PARAMS
#: Columns shown on the terminal when none are asked for, in this order, where present.
#: (micro_batch and the own axes tp ... precision are only in sweeps that have
#: data+tensor+pipeline.)
DISPLAY_FIRST = (
    "model",
    "machine",
    "strategy",
    "p",
    "p1",
    "p2",
    "b",
    "global_batch",
    "S",
    "micro_batch",
    "tp",
    "pp",
    "vp",
    "sp",
    "recompute",
    "zero",
    "precision",
)
DISPLAY_LAST = ("t_epoch_s", "t_comp_s", "t_comm_s", "mem_bytes", "feasible", "limit_reason", "rank", "tied")
#: Shown after t_epoch_s where the rows are a transformer's (a ``tp`` column): an LLM run is
#: read per iteration and by its model-FLOPs utilisation.
DISPLAY_TRANSFORMER = ("t_iter_s", "mfu")


def display_columns(table: pa.Table, extra: Sequence[str] = ()) -> list[str]:
    """A readable subset for the terminal: identity (model and machine always, so that an
    answer says what it is about), configuration, swept machine parameters, the query's own
    columns, times and memory."""
    names = table.column_names
    last = list(DISPLAY_LAST)
    if "tp" in names:
        last[1:1] = DISPLAY_TRANSFORMER
    wanted = [
        *DISPLAY_FIRST,
        *[c for c in names if c in MACHINE_PARAMS],
        *extra,
        *last,
    ]
    out = []
    for c in wanted:
        if c in names and c not in out:
            out.append(c)
    return out


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.6g}" if math.isfinite(value) else str(value)
    text = str(value)
    return text if text else "-"


def format_table(table: pa.Table, columns: Sequence[str] | None = None, max_rows: int | None = None) -> str:
    """A plain aligned text table (numbers right-aligned, 6 significant digits)."""
    cols = list(columns) if columns else table.column_names
    shown = table if max_rows is None else table.slice(0, max_rows)
    data = {c: [_cell(v) for v in shown.column(c).to_pylist()] for c in cols}
    numeric = {
        c: pa.types.is_integer(table.schema.field(c).type) or pa.types.is_floating(table.schema.field(c).type)
        for c in cols
    }
    widths = {c: max([len(c), *map(len, data[c])]) for c in cols}
    lines = ["  ".join(c.rjust(widths[c]) if numeric[c] else c.ljust(widths[c]) for c in cols).rstrip()]
    for i in range(shown.num_rows):
        cells = [data[c][i].rjust(widths[c]) if numeric[c] else data[c][i].ljust(widths[c]) for c in cols]
        lines.append("  ".join(cells).rstrip())
    if max_rows is not None and table.num_rows > max_rows:
        lines.append(f"... {table.num_rows - max_rows:,} more rows")
    return "\n".join(lines)


OUTPUT_SUFFIXES = (".parquet", ".pq", ".csv", ".json", ".jsonl", ".ndjson")


def write_table(table: pa.Table, path: str | Path) -> Path:
    """Write a result as Parquet, CSV, JSON (one array of objects) or JSON lines, by suffix.

    Written to a dot-named temporary file and renamed, so no partial file is left.
    """
    out = Path(path)
    suffix = out.suffix.lower()
    if suffix not in OUTPUT_SUFFIXES:
        raise InputError(
            f"out: unknown output type '{suffix or out.name}' (use {', '.join(OUTPUT_SUFFIXES)})", param="out"
        )
    if not out.parent.exists():
        raise InputError("folder does not exist", str(out.parent))
    with store.written(out) as tmp:
        if suffix in (".parquet", ".pq"):
            import pyarrow.parquet as pq

            pq.write_table(table, tmp, compression="zstd")
        elif suffix == ".csv":
            import pyarrow.csv as pacsv

            plain = table.cast(
                pa.schema(
                    [
                        pa.field(f.name, f.type.value_type if pa.types.is_dictionary(f.type) else f.type)
                        for f in table.schema
                    ]
                )
            )
            pacsv.write_csv(plain, tmp)
        else:
            records = [{k: _json_value(v) for k, v in row.items()} for row in table.to_pylist()]
            if suffix == ".json":
                text = json.dumps(records, indent=1) + "\n"
            else:
                text = "".join(json.dumps(r) + "\n" for r in records)
            tmp.write_text(text)
    return out


def _json_value(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v
