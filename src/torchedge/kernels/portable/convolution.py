"""Convolution (1-3 spatial dims, grouped, transposed) and its im2col/col2im building blocks.

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
GEMM per tap or per kernel column, depthwise) live in `convolution_columns`.
"""

from __future__ import annotations

import math

import numpy as np

from torchedge.kernels.dtypes import accumulate_dtype, can_cast, category, convert, result_type
from torchedge.kernels.portable import windows
from torchedge.kernels.portable.common import check, pair, quiet, write
from torchedge.kernels.portable.convolution_columns import (
    channels_last_pays,
    depthwise,
    depthwise_channels_last,
    gemm_per_kernel_column,
    gemm_per_tap,
    patches,
    windows_apart,
)
from torchedge.kernels.portable.convolution_winograd import winograd_conv, winograd_pays
from torchedge.kernels.portable.derived_arrays import derived
from torchedge.kernels.portable.windows import Taps, rows_view, scatter_taps, workspace
from torchedge.kernels.registry import register_kernel

__all__ = [
    "spatial_dims",
    "convolution",
    "conv_forward",
    "conv_transposed",
    "compute_dtype",
    "im2col",
    "bias_column_weights",
]

_OP = "aten::convolution.out"
_BIAS_COLUMN_ELEMENTS = 1 << 16  # weights up to this size are copied with the bias as an extra column


def compute_dtype(*tensors) -> np.dtype:
    """What ATen accumulates a convolution in: float32 for 16-bit floats, int64 for integers
    (integer results wrap exactly as ATen's do), else the operands' dtype."""
    dtype = result_type(*tensors)
    return np.dtype(np.int64) if category(dtype) <= 1 else accumulate_dtype(dtype)


def spatial_dims(op: str, input, weight) -> int:
    """How many spatial dims the weight convolves; the input may lack the batch dim."""
    spatial = weight.ndim - 2
    check(1 <= spatial <= 3, op, f"expected a 3-D to 5-D weight, got shape {list(weight.shape)}")
    check(
        input.ndim in (spatial + 1, spatial + 2),
        op,
        f"expected a {spatial + 2}-D (batched) or {spatial + 1}-D input, got shape {list(input.shape)}",
    )
    return spatial


def _check_groups(op: str, ok: bool, channels: int, weight, groups: int) -> None:
    check(ok, op, f"input channels ({channels}) and weight shape {list(weight.shape)} do not match groups={groups}")


def _forward_shape(op, channels, sizes, weight, stride, padding, dilation, groups) -> tuple:
    """(O, S') of a convolution by an (O, C/G, *k) weight."""
    _check_groups(op, channels == weight.shape[1] * groups and weight.shape[0] % groups == 0, channels, weight, groups)
    size = tuple(windows.output_size(*args) for args in zip(sizes, weight.shape[2:], stride, padding, dilation))
    return weight.shape[0], size


def _transposed_shape(op, channels, sizes, weight, stride, padding, dilation, output_padding, groups) -> tuple:
    """(O, S') of a transposed convolution by a (C, O/G, *k) weight."""
    _check_groups(op, weight.shape[0] == channels and channels % groups == 0, channels, weight, groups)
    check(
        all(o < s or o < d for o, s, d in zip(output_padding, stride, dilation)),
        op,
        f"output_padding {list(output_padding)} must be smaller than either stride or dilation",
    )
    return weight.shape[1] * groups, tuple(
        (i - 1) * s - 2 * p + d * (k - 1) + o + 1
        for i, k, s, p, d, o in zip(sizes, weight.shape[2:], stride, padding, dilation, output_padding)
    )


def _convolution_shape(
    op: str, input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, out
) -> list[tuple]:
    """(N, C, *S) by (O, C/G, *k) gives (N, O, *S'); transposed, (C, O/G, *k) gives (N, O, *S')."""
    spatial = spatial_dims(op, input, weight)
    stride, padding, dilation = (
        pair(v, spatial, name, op) for v, name in ((stride, "stride"), (padding, "padding"), (dilation, "dilation"))
    )
    check(
        min(stride) > 0 and min(dilation) > 0 and min(padding) >= 0 and groups >= 1,
        op,
        f"stride {list(stride)}, dilation {list(dilation)} and groups {groups} must be positive, "
        f"padding {list(padding)} non-negative",
    )
    channels, sizes = input.shape[-spatial - 1], input.shape[-spatial:]
    if transposed:
        output_padding = pair(output_padding, spatial, "output_padding", op)
        out_channels, size = _transposed_shape(
            op, channels, sizes, weight, stride, padding, dilation, output_padding, groups
        )
    else:
        out_channels, size = _forward_shape(op, channels, sizes, weight, stride, padding, dilation, groups)
    check(
        min(size) > 0,
        op,
        f"the output size {list(size)} is too small (input shape {list(input.shape)}, "
        f"weight shape {list(weight.shape)})",
    )
    return [input.shape[: -spatial - 1] + (out_channels,) + size]


