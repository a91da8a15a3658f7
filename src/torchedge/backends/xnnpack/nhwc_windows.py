"""Window geometry shared by the NHWC convolution and pooling nodes.

`Window` describes a 2-D sliding window over an NHWC value (kernel, stride, dilation, padding);
`padded_input` gives the padded input buffer (its border filled once, at load) with the step
that copies the interior in; `Window.taps` are the strided views of the padded input that line
up with the output grid, one per kernel position.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

__all__ = ["Window", "padded_input"]


@dataclass(frozen=True)
class Window:
    kernel: tuple[int, int]
    stride: tuple[int, int]
    dilation: tuple[int, int]
    padding: tuple[int, int, int, int]  # top, right, bottom, left (XNNPACK's order)

    def output_size(self, height: int, width: int) -> tuple[int, int]:
        top, right, bottom, left = self.padding
        sizes = []
        for size, before, after, k, s, d in zip(
            (height, width), (top, left), (bottom, right), self.kernel, self.stride, self.dilation
        ):
            sizes.append((size + before + after - d * (k - 1) - 1) // s + 1)
        return sizes[0], sizes[1]

    def taps(self, padded: np.ndarray, out_h: int, out_w: int) -> list[np.ndarray]:
        """Per kernel position (row-major): the (N, out_h, out_w, C) view of ``padded`` it reads."""
        (kh, kw), (sh, sw), (dh, dw) = self.kernel, self.stride, self.dilation
        views = []
        for i in range(kh):
            for j in range(kw):
                rows = slice(i * dh, i * dh + sh * (out_h - 1) + 1, sh)
                cols = slice(j * dw, j * dw + sw * (out_w - 1) + 1, sw)
                views.append(padded[:, rows, cols, :])
        return views

    def columns(self, padded: np.ndarray, out_h: int, out_w: int) -> np.ndarray:
        """The (N, out_h, out_w, kh, kw, C) strided view of ``padded`` (im2col without the copy)."""
        n, _, _, c = padded.shape
        sn, sh_, sw_, sc = padded.strides
        return np.lib.stride_tricks.as_strided(
            padded,
            (n, out_h, out_w, self.kernel[0], self.kernel[1], c),
            (sn, sh_ * self.stride[0], sw_ * self.stride[1], sh_ * self.dilation[0], sw_ * self.dilation[1], sc),
            writeable=False,
        )

    def row_runs(self, padded: np.ndarray, out_h: int, out_w: int) -> np.ndarray:
        """For unit stride along W and a C-contiguous ``padded``: the (N, out_h, kh, kw, out_w * C)
        view whose last axis is the contiguous run of input each kernel position reads."""
        n, _, _, c = padded.shape
        sn, sh_, sw_, sc = padded.strides
        return np.lib.stride_tricks.as_strided(
            padded,
            (n, out_h, self.kernel[0], self.kernel[1], out_w * c),
            (sn, sh_ * self.stride[0], sh_ * self.dilation[0], sw_ * self.dilation[1], sc),
            writeable=False,
        )


def padded_input(x: np.ndarray, padding: tuple[int, int, int, int], fill: float):
    """(padded buffer, step copying ``x`` into it); ``x`` itself and None without padding."""
    top, right, bottom, left = padding
    if not any(padding):
        return x, None
    n, h, w, c = x.shape
    padded = np.full((n, h + top + bottom, w + left + right, c), fill, x.dtype)
    interior = padded[:, top : top + h, left : left + w, :]
    return padded, functools.partial(np.copyto, interior, x)
