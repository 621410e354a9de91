"""A job's flat index and its axis digits (sweep/engine/index.py): ``digits_at`` and the
device's decode equal ``divmod``, past 2**31 points and in both decodes (float32, int32);
``decode_info`` and ``program_chunk``."""

from __future__ import annotations

import math

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import grids
from sweep.engine import index as index_module
from sweep.engine.filters import known_front
from sweep.engine.index import (
    FLOAT_CHUNK,
    decode_info,
    digits_at,
    inner_split,
    int_columns,
    numeric_columns,
    program_chunk,
)
from sweep.engine.program import build_chunk_fn, device_inputs
from sweep.engine.survivors import positions
from sweep.inputs.configs import Bound
from sweep.inputs.grid import Job
from sweep.inputs.machines import load_machine
from sweep.inputs.models import load_model
from sweep.reduce.keep import Keep


def _job(axes: dict[str, np.ndarray], index: int) -> Job:
    tiny = load_model(str(grids.MODELS / "tiny-cnn.toml"))
    return Job(index, Bound.of(tiny, load_machine("abci")), "data", axes)


def _python_digits(job: Job, flat: int) -> list[int]:
    digits = []
    for values in reversed(list(job.axes.values())):
        flat, d = divmod(flat, len(values))
        digits.append(d)
    return digits[::-1]


@settings(deadline=None, max_examples=60)
@given(data=st.data())
def test_digits_at_equals_divmod(data):
    """Flat indices of a job back to axis digits, past 2**31 too, as divmod gives them."""
    radices = data.draw(st.lists(st.integers(1, 5000), min_size=1, max_size=5))
    job = Job(0, None, "data", {f"a{i}": np.arange(r) for i, r in enumerate(radices)})  # type: ignore[arg-type]
    size = math.prod(radices)
    index = np.array(data.draw(st.lists(st.integers(0, size - 1), min_size=1, max_size=20)), dtype=np.int64)
    got = digits_at(job, index)
    for k, flat in enumerate(index.tolist()):
        assert got[:, k].tolist() == _python_digits(job, flat)


def _check_info(job: Job, start: int, chunk: int) -> np.ndarray:
    """decode_info: the outer digits of ``start // T`` and the window ``start % T`` (T = inner box)."""
    radices = [len(v) for v in job.axes.values()]
    j = inner_split(radices, chunk)
    info = decode_info(job, start, chunk)
    digits = _python_digits(job, start)
    assert info[:j, 0].tolist() == digits[:j], start
    inner = 0
    for d, r in zip(digits[j:], radices[j:], strict=True):
        inner = inner * r + d
    assert info[j, 0] == inner, start
    return info


def _device_digits(job: Job, chunk: int, starts, dtype=np.float32) -> None:
    """Run the real chunk function at each start; every real row's digits equal divmod's."""
    fn, _ = build_chunk_fn(job, chunk, Keep("all"), dtype)
    net, machine, values = device_inputs(job, dtype)
    names = int_columns(job)
    axis_names = list(job.axes)
    radices = [len(v) for v in job.axes.values()]
    for start in starts:
        n_real = min(chunk, job.size - start)
        info = _check_info(job, start, chunk)
        out = fn(net, machine, values, info, np.int32(n_real), known_front(None, np.float32))
        mask = np.asarray(out.mask)
        where = np.flatnonzero(mask)
        offsets = positions(out, where)  # outputs span whole inner boxes
        assert offsets.tolist() == list(range(n_real)), start
        ints = np.asarray(out.ints)[:, where]
        got = []
        for name in axis_names:
            row = ints[names.index(name)].astype(np.int64)
            if name in ("p", "b"):  # value columns: values are 1..n, so digit = value - 1
                row = row - 1
            got.append(row)
        got = np.stack(got, axis=1)
        want = np.stack(np.unravel_index(start + np.arange(n_real, dtype=np.int64), radices), axis=1)
        np.testing.assert_array_equal(got, want, err_msg=f"start {start}")


@pytest.fixture(params=["float32", "int32"])
def decode_by(request, monkeypatch):
    """Both decodes: float32 (chunks up to FLOAT_CHUNK) and int32 (larger chunks),
    the latter forced at these small chunks."""
    if request.param == "int32":
        monkeypatch.setattr(index_module, "FLOAT_CHUNK", 0)
    return request.param


