"""The value table of one execution plan: every tensor, scalar and list an instruction names.

`ValueTable` turns graph arguments into `EValue` entries and returns their
indices; `Value` is a handle on an entry (distinct from a literal int argument).
"""

from __future__ import annotations

import torch

from torchedge.errors import ExportError
from torchedge.exir.dtypes import LAYOUT_CODES, MEMORY_FORMAT_CODES, scalar_type
from torchedge.exir.emit.constants import ConstantTable, ExternalConstants, tensor_bytes
from torchedge.exir.tensor_spec import TensorSpec, contiguous_dim_order
from torchedge.schema.program import (
    AllocationDetails,
    Bool,
    BoolList,
    Double,
    DoubleList,
    EValue,
    ExtraTensorInfo,
    Int,
    IntList,
    Null,
    OptionalTensorList,
    String,
    Tensor,
    TensorDataLocation,
    TensorList,
    TensorShapeDynamism,
)
from torchedge.schema.scalar_type import ScalarType

__all__ = ["Value", "ValueTable", "literal_evalue", "scalar_placeholder"]


class Value:
    """A handle on an entry of the value table (distinct from literal ints in arguments)."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index


class ValueTable:
    """The plan's values, with constant and mutable-buffer bytes routed to their tables."""

    def __init__(
        self,
        constants: ConstantTable,
        mutable_data: ConstantTable,
        emit_mutable_buffer_names: bool,
        external: ExternalConstants | None = None,
    ):
        self.values: list[EValue] = []
        self.constants = constants
        self.external = external if external is not None else ExternalConstants()
        self.mutable_data = mutable_data
        self.emit_mutable_buffer_names = emit_mutable_buffer_names
        self._spec_values: dict[int, int] = {}

    def add(self, value) -> int:
        if not isinstance(value, EValue):
            value = EValue(val=value)
        self.values.append(value)
        return len(self.values) - 1

    def literal(self, value) -> int:
        return self.add(literal_evalue(value))

    def is_tensor(self, value: Value) -> bool:
        return isinstance(self.values[value.index].val, Tensor)

    def argument(self, value, arg_type) -> int:
        """Value index for one argument of declared type ``arg_type``."""
        if isinstance(value, Value):
            return value.index
        kind = str(arg_type)
        if value is None:
            if kind == "Tensor":  # None for a non-optional tensor: an empty tensor, as ExecuTorch does
                return self.add(EValue(val=tensor_schema(ScalarType.BYTE, (0,), (0,))))
            return self.add(EValue(val=Null()))
        if kind == "Tensor" and isinstance(value, (bool, int, float)):
            return self.constant_tensor(tensor_bytes(_scalar_tensor(value)), _scalar_spec(value))
        if isinstance(value, (list, tuple)):
            return self.list(value, arg_type)
        return self.literal(value)

    def list(self, items, arg_type) -> int:
        elem = _element_kind(arg_type)
        if elem in ("int", "SymInt", None) and any(isinstance(v, Value) and not self.is_tensor(v) for v in items):
            # sizes computed at run time: the list boxes their values next to literal ints
            boxed = [v.index if isinstance(v, Value) else self.add(EValue(val=Int(int_val=int(v)))) for v in items]
            return self.add(EValue(val=IntList(items=boxed)))
        if any(isinstance(v, Value) for v in items) or elem in ("Tensor", "Optional[Tensor]"):
            if elem == "Optional[Tensor]":
                return self.add(EValue(val=OptionalTensorList(items=[-1 if v is None else v.index for v in items])))
            return self.add(EValue(val=TensorList(items=[v.index for v in items])))
        if elem == "float" or (elem is None and any(isinstance(v, float) for v in items)):
            return self.add(EValue(val=DoubleList(items=[float(v) for v in items])))
        if elem == "bool" or (elem is None and items and all(isinstance(v, bool) for v in items)):
            return self.add(EValue(val=BoolList(items=[bool(v) for v in items])))
        boxed = [self.add(EValue(val=Int(int_val=int(v)))) for v in items]
        return self.add(EValue(val=IntList(items=boxed)))

    def tensor(self, spec: TensorSpec) -> int:
        """The planned tensor value of ``spec`` (one value per spec, shared by its writers)."""
        index = self._spec_values.get(id(spec))
        if index is None:
            allocation = None
            if spec.mem_id is not None:
                allocation = AllocationDetails(
                    memory_id=spec.mem_id,
                    memory_offset_low=spec.mem_offset & 0xFFFFFFFF,
                    memory_offset_high=spec.mem_offset >> 32,
                )
            tensor = tensor_schema(scalar_type(spec.dtype), spec.shape, spec.dim_order)
            tensor.allocation_info = allocation
            if spec.dynamic:
                unbounded = spec.unbounded
                tensor.shape_dynamism = (
                    TensorShapeDynamism.DYNAMIC_UNBOUND if unbounded else TensorShapeDynamism.DYNAMIC_BOUND
                )
            index = self.add(EValue(val=tensor))
            self._spec_values[id(spec)] = index
        return index

    def state_tensor(self, spec: TensorSpec, initial: bytes) -> int:
        """A mutable buffer: planned memory that starts from the buffer's value in the program
        (as ExecuTorch's ``InitializedMutableBufferPass`` records it), optionally named."""
        index = self.tensor(spec)
        tensor = self.values[index].val
        tensor.data_buffer_idx = self.mutable_data.add(initial)
        if self.emit_mutable_buffer_names:
            tensor.extra_tensor_info = ExtraTensorInfo(
                fully_qualified_name=spec.state, location=TensorDataLocation.SEGMENT
            )
        return index

    def constant_tensor(self, data: bytes | memoryview, spec: TensorSpec, external_name: str | None = None) -> int:
        """A constant in the program's constant data, or (``external_name``) in external data."""
        tensor = tensor_schema(scalar_type(spec.dtype), spec.shape, contiguous_dim_order(len(spec.shape)))
        if external_name is None:
            tensor.data_buffer_idx = self.constants.add(data)
        else:
            self.external.add(external_name, data, (tensor.scalar_type, tensor.sizes, tensor.dim_order))
            tensor.extra_tensor_info = ExtraTensorInfo(
                fully_qualified_name=external_name, location=TensorDataLocation.EXTERNAL
            )
        return self.add(EValue(val=tensor))


