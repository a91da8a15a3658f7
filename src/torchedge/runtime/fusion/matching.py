"""What the load-time fusion rules share: the proof that a group of steps can run as one
(`replaceable`), and a walk back through a group's producers (`Match`)."""

from __future__ import annotations

import numpy as np

from torchedge.runtime.fusion.dataflow import Dataflow
from torchedge.runtime.steps import NOP

__all__ = ["PLAIN_COPIES", "Match", "behind_copies", "overlaps", "plain_copy", "replaceable", "value_of"]


def value_of(flow: Dataflow, index: int):
    return flow.values.values[index]


def labelled_producer(flow: Dataflow, pc: int | None, position: int, labels) -> int | None:
    """The one step that wrote exactly what argument ``position`` of step ``pc`` reads, when it
    is labelled ``labels`` (one label or a tuple of them)."""
    if pc is None:
        return None
    producer = flow.producer(pc, flow.steps[pc].args[position])
    if producer is None or flow.steps[producer].label not in ((labels,) if isinstance(labels, str) else labels):
        return None
    return producer


def replaceable(flow: Dataflow, group: set[int], outputs: list[tuple[int, int]], inputs: list[tuple[int, int]]) -> bool:
    """Whether ``group``'s steps can run as one step at its first position writing ``outputs``
    (the (step, value) writes of the group others may read) from ``inputs`` (the (step, value)
    reads of the group the fused kernel takes): see `torchedge.runtime.fusion`."""
    first, last = min(group), max(group)
    if any(pc not in group and flow.steps[pc].kind != NOP for pc in range(first, last + 1)):
        return False
    if any(s in group for pc, value in inputs for s in flow.sources(pc, value)):
        return False  # an input the group itself computes: not there yet at its first step
    for pc in group:
        if any((pc, w.value) not in outputs and not flow.readers(pc, w.value) <= group for w in flow.writes[pc]):
            return False
        for read in flow.reads[pc]:
            sources = flow.sources(pc, read.value)
            if any(s in group for s in sources) and not all(s in group for s in sources):
                return False
    return True


def overlaps(flow: Dataflow, output: int, inputs: list[int]) -> bool:
    """Whether ``output``'s bytes overlap any of ``inputs``' (memory planning lets a fused
    result take the place of an input that the group's first steps consumed)."""
    result = flow.access(output)
    return any(isinstance(value_of(flow, i), np.ndarray) and result.overlaps(flow.access(i)) for i in inputs)


class Match:
    """Walks a group back from its last step: each `step` names the one step that wrote exactly the
    bytes an argument reads, checked to be the operator expected; None ends the walk."""

    def __init__(self, flow: Dataflow):
        self.flow = flow
        self.group: set[int] = set()

    def step(self, pc: int | None, position: int, label: str) -> int | None:
        producer = labelled_producer(self.flow, pc, position, label)
        if producer is not None:
            self.group.add(producer)
        return producer

    def args(self, pc: int) -> list:
        return [value_of(self.flow, i) for i in self.flow.steps[pc].args]


PLAIN_COPIES = ("aten::expand_copy.out", "dim_order_ops::_clone_dim_order.out", "aten::clone.out")


def plain_copy(match: Match, pc: int) -> bool:
    """Whether step ``pc`` copies its input unchanged: an ``expand_copy`` to the input's own
    shape, or a ``clone`` / ``_clone_dim_order`` into the contiguous layout."""
    label, args = match.flow.steps[pc].label, match.args(pc)
    if label == "aten::expand_copy.out":
        source, size, implicit, _ = args
        return tuple(size) == source.shape and not implicit
    if label == "aten::clone.out":
        return args[1] is None
    _, non_blocking, dim_order, _ = args
    return non_blocking is False and (dim_order is None or tuple(dim_order) == tuple(range(args[0].ndim)))


def behind_copies(match: Match, pc: int | None, position: int) -> tuple[int, int] | None:
    """Where the one or more plain copies feeding argument ``position`` of ``pc`` start: the
    (step, argument position) that reads the tensor they copy."""
    found = None
    while pc is not None:
        producer = match.flow.producer(pc, match.flow.steps[pc].args[position])
        if producer is None or match.flow.steps[producer].label not in PLAIN_COPIES or not plain_copy(match, producer):
            break
        match.group.add(producer)
        found = pc, position = producer, 0
    return found
