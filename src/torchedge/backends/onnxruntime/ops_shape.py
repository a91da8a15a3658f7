"""Shape and data-movement operators: reshapes, transposes, expand, cat, split, pad, flip, copies, casts.

A reshape-like operator reshapes to its output's meta shape; where a size is symbolic (the
tokens of a call), it must be the input's size at that position, which Reshape copies (0) and
Expand keeps (1).
Core-ATen decomposition leaves one spelling of each view (``t`` and ``transpose``
arrive as ``permute_copy``, ``squeeze(dim)`` as ``squeeze_copy.dims``, ``unbind``
and ``split`` as ``split_with_sizes_copy``), so only that one is translated.
"""

from __future__ import annotations

import torch

from torchedge.backends.onnxruntime.builder import GraphBuilder
from torchedge.backends.onnxruntime.registry import NUMERIC, NodeArgs, lowers

__all__: list[str] = []  # translations register themselves; nothing to import

aten = torch.ops.aten


def _reshape(g: GraphBuilder, x: str, shape: list[int]) -> str:
    return g.emit("Reshape", [x, g.int64s(shape)], allowzero=1 if 0 in shape else None)


@lowers(aten.squeeze_copy.dims)
def _to_output_shape(g: GraphBuilder, a: NodeArgs) -> str:
    return _reshape(g, g.tensor(a["self"]), a.out_shape)


def _kept_sizes(a: NodeArgs, keep: int) -> list[int | None]:
    """The output's sizes, each symbolic one replaced by ``keep`` where it is the input's size at the
    same position (counted from the start for Reshape's 0, from the end for Expand's 1), by None
    where it is not."""
    sizes, source = list(a.out.shape), list[object](a.val("self").shape)
    if keep == 1:  # Expand aligns the trailing dimensions
        source = [None] * (len(sizes) - len(source)) + source
    return [
        size if isinstance(size, int) else keep if i < len(source) and str(source[i]) == str(size) else None
        for i, size in enumerate(sizes)
    ]


def _expand_target(a: NodeArgs) -> list[int] | None:
    target = _kept_sizes(a, 1)
    return None if None in target else [int(s) for s in target if s is not None]


def _reshape_target(a: NodeArgs) -> list[int] | None:
    """Reshape's shape: the static sizes, 0 (copy the input's) for a symbolic one at the input's
    position, -1 for at most one other; None where that does not fit, or a static 0 would be read
    as "copy" too."""
    target = _kept_sizes(a, 0)
    symbolic = not all(isinstance(s, int) for s in a.out.shape)
    if symbolic and (target.count(None) > 1 or any(isinstance(s, int) and s == 0 for s in a.out.shape)):
        return None
    return [-1 if s is None else s for s in target]


def _keeps_shape(a: NodeArgs) -> bool:
    """The output has the input's sizes (symbolic ones by name): the op is the value itself, since
    ONNX values are immutable."""
    return [str(s) for s in a.out.shape] == [str(s) for s in a.val("self").shape]


def _sizes(node: torch.fx.Node) -> list[str]:
    return [str(s) for s in node.meta["val"].shape]


def _product_of_rows(g: GraphBuilder, a: NodeArgs) -> str | None:
    """``view(mm(view(x, [rows, k]), w), x's leading sizes + [n])``, as a linear layer decomposes
    over ``x`` of rank 3 or more, is ONNX's MatMul of ``x`` itself, which multiplies the rows of its
    leading dimensions by ``w`` in the same one matrix product; None where that is not the pattern,
    the product is read elsewhere or computed outside this graph, or ``x`` is not a value of it."""
    product = a["self"]
    if product.target is not aten.mm.default or len(product.users) != 1 or not g.computes(product):
        return None  # a product computed outside this graph is not computed again here
    rows = product.args[0]
    if not isinstance(rows, torch.fx.Node) or rows.target is not aten.view_copy.default:
        return None
    x = rows.args[0]
    if not (isinstance(x, torch.fx.Node) and g.has_value(x) and len(_sizes(rows)) == 2 and len(_sizes(x)) > 2):
        return None
    if _sizes(x)[-1] != _sizes(rows)[-1] or _sizes(x)[:-1] != [str(s) for s in a.out.shape][:-1]:
        return None
    return g.emit("MatMul", [g.tensor(x), g.tensor(product.args[1])])


