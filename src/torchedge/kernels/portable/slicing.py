"""Slicing and joining: slice, select (and their scatters), cat, split, constant padding."""

from __future__ import annotations

import numpy as np

from torchedge.kernels.portable.common import aliases, check, fail, wrap_dim, write
from torchedge.kernels.portable.shape_rules import replaced, same_as
from torchedge.kernels.registry import register_kernel

__all__ = [
    "slice_copy",
    "select_copy",
    "slice_scatter",
    "select_scatter",
    "cat",
    "split_with_sizes_copy",
    "constant_pad_nd",
    "padded",
]


def _along(axis: int, index) -> tuple:
    """An index tuple applying ``index`` (an int or slice) to ``axis``."""
    return (slice(None),) * axis + (index,)


def _slice_axis(op: str, self, dim, step) -> int:
    """The axis a slice with ``step`` cuts along ``dim``."""
    if self.ndim == 0:
        fail(op, "cannot slice a 0-dim tensor")
    if step <= 0:
        fail(op, f"slice step must be positive, got {step}")
    return wrap_dim(dim, self.ndim, op)


def _slicing(op: str, self, dim, start, end, step) -> tuple:
    return _along(_slice_axis(op, self, dim, step), slice(start, end, step))


def _slice_shape(op: str, self, dim, start, end, step, out) -> list[tuple]:
    """start and end count from the end when negative, default to the whole dim when None
    and are clamped to it, as ATen does; Python's slice rules are the same for step > 0."""
    axis = _slice_axis(op, self, dim, step)
    return [replaced(self.shape, axis, len(range(*slice(start, end, step).indices(self.shape[axis]))))]


@register_kernel("aten::slice_copy.Tensor_out", shape=_slice_shape)
def slice_copy(self, dim, start, end, step, out):
    """Python slicing clamps start/end exactly as ATen does (negative values count from the end)."""
    write(out, self[_slicing("aten::slice_copy.Tensor_out", self, dim, start, end, step)])


def _select_axis(op: str, self, dim, index) -> int:
    """The axis ``dim`` that ``index`` selects from, the index checked in range."""
    if self.ndim == 0:
        fail(op, "cannot select from a 0-dim tensor")
    axis = wrap_dim(dim, self.ndim, op)
    size = self.shape[axis]
    if not -size <= index < size:
        fail(op, f"index {index} is out of range for dimension {dim} of size {size}")
    return axis


def _selection(op: str, self, dim, index) -> tuple:
    return _along(_select_axis(op, self, dim, index), index)


def _select_shape(op: str, self, dim, index, out) -> list[tuple]:
    return [replaced(self.shape, _select_axis(op, self, dim, index))]


@register_kernel("aten::select_copy.int_out", shape=_select_shape)
def select_copy(self, dim, index, out):
    write(out, self[_selection("aten::select_copy.int_out", self, dim, index)])


def _scatter_into(op: str, self, src, where: tuple, out) -> None:
    """out = self, with ``src`` (cast) written over ``out[where]``, which it must fit exactly.
    When out is self's own memory, only ``out[where]`` is written."""
    target_shape = self[where].shape
    check(
        src.shape == target_shape,
        op,
        f"src has shape {list(src.shape)}, expected the shape of the slice it replaces, {list(target_shape)}",
    )
    if not aliases(out, self):
        write(out, self)
    write(out[where + (Ellipsis,)], src)  # the Ellipsis keeps a 0-dim selection a view


@register_kernel("aten::slice_scatter.out", shape=same_as())
def slice_scatter(self, src, dim, start, end, step, out):
    op = "aten::slice_scatter.out"
    _scatter_into(op, self, src, _slicing(op, self, dim, start, end, step), out)


@register_kernel("aten::select_scatter.out", shape=same_as())
def select_scatter(self, src, dim, index, out):
    op = "aten::select_scatter.out"
    _scatter_into(op, self, src, _selection(op, self, dim, index), out)


