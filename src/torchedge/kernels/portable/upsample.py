"""Upsampling of the trailing 1-3 dims: nearest, nearest-exact, (bi/tri)linear, bicubic.

Every mode is separable: along each resized dim, output position i reads a few input
positions with fixed weights, computed exactly as ATen's ``UpSample.h`` computes them
(float32 index arithmetic for nearest, the op-math type for the interpolating modes). A
nearest resize takes one gather per dim; an interpolating one sums the weighted gathers of
its taps one dim at a time (`interpolate_by_gathers`; the kernels take another ``interpolate``
of the same contract) in float32 (float64 for float64 inputs) and rounds once. uint8 images
take ATen's fixed-point path instead (bilinear and bicubic 2-D only): int16 weights, the last
dim first, each resized dim rounded to uint8.
(ATen's generic uint8 fallback, taken for more than 4 channels on AVX2 CPUs and always
without AVX2, repeats the first row where the output width is 1; this follows its AVX2 kernel.)
"""

from __future__ import annotations

import numpy as np

from torchedge.kernels.dtypes import accumulate_dtype, category
from torchedge.kernels.portable.common import check, fail, quiet, write
from torchedge.kernels.registry import register_kernel

__all__ = ["source_scale", "nearest_indices", "linear_taps", "cubic_taps", "cubic_weights", "interpolate_by_gathers"]


def source_scale(in_size: int, out_size: int, align_corners: bool, scale, dtype) -> float:
    """ATen's ``area_pixel_compute_scale``: input pixels per output pixel."""
    if align_corners:
        return dtype.type((in_size - 1) / (out_size - 1)) if out_size > 1 else dtype.type(0)
    if scale is not None and scale > 0:
        return dtype.type(1.0 / scale)
    return dtype.type(in_size) / dtype.type(out_size)


def nearest_indices(in_size: int, out_size: int, scale, exact: bool = False) -> np.ndarray:
    """Input index of every output position (``nearest_idx`` / ``nearest_exact_idx``)."""
    i = np.arange(out_size)
    if not exact and out_size == in_size:
        return i
    if not exact and out_size == 2 * in_size:
        return i >> 1
    f32 = np.dtype(np.float32)
    ratio = source_scale(in_size, out_size, False, scale, f32)
    position = (i.astype(f32) + f32.type(0.5)) * ratio if exact else i.astype(f32) * ratio
    return np.minimum(np.floor(position).astype(np.int64), in_size - 1)


def linear_taps(in_size: int, out_size: int, align_corners: bool, scale, dtype):
    """([index0, index1], [lambda0, lambda1]) of linear interpolation along one dim."""
    i = np.arange(out_size)
    if out_size == in_size:
        return [i, i], [np.ones(out_size, dtype), np.zeros(out_size, dtype)]
    ratio = source_scale(in_size, out_size, align_corners, scale, dtype)
    real = (
        ratio * i.astype(dtype)
        if align_corners
        else np.maximum(ratio * (i.astype(dtype) + dtype.type(0.5)) - dtype.type(0.5), dtype.type(0))
    )
    index0 = np.minimum(np.floor(real).astype(np.int64), in_size - 1)
    lambda1 = np.clip(real - index0.astype(dtype), 0, 1).astype(dtype)
    index1 = index0 + (index0 < in_size - 1)
    return [index0, index1], [(1 - lambda1).astype(dtype), lambda1]


def cubic_weights(t: np.ndarray, a: float = -0.75) -> list:
    """Cubic convolution weights of the four neighbours at offsets -1, 0, 1, 2 from
    ``floor(x)``, for fractional parts ``t`` (ATen's ``get_cubic_upsample_coefficients``)."""
    a = t.dtype.type(a)

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return [w.astype(t.dtype) for w in (far(t + 1), near(t), near(1 - t), far(2 - t))]


