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
    # misfits are rows, infeasible, named by the registry rule they break, the first in its order:
    # tp = 8 does not divide 4 heads (heads); S = 3 divides no b here (batch)
    assert all(r["limit_reason"] == "heads" for r in tensor if r["tp"] == 8)
    assert all(r["limit_reason"] == "batch" for r in tensor if r["S"] == 3 and r["tp"] != 8)
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


def test_micro_batch_is_a_column(tmp_path):
    """Issue 38, defect 6: every data+tensor+pipeline row has micro_batch = b / S (a spec's S axis
    here), --where and --columns read it, and estimate and the default micro-batch (1: S = b)
    agree with it; the impossible rows' b, p1 and global batch are whole numbers."""
    from sweep.answers.query import open_sweep

    spec = {**SPEC, "axes": {**SPEC["axes"], "S": [1, 4], "tp": [1, 2, 3]}}
    api.run(spec, tmp_path / "m", x64=True)
    sw = open_sweep(tmp_path / "m")
    rows = [r for r in sw.to_table().to_pylist() if r["strategy"] == "data+tensor+pipeline"]
    assert rows and all(r["micro_batch"] == r["b"] // r["S"] for r in rows)
    ones = sw.to_table("micro_batch == 1", columns=["b", "S", "micro_batch"]).to_pylist()
    assert ones and all(r["b"] == r["S"] for r in ones)
    assert len(ones) == sum(1 for r in rows if r["b"] == r["S"])
    # tp = 3 does not divide the 4 heads (nor p = 4 or 8): rows named by the rule, whole numbers
    bad = [r for r in rows if r["tp"] == 3]
    assert bad and all(r["limit_reason"] == "heads" for r in bad)
    assert all(isinstance(r[c], int) for r in bad for c in ("b", "p1", "global_batch"))
    one = api.estimate(SPEC["model"], "a100-ib800", "data+tensor+pipeline", p=8, b=8, tp=2, pp=2)
    assert (one["S"], one["micro_batch"]) == (8, 1)


def test_tensor_sweep_keep_top(tmp_path):
    api.run(SPEC, tmp_path / "top", keep="top:3:t_epoch_s")
    rows = ds.dataset(tmp_path / "top").to_table().to_pylist()
    assert len(rows) == 3 and all(r["limit_reason"] is None for r in rows)


def test_sensitivity_of_tensor_rows(tmp_path):
    """sweep sensitivity rebuilds each row's tp, pp, recompute and zero from the data: its t_epoch_s
    is the row's; codesign answers for the strategy with its own axes among the choices."""
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
    # codesign now re-optimises tp, pp, recompute and zero (tests/answers/test_codesign_tensor.py)
    # and refuses an axis no strategy of the question has
    [a] = api.codesign(
        SPEC["model"], "a100-ib800", "data+tensor+pipeline", param="efficiency", p=8, b=8,
        target="t_epoch_s <= 1", grid=16,
    )  # fmt: skip
    assert {"tp", "pp", "recompute", "zero"} <= a.best[0].keys()
    with pytest.raises(InputError, match=r"^tp: no strategy"):
        api.codesign(
            SPEC["model"], "a100-ib800", "data", param="efficiency", p=8, b=8, tp=2, target="t_epoch_s <= 1"
        )


# ------------------------------------------------------------------ the batch as users set it

BATCH_SPEC = {  # SPEC's model, machine and strategies; the batch by global batch and micro-batch
    **SPEC,
    "name": "gpt-tiny-batch",
    "axes": {
        "p": [4, 8],
        "global_batch": [16, 24],
        "micro_batch": [1, 2, 3],
        "tp": [1, 2],
        "pp": [1, 2],
        "recompute": ["none", "full"],
    },
}


def test_global_batch_and_micro_batch_in_a_sweep(tmp_path):
    """b = global_batch / p1 and S = b / micro_batch, computed in the sweep's program: each row
    equals the sweep of the b and S they give, and a batch that does not divide is infeasible,
    limit batch."""
    api.run(BATCH_SPEC, tmp_path / "gb", x64=True)
    rows = ds.dataset(tmp_path / "gb").to_table().to_pylist()
    tensor = [r for r in rows if r["strategy"] == "data+tensor+pipeline"]
    data = [r for r in rows if r["strategy"] == "data"]
    # data uses no micro_batch: 2 p x 2 global batches; tensor 2 x 2 x 3 x 2 x 2 x 2
    assert len(data) == 4 and len(tensor) == 96
    # data: p1 = p, b = 16/4 = 4, 24/4 = 6, 16/8 = 2, 24/8 = 3
    assert sorted((r["p"], r["b"], r["global_batch"]) for r in data) == [
        (4, 4, 16), (4, 6, 24), (8, 2, 16), (8, 3, 24)
    ]  # fmt: skip
    # p = 8, tp = 2, pp = 1: p1 = 4, so global batch 24 gives b = 6; micro-batch 2 gives S = 3
    row = next(
        r
        for r in tensor
        if (r["p"], r["global_batch"], r["tp"], r["pp"], r["recompute"]) == (8, 24, 2, 1, "full")
        and r["S"] == 3
    )
    assert (row["p1"], row["b"]) == (4, 6)
    one = api.estimate(
        BATCH_SPEC["model"], "a100-ib800", "data+tensor+pipeline", p=8, b=6, S=3, tp=2, recompute="full"
    )
    for column in ("t_comp_s", "t_allreduce_s", "t_p2p_s", "mem_bytes", "t_iter_s", "t_epoch_s"):
        assert row[column] == pytest.approx(one[column], rel=1e-12), column
    # a row fits when p1 = p / (tp pp) divides the global batch and the micro-batch divides
    # b; every other row is infeasible with limit batch (checked first, docs/model.md §11)
    want = 0
    for p in (4, 8):
        for gb in (16, 24):
            for tp in (1, 2):
                for pp in (1, 2):
                    b = gb / (p // (tp * pp))
                    want += 2 * sum(not (b == int(b) and b % m == 0) for m in (1, 2, 3))  # 2 recomputes
    assert want > 0 and sum(r["limit_reason"] == "batch" for r in tensor) == want
    # e.g. p = 8, tp = pp = 1, global batch 24: b = 3, micro-batch 2 does not divide it


def test_vp_sp_precision_are_spec_axes_and_columns(tmp_path):
    """The registry's new axes travel through a spec (categorical ones by name) into columns."""
    spec = {
        **SPEC,
        "axes": {"p": [8], "b": [8], "tp": [2], "vp": [1, 2], "sp": [0, 1], "precision": ["bf16", "fp8"]},
    }
    api.run(spec, tmp_path / "new", x64=True)
    rows = ds.dataset(tmp_path / "new").to_table().to_pylist()
    tensor = [r for r in rows if r["strategy"] == "data+tensor+pipeline"]
    assert sorted((r["vp"], r["sp"], r["precision"]) for r in tensor) == [
        (v, s, c) for v in (1, 2) for s in (0, 1) for c in ("bf16", "fp8")
    ]
    # data has none of them: the defaults (vp 1, sp 0, precision bf16), a categorical one by name
    assert all((r["vp"], r["sp"], r["precision"]) == (1, 0, "bf16") for r in rows if r["strategy"] == "data")


def test_the_kernel_receives_every_own_axis(monkeypatch):
    """estimate hands vp, sp and precision to the kernel in its Config (the kernel ignores them
    until the transformer physics reads them): a stand-in kernel writes them into a column."""
    from kernels.strategies import megatron
    from sweep.engine import backend, evaluate

    real = megatron.data_tensor_pipeline

    def spy(net, machine, cfg):
        cost = real(net, machine, cfg)
        return cost._replace(t_halo_s=cfg.vp + 10 * cfg.sp + 100 * cfg.precision + 1000 * cfg.tp)

    monkeypatch.setitem(evaluate.STRATEGIES, "data+tensor+pipeline", spy)
    evaluate.jitted.cache_clear()  # an evaluator compiled by an earlier test holds the real kernel
    evaluate.packed.cache_clear()  # and so does estimate's packed one
    try:
        # vp 2 at pp 1 and fp8 on an A100 break rules: sweep.estimate refuses them, the engine's
        # estimate writes the (infeasible) row
        own = {"tp": 2, "vp": 2, "sp": 1, "precision": "fp8"}
        with backend.computation(x64=True):
            row = evaluate.estimate(
                api.bind(SPEC["model"], "a100-ib800"), "data+tensor+pipeline", 8, 8, own=own
            )
    finally:
        evaluate.jitted.cache_clear()
        evaluate.packed.cache_clear()
    assert row["t_halo_s"] == 2 + 10 * 1 + 100 * 1 + 1000 * 2
    assert (row["vp"], row["sp"], row["precision"]) == (2, 1, "fp8")
    assert row["limit_reason"] == "schedule"
