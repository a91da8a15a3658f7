"""Scatters: writes (or reductions) of values into a copy of ``self`` at indexed positions.

scatter/scatter_add/scatter_reduce place ``src[i][j][k]`` at ``out[index[i][j][k]][j][k]``
(for dim 0); index_put writes at advanced-indexing positions; masked_scatter at a mask's
true positions. Duplicate positions accumulate in the reducing variants (NumPy's
``ufunc.at``); for plain writes the last one wins. 16-bit floats reduce in float32, except
where index_put updates self in place (``index_put_``, or an ``out`` that is self's own memory).
"""

from __future__ import annotations

import numpy as np

from torchedge.errors import KernelError
from torchedge.kernels.dtypes import BOOL, accumulate_dtype, category, is_integral
from torchedge.kernels.portable.common import (
    aliases,
    as_scalar,
    check,
    check_writable,
    fail,
    finish,
    scratch,
    wrap_dim,
    write,
)
from torchedge.kernels.portable.indexing import index_key
from torchedge.kernels.portable.shape_rules import broadcast_shapes, same_as
from torchedge.kernels.registry import register_kernel

__all__ = [
    "scatter_src",
    "scatter_value",
    "scatter_reduce_src",
    "scatter_reduce_value",
    "scatter_add",
    "scatter_reduce",
    "index_put",
    "index_put_",
    "masked_scatter",
]

_UFUNCS = {"sum": np.add, "mean": np.add, "prod": np.multiply, "amax": np.maximum, "amin": np.minimum}
_LEGACY_REDUCE = {"add": "sum", "multiply": "prod"}  # scatter(..., reduce=) spells them so


def _identity(reduce: str, dtype: np.dtype):
    """The start value of a position whose own value is excluded (include_self=False)."""
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    low = reduce == "amax"
    if dtype == BOOL:
        return not low
    if is_integral(dtype):
        return np.iinfo(dtype).min if low else np.iinfo(dtype).max
    return -np.inf if low else np.inf


def _positions(op: str, self, dim, index, src) -> tuple:
    """The index tuple of the positions ``index`` scatters to in a tensor shaped like self,
    and the window of ``src`` (None for a scalar) that goes there."""
    check(is_integral(index.dtype), op, f"index must be an integer tensor, got {index.dtype}")
    shape = self.shape or (1,)  # a 0-dim tensor acts as a 1-dim one
    index = index.reshape(index.shape or (1,))
    axis = wrap_dim(dim, len(shape), op)
    check(index.ndim == len(shape), op, f"index has {index.ndim} dims, self has {len(shape)}")
    fits = all(i <= s for d, (i, s) in enumerate(zip(index.shape, shape)) if d != axis)
    if src is not None:
        src = src.reshape(src.shape or (1,))
        fits = fits and src.ndim == index.ndim and all(i <= s for i, s in zip(index.shape, src.shape))
        src = src[tuple(slice(0, n) for n in index.shape)]
    check(
        fits,
        op,
        f"index shape {list(index.shape)} must not exceed self shape {list(self.shape)} outside dim "
        f"{dim}, nor src shape {list(np.shape(src))}",
    )
    low, high = int(index.min()), int(index.max())
    check(
        0 <= low and high < shape[axis],
        op,
        f"index {low if low < 0 else high} is out of bounds for dimension {dim} of size {shape[axis]}",
    )
    positions = list(np.indices(index.shape, sparse=True))
    positions[axis] = index
    return tuple(positions), src


def _scatter(op: str, self, dim, index, src, reduce, include_self, out) -> None:
    """out = self with src scattered in: written (reduce None) or reduced by ``reduce``."""
    tensor = isinstance(src, np.ndarray)
    if tensor:
        check(src.dtype == self.dtype, op, f"self and src must have the same dtype, got {self.dtype} and {src.dtype}")
    check(reduce is None or reduce in _UFUNCS, op, f"reduce must be one of {sorted(_UFUNCS)}, got {reduce!r}")
    check(reduce != "mean" or self.dtype != BOOL, op, "reduce='mean' is not supported for bool tensors")
    buf = scratch(out, self.dtype if reduce is None else accumulate_dtype(self.dtype))
    write(buf, self)
    if index.size == 0:  # nothing to scatter, and ATen checks no shapes
        finish(out, buf)
        return
    positions, window = _positions(op, self, dim, index, src if tensor else None)
    values = window.astype(buf.dtype, copy=False) if tensor else as_scalar(src, self.dtype).astype(buf.dtype)
    view = buf.reshape(buf.shape or (1,))
    if reduce is None:
        view[positions] = values
    else:
        if not include_self:
            view[positions] = _identity(reduce, buf.dtype)
        _UFUNCS[reduce].at(view, positions, values)
        if reduce == "mean":
            _divide_by_count(view, positions, include_self)
    finish(out, buf)


def _divide_by_count(view, positions, include_self: bool) -> None:
    """Mean = sum / number of contributions (self included or not); integers floor-divide."""
    count = np.full(view.shape, int(include_self), np.int64)
    np.add.at(count, positions, 1)
    count[count == 0] = 1
    if category(view.dtype) >= 2:
        np.divide(view, count, out=view, casting="unsafe")
    else:
        np.floor_divide(view, count, out=view, casting="unsafe")


