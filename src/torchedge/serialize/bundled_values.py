"""Bundled values (`torchedge.schema.bundled_program.Value`) <-> NumPy arrays and Python scalars.

A bundled tensor stores its elements in its dim order (outermost dimension first), as
ExecuTorch lays tensors out in memory; `array_from_tensor` returns the array in logical
(``sizes``) order. Dtypes go through the one dtype table, `torchedge.schema.scalar_type`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from torchedge.errors import InputError, InvalidProgramError
from torchedge.schema.bundled_program import Bool, Double, Int, Tensor, Value
from torchedge.schema.scalar_type import NAMES, ScalarType, numpy_dtype, scalar_type_of

__all__ = ["tensor_from_array", "array_from_tensor", "value_from_python", "python_from_value"]


def tensor_from_array(array: np.ndarray, dim_order: Sequence[int] | None = None) -> Tensor:
    """The bundled tensor of `array`, its bytes laid out in `dim_order` (default: row-major)."""
    array = np.asarray(array)
    try:
        code = scalar_type_of(array.dtype)
    except KeyError:
        raise InputError(f"a bundled tensor cannot hold dtype {array.dtype}: it has no ScalarType") from None
    order = list(range(array.ndim)) if dim_order is None else [int(d) for d in dim_order]
    if sorted(order) != list(range(array.ndim)):
        raise InputError(f"dim order {order} is not a permutation of the {array.ndim} dimensions of the tensor")
    physical = np.ascontiguousarray(array.transpose(order)).reshape(-1)
    return Tensor(code, [int(s) for s in array.shape], physical.view(np.uint8).data, order)


def array_from_tensor(tensor: Tensor, where: str) -> np.ndarray:
    """The array `tensor` holds, in logical order: a read-only view of its data (no copy)."""
    try:
        dtype = numpy_dtype(tensor.scalar_type)
    except (KeyError, ValueError):
        name = NAMES.get(tensor.scalar_type, str(int(tensor.scalar_type)))
        raise InvalidProgramError(f"{where}: scalar type {name} has no NumPy dtype the runtime can use") from None
    sizes = [int(s) for s in tensor.sizes]
    if any(s < 0 for s in sizes):
        raise InvalidProgramError(f"{where}: expected non-negative sizes, found {sizes}")
    order = [int(d) for d in tensor.dim_order] or list(range(len(sizes)))
    if sorted(order) != list(range(len(sizes))):
        raise InvalidProgramError(f"{where}: dim order {order} is not a permutation of the {len(sizes)} dimensions")
    numel = int(np.prod(sizes, dtype=np.int64))
    data = memoryview(tensor.data).cast("B")
    if len(data) < numel * dtype.itemsize:
        raise InvalidProgramError(
            f"{where}: a {NAMES[ScalarType(tensor.scalar_type)]}{sizes} tensor needs "
            f"{numel * dtype.itemsize} bytes of data, found {len(data)}"
        )
    flat = np.frombuffer(data, dtype, count=numel) if numel else np.empty(0, dtype)
    physical = flat.reshape([sizes[d] for d in order])
    return physical.transpose([order.index(d) for d in range(len(sizes))])


def value_from_python(value) -> Value:
    """A bundled value: an array (or 0-d array) is a Tensor; a bool, int or float a scalar."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, np.ndarray):
        return Value(tensor_from_array(value))
    if isinstance(value, bool):
        return Value(Bool(value))
    if isinstance(value, int):
        return Value(Int(value))
    if isinstance(value, float):
        return Value(Double(value))
    raise InputError(f"a bundled value is a tensor, int, float or bool; found {type(value).__name__}")


def python_from_value(value: Value, where: str):
    """The array (read-only view) or Python scalar a bundled value holds."""
    val = value.val
    if isinstance(val, Tensor):
        return array_from_tensor(val, where)
    if isinstance(val, Int):
        return int(val.int_val)
    if isinstance(val, Bool):
        return bool(val.bool_val)
    if isinstance(val, Double):
        return float(val.double_val)
    raise InvalidProgramError(f"{where}: expected a Tensor, Int, Bool or Double value, found none")
