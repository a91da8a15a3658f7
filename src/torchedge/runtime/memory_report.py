"""What a `.pte` method's memory plan looks like: sizes, lifetimes, lower bound, utilisation.

Read from the program alone (no execution): a planned tensor lives from the
first to the last instruction that names it (inputs from the start, outputs to
the end); the lower bound of a memory id is the most bytes live at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from torchedge.runtime.tensor_view import dtype_of
from torchedge.schema.program import DelegateCall, KernelCall, OptionalTensorList, Tensor, TensorList

__all__ = ["PlannedTensor", "MemoryUsage", "memory_report"]


@dataclass(frozen=True)
class PlannedTensor:
    value_index: int
    mem_id: int
    offset: int
    nbytes: int
    start: int  # instruction index; -1 = before the first instruction (inputs)
    end: int  # inclusive; len(instructions) = after the last one (outputs)


@dataclass
class MemoryUsage:
    mem_id: int
    size: int
    lower_bound: int
    tensors: list[PlannedTensor] = field(default_factory=list)

    @property
    def utilisation(self) -> float:
        """Lower bound / planned size: 1.0 means no plan could use fewer bytes."""
        return self.lower_bound / self.size if self.size else 1.0


def _referenced(args, values) -> set[int]:
    """Value indices an instruction touches, looking through tensor lists."""
    seen = set()
    for i in args:
        seen.add(i)
        val = values[i].val
        if isinstance(val, (TensorList, OptionalTensorList)):
            seen.update(j for j in val.items if j >= 0)
    return seen


def _lifetimes(plan) -> dict[int, list[int]]:
    instructions = plan.chains[0].instructions if plan.chains else []
    spans: dict[int, list[int]] = {i: [-1, -1] for i in plan.inputs or []}
    for pc, instruction in enumerate(instructions):
        args = instruction.instr_args
        if isinstance(args, (KernelCall, DelegateCall)):
            for i in _referenced(args.args, plan.values):
                span = spans.setdefault(i, [pc, pc])
                span[1] = pc
    for i in plan.outputs or []:
        spans.setdefault(i, [len(instructions), len(instructions)])[1] = len(instructions)
    return spans


def _peak(tensors: list[PlannedTensor]) -> int:
    """Most bytes live at once, counting bytes shared by views once."""
    best = 0
    for step in sorted({t.start for t in tensors}):
        ranges = sorted((t.offset, t.offset + t.nbytes) for t in tensors if t.start <= step <= t.end)
        live, cursor = 0, 0
        for lo, hi in ranges:
            lo = max(lo, cursor)
            if hi > lo:
                live += hi - lo
                cursor = hi
        best = max(best, live)
    return best


def memory_report(plan) -> list[MemoryUsage]:
    """One `MemoryUsage` per planned memory id of an `ExecutionPlan`."""
    sizes = list(plan.non_const_buffer_sizes or [0])[1:]
    usage = [MemoryUsage(mem_id, size, 0) for mem_id, size in enumerate(sizes, start=1)]
    for index, (start, end) in _lifetimes(plan).items():
        t = plan.values[index].val
        if not isinstance(t, Tensor) or t.allocation_info is None:
            continue
        a = t.allocation_info
        if not 1 <= a.memory_id <= len(usage):
            continue
        nbytes = int(np.prod(t.sizes or [], dtype=np.int64)) * dtype_of(t.scalar_type, plan.name).itemsize
        offset = a.memory_offset_low | (a.memory_offset_high << 32)
        usage[a.memory_id - 1].tensors.append(PlannedTensor(index, a.memory_id, offset, nbytes, start, end))
    for u in usage:
        u.lower_bound = _peak(u.tensors)
    return usage
