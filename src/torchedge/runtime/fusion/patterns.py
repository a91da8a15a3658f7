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
from torchedge.runtime.fusion.dataflow import BEFORE_RUN, Dataflow
from torchedge.runtime.fusion.matching import PLAIN_COPIES, overlaps, plain_copy, replaceable
from torchedge.runtime.steps import KERNEL, Step
from torchedge.schema.program import TensorList

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
        if producer is not None:
            return producer == self.flow.producer(b.pc, b.value)
        # bytes no step wrote (an input, a constant): the same bytes, unwritten before either read
        unwritten = ((), (BEFORE_RUN,))
        sources = self.flow.sources(a.pc, a.value), self.flow.sources(b.pc, b.value)
        return sources[0] == sources[1] and sources[0] in unwritten and self.flow.same_bytes(a.value, b.value)

    def item(self, ref: Read) -> tuple | None:
        producer = self.producer(ref)
        out = MISSING if producer is None else self.argument(producer, "out")
        schema = None if out is MISSING else self.flow.values.schema[out.value]
        if not isinstance(schema, TensorList) or ref.value not in schema.items:
            return None
        return producer, list(schema.items).index(ref.value)

    def order(self, pc) -> int:
        return pc

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
    for candidate in rule.candidates(found):
        roots = [pc, *(candidate.nodes[n] for n in rule.results if n in candidate.nodes)]
        group = set(candidate.group)
        fused = _fused_step(rule, flow, rule.operator(candidate), rule.arguments(candidate), roots, group)
        if fused is not None:
            call, args, result = fused
            return [(group, Step(KERNEL, call, args, result, rule.describe(candidate)))]
    return []


def _outs(names) -> list[str]:
    """The names of an out variant's outs: ``out``, or ``out0``, ``out1``, ..."""
    return [n for n in names if n == "out" or (n.startswith("out") and n[3:].isdigit())]


def _fused_step(rule: Rule, flow: Dataflow, fused: str, arguments: dict, roots: list[int], group: set[int]):
    """(the call, its arguments, its result) of the step running ``fused``'s kernel on
    ``arguments`` into the results (their ``out``) of ``roots``, the nodes whose results it
    computes: the pattern's root, then the rule's ``results``."""
    op = f"{fused}.out"
    outs = _outs(_argument_names(op))
    names = [n for n in _argument_names(op) if n not in outs]
    if set(arguments) != set(names) or len(outs) != len(roots):
        raise TypeError(f"rule {rule.name!r} gives {sorted(arguments)} and {len(roots)} results, {op} takes {names}")
    results = [StepGraph(flow).argument(root, "out").value for root in roots]
    table = flow.values.values
    reads = [arguments[n] for n in names if isinstance(arguments[n], Read)]
    if not replaceable(flow, group, list(zip(roots, results)), [tuple(r) for r in reads]):
        return None
    call = [table[arguments[n].value] if isinstance(arguments[n], Read) else arguments[n] for n in names]
    try:
        shapes = output_shapes(op, [*call, *(table[r] for r in results)])
    except TorchEdgeError:
        return None  # arguments the kernel refuses: the steps run as written, their kernels judge them
    for shape, result in zip(shapes, results):
        if math.prod(shape) != table[result].size or any(table[r.value].dtype != table[result].dtype for r in reads):
            return None
    guarded = [arguments[n].value for n in names if isinstance(arguments[n], Read) and n not in rule.reads_first]
    outputs = []
    for shape, result in zip(shapes, results):
        scratch = np.empty(shape, table[result].dtype) if overlaps(flow, result, guarded) else None
        outputs.append((tuple(shape), scratch))
    literals = {n: v for n, v in arguments.items() if not isinstance(v, Read)}
    try:
        kernel = _Kernel(get_kernel(op).fn, tuple(names), tuple(outs), literals, tuple(outputs), call, results, table)
    except TorchEdgeError:
        return None  # the kernel's own checks refuse what its shape function let through
    return kernel, (*(r.value for r in reads), *results), results[0]


class _Kernel:
    """The fused step's call: the tensors read (in the kernel's order), then the outs; the
    literal arguments are fixed at load. A kernel with a ``prepare`` (see
    `torchedge.kernels.optimized.fused.prepared`) has its checks run once, here: the buffers of
    a fused step are fixed at load, so every run has the shapes and dtypes checked."""

    def __init__(self, fn, names: tuple, outs: tuple, literals: dict, outputs: tuple, call: list, results, table):
        parameters = list(inspect.signature(fn).parameters)[: len(names) + len(outs)]
        if parameters != [*names, *outs]:
            raise TypeError(f"kernel {fn.__name__} takes {parameters}, the schema {[*names, *outs]}")
        self.template = [literals.get(n) for n in names] + [None] * len(outs)
        self.slots = [k for k, n in enumerate(names) if n not in literals]
        self.outputs = outputs  # (shape, scratch or None) per out
        if all(scratch is None and table[r].shape == shape for r, (shape, scratch) in zip(results, outputs)):
            self.slots += range(len(names), len(names) + len(outs))  # the outs as they are: no reshape, no scratch
            self.outputs = ()
        prepare = getattr(fn, "prepare", None)
        tensors = [a for n, a in zip(names, call) if n not in literals]
        self.fn = fn if prepare is None else prepare(*self._arguments([*tensors, *(table[r] for r in results)]))

    def _arguments(self, arrays) -> list:
        arguments = self.template.copy()
        for slot, array in zip(self.slots, arrays):
            arguments[slot] = array
        if self.outputs:
            first = len(self.template) - len(self.outputs)
            for k, (out, (shape, scratch)) in enumerate(zip(arrays[len(self.slots) :], self.outputs)):
                arguments[first + k] = (
                    scratch if scratch is not None else out if out.shape == shape else out.reshape(shape)
                )
        return arguments

    def __call__(self, *arrays) -> None:
        self.fn(*self._arguments(arrays))
        if self.outputs:
            for out, (shape, scratch) in zip(arrays[len(self.slots) :], self.outputs):
                if scratch is not None:
                    np.copyto(out.reshape(shape), scratch)
