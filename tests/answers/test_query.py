"""Queries over sweep outputs (sweep.query, sweep.where): Pareto fronts equal the O(n^2) brute
force (ties, duplicates, NaN, 1-3 objectives, maximised columns, per group), top-k and best,
the --where language (parsing, errors, pushdown that skips row groups) and the CLI commands."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sweep
from sweep.answers import query
from sweep.answers.where import parse_where
from sweep.cli.main import cli
from sweep.errors import InputError
from sweep.reduce.pareto import dominated_by, pareto_brute, pareto_mask, pareto_mask_blocked
from tests.answers.query_data import STRATEGY_NAMES, small_sweep, two_model_sweep, write_synthetic


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    return small_sweep(tmp_path_factory)


def _rids(table: pa.Table) -> list[int]:
    return sorted(table.column("rid").to_pylist())


# ----------------------------------------------------------------------------- Pareto vs brute force

# small integer values force ties and exact duplicates; NaN never enters a front; infinities count
values = st.one_of(st.integers(0, 4).map(float), st.sampled_from([float("nan"), float("inf"), float("-inf")]))


@st.composite
def datasets(draw, max_k: int = 3):
    n = draw(st.integers(0, 40))
    k = draw(st.integers(1, max_k))
    objs = np.asarray(draw(st.lists(st.lists(values, min_size=k, max_size=k), min_size=n, max_size=n)))
    objs = objs.reshape(n, k)
    feasible = np.asarray(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    strategy = np.asarray(draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)), dtype=np.int32)
    maximize = draw(st.lists(st.booleans(), min_size=k, max_size=k))
    files = draw(st.integers(1, 3))
    row_group = draw(st.integers(1, 8))
    batch = draw(st.integers(1, 9))
    return objs, feasible, strategy, maximize, files, row_group, batch


def _brute_front(objs, feasible, maximize, groups=None) -> list[int]:
    signed = objs * np.where(maximize, -1.0, 1.0)
    out = []
    keys = [None] if groups is None else sorted(set(groups.tolist()))
    for key in keys:
        sel = feasible if key is None else feasible & (groups == key)
        idx = np.flatnonzero(sel)
        out.extend(idx[pareto_brute(signed[idx])].tolist())
    return sorted(out)


def _distinct(front: list[int], objs, maximize) -> tuple[list[int], list[int]]:
    """Of the rows ``front`` (ascending positions), the first of each distinct objective vector
    and how many rows of ``front`` share it, by a loop."""
    signed = objs * np.where(maximize, -1.0, 1.0)
    firsts: dict[tuple, list[int]] = {}
    for i in front:
        entry = firsts.setdefault(tuple(signed[i].tolist()), [i, 0])
        entry[1] += 1
    pairs = sorted(firsts.values())
    return [i for i, _ in pairs], [c for _, c in pairs]


def _tied_by_rid(table: pa.Table) -> list[int]:
    pairs = sorted(zip(table.column("rid").to_pylist(), table.column("tied").to_pylist(), strict=True))
    return [c for _, c in pairs]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(datasets())
def test_pareto_equals_brute_force(data):
    objs, feasible, strategy, maximize, files, row_group, batch = data
    n, k = objs.shape
    with tempfile.TemporaryDirectory() as tmp:
        folder = write_synthetic(Path(tmp) / "d", objs, feasible, strategy, np.full(n, 4), files, row_group)
        mins = [f"o{j}" for j in range(k) if not maximize[j]]
        maxs = [f"o{j}" for j in range(k) if maximize[j]]
        front = query.pareto(folder, mins, maxs, batch_rows=batch, all=True)
        # objectives in the order given to pareto: minimised first, then maximised
        order = [j for j in range(k) if not maximize[j]] + [j for j in range(k) if maximize[j]]
        signs = np.asarray(maximize)[order]
        want = _brute_front(objs[:, order], feasible, signs)
        assert _rids(front) == want
        assert "tied" not in front.column_names
        # by default one row per distinct optimum: the first row, and how many tie with it
        distinct = query.pareto(folder, mins, maxs, batch_rows=batch)
        firsts, counts = _distinct(want, objs[:, order], signs)
        assert _rids(distinct) == firsts
        assert _tied_by_rid(distinct) == counts
        per = query.pareto(folder, mins, maxs, per="strategy", batch_rows=batch, all=True)
        want_per = _brute_front(objs[:, order], feasible, signs, strategy)
        assert _rids(per) == want_per
        everything = query.pareto(folder, mins, maxs, feasible_only=False, batch_rows=batch, all=True)
        assert _rids(everything) == _brute_front(objs[:, order], np.ones(n, bool), signs)


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 60), st.integers(1, 5), st.integers(1, 20), st.integers(0, 2**32 - 1))
def test_blocked_front_equals_brute_force(n, k, block, seed):
    rng = np.random.default_rng(seed)
    objs = rng.integers(0, 4, size=(n, k)).astype(float)
    if n:
        objs[rng.random((n, k)) < 0.05] = np.nan
    assert (pareto_mask_blocked(objs, block=block) == pareto_brute(objs)).all()


@pytest.mark.parametrize("k", [1, 2, 3, 4])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dominated_by_matches_brute_force(k, seed):
    """Includes the large-batch shortcuts (staircase and grid tables) and the many-row loop."""
    rng = np.random.default_rng(seed)
    n = 6000
    x = rng.integers(0, 25, size=(n, k)).astype(float) if seed != 1 else rng.random((n, k))
    x[rng.random((n, k)) < 0.01] = np.nan
    front = x[: 10 + 20 * seed]
    front = front[~np.isnan(front).any(axis=1)]
    front = front[pareto_mask(front)]
    le = (front[None] <= x[:, None]).all(axis=2) & (front[None] < x[:, None]).any(axis=2)
    assert (dominated_by(front, x) == le.any(axis=1)).all()
    assert (dominated_by(front, x, max_elems=64) == le.any(axis=1)).all()


def test_front_output_is_sorted_and_complete(tmp_path):
    objs = np.asarray([[3, 1], [1, 3], [2, 2], [2, 2], [3, 3], [1, 3], [np.nan, 0], [0, np.nan]], float)
    n = len(objs)
    folder = write_synthetic(tmp_path / "d", objs, np.ones(n, bool), np.zeros(n), np.full(n, 4), 2, 3)
    front = query.pareto(folder, ["o0", "o1"], all=True)
    # duplicates stay; sorted by o0 then o1 then position; every column kept with the source schema
    assert front.column("rid").to_pylist() == [1, 5, 2, 3, 0]
    assert front.column_names == ["rid", "o0", "o1", "strategy", "p", "feasible"]
    # by default the first of each duplicate, with the rows it stands for: (1, 3) twice, (2, 2) twice
    distinct = query.pareto(folder, ["o0", "o1"])
    assert distinct.column("rid").to_pylist() == [1, 2, 0]
    assert distinct.column("tied").to_pylist() == [2, 2, 1]
    assert distinct.column_names == ["rid", "o0", "o1", "strategy", "p", "feasible", "tied"]
    assert front.schema.field("strategy").type == pa.dictionary(pa.int32(), pa.string())
    assert b"paradl_query" in front.schema.metadata
    desc = query.pareto(folder, ["o1"], ["o0"], columns=["rid", "o0"])
    assert desc.column_names == ["rid", "o0", "tied"]
    assert _rids(desc) == [0]


def test_real_sweep_front_equals_brute_force(small):
    table = ds.dataset(small).to_table()
    feasible = np.asarray(table.column("feasible").to_pylist())
    for mins, maxs in ((["t_epoch_s", "gpu_hours"], []), (["t_epoch_s", "mem_bytes", "gpu_hours"], []),
                       (["t_epoch_s"], ["p"])):  # fmt: skip
        cols = [*mins, *maxs]
        objs = np.column_stack([table.column(c).to_numpy().astype(np.float64) for c in cols])
        objs = objs * np.asarray([1.0] * len(mins) + [-1.0] * len(maxs))
        idx = np.flatnonzero(feasible)
        want = sorted(map(tuple, objs[idx][pareto_brute(objs[idx])].tolist()))
        front = query.pareto(small, mins, maxs, batch_rows=7, all=True)
        got = np.column_stack([front.column(c).to_numpy().astype(np.float64) for c in cols])
        got = got * np.asarray([1.0] * len(mins) + [-1.0] * len(maxs))
        assert sorted(map(tuple, got.tolist())) == want
        assert front.num_rows == len(want)
        distinct = query.pareto(small, mins, maxs, batch_rows=7)
        assert distinct.num_rows == len(set(want))
        assert sum(distinct.column("tied").to_pylist()) == len(want)


def test_streamed_answers_match_in_memory_ones(small):
    table = ds.dataset(small).to_table(filter=ds.field("feasible"))
    front = query.pareto(small, ["t_epoch_s", "p"], per="strategy", all=True)
    for s in ("data", "data+filter"):
        sub = table.filter(pa.compute.equal(table.column("strategy"), s))
        objs = np.column_stack([sub.column(c).to_numpy().astype(float) for c in ("t_epoch_s", "p")])
        got = front.filter(pa.compute.equal(front.column("strategy"), s))
        assert got.num_rows == int(pareto_mask(objs).sum())


# ----------------------------------------------------------------------------- top and best


def test_top_k_breaks_ties_by_position(tmp_path):
    objs = np.asarray([[5.0], [1.0], [3.0], [1.0], [np.nan], [2.0], [1.0]])
    n = len(objs)
    strategy = np.asarray([0, 1, 0, 0, 1, 1, 1])
    feasible = np.asarray([1, 1, 1, 1, 1, 1, 0], bool)
    folder = write_synthetic(tmp_path / "d", objs, feasible, strategy, np.full(n, 8), 3, 2)
    t = query.top(folder, "o0", 3, batch_rows=2)
    assert t.column("rid").to_pylist() == [1, 3, 5]
    assert t.column("rank").to_pylist() == [1, 2, 3]
    t = query.top(folder, "o0", 2, per="strategy")
    assert t.column("rid").to_pylist() == [3, 2, 1, 5]
    t = query.top(folder, "o0", 2, descending=True, feasible_only=False)
    assert t.column("rid").to_pylist() == [0, 2]
    t = query.top(folder, "o0", 10)
    assert t.column("rid").to_pylist() == [1, 3, 5, 2, 0, 4]  # NaN last


def test_best_per_p_and_ranking(small):
    table = ds.dataset(small).to_table(filter=ds.field("feasible")).to_pylist()
    got = sweep.open(small).best(per="p")
    for row in got.to_pylist():
        rows = [r for r in table if r["p"] == row["p"]]
        assert row["t_epoch_s"] == min(r["t_epoch_s"] for r in rows)
    assert got.column("p").to_pylist() == sorted({r["p"] for r in table})
    ranked = query.best(small, per="p", rank=True)
    for p in {r["p"] for r in table}:
        sub = [r for r in ranked.to_pylist() if r["p"] == p]
        assert [r["rank"] for r in sub] == list(range(1, len(sub) + 1))
        assert [r["t_epoch_s"] for r in sub] == sorted(r["t_epoch_s"] for r in sub)
        assert {r["strategy"] for r in sub} == {r["strategy"] for r in table if r["p"] == p}


def test_query_does_not_need_jax():
    code = "import sys, sweep.answers.query, sweep.answers.tables; print('jax' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_open_gives_a_dataset_and_metadata(small):
    sw = sweep.open(small)
    assert isinstance(sw.dataset, ds.Dataset)
    assert sw.metadata["tool"] == "paradl-sweep"
    assert sw.manifest is not None and sw.manifest.complete
    assert sw.count_rows("strategy == 'data'") == 30
    assert "rows" in repr(sw)
    one = next(iter(sorted(small.glob("part-*.parquet"))))
    assert sweep.open(one).count_rows() == pq.ParquetFile(one).metadata.num_rows


# ----------------------------------------------------------------------------- --where


SCHEMA = pa.schema(
    [
        ("strategy", pa.dictionary(pa.int32(), pa.string())),
        ("p", pa.int64()),
        ("b", pa.int64()),
        ("t_epoch_s", pa.float32()),
        ("t_comm_s", pa.float32()),
        ("feasible", pa.bool_()),
    ]
)


@pytest.fixture(scope="module")
def where_data(tmp_path_factory) -> tuple[Path, list[dict]]:
    rng = np.random.default_rng(3)
    n = 400
    strategy = rng.integers(0, 3, n).astype(np.int32)
    rows = pa.table(
        {
            "strategy": pa.DictionaryArray.from_arrays(pa.array(strategy), pa.array(STRATEGY_NAMES)),
            "p": pa.array(np.sort(2 ** rng.integers(0, 8, n))),  # sorted: row groups hold p ranges
            "b": pa.array(rng.choice([16, 32, 64], n)),
            "t_epoch_s": pa.array(rng.random(n).astype(np.float32) * 10),
            "t_comm_s": pa.array(rng.random(n).astype(np.float32)),
            "feasible": pa.array(rng.random(n) < 0.7),
        },
        schema=SCHEMA,
    )
    folder = tmp_path_factory.mktemp("where")
    pq.write_table(rows, folder / "part-0.parquet", row_group_size=50)
    return folder, rows.to_pylist()


CASES = [
    ("p >= 16", lambda r: r["p"] >= 16),
    ("p == 4 or p = 8", lambda r: r["p"] in (4, 8)),
    ("strategy == 'data+filter' and b != 32", lambda r: r["strategy"] == "data+filter" and r["b"] != 32),
    ('strategy in ("data", "filter")', lambda r: r["strategy"] in ("data", "filter")),
    ("strategy not in ['data']", lambda r: r["strategy"] != "data"),
    ("p not in (1, 2, 4,)", lambda r: r["p"] not in (1, 2, 4)),
    ("not feasible", lambda r: not r["feasible"]),
    ("feasible and not (p < 8 || b == 16)", lambda r: r["feasible"] and not (r["p"] < 8 or r["b"] == 16)),
    ("t_comm_s / t_epoch_s > 0.1", lambda r: r["t_comm_s"] / r["t_epoch_s"] > 0.1),
    ("2 * p + b * 1_0 - -1 > 600", lambda r: 2 * r["p"] + r["b"] * 10 + 1 > 600),
    ("16 <= p <= 64", lambda r: 16 <= r["p"] <= 64),
    ("-p < -32 && b >= 3.2e1", lambda r: -r["p"] < -32 and r["b"] >= 32),
    ("p * 2 == 8 / 2", lambda r: r["p"] * 2 == 4),
    ("`b` == 64 AND NOT feasible", lambda r: r["b"] == 64 and not r["feasible"]),  # names keep their case
    ("true", lambda r: True),
    ("1 > 2 or p == 128", lambda r: r["p"] == 128),
]


@pytest.mark.parametrize(("text", "truth"), CASES, ids=[c[0] for c in CASES])
def test_where_matches_python(where_data, text, truth):
    folder, rows = where_data
    f = parse_where(text, SCHEMA)
    got = ds.dataset(folder).to_table(filter=f.expression).num_rows
    assert got == sum(1 for r in rows if truth(r))


ERRORS = [
    ("pp > 1", "unknown column 'pp' at position 1"),
    ("p >", "expected a value"),
    ("p > 'x'", "compares two numbers or two strings"),
    ("strategy == 3", "cannot compare a string with a number"),
    ("p + 1", "is a number, not a condition"),
    ("(p > 1", "expected ')'"),
    ("p > 1 1", "expected an operator or the end"),
    ("p in (1, 'a')", "'in' list of a number holds a string"),
    ("p in (b)", "'in' takes a list of literal values"),
    ("p in ()", "needs at least one value"),
    ("p $ 3", "unexpected character '$' at position 3"),
    ("feasible and p", "'and' needs a bool"),
    ("not p", "'not' needs a bool"),
    ("-strategy == 'x'", "unary '-' needs a number"),
    ("strategy + 1 > 2", "'+' needs two numbers"),
    ("", "empty expression"),
    ("__import__('os')", "unknown column '__import__'"),
]


@pytest.mark.parametrize(("text", "message"), ERRORS, ids=[e[0] or "empty" for e in ERRORS])
def test_where_errors_are_one_line(text, message):
    with pytest.raises(InputError) as err:
        parse_where(text, SCHEMA)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


CATEGORICAL = pa.schema([("strategy", pa.string()), ("recompute", pa.string()), ("p", pa.int64())])


@pytest.mark.parametrize(
    "text",
    [
        "recompute == 'selectve'",
        "'selectve' == recompute",
        "recompute != 'selectve'",
        "recompute in ('none', 'selectve')",
        "p > 1 and recompute not in ('selectve')",
    ],
)
def test_where_refuses_a_name_a_categorical_column_cannot_hold(text):
    """Issue 38, defect 5: a misspelt setting matched no row, 0 rows and no word. The legal
    names are the registry's: recompute is one of none, selective, full."""
    with pytest.raises(InputError) as err:
        parse_where(text, CATEGORICAL)
    assert "recompute is one of none, selective, full" in str(err.value)
    assert "'selectve'" in str(err.value) and err.value.param == ("where",)


