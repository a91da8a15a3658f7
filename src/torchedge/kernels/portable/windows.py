"""Kernel taps over the two spatial dims, shared by convolution and pooling.

`taps2d` pads the input once and returns, for every kernel tap (i, j), the (N, C, OH, OW)
view of the input values that tap meets across all output positions. With a stride
above 1 the padded input is first split into its stride phases (rows r with the same
r % stride together), so that every tap view still has unit inner strides: NumPy's
loops run several times faster over those than over stride-2 views.
"""

from __future__ import annotations

import numpy as np

__all__ = ["output_size", "taps2d"]


def output_size(size: int, kernel: int, stride: int, pad: int, dilation: int, ceil_mode: bool = False) -> int:
    """ATen's pooling/convolution output length, including the ceil_mode rule that the
    last window must start inside the input or its left padding."""
    span = size + 2 * pad - dilation * (kernel - 1) - 1
    n = (span + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (n - 1) * stride >= size + pad:
        n -= 1
    return n


def _padded(x, pad, extent, value, dtype):
    """``x`` padded by ``pad`` before and up to ``extent`` after (no copy when nothing changes)."""
    h, w = x.shape[-2:]
    eh, ew = max(extent[0], h + pad[0]), max(extent[1], w + pad[1])
    if (eh, ew) == (h, w) and dtype == x.dtype:
        return x
    padded = np.full(x.shape[:-2] + (eh, ew), value, dtype)
    padded[..., pad[0]:pad[0] + h, pad[1]:pad[1] + w] = x
    return padded


def taps2d(x: np.ndarray, kernel: tuple, stride: tuple, padding: tuple, dilation: tuple, out_hw: tuple,
           value=0, dtype=None) -> list:
    """``taps[i][j]``: read-only (N, C, OH, OW) views of ``x`` (N, C, H, W), padded with
    ``value`` and cast to ``dtype``, at kernel tap (i, j) of every output window."""
    dtype = x.dtype if dtype is None else np.dtype(dtype)
    (kh, kw), (sh, sw), (dh, dw), (oh, ow) = kernel, stride, dilation, out_hw
    # rows up to the end of the last window, rounded up to whole strides
    extent = (-(-((oh - 1) * sh + dh * (kh - 1) + 1) // sh) * sh,
              -(-((ow - 1) * sw + dw * (kw - 1) + 1) // sw) * sw)
    if (sh, sw) == (1, 1):
        padded = _padded(x, tuple(padding), extent, value, dtype)
        phases = padded[None, None]
    else:
        padded = _padded(x, tuple(padding), extent, value, dtype)
        padded = padded[..., :extent[0], :extent[1]]  # the rows and columns no window reaches go
        n, c, h, w = padded.shape
        phases = padded.reshape(n, c, h // sh, sh, w // sw, sw).transpose(3, 5, 0, 1, 2, 4).copy()
    phases.flags.writeable = False
    taps = []
    for i in range(kh):
        r = i * dh
        row = []
        for j in range(kw):
            col = j * dw
            plane = phases[r % sh, col % sw]
            row.append(plane[:, :, r // sh:r // sh + oh, col // sw:col // sw + ow])
        taps.append(row)
    return taps
