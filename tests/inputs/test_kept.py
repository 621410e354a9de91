"""Bound models kept between API calls (sweep.inputs.kept): the same answers as a fresh load,
an edited file read again, an object taken by identity, a failed load never kept."""

from __future__ import annotations

import os

import pytest

import grids
from sweep import api
from sweep.errors import InputError
from sweep.inputs import kept
from sweep.inputs.machines import load_machine
from sweep.inputs.models import load_model

TINY = grids.MODELS / "tiny-cnn.toml"


@pytest.fixture(autouse=True)
def fresh():
    kept.clear()
    yield
    kept.clear()


def test_a_second_bind_by_name_is_the_kept_one_and_answers_as_a_fresh_load():
    first = api.bind("resnet50", "abci")
    assert api.bind("resnet50", "abci") is first
    row = api.estimate("resnet50", "abci", "data", p=64, b=32)
    kept.clear()
    assert api.estimate("resnet50", "abci", "data", p=64, b=32) == row
    # other overrides are another bound model
    assert api.bind("resnet50", "abci", set={"inter_bandwidth_Bps": 1e9}) is not first


def test_an_edited_model_file_is_read_again(tmp_path):
    path = tmp_path / "m.toml"
    text = TINY.read_text()
    path.write_text(text)
    before = api.bind(str(path), "abci")
    samples = before.model.dataset_samples
    assert "dataset_samples = 50_000" in text and samples == 50_000
    path.write_text(text.replace("dataset_samples = 50_000", "dataset_samples = 100_000"))
    os.utime(path, ns=(1, 1))  # a different modification time whatever the clock's resolution
    after = api.bind(str(path), "abci")
    assert after is not before and after.model.dataset_samples == 2 * samples


def test_an_object_is_kept_for_that_object_only():
    model, machine = load_model("resnet50"), load_machine("abci")
    bound = api.bind(model, machine)
    assert api.bind(model, machine) is bound
    other = load_model("resnet50")  # equal, but another object
    assert api.bind(other, machine) is not bound
    model.dataset_samples = 7  # a field changed in place: bound again
    assert api.bind(model, machine).net is not bound.net


def test_a_failed_bind_is_not_kept_and_fails_again_the_same_way():
    with pytest.raises(InputError) as first:
        api.bind("resnet50", "abci", set={"no_such_param": 1.0})
    with pytest.raises(InputError) as second:
        api.bind("resnet50", "abci", set={"no_such_param": 1.0})
    assert str(first.value) == str(second.value)
    assert not kept._bound


def test_only_the_last_few_are_kept():
    for bw in range(kept.KEPT + 3):
        api.bind(str(TINY), "abci", set={"inter_bandwidth_Bps": 1e9 + bw})
    assert len(kept._bound) == kept.KEPT
