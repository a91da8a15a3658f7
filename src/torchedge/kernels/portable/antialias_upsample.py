"""Antialiased resizing of (N, C, H, W) images: ``_upsample_bilinear2d_aa`` and
``_upsample_bicubic2d_aa`` (``interpolate(..., antialias=True)``).

As ATen (after PIL) does it: separable, the width first and then the height, each pass
stored in the input dtype. Output pixel i of a dim reads the input pixels whose centres lie
within ``support`` of its centre ``scale * (i + 0.5)``; when shrinking, the filter (a
triangle, or Keys' cubic with a = -0.5) is stretched by the scale, so that every input
pixel contributes. The weights of a pixel are normalised to sum to one. Each scalar step is
rounded where ATen's C++ rounds it (some steps in double, the rest in the input dtype),
so that the window bounds and weights come out exactly as ATen's.
"""

from __future__ import annotations

import math

import numpy as np

from torchedge.kernels.portable.common import check, fail, quiet, write
from torchedge.kernels.portable.upsample import source_scale
from torchedge.kernels.registry import register_kernel

__all__ = ["antialias_weights", "upsample_bilinear2d_aa", "upsample_bicubic2d_aa"]

_F64 = np.dtype(np.float64)


def _triangle(x: np.ndarray) -> np.ndarray:
    x = np.abs(x)
    return np.where(x < 1, x.dtype.type(1) - x, x.dtype.type(0))


def _keys_cubic(x: np.ndarray) -> np.ndarray:
    t = x.dtype.type
    a = t(-0.5)
    x = np.abs(x)
    near = ((a + t(2)) * x - (a + t(3))) * x * x + t(1)
    far = ((a * x - t(5) * a) * x + t(8) * a) * x - t(4) * a
    return np.where(x < 1, near, np.where(x < 2, far, t(0)))


def antialias_weights(in_size: int, out_size: int, align_corners: bool, scale, taps: int, kind, dtype):
    """(first input pixel, window length, (out_size, K) normalised weights) of every output
    pixel of a dim; ``taps`` is the filter's width at scale 1 (2 bilinear, 4 bicubic)."""
    dtype = np.dtype(dtype)
    t = dtype.type
    step = source_scale(in_size, out_size, align_corners, scale, dtype)
    support = t(taps * 0.5 * float(step)) if step >= 1 else t(taps * 0.5)
    inverse = t(1.0 / float(step)) if step >= 1 else t(1)
    longest = int(math.ceil(float(support))) * 2 + 1
    i = np.arange(out_size, dtype=_F64)
    center = (float(step) * (i + 0.5)).astype(dtype)
    low = np.trunc((center - support).astype(_F64) + 0.5).astype(np.int64)
    high = np.trunc((center + support).astype(_F64) + 0.5).astype(np.int64)
    first = np.maximum(low, 0)
    length = np.clip(np.minimum(high, in_size) - first, 0, longest)
    j = np.arange(longest)
    offset = ((j[None, :] + first[:, None]).astype(dtype) - center[:, None]).astype(_F64)
    weights = kind(((offset + 0.5) * float(inverse)).astype(dtype))
    valid = j[None, :] < length[:, None]
    weights = np.where(valid, weights, t(0))
    total = weights[:, 0].copy()
    for k in range(1, longest):  # summed in order, in the dtype
        total = total + weights[:, k]
    weights = np.where(total[:, None] != 0, weights / np.where(total == 0, t(1), total)[:, None], weights)
    return first, length, weights.astype(dtype)


def _resample(x: np.ndarray, axis: int, out_size: int, align_corners: bool, scale, taps: int, kind) -> np.ndarray:
    """``x`` resized along ``axis``; each output is its window's weighted sum, in order."""
    in_size = x.shape[axis]
    first, length, weights = antialias_weights(in_size, out_size, align_corners, scale, taps, kind, x.dtype)
    moved = np.moveaxis(x, axis, -1)
    total = moved[..., np.minimum(first, in_size - 1)] * weights[:, 0]
    for k in range(1, weights.shape[1]):
        term = moved[..., np.minimum(first + k, in_size - 1)] * weights[:, k]
        total = np.where(k < length, total + term, total)
    return np.moveaxis(total.astype(x.dtype, copy=False), -1, axis)


def _check_sizes(op: str, self, output_size) -> None:
    """The checks the kernels and the shape function share: a 4-D input and 2 output sizes."""
    if self.ndim != 4:
        fail(op, f"expected a 4-D (N, C, H, W) input, got shape {list(self.shape)}")
    if len(output_size) != 2:
        fail(op, f"output_size must have 2 values, got {list(output_size)}")


def _check(op: str, self, output_size) -> tuple:
    _check_sizes(op, self, output_size)
    check(
        min(output_size) > 0 and min(self.shape[2:]) > 0,
        op,
        f"input and output sizes should be greater than 0, but got input (H: {self.shape[2]}, W: {self.shape[3]}) "
        f"output (H: {output_size[0]}, W: {output_size[1]})",
    )
    check(self.dtype in (np.dtype(np.float32), _F64), op, f"not implemented for dtype {self.dtype}")
    return tuple(output_size)


def _resize(op: str, taps: int, kind, self, output_size, align_corners, scales_h, scales_w, out) -> None:
    height, width = _check(op, self, output_size)
    if out.size == 0:
        return
    x = self
    with quiet():
        if width != self.shape[3]:
            x = _resample(x, 3, width, align_corners, scales_w, taps, kind)
        if height != self.shape[2]:
            x = _resample(x, 2, height, align_corners, scales_h, taps, kind)
    write(out, x)


def _shape(op: str, self, output_size, *rest) -> list[tuple]:
    _check_sizes(op, self, output_size)
    return [self.shape[:2] + tuple(output_size)]


@register_kernel("aten::_upsample_bilinear2d_aa.out", shape=_shape)
def upsample_bilinear2d_aa(self, output_size, align_corners, scales_h, scales_w, out):
    op = "aten::_upsample_bilinear2d_aa.out"
    _resize(op, 2, _triangle, self, output_size, align_corners, scales_h, scales_w, out)


@register_kernel("aten::_upsample_bicubic2d_aa.out", shape=_shape)
def upsample_bicubic2d_aa(self, output_size, align_corners, scales_h, scales_w, out):
    op = "aten::_upsample_bicubic2d_aa.out"
    _resize(op, 4, _keys_cubic, self, output_size, align_corners, scales_h, scales_w, out)
