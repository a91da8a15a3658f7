"""Activations: relu, hardtanh, gelu, elu, leaky_relu, hard sigmoid/swish, silu, glu, logit, softmax.

Like ATen, float16 and bfloat16 inputs compute in float32 and round once into ``out``.
"""

from __future__ import annotations

import math

import numpy as np

from torchedge.kernels.dtypes import BOOL, accumulate_dtype, can_cast, float_result_type, is_floating, is_integral
from torchedge.kernels.portable.common import check, finish, quiet, scratch, wrap_dim, write
from torchedge.kernels.portable.comparison import clamp, fast_clamp, keep_signed_zeros
from torchedge.kernels.portable.elementwise import SAME, check_same_dtype, opmath_buffer, store
from torchedge.kernels.portable.shape_rules import broadcast_inputs, same_as
from torchedge.kernels.portable.special import _P32, _Q32, ErfRational, erf
from torchedge.kernels.portable.unary import unary_kernel
from torchedge.kernels.registry import register_kernel

__all__ = [
    "relu",
    "hardtanh",
    "gelu",
    "elu",
    "leaky_relu",
    "hardsigmoid",
    "hardswish",
    "silu",
    "glu",
    "logit",
    "softmax",
    "log_softmax",
]


@register_kernel("aten::relu.out", shape=broadcast_inputs, inplace_safe=True)
def relu(self, out):
    check(self.dtype != BOOL, "aten::relu.out", "boolean inputs are not supported")
    if fast_clamp(self, 0, None, out):  # float32/float64: one pass
        return
    floating = is_floating(self.dtype)
    if floating and np.may_share_memory(out, self):
        self = self.copy()  # in place: keep_signed_zeros reads self's zeros after out is written
    with quiet():
        np.maximum(self, self.dtype.type(0), out=out, casting="unsafe")  # nan stays nan
        if floating:
            keep_signed_zeros(out, self)  # relu(-0.0) is -0.0, as in ATen


@register_kernel("aten::hardtanh.out", shape=broadcast_inputs, inplace_safe=True)
def hardtanh(self, min_val, max_val, out):
    op = "aten::hardtanh.out"
    check(self.dtype != BOOL, op, "boolean inputs are not supported")
    if is_integral(self.dtype):  # ATen truncates the limits so that they don't promote the input
        min_val, max_val = int(min_val), int(max_val)
        check(
            self.dtype != np.uint8 or (min_val >= 0 and max_val >= 0),
            op,
            "cannot do hardtanh on an unsigned type with negative limits",
        )
    clamp(self, min_val, max_val, out)


def _float_buffer(op: str, self, out):
    """Checks of a float-only activation; the opmath buffer it computes in."""
    check(is_floating(self.dtype), op, f"is not implemented for dtype {self.dtype}")
    check_same_dtype(op, self.dtype, out)
    return opmath_buffer(out, self.dtype, self)


@register_kernel("aten::elu.out", shape=broadcast_inputs)
def elu(self, alpha, scale, input_scale, out):
    """``expm1(x * input_scale) * alpha * scale`` where x <= 0 (and for nan), else ``x * scale``."""
    buf = _float_buffer("aten::elu.out", self, out)
    with quiet():
        np.multiply(self, input_scale, out=buf, dtype=buf.dtype, casting="unsafe")
        np.expm1(buf, out=buf)
        np.multiply(buf, alpha * scale, out=buf, casting="unsafe")
        np.multiply(self, scale, out=buf, where=self > 0, dtype=buf.dtype, casting="unsafe")
    store(out, buf, self.dtype)


@register_kernel("aten::leaky_relu.out", shape=broadcast_inputs)
def leaky_relu(self, negative_slope, out):
    buf = _float_buffer("aten::leaky_relu.out", self, out)
    with quiet():
        np.multiply(self, negative_slope, out=buf, dtype=buf.dtype, casting="unsafe")
        np.copyto(buf, self, where=self > 0, casting="unsafe")  # -0.0 and nan take the slope
    store(out, buf, self.dtype)


