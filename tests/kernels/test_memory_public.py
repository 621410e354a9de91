"""Memory per GPU against Korthikanti et al. 2022, Figure 1 (grids/measurements/
megatron_memory_public.csv), uncalibrated: the weights and optimizer state (``mem_states_bytes``)
and the activations (``mem_activations_bytes``) of each of the 8 runs within 10 % of the paper's.
The figures are the measurement file's; the model's come from benchmarks/memory_check.py."""

from __future__ import annotations

import pytest

from benchmarks import memory_check


def test_states_and_activations_within_10_percent_on_every_row():
    rows = memory_check.rows()
    assert len(rows) == 8
    for r in rows:
        assert r.states == pytest.approx(r.states_paper, rel=0.10), r
        assert r.activations == pytest.approx(r.activations_paper, rel=0.10), r
