"""numpy and Python values to arrow arrays and back, without pyarrow's own conversions.

``pa.array``, ``pa.scalar``, ``Array.to_numpy`` and ``pq.read_table`` go through pyarrow's pandas shim,
which imports pandas: about 0.4 s of CPU, as long as the whole floor of a ten-minute export. Fixed-width
numbers, booleans, strings and lists of them need no pandas: they are built here from their buffers, with
the same types, values and (absent) null bitmaps as pyarrow's conversions give, so a parquet file written
from them is byte for byte the same.
"""

from typing import Any

import numpy as np
import pyarrow as pa

NUMPY_TYPES = {
    pa.int8(): np.int8,
    pa.int16(): np.int16,
    pa.int32(): np.int32,
    pa.int64(): np.int64,
    pa.uint8(): np.uint8,
    pa.uint16(): np.uint16,
    pa.uint32(): np.uint32,
    pa.uint64(): np.uint64,
    pa.float32(): np.float32,
    pa.float64(): np.float64,
}


def to_numpy(array: pa.Array) -> np.ndarray:
    """The values of a flat arrow array as numpy (booleans as bool; a view where the buffer allows)."""
    if array.null_count == 0 and pa.types.is_boolean(array.type):
        bits = np.frombuffer(array.buffers()[1], np.uint8)
        return np.unpackbits(bits, count=array.offset + len(array), bitorder="little")[array.offset :].astype(bool)
    if array.null_count == 0 and array.type in NUMPY_TYPES:
        dtype = np.dtype(NUMPY_TYPES[array.type])
        return np.frombuffer(array.buffers()[1], dtype, count=len(array), offset=array.offset * dtype.itemsize)
    return array.to_numpy(zero_copy_only=False)


def numpy_array(values: np.ndarray) -> pa.Array:
    """A flat numpy array (numbers or booleans) as the arrow array ``pa.array`` would make of it."""
    return from_values(values, pa.from_numpy_dtype(values.dtype))


def from_values(values: Any, type_: pa.DataType) -> pa.Array:
    """An arrow array of ``type_`` holding ``values`` (a numpy array or a list without None)."""
    if isinstance(values, list) and any(v is None for v in values):
        return pa.array(values, type=type_)
    if type_ in NUMPY_TYPES:
        values = np.ascontiguousarray(values, dtype=NUMPY_TYPES[type_])
        return pa.Array.from_buffers(type_, len(values), [None, pa.py_buffer(values)])
    if pa.types.is_boolean(type_) and (isinstance(values, np.ndarray) or all(type(v) is bool for v in values)):
        values = np.ascontiguousarray(values, dtype=bool)
        bits = np.packbits(values, bitorder="little")
        return pa.Array.from_buffers(type_, len(values), [None, pa.py_buffer(bits)])
    if pa.types.is_string(type_) and all(type(v) is str for v in values):
        data = [v.encode("utf-8") for v in values]
        offsets = np.cumsum([0, *map(len, data)], dtype=np.int32)
        return pa.Array.from_buffers(type_, len(values), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(data))])
    if pa.types.is_list(type_) and all(type(v) is list for v in values):
        offsets = np.cumsum([0, *(len(v) for v in values)], dtype=np.int32)
        flat = [item for value in values for item in value]
        return pa.ListArray.from_arrays(
            from_values(offsets, pa.int32()), from_values(flat, type_.value_type), type=type_
        )
    return pa.array(values, type=type_)
