"""Reductions: sum, prod, mean, var/std, max/min, amax/amin, any, argmax/argmin, cumsum,
and the p-norm distances cdist/pdist."""

from __future__ import annotations

import numpy as np

from torchedge.kernels.dtypes import (
    BOOL,
    INT64,
    accumulate_dtype,
    category,
    convert,
    dtype_from_code,
    is_floating,
    is_integral,
)
from torchedge.kernels.portable.common import check, fail, finish, quiet, scratch, wrap_dim, wrap_dims, write
from torchedge.kernels.portable.shape_rules import broadcast_shapes, reduced, same_as
from torchedge.kernels.registry import register_kernel

__all__ = [
    "sum_dim",
    "prod",
    "prod_dim",
    "mean_dim",
    "var",
    "var_unbiased",
    "std",
    "std_unbiased",
    "max_dim",
    "min_dim",
    "max_all",
    "min_all",
    "amax",
    "amin",
    "any_dim",
    "argmax",
    "argmin",
    "cumsum",
    "cdist",
    "pdist",
]


def _sum_dtype(self: np.ndarray, dtype_code) -> np.dtype:
    # sum and cumsum: bool and integers accumulate in int64 unless a dtype is given
    return dtype_from_code(dtype_code, INT64 if category(self.dtype) < 2 else self.dtype)


def _in_integers(self: np.ndarray, acc: np.dtype) -> np.ndarray:
    """``self`` for a reduction accumulating in the integer dtype ``acc``: a float input
    converted first (by `convert`), as ATen converts it, not by NumPy's casts inside the ufunc."""
    return convert(self, acc) if is_integral(acc) and category(self.dtype) >= 2 else self


def _reduce_into(reduce, self, axes, keepdim, buffer_dtype, out, **kwargs) -> None:
    buf = scratch(out, buffer_dtype)
    with quiet():
        reduce(self, axis=axes, keepdims=keepdim, out=buf, **kwargs)
    finish(out, buf)


def _reduced_shape(dim_at: int | None, keepdim_at: int | None = None, outs: int = 1):
    """The shape rule of a reduction whose dim and keepdim arguments stand at these positions
    after self (dim None: the op reduces every dim); its ``outs`` outputs are alike. A dim is
    an int, a list (None or [] is every dim), or None (argmax, argmin: the flattened tensor)."""

    def reduction(op: str, self, *rest) -> list[tuple]:
        if dim_at is None or keepdim_at is None:
            return [()] * outs
        return [reduced(op, self.shape, rest[dim_at], rest[keepdim_at])] * outs

    return reduction


_OVER_DIM = _reduced_shape(0, 1)
_TO_0_DIM = _reduced_shape(None)
_VALUES_AND_INDICES = _reduced_shape(0, 1, outs=2)


@register_kernel("aten::sum.IntList_out", shape=_OVER_DIM)
def sum_dim(self, dim, keepdim, dtype, out):
    axes = wrap_dims(dim, self.ndim, "aten::sum.IntList_out")
    acc = accumulate_dtype(_sum_dtype(self, dtype))
    _reduce_into(np.sum, _in_integers(self, acc), axes, keepdim, acc, out, dtype=acc)


def _mean(op, self, axes, keepdim, dtype_code, out):
    dtype = dtype_from_code(dtype_code, self.dtype)
    check(
        category(dtype) >= 2,
        op,
        f"could not infer the output dtype: the input is {self.dtype}; "
        "mean needs a floating point input or an explicit dtype",
    )
    acc = accumulate_dtype(dtype)
    _reduce_into(np.mean, self, axes, keepdim, acc, out, dtype=acc)


@register_kernel("aten::mean.out", shape=_OVER_DIM)
def mean_dim(self, dim, keepdim, dtype, out):
    _mean("aten::mean.out", self, wrap_dims(dim, self.ndim, "aten::mean.out"), keepdim, dtype, out)


@register_kernel("aten::mean.dtype_out", shape=_TO_0_DIM)
def mean(self, dtype, out):
    _mean("aten::mean.dtype_out", self, tuple(range(self.ndim)), False, dtype, out)


