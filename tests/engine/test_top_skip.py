"""A top-k chunk evaluates the network's terms only where a row can be a candidate, then the
objective alone, then every column of the boxes that hold the picked rows
(:func:`sweep.engine.program._top_chunk`): the same top rows, to the bit, as the every-column
chunk's feasible rows, and none where no row is feasible."""

from __future__ import annotations

import numpy as np
import pyarrow.dataset as ds
import pytest

from sweep import api
from sweep.engine.evaluate import RESULT_COLUMNS
from sweep.engine.filters import known_front
from sweep.engine.index import decode_info
from sweep.engine.program import build_chunk_fn, device_inputs
from sweep.engine.survivors import survivors
from sweep.inputs.grid import load_spec, plan
from sweep.reduce.keep import Keep

SPEC = """name = "top-skip"
model = "gpt3-175b"
machine = "dgx-h100"
strategies = ["data+tensor+pipeline"]
[axes]
p = {p}
b = [64]
tp = [8]
pp = [8]
inter_bandwidth_Bps = {{ linspace = [12.5e9, 400e9, 8] }}
inter_alpha_s = {{ linspace = [1e-6, 50e-6, 16] }}
"""


def _chunks(tmp_path, p):
    path = tmp_path / "spec.toml"
    path.write_text(SPEC.format(p=p))
    (job,) = plan(load_spec(path)).jobs
    net, machine, values = device_inputs(job, np.float32)
    args = (
        net,
        machine,
        values,
        decode_info(job, 0, job.size),
        np.int32(job.size),
        known_front(None, np.float32),
    )
    top = build_chunk_fn(job, job.size, Keep("top", ("t_epoch_s",), 1), np.float32)[0](*args)
    every = build_chunk_fn(job, job.size, Keep("all"), np.float32)[0](*args)
    return top, every


def test_top_row_is_the_least_feasible_time(tmp_path):
    top, every = _chunks(tmp_path, [1, 512, 1024])
    mask = np.asarray(every.mask) & (np.asarray(every.limit) == 0)
    assert mask.any() and not mask.all()  # p = 1 cannot hold 175B weights; 512 and 1024 can
    t = np.asarray(every.floats)[RESULT_COLUMNS.index("t_epoch_s")]
    best = np.flatnonzero(mask)[np.argmin(np.where(mask, t, np.inf)[mask])]
    rows = survivors(top, None)
    assert int(top.count) == 1
    assert int(rows.local[0]) == best - int(every.lead)
    np.testing.assert_array_equal(rows.floats[:, 0], np.asarray(every.floats)[:, best])


def test_no_feasible_row_no_candidate(tmp_path):
    top, every = _chunks(tmp_path, [1, 2])  # 175B on at most two GPUs: out of memory
    assert not (np.asarray(every.mask) & (np.asarray(every.limit) == 0)).any()
    assert int(top.count) == 0


RUN = {
    "name": "top-boxes",
    "model": "gpt3-175b",
    "machine": "dgx-h100",
    "strategies": ["data+tensor+pipeline"],
    "axes": {
        "p": [256, 512, 1024],
        "b": [64],
        "tp": [4, 8],
        "pp": [4, 8],
        "recompute": ["none", "full"],
        "inter_bandwidth_Bps": {"linspace": [12.5e9, 400e9, 8]},
        "inter_alpha_s": {"linspace": [1e-6, 50e-6, 16]},
    },
}
KEY = ("p", "tp", "pp", "recompute", "inter_bandwidth_Bps", "inter_alpha_s")


@pytest.fixture(scope="module")
def every(tmp_path_factory):
    """Every row of :data:`RUN`, in the grid's order."""
    out = tmp_path_factory.mktemp("every") / "all"
    api.run(RUN, out, chunk=512)
    return ds.dataset(out).to_table().to_pylist()


@pytest.mark.parametrize(
    "keep, order",
    [
        # 1 and 4 rows of chunks of 512 points, 33 boxes of the 16 latencies (a box holds at
        # most a 16th of a chunk): the objective alone, then the picked rows' boxes; 40 rows:
        # every column of every box
        ("top:1:t_epoch_s", "t_epoch_s"),
        ("top:4:t_epoch_s", "t_epoch_s"),
        ("top:40:t_epoch_s", "t_epoch_s"),
        # a swept machine parameter, by its rank: ties broken by the grid's order
        ("top:3:inter_bandwidth_Bps", "inter_bandwidth_Bps"),
    ],
)
def test_top_rows_are_the_every_column_rows(every, tmp_path, keep, order):
    api.run(RUN, tmp_path / "top", chunk=512, keep=keep)
    top = ds.dataset(tmp_path / "top").to_table().to_pylist()
    k = int(keep.split(":")[1])
    feasible = [(r[order], i, r) for i, r in enumerate(every) if r["feasible"]]
    assert len(feasible) > k and len(every) - len(feasible) > k  # both kinds of chunk
    want = [r for _, _, r in sorted(feasible, key=lambda t: t[:2])[:k]]
    assert sorted(top, key=lambda r: tuple(r[c] for c in KEY)) == sorted(
        want, key=lambda r: tuple(r[c] for c in KEY)
    )  # every column equal, floats to the bit
