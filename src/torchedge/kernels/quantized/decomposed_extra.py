"""The rest of ExecuTorch's ``quantized_decomposed`` kernel library (``kernels/quantized/cpu``):
per-token quantization, quantized add, the weight-only quantized embeddings (8, 4 and 2 bits)
and the int8-weight matrix products ``mixed_mm``/``mixed_linear``.

Each follows ExecuTorch's C++ kernel step by step (float32 arithmetic, round half to even), so
that a program ExecuTorch builds computes here what it computes on ExecuTorch.
"""

from __future__ import annotations

import numpy as np

from torchedge.kernels.portable.common import check, fail, quiet, write
from torchedge.kernels.portable.shape_rules import same_as
from torchedge.kernels.quantized.affine import _quantize
from torchedge.kernels.registry import register_kernel
from torchedge.schema.scalar_type import numpy_dtype

__all__ = [
    "quantize_per_token",
    "dequantize_per_token",
    "choose_qparams_per_token_asymmetric",
    "quantized_add",
    "add_into_out",
    "embedding_byte",
    "embedding_4bit",
    "embedding_2bit",
    "mixed_mm",
    "mixed_linear",
]

_F32 = np.dtype(np.float32)
_SMALL_SCALE_THRESHOLD = np.float32(6.1e-5)  # a float constant in ExecuTorch


def _tokens(op: str, input: np.ndarray, params: np.ndarray, what: str) -> np.ndarray:
    """``params`` with one value per token (all dims but the last), shaped (..., 1)."""
    tokens = int(np.prod(input.shape[:-1], dtype=np.int64)) if input.ndim else 1
    check(params.size == tokens, op, f"{what} has {params.size} values for {tokens} tokens")
    return params.reshape(input.shape[:-1] + (1,))


@register_kernel("quantized_decomposed::quantize_per_token.out", shape=same_as())
def quantize_per_token(input, scales, zero_points, quant_min, quant_max, dtype, out):
    op = "quantized_decomposed::quantize_per_token.out"
    check(input.dtype.kind == "f" or input.dtype.name == "bfloat16", op, f"expects a float input, got {input.dtype}")
    with quiet():
        inv_scales = np.divide(_F32.type(1), _tokens(op, input, scales, "scales").astype(_F32))
    zps = _tokens(op, input, zero_points, "zero_points").astype(np.int64).astype(_F32)
    _quantize(input.astype(_F32, copy=False), inv_scales, zps, quant_min, quant_max, out)


@register_kernel("quantized_decomposed::dequantize_per_token.out", shape=same_as())
def dequantize_per_token(input, scales, zero_points, quant_min, quant_max, dtype, output_dtype, out):
    op = "quantized_decomposed::dequantize_per_token.out"
    check(input.dtype == numpy_dtype(dtype), op, f"input has dtype {input.dtype}, the call says {numpy_dtype(dtype)}")
    with quiet():
        q = input.astype(np.int64) - _tokens(op, input, zero_points, "zero_points").astype(np.int64)
        x = q.astype(_F32) * _tokens(op, input, scales, "scales").astype(_F32)
    write(out, x)


def _check_has_dim(op: str, input) -> None:
    if input.ndim == 0:
        fail(op, "input must have at least one dimension")


def _per_token_params_shape(op: str, input, dtype, scale_out, zero_point_out) -> list[tuple]:
    _check_has_dim(op, input)
    shape = input.shape[:-1] + (1,)
    return [shape, shape]


