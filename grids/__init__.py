"""Built-in model, machine, sweep and measurement files, shipped as package data."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent
MACHINES = ROOT / "machines"
MODELS = ROOT / "models"
SWEEPS = ROOT / "sweeps"
MEASUREMENTS = ROOT / "measurements"
