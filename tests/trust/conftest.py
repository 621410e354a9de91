"""Fixtures shared by the trust tests: the shipped public file and its uncalibrated predictions."""

from __future__ import annotations

import pytest

import grids
from sweep.inputs.machines import load_machine
from sweep.inputs.measured import Measurements, read_measurements
from sweep.trust.validation import Predictions, predict

PUBLIC = grids.MEASUREMENTS / "abci_chainer_public.csv"


@pytest.fixture(scope="session")
def public_uncalibrated() -> tuple[Measurements, Predictions]:
    """The public ABCI runs on the built-in ``abci`` profile, and the model's predictions."""
    meas = read_measurements(PUBLIC, machine=load_machine("abci"))
    return meas, predict(meas)
