"""The load-time adapter of `torchedge.fusion`'s rules: a loaded method's steps as a `Graph` the
pattern matcher walks, and the fused step a match becomes (the fused operator's registered kernel).

A node is a step's index; a reference is a `Read` (the step, the value index it reads), so
that the producer of a read is the one step whose write it sees (`Dataflow.producer`), however
memory planning reused the bytes. Arguments are found by their schema names
(`torchedge.kernels.argument_kinds`). A match becomes one step only where `replaceable` proves
it exact, its fused kernel's shape function gives the shape of the root step's result, and its
dtype is that result's.
"""

from __future__ import annotations

import functools
import inspect
import math
from typing import NamedTuple

import numpy as np

from torchedge.errors import TorchEdgeError
from torchedge.fusion.pattern import MISSING
from torchedge.fusion.rules import Rule
from torchedge.kernels.argument_kinds import argument_kinds
from torchedge.kernels.registry import get_kernel, has_kernel, output_shapes
from torchedge.runtime.fusion.dataflow import Dataflow
from torchedge.runtime.fusion.matching import PLAIN_COPIES, overlaps, plain_copy, replaceable
from torchedge.runtime.steps import KERNEL, Step

__all__ = ["Read", "StepGraph", "pattern_rule"]


class Read(NamedTuple):
    """What step ``pc`` reads as value ``value``."""

    pc: int
    value: int


@functools.cache
def _argument_names(label: str) -> tuple[str, ...]:
    """The schema names of operator ``label``'s arguments: from the schema table, else (a fused
    operator torch's schemas do not hold) from its kernel's parameters, which list them in order."""
    arguments = argument_kinds(label)
    if arguments is not None:
        return tuple(a.name for a in arguments)
    if not has_kernel(label):
        return ()
    return tuple(inspect.signature(get_kernel(label).fn).parameters)


class StepGraph:
    """A method's steps as a `torchedge.fusion.pattern.Graph`."""

    def __init__(self, flow: Dataflow):
        self.flow = flow

    def operator(self, pc) -> str | None:
        step = self.flow.steps[pc]
        return step.label.split(".", 1)[0] if step.kind == KERNEL else None

    def argument(self, pc, name: str):
        step = self.flow.steps[pc]
        names = _argument_names(step.label)
        return Read(pc, step.args[names.index(name)]) if name in names else MISSING

    def producer(self, ref: Read):
        producer = self.flow.producer(ref.pc, ref.value)
        return producer if producer is not None and self.flow.steps[producer].kind == KERNEL else None

    def constant(self, ref: Read):
        value = self.flow.values.values[ref.value]
        if not isinstance(value, np.ndarray):
            return value
        return value.item() if value.ndim == 0 and ref.value in self.flow.values.constants else MISSING

    def copied(self, pc):
        step = self.flow.steps[pc]
        return Read(pc, step.args[0]) if step.label in PLAIN_COPIES and plain_copy(self.flow, pc) else None

    def same(self, a: Read, b: Read) -> bool:
        if a == b:
            return True
        producer = self.flow.producer(a.pc, a.value)
        return producer is not None and producer == self.flow.producer(b.pc, b.value)

    def readers(self, pc) -> tuple:
        out = self.argument(pc, "out")
        if out is MISSING:
            return (None,)  # (several results: read, as far as a rule can tell)
        return tuple(None if r < 0 else r for r in sorted(self.flow.readers(pc, out.value)))

    def shape(self, ref: Read) -> tuple | None:
        value = self.flow.values.values[ref.value]
        return value.shape if isinstance(value, np.ndarray) else None

    def dtype(self, ref: Read) -> str | None:
        value = self.flow.values.values[ref.value]
        return value.dtype.name if isinstance(value, np.ndarray) else None


def pattern_rule(rule: Rule):
    """``rule`` as a load-time rule: ``(flow, pc) -> [(group, fused step)]``."""
    return functools.partial(_apply, rule)


def _apply(rule: Rule, flow: Dataflow, pc: int) -> list:
    if rule.arguments is None:
        return []
    found = rule.find(StepGraph(flow), pc)
    if found is None or not rule.guard(found) or not rule.pays(found):
        return []
    fused = _fused_step(rule, flow, pc, rule.arguments(found), set(found.group), rule.describe(found))
    return [] if fused is None else [(set(found.group), fused)]


def _fused_step(rule: Rule, flow: Dataflow, root: int, arguments: dict, group: set[int], label: str) -> Step | None:
    """The step calling ``rule.fused``'s kernel on ``arguments`` into the root step's result (its ``out``)."""
    op = f"{rule.fused}.out"
    names = [n for n in _argument_names(op) if n != "out"]
    if set(arguments) != set(names):
        raise TypeError(f"rule {rule.name!r} gives {sorted(arguments)}, {op} takes {names}")
    out = StepGraph(flow).argument(root, "out").value
    table = flow.values.values
    reads = [arguments[n] for n in names if isinstance(arguments[n], Read)]
    if not replaceable(flow, group, [(root, out)], [tuple(r) for r in reads]):
        return None
    result = table[out]
    call = [table[arguments[n].value] if isinstance(arguments[n], Read) else arguments[n] for n in names]
    try:
        (shape,) = output_shapes(op, [*call, result])
    except TorchEdgeError:
        return None  # arguments the kernel refuses: the steps run as written, their kernels judge them
    if math.prod(shape) != result.size or any(table[r.value].dtype != result.dtype for r in reads):
        return None
    tensors = [r.value for r in reads]
    guarded = [arguments[n].value for n in names if isinstance(arguments[n], Read) and n not in rule.reads_first]
    scratch = np.empty(shape, result.dtype) if overlaps(flow, out, guarded) else None
    kernel = _Kernel(get_kernel(op).fn, tuple(names), {n: v for n, v in arguments.items() if not isinstance(v, Read)})
    fn = functools.partial(kernel, tuple(shape), scratch)
    return Step(KERNEL, fn, (*tensors, out), out, label)


class _Kernel:
    """The fused step's call: the tensors read (in the kernel's order), then the out."""

    def __init__(self, fn, names: tuple, literals: dict):
        self.fn, self.literals = fn, literals
        self.tensors = [n for n in names if n not in literals]

    def __call__(self, shape: tuple, scratch, *arrays) -> None:
        *inputs, out = arrays
        arguments = dict(self.literals, **dict(zip(self.tensors, inputs)))
        if scratch is None:
            self.fn(**arguments, out=out.reshape(shape))
        else:
            self.fn(**arguments, out=scratch)
            np.copyto(out.reshape(shape), scratch)
