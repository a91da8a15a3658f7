"""Matrix products and convolutions: fully connected, batch matrix multiply, 2-D convolution
(NHWC, grouped), depthwise convolution, transposed convolution.

Filters are in XNNPACK's layouts: fully connected [out, in] ([in, out] with TRANSPOSE_WEIGHTS),
convolution and transposed convolution [out, kh, kw, in/groups] (OHWI), depthwise
[1, kh, kw, channels * multiplier]. A convolution copies the windows of its (padded) input into
one preallocated column matrix (im2col, NHWC rows) and multiplies it by the filter in one GEMM
per group; a 1x1 convolution with unit stride multiplies the input itself. Depthwise
convolutions reduce a strided window view of the input against the filter with one ``einsum``
(NHWC keeps the channels contiguous). A dense 3x3 stride-1 float32 convolution with enough
channels and tiles runs the optimized kernels' Winograd F(2x2, 3x3) on NCHW views of its NHWC
values (its filter made OIHW once, at load), as the portable program's convolution does; the
rest are written for NHWC. float16 values sum in float32. A filter's layout for the products is
derived once per constant filter (`derived`), shared by every plan laid out from the graph.
"""

from __future__ import annotations

import functools

import numpy as np

from torchedge.backends.xnnpack.nhwc_windows import Window, padded_input
from torchedge.backends.xnnpack.registry import builds
from torchedge.kernels.optimized.convolution_winograd import winograd_conv, winograd_pays
from torchedge.kernels.optimized.derived_arrays import derived

__all__ = ["fc_matrix", "rows_view"]

_TRANSPOSE_WEIGHTS = 0x1  # XNN_FLAG_TRANSPOSE_WEIGHTS, also XNN_FLAG_TRANSPOSE_B


def rows_view(x: np.ndarray, columns: int) -> np.ndarray | None:
    """``x`` as a (-1, columns) view, or None if its layout does not allow one."""
    view = x.view()
    try:
        view.shape = (-1, columns)
    except AttributeError:
        return None
    return view


def _accumulate(dtype: np.dtype) -> np.dtype:
    """What products are summed in: float32 for float16 values (rounded once per node, as
    XNNPACK's f16 kernels on CPUs without f16 arithmetic do), else the values' dtype."""
    return np.dtype(np.float32) if dtype == np.float16 else dtype


def _check_bias(ctx, bias, channels: int) -> None:
    if bias is not None:
        ctx.check(bias.shape == (channels,), f"bias has shape {list(bias.shape)}, expected [{channels}]")


