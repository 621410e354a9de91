"""A run that writes every row checks the free space against ``sweep plan``'s estimate before
it writes anything (issue 34, defect 9: a 1e13-point ``--yes`` run started writing with 76 GB
free against ~80,000 GB estimated), sweep/engine/run.py ``check_free_space``."""

from __future__ import annotations

import collections

import pytest
from click.testing import CliRunner

from sweep.cli.main import cli
from sweep.engine import run as run_module
from sweep.engine.runstate import PLAN_ROW_BYTES
from tests.cli.test_cli import assert_one_line_error

# 2 x 3 = 6 points of data parallelism
SPEC = 'name = "six"\nmodel = "resnet50"\nmachine = "abci"\nstrategies = ["data"]\n[axes]\np = [1, 2]\nb = [8, 16, 32]\n'
Usage = collections.namedtuple("Usage", "total used free")


@pytest.fixture
def full_disk(monkeypatch):
    """A disk with room for 5 rows at the plan's bytes a row: the 6 rows do not fit."""
    free = 5 * PLAN_ROW_BYTES
    monkeypatch.setattr(run_module.shutil, "disk_usage", lambda path: Usage(10**12, 10**12 - free, free))


def _run(tmp_path, *options):
    spec = tmp_path / "six.toml"
    spec.write_text(SPEC)
    return CliRunner().invoke(cli, ["run", str(spec), "-o", str(tmp_path / "out"), *options])


@pytest.mark.parametrize("options", [(), ("--yes",), ("--only-feasible",)])
def test_a_shortage_is_one_line_before_anything_is_written(tmp_path, full_disk, options):
    result = _run(tmp_path, *options)
    # 6 rows x 8 bytes = 48 bytes = 4.8e-08 GB needed, 40 bytes = 4e-08 GB free
    line = assert_one_line_error(
        result, "needs ~4.8e-08 GB", "6 rows", "4e-08 GB are free", "--no-space-check"
    )
    assert str(tmp_path / "out") in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("options", [("--keep", "top:1:t_epoch_s"), ("--no-space-check",)])
def test_a_reduction_or_the_override_runs(tmp_path, full_disk, options):
    result = _run(tmp_path, *options)
    assert result.exit_code == 0, result.output


def test_enough_space_runs(tmp_path, monkeypatch):
    free = 6 * PLAN_ROW_BYTES
    monkeypatch.setattr(run_module.shutil, "disk_usage", lambda path: Usage(10**12, 10**12 - free, free))
    result = _run(tmp_path)
    assert result.exit_code == 0, result.output
    assert "6 rows written" in result.output
