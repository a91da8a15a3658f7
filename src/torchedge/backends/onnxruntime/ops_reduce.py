"""Reductions (mean, sum, amax, amin, any) and cumsum; ``all`` reaches the Edge dialect as ``any``."""

from __future__ import annotations

import torch

from torchedge.backends.onnxruntime.builder import GraphBuilder
from torchedge.backends.onnxruntime.registry import FLOATS, NUMERIC, NodeArgs, lowers

__all__ = ["reduce", "reduced_axes"]  # the translations register themselves

aten = torch.ops.aten


def reduced_axes(a: NodeArgs) -> list[int]:
    """The reduced dimensions; empty means all of them (a 0-d input has none to name)."""
    dim = a.args.get("dim")
    if dim is None or a.rank() == 0:
        return []
    return [int(d) for d in (dim if isinstance(dim, (list, tuple)) else [dim])]


def reduce(g: GraphBuilder, op_type: str, x: str, axes: list[int], keepdims: bool) -> str:
    """``op_type`` over ``axes`` (empty: all of them). ONNX reductions take their axes as an
    input from opset 18 (ReduceSum: 13), an attribute before."""
    keep = int(keepdims)
    if not axes:
        return g.emit(op_type, [x], keepdims=keep)
    if g.opset >= 18 or op_type == "ReduceSum":
        return g.emit(op_type, [x, g.int64s(axes)], keepdims=keep)
    return g.emit(op_type, [x], axes=axes, keepdims=keep)


def _reduce(g: GraphBuilder, op_type: str, x: str, a: NodeArgs) -> str:
    return reduce(g, op_type, x, reduced_axes(a), bool(a.args.get("keepdim", False)))


def _reduction(op_type: str):
    def translate(g: GraphBuilder, a: NodeArgs) -> str:
        return _reduce(g, op_type, g.tensor(a["self"], a.out_dtype), a)

    return translate


lowers(aten.mean.dim, aten.mean.default, dtypes=FLOATS, dynamic_rows=True)(_reduction("ReduceMean"))
lowers(aten.sum.dim_IntList, dtypes=NUMERIC, dynamic_rows=True)(_reduction("ReduceSum"))
lowers(aten.amax.default, dtypes=NUMERIC, dynamic_rows=True)(_reduction("ReduceMax"))
lowers(aten.amin.default, dtypes=NUMERIC, dynamic_rows=True)(_reduction("ReduceMin"))


@lowers(aten.any.dim, aten.any.dims, aten.any.default, dynamic_rows=True)
def _any(g: GraphBuilder, a: NodeArgs) -> str:
    """The maximum of the truth values taken as int32 (the output is bool, or uint8 for uint8 input)."""
    truth = g.cast(g.tensor(a["self"], torch.bool), torch.int32)
    return g.cast(_reduce(g, "ReduceMax", truth, a), a.out_dtype)


@lowers(aten.cumsum.default, dtypes=NUMERIC, check=lambda a: a.rank() >= 1, dynamic_rows=True)
def _cumsum(g: GraphBuilder, a: NodeArgs) -> str:
    return g.emit("CumSum", [g.tensor(a["self"], a.out_dtype), g.scalar(int(a["dim"]), torch.int64)])
