"""A sweep of data+tensor+pipeline through the engine: its columns, its misfits kept as
infeasible rows, values equal to ``sweep estimate``'s, and ``--keep`` on it."""

from __future__ import annotations

import pyarrow.dataset as ds
import pytest

from sweep import api

SPEC = {
    "name": "gpt-tiny",
    "model": "gpt-l2-h64-a4-s32-v100",
    "machine": "a100-ib800",
    "strategies": ["data", "data+tensor+pipeline"],
    "axes": {
        "p": [4, 8],
        "b": [4, 8],
        "S": [1, 2, 3],
        "tp": [1, 2, 8],
        "pp": [1, 2],
        "recompute": ["none", "selective", "full"],
        "zero": [0, 1],
    },
}


def test_tensor_sweep_rows(tmp_path):
    api.run(SPEC, tmp_path / "out", x64=True)
    rows = ds.dataset(tmp_path / "out").to_table().to_pylist()
    tensor = [r for r in rows if r["strategy"] == "data+tensor+pipeline"]
    data = [r for r in rows if r["strategy"] == "data"]
    assert len(tensor) == 2 * 2 * 3 * 3 * 2 * 3 * 2 and len(data) == 4
    assert all((r["tp"], r["pp"], r["recompute"], r["zero"]) == (1, 1, "none", 0) for r in data)
    # misfits are rows, infeasible: S = 3 divides no b here; tp = 8 does not divide 4 heads
    assert all(r["limit_reason"] == "batch" for r in tensor if r["S"] == 3)
    assert all(r["limit_reason"] == "max_p" for r in tensor if r["tp"] == 8 and r["S"] != 3)
    row = next(
        r
        for r in tensor
        if (r["p"], r["b"], r["S"], r["tp"], r["pp"], r["recompute"], r["zero"]) == (8, 8, 2, 2, 2, "full", 1)
    )
    one = api.estimate(
        SPEC["model"],
        "a100-ib800",
        "data+tensor+pipeline",
        p=8,
        b=8,
        S=2,
        tp=2,
        pp=2,
        recompute="full",
        zero=1,
    )
    assert (row["p1"], row["p2"], row["global_batch"]) == (2, 4, 16)
    for column in ("t_comp_s", "t_allreduce_s", "t_p2p_s", "mem_bytes", "t_iter_s"):
        assert row[column] == pytest.approx(one[column], rel=1e-12), column


def test_categorical_settings_are_names(tmp_path):
    """recompute and a swept memory_model are written as their names (dictionary-encoded, the
    index the code), read back by --where, pareto and estimate alike."""
    import pyarrow as pa

    from sweep.answers.query import open_sweep

    spec = {**SPEC, "axes": {**SPEC["axes"], "memory_model": ["paradl", "training"]}}
    api.run(spec, tmp_path / "c")
    table = ds.dataset(tmp_path / "c").to_table()
    for column, names in (
        ("recompute", ["none", "selective", "full"]),
        ("memory_model", ["training", "paradl"]),
    ):
        assert table.schema.field(column).type == pa.dictionary(pa.int32(), pa.string())
        assert set(table.column(column).to_pylist()) <= set(names)
        # the dictionary is the names in code order (RECOMPUTE, MEMORY_MODELS): index = code
        assert table.column(column).chunk(0).dictionary.to_pylist() == names
    sw = open_sweep(tmp_path / "c")
    full = sw.to_table("recompute == 'full' and memory_model == 'paradl'").to_pylist()
    assert full and all((r["recompute"], r["memory_model"]) == ("full", "paradl") for r in full)
    assert len(full) == sum(
        1 for r in table.to_pylist() if (r["recompute"], r["memory_model"]) == ("full", "paradl")
    )
    one = api.estimate(
        SPEC["model"], "a100-ib800", "data+tensor+pipeline", p=8, b=8, S=2, tp=2, pp=2, recompute="full",
        set={"memory_model": "paradl"},
    )  # fmt: skip
    assert (one["recompute"], one["memory_model"]) == ("full", "paradl")


def test_tensor_sweep_keep_top(tmp_path):
    api.run(SPEC, tmp_path / "top", keep="top:3:t_epoch_s")
    rows = ds.dataset(tmp_path / "top").to_table().to_pylist()
    assert len(rows) == 3 and all(r["limit_reason"] is None for r in rows)


def test_sensitivity_of_tensor_rows(tmp_path):
    """sweep sensitivity rebuilds each row's tp, pp, recompute and zero from the data: its t_epoch_s
    is the row's; codesign refuses the strategy rather than answer for tp = pp = 1."""
    from sweep.errors import InputError

    api.run(SPEC, tmp_path / "s", x64=True)
    where = "strategy == 'data+tensor+pipeline' and feasible and tp == 2 and pp == 2 and recompute == 'full'"
    rows = ds.dataset(tmp_path / "s").to_table().to_pylist()
    want = {
        (r["p"], r["b"], r["S"], r["zero"]): r["t_epoch_s"]
        for r in rows
        if r["strategy"] == "data+tensor+pipeline"
        and r["feasible"]
        and (r["tp"], r["pp"], r["recompute"]) == (2, 2, "full")
    }
    got = api.sensitivity(tmp_path / "s", where=where).to_pylist()
    assert len(got) == len(want) > 0
    assert sorted(r["t_epoch_s"] for r in got) == pytest.approx(sorted(want.values()), rel=1e-12)
    with pytest.raises(InputError, match="not in codesign"):
        api.codesign(
            SPEC["model"],
            "a100-ib800",
            "data+tensor+pipeline",
            param="efficiency",
            p=8,
            b=8,
            target="t_epoch_s <= 1",
        )
