"""Elementwise operators: unary math, log1p, arithmetic, comparisons, logic, where, clamps, GELU.

Operands are cast to the dtype PyTorch computes in (the node's output dtype, or
the promoted input dtype for comparisons): ONNX operators need equal input types.
Broadcasting is ONNX's own, so the arithmetic, comparisons, logic, ``where`` and unary
math read no sizes and take tensors with symbolic sizes (``dynamic_rows``).
"""

from __future__ import annotations

import math

import torch

from torchedge.backends.onnxruntime.builder import GraphBuilder
from torchedge.backends.onnxruntime.registry import FLOAT32, FLOATS, NUMERIC, NodeArgs, lowers

__all__: list[str] = []  # translations register themselves; nothing to import

aten = torch.ops.aten

_UNARY = {  # op -> (ONNX operator, dtypes of ONNX Runtime's CPU kernel)
    aten.relu.default: ("Relu", FLOATS),
    aten.sigmoid.default: ("Sigmoid", FLOATS),
    aten.tanh.default: ("Tanh", FLOATS),
    aten.exp.default: ("Exp", FLOATS),
    aten.log.default: ("Log", FLOATS),
    aten.sqrt.default: ("Sqrt", FLOATS),
    aten.reciprocal.default: ("Reciprocal", FLOATS),
    aten.sin.default: ("Sin", FLOATS),
    aten.cos.default: ("Cos", FLOATS),
    aten.erf.default: ("Erf", FLOAT32),
    aten.floor.default: ("Floor", FLOATS),
    aten.ceil.default: ("Ceil", FLOATS),
    aten.round.default: ("Round", FLOATS),
    aten.neg.default: ("Neg", NUMERIC),
    aten.abs.default: ("Abs", NUMERIC),
}

_ARITHMETIC = {
    aten.add.Tensor: "Add",
    aten.add.Scalar: "Add",
    aten.sub.Tensor: "Sub",
    aten.sub.Scalar: "Sub",
    aten.mul.Tensor: "Mul",
    aten.mul.Scalar: "Mul",
    aten.div.Tensor: "Div",
    aten.div.Scalar: "Div",
    aten.maximum.default: "Max",
    aten.minimum.default: "Min",
}

_COMPARISONS = {  # name -> (ONNX operator, negate its result)
    "eq": ("Equal", False),
    "ne": ("Equal", True),
    "lt": ("Less", False),
    "le": ("LessOrEqual", False),
    "gt": ("Greater", False),
    "ge": ("GreaterOrEqual", False),
}

_LOGICAL = {
    aten.logical_and.default: "And",
    aten.logical_or.default: "Or",
    aten.logical_xor.default: "Xor",
    aten.bitwise_and.Tensor: "And",
    aten.bitwise_or.Tensor: "Or",
    aten.bitwise_xor.Tensor: "Xor",
}
_BOOL = frozenset({torch.bool})


def _unary(onnx_op: str):
    def translate(g: GraphBuilder, a: NodeArgs) -> str:
        return g.emit(onnx_op, [g.tensor(a["self"], a.out_dtype)])

    return translate


def _binary(onnx_op: str, lhs: str, rhs: str):
    def translate(g: GraphBuilder, a: NodeArgs) -> str:
        dtype = a.out_dtype
        y = g.tensor(a[rhs], dtype)
        alpha = a.args.get("alpha", 1)
        if alpha != 1:
            y = g.emit("Mul", [y, g.scalar(alpha, dtype)])
        return g.emit(onnx_op, [g.tensor(a[lhs], dtype), y])

    return translate


def _comparison(onnx_op: str, negate: bool):
    def translate(g: GraphBuilder, a: NodeArgs) -> str:
        dtype = a.promoted()
        result = g.emit(onnx_op, [g.tensor(a["self"], dtype), g.tensor(a["other"], dtype)])
        return g.emit("Not", [result]) if negate else result

    return translate


def _logical(onnx_op: str):
    def translate(g: GraphBuilder, a: NodeArgs) -> str:
        return g.emit(onnx_op, [g.tensor(a["self"], torch.bool), g.tensor(a["other"], torch.bool)])

    return translate


for _op, (_onnx_op, _dtypes) in _UNARY.items():
    lowers(_op, dtypes=_dtypes, dynamic_rows=True)(_unary(_onnx_op))
for _op, _onnx_op in _ARITHMETIC.items():
    lowers(_op, dtypes=NUMERIC, dynamic_rows=True)(_binary(_onnx_op, "self", "other"))
lowers(aten.pow.Tensor_Tensor, aten.pow.Tensor_Scalar, aten.pow.Scalar, dtypes=NUMERIC, dynamic_rows=True)(
    _binary("Pow", "self", "exponent")
)
for _name, (_onnx_op, _negate) in _COMPARISONS.items():
    _packet = getattr(aten, _name)
    lowers(
        _packet.Tensor,
        _packet.Scalar,
        dtypes=(NUMERIC | _BOOL) if _onnx_op == "Equal" else NUMERIC,
        dtype_of=NodeArgs.promoted,
        dynamic_rows=True,
    )(_comparison(_onnx_op, _negate))
