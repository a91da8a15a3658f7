"""Bundled programs (``.bpte``, ExecuTorch's `bundled_program_schema.fbs`) <-> bytes.

`serialize_bundled_program` writes a `torchedge.schema.bundled_program.BundledProgram` as a
flatbuffer with file identifier ``BP08``; `deserialize_bundled_program` reads one back with
the bounds-checked codec, the wrapped `.pte` and tensor data as zero-copy `memoryview`
slices of the input. Problems raise `InvalidProgramError` naming the field path, e.g.
``BundledProgram.method_test_suites[0].test_cases[1].inputs[0].val.sizes: ...``.
"""

from __future__ import annotations

from torchedge.errors import InvalidProgramError
from torchedge.schema import bundled_program as s
from torchedge.schema.scalar_type import ScalarType
from torchedge.serialize import flatbuffer
from torchedge.serialize.flatbuffer_fields import Bytes, Scalar, ScalarVector, String, Table, TableVector, Union
from torchedge.serialize.program_tables import FILE_IDENTIFIER as PTE_IDENTIFIER

__all__ = [
    "FILE_IDENTIFIER",
    "SCHEMA_VERSION",
    "TENSOR_DATA_ALIGNMENT",
    "PROGRAM_ALIGNMENT",
    "BUNDLED_PROGRAM",
    "is_bundled_program",
    "serialize_bundled_program",
    "deserialize_bundled_program",
]

FILE_IDENTIFIER = b"BP08"
# The version ExecuTorch 1.5.1 writes (devtools/bundled_program/version.py).
SCHEMA_VERSION = 2
# The force_align of Tensor.data and of BundledProgram.program.
TENSOR_DATA_ALIGNMENT = 16
PROGRAM_ALIGNMENT = 32

_IDENTIFIER_OFFSET = 4
_MIN_SIZE = 8  # root offset + identifier

_TENSOR = Table(
    s.Tensor,
    [
        Scalar("scalar_type", "b", enum=ScalarType),
        ScalarVector("sizes", "i"),
        Bytes("data", TENSOR_DATA_ALIGNMENT),
        ScalarVector("dim_order", "B"),
    ],
)
# Members in union tag order (ValueUnion in the schema).
_VALUE_UNION = [
    _TENSOR,
    Table(s.Int, [Scalar("int_val", "q")]),
    Table(s.Bool, [Scalar("bool_val", "?")]),
    Table(s.Double, [Scalar("double_val", "d")]),
]
_VALUE = Table(s.Value, [Union("val", _VALUE_UNION)])
_TEST_CASE = Table(s.BundledMethodTestCase, [TableVector("inputs", _VALUE), TableVector("expected_outputs", _VALUE)])
_TEST_SUITE = Table(s.BundledMethodTestSuite, [String("method_name"), TableVector("test_cases", _TEST_CASE)])
BUNDLED_PROGRAM = Table(
    s.BundledProgram,
    [Scalar("version", "I"), TableVector("method_test_suites", _TEST_SUITE), Bytes("program", PROGRAM_ALIGNMENT)],
)


def is_bundled_program(data) -> bool:
    """True if `data` carries the bundled program file identifier ``BP08``."""
    view = memoryview(data).cast("B")
    return len(view) >= _MIN_SIZE and bytes(view[_IDENTIFIER_OFFSET:_MIN_SIZE]) == FILE_IDENTIFIER


def serialize_bundled_program(bundled: s.BundledProgram) -> bytes:
    """The ``.bpte`` bytes of `bundled` (its `program` must hold the bytes of a `.pte`)."""
    return flatbuffer.encode(bundled, BUNDLED_PROGRAM, FILE_IDENTIFIER)


def deserialize_bundled_program(data) -> s.BundledProgram:
    """Decodes a ``.bpte`` held in `bytes`, `bytearray`, `memoryview` or `mmap`, checking every offset.

    Byte vectors (the wrapped program, tensor data) are zero-copy slices of `data`; the
    wrapped program itself is not decoded here (load it with the runtime).
    """
    view = memoryview(data).cast("B")
    if len(view) < _MIN_SIZE:
        raise InvalidProgramError(
            f"not a bundled program: {len(view)} bytes, expected at least {_MIN_SIZE} (root offset and file identifier)"
        )
    identifier = bytes(view[_IDENTIFIER_OFFSET:_MIN_SIZE])
    if identifier == PTE_IDENTIFIER:
        raise InvalidProgramError(
            f"not a bundled program: found the .pte identifier {identifier!r}, expected {FILE_IDENTIFIER!r}; "
            "load a .pte with Runtime.get().load_program"
        )
    if identifier != FILE_IDENTIFIER:
        raise InvalidProgramError(
            f"not a bundled program: expected identifier {FILE_IDENTIFIER!r} at offset {_IDENTIFIER_OFFSET}, "
            f"found {identifier!r}"
        )
    return flatbuffer.decode(view, BUNDLED_PROGRAM)
