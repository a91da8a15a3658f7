"""ETDump files (ExecuTorch's `etdump_schema_flatcc.fbs`, identifier ``ED00``): encode and decode.

ExecuTorch's runtime writes the flatbuffer size-prefixed (a little-endian u32 byte count
first), as flatcc does; `serialize_etdump` writes it the same way and `deserialize_etdump`
reads both that and an unprefixed buffer. Every offset is checked against the bytes: a
malformed dump raises `InvalidProgramError` naming the field.
"""

from __future__ import annotations

import struct

from torchedge.errors import InvalidProgramError
from torchedge.schema import etdump as ed
from torchedge.schema.scalar_type import ScalarType
from torchedge.serialize.flatbuffer import decode, encode
from torchedge.serialize.flatbuffer_fields import Bytes, Scalar, ScalarVector, String, Table, TableRef, TableVector

__all__ = ["FILE_IDENTIFIER", "serialize_etdump", "deserialize_etdump", "is_etdump"]

FILE_IDENTIFIER = b"ED00"
_PREFIX = struct.Struct("<I")

_TENSOR = Table(
    ed.Tensor,
    [
        Scalar("scalar_type", "b", enum=ScalarType),
        ScalarVector("sizes", "q"),
        ScalarVector("strides", "q"),
        Scalar("offset", "q"),
    ],
)
_INT = Table(ed.Int, [Scalar("int_val", "q")])
_BOOL = Table(ed.Bool, [Scalar("bool_val", "?")])
_FLOAT = Table(ed.Float, [Scalar("float_val", "f")])
_DOUBLE = Table(ed.Double, [Scalar("double_val", "d")])
_TENSOR_LIST = Table(ed.TensorList, [TableVector("tensors", _TENSOR)])
_VALUE = Table(
    ed.Value,
    [
        Scalar("val", "b", enum=ed.ValueType),
        TableRef("tensor", _TENSOR),
        TableRef("tensor_list", _TENSOR_LIST),
        TableRef("int_value", _INT),
        TableRef("float_value", _FLOAT),
        TableRef("double_value", _DOUBLE),
        TableRef("bool_value", _BOOL),
        TableRef("output", _BOOL),
    ],
)
_DEBUG_EVENT = Table(
    ed.DebugEvent,
    [
        Scalar("chain_index", "Q"),
        Scalar("instruction_id", "i"),
        TableRef("debug_entry", _VALUE),
        Scalar("delegate_debug_id_int", "i"),
        String("delegate_debug_id_str"),
        String("name"),
    ],
)
_ALLOCATION_EVENT = Table(ed.AllocationEvent, [Scalar("allocator_id", "i"), Scalar("allocation_size", "Q")])
_PROFILE_EVENT = Table(
    ed.ProfileEvent,
    [
        String("name"),
        Scalar("chain_index", "i"),
        Scalar("instruction_id", "i"),
        Scalar("delegate_debug_id_int", "i"),
        String("delegate_debug_id_str"),
        Bytes("delegate_debug_metadata"),
        Scalar("start_time", "Q"),
        Scalar("end_time", "Q"),
    ],
)
_EVENT = Table(
    ed.Event,
    [
        TableRef("profile_event", _PROFILE_EVENT),
        TableRef("allocation_event", _ALLOCATION_EVENT),
        TableRef("debug_event", _DEBUG_EVENT),
    ],
)
_ALLOCATOR = Table(ed.Allocator, [String("name")])
_RUN_DATA = Table(
    ed.RunData,
    [
        String("name"),
        Scalar("bundled_input_index", "i"),
        TableVector("allocators", _ALLOCATOR),
        TableVector("events", _EVENT),
    ],
)
ETDUMP = Table(ed.ETDump, [Scalar("version", "I"), TableVector("run_data", _RUN_DATA)])


def is_etdump(data: bytes | memoryview) -> bool:
    """Whether ``data`` holds an ETDump, size-prefixed or not."""
    view = memoryview(data)
    return bytes(view[8:12]) == FILE_IDENTIFIER or bytes(view[4:8]) == FILE_IDENTIFIER


def serialize_etdump(etdump: ed.ETDump) -> bytes:
    """The dump as ExecuTorch's runtime writes it: size-prefixed, identifier ``ED00``."""
    body = encode(etdump, ETDUMP, FILE_IDENTIFIER)
    return _PREFIX.pack(len(body)) + body


def deserialize_etdump(data: bytes | memoryview) -> ed.ETDump:
    view = memoryview(data).cast("B")
    if len(view) >= 12 and bytes(view[8:12]) == FILE_IDENTIFIER:
        (size,) = _PREFIX.unpack_from(view, 0)
        if size > len(view) - 4:
            raise InvalidProgramError(f"ETDump: the size prefix says {size} bytes, the file has {len(view) - 4}")
        view = view[4 : 4 + size]
    elif len(view) < 8 or bytes(view[4:8]) != FILE_IDENTIFIER:
        found = bytes(view[8:12]) if len(view) >= 12 else bytes(view[:8])
        raise InvalidProgramError(f"not an ETDump: expected identifier {FILE_IDENTIFIER!r}, found {found!r}")
    return decode(view, ETDUMP)