def _extreme_kernel(op: str, reduce):
    def kernel(self, dim, keepdim, out):
        axes = wrap_dims(dim, self.ndim, op)
        check(
            all(self.shape[a] > 0 for a in axes),
            op,
            f"cannot reduce over a zero-size dimension (input shape {list(self.shape)}, dim {list(dim)})",
        )
        _reduce_into(reduce, self, axes, keepdim, self.dtype, out)  # nan propagates

    kernel.__name__ = op.split("::")[1].split(".")[0]
    return kernel


amax = register_kernel("aten::amax.out", shape=_OVER_DIM)(_extreme_kernel("aten::amax.out", np.max))
amin = register_kernel("aten::amin.out", shape=_OVER_DIM)(_extreme_kernel("aten::amin.out", np.min))


def _any_dims_shape(op: str, self, dim, keepdim, out) -> list[tuple]:
    """Unlike sum's, an empty dim list reduces nothing (None reduces every dim)."""
    if dim is not None and len(dim) == 0:
        return [self.shape]
    return [reduced(op, self.shape, dim, keepdim)]


@register_kernel("aten::any.dims_out", shape=_any_dims_shape)
def any_dims(self, dim, keepdim, out):
    # unlike sum's, an empty dim list reduces nothing (None reduces everything)
    axes = () if dim is not None and len(dim) == 0 else wrap_dims(dim, self.ndim, "aten::any.dims_out")
    _reduce_into(np.any, self, axes, keepdim, BOOL, out)


@register_kernel("aten::any.out", shape=_OVER_DIM)
def any_dim(self, dim, keepdim, out):
    any_dims(self, (dim,), keepdim, out)


@register_kernel("aten::any.all_out", shape=_TO_0_DIM)
def any_all(self, out):
    any_dims(self, None, False, out)


def _check_dim_not_empty(op: str, self, axis: int, dim: int) -> None:
    """The dim (``axis`` once wrapped) that argmax/argmin and max/min.dim reduce has elements."""
    if self.shape[axis] == 0:
        fail(op, f"expected reduction dim {dim} to have non-zero size (input shape {list(self.shape)})")


def _arg_kernel(op: str, reduce):
    def kernel(self, dim, keepdim, out):
        check(self.dtype != BOOL, op, "does not support bool input")
        if dim is None:  # an index into the flattened tensor
            check(self.size > 0, op, "cannot take the index of an extreme of an empty tensor without a dim")
            write(out, reduce(self.astype(accumulate_dtype(self.dtype), copy=False)))
            return
        axis = wrap_dim(dim, self.ndim, op)
        if self.ndim == 0:
            write(out, 0)
            return
        _check_dim_not_empty(op, self, axis, dim)
        x = self.astype(accumulate_dtype(self.dtype), copy=False)  # NumPy misplaces nan in bfloat16
        write(out, reduce(x, axis=axis, keepdims=keepdim))  # the first nan wins

    kernel.__name__ = op.split("::")[1].split(".")[0]
    return kernel


argmax = register_kernel("aten::argmax.out", shape=_OVER_DIM)(_arg_kernel("aten::argmax.out", np.argmax))
argmin = register_kernel("aten::argmin.out", shape=_OVER_DIM)(_arg_kernel("aten::argmin.out", np.argmin))


@register_kernel("aten::cumsum.out", shape=same_as())
def cumsum(self, dim, dtype, out):
    axis = wrap_dim(dim, self.ndim, "aten::cumsum.out")
    if self.ndim == 0:
        write(out, self)
        return
    acc = accumulate_dtype(_sum_dtype(self, dtype))
    if np.dtype(acc).kind == "f":
        acc = np.float64  # ATen's CPU cumsum accumulates floating types in double
    buf = scratch(out, acc)
    with quiet():
        np.cumsum(_in_integers(self, acc), axis=axis, dtype=acc, out=buf)
    finish(out, buf)


