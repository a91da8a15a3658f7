"""Plain copies whose source nothing else reads: the step that wrote the source writes the copy's
destination instead, and the copy becomes a no-op.

ExecuTorch's lowerings leave identity copies between steps (an ``expand_copy`` to the shape its
input has, a ``clone`` to the layout it has) that no fusion rule takes: after a kernel that
scales attention's queries, or after a delegate, before the next delegate reads the copy. A copy
of ``x`` into ``y`` (the same shape, dtype and strides: the same bytes) goes when

* one kernel (not a fused step) or delegate wrote all of ``x``, naming it once among its
  arguments and not reading it (a delegate says which arguments it reads), and the copy is the
  only step that reads what it wrote;
* no step from that producer up to the copy reads or writes ``y``'s bytes (the producer now
  writes them earlier), nor writes anything else over them, and no fused step lies in between
  (a fused step may write more than its result);
* its span overlaps that of no copy elided before it whose destination overlaps ``y``.

The producer then writes the bits the copy wrote, into the same bytes: every later reader sees
what it saw.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from torchedge.kernels.registry import op_traits
from torchedge.runtime.fusion.dataflow import Dataflow
from torchedge.runtime.steps import DELEGATE, KERNEL, NOP, Step
from torchedge.runtime.validation import writes_self

__all__ = ["elide_copies", "PLAIN_COPIES"]

PLAIN_COPIES = frozenset(
    {
        "aten::expand_copy.out",
        "aten::clone.out",
        "aten::alias_copy.out",
        "dim_order_ops::_clone_dim_order.out",
        "aten::_to_copy.out",
        "dim_order_ops::_to_dim_order_copy.out",
    }
)
_FUSED = "fused at load"  # in the label of every step `fuse_steps` made


def elide_copies(flow: Dataflow) -> list[Step]:
    """``flow``'s steps with each copy the rules above allow replaced by its producer's write."""
    steps = list(flow.steps)
    done: list[tuple[int, int, int]] = []  # (producer, copy, destination) of each elided copy
    used: set[int] = set()
    for pc, step in enumerate(flow.steps):
        if step.kind != KERNEL or step.label not in PLAIN_COPIES or pc in used:
            continue
        source, destination = step.args[0], step.ret
        producer = _producer(flow, pc, source, destination)
        if producer is None or producer in used:
            continue
        if any(p <= pc and producer <= c and _overlap(flow, destination, y) for p, c, y in done):
            continue
        done.append((producer, pc, destination))
        used.update((producer, pc))
        writer = steps[producer]
        args = tuple(destination if i == source else i for i in writer.args)
        steps[producer] = replace(writer, args=args, ret=destination if writer.ret == source else writer.ret)
        steps[pc] = Step(NOP, label=f"{step.label} (written by instruction {producer})")
    return steps


def _producer(flow: Dataflow, pc: int, source: int, destination: int) -> int | None:
    """The step that may write ``destination`` in place of the copy at ``pc``, if one may."""
    table = flow.values.values
    x, y = table[source], table[destination]
    if not (isinstance(x, np.ndarray) and isinstance(y, np.ndarray)):
        return None
    if x.shape != y.shape or x.dtype != y.dtype or x.strides != y.strides or not flow.planned(destination):
        return None
    producer = flow.producer(pc, source)
    if producer is None or flow.readers(producer, source) != {pc}:
        return None
    writer = flow.steps[producer]
    if writer.kind == KERNEL:
        traits = op_traits(writer.label)
        if (
            _FUSED in writer.label
            or writer.ret != source
            or traits.written_arg is not None
            or writes_self(writer.label)
        ):
            return None
    elif writer.kind != DELEGATE or source not in flow.tensors(writer)[1]:
        return None
    if any(r.value == source for r in flow.reads[producer]):  # a delegate that may read its outputs first
        return None
    if writer.args.count(source) != 1:
        return None
    bytes_of_y = flow.access(destination)
    if any(w.value != source and w.overlaps(bytes_of_y) for w in flow.writes[producer]):
        return None
    for between in range(producer, pc):
        if between > producer and (
            _FUSED in flow.steps[between].label or any(w.overlaps(bytes_of_y) for w in flow.writes[between])
        ):
            return None
        if any(r.overlaps(bytes_of_y) for r in flow.reads[between]):
            return None
    return producer


def _overlap(flow: Dataflow, a: int, b: int) -> bool:
    return flow.access(a).overlaps(flow.access(b))
