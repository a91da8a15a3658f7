"""Give contiguous strides to outputs whose strides no dim order describes.

A functional op may record the strides of a view it was traced through: the
``copy`` that slice assignment (``x[:, 2:4] = y``) becomes has the strides of
the slice, ``full_like`` those of a strided input. Out-variant kernels write
plain dense buffers, so such a value is simply a contiguous tensor of the same
shape and dtype.
"""

from __future__ import annotations

import torch

from torchedge.exir.pass_base import PassBase, PassResult
from torchedge.exir.tensor_spec import describable_by_dim_order

__all__ = ["DenseOutputsPass"]


def _strided(val) -> bool:
    return isinstance(val, torch.Tensor) and not describable_by_dim_order(val)


def _contiguous(val: torch.Tensor) -> torch.Tensor:
    with val.fake_mode:
        return torch.empty(val.shape, dtype=val.dtype, device=val.device)


class DenseOutputsPass(PassBase):
    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        modified = False
        for node in graph_module.graph.nodes:
            val = node.meta.get("val")
            values = list(val) if isinstance(val, (tuple, list)) else [val]
            if node.op != "call_function" or not any(_strided(v) for v in values):
                continue
            dense = [_contiguous(v) if _strided(v) else v for v in values]
            node.meta["val"] = type(val)(dense) if isinstance(val, (tuple, list)) else dense[0]
            modified = True
        return PassResult(graph_module, modified)
