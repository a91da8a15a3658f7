"""Slicing and joining: slice, select, cat, split, constant padding."""

from __future__ import annotations

import numpy as np

from torchedge.kernels.portable.common import check, wrap_dim, write
from torchedge.kernels.registry import register_kernel

__all__ = ["slice_copy", "select_copy", "cat", "split_with_sizes_copy", "constant_pad_nd"]


def _along(axis: int, index) -> tuple:
    """An index tuple applying ``index`` (an int or slice) to ``axis``."""
    return (slice(None),) * axis + (index,)


@register_kernel("aten::slice_copy.Tensor_out")
def slice_copy(self, dim, start, end, step, out):
    """Python slicing clamps start/end exactly as ATen does (negative values count from the end)."""
    op = "aten::slice_copy.Tensor_out"
    check(step > 0, op, f"slice step must be positive, got {step}")
    write(out, self[_along(wrap_dim(dim, self.ndim, op), slice(start, end, step))])


@register_kernel("aten::select_copy.int_out")
def select_copy(self, dim, index, out):
    op = "aten::select_copy.int_out"
    check(self.ndim > 0, op, "cannot select from a 0-dim tensor")
    axis = wrap_dim(dim, self.ndim, op)
    size = self.shape[axis]
    check(-size <= index < size, op, f"index {index} is out of range for dimension {dim} of size {size}")
    write(out, self[_along(axis, index)])


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
    write(out, value)
    write(out[tuple(target)], self[tuple(source)])
