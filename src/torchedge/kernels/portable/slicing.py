"""Slicing and joining: slice, select (and their scatters), cat, split, constant padding."""

from __future__ import annotations

import numpy as np

from torchedge.kernels.portable.common import aliases, check, wrap_dim, write
from torchedge.kernels.registry import register_kernel

__all__ = ["slice_copy", "select_copy", "slice_scatter", "select_scatter", "cat", "split_with_sizes_copy",
           "constant_pad_nd"]


def _along(axis: int, index) -> tuple:
    """An index tuple applying ``index`` (an int or slice) to ``axis``."""
    return (slice(None),) * axis + (index,)


def _slicing(op: str, self, dim, start, end, step) -> tuple:
    check(self.ndim > 0, op, "cannot slice a 0-dim tensor")
    check(step > 0, op, f"slice step must be positive, got {step}")
    return _along(wrap_dim(dim, self.ndim, op), slice(start, end, step))


@register_kernel("aten::slice_copy.Tensor_out")
def slice_copy(self, dim, start, end, step, out):
    """Python slicing clamps start/end exactly as ATen does (negative values count from the end)."""
    write(out, self[_slicing("aten::slice_copy.Tensor_out", self, dim, start, end, step)])


def _selection(op: str, self, dim, index) -> tuple:
    check(self.ndim > 0, op, "cannot select from a 0-dim tensor")
    axis = wrap_dim(dim, self.ndim, op)
    size = self.shape[axis]
    check(-size <= index < size, op, f"index {index} is out of range for dimension {dim} of size {size}")
    return _along(axis, index)


@register_kernel("aten::select_copy.int_out")
def select_copy(self, dim, index, out):
    write(out, self[_selection("aten::select_copy.int_out", self, dim, index)])


def _scatter_into(op: str, self, src, where: tuple, out) -> None:
    """out = self, with ``src`` (cast) written over ``out[where]``, which it must fit exactly.
    When out is self's own memory, only ``out[where]`` is written."""
    target_shape = self[where].shape
    check(src.shape == target_shape, op, f"src has shape {list(src.shape)}, expected the shape of the "
                                         f"slice it replaces, {list(target_shape)}")
    if not aliases(out, self):
        write(out, self)
    write(out[where + (Ellipsis,)], src)  # the Ellipsis keeps a 0-dim selection a view


@register_kernel("aten::slice_scatter.out")
def slice_scatter(self, src, dim, start, end, step, out):
    op = "aten::slice_scatter.out"
    _scatter_into(op, self, src, _slicing(op, self, dim, start, end, step), out)


@register_kernel("aten::select_scatter.out")
def select_scatter(self, src, dim, index, out):
    op = "aten::select_scatter.out"
    _scatter_into(op, self, src, _selection(op, self, dim, index), out)


@register_kernel("aten::cat.out")
def cat(tensors, dim, out):
    """Concatenate (casting into out); 1-D empty tensors are skipped, as in ATen."""
    op = "aten::cat.out"
    parts = [t for t in tensors if not (t.ndim == 1 and t.size == 0)]
    if not parts:
        return
    axis = wrap_dim(dim, parts[0].ndim, op)
    np.concatenate(parts, axis=axis, out=out, casting="unsafe")


@register_kernel("aten::split_with_sizes_copy.out")
def split_with_sizes_copy(self, split_sizes, dim, out):
    op = "aten::split_with_sizes_copy.out"
    axis = wrap_dim(dim, self.ndim, op)
    check(sum(split_sizes) == self.shape[axis] and len(split_sizes) == len(out), op,
          f"split_sizes {list(split_sizes)} must sum to {self.shape[axis]} and match the {len(out)} outputs")
    start = 0
    for size, piece in zip(split_sizes, out):
        write(piece, self[_along(axis, slice(start, start + size))])
        start += size


@register_kernel("aten::constant_pad_nd.out")
def constant_pad_nd(self, pad, value, out):
    """``pad`` holds (before, after) pairs from the last dim backwards; negative values crop."""
    op = "aten::constant_pad_nd.out"
    check(len(pad) % 2 == 0 and len(pad) // 2 <= self.ndim, op,
          f"pad {list(pad)} must hold (before, after) pairs for at most {self.ndim} dims")
    source, target = [slice(None)] * self.ndim, [slice(None)] * self.ndim
    for i in range(len(pad) // 2):
        axis, before, after = self.ndim - 1 - i, pad[2 * i], pad[2 * i + 1]
        size = self.shape[axis]
        check(size + before + after >= 0, op, f"pad {list(pad)} leaves dimension {axis} with a negative size")
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
