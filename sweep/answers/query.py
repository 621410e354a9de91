"""Answers from a sweep's Parquet output: Pareto fronts, top-k and best rows, streamed.

Everything here reads any Parquet written by ``sweep run`` (a dataset folder
or one file) and never loads a whole dataset: it walks the row groups one
batch at a time, skips row groups whose statistics contradict the filter
(``--where`` and feasibility, pushed into Arrow), and keeps only the running
answer per group. Two passes: the first reads the objective and grouping
columns and keeps, per group, the running front (or top k) with each row's
position in the dataset; the second reads the other requested columns of
the few surviving rows, from the row groups that hold them only.

**Pareto** (all objectives minimised; ``maximize`` columns are negated):
row j dominates row i when it is <= in every objective and < in at least
one. Rows equal in every objective do not dominate each other: the answer keeps
one row per distinct objective vector of the front, the earliest in the dataset
(a run writes rows in grid order, so the least grid index), and a ``tied`` column
counting the rows it stands for (the sum of the data's own ``tied`` where it has
one, a front written by ``--keep pareto``); ``all=True`` keeps every tied row
instead, as they are. Rows with a NaN or null objective never
enter a front. Each batch is first screened against the running front
(:func:`sweep.reduce.pareto.dominated_by`: a staircase lookup for two objectives),
and the survivors go to the group's :class:`sweep.reduce.reducer.Reducer`, the
one ``sweep run --keep`` reduces with, with dataset positions as the rows'
identities: one definition of a front, its distinct optima and their tied
counts for the engine and the queries. The result equals the front of the
whole filtered dataset.

**Top k** by one column (ascending; ``descending=True`` for the largest):
ties are broken by position in the dataset (part files in name order, then
row order), NaN counts as +inf. **Best** is the top 1 per group among
feasible rows; with ``rank`` it keeps the best row of every strategy per
group and numbers them.

**Model and machine.** All three answer per model and machine: the
:data:`IDENTITY` columns the data has are put in front of ``per``, and they and
the ``per`` columns go into the output columns even when ``columns`` leaves them
out, so an answer never mixes two models or two machines and every row says
which group it is for.

All three keep feasible rows only (``feasible_only=False`` to keep all) when
the data has a ``feasible`` column. The scans are :mod:`sweep.answers.scan`'s;
:mod:`sweep.answers.tables` formats and writes the results.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from sweep.answers.reducing import GroupReducer as _Reducer
from sweep.answers.reducing import GroupState as _State
from sweep.answers.reducing import absorb as _absorb
from sweep.answers.reducing import pareto_reducer as _pareto_reducer
from sweep.answers.reducing import top_reducer as _top_reducer
from sweep.answers.scan import RowGroup, ScanStats, fetch, group_codes, row_groups, scan, tied_counts, values
from sweep.answers.tables import display_columns, format_table, write_table
from sweep.answers.where import Filter, combine, parse_where
from sweep.errors import InputError
from sweep.inputs.checks import arguments
from sweep.output import store
from sweep.output.manifest import Manifest

__all__ = [
    "BATCH_ROWS", "IDENTITY", "ScanStats", "Source", "Sweep", "as_sweep", "best", "display_columns",
    "format_table", "open", "open_sweep", "pareto", "split_names", "top", "write_table",
]  # fmt: skip

#: Rows per batch read from a row group.
BATCH_ROWS = 1 << 20
META_KEY = b"paradl_sweep"
QUERY_KEY = b"paradl_query"
#: The columns every answer is grouped by and shows (docs/queries.md): a front or a ranking
#: of two models, or of two machines, together would answer no question.
IDENTITY = ("model", "machine")

Source = Any  # a Sweep, a path, or a pyarrow.dataset.Dataset


class Sweep:
    """An opened sweep output: ``.dataset`` is a :class:`pyarrow.dataset.Dataset`.

    The methods are the functions of this module (the ones the CLI runs)
    bound to this dataset. ``last_stats`` holds the :class:`ScanStats` of the
    latest query.
    """

    def __init__(self, path: Path | None, dataset: ds.Dataset):
        self.path = path
        self.dataset = dataset
        self.last_stats: ScanStats | None = None

    def __repr__(self) -> str:
        where = f" {self.path}" if self.path else ""
        return f"<Sweep{where}: {len(self.schema)} columns, {self.count_rows():,} rows>"

    @property
    def schema(self) -> pa.Schema:
        return self.dataset.schema

    @property
    def columns(self) -> list[str]:
        return list(self.schema.names)

    @property
    def metadata(self) -> dict:
        """The ``paradl_sweep`` schema metadata (spec, versions, model and machine descriptions)."""
        raw = (self.schema.metadata or {}).get(META_KEY)
        if not raw:
            return {}
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return {}

    @property
    def manifest(self) -> Manifest | None:
        """The folder's manifest (``_manifest.parquet``), if any and readable."""
        if self.path is None:
            return None
        try:
            return store.load_manifest(self.path)
        except InputError:
            return None

    def count_rows(self, where: str | None = None) -> int:
        arguments(locals())
        return self.dataset.count_rows(filter=self.filter(where))

    def filter(self, where: str | Filter | None) -> pc.Expression | None:
        """The Arrow expression of a ``--where`` text (None for no filter)."""
        if where is None:
            return None
        if isinstance(where, Filter):
            return where.expression
        return parse_where(where, self.schema).expression

    def to_table(self, where: str | Filter | None = None, columns: Sequence[str] | None = None) -> pa.Table:
        """The (filtered) rows as one table: for small results only."""
        arguments(locals())
        cols = _check_columns(self, split_names(columns), "columns") if columns else None
        return self.dataset.to_table(columns=cols, filter=self.filter(where))

    def where(self, where: str | Filter | None = None, columns: Sequence[str] | None = None) -> pa.Table:
        """The rows that match a ``--where`` text (every row for None), as one table."""
        return self.to_table(where, columns)

    def pareto(self, *args, **kwargs) -> pa.Table:
        return pareto(self, *args, **kwargs)

    def top(self, *args, **kwargs) -> pa.Table:
        return top(self, *args, **kwargs)

    def best(self, *args, **kwargs) -> pa.Table:
        return best(self, *args, **kwargs)


