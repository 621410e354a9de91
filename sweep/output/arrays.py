"""Arrow arrays of numpy arrays, made from their buffers.

``pa.array`` asks pyarrow's pandas shim whether its input is a pandas object,
which imports pandas when it is installed: a quarter of a second on the
development machine, more than a small sweep spends writing its rows. The
columns a run writes are plain numpy arrays, so they are wrapped as they are.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from kernels.names import LIMITS

#: The numpy type of each Arrow type made here.
NUMPY = {
    pa.int8(): np.int8,
    pa.int32(): np.int32,
    pa.int64(): np.int64,
    pa.float32(): np.float32,
    pa.float64(): np.float64,
}


def _bits(flags: np.ndarray) -> pa.Buffer:
    return pa.py_buffer(np.packbits(np.asarray(flags, bool), bitorder="little"))


def numeric(values: np.ndarray, kind: pa.DataType, valid: np.ndarray | None = None) -> pa.Array:
    """``values`` as an Arrow array of ``kind`` (converted when their type differs), null
    where ``valid`` is False."""
    data = np.ascontiguousarray(values, dtype=NUMPY[kind])
    nulls = None if valid is None else _bits(valid)
    return pa.Array.from_buffers(kind, len(data), [nulls, pa.py_buffer(data)])


def flags(values: np.ndarray) -> pa.Array:
    """A boolean array."""
    return pa.Array.from_buffers(pa.bool_(), len(values), [None, _bits(values)])


def strings(names: Sequence[str]) -> pa.Array:
    """A string array of ``names``."""
    encoded = [str(n).encode() for n in names]
    offsets = np.zeros(len(encoded) + 1, np.int32)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    data = b"".join(encoded)
    return pa.Array.from_buffers(pa.string(), len(encoded), [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def dictionary(codes: np.ndarray, names: Sequence[str]) -> pa.DictionaryArray:
    """``names[codes]`` dictionary-encoded, int32 codes."""
    return pa.DictionaryArray.from_arrays(numeric(codes, pa.int32()), strings(names))


def limit_reasons(codes: np.ndarray) -> pa.DictionaryArray:
    """The ``limit_reason`` column of :data:`kernels.names.LIMITS` codes: null where feasible (0)."""
    codes = np.asarray(codes)
    indices = numeric(np.maximum(codes.astype(np.int8) - 1, 0), pa.int8(), valid=codes != 0)
    return pa.DictionaryArray.from_arrays(indices, strings(LIMITS[1:]))
