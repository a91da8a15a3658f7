"""Neural-network operators: convolution, matrix products, normalization, softmax, pooling, resizing."""

from __future__ import annotations

import numpy as np
import torch

from torchedge.backends.onnxruntime.builder import GraphBuilder, numpy_dtype
from torchedge.backends.onnxruntime.ops_reduce import reduce
from torchedge.backends.onnxruntime.registry import FLOAT32, FLOATS, NUMERIC, NodeArgs, first_output_only, lowers
from torchedge.kernels.portable.pooling_geometry import pool_divisors
from torchedge.kernels.portable.upsample import nearest_indices

__all__: list[str] = []  # translations register themselves; nothing to import

aten = torch.ops.aten


def _spatial(values, n: int) -> list[int]:
    """A per-spatial-dimension list from an ATen int list that may hold one value for all."""
    values = [int(v) for v in (values if isinstance(values, (list, tuple)) else [values])]
    return values * n if len(values) == 1 else values


def _or_filled(g: GraphBuilder, arg, shape, value: float, dtype: torch.dtype) -> str:
    """An optional tensor argument, or a constant ``value`` of ``shape`` where it is None."""
    if arg is None:
        return g.constant(np.full(shape, value, dtype=numpy_dtype(dtype)))
    return g.tensor(arg, dtype)


@lowers(aten.convolution.default, dtypes=FLOAT32, check=lambda a: a.rank("input") >= 3)
def _convolution(g: GraphBuilder, a: NodeArgs) -> str:
    n = a.rank("input") - 2
    inputs = [g.tensor(a["input"]), g.tensor(a["weight"])]
    if a["bias"] is not None:
        inputs.append(g.tensor(a["bias"]))
    padding = _spatial(a["padding"], n)
    attributes = dict(
        kernel_shape=list(a.val("weight").shape[2:]),
        strides=_spatial(a["stride"], n),
        pads=padding + padding,
        dilations=_spatial(a["dilation"], n),
        group=int(a["groups"]),
    )
    if a["transposed"]:
        return g.emit("ConvTranspose", inputs, output_padding=_spatial(a["output_padding"], n), **attributes)
    return g.emit("Conv", inputs, **attributes)


@lowers(aten.mm.default, aten.bmm.default, dtypes=NUMERIC, dynamic_rows=True)
def _matmul(g: GraphBuilder, a: NodeArgs) -> str:
    return g.emit("MatMul", [g.tensor(a["self"]), g.tensor(a["mat2"])])


@lowers(aten.addmm.default, dtypes=FLOATS)
def _addmm(g: GraphBuilder, a: NodeArgs) -> str:
    dtype = a.out_dtype
    return g.emit(
        "Gemm",
        [g.tensor(a["mat1"]), g.tensor(a["mat2"]), g.tensor(a["self"], dtype)],
        alpha=float(a["alpha"]),
        beta=float(a["beta"]),
    )


@lowers(
    aten._native_batch_norm_legit_no_training.default,
    dtypes=FLOATS,
    check=lambda a: first_output_only(a) and a.rank("input") >= 2,
)
def _batch_norm(g: GraphBuilder, a: NodeArgs) -> list[str]:
    dtype = a.out_dtype
    channels = a.val("input").shape[1]
    inputs = [
        g.tensor(a["input"]),
        _or_filled(g, a["weight"], channels, 1.0, dtype),
        _or_filled(g, a["bias"], channels, 0.0, dtype),
        g.tensor(a["running_mean"], dtype),
        g.tensor(a["running_var"], dtype),
    ]
    return [g.emit("BatchNormalization", inputs, epsilon=float(a["eps"]))]


@lowers(
    aten.native_layer_norm.default,
    dtypes=FLOATS,
    check=lambda a: first_output_only(a) and len(a["normalized_shape"]) >= 1,
)
def _layer_norm(g: GraphBuilder, a: NodeArgs) -> list[str]:
    dtype = a.out_dtype
    shape = [int(s) for s in a["normalized_shape"]]
    inputs = [g.tensor(a["input"]), _or_filled(g, a["weight"], shape, 1.0, dtype)]
    if a["bias"] is not None:
        inputs.append(g.tensor(a["bias"], dtype))
    return [g.emit("LayerNormalization", inputs, axis=-len(shape), epsilon=float(a["eps"]))]


@lowers(
    aten.native_group_norm.default,
    dtypes=FLOATS,
    check=lambda a: first_output_only(a) and a.rank("input") >= 2 and a.val("input").numel() > 0,
)
def _group_norm(g: GraphBuilder, a: NodeArgs) -> list[str]:
    """Mean and biased variance over each group of C/G channels (as ATen), then the per-channel
    affine transform."""
    dtype, shape = a.out_dtype, [int(s) for s in a.val("input").shape]
    groups = g.emit("Reshape", [g.tensor(a["input"]), g.int64s([shape[0], int(a["group"]), -1])])
    centered = g.emit("Sub", [groups, reduce(g, "ReduceMean", groups, [2], True)])
    variance = reduce(g, "ReduceMean", g.emit("Mul", [centered, centered]), [2], True)
    rstd = g.emit("Reciprocal", [g.emit("Sqrt", [g.emit("Add", [variance, g.scalar(float(a["eps"]), dtype)])])])
    y = g.emit("Reshape", [g.emit("Mul", [centered, rstd]), g.int64s(shape)])
    per_channel = [shape[1]] + [1] * (len(shape) - 2)
    for name, onnx_op in (("weight", "Mul"), ("bias", "Add")):
        if a[name] is not None:
            y = g.emit(onnx_op, [y, g.emit("Reshape", [g.tensor(a[name], dtype), g.int64s(per_channel)])])
    return [y]


