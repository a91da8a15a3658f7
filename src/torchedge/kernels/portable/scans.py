"""Scans along a dim: cumprod, cummax and cummin (values and int64 indices), logcumsumexp.

Like ATen's CPU kernels, float32 accumulates in float64 and float16/bfloat16 in float32;
integers and bool multiply in int64 unless a dtype is given (wrapping as in C++).
cummax/cummin take a tie as the new extreme (the index is the last occurrence), and once a
nan is met it stays, each later nan moving the index to itself.
"""

from __future__ import annotations

import numpy as np

from torchedge.kernels.dtypes import BOOL, INT64, category, convert, dtype_from_code
from torchedge.kernels.portable.common import check, finish, quiet, scratch, wrap_dim, write
from torchedge.kernels.portable.shape_rules import same_as
from torchedge.kernels.registry import register_kernel

__all__ = ["cumprod", "cummax", "cummin", "logcumsumexp"]


def _scan_accumulator(dtype: np.dtype) -> np.dtype:
    """ATen's CPU ``acc_type``: double for float32 and float64, float for 16-bit floats."""
    if category(dtype) < 2:
        return INT64 if dtype.kind != "u" or dtype.itemsize < 8 else dtype
    return np.dtype(np.float32) if dtype.itemsize == 2 else np.dtype(np.float64)


@register_kernel("aten::cumprod.out", shape=same_as())
def cumprod(self, dim, dtype, out):
    op = "aten::cumprod.out"
    axis = wrap_dim(dim, self.ndim, op)
    result = dtype_from_code(dtype, INT64 if category(self.dtype) < 2 else self.dtype)
    if self.ndim == 0:
        write(out, convert(self, result))
        return
    acc = _scan_accumulator(result)
    buf = scratch(out, acc)
    with quiet():
        np.cumprod(convert(self, result), axis=axis, dtype=acc, out=buf)
        if buf is not out and result != out.dtype:
            buf = buf.astype(result)
    finish(out, buf)


def _check_outs(op: str, self, values, indices) -> None:
    check(values.dtype == self.dtype, op, f"expected values to have dtype {self.dtype}, got {values.dtype}")
    check(indices.dtype == INT64, op, f"expected indices to have dtype int64, got {indices.dtype}")


def _running_extreme(op: str, wins):
    """cummax/cummin: ``wins(x, running)`` holds where x becomes the running extreme."""

    def kernel(self, dim, values, indices):
        axis = wrap_dim(dim, self.ndim, op)
        _check_outs(op, self, values, indices)
        if self.ndim == 0:
            write(values, self)
            write(indices, 0)
            return
        if self.size == 0:
            return
        x = self.view(np.uint8) if self.dtype == BOOL else self
        x = np.moveaxis(x.astype(np.float32) if x.dtype.name == "bfloat16" else x, axis, -1)
        with quiet():
            running = (np.maximum if wins is np.greater_equal else np.minimum).accumulate(x, axis=-1)
            update = x == running  # x is a new extreme or ties the running one
            if category(x.dtype) == 2:
                update |= np.isnan(x)
        positions = np.arange(x.shape[-1])
        index = np.maximum.accumulate(np.where(update, positions, 0), axis=-1)
        write(np.moveaxis(indices, axis, -1), index)
        write(np.moveaxis(values, axis, -1), np.take_along_axis(np.moveaxis(self, axis, -1), index, axis=-1))

    return kernel


cummax = register_kernel("aten::cummax.out", shape=same_as(outs=2))(
    _running_extreme("aten::cummax.out", np.greater_equal)
)
cummin = register_kernel("aten::cummin.out", shape=same_as(outs=2))(_running_extreme("aten::cummin.out", np.less_equal))


@register_kernel("aten::logcumsumexp.out", shape=same_as())
def logcumsumexp(self, dim, out):
    """``log(cumsum(exp(x)))`` without overflow: a running logaddexp (nan stays nan)."""
    op = "aten::logcumsumexp.out"
    check(category(self.dtype) == 2, op, f"is not implemented for dtype {self.dtype}")
    check(out.dtype == self.dtype, op, f"expected out to have dtype {self.dtype}, got {out.dtype}")
    axis = wrap_dim(dim, self.ndim, op)
    if self.ndim == 0:
        write(out, self)
        return
    acc = _scan_accumulator(self.dtype)
    with quiet():
        write(out, np.logaddexp.accumulate(self.astype(acc), axis=axis))
