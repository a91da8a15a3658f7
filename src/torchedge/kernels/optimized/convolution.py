"""The optimized ``aten::convolution.out``: a strategy per layer shape over the portable reference.

A convolution gathers the kernel taps of the padded input into a (N, G, C/G*K, P) column
matrix (im2col, K taps, P output positions) and multiplies it by the (G, O/G, C/G*K)
weights in one ``np.matmul`` (BLAS per batch element and group). The columns are copied
as whole rows of `Taps` runs when the gap columns between output rows cost less GEMM work
than copying position by position saves (one extraction pass follows the GEMM), else output
position by position, straight into ``out``. A pointwise (1x1, unit stride, no padding)
convolution multiplies the input itself (or, where that is cheaper than a bias pass over the
output, a copy of it over a row of ones). Biases ride along as an extra all-ones column where
the column matrix is built here anyway and the weights are small (copying large weights to
append the column costs more than adding the bias in the pass that extracts the output grid).
A transposed convolution is the adjoint: one GEMM with the transposed weights, then col2im
(`scatter_taps`). The forms that avoid copying every tap (windows that do not overlap, one
GEMM per tap or per kernel column, depthwise) live in `convolution_columns`, Winograd's in
`convolution_winograd`; the thresholds between strategies are in `tuning`.
"""

from __future__ import annotations

import math

import numpy as np

from torchedge.kernels.optimized.convolution_columns import (
    channels_last_pays,
    depthwise,
    depthwise_channels_last,
    gemm_per_kernel_column,
    gemm_per_tap,
    patches,
    windows_apart,
)
from torchedge.kernels.optimized.convolution_winograd import winograd_conv, winograd_pays
from torchedge.kernels.optimized.derived_arrays import derived
from torchedge.kernels.optimized.scratch import per_call, scratch
from torchedge.kernels.optimized.taps import Taps, rows_view
from torchedge.kernels.optimized.tuning import tuned
from torchedge.kernels.portable.common import quiet, write
from torchedge.kernels.portable.convolution import (
    add_bias,
    convolve,
    forward_geometry,
    integer_bias,
    transposed_geometry,
)
from torchedge.kernels.portable.windows import scatter_taps
from torchedge.kernels.registry import register_kernel

__all__ = ["convolution", "conv_forward", "conv_transposed", "bias_column_weights"]


@register_kernel("aten::convolution.out", library="optimized")
def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, out):
    convolve(
        input,
        weight,
        bias,
        stride,
        padding,
        dilation,
        transposed,
        output_padding,
        groups,
        out,
        conv_forward,
        conv_transposed,
    )