for _op, _onnx_op in _LOGICAL.items():
    lowers(_op, dtypes=_BOOL, dynamic_rows=True)(_logical(_onnx_op))


@lowers(aten.rsqrt.default, dtypes=FLOATS, dynamic_rows=True)
def _rsqrt(g: GraphBuilder, a: NodeArgs) -> str:
    return g.emit("Reciprocal", [g.emit("Sqrt", [g.tensor(a["self"], a.out_dtype)])])


@lowers(aten.log1p.default, dtypes=FLOATS)
def _log1p(g: GraphBuilder, a: NodeArgs) -> str:
    """ONNX has no Log1p, and Log(1 + x) loses every digit of a small x. With u = 1 + x,
    ``x * (log(u) / (u - 1))`` is exact to a few ulps (u - 1 is exact, and the rounding of u
    cancels in the ratio). Where u == 1 (|x| below half an ulp of 1: log1p(x) = x) and for
    x = +inf the factor is 1 instead, so that the product keeps x itself, signed zeros
    included (ONNX Runtime's Where may drop the sign of a zero); the rest (-1, below -1, nan,
    -inf) follows from Log."""
    dtype = a.out_dtype
    x = g.tensor(a["self"], dtype)
    u = g.emit("Add", [x, g.scalar(1.0, dtype)])
    d = g.emit("Sub", [u, g.scalar(1.0, dtype)])
    identity = g.emit("Or", [g.emit("Equal", [d, g.scalar(0.0, dtype)]), g.emit("IsInf", [x], detect_negative=0)])
    factor = g.emit("Where", [identity, g.scalar(1.0, dtype), g.emit("Div", [g.emit("Log", [u]), d])])
    return g.emit("Mul", [x, factor])


@lowers(aten.logical_not.default, aten.bitwise_not.default, dtypes=_BOOL, dynamic_rows=True)
def _not(g: GraphBuilder, a: NodeArgs) -> str:
    return g.emit("Not", [g.tensor(a["self"], torch.bool)])


@lowers(aten.where.self, dtypes=NUMERIC | {torch.bool, torch.uint8}, dynamic_rows=True)
def _where(g: GraphBuilder, a: NodeArgs) -> str:
    dtype = a.out_dtype
    return g.emit(
        "Where", [g.tensor(a["condition"], torch.bool), g.tensor(a["self"], dtype), g.tensor(a["other"], dtype)]
    )


def _clip(g: GraphBuilder, a: NodeArgs, low, high) -> str:
    dtype = a.out_dtype
    bounds = ["" if v is None else g.scalar(v, dtype) for v in (low, high)]
    return g.emit("Clip", [g.tensor(a["self"], dtype), *bounds])


@lowers(aten.clamp.default, dtypes=NUMERIC)
def _clamp(g: GraphBuilder, a: NodeArgs) -> str:
    return _clip(g, a, a["min"], a["max"])


@lowers(aten.hardtanh.default, dtypes=NUMERIC)
def _hardtanh(g: GraphBuilder, a: NodeArgs) -> str:
    return _clip(g, a, a["min_val"], a["max_val"])


@lowers(aten.leaky_relu.default, dtypes=FLOAT32)
def _leaky_relu(g: GraphBuilder, a: NodeArgs) -> str:
    return g.emit("LeakyRelu", [g.tensor(a["self"])], alpha=float(a["negative_slope"]))


@lowers(aten.gelu.default, dtypes=FLOAT32, check=lambda a: a["approximate"] in ("none", "tanh"))
def _gelu(g: GraphBuilder, a: NodeArgs) -> str:
    """ONNX Gelu from opset 20; before it, the formula (which ONNX Runtime fuses back into one kernel)."""
    x = g.tensor(a["self"])
    if g.opset >= 20:
        return g.emit("Gelu", [x], approximate=a["approximate"])
    dtype = a.out_dtype
    if a["approximate"] == "tanh":
        cube = g.emit("Mul", [g.emit("Mul", [x, x]), x])
        inner = g.emit("Add", [x, g.emit("Mul", [cube, g.scalar(0.044715, dtype)])])
        t = g.emit("Tanh", [g.emit("Mul", [inner, g.scalar(math.sqrt(2 / math.pi), dtype)])])
    else:
        t = g.emit("Erf", [g.emit("Div", [x, g.scalar(math.sqrt(2), dtype)])])
    one_plus = g.emit("Add", [t, g.scalar(1.0, dtype)])
    return g.emit("Mul", [g.emit("Mul", [x, one_plus]), g.scalar(0.5, dtype)])
