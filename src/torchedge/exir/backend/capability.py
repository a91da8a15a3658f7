"""Form the largest legal partitions from a per-node "is this supported" predicate.

Built on `torch.fx`'s capability-based partitioner, which merges supported
nodes greedily while never creating a cycle between a partition and the rest
of the graph.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from torchedge.exir.backend.partitioner import TAG_KEY, DelegationSpec

__all__ = ["tag_supported_partitions"]


class _Predicate(OperatorSupportBase):
    def __init__(self, is_supported: Callable[[torch.fx.Node], bool]):
        self._is_supported = is_supported

    def is_node_supported(self, submodules, node: torch.fx.Node) -> bool:
        return node.op == "call_function" and self._is_supported(node)


def tag_supported_partitions(
    graph_module: torch.fx.GraphModule,
    is_supported: Callable[[torch.fx.Node], bool],
    spec: DelegationSpec,
    prefix: str = "tag",
) -> dict[str, DelegationSpec]:
    """Tag each maximal acyclic group of supported nodes; returns tag -> spec."""
    partitioner = CapabilityBasedPartitioner(graph_module, _Predicate(is_supported), allows_single_node_partition=True)
    tags = {}
    for i, partition in enumerate(partitioner.propose_partitions()):
        tag = f"{prefix}{i}"
        for node in partition.nodes:
            node.meta[TAG_KEY] = tag
        tags[tag] = spec
    return tags
