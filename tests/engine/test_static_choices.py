"""A profile's choices that a job does not sweep are constants of its compiled program
(:func:`sweep.engine.program._static_choices`), so XLA drops the branches they rule out: the
rows are the same, to the bit, as where the choice is an axis and a traced input."""

from __future__ import annotations

from pathlib import Path

import pyarrow.dataset as ds
import pytest

from sweep import api

ROOT = Path(__file__).resolve().parents[2]
AXES = {"p": [4, 16, 64, 256], "b": [32, 64], "inter_bandwidth_Bps": {"linspace": [5e9, 50e9, 4]}}
KEY = ("strategy", "p", "b", "inter_bandwidth_Bps")
COLUMNS = ("t_allreduce_s", "t_epoch_s", "mem_bytes")


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """Rows with the all-reduce's algorithm an axis of the grid, by (algorithm, row key)."""
    out = tmp_path_factory.mktemp("swept") / "out"
    spec = {
        "name": "choice-swept",
        "model": "resnet50",
        "machine": "abci",
        "strategies": ["data", "data+filter"],
        "axes": {**AXES, "allreduce_algo": ["ring", "tree", "auto", "hierarchical"]},
    }
    api.run(spec, out)
    rows = ds.dataset(out).to_table().to_pylist()
    return {(r["allreduce_algo"], *(r[c] for c in KEY)): r for r in rows}


@pytest.mark.parametrize("algo", ["tree", "auto", "hierarchical"])
def test_profile_choice_is_the_swept_choice(swept, tmp_path, algo):
    text = (ROOT / "grids" / "machines" / "abci.toml").read_text()
    machine = tmp_path / f"abci-{algo}.toml"
    # the profile states the algorithm (a key before the [intra] table)
    machine.write_text(text.replace("[intra]", f'allreduce_algo = "{algo}"\n[intra]', 1))
    spec = {
        "name": "choice",
        "model": "resnet50",
        "machine": str(machine),
        "strategies": ["data", "data+filter"],
    }
    api.run({**spec, "axes": AXES}, tmp_path / "out")
    rows = ds.dataset(tmp_path / "out").to_table().to_pylist()
    assert len(rows) == 2 * 4 * 2 * 4
    for r in rows:
        want = swept[(algo, *(r[c] for c in KEY))]
        assert all(r[c] == want[c] for c in COLUMNS), (algo, r["p"], r["b"])
    # the choice matters here: the algorithms' all-reduces differ
    assert any(r["t_allreduce_s"] != swept[("ring", *(r[c] for c in KEY))]["t_allreduce_s"] for r in rows)