def literal_evalue(value) -> EValue:
    """The EValue of a literal argument: scalars, strings, dtypes, layouts, memory formats."""
    if value is None:
        return EValue(val=Null())
    if isinstance(value, bool):
        return EValue(val=Bool(bool_val=value))
    if isinstance(value, int):
        return EValue(val=Int(int_val=value))
    if isinstance(value, float):
        return EValue(val=Double(double_val=value))
    if isinstance(value, str):
        return EValue(val=String(string_val=value))
    if isinstance(value, torch.dtype):
        return EValue(val=Int(int_val=int(scalar_type(value))))
    if isinstance(value, torch.memory_format) and value in MEMORY_FORMAT_CODES:
        return EValue(val=Int(int_val=MEMORY_FORMAT_CODES[value]))
    if isinstance(value, torch.layout) and value in LAYOUT_CODES:
        return EValue(val=Int(int_val=LAYOUT_CODES[value]))
    if isinstance(value, torch.device):
        if value.type != "cpu":
            raise ExportError(f"device {value} is not supported: torchedge programs run on the CPU")
        return EValue(val=Null())
    raise ExportError(f"cannot emit argument value {value!r} of type {type(value).__name__}")


def scalar_placeholder(val):
    """The initial value of a scalar computed at run time, typed like the graph's symbolic value."""
    if isinstance(val, (torch.SymBool, bool)):
        return False
    if isinstance(val, (torch.SymFloat, float)):
        return 0.0
    return 0


def tensor_schema(code: ScalarType, shape, dim_order) -> Tensor:
    return Tensor(
        scalar_type=code,
        storage_offset=0,
        sizes=[int(s) for s in shape],
        dim_order=list(dim_order),
        requires_grad=False,
        data_buffer_idx=0,
        allocation_info=None,
        layout=0,
        shape_dynamism=TensorShapeDynamism.STATIC,
        extra_tensor_info=None,
    )


def _element_kind(arg_type) -> str | None:
    """Element type of a (possibly optional) list schema type: ``"int"``, ``"Tensor"``, ``"Optional[Tensor]"``..."""
    if isinstance(arg_type, torch.OptionalType):
        arg_type = arg_type.getElementType()
    return str(arg_type.getElementType()) if isinstance(arg_type, torch.ListType) else None


def _scalar_tensor(value) -> torch.Tensor:
    """A Python scalar in a Tensor position becomes a 0-d tensor with the scalar's default dtype."""
    return torch.tensor(value)


def _scalar_spec(value) -> TensorSpec:
    return TensorSpec.from_tensor(_scalar_tensor(value), const=True)
