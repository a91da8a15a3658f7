"""Elementwise operators: the output has the broadcast shape of every tensor input.

One function serves them all, unary, binary and ternary alike: Python numbers (the
``.Scalar`` overloads, alpha, clamp's bounds) take no part in broadcasting, and a
``Tensor?`` bound left out is None. The out is the kernel's last argument.
"""

from __future__ import annotations

from torchedge.kernels.shapes.common import broadcast_shapes, tensor_shapes
from torchedge.kernels.shapes.registry import register_named

__all__ = ["broadcast_inputs"]

_UNARY = ["neg", "abs", "sign", "ceil", "floor", "round", "trunc", "bitwise_not", "sqrt", "rsqrt", "reciprocal",
          "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "asin", "acos", "atan", "sinh",
          "cosh", "tanh", "asinh", "acosh", "atanh", "sigmoid", "erf", "erfinv", "logical_not", "isnan", "isinf",
          "relu", "hardtanh", "gelu", "elu", "leaky_relu", "hardsigmoid", "hardswish", "silu", "logit"]

_BINARY = ["add", "sub", "mul", "div", "atan2", "maximum", "minimum", "logical_and", "logical_or", "logical_xor",
           "floor_divide"]

_OTHERS = [
    "aten::round.decimals_out",
    "aten::add.Scalar_out", "aten::sub.Scalar_out", "aten::rsub.Scalar_out", "aten::mul.Scalar_out",
    "aten::div.Scalar_out", "aten::div.out_mode", "aten::div.Scalar_mode_out", "aten::floor_divide.Scalar_out",
    "aten::fmod.Tensor_out", "aten::fmod.Scalar_out",
    "aten::remainder.Tensor_out", "aten::remainder.Scalar_out", "aten::remainder.Scalar_Tensor_out",
    "aten::pow.Tensor_Tensor_out", "aten::pow.Tensor_Scalar_out", "aten::pow.Scalar_out",
    *(f"aten::bitwise_{name}.{overload}_out" for name in ("and", "or", "xor") for overload in ("Tensor", "Scalar")),
    *(f"aten::{name}.{overload}_out" for name in ("eq", "ne", "lt", "le", "gt", "ge")
      for overload in ("Tensor", "Scalar")),
    "aten::clamp.out", "aten::clamp.Tensor_out", "aten::where.self_out",
    "aten::masked_fill.Scalar_out",  # self with the mask broadcast into it (ATen's expand_outplace)
]

ELEMENTWISE = tuple(f"aten::{name}.out" for name in _UNARY + _BINARY) + tuple(_OTHERS)


@register_named(*ELEMENTWISE)
def broadcast_inputs(op: str, *args) -> list[tuple]:
    return [broadcast_shapes(op, *tensor_shapes(args[:-1]))]
