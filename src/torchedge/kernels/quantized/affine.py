"""Kernels of the ``quantized_decomposed`` operators of PT2E-quantized programs.

Affine quantization ``q = clamp(round(x / scale) + zero_point, quant_min, quant_max)`` and its
inverse ``x = (q - zero_point) * scale``, per tensor or per channel, computed the way the
reference implementations in ``torch.ao.quantization.fx._decomposed`` compute them (float32
arithmetic, round half to even), so results match PyTorch bit for bit.
"""

from __future__ import annotations

import numpy as np

from torchedge.kernels.portable.common import check, quiet, wrap_dim, write
from torchedge.kernels.portable.shape_rules import same_as
from torchedge.kernels.registry import register_kernel
from torchedge.schema.scalar_type import numpy_dtype

__all__ = [
    "quantize_per_tensor",
    "dequantize_per_tensor",
    "quantize_per_channel",
    "dequantize_per_channel",
    "choose_qparams",
]

_F32 = np.dtype(np.float32)


def _as_float32(op: str, x: np.ndarray) -> np.ndarray:
    check(x.dtype.kind == "f" or x.dtype.name == "bfloat16", op, f"expects a float input, got {x.dtype}")
    return x.astype(_F32, copy=False)


def _check_quantized(op: str, q: np.ndarray, dtype: int) -> None:
    check(q.dtype == numpy_dtype(dtype), op, f"input has dtype {q.dtype}, the call says {numpy_dtype(dtype)}")


def _one(op: str, value: np.ndarray, what: str):
    check(value.size == 1, op, f"{what} must have one element, got shape {list(value.shape)}")
    return value.reshape(-1)[0].item()


def _quantize(x: np.ndarray, inv_scale, zero_point, quant_min: int, quant_max: int, out: np.ndarray) -> None:
    with quiet():
        q = np.rint(x * inv_scale)
        q += zero_point
        np.clip(q, quant_min, quant_max, out=q)
    write(out, q)


def _per_channel(values: np.ndarray, axis: int, ndim: int) -> np.ndarray:
    """A (C,) array shaped to broadcast along ``axis`` of an ``ndim``-D tensor."""
    return values.reshape((-1,) + (1,) * (ndim - 1 - axis))


@register_kernel("quantized_decomposed::quantize_per_tensor.out", shape=same_as())
def quantize_per_tensor(input, scale, zero_point, quant_min, quant_max, dtype, out):
    x = _as_float32("quantized_decomposed::quantize_per_tensor.out", input)
    _quantize(x, _F32.type(1.0 / scale), _F32.type(zero_point), quant_min, quant_max, out)


@register_kernel("quantized_decomposed::quantize_per_tensor.Tensor_out", shape=same_as())
def quantize_per_tensor_tensor(input, scale, zero_point, quant_min, quant_max, dtype, out):
    op = "quantized_decomposed::quantize_per_tensor.Tensor_out"
    quantize_per_tensor(
        input, _one(op, scale, "scale"), _one(op, zero_point, "zero_point"), quant_min, quant_max, dtype, out
    )


@register_kernel("quantized_decomposed::dequantize_per_tensor.out", shape=same_as())
def dequantize_per_tensor(input, scale, zero_point, quant_min, quant_max, dtype, out_dtype, out):
    _check_quantized("quantized_decomposed::dequantize_per_tensor.out", input, dtype)
    with quiet():
        x = input.astype(_F32)
        x -= _F32.type(zero_point)
        x *= _F32.type(scale)
    write(out, x)


@register_kernel("quantized_decomposed::dequantize_per_tensor.Tensor_out", shape=same_as())
def dequantize_per_tensor_tensor(input, scale, zero_point, quant_min, quant_max, dtype, out_dtype, out):
    op = "quantized_decomposed::dequantize_per_tensor.Tensor_out"
    dequantize_per_tensor(
        input, _one(op, scale, "scale"), _one(op, zero_point, "zero_point"), quant_min, quant_max, dtype, out_dtype, out
    )


@register_kernel("quantized_decomposed::quantize_per_channel.out", shape=same_as())
def quantize_per_channel(input, scales, zero_points, axis, quant_min, quant_max, dtype, out):
    op = "quantized_decomposed::quantize_per_channel.out"
    x = _as_float32(op, input)
    axis = wrap_dim(axis, x.ndim, op)
    check(scales.shape == (x.shape[axis],), op, f"scales of shape {list(scales.shape)} for {x.shape[axis]} channels")
    with quiet():
        inv_scales = np.divide(_F32.type(1), scales.astype(_F32))
    _quantize(
        x,
        _per_channel(inv_scales, axis, x.ndim),
        _per_channel(zero_points.astype(_F32), axis, x.ndim),
        quant_min,
        quant_max,
        out,
    )


@register_kernel("quantized_decomposed::dequantize_per_channel.out", shape=same_as())
def dequantize_per_channel(input, scales, zero_points, axis, quant_min, quant_max, dtype, out_dtype, out):
    op = "quantized_decomposed::dequantize_per_channel.out"
    _check_quantized(op, input, dtype)
    axis = wrap_dim(axis, input.ndim, op)
    check(
        scales.shape == (input.shape[axis],),
        op,
        f"scales of shape {list(scales.shape)} for {input.shape[axis]} channels",
    )
    with quiet():
        q = input.astype(np.int64)
        if zero_points is not None:
            q -= _per_channel(zero_points.astype(np.int64), axis, input.ndim)
        x = q.astype(_F32)
        x *= _per_channel(scales.astype(_F32), axis, input.ndim)
    write(out, x)


def _one_scale_and_zero_point(
    op: str, input, quant_min, quant_max, eps, dtype, scale_out, zero_point_out
) -> list[tuple]:
    """One scale and one zero point for the whole input."""
    return [(1,), (1,)]


@register_kernel("quantized_decomposed::choose_qparams.Tensor_out", shape=_one_scale_and_zero_point)
def choose_qparams(input, quant_min, quant_max, eps, dtype, scale_out, zero_point_out):
    """Affine parameters that map [min(x, 0), max(x, 0)] onto [quant_min, quant_max]."""
    op = "quantized_decomposed::choose_qparams.Tensor_out"
    check(quant_min <= quant_max, op, f"quant_min {quant_min} is greater than quant_max {quant_max}")
    x = _as_float32(op, input)
    low, high = (float(x.min()), float(x.max())) if x.size else (np.inf, -np.inf)
    if not (np.isfinite(low) and np.isfinite(high) and low <= high):  # nothing to measure: identity parameters
        write(scale_out, np.ones(1))
        write(zero_point_out, np.zeros(1, np.int64))
        return
    with quiet():
        span = _F32.type(max(high, 0.0)) - _F32.type(min(low, 0.0))
        scale = max(span / _F32.type(quant_max - quant_min), _F32.type(eps))
        zero_point = quant_min - int(np.rint(_F32.type(min(low, 0.0)) / scale))
    write(scale_out, np.full(1, scale, np.float64))
    write(zero_point_out, np.full(1, min(max(zero_point, quant_min), quant_max), np.int64))
