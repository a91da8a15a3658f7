"""Bucketing: ``searchsorted`` and ``bucketize`` (Tensor and Scalar overloads).

The search is ATen's binary search, run for every value at once: ``left`` finds the first
position whose boundary is not below the value (``!(b >= v)`` moves right), ``right`` the
first whose boundary is above it. A NaN value therefore lands past the end, and a NaN
boundary steers the search exactly as it does in ATen.
"""

from __future__ import annotations

import numpy as np

from torchedge.kernels.dtypes import BOOL, INT64, is_floating, result_type
from torchedge.kernels.portable.common import check, fail, quiet, write
from torchedge.kernels.registry import register_kernel

__all__ = ["binary_search", "searchsorted", "searchsorted_scalar", "bucketize", "bucketize_scalar"]

_INT32 = np.dtype(np.int32)


def binary_search(boundaries: np.ndarray, values: np.ndarray, right: bool, sorter=None) -> np.ndarray:
    """Positions of ``values`` (R, m) in the rows of ``boundaries`` (R, n), as ATen's
    lower bound (``right`` false) or upper bound; ``sorter`` (R, n) orders each row."""
    rows, n = boundaries.shape
    start = np.zeros(values.shape, INT64)
    end = np.full(values.shape, n, INT64)
    if n == 0 or values.size == 0:
        return start
    active = start < end
    while active.any():
        mid = start + ((end - start) >> 1)
        at = np.minimum(mid, n - 1)
        if sorter is not None:
            at = np.take_along_axis(sorter, at, axis=1)
        found = np.take_along_axis(boundaries, at, axis=1)
        with quiet():
            stop = found > values if right else found >= values
        start = np.where(active & ~stop, mid + 1, start)
        end = np.where(active & stop, mid, end)
        active = start < end
    return start


def _side(op: str, right: bool, side) -> bool:
    if side is None:
        return bool(right)
    check(side in ("left", "right"), op, f"side can only be 'left' or 'right' but got '{side}'")
    check(
        not (right and side == "left"),
        op,
        "side and right can't be set to opposites, got side of left while right was True",
    )
    return side == "right"


def _check_out(op: str, out: np.ndarray, out_int32: bool) -> None:
    want = _INT32 if out_int32 else INT64
    check(
        out.dtype == want,
        op,
        f"output tensor's dtype is wrong, it can only be int32 or int64 depending on out_int32 "
        f"(out_int32={out_int32}), got {out.dtype}",
    )


def _search(op: str, sorted_sequence, self, out_int32, right, side, sorter, out) -> None:
    """``self`` is an array or a Python number (the Scalar overloads)."""
    right = _side(op, right, side)
    _check_out(op, out, out_int32)
    values = np.asarray(self)
    check(sorted_sequence.ndim >= 1, op, "boundaries tensor must have at least 1 dimension, got a 0-dim tensor")
    if sorted_sequence.ndim > 1:
        check(
            values.ndim == sorted_sequence.ndim and values.shape[:-1] == sorted_sequence.shape[:-1],
            op,
            "boundaries tensor should be 1 dimension or the first N-1 dimensions of boundaries tensor and "
            f"input value tensor must match, but we got boundaries tensor {list(sorted_sequence.shape)} and "
            f"input value tensor {list(values.shape)}",
        )
    if sorter is not None:
        check(sorter.dtype == INT64, op, f"sorter must be a tensor of long dtype but got {sorter.dtype}")
        check(
            sorter.shape == sorted_sequence.shape,
            op,
            f"boundary and sorter must have the same size, but got boundary tensor {list(sorted_sequence.shape)} "
            f"and got sorter tensor {list(sorter.shape)}",
        )
        n = sorted_sequence.shape[-1]
        check(bool(((sorter >= 0) & (sorter < n)).all()), op, "sorter index out of range")
    common = result_type(sorted_sequence, self)
    check(common != BOOL, op, f"not implemented for dtype {common}")
    if is_floating(common) and common.itemsize < 4:
        common = np.dtype(np.float32)  # widening keeps the order of 16-bit floats exactly
    if values.size == 0:
        return
    n = sorted_sequence.shape[-1]
    rows = sorted_sequence.reshape(int(np.prod(sorted_sequence.shape[:-1])), n).astype(common, copy=False)
    flat = values.astype(common).reshape(rows.shape[0] if sorted_sequence.ndim > 1 else 1, -1)
    order = None if sorter is None else sorter.reshape(rows.shape)
    write(out, binary_search(rows, flat, right, order).reshape(values.shape))


def _value_shape(op: str, sorted_sequence, self, *rest) -> list[tuple]:
    return [np.shape(self)]


def _scalar_shape(op: str, *args) -> list[tuple]:
    return [()]


@register_kernel("aten::searchsorted.Tensor_out", shape=_value_shape)
def searchsorted(sorted_sequence, self, out_int32, right, side, sorter, out):
    _search("aten::searchsorted.Tensor_out", sorted_sequence, self, out_int32, right, side, sorter, out)


@register_kernel("aten::searchsorted.Scalar_out", shape=_scalar_shape)
def searchsorted_scalar(sorted_sequence, self, out_int32, right, side, sorter, out):
    op = "aten::searchsorted.Scalar_out"
    check(
        sorted_sequence.ndim == 1,
        op,
        f"input value can be a scalar only when boundaries tensor dimension is 1, but we got boundaries "
        f"tensor dim({sorted_sequence.ndim}) and input value's dim(0) numel(1)",
    )
    _search(op, sorted_sequence, self, out_int32, right, side, sorter, out)


def _bucketize(op: str, self, boundaries, out_int32, right, out) -> None:
    if boundaries.ndim != 1:
        fail(op, f"boundaries tensor must be 1 dimension, but got dim({boundaries.ndim})")
    _search(op, boundaries, self, out_int32, right, None, None, out)


def _bucket_shape(op: str, self, *rest) -> list[tuple]:
    return [np.shape(self)]


@register_kernel("aten::bucketize.Tensor_out", shape=_bucket_shape)
def bucketize(self, boundaries, out_int32, right, out):
    _bucketize("aten::bucketize.Tensor_out", self, boundaries, out_int32, right, out)


@register_kernel("aten::bucketize.Scalar_out", shape=_scalar_shape)
def bucketize_scalar(self, boundaries, out_int32, right, out):
    _bucketize("aten::bucketize.Scalar_out", self, boundaries, out_int32, right, out)