def test_where_refuses_an_unknown_strategy_and_keeps_legal_names():
    with pytest.raises(InputError, match=r"strategy is one of serial, data, .*'data\+fliter'"):
        parse_where("strategy == 'data+fliter'", CATEGORICAL)
    parse_where("recompute in ('none', 'selective') and strategy == 'data+tensor+pipeline'", CATEGORICAL)


def test_where_of_the_api_and_the_cli_refuse_a_name_no_row_holds(small):
    with pytest.raises(InputError, match="strategy is one of"):
        sweep.open(small).where("strategy == 'dta'")
    result = _run("top", str(small), "--by", "t_epoch_s", "--where", "strategy == 'dta'")
    assert result.exit_code == 2
    assert result.output.startswith("error: --where: strategy is one of serial, data")
    assert len(result.output.splitlines()) == 1


def test_where_pushdown_skips_row_groups(where_data):
    folder, rows = where_data
    stats = query.ScanStats()
    t = query.top(folder, "t_epoch_s", 1000, where="p == 128", feasible_only=False, stats=stats)
    assert t.num_rows == sum(1 for r in rows if r["p"] == 128)
    assert stats.row_groups == 8
    with_p = {i for i in range(8) if any(r["p"] == 128 for r in rows[50 * i : 50 * i + 50])}
    assert stats.row_groups_read == len(with_p) < 8
    assert stats.rows_read == 50 * len(with_p)
    none = query.ScanStats()
    assert query.pareto(folder, ["t_epoch_s"], where="p > 1000", stats=none).num_rows == 0
    assert none.row_groups_read == 0 and none.rows_read == 0


