"""The line ``sweep run`` prints when done says where the time went, the time before the run
too (issue 34: a GPT sweep said "1.78 s evaluated of 7.0 s wall" while building the model's
tables took 5 s and was not named), sweep/engine/runstate.py ``RunSummary.lines``."""

from __future__ import annotations

import re
from pathlib import Path

from sweep import api
from sweep.engine.runstate import RunSummary

SPEC = {
    "name": "line",
    "model": "resnet50",
    "machine": "abci",
    "strategies": ["data"],
    "axes": {"p": [1, 2], "b": [32]},
}


def test_the_line_names_the_time_before_the_run():
    summary = RunSummary(6, 6, 1, 1.0, Path("out"), "1 cpu", wall=1.78, prepare_s=5.25)
    (line,) = summary.lines()
    assert line.startswith("6 rows written to out (6 points evaluated in 1.78 s, 3 points/s; ")
    assert line.endswith("; on 1 cpu; before that, the spec and its models' tables took 5.25 s)")


def test_a_run_reports_its_own_preparation(tmp_path):
    summary = api.run(SPEC, tmp_path / "out")
    assert summary.prepare_s > 0
    took = re.search(r"models' tables took ([\d.]+) s\)$", summary.lines()[0])
    assert took is not None and float(took.group(1)) == round(summary.prepare_s, 2)
