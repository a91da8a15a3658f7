"""The masking around a safe softmax in fewer ONNX nodes.

PyTorch's safe softmax (scaled dot-product attention with a mask) gives 0 for a row whose scores
are all -inf, and reaches the Edge dialect as ``where(logical_not(any(logical_not(eq(s, -inf)),
-1, True)), full_like(p, 0), p)``: ten ONNX nodes with the Softmax. Two rewrites, each exact:

- ``logical_not(any(logical_not(y)))`` is ``all(y)``: the minimum of ``y`` taken as int32 (Cast,
  ReduceMin, Cast instead of Not, Cast, ReduceMax, Cast, Not). An empty reduction is all-true
  either way.
- A ``where`` branch that is ``full_like(t, c)`` with the ``where``'s own sizes and dtype is the
  scalar ``c``: ``Where`` broadcasts it to the sizes its other operands give, which are the
  output's when the other branch has them (no Shape and Expand).
"""

from __future__ import annotations

import torch

from torchedge.backends.onnxruntime.builder import GraphBuilder
from torchedge.backends.onnxruntime.ops_reduce import reduce, reduced_axes
from torchedge.backends.onnxruntime.registry import NodeArgs

__all__ = ["all_of", "scalar_branch"]

aten = torch.ops.aten
_ANY = (aten.any.dim, aten.any.dims, aten.any.default)


def _single(node, targets) -> bool:
    return isinstance(node, torch.fx.Node) and node.target in targets and len(node.users) == 1


def _sizes(node: torch.fx.Node) -> list[str]:
    return [str(s) for s in node.meta["val"].shape]


def all_of(g: GraphBuilder, node: torch.fx.Node) -> str | None:
    """``all(y)`` for ``logical_not(any(logical_not(y)))`` over a bool ``y``; None otherwise."""
    if node.target is not aten.logical_not.default or not _single(node.args[0], _ANY):
        return None
    found = NodeArgs(node.args[0])
    inner = found["self"]
    if not _single(inner, (aten.logical_not.default,)):
        return None
    y = inner.args[0]
    if not (isinstance(y, torch.fx.Node) and g.has_value(y) and y.meta["val"].dtype == torch.bool):
        return None
    if node.meta["val"].dtype != torch.bool:
        return None
    truth = g.cast(g.tensor(y), torch.int32)
    keepdim = bool(found.args.get("keepdim", False))
    return g.cast(reduce(g, "ReduceMin", truth, reduced_axes(found), keepdim), torch.bool)


def _fill(branch, where: torch.fx.Node) -> float | int | bool | None:
    """The fill value of ``branch`` where it is ``full_like`` with the ``where``'s sizes and dtype."""
    if not (isinstance(branch, torch.fx.Node) and branch.target is aten.full_like.default):
        return None
    fill = NodeArgs(branch)["fill_value"]
    same = _sizes(branch) == _sizes(where) and branch.meta["val"].dtype == where.meta["val"].dtype
    return fill if same and isinstance(fill, (bool, int, float)) else None


def scalar_branch(g: GraphBuilder, node: torch.fx.Node) -> str | None:
    """``Where`` with a ``full_like`` branch as its scalar fill value; None where that does not apply."""
    if node.target is not aten.where.self:
        return None
    a = NodeArgs(node)
    dtype = a.out_dtype
    for filled, other in (("self", "other"), ("other", "self")):
        fill = _fill(a[filled], node)
        kept = a[other]
        if fill is None or not isinstance(kept, torch.fx.Node) or _sizes(kept) != _sizes(node):
            continue
        branches = {filled: g.scalar(fill, dtype), other: g.tensor(kept, dtype)}
        return g.emit("Where", [g.tensor(a["condition"], torch.bool), branches["self"], branches["other"]])
    return None
