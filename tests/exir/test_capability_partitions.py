"""`tag_supported_partitions` against its definition on random graphs: every supported call node is
tagged, nothing else is, the partitions contract to an acyclic graph, and there are never more of
them than torch.fx's capability-based partitioner (the reference greedy merger) proposes."""

from __future__ import annotations

import operator
import random

import pytest
import torch
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from torchedge.exir.backend import DelegationSpec, tag_supported_partitions
from torchedge.exir.backend.partitioner import TAG_KEY

SPEC = DelegationSpec("Test", [])


def random_graph(seed: int, size: int) -> tuple[torch.fx.GraphModule, set[str]]:
    """A random DAG of adds and muls over two inputs (each node reads one or two earlier values);
    the muls are the unsupported nodes."""
    rng = random.Random(seed)
    graph = torch.fx.Graph()
    values = [graph.placeholder("a"), graph.placeholder("b")]
    unsupported = set()
    for _ in range(size):
        args = rng.sample(values[-6:], 2) if rng.random() < 0.6 else [rng.choice(values), rng.choice(values)]
        target = operator.mul if rng.random() < 0.3 else operator.add
        node = graph.call_function(target, tuple(args))
        if target is operator.mul:
            unsupported.add(node.name)
        values.append(node)
    sinks = [v for v in values[2:] if not v.users]
    graph.output(tuple(sinks))
    return torch.fx.GraphModule(torch.nn.Module(), graph), unsupported


def partition_graph_is_acyclic(graph_module: torch.fx.GraphModule) -> bool:
    """Contract each tag to one vertex; True when the result has no cycle (Kahn's algorithm)."""
    vertex = {n: n.meta.get(TAG_KEY, n.name) for n in graph_module.graph.nodes}
    edges = {(vertex[n], vertex[u]) for n in graph_module.graph.nodes for u in n.users if vertex[n] != vertex[u]}
    indegree = dict.fromkeys(vertex.values(), 0)
    for _, target in edges:
        indegree[target] += 1
    ready = [v for v, d in indegree.items() if d == 0]
    seen = 0
    while ready:
        v = ready.pop()
        seen += 1
        for source, target in edges:
            if source == v:
                indegree[target] -= 1
                if indegree[target] == 0:
                    ready.append(target)
    return seen == len(indegree)


class _Names(OperatorSupportBase):
    def __init__(self, unsupported):
        self.unsupported = unsupported

    def is_node_supported(self, submodules, node):
        return node.op == "call_function" and node.name not in self.unsupported


@pytest.mark.parametrize("seed", range(40))
def test_random_graphs_partition_acyclically_and_no_worse_than_torch(seed):
    graph_module, unsupported = random_graph(seed, 60)
    supported = lambda node: node.name not in unsupported  # noqa: E731
    tags = tag_supported_partitions(graph_module, supported, SPEC)
    for node in graph_module.graph.nodes:
        expected = node.op == "call_function" and node.name not in unsupported
        assert (TAG_KEY in node.meta) == expected, node.name
    assert set(tags) == {n.meta[TAG_KEY] for n in graph_module.graph.nodes if TAG_KEY in n.meta}
    assert partition_graph_is_acyclic(graph_module)
    reference = CapabilityBasedPartitioner(graph_module, _Names(unsupported), allows_single_node_partition=True)
    assert len(tags) <= len(reference.propose_partitions())


def test_a_path_through_an_unsupported_node_splits_and_independent_work_merges():
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    first = graph.call_function(operator.add, (x, x))
    outside = graph.call_function(operator.mul, (first, first))
    second = graph.call_function(operator.add, (outside, x))
    beside = graph.call_function(operator.add, (x, 1))  # needs nothing from the others
    graph.output((second, beside))
    graph_module = torch.fx.GraphModule(torch.nn.Module(), graph)
    tags = tag_supported_partitions(graph_module, lambda n: n.target is operator.add, SPEC)
    assert len(tags) == 2
    assert first.meta[TAG_KEY] != second.meta[TAG_KEY]
    assert beside.meta[TAG_KEY] == second.meta[TAG_KEY]  # joins its consumers' side, as late as it can
    assert TAG_KEY not in outside.meta