def _cat_shape(op: str, tensors, dim, out) -> list[tuple]:
    """The sizes along ``dim`` add up; the other dims must agree. 1-D empty tensors are
    skipped, as in ATen."""
    check(len(tensors) > 0, op, "expected a non-empty list of tensors")
    shapes = [t.shape for t in tensors if t.shape != (0,)]
    if not shapes:
        return [(0,)]
    first = shapes[0]
    check(len(first) > 0, op, "zero-dimensional tensors cannot be concatenated")
    axis = wrap_dim(dim, len(first), op)
    for shape in shapes:
        check(
            len(shape) == len(first) and replaced(shape, axis) == replaced(first, axis),
            op,
            f"tensors of shapes {[list(s) for s in shapes]} must match except in dimension {dim}",
        )
    return [replaced(first, axis, sum(s[axis] for s in shapes))]


@register_kernel("aten::cat.out", shape=_cat_shape)
def cat(tensors, dim, out):
    """Concatenate (casting into out); 1-D empty tensors are skipped, as in ATen."""
    op = "aten::cat.out"
    parts = [t for t in tensors if not (t.ndim == 1 and t.size == 0)]
    if not parts:
        return
    axis = wrap_dim(dim, parts[0].ndim, op)
    np.concatenate(parts, axis=axis, out=out, casting="unsafe")


def _split_axis(op: str, self, split_sizes, dim) -> int:
    """The axis split into ``split_sizes``, which must cover it."""
    axis = wrap_dim(dim, self.ndim, op)
    if min(split_sizes, default=0) < 0 or sum(split_sizes) != self.shape[axis]:
        fail(op, f"split_sizes {list(split_sizes)} must be non-negative and sum to {self.shape[axis]} (dim {dim})")
    return axis


def _split_with_sizes_shape(op: str, self, split_sizes, dim, out) -> list[tuple]:
    axis = _split_axis(op, self, split_sizes, dim)
    return [replaced(self.shape, axis, size) for size in split_sizes]


@register_kernel("aten::split_with_sizes_copy.out", shape=_split_with_sizes_shape)
def split_with_sizes_copy(self, split_sizes, dim, out):
    op = "aten::split_with_sizes_copy.out"
    axis = _split_axis(op, self, split_sizes, dim)
    if len(split_sizes) != len(out):
        fail(op, f"split_sizes {list(split_sizes)} must match the {len(out)} outputs")
    start = 0
    for size, piece in zip(split_sizes, out):
        write(piece, self[_along(axis, slice(start, start + size))])
        start += size


def padded(op: str, shape: tuple, pad) -> tuple:
    """``shape`` padded by ``pad``: (before, after) pairs from the last dim backwards;
    negative amounts crop."""
    if len(pad) % 2 != 0 or len(pad) // 2 > len(shape):
        fail(op, f"pad {list(pad)} must hold (before, after) pairs for at most {len(shape)} dims")
    result = list(shape)
    for i in range(len(pad) // 2):
        axis = len(shape) - 1 - i
        result[axis] += pad[2 * i] + pad[2 * i + 1]
        if result[axis] < 0:
            fail(op, f"pad {list(pad)} leaves dimension {axis} of shape {list(shape)} with a negative size")
    return tuple(result)


def _constant_pad_shape(op: str, self, pad, value, out) -> list[tuple]:
    return [padded(op, self.shape, pad)]


@register_kernel("aten::constant_pad_nd.out", shape=_constant_pad_shape)
def constant_pad_nd(self, pad, value, out):
    """``pad`` holds (before, after) pairs from the last dim backwards; negative values crop."""
    padded("aten::constant_pad_nd.out", self.shape, pad)  # the shape function's checks
    source, target = [slice(None)] * self.ndim, [slice(None)] * self.ndim
    for i in range(len(pad) // 2):
        axis, before, after = self.ndim - 1 - i, pad[2 * i], pad[2 * i + 1]
        size = self.shape[axis]
        first, last = max(-before, 0), size - max(-after, 0)
        source[axis] = slice(first, max(last, first))
        target[axis] = slice(max(before, 0), max(before, 0) + max(last - first, 0))
    if min(pad, default=0) >= 0:  # fill only the borders, then copy the input into the middle
        for i in range(len(pad) // 2):
            axis, before, after = self.ndim - 1 - i, pad[2 * i], pad[2 * i + 1]
            if before:
                write(out[_along(axis, slice(0, before))], value)
            if after:
                write(out[_along(axis, slice(out.shape[axis] - after, None))], value)
    else:
        write(out, value)
    write(out[tuple(target)], self[tuple(source)])
