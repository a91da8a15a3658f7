"""Bounds-checked reading of a flatbuffer's raw parts: offsets, vectors and vtables.

`Reader` holds the buffer as a memoryview and checks every offset and length
against the bytes it has, charging each read to a work allowance so that a
buffer sharing one object over and over cannot make decoding hang.
`TableView` finds where each field of one table lies. Neither knows any table's
fields: `torchedge.serialize.flatbuffer_fields` reads those. Problems are
raised as `FieldError`, which the field kinds extend with the path to the field.
"""

from __future__ import annotations

import struct

__all__ = ["ABSENT", "FieldError", "Reader", "TableView"]

ABSENT = object()  # what a field's `read` returns when the table lacks it
_SHARING_ALLOWANCE = 8
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")


class FieldError(Exception):
    """A problem at some field; outer tables prepend their part of the path."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message
        self.path: list[str] = []


class Reader:
    """Bounds-checked access to a flatbuffer held in a memoryview."""

    def __init__(self, buf: memoryview):
        self.buf = buf
        self.size = len(buf)
        # Work allowance in bytes read: a buffer without shared objects reads
        # each byte of its tables and vectors once. Objects shared over and
        # over (a malicious "decompression bomb") exhaust it instead of hanging.
        self.budget = _SHARING_ALLOWANCE * self.size + 1024

    def need(self, pos: int, nbytes: int, what: str) -> None:
        if pos < 0 or pos + nbytes > self.size:
            raise FieldError(
                f"{what} at offset {pos} needs {nbytes} bytes, but the flatbuffer is {self.size} bytes long"
            )

    def charge(self, nbytes: int) -> None:
        self.budget -= nbytes
        if self.budget < 0:
            raise FieldError(
                f"decoding reads more than {_SHARING_ALLOWANCE}x the buffer's size: "
                "objects are shared or overlap far more than a well-formed buffer allows"
            )

    def deref(self, pos: int, what: str) -> int:
        """Follows the unsigned offset stored at `pos`."""
        self.need(pos, 4, f"offset to {what}")
        target = pos + _U32.unpack_from(self.buf, pos)[0]
        if target >= self.size:
            raise FieldError(f"offset at {pos} points to {target}, past the end of the {self.size}-byte flatbuffer")
        return target

    def vector(self, pos: int, elem_size: int, what: str) -> tuple[int, int]:
        """(start of elements, element count) of the vector at `pos`."""
        self.need(pos, 4, f"length of {what}")
        count = _U32.unpack_from(self.buf, pos)[0]
        remaining = self.size - pos - 4
        if count * elem_size > remaining:
            raise FieldError(
                f"{what} at offset {pos} claims {count} elements of {elem_size} "
                f"bytes, but only {remaining} bytes follow"
            )
        self.charge(4 + count * elem_size)
        return pos + 4, count

    def table_view(self, pos: int, name: str) -> TableView:
        """The table at `pos` (a `name` table), its vtable checked."""
        self.need(pos, 4, f"{name} table")
        vtable = pos - _I32.unpack_from(self.buf, pos)[0]
        self.need(vtable, 4, f"vtable of {name}")
        vtable_size = _U16.unpack_from(self.buf, vtable)[0]
        if vtable_size < 4 or vtable_size % 2:
            raise FieldError(
                f"vtable of {name} at offset {vtable} has size {vtable_size}; expected an even number >= 4"
            )
        self.need(vtable, vtable_size, f"vtable of {name}")
        self.charge(4)
        return TableView(self, pos, vtable, vtable_size)


class TableView:
    """One table being read: finds the position of each field's data."""

    __slots__ = ("reader", "pos", "vtable", "vtable_size")

    def __init__(self, reader: Reader, pos: int, vtable: int, vtable_size: int):
        self.reader = reader
        self.pos = pos
        self.vtable = vtable
        self.vtable_size = vtable_size

    def field_pos(self, slot: int) -> int:
        """Absolute position of the slot's data, or 0 when it is absent."""
        entry = 4 + 2 * slot
        if entry + 2 > self.vtable_size:
            return 0
        offset = _U16.unpack_from(self.reader.buf, self.vtable + entry)[0]
        return self.pos + offset if offset else 0

    def ref_pos(self, slot: int, what: str) -> int:
        """Position of the object a reference slot points to, or 0 if absent."""
        pos = self.field_pos(slot)
        return self.reader.deref(pos, what) if pos else 0
