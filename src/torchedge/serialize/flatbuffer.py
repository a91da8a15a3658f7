"""A small table-driven FlatBuffers codec for dataclasses.

Each table is described once, declaratively: `Table(cls, [Scalar(...),
String(...), ...])` lists the dataclass attributes in schema order with their
wire kinds. `encode` packs objects with `flatbuffers.Builder` in the order of
flatc's object API (children first in field order, then the table), so
re-encoding a decoded buffer reproduces its bytes. `decode` reads a buffer
back, checking every offset and length against the bytes it has; byte vectors
come back as zero-copy `memoryview` slices.

An absent field reads as its dataclass default, which for scalars is also
the value the writer omits (so dataclass defaults must equal the schema's).
Problems are reported as `InvalidProgramError` naming the field path, e.g.
`Program.execution_plan[0].values[3].val.sizes: ...`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import MISSING
from dataclasses import fields as dataclass_fields
from typing import Any

import flatbuffers
from flatbuffers import number_types

from torchedge.errors import InvalidProgramError

__all__ = ["Scalar", "String", "Bytes", "ScalarVector", "TableRef", "TableVector", "Union", "Table", "encode", "decode"]

# struct format -> builder flags, for the scalar types program.fbs uses.
_FLAGS = {
    "?": number_types.BoolFlags,
    "b": number_types.Int8Flags,
    "B": number_types.Uint8Flags,
    "i": number_types.Int32Flags,
    "I": number_types.Uint32Flags,
    "q": number_types.Int64Flags,
    "Q": number_types.Uint64Flags,
    "d": number_types.Float64Flags,
}
_ABSENT = object()  # what a field's `read` returns when the table lacks it
_SHARING_ALLOWANCE = 8
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")


class _FieldError(Exception):
    """A problem at some field; outer tables prepend their part of the path."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message
        self.path: list[str] = []


# ----------------------------------------------------------------------------
# Reading


class _Reader:
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
            raise _FieldError(
                f"{what} at offset {pos} needs {nbytes} bytes, but the flatbuffer is {self.size} bytes long"
            )

    def charge(self, nbytes: int) -> None:
        self.budget -= nbytes
        if self.budget < 0:
            raise _FieldError(
                f"decoding reads more than {_SHARING_ALLOWANCE}x the buffer's size: "
                "objects are shared or overlap far more than a well-formed buffer allows"
            )

    def deref(self, pos: int, what: str) -> int:
        """Follows the unsigned offset stored at `pos`."""
        self.need(pos, 4, f"offset to {what}")
        target = pos + _U32.unpack_from(self.buf, pos)[0]
        if target >= self.size:
            raise _FieldError(f"offset at {pos} points to {target}, past the end of the {self.size}-byte flatbuffer")
        return target

    def vector(self, pos: int, elem_size: int, what: str) -> tuple[int, int]:
        """(start of elements, element count) of the vector at `pos`."""
        self.need(pos, 4, f"length of {what}")
        count = _U32.unpack_from(self.buf, pos)[0]
        remaining = self.size - pos - 4
        if count * elem_size > remaining:
            raise _FieldError(
                f"{what} at offset {pos} claims {count} elements of {elem_size} "
                f"bytes, but only {remaining} bytes follow"
            )
        self.charge(4 + count * elem_size)
        return pos + 4, count

    def table(self, pos: int, table: Table):
        self.need(pos, 4, f"{table.name} table")
        vtable = pos - _I32.unpack_from(self.buf, pos)[0]
        self.need(vtable, 4, f"vtable of {table.name}")
        vtable_size = _U16.unpack_from(self.buf, vtable)[0]
        if vtable_size < 4 or vtable_size % 2:
            raise _FieldError(
                f"vtable of {table.name} at offset {vtable} has size {vtable_size}; expected an even number >= 4"
            )
        self.need(vtable, vtable_size, f"vtable of {table.name}")
        self.charge(4)
        view = _TableView(self, pos, vtable, vtable_size)
        values = {}
        for f in table.fields:
            try:
                value = f.read(view)
            except _FieldError as error:
                error.path.append(f.name)
                raise
            values[f.name] = f.default_factory() if value is _ABSENT else value
        return table.cls(**values)


class _TableView:
    """One table being read: finds the position of each field's data."""

    __slots__ = ("reader", "pos", "vtable", "vtable_size")

    def __init__(self, reader: _Reader, pos: int, vtable: int, vtable_size: int):
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


# ----------------------------------------------------------------------------
# Field kinds. Each one reads itself from a `_TableView` and writes itself in
# two steps: `prepare` creates out-of-line children before the table starts,
# `add` stores the inline part while the table is open.


def _constant(value) -> Callable[[], Any]:
    return lambda: value


def _no_default():
    raise TypeError("field default read before Table assigned it")


