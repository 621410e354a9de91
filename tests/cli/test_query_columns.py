"""``sweep pareto | top | best --columns``: the terminal shows the columns asked for
(issue 34, defect 2: it showed a fixed set, and only ``-o`` honoured ``--columns``)."""

from __future__ import annotations

import pytest

from tests.runs import sweep


@pytest.mark.parametrize(
    "query",
    [
        ("pareto", "--min", "t_epoch_s", "--min", "gpu_hours"),
        ("top", "--by", "t_epoch_s", "-k", "2"),
        ("best", "--per", "p"),
    ],
)
def test_terminal_shows_the_chosen_columns(paper32, query):
    result = sweep(*query[:1], paper32.out, *query[1:], "--columns", "p,t_iter_s,iterations")
    assert result.exit_code == 0, result.output
    header = result.stdout.splitlines()[0].split()
    # the identity columns every answer carries, then the chosen ones (and a front's tied count)
    assert header[:5] == ["model", "machine", "p", "t_iter_s", "iterations"]
    assert "t_comp_s" not in header and "mem_bytes" not in header


def test_terminal_without_columns_shows_the_readable_subset(paper32):
    result = sweep("top", paper32.out, "--by", "t_epoch_s", "-k", "1")
    header = result.stdout.splitlines()[0].split()
    assert "t_comp_s" in header and "iterations" not in header


def _gpt_rows(tmp_path):
    """Four data+tensor+pipeline rows on one machine, two per precision (issue 38, defect 4)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = 4
    table = pa.table(
        {
            "model": ["gpt3-175b"] * n,
            "machine": ["dgx-h100"] * n,
            "strategy": ["data+tensor+pipeline"] * n,
            "p": [1024] * n,
            "global_batch": [1536] * n,
            "micro_batch": [1, 2, 1, 2],
            "tp": [8, 8, 4, 8],
            "pp": [16, 8, 16, 16],
            "vp": [1] * n,
            "sp": [1] * n,
            "recompute": ["selective"] * n,
            "zero": [1] * n,
            "precision": ["bf16", "bf16", "fp8", "fp8"],
            "t_epoch_s": [10.0, 12.0, 7.0, 8.0],
            "t_iter_s": [10.0, 12.0, 7.0, 8.0],
            "mfu": [0.5, 0.4, 0.45, 0.41],
            "iterations": [1] * n,
            "feasible": [True] * n,
        }
    )
    pq.write_table(table, tmp_path / "gpt.parquet")
    return tmp_path / "gpt.parquet"


@pytest.mark.parametrize("query", [("best", "--by", "t_iter_s"), ("top", "--by", "t_iter_s", "-k", "1")])
def test_per_columns_are_shown_with_chosen_columns(tmp_path, query):
    """Each row is labelled by its --per group even where --columns leaves it out: the fastest
    bf16 row (10 s, tp 8, pp 16) and the fastest fp8 row (7 s, tp 4, pp 16)."""
    path = _gpt_rows(tmp_path)
    result = sweep(
        query[0], str(path), *query[1:], "--per", "machine,precision", "--columns", "tp,pp,t_iter_s,mfu"
    )
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == [
        "model",
        "machine",
        "precision",
        "tp",
        "pp",
        "t_iter_s",
        "mfu",
        *(["rank"] if query[0] == "top" else []),
    ]
    assert lines[1].split()[2:6] == ["bf16", "8", "16", "10"]
    assert lines[2].split()[2:6] == ["fp8", "4", "16", "7"]


def test_default_columns_of_transformer_rows(tmp_path):
    result = sweep("best", str(_gpt_rows(tmp_path)), "--by", "t_iter_s")
    assert result.exit_code == 0, result.output
    header = result.stdout.splitlines()[0].split()
    for name in ("tp", "pp", "vp", "sp", "precision", "micro_batch", "t_iter_s", "mfu"):
        assert name in header, name
