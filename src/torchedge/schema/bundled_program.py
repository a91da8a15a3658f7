"""The tables of ExecuTorch's `bundled_program_schema.fbs` (file identifier ``BP08``) as plain dataclasses.

A bundled program (``.bpte``) wraps the bytes of a `.pte` with test cases: for each method,
inputs and the outputs expected from them. One class per table, named as in the schema
(namespace ``bundled_program_flatbuffer``), fields in wire order with the schema's defaults.
`Value.val` holds one member of `ValueUnion`; byte vectors hold `bytes` or `memoryview`.
Bundled `Int`, `Bool` and `Double` are tables of their own, not those of `program.fbs`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torchedge.schema.scalar_type import ScalarType

__all__ = [
    "Tensor",
    "Int",
    "Bool",
    "Double",
    "ValueUnion",
    "Value",
    "BundledMethodTestCase",
    "BundledMethodTestSuite",
    "BundledProgram",
]

ByteData = bytes | memoryview


@dataclass
class Tensor:
    """A bundled tensor: its bytes are laid out in `dim_order` (outermost dimension first)."""

    scalar_type: ScalarType = ScalarType.BYTE
    sizes: list[int] = field(default_factory=list)
    data: ByteData = b""
    dim_order: list[int] = field(default_factory=list)


@dataclass
class Int:
    int_val: int = 0


@dataclass
class Bool:
    bool_val: bool = False


@dataclass
class Double:
    double_val: float = 0.0


# Union members in tag order (tag = position + 1; 0 is NONE).
ValueUnion = (Tensor, Int, Bool, Double)


@dataclass
class Value:
    val: object | None = None  # one of ValueUnion


@dataclass
class BundledMethodTestCase:
    """One run of a method: its inputs and, optionally (empty list: none), the outputs expected."""

    inputs: list[Value] = field(default_factory=list)
    expected_outputs: list[Value] = field(default_factory=list)


@dataclass
class BundledMethodTestSuite:
    method_name: str = ""
    test_cases: list[BundledMethodTestCase] = field(default_factory=list)


@dataclass
class BundledProgram:
    """`program` holds the bytes of the wrapped `.pte`."""

    version: int = 0
    method_test_suites: list[BundledMethodTestSuite] = field(default_factory=list)
    program: ByteData = b""
