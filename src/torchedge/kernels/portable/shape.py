"""Copies that only rearrange elements: views, permutes, expands, repeats, plain copies."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from torchedge.kernels.portable.common import check, wrap_dim, write
from torchedge.kernels.registry import register_kernel

__all__ = ["reshape_copy", "permute_copy", "transpose_copy", "t_copy", "expand_copy", "repeat", "clone",
           "alias_copy", "to_copy", "copy"]


@register_kernel("aten::view_copy.out", "aten::_unsafe_view.out", "aten::unsqueeze_copy.out",
                 "aten::squeeze_copy.dim_out", "aten::squeeze_copy.dims_out")
def reshape_copy(self, shape_argument, out):
    """Every op here keeps the element order, so out's (planned) shape says it all."""
    check(self.size == out.size, "aten::view_copy.out",
          f"cannot reshape {list(self.shape)} ({self.size} elements) to {list(out.shape)} ({out.size} elements)")
    write(out, self.reshape(out.shape))


@register_kernel("aten::permute_copy.out")
def permute_copy(self, dims, out):
    op = "aten::permute_copy.out"
    axes = [wrap_dim(d, self.ndim, op) for d in dims]
    check(sorted(axes) == list(range(self.ndim)), op, f"dims {list(dims)} is not a permutation of {self.ndim} dims")
    write(out, self.transpose(axes))


@register_kernel("aten::transpose_copy.int_out")
def transpose_copy(self, dim0, dim1, out):
    op = "aten::transpose_copy.int_out"
    if self.ndim == 0:
        write(out, self)
        return
    write(out, np.swapaxes(self, wrap_dim(dim0, self.ndim, op), wrap_dim(dim1, self.ndim, op)))


@register_kernel("aten::t_copy.out")
def t_copy(self, out):
    check(self.ndim <= 2, "aten::t_copy.out", f"expects a tensor of at most 2 dims, got shape {list(self.shape)}")
    write(out, self.T)


@register_kernel("aten::expand_copy.out")
def expand_copy(self, size, implicit, out):
    """Broadcast to ``size`` (-1 keeps a dim), which is out's shape."""
    write(out, self)


@register_kernel("aten::repeat.out")
def repeat(self, repeats, out):
    """Tile ``self``: out viewed as (r0, s0, r1, s1, ...) receives self broadcast over the r's."""
    op = "aten::repeat.out"
    check(len(repeats) >= self.ndim, op, f"repeats {list(repeats)} has fewer entries than the input's {self.ndim} dims")
    sizes = (1,) * (len(repeats) - self.ndim) + self.shape
    check(out.shape == tuple(r * s for r, s in zip(repeats, sizes)), op,
          f"out has shape {list(out.shape)} for repeats {list(repeats)} of shape {list(self.shape)}")
    if out.size == 0:
        return
    shape, strides = [], []
    for r, s, stride in zip(repeats, sizes, out.strides):  # split each out dim into (repeat, size)
        shape += [r, s]
        strides += [stride * s, stride]
    blocks = as_strided(out, shape, strides)
    write(blocks, self.reshape([v for s in sizes for v in (1, s)]))


@register_kernel("aten::clone.out")
def clone(self, memory_format, out):
    write(out, self)


@register_kernel("aten::alias_copy.out")
def alias_copy(self, out):
    write(out, self)


@register_kernel("aten::_to_copy.out", "dim_order_ops::_to_dim_order_copy.out", "dim_order_ops::_clone_dim_order.out")
def to_copy(self, non_blocking, memory_format_or_dim_order, out):
    """A (casting) copy; out's strides already carry the requested memory format."""
    write(out, self)


@register_kernel("aten::copy.out")
def copy(self, src, non_blocking, out):
    """``self`` with ``src`` broadcast and cast into it: the result is just ``src``."""
    write(out, src)