@per_call
def conv_forward(x, weight, bias, stride, padding, dilation, groups, out, padding_after=None) -> None:
    """`torchedge.kernels.portable.convolution.conv_forward` by the strategy that suits the layer."""
    size, after, acc = forward_geometry(x, weight, stride, padding, dilation, groups, out, padding_after)
    if out.size == 0:
        return
    n, c, o, cg = x.shape[0], x.shape[1], weight.shape[0], weight.shape[1]
    kernel = weight.shape[2:]
    pointwise = all(k == 1 for k in kernel) and all(s == 1 for s in stride) and not any(padding) and not any(after)
    kernels = weight.reshape(groups, o // groups, -1)
    with quiet():
        bias = integer_bias(bias, out.dtype, acc)
        if pointwise and x.dtype == acc:  # the input itself is the column matrix
            _pointwise(weight, groups, x.reshape(n, groups, cg, -1), bias, out, acc)
            return
        if windows_apart(x.shape[2:], kernel, stride, padding, dilation, size):
            # A ViT's patch embedding, a strided 1x1: im2col is one strided copy of the input.
            columns = _im2col(x, kernel, stride, padding, dilation, size, acc)
            _gemm(kernels, columns.reshape(n, groups, cg * math.prod(kernel), -1), bias, out, acc)
            return
        if cg == 1 and groups == c == o and groups > 1 and channels_last_pays(c, size):
            depthwise_channels_last(x, weight, bias, stride, padding, dilation, out, acc)
            return
        if winograd_pays(x, weight, stride, dilation, groups, size, out, acc):
            winograd_conv(x, weight, bias, padding, out)
            return
        taps = Taps(x, kernel, stride, padding, dilation, size, 0, acc, scratch)
        if cg == 1 and groups == c and groups > 1:
            depthwise(taps, weight, bias, out, acc)
        elif _per_tap_pays(cg, taps.count, weight.size, n * c * taps.count * taps.length):
            # Large column matrices (many positions, few weights): no im2col copy of every tap.
            per_tap = kernels.reshape(groups, o // groups, cg, taps.count)
            if stride[-1] == 1 and taps.count > kernel[-1]:
                gemm_per_kernel_column(taps, per_tap, dilation[-1], bias, out, acc)
            else:
                gemm_per_tap(taps, per_tap, bias, out, acc)
        elif _rows_pay(taps.length, math.prod(size), o // groups):
            # im2col over whole rows: long contiguous copies; the columns between output rows
            # cost a little GEMM work and one extraction pass. Small weights take the bias as an
            # extra column (a row of ones in the columns); large ones get it in the extraction pass.
            ones_row = bias is not None and kernels.size <= tuned("conv_bias_column_elements")
            depth = cg * taps.count + ones_row
            columns = scratch((n, groups, depth, taps.length), acc)
            inputs = columns[:, :, : cg * taps.count].reshape(n, groups, cg, taps.count, taps.length)
            for t in range(taps.count):
                inputs[..., t, :] = taps.flat(t).reshape(n, groups, cg, taps.length)
            if ones_row:
                columns[:, :, -1] = 1
                kernels = np.concatenate([kernels, bias.reshape(groups, -1, 1).astype(kernels.dtype)], axis=2)
            product = scratch((n * o, taps.length), acc)
            np.matmul(
                kernels, columns, dtype=acc, casting="unsafe", out=product.reshape(n, groups, o // groups, taps.length)
            )
            grid = taps.grid(product).reshape(out.shape)
            if bias is None or ones_row:
                write(out, grid)
            else:
                np.add(grid, bias.reshape((-1,) + (1,) * (out.ndim - 2)), out=out, dtype=acc, casting="unsafe")
        else:
            columns = _im2col(x, kernel, stride, padding, dilation, size, acc, taps)
            _gemm(kernels, columns.reshape(n, groups, -1, math.prod(size)), bias, out, acc)


def _rows_pay(length: int, positions: int, outputs_per_group: int) -> bool:
    """Whether im2col over whole rows (``length`` columns, the gaps between output rows
    included) beats im2col position by position (``positions`` columns): each gap column costs
    a multiply-add per output channel and tap, each column copied as a run instead of a grid
    point saves a few of them."""
    return (
        length <= tuned("conv_rows_max_length_ratio") * positions
        and outputs_per_group * (length - positions) <= tuned("conv_rows_gap_cost") * positions
    )


def _per_tap_pays(channels_per_group: int, taps: int, weights: int, columns: int) -> bool:
    """Whether one GEMM per tap (no copy of every tap) beats im2col: many channels, and a
    column matrix large against the weights."""
    return (
        channels_per_group >= tuned("conv_per_tap_min_channels")
        and taps > 1
        and tuned("conv_per_tap_weight_ratio") * weights < columns
    )


def _pointwise(weight, groups: int, x, bias, out, acc) -> None:
    """A 1x1 convolution of ``x`` (N, G, C/G, P) itself. Where ``out`` has at least twice the
    input's channels (an expansion), the bias rides along as a row of ones under a copy of the
    input: copying the input costs less than the pass adding the bias to the larger output."""
    cg, og = x.shape[2], weight.shape[0] // groups
    if bias is None or og < tuned("conv_pointwise_bias_ratio") * cg:
        _gemm(weight.reshape(groups, og, cg), x, bias, out, acc)
        return
    columns = scratch(x.shape[:2] + (cg + 1, x.shape[3]), acc)
    columns[:, :, :cg] = x
    columns[:, :, cg] = 1
    _gemm(derived(bias_column_weights, (weight, bias), groups, acc), columns, None, out, acc)


def bias_column_weights(weight, bias, groups: int, acc):
    """The (G, O/G, C/G + 1) weights of a 1x1 convolution with the bias as their last column."""
    kernels = weight.reshape(groups, weight.shape[0] // groups, -1)
    return np.concatenate([kernels, bias.reshape(groups, -1, 1).astype(acc)], axis=2)


def _gemm(kernels, columns, bias, out, acc) -> None:
    """``out = kernels @ columns (+ bias)``: (G, O/G, K) by (N, G, K, P), into ``out`` itself
    when it is a contiguous array of the accumulation dtype."""
    shape = columns.shape[:2] + (kernels.shape[1], columns.shape[3])
    target = rows_view(out, shape) if out.dtype == acc else None
    if target is None or not target.flags.c_contiguous:
        target = scratch(shape, acc)
    np.matmul(kernels, columns, out=target, dtype=acc, casting="unsafe")
    add_bias(target.reshape(out.shape), bias)
    if not np.may_share_memory(target, out):
        write(out, target.reshape(out.shape))


def _im2col(x, kernel, stride, padding, dilation, size, acc, taps=None) -> np.ndarray:
    """The (N, C, K, *size) column array of ``x`` (N, C, *S): tap t of every output window."""
    if taps is None and windows_apart(x.shape[2:], kernel, stride, padding, dilation, size):
        return patches(x, kernel, stride, size, acc).reshape(x.shape[:2] + (math.prod(kernel),) + tuple(size))
    taps = taps or Taps(x, kernel, stride, padding, dilation, size, 0, acc, scratch)
    columns = scratch((taps.rows, taps.count) + tuple(size), acc)
    for t in range(taps.count):
        columns[:, t] = taps.grid(taps.flat(t))
    return columns.reshape(x.shape[:2] + (taps.count,) + tuple(size))


@per_call
def conv_transposed(x, weight, bias, stride, padding, dilation, output_padding, groups, out) -> None:
    """`torchedge.kernels.portable.convolution.conv_transposed` as one GEMM into scratch memory,
    then col2im (`scatter_taps`) that drops the taps landing in the padding before adding them."""
    size, acc = transposed_geometry(x, weight, stride, padding, dilation, output_padding, groups, out)
    if out.size == 0:
        return
    n, c, og = x.shape[0], x.shape[1], weight.shape[1]
    kernel, spatial = weight.shape[2:], x.shape[2:]
    taps = math.prod(kernel)
    with quiet():
        kernels = weight.reshape(groups, c // groups, og * taps).transpose(0, 2, 1)
        columns = scratch((n, groups, og * taps, math.prod(spatial)), acc)
        np.matmul(kernels, x.reshape(n, groups, c // groups, -1), dtype=acc, casting="unsafe", out=columns)
        planes = columns.reshape((n * og * groups, taps) + tuple(spatial))
        total = scatter_taps(lambda t: planes[:, t], size, kernel, stride, padding, dilation, acc, scratch)
        total = total.reshape(out.shape)
        add_bias(total, bias)
    write(out, total)
