"""A dataset folder reads alike in every Arrow tool: pyarrow.dataset, pandas, Polars and DuckDB.

pyarrow and pandas skip ``_``- and ``.``-files; Polars (``scan_parquet(folder)``)
and DuckDB (``'folder/*.parquet'``) read every Parquet file. A finished
folder must therefore hold only Parquet files of the data's schema, the
manifest among them with no rows (docs/output-format.md, "Files in a
dataset folder"). Column names must mean one thing to SQL: unique
case-insensitively, and no reserved word.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import grids
from kernels.names import SCALAR_PARAMS
from sweep.engine.evaluate import CONFIG_COLUMNS, RESULT_COLUMNS
from sweep.engine.index import numeric_columns
from sweep.engine.run import run_sweep
from sweep.engine.runstate import RunOptions, Shard
from sweep.inputs.grid import load_spec, plan
from sweep.output import store
from sweep.reduce.keep import parse_keep
from sweep.reduce.merge import merge

duckdb = pytest.importorskip("duckdb")
pl = pytest.importorskip("polars")
pd = pytest.importorskip("pandas")

#: Two models (a file and a built-in), a hybrid with p2, and a swept machine parameter (a
#: float64 column). Rows: 2 models x (data 5 p x 2 b x 3 bandwidths + data+filter 7 (p, p2)
#: with p2 | p x 2 x 3) = 2 x (30 + 42) = 144.
SPEC = f"""name = "arrow-tools"
models = ["{grids.MODELS / "tiny-cnn.toml"}", "alexnet"]
machine = "abci"
strategies = ["data", "data+filter"]
[axes]
p = {{ log2 = [0, 4] }}
b = [8, 4096]
p2 = [2, 4]
inter_bandwidth_Bps = {{ linspace = [12.5e9, 100e9, 3] }}
"""
CHUNK = 16
PARETO = "pareto:t_epoch_s,p"


def _run(spec: Path, out: Path, keep: str | None = None, shard: Shard | None = None) -> None:
    p = plan(load_spec(spec))
    keep_ = parse_keep(keep, numeric_columns(p.jobs[0]))
    run_sweep(p, RunOptions(out=out, chunk=CHUNK, keep=keep_, shard=shard))


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    """Finished folders: every row, --keep pareto, and both as two shards merged."""
    root = tmp_path_factory.mktemp("arrow")
    spec = root / "arrow-tools.toml"
    spec.write_text(SPEC)
    out = {
        "all": root / "all",
        "pareto": root / "pareto",
        "shards": root / "shards",
        "shards-pareto": root / "sp",
    }
    _run(spec, out["all"])
    _run(spec, out["pareto"], PARETO)
    for k in (0, 1):
        _run(spec, out["shards"], shard=Shard(k, 2))
        _run(spec, out["shards-pareto"], PARETO, shard=Shard(k, 2))
    merge(out["shards"])
    merge(out["shards-pareto"])
    return out


def _plain(value):
    """A Python value from any tool's cell: numpy scalars unwrapped, missing values None."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return None
    return value


def _rows(records: list[tuple]) -> list[tuple]:
    return sorted((tuple(_plain(v) for v in r) for r in records), key=repr)


def read_pyarrow(folder: Path, names: list[str]) -> list[tuple]:
    table = ds.dataset(folder, format="parquet").to_table(columns=names)
    return _rows(list(zip(*(table.column(c).to_pylist() for c in names), strict=True)))


def read_pandas(folder: Path, names: list[str]) -> list[tuple]:
    df = pd.read_parquet(folder)[names].astype(object)
    return _rows(list(df.itertuples(index=False, name=None)))


def read_polars(folder: Path, names: list[str]) -> list[tuple]:
    df = pl.scan_parquet(folder).collect()
    df = df.with_columns(pl.col(pl.Categorical).cast(pl.String))
    return _rows(df.select(names).rows())


def read_duckdb(folder: Path, names: list[str]) -> list[tuple]:
    # every name unquoted: a reserved word or a case-insensitive clash would fail or mislead
    return _rows(duckdb.sql(f"select {', '.join(names)} from '{folder}/*.parquet'").fetchall())


