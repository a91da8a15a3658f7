"""Tensors made from numbers: full, zeros, ones, empty, scalar_tensor, fill, arange."""

from __future__ import annotations

import math

import numpy as np

from torchedge.kernels.dtypes import category
from torchedge.kernels.portable.common import check, fail, write
from torchedge.kernels.portable.shape_rules import from_size, same_as
from torchedge.kernels.registry import register_kernel

__all__ = [
    "full",
    "full_like",
    "zeros",
    "ones",
    "empty",
    "empty_strided",
    "empty_permuted",
    "scalar_tensor",
    "arange",
    "arange_start",
    "arange_length",
]


@register_kernel("aten::full.out", shape=from_size)
@register_kernel("aten::fill.Scalar_out", shape=same_as())
def full(size_or_self, fill_value, out):
    write(out, fill_value)


@register_kernel("aten::full_like.out", shape=same_as())
def full_like(self, fill_value, memory_format, out):
    write(out, fill_value)


@register_kernel("aten::zeros.out", shape=from_size)
def zeros(size, out):
    write(out, 0)


@register_kernel("aten::ones.out", shape=from_size)
def ones(size, out):
    write(out, 1)


@register_kernel("aten::empty.out", shape=from_size)
def empty(size, memory_format, out):
    """Uninitialised in ATen; zeros here, so that results never depend on stale memory."""
    write(out, 0)


@register_kernel("aten::empty_strided.out", shape=from_size)
def empty_strided(size, stride, out):
    write(out, 0)


@register_kernel("aten::empty_permuted.out", shape=from_size)
def empty_permuted(size, physical_layout, out):
    """``empty_like`` of a strided tensor: the layout is a dim order; the runtime's buffer is dense."""
    check(
        sorted(physical_layout) == list(range(len(size))),
        "aten::empty_permuted.out",
        f"physical_layout {list(physical_layout)} is not a permutation of the {len(size)} dims",
    )
    write(out, 0)


def _zero_dim(op: str, s, out) -> list[tuple]:
    return [()]


@register_kernel("aten::scalar_tensor.out", shape=_zero_dim)
def scalar_tensor(s, out):
    write(out, s)


def _check_step(op: str, step) -> None:
    """``arange``'s step (after any truncation to an integer) is not zero."""
    if step == 0:
        fail(op, "step must be nonzero")


def arange_length(op: str, start, end, step, integral: bool) -> int:
    """ATen's length of ``arange(start, end, step)``: ``ceil((end - start) / step)`` in double,
    but for an int64 result in int64 arithmetic on the arguments truncated to integers."""
    check(all(math.isfinite(v) for v in (start, end, step)), op, f"unsupported range: {start} -> {end} by {step}")
    if integral:
        start, end, step = int(start), int(end), int(step)
    _check_step(op, step)
    check(
        (step > 0 and end >= start) or (step < 0 and end <= start),
        op,
        f"upper bound and lower bound inconsistent with step sign (start {start}, end {end}, step {step})",
    )
    if integral:  # the quotient is not negative, so floor division is C++'s truncating one
        return (end - start + step - (1 if step > 0 else -1)) // step
    return math.ceil((float(end) - float(start)) / float(step))


def _arange_start_shape(op: str, start, end, step, out) -> list[tuple]:
    """The out's dtype decides the arithmetic, as in ATen: int64 or double."""
    return [(arange_length(op, start, end, step, out.dtype == np.int64),)]


def _arange_shape(op: str, end, out) -> list[tuple]:
    return _arange_start_shape(op, 0, end, 1, out)


@register_kernel("aten::arange.start_out", shape=_arange_start_shape)
def arange_start(start, end, step, out):
    """``start + i * step`` for i < out's length, computed in ATen's accumulation type: int64
    for integer outs (float arguments truncate toward zero first), float64 for float outs."""
    op = "aten::arange.start_out"
    check(out.ndim == 1, op, f"out must be 1-D, got shape {list(out.shape)}")
    check(category(out.dtype) > 0, op, "arange does not support bool outs")
    integral = category(out.dtype) < 2
    if integral:
        start, step = int(start), int(step)
    _check_step(op, step)
    i = np.arange(out.shape[0], dtype=np.int64 if integral else np.float64)
    i *= step
    i += start
    write(out, i)


@register_kernel("aten::arange.out", shape=_arange_shape)
def arange(end, out):
    arange_start(0, end, 1, out)
