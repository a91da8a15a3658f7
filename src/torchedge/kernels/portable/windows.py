"""Sliding windows over the two spatial dims, shared by convolution and pooling."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

__all__ = ["output_size", "pad2d", "windows2d"]


def output_size(size: int, kernel: int, stride: int, pad: int, dilation: int, ceil_mode: bool = False) -> int:
    """ATen's pooling/convolution output length, including the ceil_mode rule that the
    last window must start inside the input or its left padding."""
    span = size + 2 * pad - dilation * (kernel - 1) - 1
    n = (span + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (n - 1) * stride >= size + pad:
        n -= 1
    return n


def pad2d(x: np.ndarray, pad: tuple, extent: tuple, value, dtype=None) -> np.ndarray:
    """``x`` (..., H, W) padded by ``pad`` before and up to ``extent`` (at least H+pad,
    W+pad) after, filled with ``value``. No copy when nothing is added and no cast asked."""
    dtype = x.dtype if dtype is None else dtype
    h, w = x.shape[-2:]
    eh, ew = max(extent[0], h + pad[0]), max(extent[1], w + pad[1])
    if (eh, ew) == (h, w) and pad == (0, 0) and dtype == x.dtype:
        return x
    padded = np.full(x.shape[:-2] + (eh, ew), value, dtype)
    padded[..., pad[0]:pad[0] + h, pad[1]:pad[1] + w] = x
    return padded


def windows2d(x: np.ndarray, kernel: tuple, stride: tuple, dilation: tuple, out_hw: tuple) -> np.ndarray:
    """A read-only view (N, C, KH, KW, OH, OW) of the windows of ``x`` (N, C, H, W)."""
    sn, sc, sh, sw = x.strides
    shape = x.shape[:2] + tuple(kernel) + tuple(out_hw)
    strides = (sn, sc, sh * dilation[0], sw * dilation[1], sh * stride[0], sw * stride[1])
    return as_strided(x, shape, strides, writeable=False)
