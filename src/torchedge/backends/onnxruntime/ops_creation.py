"""Operators that create tensors from literals (full, full_like, scalar_tensor, arange): emitted as constants.

Shapes are static, so these are evaluated once, here, with PyTorch itself.
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


@lowers(aten.full.default, aten.full_like.default, aten.scalar_tensor.default, aten.arange.start_step)
def _evaluated(g: GraphBuilder, a: NodeArgs) -> str:
    node = a.node
    args = torch.fx.node.map_arg(node.args, _placeholder_value)
    kwargs = torch.fx.node.map_arg(node.kwargs, _placeholder_value)
    with torch.no_grad():
        value = node.target(*args, **kwargs)
    return g.constant(value.numpy(), hint=node.name)