@builds("XNNFullyConnected")
def _fully_connected(node, ctx):
    x, weight = ctx.value(node.input1_id), ctx.value(node.filter_id)
    bias = ctx.optional(node.bias_id)
    ctx.check(weight.ndim == 2, f"filter has {weight.ndim} dims, expected 2")
    transposed = bool(node.flags & _TRANSPOSE_WEIGHTS)
    n_in, n_out = weight.shape if transposed else weight.shape[::-1]
    _check_bias(ctx, bias, n_out)
    ctx.check(x.ndim >= 1 and x.size % n_in == 0, f"input {list(x.shape)} does not split into rows of {n_in}")
    out = ctx.output(node.output_id)
    ctx.check(out.size == x.size // n_in * n_out, f"output {list(out.shape)} does not hold {x.size // n_in} rows")
    rows, out_rows = rows_view(x, n_in), out.reshape(-1, n_out)
    acc = _accumulate(out.dtype)
    matrix = derived(fc_matrix, (weight,), transposed, acc)  # once per weight, whatever plans read it
    bias = None if bias is None else bias.astype(acc, copy=False)
    target = out_rows if acc == out.dtype else np.empty(out_rows.shape, acc)
    if rows is not None and bias is None and target is out_rows:
        return functools.partial(np.matmul, rows, matrix, out=out_rows)

    def step():
        np.matmul(rows if rows is not None else x.reshape(-1, n_in), matrix, out=target)
        if bias is not None:
            np.add(target, bias, out=out_rows)
        elif target is not out_rows:
            np.copyto(out_rows, target, casting="same_kind")

    return step


def fc_matrix(weight: np.ndarray, transposed: bool, dtype: np.dtype) -> np.ndarray:
    """A fully connected filter as a contiguous [in, out] matrix (BLAS runs it faster than its transpose)."""
    return np.ascontiguousarray(weight if transposed else weight.T, dtype=dtype)


def _conv_matrices(weight: np.ndarray, groups: int, dtype: np.dtype) -> np.ndarray:
    """An OHWI filter as [groups, kh*kw*cin, cout]: each group's filter as the right-hand GEMM operand."""
    rows = weight.reshape(groups, weight.shape[0] // groups, -1)
    return np.ascontiguousarray(rows.transpose(0, 2, 1), dtype=dtype)


def _oihw(weight: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(weight.transpose(0, 3, 1, 2), dtype=np.float32)


@builds("XNNBatchMatrixMultiply")
def _batch_matmul(node, ctx):
    a, b = ctx.value(node.input1_id), ctx.value(node.input2_id)
    ctx.check(a.ndim >= 2 and b.ndim >= 2, f"inputs of shapes {list(a.shape)}, {list(b.shape)} are not matrices")
    if node.flags & _TRANSPOSE_WEIGHTS:
        b = np.swapaxes(b, -1, -2)
    out = ctx.output(node.output_id)
    ctx.check(a.shape[-1] == b.shape[-2], f"cannot multiply {list(a.shape)} by {list(b.shape)}")
    try:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise ctx.error(f"batch dims of {list(a.shape)} and {list(b.shape)} do not broadcast") from None
    shape = batch + (a.shape[-2], b.shape[-1])
    ctx.check(out.shape == shape, f"output has shape {list(out.shape)}, expected {list(shape)}")
    return lambda: np.matmul(a, b, out=out)


def _window(node) -> Window:
    return Window(
        (node.kernel_height, node.kernel_width),
        (node.subsampling_height, node.subsampling_width),
        (max(node.dilation_height, 1), max(node.dilation_width, 1)),
        (node.padding_top, node.padding_right, node.padding_bottom, node.padding_left),
    )


def _conv_operands(node, ctx, channels_in: int):
    """(input, window, padded input, its refresh step, output) after the checks both convolutions share."""
    x = ctx.value(node.input1_id)
    ctx.check(x.ndim == 4, f"input has {x.ndim} dims, expected 4 (NHWC)")
    ctx.check(x.shape[3] == channels_in, f"input has {x.shape[3]} channels, the node expects {channels_in}")
    ctx.check(node.subsampling_height > 0 and node.subsampling_width > 0, "stride must be positive")
    window = _window(node)
    out = ctx.output(node.output_id)
    out_h, out_w = window.output_size(x.shape[1], x.shape[2])
    channels_out = node.groups * node.group_output_channels
    shape = (x.shape[0], out_h, out_w, channels_out)
    ctx.check(
        out_h > 0 and out_w > 0 and out.shape == shape, f"output has shape {list(out.shape)}, expected {list(shape)}"
    )
    padded, refresh = padded_input(x, window.padding, 0.0)
    return x, window, padded, refresh, out


@builds("XNNConv2d")
def _conv2d(node, ctx):
    groups, cin, cout = node.groups, node.group_input_channels, node.group_output_channels
    ctx.check(groups > 0 and cin > 0 and cout > 0, "groups and channels per group must be positive")
    x, window, padded, refresh, out = _conv_operands(node, ctx, groups * cin)
    weight = ctx.value(node.filter_id)
    kh, kw = window.kernel
    expected = (groups * cout, kh, kw, cin)
    ctx.check(weight.shape == expected, f"filter has shape {list(weight.shape)}, expected {list(expected)} (OHWI)")
    bias = ctx.optional(node.bias_id)
    _check_bias(ctx, bias, groups * cout)
    winograd = _winograd_step(x, weight, bias, window, out) if groups == 1 else None
    if winograd is not None:
        return winograd
    n, out_h, out_w, _ = out.shape
    acc = _accumulate(out.dtype)
    matrices = derived(_conv_matrices, (weight,), groups, acc)
    bias = None if bias is None else bias.astype(acc, copy=False)
    out_flat = out.reshape(-1, groups * cout)
    target = out_flat if acc == out.dtype else np.empty(out_flat.shape, acc)
    out_rows = target.reshape(-1, groups, cout)
    pointwise = (kh, kw) == (1, 1) and window.stride == (1, 1) and not any(window.padding)
    if pointwise:
        x_rows = rows_view(x, groups * cin)
        columns = None
    else:
        columns = np.empty((n, out_h, out_w, kh, kw, groups * cin), acc)
        windows = window.columns(padded, out_h, out_w)
        x_rows = columns.reshape(-1, kh * kw, groups, cin)

    def step():
        if refresh is not None:
            refresh()
        if columns is not None:
            np.copyto(columns, windows)
        rows = x_rows if x_rows is not None else x.reshape(-1, groups * cin)
        for g in range(groups):
            if pointwise:
                lhs = rows if groups == 1 else rows[:, g * cin : (g + 1) * cin]
            else:
                lhs = (
                    rows.reshape(-1, kh * kw * groups * cin)
                    if groups == 1
                    else rows[:, :, g].reshape(-1, kh * kw * cin)
                )
            np.matmul(lhs, matrices[g], out=out_rows[:, g])
        if bias is not None:
            np.add(target, bias, out=out_flat)
        elif target is not out_flat:
            np.copyto(out_flat, target, casting="same_kind")

    return step


def _winograd_step(x, weight, bias, window: Window, out):
    """The Winograd step of a dense 3x3 stride-1 float32 convolution where it pays, else None."""
    if window.kernel != (3, 3) or window.stride != (1, 1) or window.dilation != (1, 1) or out.dtype != np.float32:
        return None
    x_nchw, out_nchw = x.transpose(0, 3, 1, 2), out.transpose(0, 3, 1, 2)
    oihw = derived(_oihw, (weight,))  # read-only: the kernel keeps its transform while the filter lives
    if oihw.flags.writeable:  # from a filter that is not a constant
        oihw.flags.writeable = False
    if not winograd_pays(x_nchw, oihw, (1, 1), (1, 1), 1, out_nchw.shape[2:], out_nchw, np.dtype(np.float32)):
        return None
    top, _, _, left = window.padding
    return functools.partial(winograd_conv, x_nchw, oihw, bias, (top, left), out_nchw)


@builds("XNNDepthwiseConv2d")
def _depthwise_conv2d(node, ctx):
    channels, multiplier = node.groups, node.group_output_channels
    ctx.check(node.group_input_channels == 1, f"group_input_channels is {node.group_input_channels}, expected 1")
    ctx.check(channels > 0 and multiplier > 0, "groups and the depth multiplier must be positive")
    x, window, padded, refresh, out = _conv_operands(node, ctx, channels)
    weight = ctx.value(node.filter_id)
    kh, kw = window.kernel
    expected = (1, kh, kw, channels * multiplier)
    ctx.check(weight.shape == expected, f"filter has shape {list(weight.shape)}, expected {list(expected)}")
    bias = ctx.optional(node.bias_id)
    _check_bias(ctx, bias, channels * multiplier)
    out_h, out_w = out.shape[1:3]
    acc = _accumulate(out.dtype)
    taps = weight.reshape(kh, kw, channels * multiplier).astype(acc, copy=False)
    bias = None if bias is None else bias.astype(acc, copy=False)
    target = out if acc == out.dtype else np.empty(out.shape, acc)
    source = padded
    if multiplier != 1:  # output channel c*m + k reads input channel c
        expand = np.repeat(np.arange(channels), multiplier)
        source = np.empty(padded.shape[:3] + (channels * multiplier,), padded.dtype)
    # One einsum pass over a strided window view (not a multiply-add pass per tap). With unit
    # stride along W the view's rows are whole (OW * C) runs of the input, the filter tiled along
    # them: a long contiguous inner loop even where C is small.
    if window.stride[1] == 1 and source.flags.c_contiguous:
        windows, taps = window.row_runs(source, out_h, out_w), np.tile(taps, (1, 1, out_w))
        result, spec = target.reshape(out.shape[0], out_h, -1), "nhijl,ijl->nhl"
    else:
        windows, result, spec = window.columns(source, out_h, out_w), target, "nhwijc,ijc->nhwc"

    def step():
        if refresh is not None:
            refresh()
        if multiplier != 1:
            np.take(padded, expand, axis=3, out=source)
        np.einsum(spec, windows, taps, out=result)
        if bias is not None:
            np.add(target, bias, out=out)
        elif target is not out:
            np.copyto(out, target, casting="same_kind")

    return step


@builds("XNNConvTranspose2d")
def _conv_transpose2d(node, ctx):
    """The adjoint of a convolution: one GEMM per group gives every input pixel's contribution to
    each kernel tap, and each tap is added into a strided view of the uncropped output, which is
    then cropped by the padding. The filter is [out, kh, kw, in/groups] (groups-major out)."""
    groups, cin, cout = node.groups, node.group_input_channels, node.group_output_channels
    ctx.check(groups > 0 and cin > 0 and cout > 0, "groups and channels per group must be positive")
    x = ctx.value(node.input1_id)
    ctx.check(
        x.ndim == 4 and x.shape[3] == groups * cin, f"input {list(x.shape)} is not NHWC with {groups * cin} channels"
    )
    window = _window(node)
    (kh, kw), (sh, sw), (dh, dw) = window.kernel, window.stride, window.dilation
    ctx.check(sh > 0 and sw > 0, "stride must be positive")
    weight = ctx.value(node.filter_id)
    expected = (groups * cout, kh, kw, cin)
    ctx.check(weight.shape == expected, f"filter has shape {list(weight.shape)}, expected {list(expected)} (OHWI)")
    bias = ctx.optional(node.bias_id)
    _check_bias(ctx, bias, groups * cout)
    n, h, w, _ = x.shape
    full_h = (h - 1) * sh + dh * (kh - 1) + 1 + node.adjustment_height
    full_w = (w - 1) * sw + dw * (kw - 1) + 1 + node.adjustment_width
    top, right, bottom, left = window.padding
    out = ctx.output(node.output_id)
    shape = (n, full_h - top - bottom, full_w - left - right, groups * cout)
    ctx.check(out.shape == shape, f"output has shape {list(out.shape)}, expected {list(shape)}")
    # [groups, cin, kh*kw*cout]: input channels to every tap's output channels.
    acc = _accumulate(out.dtype)
    matrices = np.ascontiguousarray(
        weight.reshape(groups, cout, kh * kw, cin).transpose(0, 3, 2, 1).reshape(groups, cin, kh * kw * cout), dtype=acc
    )
    bias = None if bias is None else bias.astype(acc, copy=False)
    full = np.empty((n, full_h, full_w, groups * cout), acc)
    products = np.empty((groups, n, h, w, kh, kw, cout), acc)
    cropped = full[:, top : top + shape[1], left : left + shape[2]]

    def step():
        rows = x.reshape(-1, groups, cin)
        for g in range(groups):
            np.matmul(rows[:, g], matrices[g], out=products[g].reshape(-1, kh * kw * cout))
        full.fill(0)
        for i in range(kh):
            for j in range(kw):
                target = full[:, i * dh : i * dh + sh * (h - 1) + 1 : sh, j * dw : j * dw + sw * (w - 1) + 1 : sw]
                target = target.reshape(n, h, w, groups, cout)
                np.add(target, products[:, :, :, :, i, j].transpose(1, 2, 3, 0, 4), out=target)
        if bias is not None:
            np.add(cropped, bias, out=out)
        else:
            np.copyto(out, cropped, casting="same_kind")

    return step