def _scale_and_zero_point(low: np.ndarray, high: np.ndarray, qmin: int, qmax: int):
    """ExecuTorch's ``calculate_scale_and_zero_point``, over arrays of per-token float32 minima
    and maxima: a double scale and an integer zero point, nudged into [qmin, qmax]."""
    low = np.minimum(low, _F32.type(0)).astype(_F32)
    high = np.maximum(high, _F32.type(0)).astype(_F32)
    with quiet():
        scale = (high.astype(np.float64) - low) / (qmax - qmin)
        scale32 = scale.astype(_F32)
        scale = np.where((scale32 == 0) | np.isinf(_F32.type(1) / scale32), 0.1, scale)
        small = scale < _SMALL_SCALE_THRESHOLD
        if small.any():
            amplifier = (_SMALL_SCALE_THRESHOLD / scale.astype(_F32)).astype(_F32)
            span = _F32.type(_SMALL_SCALE_THRESHOLD * (qmax - qmin))
            new_high = np.where(low == 0, span, np.where(high == 0, high, high * amplifier)).astype(_F32)
            new_low = np.where(low == 0, low, np.where(high == 0, -span, low * amplifier)).astype(_F32)
            low = np.where(small, new_low, low)
            high = np.where(small, new_high, high)
            scale = np.where(small, np.float64(_SMALL_SCALE_THRESHOLD), scale)
        from_min = qmin - low / scale
        from_max = qmax - high / scale
        min_error = abs(qmin) - np.abs(low / scale)
        max_error = abs(qmax) - np.abs(high / scale)
        initial = np.where(min_error < max_error, from_min, from_max)
        nudged = np.where(initial < qmin, qmin, np.where(initial > qmax, qmax, np.rint(initial.astype(_F32))))
    return scale, nudged.astype(np.int64)


@register_kernel("quantized_decomposed::choose_qparams_per_token_asymmetric.out", shape=_per_token_params_shape)
def choose_qparams_per_token_asymmetric(input, dtype, scale_out, zero_point_out):
    """Per token (every row of the last dim), the parameters mapping [min(x, 0), max(x, 0)]
    onto [-128, 127]."""
    op = "quantized_decomposed::choose_qparams_per_token_asymmetric.out"
    check(input.dtype == _F32, op, f"expects a float32 input, got {input.dtype}")
    _check_has_dim(op, input)
    if input.shape[-1] == 0:
        fail(op, f"cannot reduce input of shape {list(input.shape)}")
    with quiet():
        scale, zero_point = _scale_and_zero_point(input.min(axis=-1), input.max(axis=-1), -128, 127)
    write(scale_out, scale.reshape(scale_out.shape))
    write(zero_point_out, zero_point.reshape(zero_point_out.shape))


@register_kernel("quantized_decomposed::add.out", shape=same_as())
def quantized_add(
    a, a_scale, a_zero_point, a_quant_min, a_quant_max,
    b, b_scale, b_zero_point, b_quant_min, b_quant_max,
    out_scale, out_zero_point, out_quant_min, out_quant_max, out,
):  # fmt: skip
    """Dequantize, add in float32, quantize: ``quantized_add_out`` element by element."""
    add_into_out(
        "quantized_decomposed::add.out",
        a, a_scale, a_zero_point, a_quant_min, a_quant_max,
        b, b_scale, b_zero_point, b_quant_min, b_quant_max,
        out_scale, out_zero_point, out_quant_min, out_quant_max, out,
    )  # fmt: skip


def add_into_out(
    op: str,
    a, a_scale, a_zero_point, a_quant_min, a_quant_max,
    b, b_scale, b_zero_point, b_quant_min, b_quant_max,
    out_scale, out_zero_point, out_quant_min, out_quant_max, out,
):  # fmt: skip
    """The quantized add of ``op`` (its errors name it)."""
    check(a.shape == b.shape, op, f"a of shape {list(a.shape)} and b of shape {list(b.shape)} must match")
    check(a.dtype == b.dtype == out.dtype and a.dtype.kind in "iu", op, "a, b and out must share an integer dtype")
    for low, high, which in (
        (a_quant_min, a_quant_max, "a"),
        (b_quant_min, b_quant_max, "b"),
        (out_quant_min, out_quant_max, "out"),
    ):
        check(0 <= low <= high <= 255, op, f"{which} quant range [{low}, {high}] must lie in [0, 255]")
    with quiet():
        dqa = ((a.astype(np.int64) - a_zero_point) * np.float64(_F32.type(a_scale))).astype(_F32)
        dqb = ((b.astype(np.int64) - b_zero_point) * np.float64(_F32.type(b_scale))).astype(_F32)
        inv_scale = _F32.type(1) / _F32.type(out_scale)
        q = _F32.type(out_zero_point) + np.rint(inv_scale * (dqa + dqb))
        q = np.clip(q.astype(np.int64), out_quant_min, out_quant_max)
    write(out, q)


# -- weight-only quantized embeddings ---------------------------------------------------------


