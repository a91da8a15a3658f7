"""Node builders for unary nodes on quantized (``qint8``) values: converts, clamps, leaky ReLU
and the activations and math XNNPACK computes through a lookup table.

XNNPACK has integer kernels for three of them: float32 <-> int8 converts, a ``qint8 -> qint8``
convert (requantization) and leaky ReLU, both with Q8 fixed-point multipliers (``lrintf(256 *
ratio)``), and a clamp whose input and output share their parameters. Every other unary node
on int8 values (sigmoid, tanh, ELU, hardswish, GELU, a clamp that changes the parameters...)
becomes a 256-entry table at load, which XNNPACK fills by running its float reference of the
operation on every int8 code: ``x = (code - zero_point) * scale`` in float32, ``y = op(x)``, then
``rint(y * (1 / scale) + zero_point)`` in float32 (NaN gives 0), saturated. The references
compute in float32, some steps in float64 (sigmoid, GELU), and call libm in float32 for
``tanhf``, ``expm1f``...; those are computed here in float64 and rounded once to float32.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from torchedge.backends.xnnpack import quantization as q
from torchedge.backends.xnnpack.registry import builds_quantized

__all__: list[str] = []

_F32 = np.float32
_F64 = np.float64


def _rounded(fn):
    """``fn`` on float64, rounded once to float32 (a correctly rounded libm float function)."""
    return lambda x: fn(x.astype(_F64)).astype(_F32)


def _sigmoid(x: np.ndarray, node) -> np.ndarray:
    e = np.exp(x.astype(_F64))
    y = (e / (1 + e)).astype(_F32)
    return np.where(x > 100, _F32(1), np.where(x < -100, _F32(0), y))


def _elu(x: np.ndarray, node) -> np.ndarray:
    return np.where(x < 0, _F32(node.alpha) * _rounded(np.expm1)(x), x)


def _gelu(x: np.ndarray, node) -> np.ndarray:
    erf = np.array([math.erf(v * math.sqrt(2) / 2) for v in x.astype(_F64).tolist()], _F64)
    return ((x / _F32(2)).astype(_F64) * (1 + erf)).astype(_F32)


def _hardswish(x: np.ndarray, node) -> np.ndarray:
    return (x / _F32(6)) * np.maximum(np.minimum(x + _F32(3), _F32(6)), _F32(0))


def _unary(fn):
    return lambda x, node: fn(x)


# The float reference XNNPACK runs on every int8 code, per node kind (float32 in and out).
_REFERENCES = {
    "XNNSigmoid": _sigmoid,
    "XNNTanh": _unary(_rounded(np.tanh)),
    "XNNELU": _elu,
    "XNNGelu": _gelu,
    "XNNHardswish": _hardswish,
    "XNNExp": _unary(_rounded(np.exp)),
    "XNNLog": _unary(_rounded(np.log)),
    "XNNSquareRoot": _unary(_rounded(np.sqrt)),
    "XNNReciprocalSquareRoot": _unary(lambda x: _F32(1) / _rounded(np.sqrt)(x)),
    "XNNSin": _unary(_rounded(np.sin)),
    "XNNCos": _unary(_rounded(np.cos)),
    "XNNFloor": _unary(np.floor),
    "XNNCeiling": _unary(np.ceil),
    "XNNNegate": _unary(np.negative),
    "XNNAbs": _unary(np.abs),
    "XNNSquare": _unary(np.square),
}
_CODES = np.arange(256, dtype=np.uint8).view(np.int8)  # table index: the int8 code's byte


def _operands(node, ctx):
    """(input, output, their parameters); the output takes the input's shape, as in XNNPACK (the
    payload may give its dims in another layout: NCHW where the input was made NHWC)."""
    x = ctx.value(node.input_id)
    return (x, ctx.output(node.output_id, x.shape), *_int8_params(node, ctx))


def _int8_params(node, ctx) -> tuple[q.Quant, q.Quant]:
    qx, qo = ctx.quant(node.input_id), ctx.quant(node.output_id)
    for value_id, quant in ((node.input_id, qx), (node.output_id, qo)):
        ctx.check(
            quant is not None and quant.datatype == q.D.xnn_datatype_qint8 and quant.channel_dim is None,
            f"value {value_id} must be per-tensor qint8 (input and output of a quantized unary node)",
        )
    return qx, qo


def _lookup_table(reference, node, qx: q.Quant, qo: q.Quant) -> np.ndarray:
    """The int8 table XNNPACK builds for a unary node: entry ``code & 0xFF`` is the output code."""
    x = np.multiply(_CODES.astype(_F32) - _F32(qx.zero_point), qx.scale[0], dtype=_F32)
    with np.errstate(all="ignore"):
        y = np.asarray(reference(x, node), _F32)
        scaled = np.add(np.multiply(y, _F32(1) / qo.scale[0], dtype=_F32), _F32(qo.zero_point), dtype=_F32)
    scaled = np.rint(np.where(np.isnan(scaled), _F32(0), scaled))
    return np.clip(scaled, qo.qmin, qo.qmax).astype(np.int8)


def _table_step(ctx, x: np.ndarray, out: np.ndarray, table: np.ndarray, qo: q.Quant):
    clamp = q.clamp_step(ctx, out, qo)
    codes, target = x.view(np.uint8), out.view(np.int8)

    def step():
        np.take(table, codes, out=target)
        if clamp is not None:
            clamp()

    return step


@builds_quantized(*_REFERENCES)
def _table_unary(node, ctx):
    x, out, qx, qo = _operands(node, ctx)
    return _table_step(ctx, x, out, _lookup_table(_REFERENCES[ctx.kind], node, qx, qo), qo)


@builds_quantized("XNNClamp")
def _clamp(node, ctx):
    """Same parameters in and out: the integers clamped to the quantized bounds. Otherwise a
    table of the float clamp (bounds: the node's ``output_min_max``) requantized."""
    x, out, qx, qo = _operands(node, ctx)
    if qx.same_as(qo):
        clamp = q.clamp_step(ctx, out, qo)

        def step():
            np.copyto(out, x)
            if clamp is not None:
                clamp()

        return step
    bounds = ctx.output_min_max
    low, high = (-np.inf, np.inf) if bounds is None else (bounds.output_min, bounds.output_max)
    ctx.check(not low > high, f"output_min {low} is greater than output_max {high}")
    table = _lookup_table(lambda v, _: np.minimum(np.maximum(v, _F32(low)), _F32(high)), node, qx, qo)
    return functools.partial(np.take, table, x.view(np.uint8), out=out.view(np.int8))


def _q8(acc: np.ndarray, out: np.ndarray) -> None:
    """``clamp((acc) >> 8)`` into int8 (``acc`` already holds the bias and rounding term)."""
    np.right_shift(acc, 8, out=acc)
    np.clip(acc, -128, 127, out=acc)
    np.copyto(out, acc, casting="unsafe")


@builds_quantized("XNNLeakyReLU")
def _leaky_relu(node, ctx):
    """XNNPACK's qs8 leaky ReLU: ``(q - zx) * m + (zo << 8) + 128``, ``>> 8``, saturated; ``m`` is
    the Q8 multiplier of ``sx / so``, times the slope where ``q - zx`` is negative."""
    x, out, qx, qo = _operands(node, ctx)
    ctx.check(ctx.output_min_max is None, "a quantized leaky ReLU with a fused clamp")
    ratio = np.divide(qx.scale[0], qo.scale[0], dtype=_F32)
    positive = q.q8_multiplier(ctx, ratio, "input / output scale")
    negative = q.q8_multiplier(ctx, np.multiply(ratio, _F32(node.negative_slope), dtype=_F32), "slope x scale ratio")
    ctx.check(negative != 0, "the negative slope rounds to a zero multiplier")
    bias = (qo.zero_point << 8) + 0x80
    acc = np.zeros(x.shape, np.int32)

    def step():
        np.subtract(x, qx.zero_point, out=acc, dtype=np.int32)
        np.multiply(acc, np.where(acc < 0, negative, positive), out=acc)
        np.add(acc, bias, out=acc)
        _q8(acc, out)

    return step


@builds_quantized("XNNConvert")
def _convert(node, ctx):
    """float32 <-> int8 (per tensor, or per row for dynamic values), and ``qint8 -> qint8`` as
    XNNPACK's qs8 convert: ``(q - zx) * m + (zo << 8) + 128``, ``>> 8``, saturated, where ``m`` is
    the Q8 multiplier of ``sx / so``."""
    x = ctx.value(node.input_id)
    out = ctx.output(node.output_id, x.shape)
    x_quant, out_quant = ctx.quant(node.input_id), ctx.quant(node.output_id)
    if x_quant is None and x.dtype == _F32:
        ctx.check(out_quant.channel_dim is None, "converts to a per-channel value")
        return functools.partial(q.quantize, x, out_quant, out)
    if out_quant is None and out.dtype == _F32:
        ctx.check(x_quant.channel_dim is None, "converts from a per-channel value")
        return functools.partial(q.dequantize, x, x_quant, out)
    if x_quant is not None and out_quant is not None and not (x_quant.dynamic or out_quant.dynamic):
        qx, qo = _int8_params(node, ctx)
        multiplier = q.q8_multiplier(ctx, np.divide(qx.scale[0], qo.scale[0], dtype=_F32), "input / output scale")
        bias = (qo.zero_point << 8) - multiplier * qx.zero_point + 0x80
        acc = np.zeros(x.shape, np.int32)

        def step():
            np.multiply(x, multiplier, out=acc, dtype=np.int32)
            np.add(acc, bias, out=acc)
            _q8(acc, out)

        return step
    raise ctx.error(f"converts {x.dtype} to {out.dtype}: only float32 <-> int8 and qint8 -> qint8 are supported")
