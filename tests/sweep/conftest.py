"""Fixtures shared by the measured-run tests: the shipped public file and its uncalibrated predictions."""

from __future__ import annotations

from pathlib import Path

import pytest

import grids
from sweep.inputs.machines import load_machine
from sweep.inputs.measured import Measurements, read_measurements
from sweep.trust.validation import Predictions, predict

PUBLIC = grids.MEASUREMENTS / "abci_chainer_public.csv"
ROOT = Path(__file__).resolve().parents[2]


def trust_doc() -> str:
    """The measured-runs documentation: docs/trust.md."""
    text = (ROOT / "docs" / "trust.md").read_text()
    head = "# Trust"
    assert text.startswith(head) and "leave one model out" in text, "docs/trust.md lost its Trust page"
    return text


@pytest.fixture(scope="session")
def public_uncalibrated() -> tuple[Measurements, Predictions]:
    """The public ABCI runs on the built-in ``abci`` profile, and the model's predictions."""
    meas = read_measurements(PUBLIC, machine=load_machine("abci"))
    return meas, predict(meas)
