"""Order statistics and moments along a dim: median, nanmedian, mode, kthvalue, var_mean
and std_mean.

nan counts as larger than every number. median gives the lower of the two middle values,
and nan (the first nan's index) for a slice holding one; nanmedian passes nans over (nan
for an all-nan slice). Among equal values, median and nanmedian report the index that a
stable ascending sort puts at the chosen rank (as eager's median does), kthvalue the index
that eager's quickselect leaves there, and mode reports the smallest most frequent value and
the last index holding it.
"""

from __future__ import annotations

import math

import numpy as np

from torchedge.kernels.dtypes import BOOL, INT64, category
from torchedge.kernels.portable.common import check, fail, quiet, wrap_dim, wrap_dims, write
from torchedge.kernels.portable.shape_rules import reduced
from torchedge.kernels.registry import register_kernel

__all__ = ["median", "median_dim", "nanmedian", "nanmedian_dim", "mode", "kthvalue", "var_mean", "std_mean"]


def _comparable(x: np.ndarray) -> np.ndarray:
    """``x`` in a dtype NumPy orders correctly (bfloat16 and float16 through float32)."""
    return x.astype(np.float32) if x.dtype.itemsize == 2 and category(x.dtype) == 2 else x


def _to_0_dim(op: str, self, out) -> list[tuple]:
    return [()]


def _check_not_bool(op: str, self) -> None:
    if self.dtype == BOOL:
        fail(op, "is not implemented for dtype bool")


