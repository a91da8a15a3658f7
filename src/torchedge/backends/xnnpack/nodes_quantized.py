"""Node builders for nodes that read or write quantized values (`quantization`).

Matrix products and convolutions (static ``qint8`` x ``qcint8``/``qint8`` with an int32 bias,
or dynamic ``qdint8`` x ``qcint8`` with a float32 bias and output: fully connected and 2-D
convolution) reuse the float builders on exact integers: the centered input ``q - zero_point``
(padding: 0) and the filter go in as float64, whose sums of int8 products are exact, so the
float builder's accumulator holds XNNPACK's int32 accumulator exactly; it is then requantized
(static) or scaled per row and channel (dynamic) as XNNPACK's kernels do. Adds use XNNPACK's
fixed-point multipliers, multiplies its float32 requantization. Data movement needs equal
parameters in and out and moves the integers. Converts, clamps and the other unary nodes are
in `nodes_quantized_unary`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from torchedge.backends.xnnpack import quantization as q
from torchedge.backends.xnnpack.nhwc_windows import Window, padded_input
from torchedge.backends.xnnpack.registry import BUILDERS, builds_quantized
from torchedge.backends.xnnpack.schema import INVALID_VALUE_ID
from torchedge.kernels.optimized.derived_arrays import derived

__all__: list[str] = []

_F32 = np.float32
_F64 = np.float64
_TRANSPOSE_WEIGHTS = 0x1


class _Exact:
    """A stand-in `NodeContext` for a float builder: values it names come from ``arrays`` (exact
    integers as float64) and its output is ``accumulator``; checks and errors go to ``ctx``."""

    def __init__(self, ctx, arrays: dict[int, np.ndarray], output_id: int, accumulator: np.ndarray):
        self._ctx, self._arrays, self._output_id, self._acc = ctx, arrays, output_id, accumulator
        self.kind, self.index, self.output_min_max = ctx.kind, ctx.index, None

    def error(self, message: str):
        return self._ctx.error(message)

    def check(self, condition: bool, message: str) -> None:
        self._ctx.check(condition, message)

    def value(self, value_id: int) -> np.ndarray:
        return self._arrays[value_id] if value_id in self._arrays else self._ctx.value(value_id)

    def optional(self, value_id: int):
        return None if value_id == INVALID_VALUE_ID else self.value(value_id)

    def dims(self, value_id: int):
        return self._ctx.dims(value_id)

    def output(self, value_id: int) -> np.ndarray:
        self._ctx.check(value_id == self._output_id, f"writes value {value_id}, expected {self._output_id}")
        return self._acc


def _exact_dtype(ctx, node, x_quant: q.Quant, weight: np.ndarray, bias: np.ndarray | None) -> np.dtype:
    """float32 where no partial sum can reach 2**24 (so every sum of products is exact in it:
    per output channel, sum |w| * max |q - zero_point| + |bias|), else float64 (exact for any
    int32 accumulator). BLAS multiplies float32 faster."""
    reach = 255 if x_quant.dynamic else max(127 - x_quant.zero_point, x_quant.zero_point + 128)
    if ctx.kind == "XNNDepthwiseConv2d" or (ctx.kind == "XNNFullyConnected" and node.flags & _TRANSPOSE_WEIGHTS):
        axis = weight.ndim - 1
    else:
        axis = 0
    others = tuple(a for a in range(weight.ndim) if a != axis)
    bound = np.sum(np.abs(weight.astype(np.int64)), axis=others) * reach
    if bias is not None and bias.shape == bound.shape:
        bound = bound + np.abs(bias.astype(np.int64))
    elif bias is not None:
        return np.dtype(_F64)
    return np.dtype(_F32) if bound.size and int(bound.max()) < 1 << 24 else np.dtype(_F64)


def _describe(value_id: int, quant: q.Quant | None) -> str:
    return f"value {value_id} (" + ("float" if quant is None else f"{quant.datatype.name}, {quant.kind}") + ")"


def _kernel_scale(ctx, quant: q.Quant, channels: int) -> np.ndarray:
    """The filter's scales, one per output channel."""
    if quant.channel_dim is None:
        return np.full(channels, quant.scale[0], _F32)
    ctx.check(quant.scale.size == channels, f"filter has {quant.scale.size} scales for {channels} output channels")
    return quant.scale


