"""The wire description of every `program.fbs` table, for the flatbuffer codec.

Fields are listed in declaration order (their ids); struct formats: `b` byte,
`B` ubyte, `?` bool, `i` int, `I` uint, `q` long, `Q` uint64, `d` double.
Both `[ubyte] (force_align: 16)` vectors use `VECTOR_ALIGNMENT`.
"""

from __future__ import annotations

from torchedge.schema import program as s
from torchedge.schema.scalar_type import ScalarType
from torchedge.serialize.flatbuffer_fields import (
    Bytes,
    Scalar,
    ScalarVector,
    String,
    Table,
    TableRef,
    TableVector,
    Union,
)

__all__ = ["FILE_IDENTIFIER", "VECTOR_ALIGNMENT", "PROGRAM"]

FILE_IDENTIFIER = b"ET12"
# The force_align of Buffer.storage and BackendDelegateInlineData.data.
VECTOR_ALIGNMENT = 16


def _items(cls: type, fmt: str) -> Table:
    """A table whose only field is `items: [scalar]`."""
    return Table(cls, [ScalarVector("items", fmt)])


_CONTAINER_METADATA = Table(s.ContainerMetadata, [String("encoded_inp_str"), String("encoded_out_str")])
_ALLOCATION_DETAILS = Table(
    s.AllocationDetails, [Scalar("memory_id", "I"), Scalar("memory_offset_low", "I"), Scalar("memory_offset_high", "I")]
)
_EXTRA_TENSOR_INFO = Table(
    s.ExtraTensorInfo,
    [
        Scalar("mutable_data_segments_idx", "Q"),
        String("fully_qualified_name"),
        Scalar("location", "b", enum=s.TensorDataLocation),
        Scalar("device_type", "b", enum=s.DeviceType),
        Scalar("device_index", "b"),
    ],
)
_TENSOR = Table(
    s.Tensor,
    [
        Scalar("scalar_type", "b", enum=ScalarType),
        Scalar("storage_offset", "i"),
        ScalarVector("sizes", "i"),
        ScalarVector("dim_order", "B"),
        Scalar("requires_grad", "?"),
        Scalar("data_buffer_idx", "I"),
        TableRef("allocation_info", _ALLOCATION_DETAILS),
        Scalar("layout", "b"),
        Scalar("shape_dynamism", "b", enum=s.TensorShapeDynamism),
        TableRef("extra_tensor_info", _EXTRA_TENSOR_INFO),
    ],
)
# Members in union tag order (KernelTypes in program.fbs).
_KERNEL_TYPES = [
    Table(s.Null, []),
    Table(s.Int, [Scalar("int_val", "q")]),
    Table(s.Bool, [Scalar("bool_val", "?")]),
    Table(s.Double, [Scalar("double_val", "d")]),
    _TENSOR,
    Table(s.String, [String("string_val")]),
    _items(s.IntList, "q"),
    _items(s.DoubleList, "d"),
    _items(s.BoolList, "?"),
    _items(s.TensorList, "i"),
    _items(s.OptionalTensorList, "i"),
]
_EVALUE = Table(s.EValue, [Union("val", _KERNEL_TYPES)])
_OPERATOR = Table(s.Operator, [String("name"), String("overload")])


def _call(cls: type, index_name: str) -> Table:
    """KernelCall / DelegateCall: an index and the argument value indices."""
    return Table(cls, [Scalar(index_name, "i"), ScalarVector("args", "i")])


def _int_fields(cls: type, *names: str) -> Table:
    return Table(cls, [Scalar(name, "i") for name in names])


# Members in union tag order (InstructionArguments in program.fbs).
_INSTRUCTION_ARGUMENTS = [
    _call(s.KernelCall, "op_index"),
    _call(s.DelegateCall, "delegate_index"),
    _int_fields(s.MoveCall, "move_from", "move_to"),
    _int_fields(s.JumpFalseCall, "cond_value_index", "destination_instruction"),
    _int_fields(s.FreeCall, "value_index"),
]
_INSTRUCTION = Table(s.Instruction, [Union("instr_args", _INSTRUCTION_ARGUMENTS)])
_FRAME = Table(s.Frame, [String("filename"), Scalar("lineno", "i"), String("name"), String("context")])
_FRAME_LIST = Table(s.FrameList, [TableVector("items", _FRAME)])
_DATA_REFERENCE = Table(
    s.BackendDelegateDataReference, [Scalar("location", "b", enum=s.DataLocation), Scalar("index", "I")]
)
_COMPILE_SPEC = Table(s.CompileSpec, [String("key"), Bytes("value")])
_BACKEND_DELEGATE = Table(
    s.BackendDelegate,
    [String("id"), TableRef("processed", _DATA_REFERENCE), TableVector("compile_specs", _COMPILE_SPEC)],
)
_CHAIN = Table(
    s.Chain,
    [
        ScalarVector("inputs", "i"),
        ScalarVector("outputs", "i"),
        TableVector("instructions", _INSTRUCTION),
        TableVector("stacktrace", _FRAME_LIST),
    ],
)
_NON_CONST_BUFFER_DEVICE = Table(
    s.NonConstBufferDevice,
    [Scalar("buffer_idx", "i"), Scalar("device_type", "b", enum=s.DeviceType), Scalar("device_index", "b")],
)
_EXECUTION_PLAN = Table(
    s.ExecutionPlan,
    [
        String("name"),
        TableRef("container_meta_type", _CONTAINER_METADATA),
        TableVector("values", _EVALUE),
        ScalarVector("inputs", "i"),
        ScalarVector("outputs", "i"),
        TableVector("chains", _CHAIN),
        TableVector("operators", _OPERATOR),
        TableVector("delegates", _BACKEND_DELEGATE),
        ScalarVector("non_const_buffer_sizes", "q"),
        TableVector("non_const_buffer_device", _NON_CONST_BUFFER_DEVICE),
    ],
)
_SUBSEGMENT_OFFSETS = Table(s.SubsegmentOffsets, [Scalar("segment_index", "I"), ScalarVector("offsets", "Q")])
PROGRAM = Table(
    s.Program,
    [
        Scalar("version", "I"),
        TableVector("execution_plan", _EXECUTION_PLAN),
        TableVector("constant_buffer", Table(s.Buffer, [Bytes("storage", VECTOR_ALIGNMENT)])),
        TableVector("backend_delegate_data", Table(s.BackendDelegateInlineData, [Bytes("data", VECTOR_ALIGNMENT)])),
        TableVector("segments", Table(s.DataSegment, [Scalar("offset", "Q"), Scalar("size", "Q")])),
        TableRef("constant_segment", _SUBSEGMENT_OFFSETS),
        TableVector("mutable_data_segments", _SUBSEGMENT_OFFSETS),
        TableVector("named_data", Table(s.NamedData, [String("key"), Scalar("segment_index", "I")])),
    ],
)
