"""Test set-up: float64 JAX (STYLE: x64 on in tests), the small network and machine, and the
sweeps shared by the run, dataset, ``--keep`` and resume tests.

The network and machine are described, with their hand-computed totals, in
:mod:`tests.helpers`; the shared sweeps in :mod:`tests.runs`. The sweeps are session-scoped:
each runs once (per xdist worker) for the tests of every folder that reads it.
"""

from __future__ import annotations

import jax
import pytest

import kernels
from sweep.engine import backend
from tests.helpers import small_machine_of, small_net_of
from tests.runs import CHUNK, GRID_SPEC, PAPER_SPEC, Run, shared_run

jax.config.update("jax_enable_x64", True)
# the CPU client with the flags a sweep's runs have (no FMA: every program rounds alike)
with backend.same_bits_in_every_program():
    jax.devices()


@pytest.fixture(scope="session")
def small_net() -> kernels.Net:
    """conv 3x3 -> relu -> fc on 2x4x4, D = 1000 (see :mod:`tests.helpers`)."""
    return small_net_of()


@pytest.fixture(scope="session")
def small_machine() -> kernels.Machine:
    """2 GPUs and 1 NIC per node, two inter levels (see :mod:`tests.helpers`)."""
    return small_machine_of()


@pytest.fixture(scope="session")
def grid(tmp_path_factory) -> Run:
    """The grid, float32, chunk 64: 8,640 points in 135 chunks."""
    return shared_run(tmp_path_factory, "grid", GRID_SPEC, "--chunk", CHUNK)


@pytest.fixture(scope="session")
def paper32(tmp_path_factory) -> Run:
    """The paper's sweep (grids/sweeps/paper-resnet50-vgg16.toml), float32, chunk 64."""
    return shared_run(tmp_path_factory, "paper32", PAPER_SPEC.read_text(), "--chunk", CHUNK)


@pytest.fixture(autouse=True)
def _no_persistent_cache(monkeypatch):
    """No persistent cache unless a test sets one: kernels kept by an earlier test or run
    (:mod:`sweep.engine.compiled`) would skip the traces tests count, and the home folder is not theirs."""
    monkeypatch.setenv("SWEEP_JAX_CACHE", "")
    jax.config.update("jax_compilation_cache_dir", None)