def _prod(op, self, axes, keepdim, dtype, out):
    acc = accumulate_dtype(_sum_dtype(self, dtype))  # integers wrap around in int64, as in ATen
    _reduce_into(np.prod, _in_integers(self, acc), axes, keepdim, acc, out, dtype=acc)


@register_kernel("aten::prod.out", shape=_TO_0_DIM)
def prod(self, dtype, out):
    _prod("aten::prod.out", self, tuple(range(self.ndim)), False, dtype, out)


@register_kernel("aten::prod.int_out", shape=_OVER_DIM)
def prod_dim(self, dim, keepdim, dtype, out):
    _prod("aten::prod.int_out", self, wrap_dims((dim,), self.ndim, "aten::prod.int_out"), keepdim, dtype, out)


def _variance(op, self, dim, correction, keepdim, out, root: bool) -> None:
    """Two-pass variance over ``dim`` (None or [] is every dim), divided by
    ``max(0, n - correction)``: too few elements give inf (or nan for 0/0), as in ATen.
    Of a complex tensor, the mean squared magnitude of the deviations, in the parts' dtype."""
    complex_input = self.dtype.kind == "c"
    check(
        is_floating(self.dtype) or complex_input,
        op,
        f"std and var only support floating point and complex dtypes, got {self.dtype}",
    )
    axes = wrap_dims(dim, self.ndim, op)
    n = int(np.prod([self.shape[a] for a in axes]))
    x = self.astype(accumulate_dtype(self.dtype), copy=False)
    with quiet():
        deviation = x - x.mean(axis=axes, keepdims=True)
        squares = np.abs(deviation) ** 2 if complex_input else deviation * deviation
        result = np.sum(squares, axis=axes, keepdims=keepdim) / squares.dtype.type(max(0.0, n - correction))
        write(out, np.sqrt(result) if root else result)


def _variance_kernel(op: str, root: bool):
    """var/std kernels: the ``.correction_out`` overloads take a correction (None means 1),
    the ``.out`` ones a bool ``unbiased`` (correction 1 or 0)."""
    if op.endswith(".correction_out"):

        def kernel(self, dim, correction, keepdim, out):
            _variance(op, self, dim, 1 if correction is None else correction, keepdim, out, root)
    else:

        def kernel(self, dim, unbiased, keepdim, out):
            _variance(op, self, dim, int(unbiased), keepdim, out, root)

    return register_kernel(op, shape=_reduced_shape(0, 2))(kernel)


var = _variance_kernel("aten::var.correction_out", root=False)
var_unbiased = _variance_kernel("aten::var.out", root=False)
std = _variance_kernel("aten::std.correction_out", root=True)
std_unbiased = _variance_kernel("aten::std.out", root=True)


def _extreme_with_index(op: str, pick):
    """max.dim / min.dim: the extreme along ``dim`` and the index of its first occurrence
    (a nan wins, and the first nan is reported)."""

    def kernel(self, dim, keepdim, values, indices):
        axis = wrap_dim(dim, self.ndim, op)
        if self.ndim == 0:
            write(values, self)
            write(indices, 0)
            return
        _check_dim_not_empty(op, self, axis, dim)
        index = np.expand_dims(pick(self.astype(accumulate_dtype(self.dtype), copy=False), axis=axis), axis)
        found = np.take_along_axis(self, index, axis=axis)
        write(values, found if keepdim else np.squeeze(found, axis))
        write(indices, index if keepdim else np.squeeze(index, axis))

    return kernel


max_dim = register_kernel("aten::max.dim_max", shape=_VALUES_AND_INDICES)(
    _extreme_with_index("aten::max.dim_max", np.argmax)
)
min_dim = register_kernel("aten::min.dim_min", shape=_VALUES_AND_INDICES)(
    _extreme_with_index("aten::min.dim_min", np.argmin)
)


def _extreme_of_all(op: str, reduce):
    def kernel(self, out):
        check(self.size > 0, op, "cannot reduce an empty tensor without a dim; give a dim or use amax/amin")
        with quiet():
            write(out, reduce(self.astype(accumulate_dtype(self.dtype), copy=False)))  # nan propagates

    return kernel


