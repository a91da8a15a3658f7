"""Activations: relu, hardtanh, gelu, softmax and log-softmax."""

from __future__ import annotations

import math

import numpy as np

from torchedge.kernels.dtypes import BOOL, accumulate_dtype, is_floating
from torchedge.kernels.portable.common import check, finish, quiet, scratch, wrap_dim, write
from torchedge.kernels.portable.comparison import clamp
from torchedge.kernels.portable.special import erf
from torchedge.kernels.registry import register_kernel

__all__ = ["relu", "hardtanh", "gelu", "softmax", "log_softmax"]


@register_kernel("aten::relu.out")
def relu(self, out):
    check(self.dtype != BOOL, "aten::relu.out", "boolean inputs are not supported")
    np.maximum(self, self.dtype.type(0), out=out, casting="unsafe")  # nan stays nan


@register_kernel("aten::hardtanh.out")
def hardtanh(self, min_val, max_val, out):
    check(self.dtype != BOOL, "aten::hardtanh.out", "boolean inputs are not supported")
    clamp(self, min_val, max_val, out)


@register_kernel("aten::gelu.out")
def gelu(self, approximate, out):
    op = "aten::gelu.out"
    check(is_floating(self.dtype), op, f"is not implemented for dtype {self.dtype}")
    check(approximate in ("none", "tanh"), op, f"approximate must be 'none' or 'tanh', got {approximate!r}")
    with quiet():
        x = self.astype(accumulate_dtype(self.dtype), copy=False)
        if approximate == "none":  # x/2 * (1 + erf(x/sqrt(2)))
            y = erf(x * (1 / math.sqrt(2)), single=x.dtype.itemsize < 8)
            y += 1
            y *= x
            y *= 0.5
            write(out, y)
            return
        # x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))
        buf = scratch(out, x.dtype)
        np.multiply(x, x, out=buf)
        buf *= x
        buf *= 0.044715
        buf += x
        buf *= math.sqrt(2 / math.pi)
        np.tanh(buf, out=buf)
        buf += 1
        buf *= x
        buf *= 0.5
        finish(out, buf)


def _softmax_setup(op, self, dim, out):
    check(is_floating(self.dtype), op, f"is not implemented for dtype {self.dtype}")
    if self.ndim == 0:
        self, out = self.reshape(1), out.reshape(1)
    return self, wrap_dim(dim, self.ndim, op), out


@register_kernel("aten::_softmax.out")
def softmax(self, dim, half_to_float, out):
    self, axis, out = _softmax_setup("aten::_softmax.out", self, dim, out)
    if self.size == 0:
        return
    buf = scratch(out, accumulate_dtype(self.dtype))
    with quiet():
        np.subtract(self, np.max(self, axis=axis, keepdims=True), out=buf, dtype=buf.dtype, casting="unsafe")
        np.exp(buf, out=buf)
        buf /= np.sum(buf, axis=axis, keepdims=True)
    finish(out, buf)


@register_kernel("aten::_log_softmax.out")
def log_softmax(self, dim, half_to_float, out):
    self, axis, out = _softmax_setup("aten::_log_softmax.out", self, dim, out)
    if self.size == 0:
        return
    buf = scratch(out, accumulate_dtype(self.dtype))
    with quiet():
        np.subtract(self, np.max(self, axis=axis, keepdims=True), out=buf, dtype=buf.dtype, casting="unsafe")
        buf -= np.log(np.sum(np.exp(buf), axis=axis, keepdims=True))
    finish(out, buf)
