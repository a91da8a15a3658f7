"""A small table-driven FlatBuffers codec for dataclasses: `encode` and `decode`.

Tables are described with the field kinds of `torchedge.serialize.flatbuffer_fields`
(`Table(cls, [Scalar(...), String(...), ...])`). `encode` packs objects with
`flatbuffers.Builder` in the order of flatc's object API (children first in
field order, then the table), so re-encoding a decoded buffer reproduces its
bytes. `decode` reads a buffer back, checking every offset and length against
the bytes it has (`torchedge.serialize.flatbuffer_reader`); byte vectors come
back as zero-copy `memoryview` slices.

Problems are reported as `InvalidProgramError` naming the field path, e.g.
`Program.execution_plan[0].values[3].val.sizes: ...`.
"""

from __future__ import annotations

import flatbuffers

from torchedge.errors import InvalidProgramError
from torchedge.serialize.flatbuffer_fields import Table, pack_table, read_table
from torchedge.serialize.flatbuffer_reader import FieldError, Reader

__all__ = ["encode", "decode"]


def _located(error: FieldError, root: Table) -> InvalidProgramError:
    path = root.name + "".join(part if part.startswith("[") else "." + part for part in reversed(error.path))
    return InvalidProgramError(f"{path}: {error.message}")


def encode(obj, table: Table, file_identifier: bytes) -> bytes:
    """Packs `obj` (a `table.cls` instance) as a finished flatbuffer."""
    builder = flatbuffers.Builder(1024)
    try:
        root = pack_table(builder, obj, table)
    except FieldError as error:
        raise _located(error, table) from error
    builder.Finish(root, file_identifier=file_identifier)
    return bytes(builder.Output())


def decode(buf: memoryview, table: Table):
    """Decodes the root table of the flatbuffer in `buf` (a 1-D byte memoryview)."""
    reader = Reader(buf)
    try:
        root = reader.deref(0, "root table")
        return read_table(reader, root, table)
    except FieldError as error:
        raise _located(error, table) from None
