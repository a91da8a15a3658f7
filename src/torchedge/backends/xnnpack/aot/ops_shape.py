"""Data movement: permute, reshapes (view, squeeze, unsqueeze, a no-op expand), clone, slice,
cat. All run on NCHW values except cat, which joins NHWC inputs in NHWC along the permuted
axis. A permute or view of a constant is folded into the constant (nothing is emitted)."""

from __future__ import annotations

import math

import torch

from torchedge.backends.xnnpack.aot.builder import INVALID
from torchedge.backends.xnnpack.aot.lowering import NCHW, NHWC, TO_NCHW, TO_NHWC, Lowering, lowers, shape
from torchedge.backends.xnnpack.aot.shapes import any_dims, one_inferred, reshape_dims

__all__: list[str] = []

aten = torch.ops.aten


@lowers(aten.permute_copy.default, dynamic=any_dims)
def _permute(lw: Lowering, node: torch.fx.Node) -> None:
    if lw.constant(node) is not None:
        return  # folded: read through `Lowering.get`
    x = node.args[0]
    rank = len(shape(x))
    perm = [int(d) % rank for d in node.args[1]]
    source = lw.get(x)
    out = lw.output(node)
    lw.node("XNNStaticTranspose", num_dims=rank, perm=perm, input_id=source, output_id=out, flags=0)


def _reshape(lw: Lowering, node: torch.fx.Node) -> None:
    if lw.constant(node) is not None:
        return
    x = node.args[0]
    known = lw.layouts(x)
    if NCHW not in known and NHWC in known and _same_bytes(shape(x)):
        source = known[NHWC]  # N, 1, 1, C or N, 1, H, W: no conversion needed
    else:
        source = lw.get(x)
    out = lw.output(node)
    dims = reshape_dims(node)
    lw.node("XNNStaticReshape", num_dims=len(dims), new_shape=dims, input_id=source, output_id=out, flags=0)


def _same_bytes(dims) -> bool:
    return len(dims) == 4 and (dims[1] == 1 or dims[2] * dims[3] == 1)


def _expand_check(node, ep) -> bool:
    return shape(node) == shape(node.args[0])


lowers(
    aten.view_copy.default,
    aten.squeeze_copy.dims,
    aten.squeeze_copy.dim,
    aten.unsqueeze_copy.default,
    aten.squeeze_copy.default,
    dynamic=one_inferred,
)(_reshape)
lowers(aten.expand_copy.default, check=_expand_check)(_reshape)


def _clone_check(node, ep) -> bool:
    return node.kwargs.get("memory_format") in (None, torch.contiguous_format, torch.preserve_format)


@lowers(aten.clone.default, aten.alias_copy.default, check=_clone_check, dynamic=any_dims)
def _clone(lw: Lowering, node: torch.fx.Node) -> None:
    source = lw.get(node.args[0])
    out = lw.output(node)
    lw.node("XNNCopy", input_id=source, output_id=out, flags=0)


def _slice_check(node, ep) -> bool:
    step = node.args[4] if len(node.args) > 4 else node.kwargs.get("step", 1)
    return step == 1


@lowers(aten.slice_copy.Tensor, check=_slice_check)
def _slice(lw: Lowering, node: torch.fx.Node) -> None:
    x = node.args[0]
    dims = shape(x)
    dim = int(node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)) % len(dims)
    start = node.args[2] if len(node.args) > 2 else node.kwargs.get("start")
    start = 0 if start is None else int(start)
    start = min(max(start + dims[dim] if start < 0 else start, 0), dims[dim])
    offsets = [0] * len(dims)
    offsets[dim] = start
    source = lw.get(x)
    out = lw.output(node)
    sizes = list(shape(node))
    lw.node("XNNStaticSlice", num_dims=len(dims), offsets=offsets, sizes=sizes, input_id=source, output_id=out, flags=0)


@lowers(aten.select_copy.int)
def _select(lw: Lowering, node: torch.fx.Node) -> None:
    """A slice of size 1, then a reshape dropping the dim."""
    x, dim, index = node.args[:3]
    dims = shape(x)
    dim = int(dim) % len(dims)
    index = int(index) % dims[dim]
    offsets, sizes = [0] * len(dims), list(dims)
    offsets[dim], sizes[dim] = index, 1
    source = lw.get(x)
    sliced = lw.builder.value(sizes)
    lw.node(
        "XNNStaticSlice", num_dims=len(dims), offsets=offsets, sizes=sizes, input_id=source, output_id=sliced, flags=0
    )
    out = lw.output(node)
    new_dims = list(shape(node))
    lw.node("XNNStaticReshape", num_dims=len(new_dims), new_shape=new_dims, input_id=sliced, output_id=out, flags=0)


def _cat_check(node, ep) -> bool:
    tensors = node.args[0]
    return len(tensors) >= 1 and all(isinstance(t, torch.fx.Node) and math.prod(shape(t)) > 0 for t in tensors)


@lowers(aten.cat.default, check=_cat_check)
def _cat(lw: Lowering, node: torch.fx.Node) -> None:
    tensors = list(node.args[0])
    rank = len(shape(node))
    axis = int(node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)) % rank
    layout = NCHW
    if rank == 4 and all(lw.preferred_layout(t) == NHWC for t in tensors):
        layout, axis = NHWC, TO_NCHW[axis]
    ids = [lw.get(t, layout) for t in tensors]
    if len(ids) == 1:
        out = lw.output(node, layout)
        lw.node("XNNCopy", input_id=ids[0], output_id=out, flags=0)
        return
    while len(ids) > 5:  # XNNPACK joins at most five at a time
        dims = list(lw.builder.tensor(ids[0]).dims)
        dims[axis] = sum(lw.builder.tensor(i).dims[axis] for i in ids[:5])
        joined = lw.builder.value(dims)
        _join(lw, ids[:5], axis, joined)
        ids = [joined] + ids[5:]
    _join(lw, ids, axis, lw.output(node, layout))


def _join(lw: Lowering, ids: list[int], axis: int, out: int) -> None:
    fields = {f"input{i + 1}_id": (ids[i] if i < len(ids) else INVALID) for i in range(5)}
    lw.node(f"XNNConcatenate{len(ids)}", axis=axis, output_id=out, flags=0, **fields)


def _pad_check(node, ep) -> bool:
    pads = node.args[1]
    return len(pads) % 2 == 0 and len(pads) // 2 <= len(shape(node)) and all(int(p) >= 0 for p in pads)


@lowers(aten.constant_pad_nd.default, check=_pad_check)
def _constant_pad(lw: Lowering, node: torch.fx.Node) -> None:
    x = node.args[0]
    rank = len(shape(x))
    pads = [int(p) for p in node.args[1]]
    value = float(node.args[2]) if len(node.args) > 2 else float(node.kwargs.get("value", 0.0))
    pre, post = [0] * rank, [0] * rank
    for i in range(len(pads) // 2):  # ATen lists (before, after) from the last dim backwards
        pre[rank - 1 - i], post[rank - 1 - i] = pads[2 * i], pads[2 * i + 1]
    layout = lw.preferred_layout(x) if rank == 4 else NCHW
    if layout == NHWC:
        pre, post = [pre[i] for i in TO_NHWC], [post[i] for i in TO_NHWC]
    source = lw.get(x, layout)
    out = lw.output(node, layout)
    lw.node(
        "XNNStaticConstantPad",
        pre_paddings=pre,
        post_paddings=post,
        padding_value=value,
        input_id=source,
        output_id=out,
        flags=0,
    )
