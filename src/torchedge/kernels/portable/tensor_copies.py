"""Copies that exported programs keep: ``unbind_copy`` (one out per slice), ``new_empty_strided``
and ``resize`` (what ``Tensor.resize_`` and ``resize_as_`` become once functionalized).

ATen leaves ``new_empty_strided``'s values and the elements that ``resize`` adds uninitialised;
these kernels write zeros there, so results never depend on stale memory.
"""

from __future__ import annotations

import math

import numpy as np

from torchedge.kernels.portable.common import check, wrap_dim, write
from torchedge.kernels.portable.shape_rules import from_size
from torchedge.kernels.registry import register_kernel

__all__ = ["unbind_copy", "new_empty_strided", "resize"]


def _unbind_shapes(op: str, self, dim, out) -> list[tuple]:
    check(self.ndim > 0, op, "dimension specified as 0 but the tensor has no dimensions")
    axis = wrap_dim(dim, self.ndim, op)
    piece = self.shape[:axis] + self.shape[axis + 1 :]
    return [piece] * self.shape[axis]


@register_kernel("aten::unbind_copy.int_out", shape=_unbind_shapes)
def unbind_copy(self, dim, out):
    """Slice ``i`` of ``self`` along ``dim`` into ``out[i]``."""
    op = "aten::unbind_copy.int_out"
    shapes = _unbind_shapes(op, self, dim, out)
    check(len(out) == len(shapes), op, f"expected {len(shapes)} output tensors (the size of dim {dim}), got {len(out)}")
    pieces = np.moveaxis(self, wrap_dim(dim, self.ndim, op), 0)
    for piece, target in zip(pieces, out):
        write(target, piece)


def _new_empty_strided_shape(op: str, self, size, stride, out) -> list[tuple]:
    check(len(size) == len(stride), op, f"size {list(size)} and stride {list(stride)} must have the same length")
    return from_size(op, size)


@register_kernel("aten::new_empty_strided.out", shape=_new_empty_strided_shape)
def new_empty_strided(self, size, stride, out):
    """A tensor of ``size`` (dtype: ``self``'s or the one asked for, that of ``out``); zeros."""
    _new_empty_strided_shape("aten::new_empty_strided.out", self, size, stride, out)
    write(out, 0)


def _resize_shape(op: str, self, size, memory_format, out) -> list[tuple]:
    return from_size(op, size)


@register_kernel("aten::resize.out", shape=_resize_shape)
def resize(self, size, memory_format, out):
    """``self``'s elements in row-major order, as many as fit in ``size``; zeros after them."""
    _resize_shape("aten::resize.out", self, size, memory_format, out)
    flat = np.zeros(math.prod(size), out.dtype)
    kept = min(flat.size, self.size)
    write(flat[:kept], self.reshape(-1)[:kept])
    write(out, flat.reshape(out.shape))