@register_kernel("aten::convolution.out", shape=_convolution_shape)
def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, out):
    spatial = spatial_dims(_OP, input, weight)
    if input.ndim == spatial + 1:  # unbatched
        input, out = input[None], out[None]
    stride, padding, dilation = (
        pair(v, spatial, name, _OP) for v, name in ((stride, "stride"), (padding, "padding"), (dilation, "dilation"))
    )
    check(
        all(s > 0 for s in stride) and all(d > 0 for d in dilation) and min(padding) >= 0,
        _OP,
        f"stride {list(stride)} and dilation {list(dilation)} must be positive, padding {list(padding)} non-negative",
    )
    check(groups >= 1, _OP, f"groups must be positive, got {groups}")
    if transposed:
        dtype = result_type(input, weight)
        check(
            category(dtype) >= 2 or dtype == np.int64,
            _OP,
            f"transposed convolution is not implemented for {dtype} (as in ATen)",
        )
        if bias is not None:  # added in place, as in ATen
            check(
                can_cast(bias.dtype, dtype),
                _OP,
                f"a {bias.dtype} bias can't be added to a {dtype} transposed convolution (as in ATen)",
            )
        conv_transposed(
            input,
            weight,
            bias,
            stride,
            padding,
            dilation,
            pair(output_padding, spatial, "output_padding", _OP),
            groups,
            out,
        )
    else:
        conv_forward(input, weight, bias, stride, padding, dilation, groups, out)