def _softmax(onnx_op: str):
    def translate(g: GraphBuilder, a: NodeArgs) -> str:
        return g.emit(onnx_op, [g.tensor(a["self"])], axis=int(a["dim"]))

    return translate


for _op, _onnx_op in ((aten._softmax.default, "Softmax"), (aten._log_softmax.default, "LogSoftmax")):
    lowers(_op, dtypes=FLOATS, check=lambda a: not a["half_to_float"] and a.rank() >= 1, dynamic_rows=True)(
        _softmax(_onnx_op)
    )


def _pool_attributes(a: NodeArgs) -> dict:
    kernel = _spatial(a["kernel_size"], 2)
    padding = _spatial(a["padding"], 2)
    return dict(
        kernel_shape=kernel,
        strides=_spatial(a["stride"], 2) or kernel,
        pads=padding + padding,
        ceil_mode=int(a["ceil_mode"]),
    )


@lowers(aten.max_pool2d_with_indices.default, dtypes=FLOATS, check=lambda a: first_output_only(a) and a.rank() == 4)
def _max_pool2d(g: GraphBuilder, a: NodeArgs) -> list[str]:
    return [g.emit("MaxPool", [g.tensor(a["self"])], dilations=_spatial(a["dilation"], 2), **_pool_attributes(a))]


def _avg_pool_geometry(a: NodeArgs):
    """(kernel, stride, padding, input size, output size) of a 2-d average pool, per spatial dim."""
    kernel = _spatial(a["kernel_size"], 2)
    stride = _spatial(a["stride"], 2) or kernel
    return (kernel, stride, _spatial(a["padding"], 2), [int(s) for s in a.val("self").shape[2:]], a.out_shape[2:])


@lowers(aten.avg_pool2d.default, dtypes=FLOAT32, check=lambda a: a.rank() == 4 and a["divisor_override"] is None)
def _avg_pool2d(g: GraphBuilder, a: NodeArgs) -> str:
    """AveragePool over the input only (count_include_pad=0), with end pads that give exactly
    ATen's windows (ceil_mode included: its last window starts inside the input or the left
    padding, so the end pad stays below the kernel, as ONNX requires), then scaled to ATen's
    divisor where that differs (the window clipped to the padded input, with
    ``count_include_pad``)."""
    kernel, stride, padding, size, out = _avg_pool_geometry(a)
    ends = [max(0, (o - 1) * s + k - n - p) for k, s, p, n, o in zip(kernel, stride, padding, size, out)]
    mean = g.emit(
        "AveragePool",
        [g.tensor(a["self"])],
        kernel_shape=kernel,
        strides=stride,
        pads=padding + ends,
        count_include_pad=0,
    )
    counted = pool_divisors(tuple(size), tuple(kernel), tuple(stride), tuple(padding), tuple(out), False)
    divisors = pool_divisors(
        tuple(size), tuple(kernel), tuple(stride), tuple(padding), tuple(out), bool(a["count_include_pad"])
    )
    if np.array_equal(counted, divisors):
        return mean
    return g.emit("Mul", [mean, g.constant((counted / divisors).astype(np.float32).reshape([1, 1] + out))])


def _adaptive_windows(a: NodeArgs) -> list[int] | None:
    """The fixed window of an adaptive average pool whose input size the output size divides, else None."""
    sizes = [int(s) for s in a.val("self").shape[2:]]
    outputs = _spatial(a["output_size"], 2)
    if a.rank() != 4 or any(s % o for s, o in zip(sizes, outputs)):
        return None
    return [s // o for s, o in zip(sizes, outputs)]


@lowers(aten._adaptive_avg_pool2d.default, dtypes=FLOAT32, check=lambda a: _adaptive_windows(a) is not None)
def _adaptive_avg_pool2d(g: GraphBuilder, a: NodeArgs) -> str:
    x = g.tensor(a["self"])
    if _spatial(a["output_size"], 2) == [1, 1]:
        return g.emit("GlobalAveragePool", [x])
    window = _adaptive_windows(a)
    return g.emit("AveragePool", [x], kernel_shape=window, strides=window)


@lowers(aten.upsample_nearest2d.vec, check=lambda a: a.rank("input") == 4)
def _upsample_nearest2d(g: GraphBuilder, a: NodeArgs) -> str:
    """One Gather per resized dim, at the input indices ATen's ``nearest_idx`` computes (its
    float32 arithmetic included, which ONNX Resize does not reproduce)."""
    x = g.tensor(a["input"])
    sizes = [int(s) for s in a.val("input").shape[2:]]
    scales = a["scale_factors"] or [None, None]
    for axis, n, o, scale in zip((2, 3), sizes, a.out_shape[2:], scales):
        taken = nearest_indices(n, o, scale)
        if not np.array_equal(taken, np.arange(n)):
            x = g.emit("Gather", [x, g.constant(taken, hint="nearest")], axis=axis)
    return x
