"""Settings a measured run does not publish (issue 38, defect 11): an empty cell is predicted
with the fastest feasible legal value, and the table and output file show the value taken."""

from __future__ import annotations

import csv
import math

import pytest
from click.testing import CliRunner

import sweep
from sweep.cli.main import cli

#: NeMo 24.07's GPT-3 175B on 128 DGX-H100 GPUs (published_h100_public.csv line 4, recompute not
#: published), and Korthikanti et al.'s 22B on 8 A100s (megatron_selene_public.csv line 2) with
#: its batch as global batch 4 = b 4 x p1 1 and micro-batch 4 = b 4 / S 1.
HEADER = "model,strategy,p,tp,pp,global_batch,micro_batch,recompute,zero,sp,vp,precision,machine,iter_time_s"
ROWS = (
    "gpt3-175b,data+tensor+pipeline,128,4,8,256,1,,1,1,6,fp8,dgx-h100,5.642",
    "gpt-l48-h6144-a64-s2048-v51200,data+tensor+pipeline,8,8,1,4,4,full,0,0,1,bf16,selene,1.42",
)


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    path = tmp_path_factory.mktemp("unpublished") / "runs.csv"
    path.write_text("\n".join([HEADER, *ROWS]) + "\n")
    return path


def _fastest_recompute() -> tuple[str, float]:
    """The oracle, by ``sweep.estimate`` (not by the code under test): GPT-3 175B's run at each
    recomputation mode, b = 256 / (128 / (4 x 8)) = 64 samples per replica, S = 64 / 1 = 64."""
    best = ("", math.inf)
    for mode in ("none", "selective", "full"):
        row = sweep.estimate(
            "gpt3-175b", "dgx-h100", "data+tensor+pipeline", p=128, global_batch=256, micro_batch=1,
            tp=4, pp=8, zero=1, sp=1, vp=6, precision="fp8", recompute=mode,
        )  # fmt: skip
        if row["feasible"] and row["t_iter_s"] < best[1]:
            best = (mode, row["t_iter_s"])
    return best


def test_validate_takes_the_fastest_feasible_unpublished_value(published, tmp_path):
    mode, t_iter = _fastest_recompute()
    assert mode  # some recomputation mode fits the run
    out = tmp_path / "table.csv"
    result = sweep.validate(published, out=out)
    first, second = result.measurements.runs
    assert first.unpublished == ("recompute",) and first.fields["recompute"] == mode
    assert (first.b, first.S) == (64, 64)
    assert result.predictions.t_iter_s[0] == pytest.approx(t_iter, rel=1e-12)
    assert second.unpublished == () and (second.b, second.S) == (4, 1)
    with out.open() as fh:
        rows = list(csv.DictReader(fh))
    assert rows[0]["recompute"] == mode and rows[0]["chosen"] == f"recompute={mode}"
    assert rows[1]["recompute"] == "full" and rows[1]["chosen"] == ""
    table = "\n".join(result.lines(rows=True))
    assert "chosen (not published)" in table and f"recompute={mode}" in table


def test_the_same_run_by_global_batch_or_by_b_predicts_the_same(published, tmp_path):
    by_b = tmp_path / "b.csv"
    by_b.write_text(
        "model,strategy,p,tp,pp,b,S,recompute,zero,sp,vp,precision,machine,iter_time_s\n"
        "gpt-l48-h6144-a64-s2048-v51200,data+tensor+pipeline,8,8,1,4,1,full,0,0,1,bf16,selene,1.42\n"
    )
    a = sweep.validate(published).predictions.t_iter_s[1]
    b = sweep.validate(by_b).predictions.t_iter_s[0]
    assert a == b


def test_summary_columns_stay_aligned_with_long_model_names(published):
    """Issue 38, defect 10: the 30-character model name pushed its row's figures to the right."""
    result = CliRunner().invoke(cli, ["validate", str(published), "--summary"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    head = next(line for line in lines if line.startswith("model"))
    at = head.index("acc mean") + len("acc mean")
    rows = lines[lines.index(head) + 1 :]
    assert len(rows) == 3 and all(len(row) == at for row in rows), [head, *rows]


def test_calibrate_reads_the_run_with_the_value_taken(published):
    """calibrate reads the file as validate does: the unpublished recompute is the fastest
    feasible value on the machine as given (here every run on dgx-h100), kept through the fit."""
    mode, _ = _fastest_recompute()
    c = sweep.calibrate(published, "dgx-h100", fit="efficiency", cv=0)
    run = c.measurements.runs[0]
    assert run.unpublished == ("recompute",) and run.fields["recompute"] == mode
    assert (run.b, run.S) == (64, 64)