def cubic_taps(in_size: int, out_size: int, align_corners: bool, scale, dtype):
    """Four (index, weight) taps of bicubic interpolation (indices clamped to the input)."""
    i = np.arange(out_size).astype(dtype)
    ratio = source_scale(in_size, out_size, align_corners, scale, dtype)
    real = ratio * i if align_corners else ratio * (i + dtype.type(0.5)) - dtype.type(0.5)
    floor = np.minimum(np.floor(real), in_size - 1)
    t = np.clip(real - floor, 0, 1).astype(dtype)
    start = floor.astype(np.int64) - 1
    return [np.clip(start + k, 0, in_size - 1) for k in range(4)], cubic_weights(t)


def _linear_filter(x: np.ndarray) -> np.ndarray:
    return np.where(np.abs(x) < 1, 1 - np.abs(x), 0.0)


def _cubic_filter(x: np.ndarray, a: float = -0.75) -> np.ndarray:
    x = np.abs(x)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.where(x < 1, near, np.where(x < 2, far, 0.0))


def _int16_taps(in_size: int, out_size: int, align_corners: bool, scale, cubic: bool):
    """ATen's uint8 taps along one dim (``_compute_index_ranges_int16_weights``, no antialias):
    each output's first input index, its (out_size, 2 or 4) int16 weights (zero past the
    input's end; taps before its start are folded into the first) and their precision in bits."""
    taps = 4 if cubic else 2
    support = taps // 2
    f64 = np.dtype(np.float64)
    ratio = source_scale(in_size, out_size, align_corners, scale, f64)
    i = np.arange(out_size, dtype=f64)
    real = ratio * i if align_corners else ratio * (i + 0.5) - 0.5
    if not (cubic or align_corners):
        real = np.maximum(real, 0)
    index = np.minimum(np.floor(real.astype(np.float32)).astype(np.int64), in_size - 1)  # ATen's floorf
    fraction = np.clip(real - index, 0, 1)
    low = index - support + 1
    start = np.maximum(low, 0)
    count = np.clip(np.minimum(index + support + 1, in_size) - start, 0, taps)
    weights, rows, slot, peak = np.zeros((out_size, taps)), np.arange(out_size), np.zeros(out_size, np.int64), 0.0
    for j in range(taps):  # ATen's accumulation, including the running maximum that sets the precision
        slot = np.where(low + j <= 0, 0, np.where(low + j >= in_size - 1, count - 1, slot))
        weights[rows, slot] += (_cubic_filter if cubic else _linear_filter)(j + 1 - support - fraction)
        peak = max(peak, weights[rows, slot].max())
        slot = slot + 1
    precision = next((p for p in range(22) if int(0.5 + peak * (1 << (p + 1))) >= 1 << 15), 22)
    weights[np.arange(taps) >= count[:, None]] = 0
    scaled = weights * (1 << precision)
    return start, np.trunc(scaled + np.where(scaled < 0, -0.5, 0.5)).astype(np.int32), precision


def _resample_uint8(x: np.ndarray, axis: int, size: int, align_corners: bool, scale, cubic: bool) -> np.ndarray:
    """One resized dim of a uint8 array in ATen's fixed-point arithmetic, rounded to uint8."""
    start, weights, precision = _int16_taps(x.shape[axis], size, align_corners, scale, cubic)
    shape = (-1,) + (1,) * (x.ndim - 1 - axis)
    total = np.int32(1 << (precision - 1))
    for j in range(weights.shape[1]):
        index = np.minimum(start + j, x.shape[axis] - 1)
        total = total + np.take(x, index, axis=axis).astype(np.int32) * weights[:, j].reshape(shape)
    return np.clip(total >> precision, 0, 255).astype(np.uint8)


def _sizes(op, x, dims, output_size, scales) -> tuple:
    """Output sizes from ``output_size`` or, without it, ``int(size * scale)`` (ATen truncates
    the double); `_resized` checks them."""
    if output_size is None:
        if scales is None or len(scales) != dims:
            fail(op, f"expected an output_size or {dims} scale factors, got {scales}")
        return tuple(int(n * s) for n, s in zip(x.shape[-dims:], scales))
    return tuple(output_size)


