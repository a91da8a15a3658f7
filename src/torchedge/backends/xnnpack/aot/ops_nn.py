"""Matrix products, convolutions, poolings, mean over H and W, and batch norm.

Filters are written in XNNPACK's layouts: fully connected [out, in]; convolution OHWI;
depthwise convolution [1, kh, kw, channels * multiplier] (ExecuTorch swaps the filter's first
two dims and then makes it channels-last). Convolutions and poolings read and write NHWC.
A batch norm the compiler did not fold into a convolution becomes a multiply and an add by
per-channel constants computed here.
"""

from __future__ import annotations

import operator

import numpy as np
import torch

from torchedge.backends.xnnpack import schema as s
from torchedge.backends.xnnpack.aot.builder import FLAG_KEEP_DIMS, FLAG_TRANSPOSE_WEIGHTS, INVALID
from torchedge.backends.xnnpack.aot.lowering import NCHW, NHWC, Lowering, constant_array, lowers, shape
from torchedge.backends.xnnpack.aot.shapes import any_dims, leading_only

__all__: list[str] = []

aten = torch.ops.aten
_FP32 = s.XNNDatatype.xnn_datatype_fp32


def _pair(values, default=None) -> list[int]:
    values = list(values) if isinstance(values, (list, tuple)) else [values]
    if not values:
        return list(default)
    return [int(v) for v in (values * 2 if len(values) == 1 else values)]


# Matrix products ----------------------------------------------------------------------------


def _bias_vector(ep, bias, out_features: int) -> np.ndarray | None:
    data = constant_array(bias, ep)
    if data is None or data.size != out_features or (data.ndim == 2 and data.shape[-1] != out_features):
        return None
    return data.reshape(out_features)


def _addmm_check(node, ep) -> bool:
    if node.kwargs.get("beta", 1) != 1 or node.kwargs.get("alpha", 1) != 1:
        return False
    out_features = shape(node)[-1]
    return constant_array(node.args[2], ep) is not None and _bias_vector(ep, node.args[0], out_features) is not None


@lowers(aten.addmm.default, check=_addmm_check, dynamic=leading_only)
def _addmm(lw: Lowering, node: torch.fx.Node) -> None:
    bias, x, weight = node.args[:3]
    filter_id = lw.get(weight)  # [in, out], stored as the program holds it
    b = _bias_vector(lw.ep, bias, shape(weight)[1])
    bias_id = lw.builder.value(b.shape, b)
    source = lw.get(x)
    out = lw.output(node)
    lw.node(
        "XNNFullyConnected",
        input1_id=source,
        filter_id=filter_id,
        bias_id=bias_id,
        output_id=out,
        flags=FLAG_TRANSPOSE_WEIGHTS,
    )


@lowers(aten.mm.default, dynamic=leading_only)
def _mm(lw: Lowering, node: torch.fx.Node) -> None:
    x, weight = node.args[:2]
    source = lw.get(x)
    # The [in, out] filter, static or computed, as the program holds it: a constant the program's
    # portable nodes read too (a tied LM head) then shares its bytes in the file.
    filter_id = lw.get(weight)
    out = lw.output(node)
    lw.node(
        "XNNFullyConnected",
        input1_id=source,
        filter_id=filter_id,
        bias_id=INVALID,
        output_id=out,
        flags=FLAG_TRANSPOSE_WEIGHTS,
    )


@lowers(aten.bmm.default, dynamic=any_dims)
def _bmm(lw: Lowering, node: torch.fx.Node) -> None:
    a, b = lw.get(node.args[0]), lw.get(node.args[1])
    out = lw.output(node)
    lw.node("XNNBatchMatrixMultiply", input1_id=a, input2_id=b, output_id=out, flags=0)


# Convolution --------------------------------------------------------------------------------


def _conv_check(node, ep) -> bool:
    x, weight, bias, stride, padding, dilation, transposed, output_padding, groups = node.args[:9]
    if transposed or len(shape(x)) != 4 or constant_array(weight, ep) is None:
        return False
    return bias is None or constant_array(bias, ep) is not None


