"""The pass contract: ``call(graph_module) -> PassResult(graph_module, modified)``.

torchedge passes are `torch.fx` passes: subclasses of `PassBase` (``requires ->
call -> ensures``). A plain callable taking and returning a graph module (or a
`PassResult`) is accepted too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch.fx.passes.infra.pass_base import PassBase, PassResult

__all__ = ["PassBase", "PassResult", "run_passes"]


def run_passes(graph_module: torch.fx.GraphModule, passes: Sequence[Callable]) -> torch.fx.GraphModule:
    """Run ``passes`` in order; each one sees the previous one's result."""
    for p in passes:
        result = p(graph_module)
        if isinstance(result, PassResult):
            graph_module = result.graph_module
        elif isinstance(result, torch.fx.GraphModule):
            graph_module = result
        graph_module.graph.lint()
        graph_module.recompile()
    return graph_module
