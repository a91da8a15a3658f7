"""`.ptd` files: ExecuTorch's external data (flat_tensor.fbs, identifier ``FT01``).

Layout, little-endian: the FlatTensor flatbuffer starts the file; at offset 8 sits the ``FH01``
header (magic, u32 length, u64 flatbuffer_offset, u64 flatbuffer_size, u64 segment_base_offset,
u64 segment_data_size); the segments follow at ``segment_base_offset``. Each named blob points at
one segment and may carry the layout (dtype, sizes, dim order) of the tensor it holds.
`read_ptd` checks every offset against the file; `write_ptd` writes what the real ExecuTorch reads.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, field

from torchedge.errors import InvalidProgramError
from torchedge.schema.scalar_type import ScalarType
from torchedge.serialize.flatbuffer import decode, encode
from torchedge.serialize.flatbuffer_fields import Scalar, ScalarVector, String, Table, TableRef, TableVector

__all__ = ["FILE_IDENTIFIER", "TensorLayout", "PtdContents", "is_ptd", "read_ptd", "write_ptd"]

FILE_IDENTIFIER = b"FT01"
_MAGIC = b"FH01"
_HEADER = struct.Struct("<4sIQQQQ")
_HEADER_OFFSET = 8
_SEGMENT_ALIGNMENT = 128


@dataclass
class TensorLayout:
    scalar_type: ScalarType = ScalarType.BYTE
    sizes: list[int] = field(default_factory=list)
    dim_order: list[int] = field(default_factory=list)


@dataclass
class _DataSegment:
    offset: int = 0
    size: int = 0


@dataclass
class _NamedData:
    key: str = ""
    segment_index: int = 0
    tensor_layout: TensorLayout | None = None


@dataclass
class _FlatTensor:
    version: int = 0
    segments: list[_DataSegment] = field(default_factory=list)
    named_data: list[_NamedData] = field(default_factory=list)


_LAYOUT = Table(
    TensorLayout,
    [Scalar("scalar_type", "b", enum=ScalarType), ScalarVector("sizes", "i"), ScalarVector("dim_order", "B")],
)
_FLAT_TENSOR = Table(
    _FlatTensor,
    [
        Scalar("version", "I"),
        TableVector("segments", Table(_DataSegment, [Scalar("offset", "Q"), Scalar("size", "Q")])),
        TableVector(
            "named_data",
            Table(_NamedData, [String("key"), Scalar("segment_index", "I"), TableRef("tensor_layout", _LAYOUT)]),
        ),
    ],
)


@dataclass
class PtdContents:
    """Each key's bytes (views into the file) and, where recorded, its tensor layout."""

    data: dict[str, memoryview]
    layouts: dict[str, TensorLayout]


def is_ptd(data) -> bool:
    return bytes(memoryview(data)[4:8]) == FILE_IDENTIFIER


def read_ptd(data, name: str = "the .ptd file") -> PtdContents:
    view = memoryview(data).cast("B") if not isinstance(data, memoryview) else data.cast("B")
    if len(view) < _HEADER_OFFSET + _HEADER.size or not is_ptd(view):
        raise InvalidProgramError(f"{name} is not a .ptd file: expected the identifier {FILE_IDENTIFIER!r} at offset 4")
    magic, length, fb_offset, fb_size, base, data_size = _HEADER.unpack_from(view, _HEADER_OFFSET)
    if magic != _MAGIC or length < _HEADER.size:
        raise InvalidProgramError(f"{name}: expected the {_MAGIC!r} header of at least {_HEADER.size} bytes")
    if fb_offset + fb_size > len(view) or base + data_size > len(view) or (data_size and base < fb_offset + fb_size):
        raise InvalidProgramError(
            f"{name}: the header places the flatbuffer at {fb_offset}+{fb_size} and the segments at "
            f"{base}+{data_size}, which do not fit the file's {len(view)} bytes"
        )
    table = decode(view[: fb_offset + fb_size], _FLAT_TENSOR)
    segments = table.segments or []
    contents = PtdContents({}, {})
    for entry in table.named_data or []:
        if not 0 <= entry.segment_index < len(segments):
            raise InvalidProgramError(
                f"{name}: named data '{entry.key}' refers to segment {entry.segment_index} of {len(segments)}"
            )
        segment = segments[entry.segment_index]
        if segment.offset + segment.size > data_size:
            raise InvalidProgramError(
                f"{name}: segment {entry.segment_index} ({segment.offset}+{segment.size}) lies beyond the "
                f"{data_size} bytes of segment data"
            )
        if entry.key in contents.data:
            raise InvalidProgramError(f"{name}: named data '{entry.key}' is stored twice")
        contents.data[entry.key] = view[base + segment.offset : base + segment.offset + segment.size]
        if entry.tensor_layout is not None:
            contents.layouts[entry.key] = entry.tensor_layout
    return contents


def _aligned(n: int, alignment: int) -> int:
    return (n + alignment - 1) // alignment * alignment


def write_ptd(blobs: Mapping[str, bytes], layouts: Mapping[str, TensorLayout] | None = None) -> bytes:
    """A `.ptd` holding each blob under its key (identical blobs share one segment)."""
    layouts = layouts or {}
    segments: list[_DataSegment] = []
    payload, index_of = bytearray(), {}
    named = []
    for key, blob in blobs.items():
        blob = bytes(blob)
        if blob not in index_of:
            payload.extend(b"\0" * (_aligned(len(payload), _SEGMENT_ALIGNMENT) - len(payload)))
            index_of[blob] = len(segments)
            segments.append(_DataSegment(len(payload), len(blob)))
            payload.extend(blob)
        named.append(_NamedData(key, index_of[blob], layouts.get(key)))
    flatbuffer = encode(_FlatTensor(0, segments, named), _FLAT_TENSOR, FILE_IDENTIFIER)
    header_length = _aligned(_HEADER.size, 8)
    root = struct.unpack_from("<I", flatbuffer)[0] + header_length
    body = flatbuffer[_HEADER_OFFSET:]
    fb_offset = _HEADER_OFFSET + header_length
    base = _aligned(fb_offset + len(body), _SEGMENT_ALIGNMENT)
    header = _HEADER.pack(_MAGIC, _HEADER.size, fb_offset, len(body), base, len(payload))
    head = struct.pack("<I", root) + flatbuffer[4:_HEADER_OFFSET] + header.ljust(header_length, b"\0")
    return b"".join((head, body, b"\0" * (base - fb_offset - len(body)), bytes(payload)))
