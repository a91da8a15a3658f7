"""Copies of strided views and scatters into them: ``narrow_copy``, ``unfold_copy``,
``diagonal_scatter`` and ``as_strided_scatter``.

The scatters return ``self`` with the view's elements replaced by ``src``; the view is taken
over ``self``'s contiguous layout (offsets and strides count elements).
"""

from __future__ import annotations

import numpy as np

from torchedge.kernels.dtypes import INT64
from torchedge.kernels.portable.common import check, fail, wrap_dim, write
from torchedge.kernels.registry import register_kernel

__all__ = ["narrow_copy", "unfold_copy", "diagonal_scatter", "as_strided_scatter"]


def _narrow(op: str, self, dim, start, length) -> tuple[int, int, int]:
    check(self.ndim > 0, op, "narrow() cannot be applied to a 0-dim tensor")
    axis = wrap_dim(dim, self.ndim, op)
    size = self.shape[axis]
    check(length >= 0, op, f"length must be non-negative, got {length}")
    check(-size <= start <= size, op, f"start {start} is out of bounds for dimension {axis} of size {size}")
    start = start + size if start < 0 else start
    check(start + length <= size, op, f"start ({start}) + length ({length}) exceeds dimension size ({size})")
    return axis, start, length


def _narrow_shape(op: str, self, dim, start, length, out) -> list[tuple]:
    axis, _, length = _narrow(op, self, dim, start, length)
    return [self.shape[:axis] + (length,) + self.shape[axis + 1 :]]


@register_kernel("aten::narrow_copy.out", shape=_narrow_shape)
def narrow_copy(self, dim, start, length, out):
    axis, start, length = _narrow("aten::narrow_copy.out", self, dim, start, length)
    index = (slice(None),) * axis + (slice(start, start + length),)
    write(out, self[index])


def _unfold(op: str, self, dimension, size, step) -> tuple[int, int, int]:
    axis = wrap_dim(dimension, self.ndim, op)
    length = self.shape[axis] if self.ndim > 0 else 1
    check(size >= 0, op, f"size is {size} but must be >= 0")
    check(size <= length, op, f"maximum size for tensor at dimension {axis} is {length} but size is {size}")
    check(step > 0, op, f"step is {step} but must be > 0")
    return axis, (length - size) // step + 1, length


def _unfold_shape(op: str, self, dimension, size, step, out) -> list[tuple]:
    axis, count, _ = _unfold(op, self, dimension, size, step)
    if self.ndim == 0:
        return [(size,)]
    return [self.shape[:axis] + (count,) + self.shape[axis + 1 :] + (size,)]


@register_kernel("aten::unfold_copy.out", shape=_unfold_shape)
def unfold_copy(self, dimension, size, step, out):
    """Every ``size``-long window along ``dimension``, ``step`` apart, as a new last dim."""
    axis, count, _ = _unfold("aten::unfold_copy.out", self, dimension, size, step)
    if self.ndim == 0:
        write(out, self.reshape(1)[:size])
        return
    windows = np.lib.stride_tricks.sliding_window_view(self, size, axis=axis)
    index = (slice(None),) * axis + (slice(0, (count - 1) * step + 1, step),)
    write(out, windows[index])


def _diagonal_index(op: str, shape: tuple, offset: int, dim1: int, dim2: int):
    ndim = len(shape)
    a, b = wrap_dim(dim1, ndim, op), wrap_dim(dim2, ndim, op)
    check(a != b, op, f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    rows, cols = shape[a], shape[b]
    length = max(min(rows, cols - offset) if offset >= 0 else min(rows + offset, cols), 0)
    start_row, start_col = (0, offset) if offset >= 0 else (-offset, 0)
    steps = np.arange(length)
    diag_shape = tuple(s for i, s in enumerate(shape) if i not in (a, b)) + (length,)
    return a, b, start_row + steps, start_col + steps, diag_shape


@register_kernel("aten::diagonal_scatter.out", shape=lambda op, self, *rest: [self.shape])
def diagonal_scatter(self, src, offset, dim1, dim2, out):
    """``self`` with its (offset, dim1, dim2) diagonal replaced by ``src``."""
    op = "aten::diagonal_scatter.out"
    check(self.ndim >= 2, op, f"diagonal needs at least 2 dims, got a {self.ndim}-D tensor")
    a, b, rows, cols, diag_shape = _diagonal_index(op, self.shape, offset, dim1, dim2)
    check(
        src.shape == diag_shape,
        op,
        f"src must have the shape of the diagonal {list(diag_shape)}, got {list(src.shape)}",
    )
    result = np.array(self, dtype=out.dtype)
    np.moveaxis(result, (a, b), (-2, -1))[..., rows, cols] = src
    write(out, result)


@register_kernel("aten::as_strided_scatter.out", shape=lambda op, self, *rest: [self.shape])
def as_strided_scatter(self, src, size, stride, storage_offset, out):
    """``self`` with the elements of its ``as_strided(size, stride, storage_offset)`` view
    replaced by ``src``."""
    op = "aten::as_strided_scatter.out"
    check(len(size) == len(stride), op, f"size {list(size)} and stride {list(stride)} must have equal lengths")
    check(all(s >= 0 for s in size), op, f"size {list(size)} must not be negative")
    check(all(s >= 0 for s in stride), op, f"stride {list(stride)} must not be negative")
    offset = 0 if storage_offset is None else storage_offset
    check(offset >= 0, op, f"storage_offset must be non-negative, got {offset}")
    check(
        tuple(src.shape) == tuple(size),
        op,
        f"expected src to have the size of the view {list(size)}, got {list(src.shape)}",
    )
    flat = np.array(self, dtype=out.dtype).reshape(-1)
    index = np.full(tuple(size), offset, INT64)
    for axis, (n, s) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[axis] = n
        index = index + (np.arange(n, dtype=INT64) * s).reshape(shape)
    if index.size > 0 and int(index.max()) >= flat.size:
        fail(
            op,
            f"the view (size {list(size)}, stride {list(stride)}, offset {offset}) is out of bounds "
            f"for a tensor of {flat.size} elements",
        )
    flat[index.reshape(-1)] = src.reshape(-1)
    write(out, flat.reshape(self.shape))
