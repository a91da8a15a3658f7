"""Backward kernels of convolution and pooling (the norms' backward live with the norms).

Each gradient is the adjoint of its forward kernel, built from the same pieces: the
input gradient of a convolution is a transposed convolution (and the other way round),
weight gradients are one GEMM against the im2col columns. Average pooling gradients give
every input position the shares of the windows covering it, one dim at a time, where the
windows covering a position are a contiguous range of them (`range_sums`), adaptive pooling
too (`adaptive_spread`; its kernel takes another ``spread`` of the same contract). Either way
a gradient costs what its input and output sizes justify, whatever the kernel size, stride or
padding.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np

from torchedge.kernels.dtypes import accumulate_dtype, category
from torchedge.kernels.portable.adaptive_pooling import adaptive_bounds, map_dims, shrinking_first
from torchedge.kernels.portable.common import check, pair, quiet, write
from torchedge.kernels.portable.convolution import compute_dtype, conv_forward, conv_transposed, im2col, spatial_dims
from torchedge.kernels.portable.pooling_geometry import batched, pool_divisors, pool_geometry, pool_windows
from torchedge.kernels.portable.pooling_reduction import range_sums
from torchedge.kernels.portable.shape_rules import masked, same_as
from torchedge.kernels.registry import register_kernel

__all__ = [
    "convolution_backward",
    "avg_pool_backward",
    "max_pool_backward",
    "adaptive_avg_pool_backward",
    "adaptive_spread",
]

_CONV = "aten::convolution_backward.out"


def _convolution_backward_shape(
    op: str,
    grad_output,
    input,
    weight,
    bias_sizes,
    stride,
    padding,
    dilation,
    transposed,
    output_padding,
    groups,
    output_mask,
    out0,
    out1,
    out2,
) -> list[tuple]:
    """Gradients shaped like the input, the weight and the bias (one per output channel)."""
    spatial = spatial_dims(op, input, weight)
    check(
        grad_output.ndim == input.ndim,
        op,
        f"grad_output shape {list(grad_output.shape)} does not match input shape {list(input.shape)}",
    )
    return masked(output_mask, [input.shape, weight.shape, (grad_output.shape[-spatial - 1],)])


@register_kernel("aten::convolution_backward.out", shape=_convolution_backward_shape)
def convolution_backward(
    grad_output,
    input,
    weight,
    bias_sizes,
    stride,
    padding,
    dilation,
    transposed,
    output_padding,
    groups,
    output_mask,
    out0,
    out1,
    out2,
):
    """Gradients of `convolution` w.r.t. input, weight and bias, for the outs that
    ``output_mask`` asks for (the others are left untouched)."""
    spatial = weight.ndim - 2
    check(
        1 <= spatial <= 3 and input.ndim in (spatial + 1, spatial + 2) and grad_output.ndim == input.ndim,
        _CONV,
        f"expected {spatial + 2}-D input and grad_output for a {weight.ndim}-D weight, got shapes "
        f"{list(input.shape)} and {list(grad_output.shape)}",
    )
    if input.ndim == spatial + 1:  # unbatched
        input, grad_output, out0 = input[None], grad_output[None], out0[None]
    stride, padding, dilation, output_padding = (
        pair(v, spatial, name, _CONV)
        for v, name in (
            (stride, "stride"),
            (padding, "padding"),
            (dilation, "dilation"),
            (output_padding, "output_padding"),
        )
    )
    acc = compute_dtype(grad_output, weight)
    geometry = (stride, padding, dilation)
    with quiet():
        if output_mask[0]:
            buffer = np.empty(out0.shape, acc)
            if transposed:  # the adjoint of a transposed convolution is the plain one, same weight
                conv_forward(grad_output, weight, None, *geometry, groups, buffer)
            else:  # output_padding restores the input rows that no window reached
                sizes = zip(input.shape[2:], grad_output.shape[2:], weight.shape[2:], stride, padding, dilation)
                extra = tuple(i - ((g - 1) * s - 2 * p + d * (k - 1) + 1) for i, g, k, s, p, d in sizes)
                conv_transposed(grad_output, weight, None, *geometry, extra, groups, buffer)
            write(out0, buffer)
        if output_mask[1]:
            # (grad_output, im2col(input)) for a plain convolution, (input, im2col(grad_output))
            # for a transposed one
            source, product = (grad_output, input) if transposed else (input, grad_output)
            n = source.shape[0]
            columns = im2col(source, weight.shape[2:], *geometry, product.shape[2:], acc)
            columns = columns.reshape(n, groups, -1, math.prod(product.shape[2:]))
            rows = product.reshape(n, groups, product.shape[1] // groups, -1).astype(acc, copy=False)
            grad = np.matmul(rows, columns.transpose(0, 1, 3, 2)).sum(axis=0)  # (G, O/G or C/G, taps)
            write(out1, grad.reshape(weight.shape))
        if output_mask[2]:
            axes = (0,) + tuple(range(2, grad_output.ndim))
            write(out2, grad_output.sum(axis=axes, dtype=acc))


def avg_pool_backward(
    op,
    dims,
    grad_output,
    self,
    kernel_size,
    stride,
    padding,
    ceil_mode,
    count_include_pad,
    divisor_override,
    grad_input,
):
    """Every window spreads its output gradient, divided like the forward average, evenly
    over the input positions it covers (integer gradients divide truncating)."""
    x, grad_output, grad_input = batched(op, self, dims, grad_output, grad_input)
    kernel, stride, padding, _, size = pool_geometry(op, x, dims, kernel_size, stride, padding, (1,), ceil_mode)
    check(
        grad_output.shape == x.shape[:2] + size,
        op,
        f"grad_output has shape {list(grad_output.shape)}, expected {list(x.shape[:2] + size)}",
    )
    integral = category(x.dtype) < 2
    acc = np.dtype(np.int64) if integral else accumulate_dtype(x.dtype)
    divisor = divisor_override or pool_divisors(tuple(x.shape[2:]), kernel, stride, padding, size, count_include_pad)
    with quiet():
        g = grad_output.reshape((-1,) + size).astype(acc)
        share = np.abs(g) // divisor * np.sign(g) if integral else g / np.asarray(divisor, acc)
        total = _spread(share, pool_windows(x.shape[2:], kernel, stride, padding, (1,) * dims, size))
    write(grad_input, total.reshape(grad_input.shape))


def _spread(share: np.ndarray, windows) -> np.ndarray:
    """Adjoint of the window sums: (rows, *out_size) shares -> (rows, *spatial) sums over the
    windows covering each input position, one dim at a time."""
    spatial = tuple(a.size for a in windows.axes)
    ranges = [_covering(a.start + a.lo, a.start + a.hi, a.size) for a in windows.axes]
    return map_dims(share, lambda d, y: range_sums(y, *ranges[d]), shrinking_first(share.shape[1:], spatial))


def _covering(first: np.ndarray, stop: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi): input position i lies in the windows lo[i] .. hi[i] - 1 of those spanning
    [first, stop), whose bounds never decrease."""
    i = np.arange(size)
    return np.searchsorted(stop, i, "right"), np.searchsorted(first, i, "right")