def _resized(op: str, dims: int, x, size: tuple) -> tuple:
    """``x``'s shape with its last ``dims`` dims set to ``size``: the checks of the shape
    functions and the kernels."""
    if x.ndim < dims + 1:
        fail(op, f"expected at least a {dims + 1}-D input, got shape {list(x.shape)}")
    if len(size) != dims:
        fail(op, f"output_size must have {dims} values, got {list(size)}")
    if min(size) <= 0 or min(x.shape[-dims:]) <= 0:
        fail(op, f"cannot resize {list(x.shape)} to {list(size)}")
    return x.shape[:-dims] + size


def _resize(op, mode, dims, x, size, align_corners, scales, out, interpolate):
    shape = _resized(op, dims, x, size)
    if out.shape != shape:
        fail(op, f"out has shape {list(out.shape)}, expected {list(shape)}")
    spatial = x.shape[-dims:]
    scales = [None] * dims if scales is None else list(scales)
    if mode in ("nearest", "nearest-exact"):  # one take per resized dim
        result = x
        for d in range(dims):
            taken = nearest_indices(spatial[d], size[d], scales[d], mode == "nearest-exact")
            if not np.array_equal(taken, np.arange(spatial[d])):
                result = np.take(result, taken, axis=x.ndim - dims + d)
        write(out, result)
        return
    check(
        category(x.dtype) >= 2 or (x.dtype == np.uint8 and dims == 2),
        op,
        f"{mode} upsampling is not implemented for {x.dtype} (as in ATen)",
    )
    if x.dtype == np.uint8:
        result = x
        for d in reversed(range(dims)):  # the last (contiguous) dim first, as in ATen
            if size[d] != spatial[d]:
                result = _resample_uint8(result, x.ndim - dims + d, size[d], align_corners, scales[d], mode == "cubic")
        write(out, result)
        return
    acc = accumulate_dtype(x.dtype)
    result = x.astype(acc, copy=False)
    with quiet():
        for d in range(dims):
            axis = x.ndim - dims + d
            if mode == "cubic":
                indices, weights = cubic_taps(spatial[d], size[d], align_corners, scales[d], acc)
            else:
                indices, weights = linear_taps(spatial[d], size[d], align_corners, scales[d], acc)
            result = interpolate(result, indices, weights, axis)
    write(out, result)


def interpolate_by_gathers(x: np.ndarray, indices: list, weights: list, axis: int) -> np.ndarray:
    """``x`` with dim ``axis`` resampled: output position i is the sum over the taps of
    ``weights[k][i] * x[indices[k][i]]`` along ``axis`` (in x's dtype, the taps in order)."""
    shape = (-1,) + (1,) * (x.ndim - 1 - axis)
    total = np.take(x, indices[0], axis=axis) * weights[0].reshape(shape)
    for index, weight in zip(indices[1:], weights[1:]):
        total += np.take(x, index, axis=axis) * weight.reshape(shape)
    return total


def _vec(op, mode, dims, input, output_size, align_corners, scale_factors, out, interpolate=interpolate_by_gathers):
    """The ``.vec`` overloads: an output size, or scale factors that also set the mapping."""
    size = _sizes(op, input, dims, output_size, scale_factors)
    scales = None if output_size is not None else scale_factors
    _resize(op, mode, dims, input, size, align_corners, scales, out, interpolate)


def _fixed(op, mode, dims, input, output_size, align_corners, scales, out, interpolate=interpolate_by_gathers):
    """The ``.out`` overloads: an output size, plus optional scales for the mapping."""
    size = _sizes(op, input, dims, output_size, None)
    _resize(op, mode, dims, input, size, align_corners, scales, out, interpolate)


def _upsample_shape(dims: int):
    """The shape rule of the ``.out`` overloads: they take an output size (their scales only
    set the sampling)."""

    def upsample(op: str, self, output_size, *rest) -> list[tuple]:
        return [_resized(op, dims, self, _sizes(op, self, dims, output_size, None))]

    return upsample


