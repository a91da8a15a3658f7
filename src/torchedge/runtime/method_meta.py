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
from torchedge.schema.program import (
    Bool,
    Double,
    Int,
    KernelCall,
    OptionalTensorList,
    String,
    Tensor,
    TensorList,
    TensorShapeDynamism,
)

__all__ = ["MethodMeta", "TensorMeta", "input_minimums_key", "encode_input_minimums", "operator_kernel_keys"]

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

    # ExecuTorch's names: the caller sizes its own memory for `Program.load_method(planned_memory=...)`.
    def num_memory_planned_buffers(self) -> int:
        """How many planned memory ids the method has (ids 1..n)."""
        return len(self.planned_buffer_sizes)

    def memory_planned_buffer_size(self, index: int) -> int:
        """The bytes planned memory id ``index + 1`` needs (``index`` counts from 0, as ExecuTorch's does)."""
        if not 0 <= index < len(self.planned_buffer_sizes):
            raise IndexError(
                f"method '{self.name}' has {len(self.planned_buffer_sizes)} planned buffer(s), no index {index}"
            )
        return self.planned_buffer_sizes[index]


def operator_kernel_keys(plan) -> dict[str, set[str]]:
    """Each operator a plan's instructions call -> the kernel keys of its calls, as ExecuTorch's
    selective build writes them in ``et_kernel_metadata``: ``"v1/"`` then, for each tensor (or
    tensor list) argument in order, ``"<ScalarType code>;<dim order>"`` joined by ``"|"``
    (``v1/6;0,1|6;0,1`` for a float 2-D argument and out; ``v1`` without tensors). Operators the plan lists but never
    calls have no keys; operators inside delegate payloads are the backend's business, not listed."""
    values = plan.values or []
    operators = plan.operators or []
    names = [f"{o.name}.{o.overload}" if o.overload else o.name for o in operators]
    keys: dict[str, set[str]] = {name: set() for name in names}
    for chain in plan.chains or []:
        for instruction in chain.instructions or []:
            call = instruction.instr_args
            if not isinstance(call, KernelCall) or not 0 <= call.op_index < len(names):
                continue
            parts = [part for index in call.args if (part := _io_key(values, index)) is not None]
            keys[names[call.op_index]].add("v1/" + "|".join(parts) if parts else "v1")  # "v1": no tensor
    return keys


def _io_key(values, index: int) -> str | None:
    if not 0 <= index < len(values):
        return None
    val = values[index].val
    if isinstance(val, (TensorList, OptionalTensorList)):  # described by its first tensor
        first = next((values[i].val for i in val.items if 0 <= i < len(values)), None)
        val = first if isinstance(first, Tensor) else None
        if val is None:
            return None
    if not isinstance(val, Tensor):
        return None
    return f"{int(val.scalar_type)};{','.join(str(d) for d in val.dim_order or [])}"


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
