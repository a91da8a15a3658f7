"""`MethodMeta`: a method's signature and memory needs, readable without executing it.

The `.pte` format records only the upper bound of a dynamic dimension (the tensor's planned
sizes). torchedge's compiler also records the lower bounds the program was exported with, as
JSON in the program's named data under `input_minimums_key` (``[[input, dim, minimum], ...]``):
ExecuTorch ignores named data nobody asks for, and torchedge's runtime refuses smaller inputs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from torchedge.errors import InvalidProgramError
from torchedge.runtime.tensor_view import dtype_of
from torchedge.schema.program import Bool, Double, Int, String, Tensor, TensorShapeDynamism

__all__ = ["MethodMeta", "TensorMeta", "input_minimums_key", "encode_input_minimums"]

_SCALAR_TYPES = {Int: int, Double: float, Bool: bool, String: str}


@dataclass(frozen=True)
class TensorMeta:
    shape: tuple[int, ...]
    dtype: np.dtype
    dim_order: tuple[int, ...]
    dynamic: bool = False  # the shape may change from run to run; ``shape`` is its upper bound
    min_shape: tuple[int, ...] | None = None  # a dynamic shape's lower bound (None: ``shape``, or 0s if dynamic)

    @property
    def lower_bound(self) -> tuple[int, ...]:
        if self.min_shape is not None:
            return self.min_shape
        return tuple(0 for _ in self.shape) if self.dynamic else self.shape

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


@dataclass(frozen=True)
class MethodMeta:
    name: str
    inputs: tuple  # TensorMeta, or the Python type of a scalar input
    outputs: tuple
    planned_buffer_sizes: tuple[int, ...]
    num_instructions: int
    operators: tuple[str, ...]

    @classmethod
    def from_plan(cls, plan, named_data=None) -> MethodMeta:
        """``named_data``: the program's `NamedDataMap`, where the compiler records lower bounds."""
        values = plan.values or []
        minimums = _input_minimums(plan.name, named_data)

        def describe(index: int, what: str, position: int):
            if not 0 <= index < len(values):
                raise InvalidProgramError(
                    f"method '{plan.name}', {what} {position}: expected a value index below {len(values)}, "
                    f"found {index}"
                )
            val = values[index].val
            if isinstance(val, Tensor):
                shape = tuple(int(s) for s in val.sizes or [])
                dynamic = val.shape_dynamism != TensorShapeDynamism.STATIC
                lowest = minimums.get(position) if what == "input" and dynamic else None
                return TensorMeta(
                    shape,
                    dtype_of(val.scalar_type, plan.name),
                    tuple(val.dim_order or range(len(shape))),
                    dynamic,
                    None if lowest is None else _min_shape(plan.name, position, shape, lowest),
                )
            return _SCALAR_TYPES.get(type(val), type(None))

        chains = plan.chains or []
        return cls(
            name=plan.name,
            inputs=tuple(describe(i, "input", p) for p, i in enumerate(plan.inputs or [])),
            outputs=tuple(describe(i, "output", p) for p, i in enumerate(plan.outputs or [])),
            planned_buffer_sizes=tuple(int(s) for s in (plan.non_const_buffer_sizes or [0])[1:]),
            num_instructions=len(chains[0].instructions) if chains else 0,
            operators=tuple(f"{o.name}.{o.overload}" if o.overload else o.name for o in plan.operators or []),
        )

    def input_tensor_meta(self, position: int) -> TensorMeta:
        return self.inputs[position]


def input_minimums_key(method: str) -> str:
    """The named-data key of a method's recorded input lower bounds."""
    return f"torchedge::input_minimums::{method}"


def encode_input_minimums(entries: list[tuple[int, int, int]]) -> bytes:
    """The named-data blob recording ``(input position, dim, minimum)`` lower bounds."""
    return json.dumps([list(entry) for entry in entries]).encode()


def _input_minimums(method: str, named_data) -> dict[int, dict[int, int]]:
    """input position -> {dim: minimum}, as the compiler recorded them (none if it did not)."""
    key = input_minimums_key(method)
    if named_data is None or key not in named_data:
        return {}
    try:
        entries = json.loads(bytes(named_data.get(key)))
        found: dict[int, dict[int, int]] = {}
        for position, dim, minimum in entries:
            if not all(type(v) is int and v >= 0 for v in (position, dim, minimum)):
                raise ValueError(f"expected non-negative integers, found {[position, dim, minimum]}")
            found.setdefault(position, {})[dim] = minimum
        return found
    except (ValueError, TypeError) as e:
        raise InvalidProgramError(
            f"method '{method}': named data '{key}' is not a list of [input, dim, minimum]: {e}"
        ) from None


def _min_shape(method: str, position: int, shape: tuple[int, ...], minimums: dict[int, int]) -> tuple[int, ...]:
    if any(dim >= len(shape) or minimum > shape[dim] for dim, minimum in minimums.items()):
        raise InvalidProgramError(
            f"method '{method}', input {position}: recorded lower bounds {minimums} do not fit its shape {list(shape)}"
        )
    return tuple(minimums.get(dim, 0) for dim in range(len(shape)))