max_all = register_kernel("aten::max.unary_out", shape=_TO_0_DIM)(_extreme_of_all("aten::max.unary_out", np.max))
min_all = register_kernel("aten::min.unary_out", shape=_TO_0_DIM)(_extreme_of_all("aten::min.unary_out", np.min))


def _p_norm(diff: np.ndarray, p: float) -> np.ndarray:
    """The p-norm over the last axis of non-negative ``diff`` (p = 0 counts nonzeros)."""
    if p == 0:
        return np.count_nonzero(diff, axis=-1).astype(diff.dtype)
    if p == np.inf:
        return diff.max(axis=-1, initial=0)
    if p == 1:
        return diff.sum(axis=-1)
    if p == 2:
        return np.sqrt(np.sum(diff * diff, axis=-1))
    return np.sum(diff ** diff.dtype.type(p), axis=-1) ** diff.dtype.type(1.0 / p)


def _check_distance_input(op: str, p: float, *tensors) -> None:
    check(p >= 0, op, f"only supports non-negative p values, got {p}")
    for t in tensors:
        check(t.dtype in (np.float32, np.float64), op, f"only supports float32 and float64 inputs, got {t.dtype}")
    check(
        all(t.dtype == tensors[0].dtype for t in tensors),
        op,
        f"inputs must have the same dtype, got {[str(t.dtype) for t in tensors]}",
    )


def _check_cdist_inputs(op: str, x1, x2) -> None:
    if x1.ndim < 2 or x2.ndim < 2:
        fail(op, f"expects inputs of at least 2 dims, got shapes {list(x1.shape)} and {list(x2.shape)}")
    if x1.shape[-1] != x2.shape[-1]:
        fail(op, f"x1 and x2 must have the same number of columns, got {x1.shape[-1]} and {x2.shape[-1]}")


def _cdist_shape(op: str, x1, x2, p, compute_mode, out) -> list[tuple]:
    """Distances between the rows of x1 [..., P, M] and x2 [..., R, M]: [..., P, R], the
    batch dims broadcast."""
    _check_cdist_inputs(op, x1, x2)
    return [broadcast_shapes(op, x1.shape[:-2], x2.shape[:-2]) + (x1.shape[-2], x2.shape[-2])]


@register_kernel("aten::_cdist_forward.out", shape=_cdist_shape)
def cdist(x1, x2, p, compute_mode, out):
    """Distances between the rows of x1 [..., P, M] and x2 [..., R, M] (batch dims broadcast),
    computed directly for every compute_mode (ATen's matmul shortcut for p=2 only trades accuracy)."""
    op = "aten::_cdist_forward.out"
    _check_distance_input(op, p, x1, x2)
    _check_cdist_inputs(op, x1, x2)
    check(compute_mode in (None, 0, 1, 2), op, f"compute_mode must be 0, 1 or 2, got {compute_mode}")
    with quiet():
        write(out, _p_norm(np.abs(x1[..., :, None, :] - x2[..., None, :, :]), p))


def _check_pdist_input(op: str, self) -> None:
    if self.ndim != 2:
        fail(op, f"expects a 2-D input, got shape {list(self.shape)}")


def _pdist_shape(op: str, self, p, out) -> list[tuple]:
    """One distance per pair of rows i < j."""
    _check_pdist_input(op, self)
    n = self.shape[0]
    return [(n * (n - 1) // 2,)]


@register_kernel("aten::_pdist_forward.out", shape=_pdist_shape)
def pdist(self, p, out):
    """Distances between the rows i < j of self [N, M], in row-major order of (i, j)."""
    op = "aten::_pdist_forward.out"
    _check_distance_input(op, p, self)
    _check_pdist_input(op, self)
    first, second = np.triu_indices(self.shape[0], 1)
    with quiet():
        write(out, _p_norm(np.abs(self[first] - self[second]), p))
