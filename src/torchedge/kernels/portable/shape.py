"""Copies that only rearrange elements: views, permutes, flips, rolls, diagonals, strided
views, expands, repeats, plain copies."""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from torchedge.kernels.portable.common import check, check_writable, fail, wrap_dim, write
from torchedge.kernels.portable.shape_rules import replaced, same_as
from torchedge.kernels.registry import register_kernel

__all__ = [
    "reshape_copy",
    "permute_copy",
    "transpose_copy",
    "t_copy",
    "expand_copy",
    "repeat",
    "clone",
    "alias_copy",
    "to_copy",
    "copy",
    "copy_",
    "flip",
    "roll",
    "diagonal_copy",
    "as_strided_copy",
]


def infer_size(op: str, size, numel: int) -> tuple:
    """``size`` with its one -1 (if any) standing for what the ``numel`` elements leave."""
    size = tuple(size)
    check(
        all(n >= -1 for n in size) and size.count(-1) <= 1,
        op,
        f"invalid shape {list(size)}: sizes must be non-negative, with at most one -1 to infer",
    )
    known = math.prod(n for n in size if n != -1)
    if -1 in size:
        check(known > 0 and numel % known == 0, op, f"shape {list(size)} is invalid for an input of {numel} elements")
        return replaced(size, size.index(-1), numel // known)
    check(known == numel, op, f"shape {list(size)} is invalid for an input of {numel} elements")
    return size


def _view_shape(op: str, self, size, out) -> list[tuple]:
    return [infer_size(op, size, self.size)]


def _unsqueeze_shape(op: str, self, dim, out) -> list[tuple]:
    axis = wrap_dim(dim, self.ndim + 1, op)
    return [self.shape[:axis] + (1,) + self.shape[axis:]]


def _squeezed(op: str, shape: tuple, dims) -> tuple:
    """``shape`` without those of ``dims`` that have size 1 (other dims stay)."""
    axes = {wrap_dim(d, len(shape), op) for d in dims}
    check(len(axes) == len(dims), op, f"dim {list(dims)} lists a dimension twice")
    return tuple(n for d, n in enumerate(shape) if not (d in axes and n == 1))


def _squeeze_dim_shape(op: str, self, dim, out) -> list[tuple]:
    return [_squeezed(op, self.shape, (dim,))]


def _squeeze_dims_shape(op: str, self, dim, out) -> list[tuple]:
    return [_squeezed(op, self.shape, tuple(dim))]


@register_kernel("aten::view_copy.out", "aten::_unsafe_view.out", shape=_view_shape)
@register_kernel("aten::unsqueeze_copy.out", shape=_unsqueeze_shape)
@register_kernel("aten::squeeze_copy.dim_out", shape=_squeeze_dim_shape)
@register_kernel("aten::squeeze_copy.dims_out", shape=_squeeze_dims_shape)
def reshape_copy(self, shape_argument, out):
    """Every op here keeps the element order, so out's (planned) shape says it all."""
    if self.size != out.size:
        fail(
            "aten::view_copy.out",
            f"cannot reshape {list(self.shape)} ({self.size} elements) to {list(out.shape)} ({out.size} elements)",
        )
    write(out, self.reshape(out.shape))


def _permutation(op: str, self, dims) -> list[int]:
    """``dims`` wrapped: a permutation of self's dims."""
    axes = [wrap_dim(d, self.ndim, op) for d in dims]
    if sorted(axes) != list(range(self.ndim)):
        fail(op, f"dims {list(dims)} is not a permutation of {self.ndim} dims")
    return axes


def _permute_shape(op: str, self, dims, out) -> list[tuple]:
    return [tuple(self.shape[a] for a in _permutation(op, self, dims))]


@register_kernel("aten::permute_copy.out", shape=_permute_shape)
def permute_copy(self, dims, out):
    write(out, self.transpose(_permutation("aten::permute_copy.out", self, dims)))


def _transpose_shape(op: str, self, dim0, dim1, out) -> list[tuple]:
    if self.ndim == 0:
        return [()]
    shape = list(self.shape)
    a, b = wrap_dim(dim0, self.ndim, op), wrap_dim(dim1, self.ndim, op)
    shape[a], shape[b] = shape[b], shape[a]
    return [tuple(shape)]


@register_kernel("aten::transpose_copy.int_out", shape=_transpose_shape)
def transpose_copy(self, dim0, dim1, out):
    op = "aten::transpose_copy.int_out"
    if self.ndim == 0:
        write(out, self)
        return
    write(out, np.swapaxes(self, wrap_dim(dim0, self.ndim, op), wrap_dim(dim1, self.ndim, op)))


def _check_t(op: str, self) -> None:
    if self.ndim > 2:
        fail(op, f"expects a tensor of at most 2 dims, got shape {list(self.shape)}")


def _t_shape(op: str, self, out) -> list[tuple]:
    _check_t(op, self)
    return [self.shape[::-1]]


@register_kernel("aten::t_copy.out", shape=_t_shape)
def t_copy(self, out):
    _check_t("aten::t_copy.out", self)
    write(out, self.T)


def _expand_shape(op: str, self, size, implicit, out) -> list[tuple]:
    """``size``, where -1 keeps an existing dim; an existing dim must be 1 or stay as it is."""
    lead = len(size) - self.ndim
    check(lead >= 0, op, f"the number of sizes ({len(size)}) must be at least the number of dims ({self.ndim})")
    result = []
    for i, n in enumerate(size):
        existing = self.shape[i - lead] if i >= lead else None
        if n == -1 and existing is not None:
            n = existing
        check(n >= 0, op, f"size {n} in {list(size)} is not allowed (-1 keeps an existing dim only)")
        check(
            existing in (None, 1, n),
            op,
            f"cannot expand shape {list(self.shape)} to {list(size)}: dim {i} has size {existing}, not 1",
        )
        result.append(n)
    return [tuple(result)]


@register_kernel("aten::expand_copy.out", shape=_expand_shape)
def expand_copy(self, size, implicit, out):
    """Broadcast to ``size`` (-1 keeps a dim), which is out's shape."""
    write(out, self)


def _repeat_sizes(op: str, self, repeats) -> tuple:
    """self's shape with 1s in front, one size per repeat."""
    if len(repeats) < self.ndim:
        fail(op, f"repeats {list(repeats)} has fewer entries than the input's {self.ndim} dims")
    if min(repeats, default=0) < 0:
        fail(op, f"repeats {list(repeats)} must not be negative")
    return (1,) * (len(repeats) - self.ndim) + self.shape


def _repeat_shape(op: str, self, repeats, out) -> list[tuple]:
    return [tuple(r * s for r, s in zip(repeats, _repeat_sizes(op, self, repeats)))]


@register_kernel("aten::repeat.out", shape=_repeat_shape)
def repeat(self, repeats, out):
    """Tile ``self``: out viewed as (r0, s0, r1, s1, ...) receives self broadcast over the r's."""
    op = "aten::repeat.out"
    sizes = _repeat_sizes(op, self, repeats)
    check(
        out.shape == tuple(r * s for r, s in zip(repeats, sizes)),
        op,
        f"out has shape {list(out.shape)} for repeats {list(repeats)} of shape {list(self.shape)}",
    )
    if out.size == 0:
        return
    shape, strides = [], []
    for r, s, stride in zip(repeats, sizes, out.strides):  # split each out dim into (repeat, size)
        shape += [r, s]
        strides += [stride * s, stride]
    blocks = as_strided(out, shape, strides)
    write(blocks, self.reshape([v for s in sizes for v in (1, s)]))


@register_kernel("aten::clone.out", shape=same_as())
def clone(self, memory_format, out):
    write(out, self)


@register_kernel("aten::alias_copy.out", shape=same_as())
def alias_copy(self, out):
    write(out, self)


@register_kernel(
    "aten::_to_copy.out",
    "dim_order_ops::_to_dim_order_copy.out",
    "dim_order_ops::_clone_dim_order.out",
    shape=same_as(),
)
def to_copy(self, non_blocking, memory_format_or_dim_order, out):
    """A (casting) copy; out's strides already carry the requested memory format."""
    write(out, self)


def _check_broadcasts_to(op: str, src_shape: tuple, shape: tuple) -> None:
    """copy's ``src`` broadcasts to self's ``shape`` (never the other way)."""
    if src_shape == shape:
        return
    try:
        fits = np.broadcast_shapes(src_shape, shape) == shape
    except ValueError:
        fits = False
    if not fits:
        fail(op, f"src of shape {list(src_shape)} cannot be broadcast to self's shape {list(shape)}")


def _copy_into(op: str, target, src) -> None:
    """``src`` broadcast to ``target``'s shape and cast into it."""
    _check_broadcasts_to(op, src.shape, target.shape)
    write(target, src)


def _copy_shape(op: str, self, src, non_blocking, out=None) -> list[tuple]:
    """``self`` with ``src`` broadcast into it (in place for ``copy_``, which has no out)."""
    _check_broadcasts_to(op, src.shape, self.shape)
    return [self.shape]


@register_kernel("aten::copy.out", shape=_copy_shape)
def copy(self, src, non_blocking, out):
    """``self`` with ``src`` broadcast and cast into it: the result is just ``src``, so self is
    never read (and ``out`` may be self's own memory)."""
    _copy_into("aten::copy.out", out, src)


@register_kernel("aten::copy_", shape=_copy_shape)
def copy_(self, src, non_blocking):
    """``Tensor.copy_``: ``src`` broadcast and cast into ``self`` in place."""
    op = "aten::copy_"
    check_writable(op, self)
    _copy_into(op, self, src)


@register_kernel("aten::flip.out", shape=same_as())
def flip(self, dims, out):
    op = "aten::flip.out"
    axes = [wrap_dim(d, self.ndim, op) for d in dims]
    check(len(set(axes)) == len(axes), op, f"dims {list(dims)} lists a dimension twice")
    write(out, np.flip(self, axis=tuple(axes)) if self.ndim else self)


@register_kernel("aten::roll.out", shape=same_as())
def roll(self, shifts, dims, out):
    """Rotate along each of ``dims`` by its shift; with no dims, rotate the flattened tensor."""
    op = "aten::roll.out"
    if len(dims) == 0:
        check(len(shifts) == 1, op, f"without dims, shifts must hold one value, got {list(shifts)}")
        write(out, np.roll(self.reshape(-1), shifts[0]).reshape(self.shape))
        return
    check(len(shifts) == len(dims), op, f"shifts {list(shifts)} and dims {list(dims)} must have the same length")
    check(self.ndim > 0, op, "cannot roll a 0-dim tensor along a dim")
    write(out, np.roll(self, tuple(shifts), axis=tuple(wrap_dim(d, self.ndim, op) for d in dims)))


def _diagonal_axes(op: str, self, dim1, dim2) -> tuple[int, int]:
    a, b = wrap_dim(dim1, self.ndim, op), wrap_dim(dim2, self.ndim, op)
    if a == b:
        fail(op, f"diagonal dims cannot be identical, got {dim1} and {dim2}")
    return a, b


def _diagonal_shape(op: str, self, offset, dim1, dim2, out) -> list[tuple]:
    """The (dim1, dim2) planes' ``offset``-th diagonal, as a new last dim."""
    a, b = _diagonal_axes(op, self, dim1, dim2)
    rows, columns = self.shape[a], self.shape[b]
    length = min(rows, columns - offset) if offset >= 0 else min(rows + offset, columns)
    return [tuple(n for d, n in enumerate(self.shape) if d not in (a, b)) + (max(length, 0),)]


@register_kernel("aten::diagonal_copy.out", shape=_diagonal_shape)
def diagonal_copy(self, offset, dim1, dim2, out):
    """The ``offset``-th diagonal of the (dim1, dim2) planes, as a new last dim."""
    op = "aten::diagonal_copy.out"
    axis1, axis2 = _diagonal_axes(op, self, dim1, dim2)
    write(out, np.diagonal(self, offset, axis1, axis2))


def _check_size_stride(op: str, size, stride) -> None:
    if len(size) != len(stride):
        fail(op, f"size {list(size)} and stride {list(stride)} must have the same length")
    if min(size, default=0) < 0:
        fail(op, f"size {list(size)} must not be negative")


def _as_strided_shape(op: str, self, size, stride, storage_offset, out) -> list[tuple]:
    _check_size_stride(op, size, stride)
    return [tuple(size)]


@register_kernel("aten::as_strided_copy.out", shape=_as_strided_shape)
def as_strided_copy(self, size, stride, storage_offset, out):
    """A strided window, in elements, over self's elements in memory order (as ExecuTorch,
    whose tensors are contiguous in their dim order, reads the input's data pointer)."""
    op = "aten::as_strided_copy.out"
    offset = storage_offset or 0
    _check_size_stride(op, size, stride)
    check(
        all(s >= 0 for s in stride) and offset >= 0,
        op,
        f"negative strides or offsets are not supported, got stride {list(stride)}, offset {offset}",
    )
    if 0 in size:
        return
    storage = np.ascontiguousarray(self).reshape(-1)
    last = offset + sum((n - 1) * s for n, s in zip(size, stride))
    check(
        last < storage.size,
        op,
        f"size {list(size)}, stride {list(stride)} and offset {offset} reach element "
        f"{last}, past the input's {storage.size} elements",
    )
    window = as_strided(storage[offset:], tuple(size), tuple(s * storage.itemsize for s in stride), writeable=False)
    write(out, window)