class _Field:
    slots = 1

    def __init__(self, name: str):
        self.name = name
        # Assigned by Table from the dataclass:
        self.slot = -1
        self.default_factory: Callable[[], Any] = _no_default
        self.default: Any = None

    def prepare(self, builder: flatbuffers.Builder, value):
        return None

    def add(self, builder: flatbuffers.Builder, value, child) -> None:
        raise NotImplementedError

    def read(self, view: _TableView):
        raise NotImplementedError


class _Reference(_Field):
    """A field stored as an offset to an out-of-line object (None = absent)."""

    def add(self, builder, value, child) -> None:
        if value is not None:
            builder.PrependUOffsetTRelativeSlot(self.slot, child, 0)

    def read(self, view: _TableView):
        pos = view.ref_pos(self.slot, self.name)
        return self.read_at(view.reader, pos) if pos else _ABSENT

    def read_at(self, reader, pos: int):
        raise NotImplementedError


class Scalar(_Field):
    """An inline scalar; `fmt` is its struct format, `enum` an optional IntEnum."""

    def __init__(self, name: str, fmt: str, enum=None):
        super().__init__(name)
        self.struct = struct.Struct("<" + fmt)
        self.flags = _FLAGS[fmt]
        self.enum = enum

    def add(self, builder, value, child) -> None:
        builder.PrependSlot(self.flags, self.slot, value, self.default)

    def read(self, view: _TableView):
        pos = view.field_pos(self.slot)
        if not pos:
            return _ABSENT
        view.reader.need(pos, self.struct.size, self.name)
        value = self.struct.unpack_from(view.reader.buf, pos)[0]
        if self.enum is None:
            return value
        try:
            return self.enum(value)
        except ValueError:
            raise _FieldError(f"{value} is not a valid {self.enum.__name__}") from None


class String(_Reference):
    def prepare(self, builder, value):
        return None if value is None else builder.CreateString(value)

    def read_at(self, reader: _Reader, pos: int) -> str:
        start, count = reader.vector(pos, 1, "string")
        try:
            return str(reader.buf[start : start + count], "utf-8")
        except UnicodeDecodeError as error:
            raise _FieldError(f"string at offset {pos} is not UTF-8: {error}") from None


def _write_vector(builder, payload, elem_size: int, count: int, alignment: int) -> int:
    """Writes a vector whose element bytes are already packed in `payload`.

    Same bytes as prepending the elements one by one (StartVector has aligned
    the end), copied in one go like `Builder.CreateNumpyVector` does; the
    builder has no public bulk write that takes an alignment.
    """
    builder.StartVector(elem_size, count, alignment)
    builder.head -= len(payload)
    builder.Bytes[builder.head : builder.head + len(payload)] = payload
    return builder.EndVector()


class Bytes(_Reference):
    """A `[ubyte]` vector read back as a zero-copy memoryview."""

    def __init__(self, name: str, alignment: int = 1):
        super().__init__(name)
        self.alignment = alignment

    def prepare(self, builder, value):
        if value is None:
            return None
        data = memoryview(value).cast("B")
        return _write_vector(builder, data, 1, len(data), self.alignment)

    def read_at(self, reader: _Reader, pos: int) -> memoryview:
        start, count = reader.vector(pos, 1, "byte vector")
        return reader.buf[start : start + count]


class ScalarVector(_Reference):
    """A vector of scalars read back as a list."""

    def __init__(self, name: str, fmt: str):
        super().__init__(name)
        self.fmt = fmt
        self.elem_size = struct.calcsize(fmt)

    def prepare(self, builder, value):
        if value is None:
            return None
        payload = struct.pack(f"<{len(value)}{self.fmt}", *value)
        return _write_vector(builder, payload, self.elem_size, len(value), self.elem_size)

    def read_at(self, reader: _Reader, pos: int) -> list:
        start, count = reader.vector(pos, self.elem_size, "vector")
        return list(struct.unpack_from(f"<{count}{self.fmt}", reader.buf, start))


class TableRef(_Reference):
    def __init__(self, name: str, table: Table):
        super().__init__(name)
        self.table = table

    def prepare(self, builder, value):
        return None if value is None else _pack(builder, value, self.table)

    def read_at(self, reader: _Reader, pos: int):
        return reader.table(pos, self.table)


class TableVector(_Reference):
    def __init__(self, name: str, table: Table):
        super().__init__(name)
        self.table = table

    def prepare(self, builder, value):
        if value is None:
            return None
        offsets = []
        for index, item in enumerate(value):
            try:
                offsets.append(_pack(builder, item, self.table))
            except _FieldError as error:
                error.path.append(f"[{index}]")
                raise
        builder.StartVector(4, len(offsets), 4)
        for offset in reversed(offsets):
            builder.PrependUOffsetTRelative(offset)
        return builder.EndVector()

    def read_at(self, reader: _Reader, pos: int) -> list:
        start, count = reader.vector(pos, 4, f"vector of {self.table.name}")
        items = []
        for index in range(count):
            try:
                element = reader.deref(start + 4 * index, self.table.name)
                items.append(reader.table(element, self.table))
            except _FieldError as error:
                error.path.append(f"[{index}]")
                raise
        return items


