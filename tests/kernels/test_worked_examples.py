"""docs/model.md §15: ParaDL's ResNet-50 on abci, every printed column reproduced.

The examples print 6 significant digits, so the comparison is at relative 1e-5.
The ParaDL files come from ``tests/data/paradl`` (a copy of ``../shared/paradl``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import kernels
from kernels.names import LIMITS
from tests.helpers import paradl_dir

FOLDER = paradl_dir()
pytestmark = pytest.mark.skipif(
    FOLDER is None, reason="ParaDL example files not found in tests/data/paradl nor ../shared/paradl"
)

COLUMNS = ("t_comp_s", "t_allreduce_s", "t_allgather_s", "t_halo_s", "t_p2p_s", "mem_bytes")
NAN = math.nan  # "-" in the examples: the default (p2 = gpus_per_node = 4)

# strategy, lc, p, b, p2, then the six columns as printed in docs/model.md §15.
TABLE = [
    ("data", "filter_resnet.lc", 64, 32, NAN, 62.5795, 12.1259, 0, 0, 0, 7.80836e09),
    ("filter", "filter_resnet.lc", 16, 32, NAN, 281.593, 9356.15, 4678.08, 0, 0, 7.65321e09),
    ("data+filter", "filter_resnet.lc", 32, 64, 4, 128.046, 202.889, 90.6316, 0, 0, 1.53107e10),
    ("pipeline", "filter_resnet.lc", 8, 64, NAN, 1008.43, 0, 0, 0, 598.032, 4.62687e09),
    ("spatial", "spatial_resnet.lc", 4, 64, NAN, 1028.5, 55.6416, 16.4941, 40.588, 0, 8.66536e09),
    ("data+spatial", "spatial_resnet.lc", 32, 64, 4, 128.563, 40.1937, 2.06176, 5.0735, 0, 8.66536e09),
]


@pytest.fixture(scope="module")
def abci():
    from sweep.inputs.machines import load_machine

    # the paper's memory equation, as §15 prints it (docs/model.md §6.1)
    return load_machine("abci").with_overrides({"memory_model": "paradl"}).baked()


def resnet50(lc: str, profile) -> kernels.Net:
    from sweep.inputs.layers import bind
    from sweep.inputs.models import load_model

    model = load_model(FOLDER / "RESNET50_ImageNet_profall.net_sc", lc=FOLDER / lc)
    return bind(model, "abci", profile.ref_rate_flops)


@pytest.mark.parametrize("row", TABLE, ids=[row[0] for row in TABLE])
def test_spec_section_8(abci, row):
    strategy, lc, p, b, p2, *columns = row
    machine = abci.pytree()
    p2 = float(machine.gpus_per_node) if math.isnan(p2) else p2  # default p2
    cfg = kernels.Config(np.float64(p), np.float64(b), np.float64(p2), np.float64(p))  # default S = p
    cost = kernels.STRATEGIES[strategy](resnet50(lc, abci), machine, cfg)
    assert LIMITS[int(cost.limit)] == ""
    for name, want in zip(COLUMNS, columns, strict=True):
        got = float(getattr(cost, name))
        assert got == pytest.approx(want, rel=1e-5, abs=0), name


def test_measured_time_is_read(abci):
    # D = 1,280,000 and T = 3.119502 ms per sample (docs/model.md §15).
    net = resnet50("filter_resnet.lc", abci)
    assert float(net.dataset_samples) == 1_280_000
    assert float(net.t_measured_s) == pytest.approx(3.119502e-3, rel=1e-12)


def test_data_copy_matches_shared_folder():
    """tests/data/paradl is a verbatim copy of ../shared/paradl (when that folder exists)."""
    from pathlib import Path

    here = Path(__file__).resolve().parents[1]
    shared = here.parent / ".." / "shared" / "paradl"
    if not shared.is_dir():
        pytest.skip(f"{shared} not present: nothing to compare the copy with")
    names = sorted(p.name for p in shared.iterdir() if p.is_file())
    assert names == sorted(p.name for p in (here / "data" / "paradl").iterdir() if p.is_file())
    for name in names:
        assert (here / "data" / "paradl" / name).read_bytes() == (shared / name).read_bytes(), name
