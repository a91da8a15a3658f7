"""The header in front of an XNNPACK delegate payload.

Layout (little-endian), from ExecuTorch's ``xnnpack_graph_serialize.py``::

    bytes 0..4    zeros (so the magic sits where a bare flatbuffer keeps its file identifier)
    bytes 4..8    magic ``XH00``
    bytes 8..10   u16 header length (30)
    bytes 10..14  u32 flatbuffer offset
    bytes 14..18  u32 flatbuffer size
    bytes 18..22  u32 constant data offset
    bytes 22..30  u64 constant data size

A payload without the header is a bare flatbuffer (file identifier ``XN01`` at bytes 4..8)
with no constant data after it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from torchedge.errors import InvalidProgramError

__all__ = ["XnnHeader", "HEADER_MAGIC", "FLATBUFFER_IDENTIFIER", "split_payload", "join_payload"]

HEADER_MAGIC = b"XH00"
FLATBUFFER_IDENTIFIER = b"XN01"
_LAYOUT = struct.Struct("<4s4sHIIIQ")
_ALIGNMENT = 16  # of the flatbuffer and of the constant data (CONSTANT_TENSOR_ALIGNMENT)


@dataclass(frozen=True)
class XnnHeader:
    flatbuffer_offset: int
    flatbuffer_size: int
    constant_data_offset: int
    constant_data_size: int


def _read_header(payload: memoryview) -> XnnHeader:
    if len(payload) < _LAYOUT.size:
        raise InvalidProgramError(f"XNNPACK payload: header needs {_LAYOUT.size} bytes, payload has {len(payload)}")
    _, _, length, fb_offset, fb_size, const_offset, const_size = _LAYOUT.unpack_from(payload, 0)
    if length < _LAYOUT.size:
        raise InvalidProgramError(f"XNNPACK payload: header length {length} is less than {_LAYOUT.size}")
    header = XnnHeader(fb_offset, fb_size, const_offset, const_size)
    if fb_size == 0 or fb_offset < length or fb_offset + fb_size > len(payload):
        raise InvalidProgramError(
            f"XNNPACK payload: flatbuffer at {fb_offset} (+{fb_size}) does not lie in the {len(payload)}-byte payload"
        )
    if const_offset < fb_offset + fb_size or const_offset + const_size > len(payload):
        raise InvalidProgramError(
            f"XNNPACK payload: constant data at {const_offset} (+{const_size}) does not lie after the flatbuffer "
            f"in the {len(payload)}-byte payload"
        )
    return header


def split_payload(payload: memoryview) -> tuple[memoryview, memoryview]:
    """(flatbuffer, constant data) of a delegate payload, with or without the header."""
    payload = memoryview(payload).cast("B")
    magic = bytes(payload[4:8])
    if magic == HEADER_MAGIC:
        header = _read_header(payload)
        flatbuffer = payload[header.flatbuffer_offset : header.flatbuffer_offset + header.flatbuffer_size]
        start = header.constant_data_offset
        constants = payload[start : start + header.constant_data_size]
    elif magic == FLATBUFFER_IDENTIFIER:
        flatbuffer, constants = payload, payload[:0]
    else:
        raise InvalidProgramError(
            f"XNNPACK payload: bytes 4..8 are {magic!r}, expected the header magic {HEADER_MAGIC!r} "
            f"or the flatbuffer identifier {FLATBUFFER_IDENTIFIER!r}"
        )
    if bytes(flatbuffer[4:8]) != FLATBUFFER_IDENTIFIER:
        raise InvalidProgramError(
            f"XNNPACK payload: flatbuffer identifier is {bytes(flatbuffer[4:8])!r}, expected {FLATBUFFER_IDENTIFIER!r}"
        )
    return flatbuffer, constants


def _padded(data: bytes) -> bytes:
    return data + b"\x00" * (-len(data) % _ALIGNMENT)


def join_payload(flatbuffer: bytes, constant_data: bytes | bytearray = b"") -> bytes:
    """A payload as ExecuTorch's ``serialize_xnnpack_binary`` lays it out: the header, the
    flatbuffer and the constant data, each starting 16-byte aligned."""
    header_size = _LAYOUT.size + (-_LAYOUT.size % _ALIGNMENT)
    fb_offset = header_size
    const_offset = fb_offset + len(flatbuffer) + (-len(flatbuffer) % _ALIGNMENT)
    header = _LAYOUT.pack(
        b"\x00" * 4, HEADER_MAGIC, _LAYOUT.size, fb_offset, len(flatbuffer), const_offset, len(constant_data)
    )
    return b"".join((_padded(header), _padded(flatbuffer), constant_data))