def _relu6_shifted(self, buf):
    """``min(max(x + 3, 0), 6)`` into ``buf`` (nan stays nan)."""
    np.add(self, 3, out=buf, dtype=buf.dtype, casting="unsafe")
    np.maximum(buf, 0, out=buf)
    np.minimum(buf, 6, out=buf)


def _hardsigmoid(self, buf):
    _relu6_shifted(self, buf)
    buf /= 6


def _hardswish(self, buf):  # ATen: x * relu6(x + 3) / 6, in that order
    _relu6_shifted(self, buf)
    np.multiply(buf, self, out=buf, casting="unsafe")
    buf /= 6


def _silu(self, buf):  # x / (1 + exp(-x)): nan at -inf, as in ATen
    np.negative(self, out=buf, dtype=buf.dtype, casting="unsafe")
    np.exp(buf, out=buf)
    buf += 1
    np.divide(self, buf, out=buf, dtype=buf.dtype, casting="unsafe")


hardsigmoid = register_kernel("aten::hardsigmoid.out", shape=broadcast_inputs)(
    unary_kernel("aten::hardsigmoid.out", _hardsigmoid, SAME, "f")
)
hardswish = register_kernel("aten::hardswish.out", shape=broadcast_inputs)(
    unary_kernel("aten::hardswish.out", _hardswish, SAME, "f")
)
silu = register_kernel("aten::silu.out", shape=broadcast_inputs)(unary_kernel("aten::silu.out", _silu, SAME, "f"))


@register_kernel("aten::logit.out", shape=broadcast_inputs)
def logit(self, eps, out):
    """``log(x / (1 - x))``, with x first clamped to ``[eps, 1 - eps]`` unless eps is None (or nan)."""
    op = "aten::logit.out"
    dtype = float_result_type(self)
    check(can_cast(dtype, out.dtype), op, f"result type {dtype} can't be cast to the desired output type {out.dtype}")
    buf = opmath_buffer(out, dtype, self)
    x = self
    with quiet():
        if eps is not None and not math.isnan(eps):
            low = dtype.type(eps)  # ATen's eps.to<scalar_t>() and scalar_t(1) - eps
            np.maximum(self, low, out=buf, dtype=buf.dtype, casting="unsafe")
            np.minimum(buf, dtype.type(1) - low, out=buf, casting="unsafe")
            x = buf
        np.divide(x, np.subtract(1, x, dtype=buf.dtype), out=buf, dtype=buf.dtype, casting="unsafe")
        np.log(buf, out=buf)
    store(out, buf, dtype)


# GELU as x * (1/2 + xc * P(xc²) / Q(xc²)) with xc = clip(x, ±5.1028953): the float32 erf's
# rational with u = x/√2 folded into its coefficients (u² = x²/2) and the factor 1/(2√2) into
# P's, so a block costs the rational plus two passes. The clamp is where the rational reaches
# exactly ±1/2 (GELU(5.1) is within 2 ulp of x): beyond it the result is exactly 0 far below
# and exactly x far above, and it cannot overflow.
_GELU32 = ErfRational(
    [float(c) * 0.5**k / (2 * math.sqrt(2)) for k, c in enumerate(_P32)],
    [float(c) * 0.5**k for k, c in enumerate(_Q32)],
    5.1028953,
    0.5,
)
_HALF = np.array(0.5, np.float32)


def _gelu_erf_float32(x: np.ndarray, out: np.ndarray) -> None:
    """x/2 * (1 + erf(x/sqrt(2))), over blocks of `ErfRational`'s fixed scratch size."""
    flat = np.ascontiguousarray(x).reshape(-1)
    direct = (
        out.dtype == np.float32
        and out.flags.c_contiguous
        and (
            not np.may_share_memory(flat, out)
            or flat.__array_interface__["data"][0] == out.__array_interface__["data"][0]
        )
    )
    result = out.reshape(-1) if direct else np.empty(flat.shape, np.float32)
    for start, block, ratio in _GELU32.blocks(flat):
        ratio += _HALF
        np.multiply(ratio, block, out=result[start : start + block.size])
    if not direct:
        write(out, result.reshape(x.shape))


