"""The EValue kinds each operator's arguments accept, from its schema, without torch.

`tools/generate_kernel_schemas.py` writes the table (``argument_kinds.json``, next to this
module) from torch's operator schemas at development time: one entry per schema argument,
in schema order (the kernel's argument order), naming the kinds the emitters write for
that argument's type (``Tensor?`` -> Tensor or Null, ``float`` -> Double or Int...).

>>> [(arg.name, arg.kinds) for arg in argument_kinds("aten::add.out")]  # doctest: +NORMALIZE_WHITESPACE
[('self', 'Tensor'), ('other', 'Tensor'), ('alpha', 'Int, Double or Bool'), ('out', 'Tensor')]
"""

from __future__ import annotations

import functools
import json
import pathlib
from typing import NamedTuple

from torchedge.schema import program

__all__ = ["TABLE_PATH", "Argument", "argument_kinds", "unchecked_operators", "written_arguments"]

TABLE_PATH = pathlib.Path(__file__).with_name("argument_kinds.json")

# Kind name -> the classes a value table holds for it (a Null is a `Null` or an absent value, None).
_CLASSES: dict[str, tuple[type, ...]] = {
    "Null": (program.Null, type(None)),
    **{
        name: (getattr(program, name),)
        for name in (
            "Tensor",
            "Int",
            "Double",
            "Bool",
            "String",
            "IntList",
            "DoubleList",
            "BoolList",
            "TensorList",
            "OptionalTensorList",
        )
    },
}


class Argument(NamedTuple):
    """One schema argument: its name, the classes a value of it may be, and their names for messages
    (``accepts`` is None when any kind is accepted)."""

    name: str
    accepts: tuple[type, ...] | None
    kinds: str


@functools.cache
def _table() -> dict:
    return json.loads(TABLE_PATH.read_text(encoding="utf-8"))


def _argument(entry: str) -> Argument:
    name, _, kinds = entry.rpartition(":")
    if kinds == "*":
        return Argument(name, None, "any kind")
    names = kinds.split("|")
    accepts = tuple(cls for kind in names for cls in _CLASSES[kind])
    text = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
    return Argument(name, accepts, text)


@functools.cache
def argument_kinds(name: str) -> tuple[Argument, ...] | None:
    """The arguments of operator ``name`` (``"aten::add.out"``) in schema order, or None when the
    table has no schema for it (an operator registered by a user, or one listed as unchecked)."""
    entries = _table()["operators"].get(name)
    return None if entries is None else tuple(_argument(entry) for entry in entries)


def unchecked_operators() -> list[str]:
    """The registered operators the table has no schema for (their arguments' kinds go unchecked)."""
    return list(_table()["unchecked"])


def written_arguments(name: str) -> tuple[int, ...] | None:
    """The positions of the arguments other than its outs that operator ``name`` writes, as its
    schema marks them (``rrelu_with_noise``'s ``noise``); None when the table has no schema for it
    (it may write any argument)."""
    if name not in _table()["operators"]:
        return None
    return tuple(_table()["written"].get(name, ()))
