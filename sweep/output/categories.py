"""Categorical columns (docs/output-format.md#columns): a strategy's categorical axis or a categorical
machine setting is carried as a code and written as its name; read back, the names become codes again."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from kernels.names import MACHINE_CHOICES
from sweep.errors import InputError


def choices_of(column: str) -> tuple[str, ...]:
    """The names of a categorical column's codes, in code order; ``()`` for any other column.

    A strategy's categorical axis (:attr:`kernels.strategies.registry.Axis.choices`:
    ``recompute``, ``precision``) or a categorical machine setting
    (:data:`kernels.names.MACHINE_CHOICES`: ``memory_model``, ``allreduce_algo``).
    """
    # here, not at the top: a query imports this module and must not load kernels (but
    # kernels.names) when it reads no categorical column
    from kernels.strategies.registry import OWN_AXES

    axis = OWN_AXES.get(column)
    if axis is not None:
        return axis.choices
    return MACHINE_CHOICES.get(column, ())


def category_codes(column: str, values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A column as read back, as numbers: a categorical column's names (:func:`choices_of`) as
    their codes (int32), any other column as it is. A name not among the choices is an
    :class:`InputError` naming the column."""
    array = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    choices = choices_of(column)
    if not choices or not (pa.types.is_dictionary(array.type) or pa.types.is_string(array.type)):
        return array.to_numpy(zero_copy_only=False)
    if not pa.types.is_dictionary(array.type):
        array = pc.dictionary_encode(array)
    names = array.dictionary.to_pylist()
    unknown = [n for n in names if n not in choices]
    if unknown:
        raise InputError(f"column '{column}': '{unknown[0]}' is not one of {', '.join(choices)}")
    lookup = np.array([choices.index(n) for n in names], np.int32)
    return lookup[array.indices.to_numpy(zero_copy_only=False)]