# ----------------------------------------------------------------------------- errors and the CLI


def test_query_errors(small, tmp_path):
    with pytest.raises(InputError, match="unknown column 'nope'"):
        query.pareto(small, ["nope"])
    with pytest.raises(InputError, match="not numeric"):
        query.top(small, "strategy")
    with pytest.raises(InputError, match="at least one objective"):
        query.pareto(small)
    with pytest.raises(InputError, match=r"^per: unknown column") as err:
        query.best(small, per="q")
    assert err.value.param == ("per",)
    with pytest.raises(InputError, match="no such file"):
        sweep.open(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no Parquet files"):
        sweep.open(tmp_path / "empty")
    (tmp_path / "junk.parquet").write_text("not parquet")
    with pytest.raises(InputError, match="not a readable Parquet"):
        sweep.open(tmp_path / "junk.parquet")
    with pytest.raises(InputError, match=r"^k must be a whole number >= 1, got 0"):
        query.top(small, "t_epoch_s", 0)


def _run(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_cli_pareto_table_and_files(small, tmp_path):
    r = _run("pareto", str(small), "--min", "t_epoch_s", "--min", "gpu_hours", "--where", "b == 32")
    assert r.exit_code == 0, r.output
    lines = r.stdout.strip().splitlines()
    assert lines[0].split()[:4] == ["model", "machine", "strategy", "p"] and "t_epoch_s" in lines[0]
    assert "row groups read" in r.stderr
    for suffix in (".parquet", ".csv", ".json", ".jsonl"):
        out = tmp_path / f"front{suffix}"
        r = _run("pareto", str(small), "--min", "t_epoch_s,p", "--per", "strategy", "-o", str(out))
        assert r.exit_code == 0, r.output
        assert out.stat().st_size > 0
    front = pq.read_table(tmp_path / "front.parquet")
    assert json.loads((tmp_path / "front.json").read_text()) == json.loads(
        json.dumps([{k: v for k, v in row.items()} for row in front.to_pylist()])
    )
    assert len((tmp_path / "front.jsonl").read_text().splitlines()) == front.num_rows
    assert not list(tmp_path.glob(".*.tmp"))


def test_cli_top_and_best(small):
    r = _run(
        "top",
        str(small),
        "--by",
        "t_epoch_s",
        "-k",
        "2",
        "--per",
        "strategy",
        "--columns",
        "strategy,p,b,t_epoch_s",
    )
    assert r.exit_code == 0, r.output
    assert len(r.stdout.strip().splitlines()) == 1 + 4
    r = _run("best", str(small), "--per", "p", "--rank", "-n", "3")
    assert r.exit_code == 0, r.output
    assert "rank" in r.stdout.splitlines()[0]
    assert r.stdout.strip().endswith("more rows")


@pytest.mark.parametrize(
    "args",
    [
        ("pareto", "{d}", "--min", "nope"),
        ("pareto", "{d}", "--min", "t_epoch_s", "--where", "p >> 2"),
        ("pareto", "{d}", "--min", "t_epoch_s", "--where", "strategy > 1"),
        ("top", "{d}", "--by", "t_epoch_s", "-o", "x.txt"),
        ("best", "{d}", "--per", "nope"),
        ("pareto", "/nonexistent/folder", "--min", "t_epoch_s"),
    ],
)
def test_cli_errors_exit_2_with_one_line(small, args):
    r = _run(*(a.format(d=small) for a in args))
    assert r.exit_code == 2, r.output
    assert r.stderr.startswith("error: ") and len(r.stderr.strip().splitlines()) == 1


def test_help_texts_have_examples():
    for command in ("pareto", "top", "best", "codesign", "sensitivity", "plot"):
        r = _run(command, "--help")
        assert r.exit_code == 0 and "Example" in r.output, command
    for kind in ("scaling", "breakdown", "pareto", "regime"):
        r = _run("plot", kind, "--help")
        assert r.exit_code == 0 and "Example" in r.output, kind


@pytest.mark.parametrize("name", ["x.csv", "x.parquet", "x.json"])
def test_cli_output_that_cannot_be_written_is_one_line(small, tmp_path, name):
    """A path under a plain file (ENOTDIR even for root): one line naming it, nothing left behind."""
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a folder\n")
    out = blocker / name
    r = _run("top", str(small), "--by", "t_epoch_s", "-o", str(out))
    assert r.exit_code == 2, r.output
    assert r.stderr == f"error: {out}: cannot write: Not a directory\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blocker"]


# ----------------------------------------------------------------------------- models and machines


@pytest.fixture(scope="module")
def two(tmp_path_factory) -> Path:
    return two_model_sweep(tmp_path_factory)


def _every_row(folder: Path) -> list[dict]:
    return ds.dataset(folder, format="parquet").to_table().to_pylist()


def test_best_answers_per_model_and_machine(two):
    rows = [r for r in _every_row(two) if r["feasible"]]
    got = query.best(two, per="p").to_pylist()
    # one winner per (model, p), each the least t_epoch_s of that model's rows alone
    assert [(r["model"], r["p"]) for r in got] == [
        (m, p) for m in ("resnet50", "vgg16") for p in (4, 8, 16, 32)
    ]
    for r in got:
        mine = [x["t_epoch_s"] for x in rows if (x["model"], x["p"]) == (r["model"], r["p"])]
        assert r["t_epoch_s"] == min(mine) and r["machine"] == "abci"
    ranked = query.best(two, per="p", rank=True).to_pylist()
    assert {(r["model"], r["p"], r["rank"]) for r in ranked} == {
        (m, p, k) for m in ("resnet50", "vgg16") for p in (4, 8, 16, 32) for k in (1, 2)
    }, "each model's two strategies ranked apart"


def test_pareto_and_top_never_mix_models(two):
    rows = [r for r in _every_row(two) if r["feasible"]]
    front = query.pareto(two, ["t_epoch_s", "p"]).to_pylist()
    for model in ("resnet50", "vgg16"):
        mine = [r for r in rows if r["model"] == model]
        mask = pareto_mask(np.array([[r["t_epoch_s"], r["p"]] for r in mine]))
        want = sorted((r["t_epoch_s"], r["p"]) for r, k in zip(mine, mask, strict=True) if k)
        assert sorted((r["t_epoch_s"], r["p"]) for r in front if r["model"] == model) == want, model
    top = query.top(two, "t_epoch_s", 3).to_pylist()
    assert [r["model"] for r in top] == ["resnet50"] * 3 + ["vgg16"] * 3
    assert [r["rank"] for r in top] == [1, 2, 3, 1, 2, 3]
    meta = json.loads(query.top(two, "t_epoch_s", 1).schema.metadata[b"paradl_query"])
    assert meta["per"] == ["model", "machine"]


def test_answers_always_carry_model_and_machine(two):
    table = query.pareto(two, ["t_epoch_s", "p"], columns=["strategy", "p", "t_epoch_s"])
    assert table.column_names == ["model", "machine", "strategy", "p", "t_epoch_s", "tied"]
    one = query.best(two, per="p", where="model == 'vgg16'", columns=["p", "t_epoch_s"])
    assert set(one.column("model").to_pylist()) == {"vgg16"} and one.num_rows == 4


def test_cli_shows_model_and_machine_for_one_model(two):
    r = _run("best", str(two), "--where", "model == 'vgg16'")
    assert r.exit_code == 0, r.output
    header, *body = r.stdout.strip().splitlines()
    assert header.split()[:3] == ["model", "machine", "strategy"]
    assert len(body) == 4 and all(line.split()[:2] == ["vgg16", "abci"] for line in body)