@lowers(aten.convolution.default, check=_conv_check, dynamic=leading_only)
def _convolution(lw: Lowering, node: torch.fx.Node) -> None:
    x, weight, bias, stride, padding, dilation, _, _, groups = node.args[:9]
    w = lw.constant(weight)  # [out, in / groups, kh, kw]
    out_channels, group_in, kh, kw = w.shape
    groups = int(groups)
    group_out = out_channels // groups
    depthwise = group_in == 1 and groups > 1
    if depthwise:  # [1, kh, kw, out]
        filter_data = w.reshape(1, out_channels, kh, kw).transpose(0, 2, 3, 1)
    else:  # OHWI
        filter_data = w.transpose(0, 2, 3, 1)
    # float32 even in float16 graphs, as ExecuTorch writes them
    filter_id = lw.builder.value(filter_data.shape, np.ascontiguousarray(filter_data), datatype=_FP32)
    bias_id = INVALID
    if bias is not None:
        b = lw.constant(bias).reshape(-1)
        bias_id = lw.builder.value(b.shape, b, datatype=_FP32)
    conv_node(lw, node, x, (filter_id, bias_id), (kh, kw), (padding, stride, dilation), (groups, group_in, group_out))


def conv_node(lw: Lowering, node, x, ids: tuple[int, int], kernel, geometry, grouping) -> None:
    """The ``XNNConv2d`` (``XNNDepthwiseConv2d`` for one input channel a group) writing ``node``'s
    result channels-last from ``x``: ``ids`` the filter and bias values, ``kernel`` its (kh, kw),
    ``geometry`` (padding, stride, dilation), ``grouping`` (groups, channels in and out a group)."""
    (filter_id, bias_id), (kh, kw) = ids, kernel
    pad, step, dil = (_pair(v) for v in geometry)
    groups, group_in, group_out = grouping
    source = lw.get(x, NHWC)
    out = lw.output(node, NHWC)
    lw.node(
        "XNNDepthwiseConv2d" if group_in == 1 and groups > 1 else "XNNConv2d",
        padding_top=pad[0],
        padding_right=pad[1],
        padding_bottom=pad[0],
        padding_left=pad[1],
        kernel_height=kh,
        kernel_width=kw,
        subsampling_height=step[0],
        subsampling_width=step[1],
        dilation_height=dil[0],
        dilation_width=dil[1],
        group_input_channels=group_in,
        group_output_channels=group_out,
        groups=groups,
        adjustment_height=0,
        adjustment_width=0,
        input1_id=source,
        filter_id=filter_id,
        bias_id=bias_id,
        output_id=out,
        flags=0,
    )


# Pooling ------------------------------------------------------------------------------------


def _ceil_extra(size: int, kernel: int, stride: int, pad: int, dilation: int) -> int:
    """Padding added at the end so that floor division gives ceil mode's output size."""
    span = size + 2 * pad - dilation * (kernel - 1) - 1
    out = (span + stride - 1) // stride + 1
    if (out - 1) * stride >= size + pad:  # the last window must start inside the input
        out -= 1
    return max(0, (out - 1) * stride - span)


def _max_pool_check(node, ep) -> bool:
    if len(shape(node.args[0])) != 4:
        return False
    if any(u.target is not operator.getitem or u.args[1] != 0 for u in node.users):
        return False
    kernel = _pair(node.args[1])
    stride = _pair(node.args[2] if len(node.args) > 2 else [], kernel)
    return stride[0] <= kernel[0] and stride[1] <= kernel[1]


@lowers(aten.max_pool2d_with_indices.default, check=_max_pool_check, dynamic=leading_only)
def _max_pool(lw: Lowering, node: torch.fx.Node) -> None:
    args = list(node.args) + [None] * (6 - len(node.args))
    x = args[0]
    kernel = _pair(args[1])
    stride = _pair(args[2] or [], kernel)
    pad = _pair(args[3] if args[3] is not None else 0)
    dil = _pair(args[4] if args[4] is not None else 1)
    bottom, right = pad[0], pad[1]
    if args[5]:
        _, _, h, w = shape(x)
        bottom += _ceil_extra(h, kernel[0], stride[0], pad[0], dil[0])
        right += _ceil_extra(w, kernel[1], stride[1], pad[1], dil[1])
    source = lw.get(x, NHWC)
    out = lw.output(node, NHWC)
    lw.node(
        "XNNMaxPooling2d",
        padding_top=pad[0],
        padding_right=right,
        padding_bottom=bottom,
        padding_left=pad[1],
        pooling_height=kernel[0],
        pooling_width=kernel[1],
        stride_height=stride[0],
        stride_width=stride[1],
        dilation_height=dil[0],
        dilation_width=dil[1],
        input_id=source,
        output_id=out,
        flags=FLAG_KEEP_DIMS,
    )