def open_sweep(path: str | Path) -> Sweep:
    """Open a dataset folder written by ``sweep run`` (or one Parquet file) for queries."""
    arguments(locals())
    p = Path(path)
    if not p.exists():
        raise InputError("no such file or folder", str(p))
    try:
        dataset = ds.dataset(p, format="parquet")
        names = dataset.schema.names
        files = getattr(dataset, "files", None)
    except (pa.ArrowInvalid, OSError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise InputError(f"not a readable Parquet dataset: {first}", str(p)) from None
    if not names or (files is not None and not files):
        raise InputError("holds no Parquet files", str(p))
    return Sweep(p if p.is_dir() else None, dataset)


def as_sweep(source: Source) -> Sweep:
    """A :class:`Sweep` from a Sweep, a path, or a :class:`pyarrow.dataset.Dataset`."""
    if isinstance(source, Sweep):
        return source
    if isinstance(source, ds.Dataset):
        return Sweep(None, source)
    return open_sweep(source)


# -- column checks -------------------------------------------------------------------------


def _check_columns(sw: Sweep, names: Sequence[str], param: str) -> list[str]:
    """``names``, each a column of the data, once each; else an error naming ``param``."""
    out = []
    for name in names:
        if name not in sw.schema.names:
            known = ", ".join(sw.schema.names)
            raise InputError(f"{param}: unknown column '{name}' (known: {known})", param=param)
        if name not in out:
            out.append(name)
    return out


def _check_numeric(sw: Sweep, names: Sequence[str], param: str) -> None:
    for name in names:
        t = sw.schema.field(name).type
        if not (pa.types.is_integer(t) or pa.types.is_floating(t)):
            numeric = [
                f.name for f in sw.schema if pa.types.is_integer(f.type) or pa.types.is_floating(f.type)
            ]
            raise InputError(
                f"{param}: column '{name}' is not numeric (numeric: {', '.join(numeric)})", param=param
            )


def split_names(values: Sequence[str] | str | None) -> list[str]:
    """``("a,b", "c")`` or ``"a,b"`` to ``["a", "b", "c"]``."""
    if values is None:
        return []
    if isinstance(values, str):
        values = [values]
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


def _filter(sw: Sweep, where: str | Filter | None, feasible_only: bool) -> pc.Expression | None:
    feasible = None
    if feasible_only and "feasible" in sw.schema.names:
        feasible = pc.field("feasible") == pa.scalar(True)
    return combine([sw.filter(where), feasible])


# -- scanning ------------------------------------------------------------------------------


def _concat(a: pa.Table | None, b: pa.Table | None) -> pa.Table | None:
    if a is None:
        return b
    if b is None:
        return a
    return pa.concat_tables([a, b])


def _reduce(
    sw: Sweep,
    value_cols: Sequence[str],
    signs: Sequence[float],
    per: Sequence[str],
    expr: pc.Expression | None,
    out_cols: Sequence[str],
    reducer: _Reducer,
    stats: ScanStats,
    batch_rows: int,
) -> tuple[dict[tuple, _State], list[RowGroup]]:
    """Pass 1: the running answer per group, carrying the requested columns already read."""
    counted = reducer.distinct and store.TIED in sw.schema.names  # the data's own counts
    read = list(dict.fromkeys([*value_cols, *per, *([store.TIED] if counted else [])]))
    carry_cols = [c for c in out_cols if c in read and not (reducer.distinct and c == store.TIED)]
    groups = row_groups(sw.dataset, expr, stats)
    states: dict[tuple, _State] = {}
    k = len(value_cols)
    for batch, rows in scan(sw.dataset, groups, read, expr, stats, batch_rows):
        vals = values(batch, value_cols, signs)
        tied = tied_counts(batch, counted)
        codes, keys = group_codes(batch, per)
        if len(keys) == 1:
            parts: list[tuple[tuple, np.ndarray | None]] = [(keys[0], None)]
        else:
            order = np.argsort(codes, kind="stable")
            cuts = np.flatnonzero(np.diff(codes[order])) + 1
            parts = [(keys[int(codes[s[0]])], s) for s in np.split(order, cuts)]
        for key, idx in parts:
            state = states.get(key)
            if state is None:
                state = states[key] = _State(
                    reducer.new(), np.empty((0, k)), np.empty(0, dtype=np.int64), tied=np.empty(0, np.int64)
                )
            if idx is None:  # one group: no copies
                cand = np.flatnonzero(reducer.screen(state, vals))
            else:
                cand = idx[reducer.screen(state, vals[idx])]
            if len(cand) == 0:
                continue
            before = state.rows
            _absorb(state, reducer, vals[cand], rows[cand], tied[cand])
            if carry_cols:  # the carried rows of the kept positions, in the reducer's order
                picked = pa.Table.from_batches([batch.select(carry_cols).take(pa.array(cand))])
                carried = _concat(state.carry, picked)
                positions = np.concatenate([before, rows[cand]])
                sorter = np.argsort(positions, kind="stable")
                at = sorter[np.searchsorted(positions, state.rows, sorter=sorter)]
                state.carry = carried.take(pa.array(at)) if carried is not None else None
    return states, groups


def _assemble(
    sw: Sweep,
    states: dict[tuple, _State],
    groups: list[RowGroup],
    per: Sequence[str],
    out_cols: Sequence[str],
    stats: ScanStats,
    batch_rows: int,
    rank: bool,
    query: dict,
    distinct: bool = False,
) -> pa.Table:
    """Rows of every group's answer, sorted by group, then value, then position; with
    ``distinct``, the ``tied`` counts of the states in place of the data's (last if it has none)."""
    keys = sorted(states, key=lambda key: tuple((v is None, v) for v in key))
    vals_l, rows_l, grp_l, carry_l = [], [], [], []
    for g, key in enumerate(keys):
        st = states[key]
        vals_l.append(st.vals)
        rows_l.append(st.rows)
        grp_l.append(np.full(len(st.rows), g, dtype=np.int64))
        if st.carry is not None:
            carry_l.append(st.carry)
    n_vals = next((v.shape[1] for v in vals_l), 0)
    vals = np.concatenate(vals_l) if vals_l else np.empty((0, n_vals))
    rows = np.concatenate(rows_l) if rows_l else np.empty(0, dtype=np.int64)
    grp = np.concatenate(grp_l) if grp_l else np.empty(0, dtype=np.int64)
    carried = pa.concat_tables(carry_l) if carry_l else None
    counts = (
        np.concatenate([states[key].tied for key in keys]) if distinct and keys else np.empty(0, np.int64)
    )
    if distinct:
        out_cols = [*(c for c in out_cols if c != store.TIED), store.TIED]
    # fetch the missing columns in position order, then put everything in answer order
    by_pos = np.argsort(rows, kind="stable")
    missing = [
        c
        for c in out_cols
        if (carried is None or c not in carried.column_names) and not (distinct and c == store.TIED)
    ]
    fetched = fetch(sw.dataset, groups, rows[by_pos], missing, stats, batch_rows)
    sort_vals = np.where(np.isnan(vals), np.inf, vals)
    keys_for_sort = [rows, *[sort_vals[:, j] for j in range(sort_vals.shape[1] - 1, -1, -1)], grp]
    order = np.lexsort(keys_for_sort) if len(rows) else np.empty(0, dtype=np.int64)
    inverse_pos = np.empty(len(rows), dtype=np.int64)
    inverse_pos[by_pos] = np.arange(len(rows))
    arrays = []
    fields = []
    for c in out_cols:
        if distinct and c == store.TIED:
            arrays.append(pa.chunked_array([pa.array(counts[order], pa.int64())]))
            fields.append(pa.field(store.TIED, pa.int64()))
            continue
        if carried is not None and c in carried.column_names:
            col = carried.column(c).take(pa.array(order))
        else:
            col = fetched.column(c).take(pa.array(inverse_pos[order]))
        arrays.append(col)
        fields.append(sw.schema.field(c))
    if rank:
        g_sorted = grp[order]
        ranks = np.ones(len(order), dtype=np.int64)
        for i in range(1, len(order)):
            ranks[i] = ranks[i - 1] + 1 if g_sorted[i] == g_sorted[i - 1] else 1
        arrays.append(pa.chunked_array([pa.array(ranks)]))
        fields.append(pa.field("rank", pa.int64()))
    meta = dict(sw.schema.metadata or {})
    meta[QUERY_KEY] = json.dumps(query).encode()
    schema = pa.schema(fields, metadata=meta)
    return pa.Table.from_arrays(
        [a.combine_chunks() if len(a.chunks) != 1 else a.chunk(0) for a in arrays], schema=schema
    )


def _run(
    kind: str,
    source: Source,
    value_cols: Sequence[str],
    signs: Sequence[float],
    reducer: _Reducer,
    where: str | Filter | None,
    per: Sequence[str],
    columns: Sequence[str] | None,
    feasible_only: bool,
    stats: ScanStats | None,
    batch_rows: int,
    rank: bool,
    query: dict,
) -> pa.Table:
    sw = as_sweep(source)
    per = _check_columns(sw, list(per), "per")
    out_cols = _check_columns(sw, split_names(columns), "columns") if columns else list(sw.schema.names)
    # the groups' columns always, so that every row says which group it answers for: the
    # identity columns first (IDENTITY's order), then the other per columns
    extra = [c for c in per if c not in out_cols and c not in IDENTITY]
    out_cols = [*_identity(sw, out_cols), *extra, *out_cols]
    expr = _filter(sw, where, feasible_only)
    st = stats if stats is not None else ScanStats()
    started = time.perf_counter()
    states, groups = _reduce(sw, value_cols, signs, per, expr, out_cols, reducer, st, batch_rows)
    query = {"kind": kind, **query}
    table = _assemble(sw, states, groups, per, out_cols, st, batch_rows, rank, query, reducer.distinct)
    st.seconds = time.perf_counter() - started
    sw.last_stats = st
    return table


def pareto(
    source: Source,
    minimize: Sequence[str] | str = (),
    maximize: Sequence[str] | str = (),
    *,
    where: str | Filter | None = None,
    per: Sequence[str] | str = (),
    columns: Sequence[str] | None = None,
    feasible_only: bool = True,
    stats: ScanStats | None = None,
    batch_rows: int = BATCH_ROWS,
    all: bool = False,
) -> pa.Table:
    """The non-dominated rows (one front per model, machine and ``per`` group), exactly; see
    the module docstring.

    ``minimize`` and ``maximize`` name numeric columns (at least one in all);
    ``where`` is a ``--where`` text; ``columns`` the output columns (default
    all). One row per distinct optimum with its ``tied`` count, or with ``all``
    every tied row. Sorted by group, then the objectives in order (each in its own
    direction), then dataset position. ``stats``, when given, is filled in.
    """
    arguments(locals())
    sw = as_sweep(source)
    mins, maxs = split_names(minimize), split_names(maximize)
    objs = [*mins, *maxs]
    if not objs:
        raise InputError(
            "pareto needs at least one objective (minimize or maximize)", param=("minimize", "maximize")
        )
    for names, param in ((mins, "minimize"), (maxs, "maximize")):
        _check_columns(sw, names, param)
        _check_numeric(sw, names, param)
    if len(set(objs)) != len(objs):
        raise InputError("an objective is given twice")
    signs = [1.0] * len(mins) + [-1.0] * len(maxs)
    groups = _grouped(sw, per)
    query = {"min": mins, "max": maxs, "per": groups, "where": _text(where), "all": all}
    return _run(
        "pareto", sw, objs, signs, _pareto_reducer(len(objs), not all), where, groups, columns,
        feasible_only, stats, batch_rows, False, query,
    )  # fmt: skip


def top(
    source: Source,
    by: str,
    k: int = 10,
    *,
    descending: bool = False,
    where: str | Filter | None = None,
    per: Sequence[str] | str = (),
    columns: Sequence[str] | None = None,
    feasible_only: bool = True,
    stats: ScanStats | None = None,
    batch_rows: int = BATCH_ROWS,
    rank: bool = True,
) -> pa.Table:
    """The ``k`` rows with the smallest ``by`` (largest with ``descending``) per model, machine
    and ``per`` group.

    Ties go to the row earlier in the dataset; a ``rank`` column (1..k per
    group) is appended unless ``rank=False``.
    """
    arguments(locals())
    sw = as_sweep(source)
    _check_columns(sw, [by], "by")
    _check_numeric(sw, [by], "by")
    groups = _grouped(sw, per)
    query = {"by": by, "k": k, "descending": descending, "per": groups, "where": _text(where)}
    return _run(
        "top", sw, [by], [-1.0 if descending else 1.0], _top_reducer(k), where, groups, columns,
        feasible_only, stats, batch_rows, rank, query,
    )  # fmt: skip


def best(
    source: Source,
    per: Sequence[str] | str = ("p",),
    by: str = "t_epoch_s",
    *,
    rank: bool = False,
    where: str | Filter | None = None,
    columns: Sequence[str] | None = None,
    stats: ScanStats | None = None,
    batch_rows: int = BATCH_ROWS,
) -> pa.Table:
    """The fastest feasible row per model, machine and group (default: per GPU count p), as in
    ParaDL's ranking tables.

    With ``rank``, the best row of every strategy in each group, ranked 1, 2, ...
    by ``by`` (the paper's per-p strategy ranking).
    """
    arguments(locals())
    sw = as_sweep(source)
    groups = _grouped(sw, per)
    if rank:
        if "strategy" not in sw.schema.names:
            raise InputError("rank needs a 'strategy' column", param="rank")
        table = top(
            sw, by, 1, where=where, per=[*groups, "strategy"], columns=columns, stats=stats,
            batch_rows=batch_rows, rank=False,
        )  # fmt: skip
        return _rank_within(table, groups, by)
    return top(
        sw, by, 1, where=where, per=groups, columns=columns, stats=stats, batch_rows=batch_rows, rank=False
    )


def _identity(sw: Sweep, names: Sequence[str]) -> list[str]:
    """The :data:`IDENTITY` columns the data has and ``names`` lacks."""
    return [c for c in IDENTITY if c in sw.schema.names and c not in names]


def _grouped(sw: Sweep, per: Sequence[str] | str) -> list[str]:
    """The groups of an answer: the ``per`` columns, after the :data:`IDENTITY` ones."""
    names = split_names(per)
    return [*_identity(sw, names), *names]


def _rank_within(table: pa.Table, groups: Sequence[str], by: str) -> pa.Table:
    """Re-sort the per-(group, strategy) winners by group then ``by``, numbering each group 1, 2, ..."""
    if table.num_rows == 0:
        return table.append_column("rank", pa.array([], pa.int64()))
    keys = [tuple(table.column(g).to_pylist()) for g in groups]
    group_ids: dict[tuple, int] = {}
    labels = list(zip(*keys, strict=True)) if keys else [()] * table.num_rows
    ordered = sorted(set(labels), key=lambda t: tuple((v is None, v) for v in t))
    for i, lab in enumerate(ordered):
        group_ids[lab] = i
    gid = np.asarray([group_ids[lab] for lab in labels], dtype=np.int64)
    value = np.asarray(table.column(by).to_numpy(zero_copy_only=False), dtype=np.float64)
    value = np.where(np.isnan(value), np.inf, value)
    order = np.lexsort((np.arange(len(gid)), value, gid))
    table = table.take(pa.array(order))
    gs = gid[order]
    ranks = np.ones(len(gs), dtype=np.int64)
    for i in range(1, len(gs)):
        ranks[i] = ranks[i - 1] + 1 if gs[i] == gs[i - 1] else 1
    return table.append_column("rank", pa.array(ranks))


def _text(where: str | Filter | None) -> str | None:
    if where is None:
        return None
    return where.text if isinstance(where, Filter) else where


#: ``sweep.open``: the notebook entry point.
open = open_sweep
