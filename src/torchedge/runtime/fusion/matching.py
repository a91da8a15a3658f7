"""What the load-time fusion rules share: the proof that a group of steps can run as one
(`replaceable`), a step's producers, and which steps are plain copies."""

from __future__ import annotations

import numpy as np

from torchedge.runtime.fusion.dataflow import Dataflow
from torchedge.runtime.steps import NOP

__all__ = ["PLAIN_COPIES", "labelled_producer", "overlaps", "plain_copy", "replaceable", "value_of"]


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


PLAIN_COPIES = ("aten::expand_copy.out", "dim_order_ops::_clone_dim_order.out", "aten::clone.out")


def plain_copy(flow: Dataflow, pc: int) -> bool:
    """Whether step ``pc`` copies its input unchanged: an ``expand_copy`` to the input's own
    shape, or a ``clone`` / ``_clone_dim_order`` into the contiguous layout."""
    label, args = flow.steps[pc].label, [value_of(flow, i) for i in flow.steps[pc].args]
    if label == "aten::expand_copy.out":
        source, size, implicit, _ = args
        return tuple(size) == source.shape and not implicit
    if label == "aten::clone.out":
        return args[1] is None
    _, non_blocking, dim_order, _ = args
    return non_blocking is False and (dim_order is None or tuple(dim_order) == tuple(range(args[0].ndim)))