def _unpack(weight: np.ndarray, nbit: int) -> np.ndarray:
    """Packed uint8 rows as signed values: 4 bits high nibble first, 2 bits low pair first."""
    if nbit == 8:
        return weight
    if nbit == 4:
        high = (weight >> 4).astype(np.int32) - 8
        low = (weight & 0x0F).astype(np.int32) - 8
        return np.stack([high, low], axis=-1).reshape(weight.shape[0], -1)
    parts = [((weight >> shift) & 3).astype(np.int32) - 2 for shift in (0, 2, 4, 6)]
    return np.stack(parts, axis=-1).reshape(weight.shape[0], -1)


def _check_weight_2d(op: str, weight) -> None:
    if weight.ndim != 2:
        fail(op, f"weight must be 2-D, got shape {list(weight.shape)}")


def _check_out_dtype(op: str, out, dtype) -> None:
    """A ``dtype`` argument, when given, is out's."""
    if dtype is not None and out.dtype != numpy_dtype(dtype):
        fail(op, f"dtype {numpy_dtype(dtype)} must match the dtype of the out tensor, {out.dtype}")


def _embedding_shape(nbit: int):
    def shape(op: str, weight, weight_scales, weight_zero_points, quant_min, quant_max, indices, *rest):
        _check_weight_2d(op, weight)
        return [indices.shape + (weight.shape[1] * (8 // nbit),)]

    return shape


def _embedding(op: str, nbit: int, weight, scales, zero_points, quant_min, quant_max, indices, dtype, out):
    _check_weight_2d(op, weight)
    allowed = ("uint8", "int8") if nbit == 8 else ("uint8",)
    check(weight.dtype.name in allowed, op, f"weight dtype {weight.dtype} is not supported")
    check(scales.ndim in (1, 2), op, f"weight_scales must be 1-D or 2-D, got shape {list(scales.shape)}")
    check(scales.shape[0] == weight.shape[0], op, f"{scales.shape[0]} scales for {weight.shape[0]} rows")
    check(quant_min <= quant_max, op, f"weight quant min {quant_min} is greater than quant max {quant_max}")
    check(indices.dtype.kind == "i", op, f"indices must be integers, got {indices.dtype}")
    check(out.dtype.name in ("float32", "float16", "bfloat16"), op, f"out dtype {out.dtype} is not supported")
    _check_out_dtype(op, out, dtype)
    values = _unpack(weight, nbit)
    dim = values.shape[1]
    groups = scales.shape[1] if scales.ndim == 2 else 1
    check(dim % groups == 0, op, f"{groups} groups do not divide the embedding dim {dim}")
    if zero_points is not None:
        check(zero_points.shape == scales.shape, op, "weight_zero_points must have the shape of weight_scales")
    flat = indices.reshape(-1).astype(np.int64)
    if flat.size and (flat.min() < 0 or flat.max() >= weight.shape[0]):
        fail(op, f"index out of bounds for weight with {weight.shape[0]} rows")
    rows = values[flat].astype(_F32).reshape(flat.size, groups, dim // groups)
    group_scales = scales.reshape(weight.shape[0], groups)[flat].astype(_F32)[..., None]
    with quiet():
        if zero_points is not None:
            rows = rows - zero_points.reshape(weight.shape[0], groups)[flat].astype(_F32)[..., None]
        rows = rows * group_scales
    write(out, rows.reshape(out.shape))


def _embedding_kernels(bits: int, out_name: str, dtype_out_name: str):
    """The ``.out`` (weight dtype from the scales) and ``.dtype_out`` kernels of one bit width."""
    shape = _embedding_shape(bits)

    @register_kernel(out_name, shape=shape)
    def kernel(weight, weight_scales, weight_zero_points, weight_quant_min, weight_quant_max, indices, out):
        args = (weight, weight_scales, weight_zero_points, weight_quant_min, weight_quant_max, indices)
        _embedding(out_name, bits, *args, None, out)

    @register_kernel(dtype_out_name, shape=shape)
    def kernel_dtype(
        weight, weight_scales, weight_zero_points, weight_quant_min, weight_quant_max, indices, dtype, out
    ):
        args = (weight, weight_scales, weight_zero_points, weight_quant_min, weight_quant_max, indices)
        _embedding(dtype_out_name, bits, *args, dtype, out)

    return kernel


embedding_byte = _embedding_kernels(
    8, "quantized_decomposed::embedding_byte.out", "quantized_decomposed::embedding_byte.dtype_out"
)
embedding_4bit = _embedding_kernels(
    4, "quantized_decomposed::embedding_4bit.out", "quantized_decomposed::embedding_4bit.dtype_out"
)
embedding_2bit = _embedding_kernels(
    2, "quantized_decomposed::embedding_2bit.out", "quantized_decomposed::embedding_2bit.dtype_out"
)


# -- int8-weight matrix products ----------------------------------------------------------------


def _check_mixed(op: str, input, weight, weight_zero_points) -> None:
    """The mixed kernels' dtypes (after their shape function's checks)."""
    check(weight.dtype == np.int8, op, f"weight dtype must be int8, got {weight.dtype}")
    check(input.dtype.name in ("float32", "float16"), op, f"input dtype must be float32 or float16, got {input.dtype}")
    check(weight_zero_points is None, op, "zero points not supported yet")


def _check_multiply(op: str, input, weight, inner: int) -> None:
    """2-D input and weight, input's columns matching weight's dim ``inner``."""
    if input.ndim != 2 or weight.ndim != 2:
        fail(op, f"input and weight must be 2-D, got shapes {list(input.shape)} and {list(weight.shape)}")
    if input.shape[1] != weight.shape[inner]:
        fail(op, f"shapes do not multiply: input {list(input.shape)} and weight {list(weight.shape)}")


def _mixed_mm_shape(op: str, input, weight, weight_scales, weight_zero_points, out) -> list[tuple]:
    _check_multiply(op, input, weight, 0)
    return [(input.shape[0], weight.shape[1])]


@register_kernel("quantized_decomposed::mixed_mm.out", shape=_mixed_mm_shape)
def mixed_mm(input, weight, weight_scales, weight_zero_points, out):
    """``z[i, j] = sum_k x[i, k] * w[k, j] * s[k]`` (one scale per row of weight)."""
    op = "quantized_decomposed::mixed_mm.out"
    _mixed_mm_shape(op, input, weight, weight_scales, weight_zero_points, out)
    _check_mixed(op, input, weight, weight_zero_points)
    check(weight_scales.shape == (weight.shape[0],), op, "weight_scales must hold one scale per row of weight")
    with quiet():
        result = (input.astype(_F32) * weight_scales.astype(_F32)) @ weight.astype(_F32)
    write(out, result)


def _mixed_linear_shape(op: str, input, weight, weight_scales, weight_zero_points, dtype, out) -> list[tuple]:
    _check_multiply(op, input, weight, 1)
    return [(input.shape[0], weight.shape[0])]


@register_kernel("quantized_decomposed::mixed_linear.out", shape=_mixed_linear_shape)
def mixed_linear(input, weight, weight_scales, weight_zero_points, dtype, out):
    """``z[i, j] = sum_g s[j, g] * sum_{k in group g} x[i, k] * w[j, k]``."""
    op = "quantized_decomposed::mixed_linear.out"
    _mixed_linear_shape(op, input, weight, weight_scales, weight_zero_points, dtype, out)
    _check_mixed(op, input, weight, weight_zero_points)
    check(weight_scales.ndim in (1, 2) and weight_scales.shape[0] == weight.shape[0], op, "bad weight_scales shape")
    check(weight_scales.dtype == input.dtype, op, "weight_scales must have the dtype of input")
    _check_out_dtype(op, out, dtype)
    n = input.shape[1]
    groups = weight_scales.shape[1] if weight_scales.ndim == 2 else 1
    size = -(-n // groups) if n else 1
    count = -(-n // size) if n else 0
    x = input.astype(_F32)
    w = weight.astype(_F32)
    scales = weight_scales.reshape(weight.shape[0], -1).astype(_F32)
    result = np.zeros((input.shape[0], weight.shape[0]), _F32)
    with quiet():
        for g in range(count):
            part = slice(g * size, min((g + 1) * size, n))
            result += (x[:, part] @ w[:, part].T) * scales[:, g]
    write(out, result)
