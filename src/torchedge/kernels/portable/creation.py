"""Tensors made from numbers: full, zeros, ones, empty, scalar_tensor, fill, arange."""

from __future__ import annotations

import numpy as np

from torchedge.kernels.dtypes import category
from torchedge.kernels.portable.common import check, write
from torchedge.kernels.registry import register_kernel

__all__ = ["full", "full_like", "zeros", "ones", "empty", "empty_strided", "scalar_tensor", "arange", "arange_start"]


@register_kernel("aten::full.out", "aten::fill.Scalar_out")
def full(size_or_self, fill_value, out):
    write(out, fill_value)


@register_kernel("aten::full_like.out")
def full_like(self, fill_value, memory_format, out):
    write(out, fill_value)


@register_kernel("aten::zeros.out")
def zeros(size, out):
    write(out, 0)


@register_kernel("aten::ones.out")
def ones(size, out):
    write(out, 1)


@register_kernel("aten::empty.out")
def empty(size, memory_format, out):
    """Uninitialised in ATen; zeros here, so that results never depend on stale memory."""
    write(out, 0)


@register_kernel("aten::empty_strided.out")
def empty_strided(size, stride, out):
    write(out, 0)


@register_kernel("aten::scalar_tensor.out")
def scalar_tensor(s, out):
    write(out, s)


@register_kernel("aten::arange.start_out")
def arange_start(start, end, step, out):
    """``start + i * step`` for i < out's length, computed in ATen's accumulation type: int64
    for integer outs (float arguments truncate toward zero first), float64 for float outs."""
    op = "aten::arange.start_out"
    check(out.ndim == 1, op, f"out must be 1-D, got shape {list(out.shape)}")
    check(category(out.dtype) > 0, op, "arange does not support bool outs")
    integral = category(out.dtype) < 2
    if integral:
        start, step = int(start), int(step)
    check(step != 0, op, "step must be nonzero")
    i = np.arange(out.shape[0], dtype=np.int64 if integral else np.float64)
    i *= step
    i += start
    write(out, i)


@register_kernel("aten::arange.out")
def arange(end, out):
    arange_start(0, end, 1, out)