class Union(_Field):
    """A union: a u8 type tag slot, then an offset slot; tag = member index + 1."""

    slots = 2

    def __init__(self, name: str, members: list[Table]):
        super().__init__(name)
        self.members = members
        self.tags = {member.cls: tag for tag, member in enumerate(members, start=1)}

    def prepare(self, builder, value):
        if value is None:
            return None
        tag = self.tags.get(type(value))
        if tag is None:
            names = ", ".join(m.name for m in self.members)
            raise _FieldError(f"{type(value).__name__} is not one of {names}")
        return _pack(builder, value, self.members[tag - 1])

    def add(self, builder, value, child) -> None:
        if value is not None:
            builder.PrependUint8Slot(self.slot, self.tags[type(value)], 0)
            builder.PrependUOffsetTRelativeSlot(self.slot + 1, child, 0)

    def read(self, view: _TableView):
        tag_pos = view.field_pos(self.slot)
        tag = 0
        if tag_pos:
            view.reader.need(tag_pos, 1, f"{self.name}_type")
            tag = view.reader.buf[tag_pos]
        if tag == 0:
            return _ABSENT
        if tag > len(self.members):
            raise _FieldError(f"union tag {tag} at offset {tag_pos} is not one of 0..{len(self.members)}")
        member = self.members[tag - 1]
        pos = view.ref_pos(self.slot + 1, member.name)
        if not pos:
            raise _FieldError(f"union tag says {member.name} but the value is missing")
        return view.reader.table(pos, member)


class Table:
    """The wire description of one dataclass: its fields in schema order."""

    def __init__(self, cls: type, fields: list[_Field]):
        attributes = dataclass_fields(cls)
        names = [f.name for f in fields]
        expected = [a.name for a in attributes]
        if names != expected:
            raise TypeError(f"{cls.__name__} table lists {names}, dataclass has {expected}")
        self.cls = cls
        self.name = cls.__name__
        self.fields = fields
        slot = 0
        for f, attribute in zip(fields, attributes):
            f.slot = slot
            slot += f.slots
            if attribute.default_factory is not MISSING:
                f.default_factory = attribute.default_factory
            elif attribute.default is not MISSING:
                f.default_factory = _constant(attribute.default)
            else:
                raise TypeError(f"{self.name}.{f.name} needs a default (the schema's)")
            f.default = f.default_factory()
        self.num_slots = slot


# ----------------------------------------------------------------------------
# Writing

_ENCODE_ERRORS = (TypeError, ValueError, OverflowError, struct.error)


def _pack(builder: flatbuffers.Builder, obj, table: Table) -> int:
    if type(obj) is not table.cls:
        raise _FieldError(f"expected a {table.name}, found {type(obj).__name__}")
    values = [getattr(obj, f.name) for f in table.fields]
    children = [_step(f, f.prepare, builder, v) for f, v in zip(table.fields, values)]
    builder.StartObject(table.num_slots)
    for f, value, child in zip(table.fields, values, children):
        _step(f, f.add, builder, value, child)
    return builder.EndObject()


def _step(f: _Field, method, builder, value, *rest):
    """Runs one encoding step of field `f`, naming the field in any error."""
    try:
        return method(builder, value, *rest)
    except _FieldError as error:
        error.path.append(f.name)
        raise
    except _ENCODE_ERRORS as error:
        wrapped = _FieldError(f"cannot encode {value!r:.80}: {error}")
        wrapped.path.append(f.name)
        raise wrapped from error


def _located(error: _FieldError, root: Table) -> InvalidProgramError:
    path = root.name + "".join(part if part.startswith("[") else "." + part for part in reversed(error.path))
    return InvalidProgramError(f"{path}: {error.message}")


def encode(obj, table: Table, file_identifier: bytes) -> bytes:
    """Packs `obj` (a `table.cls` instance) as a finished flatbuffer."""
    builder = flatbuffers.Builder(1024)
    try:
        root = _pack(builder, obj, table)
    except _FieldError as error:
        raise _located(error, table) from error
    builder.Finish(root, file_identifier=file_identifier)
    return bytes(builder.Output())


def decode(buf: memoryview, table: Table):
    """Decodes the root table of the flatbuffer in `buf` (a 1-D byte memoryview)."""
    reader = _Reader(buf)
    try:
        root = reader.deref(0, "root table")
        return reader.table(root, table)
    except _FieldError as error:
        raise _located(error, table) from None
