"""Convolution (1-3 spatial dims, grouped, dilated, padded, transposed): the reference.

A forward convolution copies, for every kernel tap, the strided view of the zero-padded
input that the tap meets into a (N, C, K, *S') column array (im2col, K taps in row-major
order) and multiplies it by the (G, O/G, C/G*K) weights in one ``np.matmul``, accumulating
as ATen does (`compute_dtype`). A transposed convolution is its adjoint: one product by the
transposed weights gives every tap's contribution, added tap by tap into the zero-padded
output grid, which is then cropped (col2im). `torchedge.kernels.optimized.convolution`
overrides this kernel with faster strategies and is tested against it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import numpy as np

from torchedge.kernels.dtypes import accumulate_dtype, can_cast, category, convert, result_type
from torchedge.kernels.portable import windows
from torchedge.kernels.portable.common import check, pair, quiet, write
from torchedge.kernels.registry import register_kernel

__all__ = [
    "spatial_dims",
    "convolution",
    "convolve",
    "conv_forward",
    "conv_transposed",
    "forward_geometry",
    "transposed_geometry",
    "compute_dtype",
    "integer_bias",
    "add_bias",
    "im2col",
]

_OP = "aten::convolution.out"


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
    convolve(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, out)


def convolve(
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
    forward: Callable | None = None,
    adjoint: Callable | None = None,
) -> None:
    """``aten::convolution.out``'s argument checks, then ``forward`` (default `conv_forward`)
    or, transposed, ``adjoint`` (default `conv_transposed`) on batched operands."""
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
        (adjoint or conv_transposed)(
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
        (forward or conv_forward)(input, weight, bias, stride, padding, dilation, groups, out)


def forward_geometry(x, weight, stride, padding, dilation, groups, out, padding_after=None) -> tuple:
    """Check a batched convolution of ``x`` (N, C, *S) by ``weight`` (O, C/G, *k) into ``out``;
    return its output size S', the zeros after each spatial dim and the accumulation dtype."""
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
    return size, tuple(after), compute_dtype(x, weight)


def conv_forward(x, weight, bias, stride, padding, dilation, groups, out, padding_after=None) -> None:
    """Batched convolution of ``x`` (N, C, *S) with ``weight`` (O, C/G, *k) into ``out``.

    ``padding`` zeros go before each spatial dim and, unless ``padding_after`` says otherwise,
    as many after it."""
    size, after, acc = forward_geometry(x, weight, stride, padding, dilation, groups, out, padding_after)
    if out.size == 0:
        return
    n, o = out.shape[:2]
    with quiet():
        columns = im2col(x, weight.shape[2:], stride, padding, dilation, size, acc, after)
        kernels = weight.reshape(groups, o // groups, -1).astype(acc)
        product = np.matmul(kernels, columns.reshape(n, groups, kernels.shape[2], -1))
        result = product.reshape(out.shape)
        add_bias(result, integer_bias(bias, out.dtype, acc))
    write(out, result)


def integer_bias(bias, dtype, acc):
    """``bias`` as ATen adds it to an integer convolution: a floating (or complex) bias is
    first converted to the output ``dtype`` (`convert`: its real part truncated), so only
    integers are added. Other biases are returned unchanged."""
    if bias is None or category(acc) >= 2 or category(bias.dtype) < 2:
        return bias
    return convert(bias, dtype).astype(acc)


def add_bias(buf, bias) -> None:
    """Add the per-channel ``bias`` to ``buf`` (N, O, *S) in place."""
    if bias is not None:
        np.add(buf, bias.reshape((-1,) + (1,) * (buf.ndim - 2)), out=buf, casting="unsafe")


def im2col(x, kernel, stride, padding, dilation, size, acc, padding_after=None) -> np.ndarray:
    """The (N, C, K, *size) column array of ``x`` (N, C, *S) in ``acc``: tap t of every output
    window, ``padding`` zeros before each spatial dim (and ``padding_after`` after it)."""
    after = padding if padding_after is None else padding_after
    padded = np.pad(x.astype(acc), [(0, 0)] * (x.ndim - len(kernel)) + [(p, q) for p, q in zip(padding, after)])
    lead = (slice(None),) * (x.ndim - len(kernel))
    taps = [
        padded[
            lead + tuple(slice(t * d, t * d + (o - 1) * s + 1, s) for t, d, o, s in zip(tap, dilation, size, stride))
        ]
        for tap in itertools.product(*(range(k) for k in kernel))
    ]
    return np.stack(taps, axis=x.ndim - len(kernel))


def _tap_slices(tap, dilation, count, stride) -> tuple:
    """Per spatial dim, the ``count`` positions ``tap * dilation + i * stride`` of a padded grid."""
    return tuple(slice(t * d, t * d + (n - 1) * s + 1, s) for t, d, n, s in zip(tap, dilation, count, stride))


def transposed_geometry(x, weight, stride, padding, dilation, output_padding, groups, out) -> tuple:
    """Check a batched transposed convolution of ``x`` (N, C, *S) by ``weight`` (C, O/G, *k)
    into ``out``; return its output size and the accumulation dtype."""
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
    return size, compute_dtype(x, weight)


def conv_transposed(x, weight, bias, stride, padding, dilation, output_padding, groups, out) -> None:
    """Transposed convolution of ``x`` (N, C, *S) with ``weight`` (C, O/G, *k): the adjoint
    of `conv_forward`. Tap t of input position i lands on output ``i * stride - padding + t *
    dilation``; the taps are added in row-major order into a grid with ``padding`` on each side."""
    size, acc = transposed_geometry(x, weight, stride, padding, dilation, output_padding, groups, out)
    if out.size == 0:
        return
    n, c = x.shape[:2]
    kernel, spatial = weight.shape[2:], x.shape[2:]
    with quiet():
        kernels = weight.reshape(groups, c // groups, -1).astype(acc).transpose(0, 2, 1)
        contributions = np.matmul(kernels, x.reshape(n, groups, c // groups, -1).astype(acc))
        planes = contributions.reshape((n, out.shape[1], math.prod(kernel)) + tuple(spatial))
        grid = np.zeros(out.shape[:2] + tuple(o + 2 * p for o, p in zip(size, padding)), acc)
        for t, tap in enumerate(itertools.product(*(range(k) for k in kernel))):
            target = tuple(
                slice(k * d, k * d + (i - 1) * s + 1, s) for k, d, i, s in zip(tap, dilation, spatial, stride)
            )
            grid[(slice(None), slice(None)) + target] += planes[:, :, t]
        result = grid[(slice(None), slice(None)) + tuple(slice(p, p + o) for p, o in zip(padding, size))]
        add_bias(result, bias)
    write(out, result)
