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