def max_pool_backward(
    op, dims, grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices, grad_input
):
    """Each output gradient goes to the input position its index names (summed where
    windows overlap on the same maximum)."""
    x, grad_output, indices, grad_input = batched(op, self, dims, grad_output, indices, grad_input)
    check(
        indices.shape == grad_output.shape,
        op,
        f"indices shape {list(indices.shape)} differs from grad_output shape {list(grad_output.shape)}",
    )
    plane = math.prod(x.shape[2:])
    rows = math.prod(x.shape[:2])
    flat = indices.reshape(rows, -1).astype(np.int64)
    check(flat.size == 0 or (flat.min() >= 0 and flat.max() < plane), op, "an index is outside the input plane")
    flat = flat + np.arange(rows)[:, None] * plane
    total = np.bincount(flat.ravel(), weights=grad_output.reshape(-1).astype(np.float64), minlength=rows * plane)
    write(grad_input, total.reshape(grad_input.shape))


def adaptive_avg_pool_backward(op, dims, grad_output, self, out, *, spread: Callable | None = None):
    """The adjoint of adaptive averaging, one dim at a time by ``spread(view, size)`` (default
    `adaptive_spread`)."""
    spread = adaptive_spread if spread is None else spread
    x, grad_output, out = batched(op, self, dims, grad_output, out)
    check(category(x.dtype) >= 2, op, f"adaptive average pooling is not implemented for {x.dtype}")
    spatial, size = x.shape[2:], grad_output.shape[2:]
    g = grad_output.reshape((-1,) + size).astype(accumulate_dtype(x.dtype), copy=False)
    with quiet():
        total = map_dims(g, lambda d, y: spread(y, spatial[d]), shrinking_first(size, spatial))
    write(out, total.reshape(out.shape))


def adaptive_spread(g: np.ndarray, size: int) -> np.ndarray:
    """(pre, out_size, post) -> (pre, size, post): each input position sums the gradients of
    the adaptive windows covering it, divided by their lengths."""
    start, stop = adaptive_bounds(size, g.shape[1])
    return range_sums(g / (stop - start).astype(g.dtype)[:, None], *_covering(start, stop, size))


# op name, kernel ``impl(op, dims, *schema arguments)``, spatial dims; the gradient (grad_output,
# self, ...) has the shape of the pooled input
_POOL_GRADIENTS: list[tuple[str, Callable, int]] = [
    ("aten::avg_pool2d_backward.grad_input", avg_pool_backward, 2),
    ("aten::avg_pool3d_backward.grad_input", avg_pool_backward, 3),
    ("aten::max_pool2d_with_indices_backward.grad_input", max_pool_backward, 2),
    ("aten::max_pool3d_with_indices_backward.grad_input", max_pool_backward, 3),
    ("aten::_adaptive_avg_pool2d_backward.out", adaptive_avg_pool_backward, 2),
    ("aten::_adaptive_avg_pool3d_backward.out", adaptive_avg_pool_backward, 3),
]
for _op, _impl, _dims in _POOL_GRADIENTS:
    register_kernel(_op, shape=same_as(1))(functools.partial(_impl, _op, _dims))
