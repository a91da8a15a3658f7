"""Element-wise nodes: binary arithmetic (NumPy broadcasting, as XNNPACK's), unary math,
activations and softmax. Activations XNNPACK computes as ATen does reuse the portable kernels."""

from __future__ import annotations

import functools

import numpy as np

from torchedge.backends.xnnpack.registry import builds
from torchedge.kernels.portable import activation
from torchedge.kernels.portable.common import quiet

__all__: list[str] = []

_BINARY = {
    "XNNAdd": np.add,
    "XNNSubtract": np.subtract,
    "XNNMultiply": np.multiply,
    "XNNDiv": np.divide,
    "XNNMaximum": np.maximum,
    "XNNMinimum": np.minimum,
}


def _checked_binary(node, ctx):
    a, b = ctx.value(node.input1_id), ctx.value(node.input2_id)
    out = ctx.output(node.output_id)
    try:
        shape = np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise ctx.error(f"inputs of shapes {list(a.shape)} and {list(b.shape)} do not broadcast") from None
    ctx.check(shape == out.shape, f"output has shape {list(out.shape)}, the inputs broadcast to {list(shape)}")
    ctx.check(a.dtype == b.dtype == out.dtype, f"mixes dtypes {a.dtype}, {b.dtype} -> {out.dtype}")
    return a, b, out


@builds(*_BINARY)
def _binary(node, ctx):
    a, b, out = _checked_binary(node, ctx)
    return functools.partial(_BINARY[ctx.kind], a, b, out=out)


@builds("XNNPReLU")
def _prelu(node, ctx):
    """``x`` where positive, else ``x * slope``; the slope broadcasts over the channels (last dim)."""
    x, slope, out = _checked_binary(node, ctx)

    def step():
        np.multiply(x, slope, out=out)
        np.copyto(out, x, where=x >= 0)  # NaN takes x * slope = NaN either way

    return step


def _unary_math(fn):
    def compute(x, out):
        with quiet():
            fn(x, out=out)

    return compute


def _sigmoid(x, out):
    with quiet():
        np.negative(x, out=out)
        np.exp(out, out=out)
        out += 1
        np.reciprocal(out, out=out)


def _rsqrt(x, out):
    with quiet():
        np.sqrt(x, out=out)
        np.reciprocal(out, out=out)


_UNARY = {
    "XNNAbs": _unary_math(np.abs),
    "XNNNegate": _unary_math(np.negative),
    "XNNSquare": _unary_math(np.square),
    "XNNSquareRoot": _unary_math(np.sqrt),
    "XNNReciprocalSquareRoot": _rsqrt,
    "XNNExp": _unary_math(np.exp),
    "XNNLog": _unary_math(np.log),
    "XNNSin": _unary_math(np.sin),
    "XNNCos": _unary_math(np.cos),
    "XNNTanh": _unary_math(np.tanh),
    "XNNFloor": _unary_math(np.floor),
    "XNNCeiling": _unary_math(np.ceil),
    "XNNSigmoid": _sigmoid,
    "XNNHardswish": activation.hardswish,
    "XNNGelu": lambda x, out: activation.gelu(x, "none", out),
}


def _checked_unary(node, ctx, same_dtype: bool = True):
    x = ctx.value(node.input_id)
    out = ctx.output(node.output_id)
    ctx.check(x.shape == out.shape, f"output has shape {list(out.shape)}, input {list(x.shape)}")
    ctx.check(not same_dtype or x.dtype == out.dtype, f"input is {x.dtype}, output {out.dtype}")
    return x, out


@builds(*_UNARY)
def _unary(node, ctx):
    x, out = _checked_unary(node, ctx)
    return functools.partial(_UNARY[ctx.kind], x, out)


@builds("XNNClamp")
def _clamp(node, ctx):
    """A copy: the bounds are the node's ``output_min_max``, which the plan applies to every node."""
    x, out = _checked_unary(node, ctx)
    return functools.partial(np.copyto, out, x)


@builds("XNNCopy")
def _copy(node, ctx):
    x = ctx.value(node.input_id)
    dims = ctx.dims(node.output_id)
    ctx.check(x.shape == dims, f"output has shape {list(dims)}, input {list(x.shape)}")
    out = ctx.output(node.output_id)
    ctx.check(x.dtype == out.dtype, f"input is {x.dtype}, output {out.dtype}")
    return functools.partial(np.copyto, out, x)


@builds("XNNConvert")
def _convert(node, ctx):
    x, out = _checked_unary(node, ctx, same_dtype=False)
    return functools.partial(np.copyto, out, x, casting="unsafe")


@builds("XNNELU")
def _elu(node, ctx):
    x, out = _checked_unary(node, ctx)
    return functools.partial(activation.elu, x, node.alpha, 1.0, 1.0, out)


@builds("XNNLeakyReLU")
def _leaky_relu(node, ctx):
    x, out = _checked_unary(node, ctx)
    return functools.partial(activation.leaky_relu, x, node.negative_slope, out)


@builds("XNNSoftmax")
def _softmax(node, ctx):
    """Softmax over the last dim (the partitioner only delegates that one)."""
    x, out = _checked_unary(node, ctx)
    ctx.check(x.ndim >= 1, "softmax of a 0-dimensional value")
    return functools.partial(activation.softmax, x, -1, False, out)