@register_kernel("aten::scatter.src_out", shape=same_as())
def scatter_src(self, dim, index, src, out):
    _scatter("aten::scatter.src_out", self, dim, index, src, None, True, out)


@register_kernel("aten::scatter.value_out", shape=same_as())
def scatter_value(self, dim, index, value, out):
    _scatter("aten::scatter.value_out", self, dim, index, value, None, True, out)


def _legacy_reduce(op: str, reduce: str) -> str:
    """scatter's ``reduce=`` spelling of a reduction, as scatter_reduce names it."""
    if reduce not in _LEGACY_REDUCE:
        fail(op, f"reduce must be 'add' or 'multiply', got {reduce!r}")
    return _LEGACY_REDUCE[reduce]


@register_kernel("aten::scatter.reduce_out", shape=same_as())
def scatter_reduce_src(self, dim, index, src, reduce, out):
    op = "aten::scatter.reduce_out"
    _scatter(op, self, dim, index, src, _legacy_reduce(op, reduce), True, out)


@register_kernel("aten::scatter.value_reduce_out", shape=same_as())
def scatter_reduce_value(self, dim, index, value, reduce, out):
    op = "aten::scatter.value_reduce_out"
    _scatter(op, self, dim, index, value, _legacy_reduce(op, reduce), True, out)


@register_kernel("aten::scatter_add.out", shape=same_as())
def scatter_add(self, dim, index, src, out):
    _scatter("aten::scatter_add.out", self, dim, index, src, "sum", True, out)


@register_kernel("aten::scatter_reduce.two_out", shape=same_as())
def scatter_reduce(self, dim, index, src, reduce, include_self, out):
    """reduce is sum, prod, mean, amax or amin (nan propagates through amax/amin)."""
    _scatter("aten::scatter_reduce.two_out", self, dim, index, src, reduce, include_self, out)


def _index_put(op: str, self, indices, values, accumulate, out) -> None:
    """out = self with ``out[indices] = values`` (or ``+=``). When out is self's own memory only
    the indexed positions are touched, and 16-bit floats accumulate in their own dtype, one
    rounding per value as ATen's CPU kernel does; a separate out accumulates in float32."""
    if values.dtype != self.dtype:
        fail(op, f"values must have self's dtype {self.dtype}, got {values.dtype}")
    check(any(i is not None for i in indices), op, "needs at least one index tensor (all indices are None)")
    key = index_key(op, self, indices)
    if aliases(out, self):
        _put(op, out, key, values, accumulate)
        return
    buf = scratch(out, accumulate_dtype(self.dtype) if accumulate else self.dtype)
    write(buf, self)
    _put(op, buf, key, values, accumulate)
    finish(out, buf)


def _put(op: str, target, key: tuple, values, accumulate: bool) -> None:
    """``target[key] = values`` (the last of duplicate positions wins), or ``+=`` (they add up)."""
    try:
        if accumulate:
            np.add.at(target, key, values.astype(target.dtype, copy=False))
        else:
            target[key] = values
    except (IndexError, ValueError) as error:  # values that do not broadcast to the indexed shape
        raise KernelError(
            f"{op}: values of shape {list(values.shape)} do not fit the indexed positions: {error}"
        ) from None


@register_kernel("aten::index_put.out", shape=same_as())
def index_put(self, indices, values, accumulate, out):
    """out = self with ``out[indices] = values`` (or ``+=``, duplicates adding up)."""
    _index_put("aten::index_put.out", self, indices, values, accumulate, out)


@register_kernel("aten::index_put_", shape=same_as())
def index_put_(self, indices, values, accumulate):
    """``self[indices] = values`` (or ``+=``) in place."""
    op = "aten::index_put_"
    check_writable(op, self)
    _index_put(op, self, indices, values, accumulate, self)


def _masked_scatter_shape(op: str, self, mask, source, out) -> list[tuple]:
    """self and mask broadcast; source only supplies elements."""
    return [broadcast_shapes(op, self.shape, mask.shape)]


@register_kernel("aten::masked_scatter.out", shape=_masked_scatter_shape)
def masked_scatter(self, mask, source, out):
    """out = broadcast(self, mask), with its masked positions (in row-major order) taking the
    first elements of ``source``."""
    op = "aten::masked_scatter.out"
    check(mask.dtype == BOOL, op, f"mask must be a bool tensor, got {mask.dtype}")
    check(source.dtype == self.dtype, op, f"source must have self's dtype {self.dtype}, got {source.dtype}")
    (shape,) = _masked_scatter_shape(op, self, mask, source, out)
    if shape != out.shape:
        fail(op, f"self {list(self.shape)} and mask {list(mask.shape)} must broadcast to out's shape {list(out.shape)}")
    where = np.broadcast_to(mask, out.shape)
    count = int(np.count_nonzero(where))
    check(source.size >= count, op, f"source has {source.size} elements, fewer than the mask's {count} true values")
    write(out, self)
    out[where] = source.reshape(-1)[:count]
