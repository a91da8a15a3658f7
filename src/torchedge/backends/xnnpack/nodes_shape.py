"""Data movement nodes: transpose, reshape, slice, concatenate, constant pad, bilinear resize.

Reshapes, slices and pads without padding are views of their input where NumPy allows it (the
graph's values are written once, so a view is never stale); the rest copy.
"""

from __future__ import annotations

import functools

import numpy as np

from torchedge.backends.xnnpack.registry import builds

__all__: list[str] = []

_ALIGN_CORNERS = 0x8
_TENSORFLOW_LEGACY_MODE = 0x4


@builds("XNNStaticTranspose")
def _transpose(node, ctx):
    x = ctx.value(node.input_id)
    perm = tuple(node.perm)
    ctx.check(sorted(perm) == list(range(x.ndim)), f"perm {list(perm)} is not a permutation of {x.ndim} dims")
    out = ctx.output(node.output_id)
    moved = x.transpose(perm)
    ctx.check(moved.shape == out.shape, f"output has shape {list(out.shape)}, perm gives {list(moved.shape)}")
    return functools.partial(np.copyto, out, moved)


@builds("XNNStaticReshape")
def _reshape(node, ctx):
    """The output's shape is its value's (static) dims; ``new_shape`` says the same."""
    x = ctx.value(node.input_id)
    dims = ctx.dims(node.output_id)
    ctx.check(
        int(np.prod(dims, dtype=np.int64)) == x.size,
        f"cannot reshape {list(x.shape)} ({x.size} elements) to {list(dims)}",
    )
    view = x.view()
    try:
        view.shape = dims  # raises where the layout needs a copy
    except AttributeError:
        out = ctx.output(node.output_id)
        return functools.partial(np.copyto, out, x.reshape(dims))
    ctx.alias(node.output_id, view)
    return None


@builds("XNNStaticSlice")
def _slice(node, ctx):
    x = ctx.value(node.input_id)
    dims = ctx.dims(node.output_id)
    ctx.check(len(node.offsets) == x.ndim == len(dims), f"offsets {node.offsets} do not fit an input of {x.ndim} dims")
    ctx.check(
        all(o + d <= n for o, d, n in zip(node.offsets, dims, x.shape)),
        f"slice at {node.offsets} of size {list(dims)} exceeds the input's shape {list(x.shape)}",
    )
    ctx.alias(node.output_id, x[tuple(slice(o, o + d) for o, d in zip(node.offsets, dims))])
    return None


@builds("XNNConcatenate2", "XNNConcatenate3", "XNNConcatenate4", "XNNConcatenate5")
def _concatenate(node, ctx):
    count = int(ctx.kind[-1])
    ids = [node.input1_id, node.input2_id, node.input3_id, node.input4_id, node.input5_id][:count]
    parts = [ctx.value(i) for i in ids]
    out = ctx.output(node.output_id)
    ctx.check(node.axis < out.ndim, f"axis {node.axis} is out of range for {out.ndim} dims")
    ctx.check(all(p.ndim == out.ndim for p in parts), "inputs differ in rank from the output")
    expected = list(out.shape)
    expected[node.axis] = sum(p.shape[node.axis] for p in parts)
    ctx.check(tuple(expected) == out.shape, f"inputs concatenate to {expected}, output has {list(out.shape)}")
    return functools.partial(np.concatenate, parts, node.axis, out=out)


@builds("XNNStaticConstantPad")
def _constant_pad(node, ctx):
    """A run fills the border and copies the interior (the buffer may be the caller's, or hold
    another value between runs)."""
    x = ctx.value(node.input_id)
    pre, post = list(node.pre_paddings), list(node.post_paddings)
    ctx.check(len(pre) == len(post) == x.ndim, f"paddings {pre}, {post} do not fit an input of {x.ndim} dims")
    if not any(pre) and not any(post):
        ctx.alias(node.output_id, x)
        return None
    out = ctx.output(node.output_id)
    shape = tuple(n + a + b for n, a, b in zip(x.shape, pre, post))
    ctx.check(shape == out.shape, f"output has shape {list(out.shape)}, padding gives {list(shape)}")
    interior = out[tuple(slice(a, a + n) for a, n in zip(pre, x.shape))]
    borders = []  # per padded dim, the slabs before and after the interior (corners twice)
    for axis, (a, n) in enumerate(zip(pre, x.shape)):
        for part in (slice(0, a), slice(a + n, None)):
            slab = out[(slice(None),) * axis + (part,)]
            if slab.size:
                borders.append(slab)
    value = node.padding_value

    def step():
        for slab in borders:
            slab.fill(value)
        np.copyto(interior, x)

    return step


def _source_positions(size_in: int, size_out: int, align_corners: bool):
    """Lower index, upper index and weight of the upper one, per output position (PyTorch's rule)."""
    if align_corners:
        corners = np.float32((size_in - 1) / (size_out - 1) if size_out > 1 else 0.0)
        src = np.arange(size_out, dtype=np.float32) * corners
    else:
        centers = np.float32(size_in / size_out)
        src = np.maximum((np.arange(size_out, dtype=np.float32) + np.float32(0.5)) * centers - np.float32(0.5), 0)
    low = np.minimum(np.floor(src).astype(np.intp), size_in - 1)
    high = np.minimum(low + 1, size_in - 1)
    return low, high, (src - low).astype(np.float32)


@builds("XNNStaticResizeBilinear2D")
def _resize_bilinear(node, ctx):
    """NHWC bilinear resize; half-pixel centers unless ALIGN_CORNERS (PyTorch's two modes)."""
    x = ctx.value(node.input_id)
    ctx.check(not node.flags & _TENSORFLOW_LEGACY_MODE, "TensorFlow legacy resize mode is not supported")
    ctx.check(x.ndim == 4, f"input has {x.ndim} dims, expected 4 (NHWC)")
    out = ctx.output(node.output_id)
    shape = (x.shape[0], node.new_height, node.new_width, x.shape[3])
    ctx.check(out.shape == shape, f"output has shape {list(out.shape)}, expected {list(shape)}")
    align = bool(node.flags & _ALIGN_CORNERS)
    h0, h1, lh = _source_positions(x.shape[1], node.new_height, align)
    w0, w1, lw = _source_positions(x.shape[2], node.new_width, align)
    lh, lw = lh.reshape(1, -1, 1, 1), lw.reshape(1, 1, -1, 1)

    def step():
        top, bottom = x[:, h0], x[:, h1]
        top = top[:, :, w0] + (top[:, :, w1] - top[:, :, w0]) * lw
        bottom = bottom[:, :, w0] + (bottom[:, :, w1] - bottom[:, :, w0]) * lw
        np.add(top, (bottom - top) * lh, out=out)

    return step