def _converted(array: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``array`` in ``dtype``: a filter's integers as the exact sums take them, once per constant filter
    (every plan of the graph shares it, as the products' layouts of it)."""
    return array.astype(dtype)


def _block_filters(weight: np.ndarray, blocks: int) -> np.ndarray:
    """A [channels, columns] 4-bit filter's integers as [blocks, block size, channels] float32, once
    per constant filter: the right-hand operands of the blocks' products."""
    channels, columns = weight.shape
    return np.ascontiguousarray(weight.reshape(channels, blocks, columns // blocks).transpose(1, 2, 0), _F32)


def _product(node, ctx):
    """Fully connected and (depthwise) convolution on quantized values."""
    x_quant, w_quant, out_quant = ctx.quant(node.input1_id), ctx.quant(node.filter_id), ctx.quant(node.output_id)
    if x_quant is None or w_quant is None:
        raise ctx.error(
            f"input {_describe(node.input1_id, x_quant)} with filter {_describe(node.filter_id, w_quant)}: "
            "mixing quantized and float operands is not supported"
        )
    ctx.check(not x_quant.dynamic or x_quant.rows > 0, "dynamic input without rows")
    ctx.check(x_quant.datatype in (q.D.xnn_datatype_qint8, q.D.xnn_datatype_qdint8), "input must be qint8 or qdint8")
    ctx.check(w_quant.zero_point == 0, f"filter zero point is {w_quant.zero_point}, XNNPACK needs 0")
    x, weight = ctx.value(node.input1_id), ctx.value(node.filter_id)
    if w_quant.group_size:
        return _blockwise_product(node, ctx, x, x_quant, weight, w_quant)
    bias = ctx.optional(node.bias_id)
    if bias is not None:
        b_quant = ctx.quant(node.bias_id)
        if x_quant.dynamic:
            ctx.check(b_quant is None and bias.dtype == _F32, "a dynamic product takes a float32 bias")
        else:
            ctx.check(b_quant is not None and bias.dtype == np.int32, "a static product takes an int32 bias")
    exact = _exact_dtype(ctx, node, x_quant, weight, None if x_quant.dynamic else bias)
    centered = np.zeros(x.shape, exact)
    arrays = {node.input1_id: centered, node.filter_id: derived(_converted, (weight,), exact)}
    if bias is not None and not x_quant.dynamic:
        arrays[node.bias_id] = bias.astype(exact)
    dims = ctx.dims(node.output_id)
    accumulator = np.zeros(dims, exact)
    exact_node = dataclasses.replace(node, bias_id=INVALID_VALUE_ID) if x_quant.dynamic else node
    inner = BUILDERS[ctx.kind](exact_node, _Exact(ctx, arrays, node.output_id, accumulator))
    out = ctx.output(node.output_id)
    kernel_scale = _kernel_scale(ctx, w_quant, dims[-1])
    if x_quant.dynamic:
        return _dynamic_product(ctx, x, x_quant, centered, inner, accumulator, kernel_scale, bias, out, out_quant)
    ctx.check(out_quant is not None and out_quant.datatype == q.D.xnn_datatype_qint8, "output must be qint8")
    scale = q.requantization_scale(x_quant.scale[0], kernel_scale, out_quant.scale[0])
    bounds = q.output_bounds(ctx, out_quant)
    zero_point = x_quant.zero_point

    def step():
        np.subtract(x, zero_point, out=centered, dtype=centered.dtype)
        inner()
        q.requantize(accumulator, scale, out_quant, bounds, out)

    return step


def _dynamic_product(ctx, x, x_quant, centered, inner, accumulator, kernel_scale, bias, out, out_quant):
    """qd8 x qc8w -> f32, as XNNPACK's qd8-f32-qc8w kernels:
    ``((float) acc * inv_scale[row]) * kernel_scale[c] + bias[c]`` in float32. A convolution's
    input has one set of parameters per image, shared by all of that image's output pixels."""
    ctx.check(out_quant is None and out.dtype == _F32, "a dynamic product writes float32")
    ctx.check(
        ctx.kind in ("XNNFullyConnected", "XNNConv2d"),
        "dynamic quantization is supported for fully connected and convolution nodes",
    )
    rows = accumulator.reshape(-1, accumulator.shape[-1])
    ctx.check(
        rows.shape[0] % x_quant.rows == 0 and (ctx.kind == "XNNConv2d" or rows.shape[0] == x_quant.rows),
        f"{rows.shape[0]} output rows for {x_quant.rows} quantized rows",
    )
    per_row = rows.shape[0] // x_quant.rows  # output pixels per quantized row (1 for fully connected)
    x_rows, centered_rows = x.reshape(x_quant.rows, -1), centered.reshape(x_quant.rows, -1)
    out_rows = out.reshape(rows.shape)
    bias32 = None if bias is None else np.asarray(bias, _F32)

    def step():
        np.subtract(x_rows, x_quant.row_zero_point[:, None], out=centered_rows, dtype=centered.dtype)
        inner()
        row_scale = x_quant.row_scale if per_row == 1 else np.repeat(x_quant.row_scale, per_row)
        scaled = np.multiply(rows.astype(_F32), row_scale[:, None], dtype=_F32)
        np.multiply(scaled, kernel_scale, out=out_rows, dtype=_F32)
        if bias32 is not None:
            np.add(out_rows, bias32, out=out_rows)

    return step


def _blockwise_product(node, ctx, x, x_quant, weight, w_quant):
    """qd8 x qb4w -> f32, as XNNPACK's qd8-f32-qb4w kernels: per block of ``group_size`` inputs an
    exact int32 sum, scaled by the block's bfloat16 scale and summed in float32; then times the
    row's ``inv_scale``, plus the bias."""
    ctx.check(ctx.kind == "XNNFullyConnected" and x_quant.dynamic, "4-bit blockwise filters need a dynamic input")
    ctx.check(not node.flags & _TRANSPOSE_WEIGHTS, "transposed blockwise filters are not supported")
    channels, columns = weight.shape
    size = w_quant.group_size
    blocks = columns // size
    ctx.check(x.size == x_quant.rows * columns, f"input {list(x.shape)} does not split into rows of {columns}")
    bias = ctx.optional(node.bias_id)
    ctx.check(bias is None or (bias.dtype == _F32 and bias.shape == (channels,)), f"bias must be float32 [{channels}]")
    out = ctx.output(node.output_id)
    ctx.check(out.dtype == _F32 and out.size == x_quant.rows * channels, f"output must be float32 [.., {channels}]")
    # One float32 product per block: a block's sum has at most size * 255 * 8 < 2**24 in magnitude
    # (centered int8 times int4), so every partial sum BLAS forms is an exact integer.
    ctx.check(size * 255 * 8 < 1 << 24, f"blocks of {size} inputs overflow float32's exact integers")
    filters = derived(_block_filters, (weight,), blocks)  # [blocks, size, channels]
    centered = np.zeros((blocks, x_quant.rows, size), _F32)
    x_blocks = x.reshape(x_quant.rows, blocks, size).transpose(1, 0, 2)
    out_rows = out.reshape(x_quant.rows, channels)
    sums = np.zeros((blocks, x_quant.rows, channels), _F32)
    scaled = np.zeros(out_rows.shape, _F32)
    total = np.zeros(out_rows.shape, _F32)
    scale = np.ascontiguousarray(w_quant.scale.T, _F32)  # [blocks, channels]

    def step():
        np.subtract(x_blocks, x_quant.row_zero_point[None, :, None], out=centered, dtype=_F32)
        np.matmul(centered, filters, out=sums)  # the exact int32 sums of each block
        total.fill(0)
        for b in range(blocks):  # summed block after block, as XNNPACK's kernels do
            np.multiply(sums[b], scale[b], out=scaled)
            np.add(total, scaled, out=total)
        np.multiply(total, x_quant.row_scale[:, None], out=out_rows, dtype=_F32)
        if bias is not None:
            np.add(out_rows, bias, out=out_rows)

    return step


builds_quantized("XNNFullyConnected", "XNNConv2d", "XNNDepthwiseConv2d", "XNNConvTranspose2d")(_product)


def _same_params(node, ctx, ids) -> None:
    out_quant = ctx.quant(node.output_id)
    for value_id in ids:
        ctx.check(
            out_quant is not None and out_quant.same_as(ctx.quant(value_id)) and not out_quant.dynamic,
            f"value {value_id} and output {node.output_id} have different quantization parameters",
        )


@builds_quantized(
    "XNNStaticTranspose",
    "XNNStaticReshape",
    "XNNStaticSlice",
    "XNNCopy",
    "XNNConcatenate2",
    "XNNConcatenate3",
    "XNNConcatenate4",
    "XNNConcatenate5",
)
def _move(node, ctx):
    """Data movement: the integers move unchanged under one set of parameters."""
    fields = ("input_id", "input1_id", "input2_id", "input3_id", "input4_id", "input5_id")
    ids = [getattr(node, f, None) for f in fields]
    count = int(ctx.kind[-1]) if ctx.kind.startswith("XNNConcatenate") else 1
    _same_params(node, ctx, [i for i in ids if i is not None][:count])
    ctx.check(ctx.output_min_max is None, "a data movement node with a fused clamp")
    return BUILDERS[ctx.kind](node, ctx)


@builds_quantized("XNNStaticConstantPad")
def _constant_pad(node, ctx):
    """The padding value is quantized with the output's parameters."""
    _same_params(node, ctx, [node.input_id])
    padding = q.quantize_bound(node.padding_value, ctx.quant(node.output_id))
    return BUILDERS[ctx.kind](dataclasses.replace(node, padding_value=padding), ctx)


@builds_quantized("XNNMaxPooling2d")
def _max_pooling(node, ctx):
    """Max of the integers (padding never wins), then the quantized clamp."""
    _same_params(node, ctx, [node.input_id])
    x, out, quant = ctx.value(node.input_id), ctx.output(node.output_id), ctx.quant(node.output_id)
    ctx.check(x.ndim == 4 and node.pooling_height > 0 and node.pooling_width > 0, "needs an NHWC input and a window")
    window = Window(
        (node.pooling_height, node.pooling_width),
        (max(node.stride_height, 1), max(node.stride_width, 1)),
        (max(node.dilation_height, 1), max(node.dilation_width, 1)),
        (node.padding_top, node.padding_right, node.padding_bottom, node.padding_left),
    )
    out_h, out_w = window.output_size(x.shape[1], x.shape[2])
    shape = (x.shape[0], out_h, out_w, x.shape[3])
    ctx.check(out.shape == shape, f"output has shape {list(out.shape)}, expected {list(shape)}")
    padded, refresh = padded_input(x, window.padding, quant.qmin)
    taps = window.taps(padded, out_h, out_w)
    clamp = q.clamp_step(ctx, out, quant)

    def step():
        if refresh is not None:
            refresh()
        np.copyto(out, taps[0])
        for view in taps[1:]:
            np.maximum(out, view, out=out)
        if clamp is not None:
            clamp()

    return step


def _binary_operands(node, ctx):
    a, b, out = ctx.value(node.input1_id), ctx.value(node.input2_id), ctx.output(node.output_id)
    quants = [ctx.quant(i) for i in (node.input1_id, node.input2_id, node.output_id)]
    ctx.check(
        all(x is not None and x.datatype == q.D.xnn_datatype_qint8 for x in quants),
        "quantized binary nodes need qint8 inputs and output",
    )
    try:
        shape = np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise ctx.error(f"inputs of shapes {list(a.shape)} and {list(b.shape)} do not broadcast") from None
    ctx.check(shape == out.shape, f"output has shape {list(out.shape)}, the inputs broadcast to {list(shape)}")
    return a, b, out, quants, q.output_bounds(ctx, quants[2])


def _add_multiplier(scale: np.float32, shift: int) -> int:
    """``lrintf`` of ``|scale| * 2**shift`` (XNNPACK adds ``shift`` to the exponent bits), signed."""
    magnitude = int(np.rint(np.ldexp(abs(_F32(scale)), shift, dtype=_F32)))
    return -magnitude if scale < 0 else magnitude


@builds_quantized("XNNAdd", "XNNSubtract")
def _add(node, ctx):
    """XNNPACK's qs8 add: ``(bias + a * a_mult + b * b_mult) >> shift`` with 21-bit multipliers
    (``b_mult`` negated for a subtraction), plus the output zero point, clamped."""
    a, b, out, (qa, qb, qo), (low, high) = _binary_operands(node, ctx)
    a_scale = _F32(qa.scale[0]) / _F32(qo.scale[0])
    b_scale = _F32(qb.scale[0]) / _F32(qo.scale[0])
    if ctx.kind == "XNNSubtract":
        b_scale = -b_scale
    largest = max(abs(a_scale), abs(b_scale))
    exponent = int(np.frexp(largest)[1]) - 1  # the float's unbiased exponent
    shift = 20 - exponent
    ctx.check(12 <= shift <= 30, f"input / output scale ratio {largest} is outside XNNPACK's range")
    a_mult, b_mult = _add_multiplier(a_scale, shift), _add_multiplier(b_scale, shift)
    bias = (1 << (shift - 1)) - a_mult * qa.zero_point - b_mult * qb.zero_point
    acc = np.zeros(out.shape, np.int64)

    def step():
        np.multiply(a, a_mult, out=acc, dtype=np.int64)
        np.add(acc, np.multiply(b, b_mult, dtype=np.int64), out=acc)
        np.add(acc, bias, out=acc)
        np.right_shift(acc, shift, out=acc)
        np.add(acc, qo.zero_point, out=acc)
        np.clip(acc, low, high, out=acc)
        np.copyto(out, acc, casting="unsafe")

    return step


@builds_quantized("XNNMultiply")
def _multiply(node, ctx):
    """XNNPACK's qs8 multiply: ``(a - za) * (b - zb)`` requantized by ``sa * sb / so`` in float32."""
    a, b, out, (qa, qb, qo), bounds = _binary_operands(node, ctx)
    scale = np.divide(_F32(qa.scale[0]) * _F32(qb.scale[0]), _F32(qo.scale[0]), dtype=_F32)

    def step():
        product = np.multiply(
            np.subtract(a, qa.zero_point, dtype=np.int32), np.subtract(b, qb.zero_point, dtype=np.int32)
        )
        q.requantize(product, scale, qo, bounds, out)

    return step


@builds_quantized("XNNGlobalAvgPooling2d")
def _global_avg_pooling(node, ctx):
    """Sum of ``q - zero_point`` over H and W, times ``input_scale / (output_scale * H * W)``."""
    x, out = ctx.value(node.input_id), ctx.output(node.output_id)
    qx, qo = ctx.quant(node.input_id), ctx.quant(node.output_id)
    ctx.check(qx is not None and qo is not None and not qx.dynamic, "needs static quantized input and output")
    ctx.check(x.ndim == 4 and out.size == x.shape[0] * x.shape[3], "needs an NHWC input and N x C outputs")
    count = x.shape[1] * x.shape[2]
    scale = np.divide(_F32(qx.scale[0]), _F32(qo.scale[0]) * _F32(count), dtype=_F32)
    bounds = q.output_bounds(ctx, qo)
    sums = out.reshape(x.shape[0], 1, 1, x.shape[3])

    def step():
        total = np.sum(x, axis=(1, 2), keepdims=True, dtype=np.int64) - count * qx.zero_point
        q.requantize(total, scale, qo, bounds, sums)

    return step