def _avg_args(node):
    args = list(node.args) + [None] * (7 - len(node.args))
    kernel = _pair(args[1])
    stride = _pair(args[2] or [], kernel)
    pad = _pair(args[3] if args[3] is not None else 0)
    ceil_mode = bool(args[4])
    count_include_pad = True if args[5] is None else bool(args[5])
    return kernel, stride, pad, ceil_mode, count_include_pad, args[6]


def _avg_pool_check(node, ep) -> bool:
    if len(shape(node.args[0])) != 4:
        return False
    kernel, _, pad, ceil_mode, count_include_pad, divisor = _avg_args(node)
    if ceil_mode or (count_include_pad and any(pad)):
        return False
    return divisor is None or divisor == kernel[0] * kernel[1]


@lowers(aten.avg_pool2d.default, check=_avg_pool_check, dynamic=leading_only)
def _avg_pool(lw: Lowering, node: torch.fx.Node) -> None:
    kernel, stride, pad, _, _, _ = _avg_args(node)
    source = lw.get(node.args[0], NHWC)
    out = lw.output(node, NHWC)
    lw.node(
        "XNNAvgPooling2d",
        padding_top=pad[0],
        padding_right=pad[1],
        padding_bottom=pad[0],
        padding_left=pad[1],
        pooling_height=kernel[0],
        pooling_width=kernel[1],
        stride_height=stride[0],
        stride_width=stride[1],
        dilation_height=0,
        dilation_width=0,
        input_id=source,
        output_id=out,
        flags=FLAG_KEEP_DIMS,
    )


def _mean_check(node, ep) -> bool:
    rank = len(shape(node.args[0]))
    dims = node.args[1] if len(node.args) > 1 else None
    if rank != 4 or not dims or node.kwargs.get("dtype") is not None:
        return False
    return sorted(int(d) % rank for d in dims) == [2, 3]


@lowers(aten.mean.dim, check=_mean_check, dynamic=leading_only)
def _mean(lw: Lowering, node: torch.fx.Node) -> None:
    keepdim = bool(node.args[2]) if len(node.args) > 2 else bool(node.kwargs.get("keepdim", False))
    source = lw.get(node.args[0], NHWC)
    if keepdim:  # [N, 1, 1, C] in NHWC
        out = lw.output(node, NHWC)
        lw.node("XNNGlobalAvgPooling2d", input_id=source, output_id=out, flags=FLAG_KEEP_DIMS)
    else:  # [N, C]: the same in both layouts
        out = lw.output(node, NCHW)
        lw.node("XNNGlobalAvgPooling2d", input_id=source, output_id=out, flags=0)


# Batch norm ---------------------------------------------------------------------------------


def _batch_norm_check(node, ep) -> bool:
    rank = len(shape(node.args[0]))
    if rank not in (2, 3, 4) or any(u.args[1] != 0 for u in node.users):
        return False
    weight, bias, mean, var = node.args[1:5]
    return all(a is None or constant_array(a, ep) is not None for a in (weight, bias)) and all(
        constant_array(a, ep) is not None for a in (mean, var)
    )


@lowers(aten._native_batch_norm_legit_no_training.default, check=_batch_norm_check, dynamic=leading_only)
def _batch_norm(lw: Lowering, node: torch.fx.Node) -> None:
    x, weight, bias, mean, var, _, eps = node.args[:7]
    channels = shape(x)[1]
    trailing: tuple[int, ...]
    mean_data, var_data = lw.constant(mean).astype(np.float64), lw.constant(var).astype(np.float64)
    gamma = np.ones(channels) if weight is None else lw.constant(weight).astype(np.float64)
    beta = np.zeros(channels) if bias is None else lw.constant(bias).astype(np.float64)
    scale = gamma / np.sqrt(var_data + float(eps))
    shift = beta - mean_data * scale
    rank = len(shape(x))
    if rank == 4 and lw.preferred_layout(x) == NHWC:
        layout, trailing = NHWC, (channels,)
    else:
        layout, trailing = NCHW, (channels,) + (1,) * (rank - 2)
    source = lw.get(x, layout)
    scale_id = lw.builder.value(trailing, scale.astype(np.float32).reshape(trailing))
    shift_id = lw.builder.value(trailing, shift.astype(np.float32).reshape(trailing))
    dims = shape(x)
    scaled = lw.builder.value(dims if layout == NCHW else [dims[i] for i in (0, 2, 3, 1)])
    lw.node("XNNMultiply", input1_id=source, input2_id=scale_id, output_id=scaled, flags=0)
    out = lw.output(node, layout, dims=dims)
    lw.node("XNNAdd", input1_id=scaled, input2_id=shift_id, output_id=out, flags=0)
