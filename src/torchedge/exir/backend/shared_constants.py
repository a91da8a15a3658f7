"""Constants that delegates and portable nodes both read.

A delegate stores the constants it reads in the program's named data (once per program, shared by
every delegate), a portable node reads its constants from the program's constant segment. Where a
delegate's blob holds a constant's bytes as they are, the file stores them once (the named data's
segment lies over the constant's: `torchedge.serialize.pte_writer`); a partitioner whose payloads
may transform them keeps the delegated readers of such a constant portable
(`delegated_readers_of_portable_constants`) and partitions again.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind

from torchedge.exir.backend.partitioner import TAG_KEY
from torchedge.exir.ir import constant_value
from torchedge.exir.passes.mutable_state import mutable_buffers

__all__ = ["large_constants", "delegated_readers_of_portable_constants"]

_CONSTANT_KINDS = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)


def large_constants(ep: ExportedProgram, min_bytes: int) -> list[torch.fx.Node]:
    """The placeholders of the parameters, buffers (not mutable state) and lifted constants of at
    least ``min_bytes``."""
    state = mutable_buffers(ep.graph_signature)
    placeholders = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    return [
        placeholders[spec.arg.name]
        for spec in ep.graph_signature.input_specs
        if spec.kind in _CONSTANT_KINDS
        and spec.arg.name not in state
        and isinstance(value := constant_value(ep, spec.target), torch.Tensor)
        and value.nbytes >= min_bytes
    ]


def delegated_readers_of_portable_constants(
    constants: list[torch.fx.Node], must_delegate: Callable[[torch.fx.Node], bool] = lambda node: False
) -> set[torch.fx.Node]:
    """The tagged readers of each constant that an untagged (portable) node reads too, but for
    those ``must_delegate`` names (no portable kernel: they keep their own copy of the weight)."""
    readers: set[torch.fx.Node] = set()
    for constant in constants:
        tags = {user.meta.get(TAG_KEY) for user in constant.users}
        if None in tags and len(tags) > 1:
            readers.update(
                user for user in constant.users if user.meta.get(TAG_KEY) is not None and not must_delegate(user)
            )
    return readers
