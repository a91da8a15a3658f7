"""The dataclasses match program.fbs from the executorch wheel, table by table."""

import re
from dataclasses import MISSING, fields
from pathlib import Path

import pytest

from torchedge.schema import program as schema
from torchedge.schema.scalar_type import ScalarType

SCALARS = {"bool", "byte", "ubyte", "int", "uint", "long", "int64", "uint32", "uint64", "double"}


@pytest.fixture(scope="module")
def fbs() -> str:
    import executorch

    path = Path(executorch.__path__[0]) / "schema" / "program.fbs"
    without_comments = re.sub(r"//[^\n]*", "", path.read_text())
    return re.sub(r"\([^)]*\)", "", without_comments)  # attributes like (force_align: 16)


def _blocks(text: str, kind: str) -> dict[str, str]:
    return dict(re.findall(rf"\b{kind}\s+(\w+)\s*(?::\s*\w+\s*)?\{{([^}}]*)\}}", text))


def _default(f):
    return f.default_factory() if f.default_factory is not MISSING else f.default


def test_tables_fields_and_scalar_defaults(fbs):
    enums = {name: getattr(schema, name) for name in _blocks(fbs, "enum")}
    enums["ScalarType"] = ScalarType
    tables = _blocks(fbs, "table")
    assert len(tables) == 36
    for name, body in tables.items():
        declared = re.findall(r"(\w+)\s*:\s*([\w\[\]]+)\s*(?:=\s*(\w+))?", body)
        ours = fields(getattr(schema, name))
        assert [f.name for f in ours] == [field for field, _, _ in declared], name
        for f, (_, wire_type, default) in zip(ours, declared):
            if wire_type in enums:
                expected = enums[wire_type][default] if default else enums[wire_type](0)
            elif wire_type in SCALARS:
                expected = int(default or 0)
            else:
                continue
            assert _default(f) == expected, f"{name}.{f.name}"


def test_enums_and_unions(fbs):
    for name, body in _blocks(fbs, "enum").items():
        declared = dict(re.findall(r"(\w+)\s*=\s*(\d+)", body))
        assert {m.name: str(m.value) for m in getattr(schema, name)} == declared, name
    unions = _blocks(fbs, "union")
    assert re.findall(r"\w+", unions["KernelTypes"]) == [c.__name__ for c in schema.KernelTypes]
    assert re.findall(r"\w+", unions["InstructionArguments"]) == [c.__name__ for c in schema.InstructionArguments]
