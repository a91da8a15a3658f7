"""2-d pooling: max (with ATen's indices), average, adaptive average."""

from __future__ import annotations

import numpy as np

from torchedge.kernels.dtypes import accumulate_dtype, category
from torchedge.kernels.portable.common import check, finish, pair, quiet, scratch, write
from torchedge.kernels.portable.windows import output_size, taps2d
from torchedge.kernels.registry import register_kernel

__all__ = ["max_pool2d_with_indices", "avg_pool2d", "adaptive_avg_pool2d"]


def _batched(op, x, *outs):
    """(C, H, W) inputs and their outs gain a batch dim; returns the 4-D views."""
    check(x.ndim in (3, 4), op, f"expected a 3-D or 4-D input, got shape {list(x.shape)}")
    return (x, *outs) if x.ndim == 4 else (x[None], *(o[None] for o in outs))


def _geometry(op, x, kernel_size, stride, padding, dilation, ceil_mode, out):
    kernel = pair(kernel_size, 2, "kernel_size", op)
    stride = pair(stride, 2, "stride", op) if len(stride) else kernel
    padding = pair(padding, 2, "padding", op)
    dilation = pair(dilation, 2, "dilation", op)
    check(all(2 * p <= d * (k - 1) + 1 for p, k, d in zip(padding, kernel, dilation)), op,
          f"padding {list(padding)} must be at most half of the (dilated) kernel size {list(kernel)}")
    out_hw = tuple(output_size(size, k, s, p, d, ceil_mode) for size, k, s, p, d in
                   zip(x.shape[-2:], kernel, stride, padding, dilation))
    check(out.shape[-2:] == out_hw, op, f"out has spatial shape {list(out.shape[-2:])}, expected {list(out_hw)}")
    return kernel, stride, padding, dilation, out_hw


def _first_valid(starts: np.ndarray, dilation: int) -> np.ndarray:
    """The first in-bounds tap of windows starting at ``starts`` (possibly negative)."""
    return np.where(starts < 0, starts + (-starts + dilation - 1) // dilation * dilation, starts)


@register_kernel("aten::max_pool2d_with_indices.out")
def max_pool2d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode, out, indices):
    """Max over each window; indices are flat ``h * W + w`` offsets into the input plane.

    Taps are visited in ATen's order with ATen's rule (take a tap that is larger, or nan),
    so ties keep the first position, several nans the last one, and a window whose values
    are all -inf points at its first in-bounds tap (padding taps are never taken).
    """
    op = "aten::max_pool2d_with_indices.out"
    x, out, indices = _batched(op, self, out, indices)
    kernel, stride, padding, dilation, (oh, ow) = _geometry(op, x, kernel_size, stride, padding, dilation,
                                                            ceil_mode, out)
    floating = category(x.dtype) >= 2
    lowest = -np.inf if floating else np.iinfo(x.dtype).min
    taps = taps2d(x, kernel, stride, padding, dilation, (oh, ow), lowest)
    best = scratch(out, x.dtype)
    best.fill(lowest)
    count = kernel[0] * kernel[1]
    which = np.full(best.shape, -1, np.int16 if count < 2**15 else np.int64)  # the tap taken; -1: none
    step = np.empty_like(which)
    check_nan = floating and bool(np.isnan(x).any())
    with quiet():
        for tap in range(count):
            value = taps[tap // kernel[1]][tap % kernel[1]]
            take = value > best
            if check_nan:
                take |= np.isnan(value)
            np.maximum(best, value, out=best)  # nan propagates, like the rule above
            np.subtract(which.dtype.type(tap), which, out=step)  # which = take ? tap : which,
            step *= take  # without the branches that make masked copies slow
            which += step
    finish(out, best)
    row_starts = np.arange(oh)[:, None] * stride[0] - padding[0]
    col_starts = np.arange(ow) * stride[1] - padding[1]
    none = which < 0
    rows = np.where(none, _first_valid(row_starts, dilation[0]), row_starts + which // kernel[1] * dilation[0])
    cols = np.where(none, _first_valid(col_starts, dilation[1]), col_starts + which % kernel[1] * dilation[1])
    write(indices, rows * x.shape[-1] + cols)


@register_kernel("aten::avg_pool2d.out")
def avg_pool2d(self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, out):
    op = "aten::avg_pool2d.out"
    x, out = _batched(op, self, out)
    kernel, stride, padding, dilation, (oh, ow) = _geometry(op, x, kernel_size, stride, padding, (1,), ceil_mode, out)
    integral = category(x.dtype) < 2  # integer averages truncate toward zero, as in C++
    acc = np.dtype(np.float64) if integral else accumulate_dtype(x.dtype)
    buf = scratch(out, acc)
    buf.fill(0)
    with quiet():
        for row in taps2d(x, kernel, stride, padding, dilation, (oh, ow), 0, acc):
            for tap in row:
                buf += tap
        if divisor_override:
            buf /= divisor_override
        else:
            buf /= _divisors(x.shape[-2:], kernel, stride, padding, (oh, ow), count_include_pad)
        if integral:
            np.trunc(buf, out=buf)
    finish(out, buf)


def _divisors(size, kernel, stride, padding, out_hw, count_include_pad):
    """Per-output divisor: the window clipped to the padded input, or to the input itself."""
    counts = []
    for n, k, s, p, o in zip(size, kernel, stride, padding, out_hw):
        start = np.arange(o) * s - p
        end = np.minimum(start + k, n + p)
        if count_include_pad:
            counts.append(end - start)
        else:
            counts.append(np.minimum(end, n) - np.maximum(start, 0))
    return counts[0][:, None] * counts[1][None, :]


@register_kernel("aten::_adaptive_avg_pool2d.out")
def adaptive_avg_pool2d(self, output_size, out):
    """Output cell i averages input rows floor(i*H/OH) .. ceil((i+1)*H/OH) (same for columns)."""
    op = "aten::_adaptive_avg_pool2d.out"
    x, out = _batched(op, self, out)
    oh, ow = pair(output_size, 2, "output_size", op)
    check(out.shape[-2:] == (oh, ow), op, f"out has spatial shape {list(out.shape[-2:])}, expected {[oh, ow]}")
    h, w = x.shape[-2:]
    acc = accumulate_dtype(x.dtype)
    with quiet():
        if h % oh == 0 and w % ow == 0:  # equal, disjoint windows: a reshape and a mean
            blocks = x.reshape(x.shape[:2] + (oh, h // oh, ow, w // ow))
            buf = scratch(out, acc)
            np.mean(blocks, axis=(3, 5), dtype=acc, out=buf)
            finish(out, buf)
            return
        rows, cols = _averaging_matrix(h, oh, acc), _averaging_matrix(w, ow, acc)
        write(out, rows @ (x.astype(acc, copy=False) @ cols.T))


def _averaging_matrix(size: int, out_size: int, dtype) -> np.ndarray:
    """(out_size, size) matrix whose row i averages the inputs of adaptive window i."""
    i = np.arange(out_size)
    start, end = i * size // out_size, -((-(i + 1) * size) // out_size)
    j = np.arange(size)
    inside = (j >= start[:, None]) & (j < end[:, None])
    return (inside / (end - start)[:, None]).astype(dtype)
