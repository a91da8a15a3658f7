"""Views made copies: view/reshape, (un)squeeze, permute, transpose, expand, repeat,
diagonal, as_strided."""

from __future__ import annotations

import math

from torchedge.kernels.shapes.common import check, replaced, wrap_dim
from torchedge.kernels.shapes.registry import register_named

__all__ = ["infer_size", "view", "unsqueeze", "squeeze_dim", "squeeze_dims", "permute", "transpose", "t",
           "expand", "repeat", "diagonal", "as_strided"]


def infer_size(op: str, size, numel: int) -> tuple:
    """``size`` with its one -1 (if any) standing for what the ``numel`` elements leave."""
    size = tuple(size)
    check(all(n >= -1 for n in size) and size.count(-1) <= 1, op,
          f"invalid shape {list(size)}: sizes must be non-negative, with at most one -1 to infer")
    known = math.prod(n for n in size if n != -1)
    if -1 in size:
        check(known > 0 and numel % known == 0, op,
              f"shape {list(size)} is invalid for an input of {numel} elements")
        return replaced(size, size.index(-1), numel // known)
    check(known == numel, op, f"shape {list(size)} is invalid for an input of {numel} elements")
    return size


@register_named("aten::view_copy.out", "aten::_unsafe_view.out")
def view(op: str, self, size, out) -> list[tuple]:
    return [infer_size(op, size, self.size)]


@register_named("aten::unsqueeze_copy.out")
def unsqueeze(op: str, self, dim, out) -> list[tuple]:
    axis = wrap_dim(dim, self.ndim + 1, op)
    return [self.shape[:axis] + (1,) + self.shape[axis:]]


def _squeezed(op: str, shape: tuple, dims) -> tuple:
    """``shape`` without those of ``dims`` that have size 1 (other dims stay)."""
    axes = {wrap_dim(d, len(shape), op) for d in dims}
    check(len(axes) == len(dims), op, f"dim {list(dims)} lists a dimension twice")
    return tuple(n for d, n in enumerate(shape) if not (d in axes and n == 1))


@register_named("aten::squeeze_copy.dim_out")
def squeeze_dim(op: str, self, dim, out) -> list[tuple]:
    return [_squeezed(op, self.shape, (dim,))]


@register_named("aten::squeeze_copy.dims_out")
def squeeze_dims(op: str, self, dim, out) -> list[tuple]:
    return [_squeezed(op, self.shape, tuple(dim))]


@register_named("aten::permute_copy.out")
def permute(op: str, self, dims, out) -> list[tuple]:
    axes = [wrap_dim(d, self.ndim, op) for d in dims]
    check(sorted(axes) == list(range(self.ndim)), op, f"dims {list(dims)} is not a permutation of {self.ndim} dims")
    return [tuple(self.shape[a] for a in axes)]


@register_named("aten::transpose_copy.int_out")
def transpose(op: str, self, dim0, dim1, out) -> list[tuple]:
    if self.ndim == 0:
        return [()]
    shape = list(self.shape)
    a, b = wrap_dim(dim0, self.ndim, op), wrap_dim(dim1, self.ndim, op)
    shape[a], shape[b] = shape[b], shape[a]
    return [tuple(shape)]


@register_named("aten::t_copy.out")
def t(op: str, self, out) -> list[tuple]:
    check(self.ndim <= 2, op, f"expects a tensor of at most 2 dims, got shape {list(self.shape)}")
    return [self.shape[::-1]]


@register_named("aten::expand_copy.out")
def expand(op: str, self, size, implicit, out) -> list[tuple]:
    """``size``, where -1 keeps an existing dim; an existing dim must be 1 or stay as it is."""
    lead = len(size) - self.ndim
    check(lead >= 0, op, f"the number of sizes ({len(size)}) must be at least the number of dims ({self.ndim})")
    result = []
    for i, n in enumerate(size):
        existing = self.shape[i - lead] if i >= lead else None
        if n == -1 and existing is not None:
            n = existing
        check(n >= 0, op, f"size {n} in {list(size)} is not allowed (-1 keeps an existing dim only)")
        check(existing in (None, 1, n), op, f"cannot expand shape {list(self.shape)} to {list(size)}: "
                                            f"dim {i} has size {existing}, not 1")
        result.append(n)
    return [tuple(result)]


@register_named("aten::repeat.out")
def repeat(op: str, self, repeats, out) -> list[tuple]:
    check(len(repeats) >= self.ndim, op,
          f"repeats {list(repeats)} has fewer entries than the input's {self.ndim} dims")
    check(min(repeats, default=0) >= 0, op, f"repeats {list(repeats)} must not be negative")
    sizes = (1,) * (len(repeats) - self.ndim) + self.shape
    return [tuple(r * s for r, s in zip(repeats, sizes))]


@register_named("aten::diagonal_copy.out")
def diagonal(op: str, self, offset, dim1, dim2, out) -> list[tuple]:
    """The (dim1, dim2) planes' ``offset``-th diagonal, as a new last dim."""
    a, b = wrap_dim(dim1, self.ndim, op), wrap_dim(dim2, self.ndim, op)
    check(a != b, op, f"diagonal dims cannot be identical, got {dim1} and {dim2}")
    rows, columns = self.shape[a], self.shape[b]
    length = min(rows, columns - offset) if offset >= 0 else min(rows + offset, columns)
    return [tuple(n for d, n in enumerate(self.shape) if d not in (a, b)) + (max(length, 0),)]


@register_named("aten::as_strided_copy.out")
def as_strided(op: str, self, size, stride, storage_offset, out) -> list[tuple]:
    check(len(size) == len(stride), op, f"size {list(size)} and stride {list(stride)} must have the same length")
    check(min(size, default=0) >= 0, op, f"size {list(size)} must not be negative")
    return [tuple(size)]
