"""Steps that read only constants run once, at load: their results become constants of the method.

With static shapes, the steps a program spends building attention masks and positions
(``arange``, ``full``, ``expand_copy``, comparisons, ``cumsum``, ``index``...) often read only
the program's constants and what other such steps wrote, never the method's inputs or mutable
state: every run would compute the same bits. `fold_constant_steps` finds them in a loaded
method's steps through its dataflow (`torchedge.runtime.fusion.dataflow`), runs them once in
program order, and gives each tensor a step that still runs reads from them a read-only copy of
its own, taken where that step reads it (planned memory is reused by later values, so the bytes
must move out of it). The folded steps become no-ops labelled ``(computed at load)``: they record
no events when profiled, because they do not run.

A step is folded only when

* its operator is one of torchedge's own kernels, deterministic and without side effects (no
  random or uninitialised results, no check, nothing written in place);
* every argument is a constant of the program, a number from the file (not a method input) or a
  tensor that only folded steps wrote;
* nothing reads what it writes after the run (outputs, mutable state, memory shared with other
  methods or the caller).

A tensor a running step reads from folded steps is copied only when its value index is not
written by any step that still runs, it is neither an input nor an output, every running step
reading it sees the same writes, and it is no larger than the constants it was computed from
plus ``folded_result_extra_bytes`` (`torchedge.kernels.optimized.tuning`). Where a tensor fails
these, the steps that wrote it run as written, and the search starts again without them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from torchedge.kernels.argument_kinds import written_arguments
from torchedge.kernels.optimized.tuning import tuned
from torchedge.kernels.registry import op_traits, registering_module
from torchedge.runtime.fusion.dataflow import AFTER_RUN, Dataflow
from torchedge.runtime.steps import KERNEL, NOP, Step
from torchedge.runtime.validation import writes_self
from torchedge.runtime.values import LIST_TYPES

__all__ = ["fold_constant_steps", "FOLDED"]

FOLDED = " (computed at load)"  # the label suffix of a folded step's no-op
# Operators whose results are not a function of their arguments (their memory's earlier bytes).
_UNINITIALISED = frozenset({"empty", "empty_permuted", "empty_strided", "new_empty_strided", "_empty_dim_order"})


def fold_constant_steps(flow: Dataflow, store: Callable) -> list[Step]:
    """``flow``'s steps with every step it proves constant run now and replaced by a no-op
    (``flow.steps`` itself when there is none). ``store(index, result)`` binds a kernel's returned
    value as a run does. A kernel that fails on its constants folds nothing: the run reports it."""
    folded, snapshots = _plan(flow, set(flow.inputs) | set(flow.outputs))
    if not folded:
        return flow.steps
    table, copies = flow.values.values, {}
    try:
        for pc, step in enumerate(flow.steps):
            for value in snapshots.get(pc, ()):
                copies[value] = _frozen(table[value])
            if pc in folded:
                result = step.fn(*[table[i] for i in step.args])
                if result is not None:
                    store(step.ret, result)
    except Exception:  # the same kernel fails in the first run, where its error names the instruction
        return flow.steps
    for value, array in copies.items():
        flow.values.set(value, array)
        flow.values.constants.add(value)
    return [Step(NOP, label=step.label + FOLDED) if pc in folded else step for pc, step in enumerate(flow.steps)]


def _plan(flow: Dataflow, boundary: set[int]) -> tuple[set[int], dict[int, list[int]]]:
    """The steps to fold, and for each running step the tensors to copy before it (those it is
    the first to read)."""
    candidates = {pc for pc, step in enumerate(flow.steps) if _candidate(flow, pc, step, boundary)}
    while True:
        folded, cones = _closure(flow, candidates)
        snapshots, refused = _frontier(flow, folded, cones, boundary)
        if not refused:
            return folded, snapshots
        candidates -= refused


def _candidate(flow: Dataflow, pc: int, step: Step, boundary: set[int]) -> bool:
    """Whether ``step`` may be folded whatever the steps before it do."""
    if step.kind != KERNEL or not _deterministic(step.label):
        return False
    traits = op_traits(step.label)
    if traits.checks_only or traits.written_arg is not None or writes_self(step.label):
        return False
    table, schema = flow.values.values, flow.values.schema
    items = [i for a in step.args for i in (schema[a].items if isinstance(schema[a], LIST_TYPES) else (a,))]
    if any(i in boundary for i in items):  # a method input (scalars included) or output
        return False
    read, written = flow.tensors(step)
    if not all(flow.planned(i) or i in flow.values.constants or not table[i].size for i in read):
        return False
    if not written or not all(flow.planned(i) for i in written):
        return False
    return not any(AFTER_RUN in flow.readers(pc, a.value) for a in flow.writes[pc])


def _deterministic(label: str) -> bool:
    module = registering_module(label)
    if not module.startswith("torchedge.kernels.") or module.rsplit(".", 1)[-1].startswith("random"):
        return False
    return label.split("::")[-1].split(".")[0] not in _UNINITIALISED


def _closure(flow: Dataflow, candidates: set[int]) -> tuple[set[int], dict[int, set[int]]]:
    """The candidates whose every read sees only folded writes, in program order, and for each
    the constants it is computed from."""
    folded: set[int] = set()
    cones: dict[int, set[int]] = {}
    for pc in sorted(candidates):
        sources = {s for a in flow.reads[pc] for s in flow.sources(pc, a.value)}
        if sources <= folded:
            folded.add(pc)
            read, _ = flow.tensors(flow.steps[pc])
            cones[pc] = {i for i in read if i in flow.values.constants}.union(*(cones[s] for s in sources))
    return folded, cones


def _frontier(
    flow: Dataflow, folded: set[int], cones: dict[int, set[int]], boundary: set[int]
) -> tuple[dict[int, list[int]], set[int]]:
    """Where to copy each tensor running steps read from folded ones, and the folded steps whose
    results cannot be copied (to run as written)."""
    running = [pc for pc in range(len(flow.steps)) if pc not in folded]
    written_at_run = {a.value for pc in running for a in flow.writes[pc]}.union(
        *(_written_arguments(flow, flow.steps[pc]) for pc in running)
    )
    table, extra = flow.values.values, tuned("folded_result_extra_bytes")
    seen: dict[int, tuple[int, ...]] = {}
    copied: set[int] = set()
    snapshots: dict[int, list[int]] = {}
    refused: set[int] = set()
    for pc in running:
        for access in flow.reads[pc]:
            value, sources = access.value, flow.sources(pc, access.value)
            made = [s for s in sources if s in folded]
            if not made:
                continue
            constants = set().union(*(cones[s] for s in made))
            limit = sum(table[c].nbytes for c in constants) + extra
            if (
                len(made) != len(sources)
                or value in written_at_run
                or value in boundary
                or table[value].nbytes > limit
                or seen.setdefault(value, sources) != sources
            ):
                refused.update(made)
            elif value not in copied:
                copied.add(value)
                snapshots.setdefault(pc, []).append(value)
    return snapshots, refused


def _written_arguments(flow: Dataflow, step: Step) -> set[int]:
    """The tensors a running kernel writes besides its outs, which the dataflow does not see: the
    arguments its schema marks written (``rrelu_with_noise``'s ``noise``), or every tensor argument
    of an operator the schema table does not know."""
    if step.kind != KERNEL:
        return set()
    positions = written_arguments(step.label)
    if positions is None:
        return set(flow.tensors(step)[0])
    schema = flow.values.schema
    args = [step.args[i] for i in positions if i < len(step.args)]
    return {i for a in args for i in (schema[a].items if isinstance(schema[a], LIST_TYPES) else (a,)) if i >= 0}


def _frozen(array: np.ndarray) -> np.ndarray:
    """A read-only copy of ``array`` in memory of its own, in the same memory layout."""
    copy = np.array(array, order="K", copy=True)
    copy.flags.writeable = False
    return copy
