"""torchtitan's published Llama 3.1 runs (grids/measurements/torchtitan_llama3_public.csv:
FSDP2 with tp, pp and cp, 8B to 405B, sequences to 262,144 tokens), uncalibrated: the iteration
time's accuracy, and each run's published ``peak_mem_gib`` against ``mem_bytes``
(benchmarks/torchtitan_memory.py). The figures are the measurement file's."""

from __future__ import annotations

from pathlib import Path

import pytest

import sweep
from benchmarks import torchtitan_memory

FILE = Path(__file__).resolve().parents[2] / "grids" / "measurements" / "torchtitan_llama3_public.csv"


def test_every_row_is_read_and_the_mean_accuracy_is_at_least_0_85():
    """Every row, cp 2 to 8 included, is predicted (none skipped) with a mean symmetric accuracy
    of at least 0.85 (the issue's target; docs/trust.md gives each row)."""
    v = sweep.validate(FILE)
    assert len(v.measurements.runs) == 15 and not v.warnings
    assert v.summaries[-1].acc_mean >= 0.85


def test_context_parallel_rows_hold_what_the_short_sequence_holds():
    """Llama 3.1 8B at 32,768 tokens on cp 1 and at 65,536, 131,072, 262,144 on cp 2, 4, 8: a rank
    holds s / cp = 32,768 tokens of each sample in all four, and the published peaks agree within
    1 % (83.9 to 84.5 GiB); the model's memory is the same for all four, to 1e-9."""
    rows = [r for r in torchtitan_memory.rows() if r.label.startswith("llama3.1-8b-s")]
    assert len(rows) == 4
    assert max(r.peak for r in rows) / min(r.peak for r in rows) < 1.01
    assert all(r.mem == pytest.approx(rows[0].mem, rel=1e-9) for r in rows)


def test_peak_memory_within_15_percent_on_12_of_15_rows():
    """The issue's target: mem_bytes within 15 % of the published peak on at least 12 of the 15
    runs, none over the 96 GB (docs/trust.md gives each row: the 8B selective rows on torchtitan's
    per-operation policy, the profile's selective_recompute)."""
    rows = torchtitan_memory.rows()
    assert len(rows) == 15
    assert sum(abs(r.ratio - 1.0) <= 0.15 for r in rows) >= 12
    assert not any(r.limit for r in rows)
