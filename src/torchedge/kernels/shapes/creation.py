"""Tensors made from sizes and numbers: full, zeros, ones, empty, random tensors, scalar_tensor,
randperm, arange."""

from __future__ import annotations

import math

import numpy as np

from torchedge.kernels.shapes.common import check
from torchedge.kernels.shapes.registry import register_named

__all__ = ["sized", "scalar_tensor", "randperm", "arange_length", "arange", "arange_start"]

_SIZED = ("aten::full.out", "aten::zeros.out", "aten::ones.out", "aten::empty.out", "aten::empty_strided.out",
          "aten::rand.out", "aten::randn.out")


@register_named(*_SIZED)
def sized(op: str, size, *rest) -> list[tuple]:
    """The size argument (always the first) is the shape."""
    check(min(size, default=0) >= 0, op, f"size {list(size)} must not be negative")
    return [tuple(size)]


@register_named("aten::scalar_tensor.out")
def scalar_tensor(op: str, s, out) -> list[tuple]:
    return [()]


@register_named("aten::randperm.out")
def randperm(op: str, n, out) -> list[tuple]:
    check(n >= 0, op, f"n must be non-negative, got {n}")
    return [(n,)]


def arange_length(op: str, start, end, step, integral: bool) -> int:
    """ATen's length of ``arange(start, end, step)``: ``ceil((end - start) / step)`` in double,
    but for an int64 result in int64 arithmetic on the arguments truncated to integers."""
    check(all(math.isfinite(v) for v in (start, end, step)), op, f"unsupported range: {start} -> {end} by {step}")
    if integral:
        start, end, step = int(start), int(end), int(step)
    check(step != 0, op, "step must be nonzero")
    check((step > 0 and end >= start) or (step < 0 and end <= start), op,
          f"upper bound and lower bound inconsistent with step sign (start {start}, end {end}, step {step})")
    if integral:  # the quotient is not negative, so floor division is C++'s truncating one
        return (end - start + step - (1 if step > 0 else -1)) // step
    return math.ceil((float(end) - float(start)) / float(step))


@register_named("aten::arange.start_out")
def arange_start(op: str, start, end, step, out) -> list[tuple]:
    """The out's dtype decides the arithmetic, as in ATen: int64 or double."""
    return [(arange_length(op, start, end, step, out.dtype == np.int64),)]


@register_named("aten::arange.out")
def arange(op: str, end, out) -> list[tuple]:
    return arange_start(op, 0, end, 1, out)
