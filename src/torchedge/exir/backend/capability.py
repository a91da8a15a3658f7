"""Form the largest legal partitions from a per-node "is this supported" predicate, in time and
memory linear in the graph.

Each node gets a depth: the most supported-after-unsupported steps on any path from it to the
output. A supported node's depth is its users' largest; an unsupported node's adds one for each
supported user. Depth never grows along an edge, and it drops below a supported node's wherever a
path leaves the supported nodes, so a path that leaves a group of supported nodes of one depth
can never come back to it: the supported nodes of each depth form one partition, and no two
partitions (nor a partition and the nodes left out) depend on each other both ways. Nodes join
their consumers' partition as late as the graph allows, and the partitions are as few as the
alternation of supported and unsupported nodes along the longest such path.
"""

from __future__ import annotations

import operator
from collections.abc import Callable

import torch

from torchedge.exir.backend.partitioner import TAG_KEY, DelegationSpec

__all__ = ["tag_supported_partitions"]


def tag_supported_partitions(
    graph_module: torch.fx.GraphModule,
    is_supported: Callable[[torch.fx.Node], bool],
    spec: DelegationSpec,
    prefix: str = "tag",
) -> dict[str, DelegationSpec]:
    """Tag each maximal acyclic group of supported call nodes; returns tag -> spec (tags numbered in
    graph order)."""
    nodes = list(graph_module.graph.nodes)
    supported = {node for node in nodes if node.op == "call_function" and is_supported(node)}
    depth: dict[torch.fx.Node, int] = {}
    for node in reversed(nodes):
        step = node not in supported
        depth[node] = max((depth[user] + (step and user in supported) for user in node.users), default=0)
    for node in nodes:  # a tuple element goes where its producer goes
        if node in supported and node.target is operator.getitem and node.args[0] in supported:
            depth[node] = depth[node.args[0]]
    tags: dict[int, str] = {}
    for node in nodes:
        if node in supported:
            tag = tags.setdefault(depth[node], f"{prefix}{len(tags)}")
            node.meta[TAG_KEY] = tag
    return dict.fromkeys(tags.values(), spec)