@pytest.mark.parametrize("chunk", [16, 128, 1024])  # inner box of 1, 7 and 35 points
def test_device_decoding_small_radices_every_start(chunk, decode_by):
    job = _job(
        {
            "p": np.arange(1, 4),
            "b": np.arange(1, 6),
            "inter_bandwidth_Bps": np.linspace(1e9, 7e9, 7),
        },
        index=900,
    )
    assert job.size == 105
    _device_digits(job, chunk, range(job.size))


def test_device_decoding_beyond_2_31_points(decode_by):
    n = 3000
    job = _job(
        {
            "p": np.arange(1, 4),
            "b": np.arange(1, n + 1),
            "intra_bandwidth_Bps": np.linspace(1e10, 2e10, n),
            "inter_bandwidth_Bps": np.linspace(1e9, 2e9, n),
        },
        index=901,
    )
    assert job.size == 3 * n**3 > 2**36
    strides = [n**3, n**2, n]
    starts = {0, 2**31 - 7, 2**31, 2**32 - 9, job.size - 16, job.size - 5}
    for stride in strides:
        for m in (1, 2, 3, 7, job.size // stride - 1):
            starts.add(m * stride - 5)
            starts.add(m * stride - 16)
    starts = sorted(s for s in starts if 0 <= s < job.size)
    _device_digits(job, 16, starts)
    _device_digits(job, 1 << 16, starts)  # an inner box of 3000 points


@pytest.mark.parametrize("n", [97, 193, 49999])
def test_device_decoding_radices_whose_reciprocal_rounds_down(n, decode_by):
    """97 * float32(1/97) < 1: a decode by reciprocal multiply must still give digit 0 of the next p."""
    job = _job({"p": np.arange(1, 4), "b": np.arange(1, n + 1)}, index=903 + n)
    _device_digits(job, 64, sorted({0, n - 5, 2 * n - 7, job.size - 64}))


@pytest.mark.parametrize("chunk", [64, 1024, 8192])  # inner box of 1, 13 and 143 points
def test_decode_info_digits_are_the_start_digits(chunk, decode_by):
    job = _job({"p": np.arange(1, 8), "b": np.arange(1, 12), "S": np.arange(1, 14)}, index=902)
    for start in range(0, job.size, 37):
        _check_info(job, start, chunk)


def test_chunks_beyond_float32_decode_keep_the_same_rows(tmp_path):
    """A chunk of 5 M points, above FLOAT_CHUNK, decodes in int32 (the decode itself
    is checked point by point above, forced at small chunks): its top 50 and Pareto front
    equal those of 2^20-point chunks, row for row. 6.24 M points in one job, two chunks:
    13 p x 2 b x 400 bandwidths x 600 latencies."""
    from sweep.engine.run import run_sweep
    from sweep.engine.runstate import RunOptions
    from sweep.inputs.grid import load_spec, plan
    from sweep.reduce.keep import parse_keep

    spec = tmp_path / "big.toml"
    spec.write_text(
        f"""name = "big"
model = "{grids.MODELS / "tiny-cnn.toml"}"
machine = "abci"
strategies = ["data"]
[axes]
p = {{ log2 = [0, 12] }}
b = [8, 32]
inter_bandwidth_Bps = {{ linspace = [12.5e9, 100e9, 400] }}
inter_alpha_s = {{ linspace = [1e-6, 50e-6, 600] }}
"""
    )
    p = plan(load_spec(spec))
    assert p.jobs[0].size == 6_240_000 > 5_000_000 > FLOAT_CHUNK
    for keep in ("top:50:t_epoch_s", "pareto:t_epoch_s,p:all"):
        tables = []
        for chunk in (1 << 20, 5_000_000):
            out = tmp_path / f"{keep.split(':')[0]}-{chunk}"
            keeping = parse_keep(keep, numeric_columns(p.jobs[0]))
            run_sweep(p, RunOptions(out=out, chunk=chunk, keep=keeping))
            tables.append(pq.read_table(out / "part-keep.parquet").to_pylist())
        assert tables[0] == tables[1], keep
        assert len(tables[0]) >= 50


def test_program_chunk_fits_a_small_job():
    job = _job({"p": np.arange(1, 4), "b": np.arange(1, 36)}, index=950)  # 105 points
    assert program_chunk(job, 1 << 18) == 105
    assert program_chunk(job, 64) == 64  # a job of several chunks keeps the run's
    assert program_chunk(job, 105) == 105
    assert program_chunk(job, 106) == 105
    one = _job({"p": np.arange(1, 2)}, index=951)
    assert program_chunk(one, 1 << 20) == 1