def _upsample_vec_shape(dims: int):
    """The shape rule of the ``.vec_out`` overloads: an output size, or without one each dim
    is ``int(size * scale)`` (ATen truncates the double)."""

    def upsample_vec(op: str, input, output_size, *rest) -> list[tuple]:
        scale_factors = rest[-2]  # the argument before out
        return [_resized(op, dims, input, _sizes(op, input, dims, output_size, scale_factors))]

    return upsample_vec


@register_kernel("aten::upsample_nearest2d.vec_out", shape=_upsample_vec_shape(2))
def upsample_nearest2d_vec(input, output_size, scale_factors, out):
    _vec("aten::upsample_nearest2d.vec_out", "nearest", 2, input, output_size, False, scale_factors, out)


@register_kernel("aten::upsample_bilinear2d.vec_out", shape=_upsample_vec_shape(2))
def upsample_bilinear2d_vec(
    input, output_size, align_corners, scale_factors, out, *, interpolate=interpolate_by_gathers
):
    _vec(
        "aten::upsample_bilinear2d.vec_out",
        "linear",
        2,
        input,
        output_size,
        align_corners,
        scale_factors,
        out,
        interpolate,
    )


@register_kernel("aten::upsample_nearest1d.out", shape=_upsample_shape(1))
def upsample_nearest1d(self, output_size, scales, out):
    _fixed("aten::upsample_nearest1d.out", "nearest", 1, self, output_size, False, (scales,), out)


@register_kernel("aten::upsample_nearest2d.out", shape=_upsample_shape(2))
def upsample_nearest2d(self, output_size, scales_h, scales_w, out):
    _fixed("aten::upsample_nearest2d.out", "nearest", 2, self, output_size, False, (scales_h, scales_w), out)


@register_kernel("aten::upsample_nearest3d.out", shape=_upsample_shape(3))
def upsample_nearest3d(self, output_size, scales_d, scales_h, scales_w, out):
    _fixed("aten::upsample_nearest3d.out", "nearest", 3, self, output_size, False, (scales_d, scales_h, scales_w), out)


@register_kernel("aten::_upsample_nearest_exact2d.out", shape=_upsample_shape(2))
def upsample_nearest_exact2d(self, output_size, scales_h, scales_w, out):
    _fixed(
        "aten::_upsample_nearest_exact2d.out", "nearest-exact", 2, self, output_size, False, (scales_h, scales_w), out
    )


@register_kernel("aten::upsample_linear1d.out", shape=_upsample_shape(1))
def upsample_linear1d(self, output_size, align_corners, scales, out, *, interpolate=interpolate_by_gathers):
    _fixed("aten::upsample_linear1d.out", "linear", 1, self, output_size, align_corners, (scales,), out, interpolate)


@register_kernel("aten::upsample_bilinear2d.out", shape=_upsample_shape(2))
def upsample_bilinear2d(
    self, output_size, align_corners, scales_h, scales_w, out, *, interpolate=interpolate_by_gathers
):
    _fixed(
        "aten::upsample_bilinear2d.out",
        "linear",
        2,
        self,
        output_size,
        align_corners,
        (scales_h, scales_w),
        out,
        interpolate,
    )


@register_kernel("aten::upsample_trilinear3d.out", shape=_upsample_shape(3))
def upsample_trilinear3d(
    self, output_size, align_corners, scales_d, scales_h, scales_w, out, *, interpolate=interpolate_by_gathers
):
    _fixed(
        "aten::upsample_trilinear3d.out",
        "linear",
        3,
        self,
        output_size,
        align_corners,
        (scales_d, scales_h, scales_w),
        out,
        interpolate,
    )


@register_kernel("aten::upsample_bicubic2d.out", shape=_upsample_shape(2))
def upsample_bicubic2d(
    self, output_size, align_corners, scales_h, scales_w, out, *, interpolate=interpolate_by_gathers
):
    _fixed(
        "aten::upsample_bicubic2d.out",
        "cubic",
        2,
        self,
        output_size,
        align_corners,
        (scales_h, scales_w),
        out,
        interpolate,
    )