def conv_forward(x, weight, bias, stride, padding, dilation, groups, out, padding_after=None) -> None:
    """Batched convolution of ``x`` (N, C, *S) with ``weight`` (O, C/G, *k) into ``out``.

    ``padding`` zeros go before each spatial dim and, unless ``padding_after`` says otherwise,
    as many after it."""
    n, c, o, cg = x.shape[0], x.shape[1], weight.shape[0], weight.shape[1]
    kernel = weight.shape[2:]
    check(
        c == cg * groups and o % groups == 0,
        _OP,
        f"input channels ({c}) and weight shape {list(weight.shape)} do not match groups={groups}",
    )
    after = padding if padding_after is None else padding_after
    size = tuple(
        (i + p + q - d * (k - 1) - 1) // s + 1
        for i, k, s, p, q, d in zip(x.shape[2:], kernel, stride, padding, after, dilation)
    )
    check(min(size) > 0, _OP, f"the kernel {list(kernel)} is larger than the padded input {list(x.shape)}")
    check(out.shape == (n, o) + size, _OP, f"out has shape {list(out.shape)}, expected {[n, o, *size]}")
    acc = compute_dtype(x, weight)
    if out.size == 0:
        return
    pointwise = all(k == 1 for k in kernel) and all(s == 1 for s in stride) and not any(padding) and not any(after)
    kernels = weight.reshape(groups, o // groups, -1)
    with quiet():
        bias = _bias(bias, out.dtype, acc)
        if pointwise and x.dtype == acc:  # the input itself is the column matrix
            _pointwise(weight, groups, x.reshape(n, groups, cg, -1), bias, out, acc)
            return
        if windows_apart(x.shape[2:], kernel, stride, padding, dilation, size):
            # A ViT's patch embedding, a strided 1x1: im2col is one strided copy of the input.
            columns = im2col(x, kernel, stride, padding, dilation, size, acc)
            _gemm(kernels, columns.reshape(n, groups, cg * math.prod(kernel), -1), bias, out, acc)
            return
        if cg == 1 and groups == c == o and groups > 1 and channels_last_pays(c, size):
            depthwise_channels_last(x, weight, bias, stride, padding, dilation, out, acc)
            return
        if winograd_pays(x, weight, stride, dilation, groups, size, out, acc):
            winograd_conv(x, weight, bias, padding, out)
            return
        taps = Taps(x, kernel, stride, padding, dilation, size, 0, acc)
        if cg == 1 and groups == c and groups > 1:
            depthwise(taps, weight, bias, out, acc)
        elif cg >= 16 and taps.count > 1 and 4 * weight.size < n * c * taps.count * taps.length:
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
            ones_row = bias is not None and kernels.size <= _BIAS_COLUMN_ELEMENTS
            depth = cg * taps.count + ones_row
            columns = workspace("columns", (n, groups, depth, taps.length), acc)
            inputs = columns[:, :, : cg * taps.count].reshape(n, groups, cg, taps.count, taps.length)
            for t in range(taps.count):
                inputs[..., t, :] = taps.flat(t).reshape(n, groups, cg, taps.length)
            if ones_row:
                columns[:, :, -1] = 1
                kernels = np.concatenate([kernels, bias.reshape(groups, -1, 1).astype(kernels.dtype)], axis=2)
            product = workspace("product", (n * o, taps.length), acc)
            np.matmul(
                kernels, columns, dtype=acc, casting="unsafe", out=product.reshape(n, groups, o // groups, taps.length)
            )
            grid = taps.grid(product).reshape(out.shape)
            if bias is None or ones_row:
                write(out, grid)
            else:
                np.add(grid, bias.reshape((-1,) + (1,) * (out.ndim - 2)), out=out, dtype=acc, casting="unsafe")
        else:
            columns = im2col(x, kernel, stride, padding, dilation, size, acc, taps)
            _gemm(kernels, columns.reshape(n, groups, -1, math.prod(size)), bias, out, acc)


def _rows_pay(length: int, positions: int, outputs_per_group: int) -> bool:
    """Whether im2col over whole rows (``length`` columns, the gaps between output rows
    included) beats im2col position by position (``positions`` columns): each gap column costs
    a multiply-add per output channel and tap, each column copied as a run instead of a grid
    point saves about a dozen of them (measured on AVX2 with OpenBLAS)."""
    return length <= 1.25 * positions and outputs_per_group * (length - positions) <= 12 * positions


def _bias(bias, dtype, acc):
    """``bias`` as ATen adds it to an integer convolution: a floating (or complex) bias is
    first converted to the output ``dtype`` (`convert`: its real part truncated), so only
    integers are added. Other biases are returned unchanged."""
    if bias is None or category(acc) >= 2 or category(bias.dtype) < 2:
        return bias
    return convert(bias, dtype).astype(acc)


def _pointwise(weight, groups: int, x, bias, out, acc) -> None:
    """A 1x1 convolution of ``x`` (N, G, C/G, P) itself. Where ``out`` has at least twice the
    input's channels (an expansion), the bias rides along as a row of ones under a copy of the
    input: copying the input costs less than the pass adding the bias to the larger output
    (0.85-0.95x the time of mobilenet_v2's expansions on AVX2)."""
    cg, og = x.shape[2], weight.shape[0] // groups
    if bias is None or og < 2 * cg:
        _gemm(weight.reshape(groups, og, cg), x, bias, out, acc)
        return
    columns = workspace("columns", x.shape[:2] + (cg + 1, x.shape[3]), acc)
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
        target = workspace("product", shape, acc)
    np.matmul(kernels, columns, out=target, dtype=acc, casting="unsafe")
    _add_bias(target.reshape(out.shape), bias)
    if not np.may_share_memory(target, out):
        write(out, target.reshape(out.shape))


def _add_bias(buf, bias) -> None:
    if bias is not None:
        np.add(buf, bias.reshape((-1,) + (1,) * (buf.ndim - 2)), out=buf, casting="unsafe")


def im2col(x, kernel, stride, padding, dilation, size, acc, taps=None) -> np.ndarray:
    """The (N, C, K, *size) column array of ``x`` (N, C, *S): tap t of every output window."""
    if taps is None and windows_apart(x.shape[2:], kernel, stride, padding, dilation, size):
        return patches(x, kernel, stride, size, acc).reshape(x.shape[:2] + (math.prod(kernel),) + tuple(size))
    taps = taps or Taps(x, kernel, stride, padding, dilation, size, 0, acc)
    columns = workspace("columns", (taps.rows, taps.count) + tuple(size), acc)
    for t in range(taps.count):
        columns[:, t] = taps.grid(taps.flat(t))
    return columns.reshape(x.shape[:2] + (taps.count,) + tuple(size))


def conv_transposed(x, weight, bias, stride, padding, dilation, output_padding, groups, out) -> None:
    """Transposed convolution of ``x`` (N, C, *S) with ``weight`` (C, O/G, *k): the adjoint
    of `conv_forward` (one GEMM by the transposed weights, then col2im)."""
    n, c, og = x.shape[0], x.shape[1], weight.shape[1]
    kernel, spatial = weight.shape[2:], x.shape[2:]
    check(
        weight.shape[0] == c and c % groups == 0,
        _OP,
        f"input channels ({c}) and weight shape {list(weight.shape)} do not match groups={groups}",
    )
    check(
        all(p < s or p < d for p, s, d in zip(output_padding, stride, dilation)),
        _OP,
        f"output_padding {list(output_padding)} must be smaller than either stride or dilation",
    )
    size = tuple(
        (i - 1) * s - 2 * p + d * (k - 1) + op + 1
        for i, s, p, d, k, op in zip(spatial, stride, padding, dilation, kernel, output_padding)
    )
    check(min(size) > 0, _OP, f"the output size {list(size)} is not positive")
    check(
        out.shape == (n, og * groups) + size,
        _OP,
        f"out has shape {list(out.shape)}, expected {[n, og * groups, *size]}",
    )
    acc = compute_dtype(x, weight)
    if out.size == 0:
        return
    taps = math.prod(kernel)
    with quiet():
        kernels = weight.reshape(groups, c // groups, og * taps).transpose(0, 2, 1)
        columns = workspace("columns", (n, groups, og * taps, math.prod(spatial)), acc)
        np.matmul(kernels, x.reshape(n, groups, c // groups, -1), dtype=acc, casting="unsafe", out=columns)
        planes = columns.reshape((n * og * groups, taps) + tuple(spatial))
        total = scatter_taps(lambda t: planes[:, t], size, kernel, stride, padding, dilation, acc)
        total = total.reshape(out.shape)
        _add_bias(total, bias)
    write(out, total)
