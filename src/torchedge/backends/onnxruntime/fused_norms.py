"""RMSNorm as ONNX Runtime's ``SimplifiedLayerNormalization``: one kernel in place of seven.

A transformers RMSNorm reaches the Edge dialect as
``w * (x * rsqrt(mean(pow(x, 2), [-1], keepdim=True) + eps))``, which lowers to Pow, ReduceMean,
Add, Sqrt, Reciprocal, Mul and Mul, each a kernel call. ``SimplifiedLayerNormalization`` (ONNX
Runtime registers it in the ONNX domain) computes ``x / sqrt(mean(x * x) + eps) * w`` over the
last axis with ``epsilon`` a float32 attribute: the same values up to the rounding of the
division against the reciprocal. The group is matched from its last ``mul``: float32 throughout,
``w`` a 1-D constant as long as the last dimension, ``eps`` a float32 constant, the reduction
over the last dimension only, and each inner node read by the next one alone (otherwise it is
computed anyway, and nothing is saved).
"""

from __future__ import annotations

import torch

from torchedge.backends.onnxruntime.builder import GraphBuilder
from torchedge.backends.onnxruntime.ops_lowbit import MICROSOFT

__all__ = ["rms_norm"]

aten = torch.ops.aten


def _only_reader(node, target) -> bool:
    return isinstance(node, torch.fx.Node) and node.target is target and len(node.users) == 1


def _is_float32(*nodes: torch.fx.Node) -> bool:
    return all(isinstance(n.meta.get("val"), torch.Tensor) and n.meta["val"].dtype == torch.float32 for n in nodes)


def _other(node: torch.fx.Node, one) -> object:
    """The argument of a binary node that is not ``one`` (``one`` may be either)."""
    lhs, rhs = node.args[:2]
    return rhs if lhs is one else lhs


def _epsilon(g: GraphBuilder, node) -> float | None:
    """The float32 constant ``node`` (a number or a one-element constant of the graph); None otherwise."""
    if isinstance(node, float):
        return node
    if not (isinstance(node, torch.fx.Node) and g.has_value(node) and _is_float32(node)):
        return None
    name = g.value(node)
    array = g.constant_of(name) if isinstance(name, str) else None
    return float(array.reshape(-1)[0]) if array is not None and array.size == 1 else None


def _weight(g: GraphBuilder, node, length: int) -> str | None:
    if not (isinstance(node, torch.fx.Node) and g.has_value(node) and _is_float32(node)):
        return None
    name = g.value(node)
    if not isinstance(name, str):
        return None
    array = g.constant_of(name)
    return name if array is not None and array.shape == (length,) else None


def _normalized(product: torch.fx.Node) -> tuple[torch.fx.Node, torch.fx.Node] | None:
    """(x, the ``add`` of eps) where ``product`` is ``x * rsqrt(mean(pow(x, 2), [-1]) + eps)``."""
    if not _only_reader(product, aten.mul.Tensor) or len(product.args) != 2:
        return None
    for x, root in (product.args, reversed(product.args)):
        if not (_only_reader(root, aten.rsqrt.default) and _only_reader(root.args[0], aten.add.Tensor)):
            continue
        shifted = root.args[0]
        if (
            not isinstance(x, torch.fx.Node)
            or not isinstance(shifted, torch.fx.Node)
            or shifted.kwargs.get("alpha", 1) != 1
            or len(shifted.args) != 2
        ):
            continue
        mean = next((m for m in shifted.args if _only_reader(m, aten.mean.dim)), None)
        if mean is None or not _last_axis_kept(mean):
            continue
        square = mean.args[0]
        if _only_reader(square, aten.pow.Tensor_Scalar) and square.args[0] is x and square.args[1] == 2:
            return x, shifted
    return None


def _last_axis_kept(mean: torch.fx.Node) -> bool:
    rank = mean.args[0].meta["val"].dim()
    dims = mean.args[1] if len(mean.args) > 1 else None
    keepdim = mean.args[2] if len(mean.args) > 2 else mean.kwargs.get("keepdim", False)
    return keepdim is True and isinstance(dims, (list, tuple)) and [d % rank for d in dims] == [rank - 1]


def rms_norm(g: GraphBuilder, node: torch.fx.Node) -> str | None:
    """``SimplifiedLayerNormalization(x, w)`` for the ``mul`` ending an RMSNorm; None for any other node."""
    if node.target is not aten.mul.Tensor or len(node.args) != 2:
        return None
    for product in node.args:
        found = _normalized(product) if isinstance(product, torch.fx.Node) else None
        if found is None:
            continue
        x, shifted = found
        size = x.meta["val"].shape[-1]
        if not (g.has_value(x) and isinstance(size, int) and _is_float32(x, node, product)):
            continue
        if [str(s) for s in node.meta["val"].shape] != [str(s) for s in x.meta["val"].shape]:
            continue
        weight = _weight(g, _other(node, product), size)
        mean = next(m for m in shifted.args if isinstance(m, torch.fx.Node) and m.target is aten.mean.dim)
        eps = _epsilon(g, _other(shifted, mean))
        if weight is None or eps is None:
            continue
        addends = _residual_addends(g, x, node, {product, mean.args[0]})
        if addends is None:
            return g.emit("SimplifiedLayerNormalization", [g.tensor(x), weight], axis=-1, epsilon=eps, stash_type=1)
        inputs = [*(g.tensor(a) for a in addends), weight]
        normed, *_, total = g.emit_multi("SkipSimplifiedLayerNormalization", inputs, 4, domain=MICROSOFT, epsilon=eps)
        g.nodes[-1].output[1:3] = ["", ""]  # the mean and inverse deviation are not needed
        g.bind(x, total)  # the sum's later readers read the kernel's; the Add is left unread, and dropped
        return normed
    return None


def _residual_addends(g: GraphBuilder, x: torch.fx.Node, norm: torch.fx.Node, inside: set) -> tuple | None:
    """(a, b) where ``x`` is ``a + b`` of two float32 values with ``x``'s sizes (rank 2 or 3) and
    every reader of ``x`` but the norm's own (``inside``) comes after it (it is not yet translated)."""
    if x.target is not aten.add.Tensor or x.kwargs.get("alpha", 1) != 1 or len(x.args) != 2:
        return None
    addends = x.args
    sizes = [str(s) for s in x.meta["val"].shape]
    if len(sizes) not in (2, 3) or not all(isinstance(a, torch.fx.Node) and g.has_value(a) for a in addends):
        return None
    if not (_is_float32(*addends) and all([str(s) for s in a.meta["val"].shape] == sizes for a in addends)):
        return None
    later, cursor = set(), norm.next
    while cursor.op != "root":
        later.add(cursor)
        cursor = cursor.next
    return addends if all(u in later or u in inside for u in x.users) else None
