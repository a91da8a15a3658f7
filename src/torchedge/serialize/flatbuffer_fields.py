"""The field kinds of the table-driven codec, and `Table`, the wire description of a dataclass.

A table is described once, declaratively: `Table(cls, [Scalar(...),
String(...), ...])` lists the dataclass attributes in schema order with their
wire kinds. Each kind reads itself from a `TableView` and writes itself with
`flatbuffers.Builder` in flatc's object-API order: `prepare` creates
out-of-line children before the table starts, `add` stores the inline part
while the table is open. `read_table` and `pack_table` run the fields of one
table, naming the field in any `FieldError` they raise.

An absent field reads as its dataclass default, which for scalars is also
the value the writer omits (so dataclass defaults must equal the schema's).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import MISSING
from dataclasses import fields as dataclass_fields
from typing import Any

import flatbuffers
from flatbuffers import number_types

from torchedge.serialize.flatbuffer_reader import ABSENT, FieldError, Reader, TableView

__all__ = [
    "Scalar",
    "String",
    "Bytes",
    "ScalarVector",
    "TableRef",
    "TableVector",
    "Union",
    "Table",
    "read_table",
    "pack_table",
]

# struct format -> builder flags, for the scalar types program.fbs uses.
_FLAGS = {
    "?": number_types.BoolFlags,
    "b": number_types.Int8Flags,
    "B": number_types.Uint8Flags,
    "h": number_types.Int16Flags,
    "H": number_types.Uint16Flags,
    "i": number_types.Int32Flags,
    "I": number_types.Uint32Flags,
    "q": number_types.Int64Flags,
    "Q": number_types.Uint64Flags,
    "f": number_types.Float32Flags,
    "d": number_types.Float64Flags,
}


# ----------------------------------------------------------------------------
# Field kinds


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

    def read(self, view: TableView):
        raise NotImplementedError


class _Reference(_Field):
    """A field stored as an offset to an out-of-line object (None = absent)."""

    def add(self, builder, value, child) -> None:
        if value is not None:
            builder.PrependUOffsetTRelativeSlot(self.slot, child, 0)

    def read(self, view: TableView):
        pos = view.ref_pos(self.slot, self.name)
        return self.read_at(view.reader, pos) if pos else ABSENT

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

    def read(self, view: TableView):
        pos = view.field_pos(self.slot)
        if not pos:
            return ABSENT
        view.reader.need(pos, self.struct.size, self.name)
        value = self.struct.unpack_from(view.reader.buf, pos)[0]
        if self.enum is None:
            return value
        try:
            return self.enum(value)
        except ValueError:
            raise FieldError(f"{value} is not a valid {self.enum.__name__}") from None


class String(_Reference):
    def prepare(self, builder, value):
        return None if value is None else builder.CreateString(value)

    def read_at(self, reader: Reader, pos: int) -> str:
        start, count = reader.vector(pos, 1, "string")
        try:
            return str(reader.buf[start : start + count], "utf-8")
        except UnicodeDecodeError as error:
            raise FieldError(f"string at offset {pos} is not UTF-8: {error}") from None


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

    def read_at(self, reader: Reader, pos: int) -> memoryview:
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

    def read_at(self, reader: Reader, pos: int) -> list:
        start, count = reader.vector(pos, self.elem_size, "vector")
        return list(struct.unpack_from(f"<{count}{self.fmt}", reader.buf, start))


class TableRef(_Reference):
    def __init__(self, name: str, table: Table):
        super().__init__(name)
        self.table = table

    def prepare(self, builder, value):
        return None if value is None else pack_table(builder, value, self.table)

    def read_at(self, reader: Reader, pos: int):
        return read_table(reader, pos, self.table)


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
                offsets.append(pack_table(builder, item, self.table))
            except FieldError as error:
                error.path.append(f"[{index}]")
                raise
        builder.StartVector(4, len(offsets), 4)
        for offset in reversed(offsets):
            builder.PrependUOffsetTRelative(offset)
        return builder.EndVector()

    def read_at(self, reader: Reader, pos: int) -> list:
        start, count = reader.vector(pos, 4, f"vector of {self.table.name}")
        items = []
        for index in range(count):
            try:
                element = reader.deref(start + 4 * index, self.table.name)
                items.append(read_table(reader, element, self.table))
            except FieldError as error:
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
            raise FieldError(f"{type(value).__name__} is not one of {names}")
        return pack_table(builder, value, self.members[tag - 1])

    def add(self, builder, value, child) -> None:
        if value is not None:
            builder.PrependUint8Slot(self.slot, self.tags[type(value)], 0)
            builder.PrependUOffsetTRelativeSlot(self.slot + 1, child, 0)

    def read(self, view: TableView):
        tag_pos = view.field_pos(self.slot)
        tag = 0
        if tag_pos:
            view.reader.need(tag_pos, 1, f"{self.name}_type")
            tag = view.reader.buf[tag_pos]
        if tag == 0:
            return ABSENT
        if tag > len(self.members):
            raise FieldError(f"union tag {tag} at offset {tag_pos} is not one of 0..{len(self.members)}")
        member = self.members[tag - 1]
        pos = view.ref_pos(self.slot + 1, member.name)
        if not pos:
            raise FieldError(f"union tag says {member.name} but the value is missing")
        return read_table(view.reader, pos, member)


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
# Running the fields of one table


def read_table(reader: Reader, pos: int, table: Table):
    """Reads the `table.cls` instance at `pos`, absent fields as their defaults."""
    view = reader.table_view(pos, table.name)
    values = {}
    for f in table.fields:
        try:
            value = f.read(view)
        except FieldError as error:
            error.path.append(f.name)
            raise
        values[f.name] = f.default_factory() if value is ABSENT else value
    return table.cls(**values)


_ENCODE_ERRORS = (TypeError, ValueError, OverflowError, struct.error)


def pack_table(builder: flatbuffers.Builder, obj, table: Table) -> int:
    """Writes `obj` (a `table.cls` instance), its children first; returns the table's offset."""
    if type(obj) is not table.cls:
        raise FieldError(f"expected a {table.name}, found {type(obj).__name__}")
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
    except FieldError as error:
        error.path.append(f.name)
        raise
    except _ENCODE_ERRORS as error:
        wrapped = FieldError(f"cannot encode {value!r:.80}: {error}")
        wrapped.path.append(f.name)
        raise wrapped from error
