"""A Reshape of a Reshape is one Reshape of the first one's input.

Linear layers and attention heads reshape their values in steps (``[s, 576]`` to
``[1, s, 576]`` to ``[1, s, 9, 64]``), and ONNX Runtime pays a kernel call for each node however
small its tensor. A Reshape keeps the elements' row-major order, so two in a row are one Reshape
to the second's shape. A 0 in the second's shape (the size at that position, copied) becomes
what the first had there: its fixed size, 0 again (the first copied its input's size there), or
-1 (inferred: allowed when no other size is). Chains with ``allowzero`` (a literal 0) are left
alone. The first Reshape stays while something else reads it (`GraphBuilder.drop_unread`).
"""

from __future__ import annotations

from onnx import NodeProto

from torchedge.backends.onnxruntime.builder import GraphBuilder

__all__ = ["merge_reshape_chains"]


def _allows_zero(node: NodeProto) -> bool:
    return any(a.name == "allowzero" and a.i for a in node.attribute)


def composed_shape(first: list[int], second: list[int]) -> list[int] | None:
    """The shape of one Reshape equal to Reshape(Reshape(x, ``first``), ``second``) (neither with
    ``allowzero``), or None where that needs two inferred sizes."""
    shape = []
    for position, size in enumerate(second):
        if size != 0:
            shape.append(size)
        elif position < len(first):
            shape.append(first[position])  # a fixed size, 0 (x's size there), or -1 (the inferred one)
        else:
            return None
    return shape if shape.count(-1) <= 1 else None


def merge_reshape_chains(g: GraphBuilder) -> None:
    """Rewrite ``g``'s nodes in place: each Reshape of a Reshape reads the first one's input."""
    made_by: dict[str, NodeProto] = {}
    for node in g.nodes:
        if node.op_type != "Reshape" or _allows_zero(node):
            continue
        first = made_by.get(node.input[0])
        first_shape, second_shape = g.constant_of(first.input[1]) if first else None, g.constant_of(node.input[1])
        if first is not None and first_shape is not None and second_shape is not None:
            shape = composed_shape([int(s) for s in first_shape], [int(s) for s in second_shape])
            if shape is not None:
                node.input[0], node.input[1] = first.input[0], g.int64s(shape)
        made_by[node.output[0]] = node
