"""The tables of ExecuTorch's `etdump_schema_flatcc.fbs` (ETDump, file identifier ``ED00``) as
plain dataclasses, named as in the schema, fields in wire order with the schema's defaults."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

from torchedge.schema.scalar_type import ScalarType

__all__ = [
    "Null",
    "Tensor",
    "Int",
    "Bool",
    "Float",
    "Double",
    "String",
    "TensorList",
    "ValueType",
    "Value",
    "DebugEvent",
    "AllocationEvent",
    "ProfileEvent",
    "Event",
    "Allocator",
    "RunData",
    "ETDump",
]


@dataclass
class Null:
    pass


@dataclass
class Tensor:
    """A logged tensor: its bytes lie at ``offset`` in the debug buffer; strides in elements."""

    scalar_type: ScalarType = ScalarType.BYTE
    sizes: list[int] = field(default_factory=list)
    strides: list[int] = field(default_factory=list)
    offset: int = 0


@dataclass
class Int:
    int_val: int = 0


@dataclass
class Bool:
    bool_val: bool = False


@dataclass
class Float:
    float_val: float = 0.0


@dataclass
class Double:
    double_val: float = 0.0


@dataclass
class String:
    string_val: str | None = None


@dataclass
class TensorList:
    tensors: list[Tensor] = field(default_factory=list)


class ValueType(IntEnum):
    NULL = 0
    INT = 1
    BOOL = 2
    FLOAT = 3
    DOUBLE = 4
    TENSOR = 5
    TENSOR_LIST = 6
    STRING = 7


@dataclass
class Value:
    """A logged value: ``val`` says which of the other fields holds it."""

    val: ValueType = ValueType.NULL
    tensor: Tensor | None = None
    tensor_list: TensorList | None = None
    int_value: Int | None = None
    float_value: Float | None = None
    double_value: Double | None = None
    bool_value: Bool | None = None
    output: Bool | None = None


@dataclass
class DebugEvent:
    chain_index: int = 0
    instruction_id: int = -1
    debug_entry: Value | None = None
    delegate_debug_id_int: int = -1
    delegate_debug_id_str: str | None = None
    name: str | None = None


@dataclass
class AllocationEvent:
    allocator_id: int = 0
    allocation_size: int = 0


@dataclass
class ProfileEvent:
    """A span in the runtime's clock ticks (nanoseconds for torchedge's and ExecuTorch's CPU runtimes)."""

    name: str | None = None
    chain_index: int = 0
    instruction_id: int = -1
    delegate_debug_id_int: int = -1
    delegate_debug_id_str: str | None = None
    delegate_debug_metadata: bytes | memoryview | None = None
    start_time: int = 0
    end_time: int = 0


@dataclass
class Event:
    """One of the three kinds of event (the others are None)."""

    profile_event: ProfileEvent | None = None
    allocation_event: AllocationEvent | None = None
    debug_event: DebugEvent | None = None


@dataclass
class Allocator:
    name: str | None = None


@dataclass
class RunData:
    """One block of events: loading (``Default``) or one run (``Execute``)."""

    name: str | None = None
    bundled_input_index: int = -1
    allocators: list[Allocator] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)


@dataclass
class ETDump:
    version: int = 0
    run_data: list[RunData] = field(default_factory=list)