def _median_of_all(op: str, self, out, skip_nan: bool) -> None:
    _check_not_bool(op, self)
    x = _comparable(self).reshape(-1)
    if category(x.dtype) == 2:
        nan = np.isnan(x)
        if nan.any() and not skip_nan:
            write(out, np.nan)
            return
        x = x[~nan]
    with quiet():
        write(out, np.nan if x.size == 0 else np.partition(x, (x.size - 1) // 2)[(x.size - 1) // 2])


@register_kernel("aten::median.out", shape=_to_0_dim)
def median(self, out):
    _median_of_all("aten::median.out", self, out, skip_nan=False)


@register_kernel("aten::nanmedian.out", shape=_to_0_dim)
def nanmedian(self, out):
    _median_of_all("aten::nanmedian.out", self, out, skip_nan=True)


def _values_and_indices(op: str, self, dim, keepdim, *rest) -> list[tuple]:
    shape = reduced(op, self.shape, dim, keepdim)
    return [shape, shape]


def _kth_shape(op: str, self, k, dim, keepdim, values, indices) -> list[tuple]:
    return _values_and_indices(op, self, dim, keepdim)


def _along(op: str, self, dim, values, indices, allow_bool: bool = False):
    """Checks; ``self`` as a 2-d (rows, dim) array in an orderable dtype, or None when there is
    nothing to compute (0-dim self written through, or no rows)."""
    if not allow_bool:
        _check_not_bool(op, self)
    check(values.dtype == self.dtype, op, f"expected values to have dtype {self.dtype}, got {values.dtype}")
    check(indices.dtype == INT64, op, f"expected indices to have dtype int64, got {indices.dtype}")
    axis = wrap_dim(dim, self.ndim, op)
    if self.ndim == 0:
        write(values, self)
        write(indices, 0)
        return None, axis
    check(
        self.shape[axis] > 0, op, f"expected reduction dim {dim} to have non-zero size (input shape {list(self.shape)})"
    )
    x = np.moveaxis(self.view(np.uint8) if self.dtype == BOOL else _comparable(self), axis, -1)
    return x.reshape(-1, self.shape[axis]), axis


def _write_picked(self, axis, keepdim, index: np.ndarray, values, indices) -> None:
    """Write the picked positions (one per row) and the values of self there."""
    kept = list(self.shape)
    kept[axis] = 1
    index = np.moveaxis(index.reshape(kept[:axis] + kept[axis + 1 :] + [1]), -1, axis)
    found = np.take_along_axis(self, index, axis=axis)
    write(values, found if keepdim else np.squeeze(found, axis))
    write(indices, index if keepdim else np.squeeze(index, axis))


def _rank_kernel(op: str, skip_nan: bool):
    def kernel(self, dim, keepdim, values, indices):
        x, axis = _along(op, self, dim, values, indices)
        if x is None or x.size == 0:
            return
        order = np.argsort(x, axis=-1, kind="stable")  # nan last
        nan = np.isnan(x) if category(x.dtype) == 2 else np.zeros(x.shape, bool)
        if skip_nan:
            rank = np.maximum((x.shape[-1] - nan.sum(-1)) - 1, 0) // 2
        else:
            rank = np.full(x.shape[0], (x.shape[-1] - 1) // 2)
        picked = np.take_along_axis(order, rank[:, None], axis=-1)[:, 0]
        if not skip_nan:
            picked = np.where(nan.any(-1), np.argmax(nan, axis=-1), picked)  # the first nan
        _write_picked(self, axis, keepdim, picked, values, indices)

    return kernel


median_dim = register_kernel("aten::median.dim_values", shape=_values_and_indices)(
    _rank_kernel("aten::median.dim_values", skip_nan=False)
)
nanmedian_dim = register_kernel("aten::nanmedian.dim_values", shape=_values_and_indices)(
    _rank_kernel("aten::nanmedian.dim_values", skip_nan=True)
)


def _greater_or_nan(x, y) -> bool:
    return (x != x and y == y) or x > y  # nan is larger than every number


def _quick_select(row: list, k: int) -> int:
    """The index ATen's CPU kthvalue reports: its quickselect (median-of-three pivot, Hoare
    partition, nan largest) over a copy of the row with its indices, run as written."""
    a, p = row, list(range(len(row)))

    def swap(i: int, j: int) -> None:
        a[i], a[j] = a[j], a[i]
        p[i], p[j] = p[j], p[i]

    low, high = 0, len(a) - 1
    while high > low:
        if high == low + 1:
            if _greater_or_nan(a[low], a[high]):
                swap(low, high)
            break
        swap((low + high) >> 1, low + 1)
        if _greater_or_nan(a[low + 1], a[high]):
            swap(low + 1, high)
        if _greater_or_nan(a[low], a[high]):
            swap(low, high)
        if _greater_or_nan(a[low + 1], a[low]):
            swap(low + 1, low)
        i, j, pivot = low + 1, high, a[low]
        while True:
            i += 1
            while _greater_or_nan(pivot, a[i]):
                i += 1
            j -= 1
            while _greater_or_nan(a[j], pivot):
                j -= 1
            if j < i:
                break
            swap(i, j)
        swap(low, j)
        if j <= k:
            low = i
        if j >= k:
            high = j - 1
    return p[k]


@register_kernel("aten::kthvalue.values", shape=_kth_shape)
def kthvalue(self, k, dim, keepdim, values, indices):
    """The k-th smallest value (nan largest). A value unique in its row has one index; among
    equal values the index is the one eager's quickselect leaves at rank k, so only rows
    where the k-th value has a tie run that quickselect."""
    op = "aten::kthvalue.values"
    size = self.shape[wrap_dim(dim, self.ndim, op)] if self.ndim else 1
    check(1 <= k <= size, op, f"selected number k ({k}) out of range for dimension {dim} of size {size}")
    x, axis = _along(op, self, dim, values, indices)
    if x is None or x.size == 0:
        return
    order = np.argsort(x, axis=-1, kind="stable")
    picked = order[:, k - 1].copy()
    ranked = np.take_along_axis(x, order, axis=-1)
    chosen = ranked[:, k - 1 : k]
    with quiet():
        same = (ranked == chosen) | (np.isnan(ranked) & np.isnan(chosen) if category(x.dtype) == 2 else False)
    for r in np.flatnonzero(same.sum(-1) > 1):
        picked[r] = _quick_select(x[r].tolist(), k - 1)
    _write_picked(self, axis, keepdim, picked, values, indices)


@register_kernel("aten::mode.values", shape=_values_and_indices)
def mode(self, dim, keepdim, values, indices):
    """The most frequent value (the smallest of those equally frequent) and its last index;
    each nan counts as a value of its own, larger than every number."""
    x, axis = _along("aten::mode.values", self, dim, values, indices, allow_bool=True)
    if x is None or x.size == 0:
        return
    order = np.argsort(x, axis=-1, kind="stable")
    ranked = np.take_along_axis(x, order, axis=-1)
    n = x.shape[-1]
    with quiet():
        starts = np.ones(ranked.shape, bool)
        starts[:, 1:] = ranked[:, 1:] != ranked[:, :-1]
    ends = np.ones(ranked.shape, bool)
    ends[:, :-1] = starts[:, 1:]
    positions = np.arange(n)
    run_start = np.maximum.accumulate(np.where(starts, positions, 0), axis=-1)
    length = np.where(ends, positions - run_start + 1, 0)
    best = np.argmax(length, axis=-1)  # the first (smallest) of the longest runs, at its end
    _write_picked(self, axis, keepdim, order[np.arange(len(order)), best], values, indices)


def _moments_shape(op: str, self, dim, correction, keepdim, out0, out1) -> list[tuple]:
    shape = reduced(op, self.shape, dim, keepdim)
    return [shape, shape]


def _moments(op: str, root: bool):
    """var_mean/std_mean: two passes in float64 (float64 accumulation as on ATen's CPU), the
    squared deviations divided by ``max(0, n - correction)`` (correction None means 1)."""

    def kernel(self, dim, correction, keepdim, out0, out1):
        check(category(self.dtype) == 2, op, f"only supports floating point dtypes, got {self.dtype}")
        axes = wrap_dims(dim, self.ndim, op)
        n = math.prod(self.shape[a] for a in axes)
        x = self.astype(np.float64)
        with quiet():
            mean = np.sum(x, axis=axes, keepdims=True) / np.float64(n)  # nan for no elements
            deviation = x - mean
            divisor = max(0.0, n - (1 if correction is None else correction))
            result = np.sum(deviation * deviation, axis=axes, keepdims=keepdim) / divisor
            write(out0, (np.sqrt(result) if root else result).astype(self.dtype))
            write(out1, (mean if keepdim else np.squeeze(mean, axes)).astype(self.dtype))

    return register_kernel(op, shape=_moments_shape)(kernel)


var_mean = _moments("aten::var_mean.correction_out", root=False)
std_mean = _moments("aten::std_mean.correction_out", root=True)