@register_kernel("aten::gelu.out", shape=broadcast_inputs)
def gelu(self, approximate, out):
    op = "aten::gelu.out"
    check(is_floating(self.dtype), op, f"is not implemented for dtype {self.dtype}")
    check(approximate in ("none", "tanh"), op, f"approximate must be 'none' or 'tanh', got {approximate!r}")
    with quiet():
        x = self.astype(accumulate_dtype(self.dtype), copy=False)
        if approximate == "none" and x.dtype == np.float32:
            _gelu_erf_float32(x, out)
            return
        if approximate == "none":  # x/2 * (1 + erf(x/sqrt(2)))
            y = erf(x * (1 / math.sqrt(2)))
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


def _glu_shape(op: str, self, dim, out) -> list[tuple]:
    """``self``'s shape with ``dim`` halved (it must be even)."""
    check(self.ndim > 0, op, "glu does not support 0-dimensional tensors")
    axis = wrap_dim(dim, self.ndim, op)
    check(self.shape[axis] % 2 == 0, op, f"halving dimension {dim} needs an even size, got {self.shape[axis]}")
    return [self.shape[:axis] + (self.shape[axis] // 2,) + self.shape[axis + 1 :]]


@register_kernel("aten::glu.out", shape=_glu_shape)
def glu(self, dim, out):
    """``a * sigmoid(b)`` of the first and second halves ``a``, ``b`` of ``self`` along ``dim``,
    computed as ATen does: ``a * (1 / (1 + exp(-b)))`` in opmath."""
    op = "aten::glu.out"
    (shape,) = _glu_shape(op, self, dim, out)
    check(tuple(out.shape) == shape, op, f"out has shape {list(out.shape)}, expected {list(shape)}")
    buf = _float_buffer(op, self, out)
    axis = wrap_dim(dim, self.ndim, op)
    half = self.shape[axis] // 2
    first = self[(slice(None),) * axis + (slice(0, half),)]
    second = self[(slice(None),) * axis + (slice(half, None),)]
    with quiet():
        np.negative(second, out=buf, dtype=buf.dtype, casting="unsafe")
        np.exp(buf, out=buf)
        buf += 1
        np.reciprocal(buf, out=buf)
        np.multiply(buf, first, out=buf, dtype=buf.dtype, casting="unsafe")
    store(out, buf, self.dtype)


def _softmax_setup(op, self, dim, out):
    check(is_floating(self.dtype), op, f"is not implemented for dtype {self.dtype}")
    if self.ndim == 0:
        self, out = self.reshape(1), out.reshape(1)
    return self, wrap_dim(dim, self.ndim, op), out


@register_kernel("aten::_softmax.out", shape=same_as())
def softmax(self, dim, half_to_float, out):
    self, axis, out = _softmax_setup("aten::_softmax.out", self, dim, out)
    if self.size == 0:
        return
    buf = scratch(out, accumulate_dtype(self.dtype))
    with quiet():
        np.subtract(self, np.max(self, axis=axis, keepdims=True), out=buf, dtype=buf.dtype, casting="unsafe")
        np.exp(buf, out=buf)
        total = np.add.reduce(buf, axis=axis, keepdims=True)
        np.divide(1, total, out=total)  # ATen multiplies by the reciprocal of the sum
        buf *= total
    finish(out, buf)


@register_kernel("aten::_log_softmax.out", shape=same_as())
def log_softmax(self, dim, half_to_float, out):
    self, axis, out = _softmax_setup("aten::_log_softmax.out", self, dim, out)
    if self.size == 0:
        return
    buf = scratch(out, accumulate_dtype(self.dtype))
    with quiet():
        np.subtract(self, np.max(self, axis=axis, keepdims=True), out=buf, dtype=buf.dtype, casting="unsafe")
        buf -= np.log(np.sum(np.exp(buf), axis=axis, keepdims=True))
    finish(out, buf)
