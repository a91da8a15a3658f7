"""The `eh00` extended header that sits between the identifier and the flatbuffer.

Layout at file offset 8, little-endian: magic `eh00`, u32 header length,
u64 program_size (flatbuffer bytes including this header), u64
segment_base_offset, u64 segment_data_size (only read when length >= 32).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from torchedge.errors import InvalidProgramError

__all__ = ["ExtendedHeader", "HEADER_OFFSET", "HEADER_LENGTH", "MAGIC", "parse_header", "insert_header"]

HEADER_OFFSET = 8
MAGIC = b"eh00"
_MIN_LENGTH = 24  # magic, length, program_size, segment_base_offset
HEADER_LENGTH = 32  # ... and segment_data_size
_FIELDS = struct.Struct("<4sIQQ")
_SEGMENT_DATA_SIZE = struct.Struct("<Q")


@dataclass(frozen=True)
class ExtendedHeader:
    program_size: int
    segment_base_offset: int
    segment_data_size: int
    length: int = HEADER_LENGTH


def parse_header(data: memoryview) -> ExtendedHeader | None:
    """Reads and checks the header of a `.pte`; None when there is none.

    A header claiming more bytes than `data` holds raises InvalidProgramError.
    """
    if bytes(data[HEADER_OFFSET : HEADER_OFFSET + 4]) != MAGIC:
        return None
    size = len(data)
    if size < HEADER_OFFSET + _MIN_LENGTH:
        raise InvalidProgramError(
            f"extended header at offset {HEADER_OFFSET} is truncated: the file has "
            f"{size} bytes, the header needs {HEADER_OFFSET + _MIN_LENGTH}"
        )
    _, length, program_size, base = _FIELDS.unpack_from(data, HEADER_OFFSET)
    if length < _MIN_LENGTH:
        raise InvalidProgramError(f"extended header length is {length}; expected at least {_MIN_LENGTH}")
    segment_data_size = 0
    if length >= HEADER_LENGTH:
        if size < HEADER_OFFSET + HEADER_LENGTH:
            raise InvalidProgramError(f"extended header of length {length} is truncated: the file has {size} bytes")
        segment_data_size = _SEGMENT_DATA_SIZE.unpack_from(data, HEADER_OFFSET + 24)[0]
    header = ExtendedHeader(program_size, base, segment_data_size, length)
    _check_sizes(header, size)
    return header


def _check_sizes(header: ExtendedHeader, file_size: int) -> None:
    if not HEADER_OFFSET + header.length <= header.program_size <= file_size:
        raise InvalidProgramError(
            f"extended header program_size is {header.program_size}; expected a value "
            f"from {HEADER_OFFSET + header.length} (end of the header) to the file "
            f"size {file_size}"
        )
    if header.segment_base_offset == 0:
        return
    if header.segment_base_offset < header.program_size:
        raise InvalidProgramError(
            f"extended header segment_base_offset {header.segment_base_offset} lies "
            f"inside the program (program_size {header.program_size})"
        )
    end = header.segment_base_offset + header.segment_data_size
    if end > file_size:
        raise InvalidProgramError(
            f"extended header says segment data ends at {end} (segment_base_offset "
            f"{header.segment_base_offset} + segment_data_size "
            f"{header.segment_data_size}), but the file has only {file_size} bytes"
        )


def insert_header(flatbuffer: bytes, header: ExtendedHeader, padded_length: int) -> bytes:
    """Inserts `header`, zero-padded to `padded_length`, after the identifier.

    The root offset grows by `padded_length`; every other flatbuffer offset is
    relative and keeps its alignment as long as `padded_length` is a multiple
    of the largest alignment inside the flatbuffer.
    """
    root = struct.unpack_from("<I", flatbuffer)[0] + padded_length
    fields = _FIELDS.pack(MAGIC, HEADER_LENGTH, header.program_size, header.segment_base_offset)
    fields += _SEGMENT_DATA_SIZE.pack(header.segment_data_size)
    return b"".join(
        (
            struct.pack("<I", root),
            flatbuffer[4:HEADER_OFFSET],
            fields.ljust(padded_length, b"\0"),
            flatbuffer[HEADER_OFFSET:],
        )
    )
