"""`MethodMeta`: a method's signature and memory needs, readable without executing it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from torchedge.errors import InvalidProgramError
from torchedge.runtime.tensor_view import dtype_of
from torchedge.schema.program import Bool, Double, Int, String, Tensor, TensorShapeDynamism

__all__ = ["MethodMeta", "TensorMeta"]

_SCALAR_TYPES = {Int: int, Double: float, Bool: bool, String: str}


@dataclass(frozen=True)
class TensorMeta:
    shape: tuple[int, ...]
    dtype: np.dtype
    dim_order: tuple[int, ...]
    dynamic: bool = False  # the shape may change from run to run; ``shape`` is its upper bound

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
    def from_plan(cls, plan) -> MethodMeta:
        values = plan.values or []

        def describe(index: int, what: str, position: int):
            if not 0 <= index < len(values):
                raise InvalidProgramError(
                    f"method '{plan.name}', {what} {position}: expected a value index below {len(values)}, "
                    f"found {index}"
                )
            val = values[index].val
            if isinstance(val, Tensor):
                return TensorMeta(
                    tuple(int(s) for s in val.sizes or []),
                    dtype_of(val.scalar_type, plan.name),
                    tuple(val.dim_order or range(len(val.sizes or []))),
                    val.shape_dynamism != TensorShapeDynamism.STATIC,
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
