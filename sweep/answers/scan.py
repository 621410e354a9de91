"""Reading a sweep's Parquet output row group by row group: the two passes of a query.

Row groups are listed in dataset order with the position of their first
row, and pruned by their statistics against the filter; a scan yields the
matching rows of some columns batch by batch with their positions; a fetch
reads a few columns of given positions back (the second pass).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

_MATCH = "__sweep_match"


@dataclass
class ScanStats:
    """What a query read: row groups in the data and after statistics pruning, rows, seconds."""

    row_groups: int = 0
    row_groups_read: int = 0
    rows_read: int = 0
    rows_matched: int = 0
    second_pass_row_groups: int = 0
    seconds: float = 0.0

    def describe(self) -> str:
        skipped = self.row_groups - self.row_groups_read
        rate = self.rows_read / self.seconds if self.seconds > 0 else 0.0
        return (
            f"{self.rows_matched:,} of {self.rows_read:,} rows matched; {self.row_groups_read:,} of "
            f"{self.row_groups:,} row groups read ({skipped:,} skipped by statistics); "
            f"{self.seconds:.2f} s, {rate:,.0f} rows/s"
        )


@dataclass
class RowGroup:
    fragment: Any  # a one-row-group fragment
    base: int  # dataset position of its first row
    rows: int


def row_groups(dataset: ds.Dataset, expr: pc.Expression | None, stats: ScanStats) -> list[RowGroup]:
    """Row groups in dataset order, with their first row's position; pruned by statistics."""
    out: list[RowGroup] = []
    base = 0
    for frag in dataset.get_fragments():
        split = getattr(frag, "split_by_row_group", None)
        if split is None:  # not Parquet (e.g. an in-memory dataset): one piece
            n = frag.count_rows()
            stats.row_groups += 1
            out.append(RowGroup(frag, base, n))
            base += n
            continue
        bases: dict[int, int] = {}
        for info in frag.row_groups:
            bases[info.id] = base
            base += info.num_rows
        stats.row_groups += len(bases)
        pieces = (
            split(filter=expr, schema=dataset.schema) if expr is not None else split(schema=dataset.schema)
        )
        for piece in pieces:
            info = piece.row_groups[0]
            out.append(RowGroup(piece, bases[info.id], info.num_rows))
    return out


def scan(
    dataset: ds.Dataset,
    groups: list[RowGroup],
    columns: Sequence[str],
    expr: pc.Expression | None,
    stats: ScanStats,
    batch_rows: int,
) -> Iterator[tuple[pa.RecordBatch, np.ndarray]]:
    """Matching rows of ``columns``, batch by batch, with their dataset positions."""
    proj: dict[str, pc.Expression] = {c: pc.field(c) for c in columns}
    if expr is not None:
        proj[_MATCH] = expr
    for rg in groups:
        stats.row_groups_read += 1
        offset = rg.base
        for batch in rg.fragment.to_batches(
            columns=proj, schema=dataset.schema, batch_size=batch_rows, use_threads=True
        ):
            n = batch.num_rows
            rows = np.arange(offset, offset + n, dtype=np.int64)
            offset += n
            stats.rows_read += n
            if expr is not None:
                match = batch.column(_MATCH).fill_null(False)
                batch = batch.drop_columns([_MATCH]).filter(match)
                rows = rows[match.to_numpy(zero_copy_only=False)]
            stats.rows_matched += len(rows)
            if len(rows):
                yield batch, rows


def values(batch: pa.RecordBatch | pa.Table, cols: Sequence[str], signs: Sequence[float]) -> np.ndarray:
    """``[n, k]`` float64 objectives; null becomes NaN; ``signs`` of -1 negate (maximise)."""
    out = np.empty((batch.num_rows, len(cols)), dtype=np.float64)
    for j, (c, s) in enumerate(zip(cols, signs, strict=True)):
        arr = batch.column(c)
        if arr.null_count:
            arr = arr.cast(pa.float64()).fill_null(float("nan"))
        out[:, j] = np.asarray(arr.to_numpy(zero_copy_only=False), dtype=np.float64) * s
    return out


def tied_counts(batch: pa.RecordBatch, counted: bool) -> np.ndarray:
    """The configurations each row of ``batch`` stands for: its ``tied`` column (a front of
    distinct optima, :data:`sweep.output.store.TIED`) when ``counted``, else one each."""
    if not counted:
        return np.ones(batch.num_rows, dtype=np.int64)
    col = batch.column("tied")
    return np.asarray(col.fill_null(1).to_numpy(zero_copy_only=False), dtype=np.int64)


def group_codes(batch: pa.RecordBatch, per: Sequence[str]) -> tuple[np.ndarray, list[tuple]]:
    """Per-row group code and the group key (tuple of Python values) of each code."""
    n = batch.num_rows
    if not per:
        return np.zeros(n, dtype=np.int64), [()]
    combined = np.zeros(n, dtype=np.int64)
    tables: list[list] = []
    for c in per:
        arr = batch.column(c)
        enc = arr if pa.types.is_dictionary(arr.type) else pc.dictionary_encode(arr)
        values = [*enc.dictionary.to_pylist(), None]
        idx = enc.indices.fill_null(len(values) - 1).to_numpy(zero_copy_only=False).astype(np.int64)
        combined = combined * len(values) + idx
        tables.append(values)
    if n and combined.min() == combined.max():  # one group (one model and machine, say): no sort
        uniq, inverse = combined[:1], np.zeros(n, dtype=np.int64)
    else:
        uniq, inverse = np.unique(combined, return_inverse=True)
    keys = []
    for u in uniq:
        parts = []
        rest = int(u)
        for values in reversed(tables):
            rest, i = divmod(rest, len(values))
            parts.append(values[i])
        keys.append(tuple(reversed(parts)))
    return inverse.astype(np.int64).reshape(-1), keys


def fetch(
    dataset: ds.Dataset,
    groups: list[RowGroup],
    rows: np.ndarray,
    columns: Sequence[str],
    stats: ScanStats,
    batch_rows: int,
) -> pa.Table:
    """Pass 2: ``columns`` of the rows at dataset positions ``rows`` (ascending), in that order."""
    schema = pa.schema([dataset.schema.field(c) for c in columns])
    if len(rows) == 0 or not columns:
        return schema.empty_table()
    bases = np.asarray([g.base for g in groups], dtype=np.int64)
    which = np.searchsorted(bases, rows, side="right") - 1
    pieces = []
    for gi in np.unique(which):
        rg = groups[int(gi)]
        wanted = rows[which == gi] - rg.base
        stats.second_pass_row_groups += 1
        start = 0
        for batch in rg.fragment.to_batches(
            columns=list(columns), schema=dataset.schema, batch_size=batch_rows, use_threads=True
        ):
            n = batch.num_rows
            inside = wanted[(wanted >= start) & (wanted < start + n)] - start
            if len(inside):
                pieces.append(pa.Table.from_batches([batch.take(pa.array(inside))]))
            start += n
            if start > wanted[-1]:
                break
    return pa.concat_tables(pieces).cast(schema) if pieces else schema.empty_table()
