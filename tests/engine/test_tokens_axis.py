"""``tokens`` as a sweep-spec axis (docs/inputs.md#sweep-specs): one row per training-set size,
a ``tokens`` column, each row's run equal to ``sweep estimate``'s with that ``tokens``, and
bad values or a model without tokens refused naming ``axes.tokens``."""

from __future__ import annotations

import pyarrow.dataset as ds
import pytest

from sweep import api
from sweep.errors import InputError

MODEL = "gpt-l2-h64-a4-s32-v100"  # 32 tokens a sequence
SPEC = {
    "name": "gpt-tokens",
    "model": MODEL,
    "machine": "dgx-h100",
    "strategies": ["data+tensor+pipeline"],
    "axes": {"p": [4], "global_batch": [8], "tp": [1, 2], "tokens": [2560, 1.024e6, 1000]},
}


def _rows(tmp_path, spec, **kw):
    api.run(spec, tmp_path / "out", x64=True, **kw)
    return ds.dataset(tmp_path / "out").to_table().to_pylist()


def test_one_row_per_token_budget_with_its_column(tmp_path):
    """Per tokens value, ``round(tokens / 32)`` sequences in batches of 8: 2,560 tokens are
    80 sequences, 10 iterations; 1.024e6 are 32,000, 4,000 iterations; 1,000 are
    round(31.25) = 31, ceil(31 / 8) = 4 iterations. Whole iterations take the same time
    whatever the training set."""
    rows = _rows(tmp_path, SPEC)
    assert len(rows) == 2 * 3
    assert [r["tokens"] for r in rows] == [2560.0, 1.024e6, 1000.0] * 2  # the spec's order, exact
    assert [r["iterations"] for r in rows] == [10, 4000, 4] * 2
    for r in rows:
        one = api.estimate(
            MODEL, "dgx-h100", "data+tensor+pipeline", p=4, global_batch=8, tp=r["tp"], tokens=r["tokens"]
        )
        for column in ("iterations", "t_epoch_s", "gpu_hours", "energy_kwh", "cost_usd", "t_iter_s"):
            assert r[column] == pytest.approx(one[column], rel=1e-12), column
    by = {(r["tp"], r["tokens"]): r for r in rows}
    assert by[(1, 2560.0)]["t_iter_s"] == pytest.approx(by[(1, 1.024e6)]["t_iter_s"], rel=1e-12)


def test_without_the_axis_the_model_trains_on_its_own_data_set(tmp_path):
    """No ``tokens`` axis: no column, and the GPT's 300e9 tokens (9,375,000,000 sequences of 32,
    1,171,875,000 iterations of 8): the rows are the estimate's without ``tokens``."""
    spec = {**SPEC, "axes": {k: v for k, v in SPEC["axes"].items() if k != "tokens"}}
    rows = _rows(tmp_path, spec)
    assert "tokens" not in rows[0]
    assert rows[0]["iterations"] == 1_171_875_000
    one = api.estimate(MODEL, "dgx-h100", "data+tensor+pipeline", p=4, global_batch=8, tp=1)
    assert rows[0]["t_epoch_s"] == pytest.approx(one["t_epoch_s"], rel=1e-12)


def test_keep_reduces_over_tokens(tmp_path):
    """``--keep top:1:t_epoch_s`` keeps the smallest training set's fastest row."""
    rows = _rows(tmp_path, SPEC, keep="top:1:t_epoch_s")
    assert len(rows) == 1 and rows[0]["tokens"] == 1000.0


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ([0], "numbers of tokens > 0"),
        ([-5e9], "numbers of tokens > 0"),
        (["15T"], "numbers of tokens > 0"),
        ([float("inf")], "numbers of tokens > 0"),
        ([10], "at least one sequence of 32 tokens"),  # round(10 / 32) = 0 sequences
    ],
)
def test_bad_token_budgets_are_refused(tmp_path, values, message):
    spec = {**SPEC, "axes": {**SPEC["axes"], "tokens": values}}
    with pytest.raises(InputError, match=message) as err:
        api.run(spec, tmp_path / "out")
    assert "axes.tokens" in str(err.value)


def test_a_model_without_tokens_refuses_the_axis(tmp_path):
    spec = {
        "name": "cnn-tokens",
        "model": "resnet50",
        "machine": "abci",
        "strategies": ["data"],
        "axes": {"p": [4], "b": [32], "tokens": [1e9]},
    }
    with pytest.raises(InputError, match="tokens applies to transformer models") as err:
        api.run(spec, tmp_path / "out")
    # a file's key, not an option: the command line writes it as it is
    assert "axes.tokens" in str(err.value) and err.value.param == ()
