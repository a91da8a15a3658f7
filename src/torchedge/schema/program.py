"""The tables of `program.fbs` as plain dataclasses.

One class per table, named as in the schema, fields in wire (declaration)
order with the schema's defaults. Union fields (`EValue.val`,
`Instruction.instr_args`) hold one member instance; the wire type tag is
derived from its class. Byte vectors hold `bytes` or `memoryview`.
`IntList.items` are value indices of boxed `Int` values, not literals.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

from torchedge.schema.scalar_type import ScalarType

__all__ = [
    "TensorShapeDynamism",
    "TensorDataLocation",
    "DeviceType",
    "DataLocation",
    "ContainerMetadata",
    "Null",
    "AllocationDetails",
    "ExtraTensorInfo",
    "Tensor",
    "Int",
    "Bool",
    "Double",
    "String",
    "IntList",
    "DoubleList",
    "BoolList",
    "TensorList",
    "OptionalTensorList",
    "KernelTypes",
    "EValue",
    "Operator",
    "KernelCall",
    "DelegateCall",
    "MoveCall",
    "JumpFalseCall",
    "FreeCall",
    "InstructionArguments",
    "Instruction",
    "Frame",
    "FrameList",
    "BackendDelegateDataReference",
    "CompileSpec",
    "BackendDelegate",
    "Chain",
    "ExecutionPlan",
    "NonConstBufferDevice",
    "Buffer",
    "BackendDelegateInlineData",
    "DataSegment",
    "SubsegmentOffsets",
    "NamedData",
    "Program",
]

ByteData = bytes | memoryview


class TensorShapeDynamism(IntEnum):
    STATIC = 0
    DYNAMIC_BOUND = 1
    DYNAMIC_UNBOUND = 2


class TensorDataLocation(IntEnum):
    SEGMENT = 0
    EXTERNAL = 1


class DeviceType(IntEnum):
    CPU = 0
    CUDA = 1


class DataLocation(IntEnum):
    INLINE = 0
    SEGMENT = 1


@dataclass
class ContainerMetadata:
    """Pytree encodings of the method's flattened inputs and outputs."""

    encoded_inp_str: str = ""
    encoded_out_str: str = ""


@dataclass
class Null:
    pass


@dataclass
class AllocationDetails:
    """Where a planned tensor lives: `memory_id` is 1-based into the arenas."""

    memory_id: int = 0
    memory_offset_low: int = 0
    memory_offset_high: int = 0


@dataclass
class ExtraTensorInfo:
    mutable_data_segments_idx: int = 0
    fully_qualified_name: str | None = None
    location: TensorDataLocation = TensorDataLocation.SEGMENT
    device_type: DeviceType = DeviceType.CPU
    device_index: int = 0


@dataclass
class Tensor:
    scalar_type: ScalarType = ScalarType.BYTE
    storage_offset: int = 0
    sizes: list[int] = field(default_factory=list)
    dim_order: list[int] = field(default_factory=list)
    requires_grad: bool = False
    data_buffer_idx: int = 0
    allocation_info: AllocationDetails | None = None
    layout: int = 0
    shape_dynamism: TensorShapeDynamism = TensorShapeDynamism.STATIC
    extra_tensor_info: ExtraTensorInfo | None = None


@dataclass
class Int:
    int_val: int = 0


@dataclass
class Bool:
    bool_val: bool = False


@dataclass
class Double:
    double_val: float = 0.0


@dataclass
class String:
    string_val: str = ""


@dataclass
class IntList:
    """Value indices of `Int` values (boxed), not the integers themselves."""

    items: list[int] = field(default_factory=list)


@dataclass
class DoubleList:
    items: list[float] = field(default_factory=list)


@dataclass
class BoolList:
    items: list[bool] = field(default_factory=list)


@dataclass
class TensorList:
    """Value indices of `Tensor` values."""

    items: list[int] = field(default_factory=list)


@dataclass
class OptionalTensorList:
    """Value indices of `Tensor` values; -1 means None."""

    items: list[int] = field(default_factory=list)


# Union members in tag order (tag = position + 1; 0 is NONE).
KernelTypes = (Null, Int, Bool, Double, Tensor, String, IntList, DoubleList, BoolList, TensorList, OptionalTensorList)


@dataclass
class EValue:
    val: object | None = None  # one of KernelTypes


@dataclass
class Operator:
    name: str = ""
    overload: str = ""


@dataclass
class KernelCall:
    op_index: int = 0
    args: list[int] = field(default_factory=list)


@dataclass
class DelegateCall:
    delegate_index: int = 0
    args: list[int] = field(default_factory=list)


@dataclass
class MoveCall:
    move_from: int = 0
    move_to: int = 0


@dataclass
class JumpFalseCall:
    cond_value_index: int = 0
    destination_instruction: int = 0


@dataclass
class FreeCall:
    value_index: int = 0


InstructionArguments = (KernelCall, DelegateCall, MoveCall, JumpFalseCall, FreeCall)


@dataclass
class Instruction:
    instr_args: object | None = None  # one of InstructionArguments


@dataclass
class Frame:
    filename: str = ""
    lineno: int = 0
    name: str = ""
    context: str = ""


@dataclass
class FrameList:
    items: list[Frame] = field(default_factory=list)


@dataclass
class BackendDelegateDataReference:
    location: DataLocation = DataLocation.INLINE
    index: int = 0


@dataclass
class CompileSpec:
    key: str = ""
    value: ByteData = b""


@dataclass
class BackendDelegate:
    id: str = ""
    processed: BackendDelegateDataReference | None = None
    compile_specs: list[CompileSpec] = field(default_factory=list)


@dataclass
class Chain:
    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    instructions: list[Instruction] = field(default_factory=list)
    stacktrace: list[FrameList] | None = None


@dataclass
class NonConstBufferDevice:
    buffer_idx: int = 0
    device_type: DeviceType = DeviceType.CPU
    device_index: int = 0


@dataclass
class ExecutionPlan:
    name: str = ""
    container_meta_type: ContainerMetadata | None = None
    values: list[EValue] = field(default_factory=list)
    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    chains: list[Chain] = field(default_factory=list)
    operators: list[Operator] = field(default_factory=list)
    delegates: list[BackendDelegate] = field(default_factory=list)
    non_const_buffer_sizes: list[int] = field(default_factory=list)
    non_const_buffer_device: list[NonConstBufferDevice] | None = None


@dataclass
class Buffer:
    storage: ByteData = b""


@dataclass
class BackendDelegateInlineData:
    data: ByteData = b""


@dataclass
class DataSegment:
    """A blob at `segment_base_offset + offset` of `size` bytes."""

    offset: int = 0
    size: int = 0


@dataclass
class SubsegmentOffsets:
    """Start offsets of the entries packed into segment `segment_index`."""

    segment_index: int = 0
    offsets: list[int] = field(default_factory=list)


@dataclass
class NamedData:
    key: str = ""
    segment_index: int = 0


@dataclass
class Program:
    version: int = 0
    execution_plan: list[ExecutionPlan] = field(default_factory=list)
    constant_buffer: list[Buffer] = field(default_factory=list)
    backend_delegate_data: list[BackendDelegateInlineData] = field(default_factory=list)
    segments: list[DataSegment] = field(default_factory=list)
    constant_segment: SubsegmentOffsets | None = None
    mutable_data_segments: list[SubsegmentOffsets] | None = None
    named_data: list[NamedData] | None = None
