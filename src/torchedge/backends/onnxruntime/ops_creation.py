"""Operators that create tensors from literals (full, full_like, scalar_tensor, arange): emitted as constants.

Static shapes are evaluated once, here, with PyTorch itself; ``full_like`` of a tensor with a
symbolic size is its fill value expanded to that tensor's shape at run time.
`to_edge` usually folds them already; they remain when ``fold_constants`` is off.
"""

from __future__ import annotations

import torch

from torchedge.backends.onnxruntime.builder import GraphBuilder
from torchedge.backends.onnxruntime.registry import NodeArgs, lowers

__all__: list[str] = []  # translations register themselves; nothing to import

aten = torch.ops.aten


def _placeholder_value(node: torch.fx.Node) -> torch.Tensor:
    """A real tensor shaped like ``node``'s value (``full_like`` reads only its shape and dtype)."""
    val = node.meta["val"]
    return torch.zeros([int(s) for s in val.shape], dtype=val.dtype)


@lowers(aten.full_like.default, dynamic_rows=True)
def _full_like(g: GraphBuilder, a: NodeArgs) -> str:
    """A constant for a static shape; the fill value expanded to the input's shape for a symbolic one."""
    if all(isinstance(s, int) for s in a.out.shape):
        return _evaluated(g, a)
    fill = g.scalar(a["fill_value"], a.out_dtype)
    return g.emit("Expand", [fill, g.emit("Shape", [g.tensor(a["self"])])])


@lowers(aten.full.default, aten.scalar_tensor.default, aten.arange.start_step)
def _evaluated(g: GraphBuilder, a: NodeArgs) -> str:
    node = a.node
    args = torch.fx.node.map_arg(node.args, _placeholder_value)
    kwargs = torch.fx.node.map_arg(node.kwargs, _placeholder_value)
    with torch.no_grad():
        value = node.target(*args, **kwargs)
    return g.constant(value.numpy(), hint=node.name)