@lowers(aten.view_copy.default, check=lambda a: _reshape_target(a) is not None, dynamic_rows=True)
def _view(g: GraphBuilder, a: NodeArgs) -> str:
    if _keeps_shape(a):
        return g.tensor(a["self"])
    product = _product_of_rows(g, a)
    if product is not None:
        return product  # the earlier MatMul and Reshape are left unread, and dropped
    target = _reshape_target(a)
    if all(isinstance(s, int) for s in a.out.shape):
        return _reshape(g, g.tensor(a["self"]), target)
    return g.emit("Reshape", [g.tensor(a["self"]), g.int64s(target)])


@lowers(aten.unsqueeze_copy.default, dynamic_rows=True)
def _unsqueeze(g: GraphBuilder, a: NodeArgs) -> str:
    return g.emit("Unsqueeze", [g.tensor(a["self"]), g.int64s([int(a["dim"]) % (a.rank() + 1)])])


@lowers(aten.clone.default, aten.alias_copy.default, aten._to_copy.default, dynamic_rows=True)
def _copy(g: GraphBuilder, a: NodeArgs) -> str:
    """ONNX values are immutable, so a copy is the value itself, cast to the output dtype
    (device, layout and memory format do not exist in an ONNX graph)."""
    return g.tensor(a["self"], a.out_dtype)


@lowers(aten.permute_copy.default, check=lambda a: a.rank() >= 1, dynamic_rows=True)
def _permute(g: GraphBuilder, a: NodeArgs) -> str:
    return g.emit("Transpose", [g.tensor(a["self"])], perm=[int(d) % a.rank() for d in a["dims"]])


@lowers(aten.expand_copy.default, check=lambda a: _expand_target(a) is not None, dynamic_rows=True)
def _expand(g: GraphBuilder, a: NodeArgs) -> str:
    """Expand to the output's sizes; a symbolic one is 1 there (the input's size broadcasts)."""
    if _keeps_shape(a):
        return g.tensor(a["self"])
    return g.emit("Expand", [g.tensor(a["self"]), g.int64s(_expand_target(a))])


@lowers(aten.cat.default, dynamic_rows=True)
def _cat(g: GraphBuilder, a: NodeArgs) -> str:
    """Concat in the output dtype, leaving out the 1-D empty tensors ``cat`` accepts beside any shape."""
    rank = a.out.dim()
    parts = [t for t in a["tensors"] if rank == 1 or tuple(t.meta["val"].shape) != (0,)]
    return g.emit("Concat", [g.tensor(t, a.out_dtype) for t in parts], axis=int(a["dim"]) % rank)


@lowers(aten.split_with_sizes_copy.default, check=lambda a: a.rank() >= 1)
def _split(g: GraphBuilder, a: NodeArgs) -> list[str]:
    sizes = [int(s) for s in a["split_sizes"]]
    return g.emit_multi("Split", [g.tensor(a["self"]), g.int64s(sizes)], len(sizes), axis=int(a["dim"]) % a.rank())


@lowers(aten.constant_pad_nd.default, dtypes=NUMERIC | {torch.bool, torch.uint8, torch.int8})
def _constant_pad(g: GraphBuilder, a: NodeArgs) -> str:
    """ATen pads the last dimension first, (begin, end) pairs; ONNX wants all begins, then all ends."""
    rank = a.rank()
    begins, ends = [0] * rank, [0] * rank
    pad = [int(p) for p in a["pad"]]
    for i in range(len(pad) // 2):
        begins[rank - 1 - i], ends[rank - 1 - i] = pad[2 * i], pad[2 * i + 1]
    dtype = a.out_dtype
    return g.emit("Pad", [g.tensor(a["self"]), g.int64s(begins + ends), g.scalar(a["value"], dtype)])


@lowers(aten.flip.default)
def _flip(g: GraphBuilder, a: NodeArgs) -> str:
    """A Slice with step -1 over the flipped dims, from the last element through the first."""
    dims = sorted({int(d) % max(a.rank(), 1) for d in a["dims"]})
    x = g.tensor(a["self"])
    if not dims or a.rank() == 0:
        return x
    n = len(dims)
    return g.emit("Slice", [x, g.int64s([-1] * n), g.int64s([-(2**63)] * n), g.int64s(dims), g.int64s([-1] * n)])
