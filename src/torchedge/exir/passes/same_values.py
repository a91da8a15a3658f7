"""What a node computes, as a key that two nodes share only when they compute the same value.

The key is the operator and the text of its arguments; it exists only where that text tells
values apart (graph nodes, numbers, strings, dtypes, ...) and the operator is pure: not
random, not a view, not mutating. Passes that compute a value once where several nodes
compute it alike (`torchedge.backends.onnxruntime.common_values`, the write-backs of
`torchedge.exir.passes.mutable_state`) compare these keys.
"""

from __future__ import annotations

import torch

__all__ = ["value_key"]

# Argument types whose text form tells their values apart.
_EXACT_TEXT = (
    torch.fx.Node,
    int,
    float,
    bool,
    str,
    type(None),
    torch.dtype,
    torch.device,
    torch.layout,
    torch.memory_format,
)


def value_key(node: torch.fx.Node) -> tuple | None:
    """(operator, arguments' text, keyword arguments' text) of a pure call, or None if the node
    must stay apart (another kind of node, a random, view or mutating operator, or an argument
    whose text elides its value, such as a tensor)."""
    if node.op != "call_function":
        return None
    tags = getattr(node.target, "tags", ())
    if torch.Tag.nondeterministic_seeded in tags or torch.Tag.inplace_view in tags:
        return None
    schema = getattr(node.target, "_schema", None)
    if schema is not None and schema.is_mutable:
        return None
    literals: list = []
    torch.fx.node.map_aggregate((node.args, node.kwargs), literals.append)
    if not all(isinstance(a, _EXACT_TEXT) for a in literals):
        return None
    return node.target, repr(node.args), repr(node.kwargs)
