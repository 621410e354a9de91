"""The host's exact Pareto front (sweep/reduce/pareto.py): ``pareto_mask`` equals the brute-force
``pareto_brute``, with ties, NaN and infinities."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from sweep.reduce.pareto import pareto_brute, pareto_mask


def _objectives(k: int):
    pool = st.sampled_from([0.0, -0.0, 1.0, 1.5, 2.0, 3.0, 1e300, np.nan])
    rows = st.lists(st.lists(pool, min_size=k, max_size=k), min_size=0, max_size=30)
    # repeat some rows so identical points appear together
    return rows.map(lambda r: np.array(r + r[: len(r) // 3], dtype=np.float64).reshape(-1, k))


@settings(deadline=None, max_examples=200)
@given(objs=st.integers(1, 4).flatmap(_objectives))
def test_pareto_mask_equals_brute_force(objs):
    np.testing.assert_array_equal(pareto_mask(objs), pareto_brute(objs))


@settings(deadline=None, max_examples=100)
@given(
    objs=hnp.arrays(
        np.float64,
        st.tuples(st.integers(0, 40), st.integers(1, 4)),
        elements=st.integers(0, 4).map(float),
    )
)
def test_pareto_mask_equals_brute_force_on_small_integers(objs):
    np.testing.assert_array_equal(pareto_mask(objs), pareto_brute(objs))


@pytest.mark.parametrize(
    ("objs", "want"),
    [
        ([[0.0, np.inf]], [True]),
        ([[1.0, np.inf], [2.0, np.inf]], [True, False]),
        ([[1.0, np.inf], [0.5, 3.0]], [False, True]),  # (0.5, 3) dominates (1, inf)
        ([[1.0, np.inf], [0.5, np.inf]], [False, True]),
    ],
)
def test_pareto_mask_keeps_infinite_objectives(objs, want):
    objs = np.array(objs)
    assert pareto_brute(objs).tolist() == want
    assert pareto_mask(objs).tolist() == want


def test_pareto_mask_known_fronts():
    objs = np.array([[1.0, 5.0], [2.0, 2.0], [2.0, 2.0], [3.0, 1.0], [3.0, 3.0], [1.0, 5.0], [np.nan, 0.0]])
    assert pareto_mask(objs).tolist() == [True, True, True, True, False, True, False]
    three = np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [2.0, 2.0, 3.0], [0.0, 9.0, 9.0]])
    assert pareto_mask(three).tolist() == [True, True, False, True]