@pytest.mark.parametrize("kind", ["all", "pareto", "shards", "shards-pareto"])
def test_every_tool_reads_the_same_rows_and_values(folders, kind):
    folder = folders[kind]
    names = ds.dataset(folder, format="parquet").schema.names
    want = read_pyarrow(folder, names)
    assert want, "the folder holds rows"
    if kind == "all":
        assert len(want) == 144
        assert {r[names.index("model")] for r in want} == {"tiny-cnn", "alexnet"}
        # feasible rows (null) and rows over memory (b = 4096 on alexnet)
        assert {None, "memory"} <= {r[names.index("limit_reason")] for r in want}
    assert read_pandas(folder, names) == want
    assert read_polars(folder, names) == want
    assert read_duckdb(folder, names) == want


@pytest.mark.parametrize("kind", ["all", "pareto", "shards", "shards-pareto"])
def test_a_finished_folder_holds_only_parquet_of_the_data_schema(folders, kind):
    folder = folders[kind]
    files = sorted(folder.iterdir())
    assert all(f.is_file() and f.suffix == ".parquet" for f in files), [f.name for f in files]
    schema = ds.dataset(folder, format="parquet").schema
    for f in files:
        assert pq.read_schema(f).equals(schema, check_metadata=False), f.name
        if f.name.startswith("_"):  # read by Polars and DuckDB, skipped by pyarrow and pandas
            assert pq.read_metadata(f).num_rows == 0, f.name
    names = {f.name for f in files}
    assert store.MANIFEST in names
    if "pareto" in kind:
        assert {n for n in names if not n.startswith("_")} == {store.KEEP_PART}
    manifest = store.read_manifest(folder)
    assert manifest is not None and manifest["complete"] is True
    assert manifest["rows"] == ds.dataset(folder, format="parquet").count_rows()


def test_the_four_tools_agree_on_a_keep_front_and_a_full_run(folders):
    """The merged shards hold the rows of the one run, so the tools read the same in both."""
    names = ds.dataset(folders["all"], format="parquet").schema.names
    assert read_duckdb(folders["shards"], names) == read_pyarrow(folders["all"], names)
    assert read_polars(folders["shards-pareto"], names) == read_pyarrow(folders["pareto"], names)


def _reserved_words() -> set[str]:
    """SQL words a column must not be: DuckDB's reserved keywords and those it allows only as
    type or function names (its grammar is PostgreSQL's), and a hand list of words reserved in
    the SQL standard or in common engines (MySQL, PostgreSQL) that a sweep's column could
    plausibly be named."""
    rows = duckdb.sql(
        "select keyword_name from duckdb_keywords() where keyword_category in ('reserved', 'type_function')"
    ).fetchall()
    common = {
        "all", "array", "between", "case", "cast", "count", "cube", "current", "day", "desc", "end",
        "from", "group", "hour", "limit", "max", "min", "minute", "month", "order", "over", "range",
        "rank", "result", "row", "rows", "second", "start", "system", "time", "timestamp", "user",
        "value", "values", "window", "year",
    }  # fmt: skip
    return {r[0].lower() for r in rows} | common


def test_column_names_are_unique_case_insensitively_and_not_reserved(folders):
    reserved = _reserved_words()
    assert {"limit", "select", "order"} <= reserved
    every = ["model", "machine", "strategy", *CONFIG_COLUMNS, *SCALAR_PARAMS, *RESULT_COLUMNS]
    every += ["feasible", store.LIMIT_REASON]
    for names in (ds.dataset(folders["all"], format="parquet").schema.names, every):
        lowered = [n.lower() for n in names]
        assert len(set(lowered)) == len(lowered), sorted(n for n in names if lowered.count(n.lower()) > 1)
        assert not reserved & set(lowered), sorted(reserved & set(lowered))


def test_duckdb_reads_global_batch_apart_from_b(folders):
    """The bug this guards: with columns b and B, DuckDB's ``select B`` returned b."""
    got = duckdb.sql(
        f"select distinct b, global_batch, p1 from '{folders['all']}/*.parquet' where p = 16 and strategy = 'data'"
    ).fetchall()
    assert sorted(got) == [(8, 8 * 16, 16), (4096, 4096 * 16, 16)]


def test_limit_reason_is_null_exactly_where_feasible(folders):
    table = ds.dataset(folders["all"], format="parquet").to_table(columns=["feasible", "limit_reason"])
    feasible = np.asarray(table.column("feasible").to_pylist())
    reason = table.column("limit_reason")
    assert pa.types.is_dictionary(reason.type)
    assert (np.asarray(reason.is_null().to_pylist()) == feasible).all()
    assert set(reason.drop_null().to_pylist()) <= {"batch", "max_p", "dataset", "memory"}
