"""Which instruction wrote the bytes each instruction reads: the memory-level dataflow of a loaded method.

Memory planning lets tensors whose lifetimes do not overlap share bytes, and a view is a second
value over the same bytes, so value indices alone do not say where a tensor's contents come
from. A loaded method's tensors are NumPy views of its arenas: following the byte ranges they
cover through the straight-line instruction list gives, for every tensor an instruction reads,
the instructions whose writes it may see (its *sources*), and for every write, the
instructions that may read it (its *readers*). `torchedge.runtime.fusion` rewrites
instruction groups only where these prove the rewrite changes nothing anyone reads.

Conservative throughout: any overlap of byte ranges counts, an instruction writing part of a
tensor does not hide the writes before it, every argument of a kernel but its outs counts as
read, a delegate reads and writes every argument (unless its backend says which are its inputs:
`BackendInterface.input_count`), an operator writing one of its inputs (``written_arg``, or in
place: ``add_``) also reads it, a kernel that only checks writes nothing, and bytes someone
reads before any instruction writes them (inputs, mutable state) or that other methods share
are read again after the run (inputs aside: each run writes them anew), as are the outputs. A
write the analysis cannot see (a user's kernel writing an argument it does not return) only makes
an earlier write look read by later steps, so fusion does less, never something wrong; no read
goes unseen.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
from numpy.lib.array_utils import byte_bounds

from torchedge.kernels.registry import op_traits
from torchedge.runtime.steps import DELEGATE, KERNEL, NOP, Step
from torchedge.runtime.validation import writes_self
from torchedge.runtime.values import ValueTable
from torchedge.schema.program import OptionalTensorList, Tensor, TensorList

__all__ = ["Dataflow", "AFTER_RUN", "BEFORE_RUN"]

AFTER_RUN = -1  # the reader of outputs, mutable state and shared memory
BEFORE_RUN = -2  # the source of bytes no instruction wrote: inputs, constants, state from the last run


@dataclass(frozen=True, slots=True)
class Access:
    """One tensor an instruction reads or writes: its value index and the bytes [start, stop) it covers."""

    value: int
    start: int
    stop: int

    def overlaps(self, other: Access) -> bool:
        return self.start < other.stop and other.start < self.stop

    def covers(self, other: Access) -> bool:
        return self.start <= other.start and other.stop <= self.stop


class Dataflow:
    """The sources and readers of every tensor access of a method's steps.

    Only for methods of plain kernel, delegate and no-op steps whose tensors all have memory at
    load (`supports` says which): jumps, moves, frees and tensors resized or bound at run time
    make the byte ranges of a run unknowable at load.
    """

    def __init__(
        self, steps: list[Step], values: ValueTable, inputs: list[int], outputs: list[int], arenas: list, shared: list
    ):
        """``arenas``: the method's planned memory (only tensors there are traced: the rest is
        read-only or the caller's); ``shared``: those of them other methods read too. The
        ``inputs`` are written afresh by every run, so their bytes need not outlive one."""
        self.steps = steps
        self.values = values
        self.inputs, self.outputs = inputs, outputs
        self._layout = (values, inputs, outputs, arenas, shared)
        self._arenas = [_bounds(arena) for arena in arenas if arena.nbytes]
        self.reads = [self._accesses(self._read_values(step)) for step in steps]
        self.writes = [self._accesses(self._written_values(step)) for step in steps]
        self._sources: dict[tuple[int, int], tuple[int, ...]] = {}
        self._readers: dict[tuple[int, int], set[int]] = {}
        for pc, accesses in enumerate(self.reads):
            for access in accesses:
                self._trace(pc, access)
        after = self._accesses(outputs)
        fresh = self._accesses(inputs)  # an input's bytes, through any view of them
        after += [
            Access(-1, a.start, a.stop)
            for pc, accesses in enumerate(self.reads)
            for a in accesses
            if BEFORE_RUN in self._sources[(pc, a.value)] and not any(f.covers(a) for f in fresh)
        ]
        after += [Access(-1, *_bounds(arena)) for arena in shared if arena.nbytes]
        for access in after:
            self._trace(AFTER_RUN, access)

    @staticmethod
    def supports(steps: list[Step], values: ValueTable) -> bool:
        """Whether the byte ranges of every step's tensors are fixed at load."""
        if any(step.kind not in (KERNEL, DELEGATE, NOP) for step in steps):
            return False
        for step in steps:
            traits = op_traits(step.label) if step.kind == KERNEL else None
            if traits is not None and (traits.view or traits.returns_value or traits.data_dependent):
                return False  # rebinds a value at run time: what load sees of it would be stale
        return (
            not values.capacity
            and not values.unbounded
            and all(values.values[i] is not None for step in steps for i in _tensor_args(step, values))
        )

    # -- queries ----------------------------------------------------------------------------

    def sources(self, pc: int, value: int) -> tuple[int, ...]:
        """The steps (or `BEFORE_RUN`) whose writes the read of ``value`` at ``pc`` may see."""
        return self._sources.get((pc, value), ())

    def readers(self, pc: int, value: int) -> set[int]:
        """The steps (or `AFTER_RUN`) that may read what ``pc`` writes into ``value``."""
        return self._readers.get((pc, value), set())

    def producer(self, pc: int, value: int) -> int | None:
        """The one step that wrote all of ``value``'s bytes before ``pc`` reads them, when one did
        and wrote exactly those bytes (the tensor it wrote is ``value`` or a reshape of it)."""
        sources = self.sources(pc, value)
        if len(sources) != 1 or sources[0] < 0:
            return None
        read = self.access(value)
        written = [a for a in self.writes[sources[0]] if a.start == read.start and a.stop == read.stop]
        if not written or not _dense(self.values.values[value]):
            return None
        return sources[0] if all(_dense(self.values.values[a.value]) for a in written) else None

    def same_bytes(self, a: int, b: int) -> bool:
        """Whether values ``a`` and ``b`` cover the same bytes (one a reshape of the other)."""
        first, second = self.access(a), self.access(b)
        return (first.start, first.stop) == (second.start, second.stop)

    def access(self, value: int) -> Access:
        return Access(value, *_bounds(self.values.values[value]))

    def of(self, steps: list[Step]) -> Dataflow:
        """The dataflow of other ``steps`` over the same values and memory (after a rewrite)."""
        return Dataflow(steps, *self._layout)

    def planned(self, value: int) -> bool:
        """Whether ``value`` is a tensor in the method's planned memory (the tensors traced here)."""
        return bool(self._accesses([value]))

    def tensors(self, step: Step) -> tuple[list[int], list[int]]:
        """The tensors ``step`` takes as arguments (list items included) and those it writes."""
        return _tensor_args(step, self.values), self._written_values(step)

    # -- building ---------------------------------------------------------------------------

    def _trace(self, pc: int, read: Access) -> None:
        """Walk back from ``pc`` to the writes ``read`` may see, up to one covering all its bytes."""
        found = []
        start = len(self.steps) if pc == AFTER_RUN else pc
        for earlier in range(start - 1, -1, -1):
            hits = [w for w in self.writes[earlier] if w.overlaps(read)]
            if hits:
                found.append(earlier)
                for w in hits:
                    self._readers.setdefault((earlier, w.value), set()).add(pc)
                if any(w.covers(read) for w in hits):
                    break
        else:
            found.append(BEFORE_RUN)
        if pc != AFTER_RUN:
            self._sources[(pc, read.value)] = tuple(found)

    def _accesses(self, indices) -> list[Access]:
        """The accesses of the planned tensors among ``indices``."""
        table = self.values.values
        tensors = [i for i in dict.fromkeys(indices) if isinstance(table[i], np.ndarray) and table[i].size]
        accesses = [self.access(i) for i in tensors]
        return [a for a in accesses if any(low <= a.start and a.stop <= high for low, high in self._arenas)]

    def _written_values(self, step: Step) -> list[int]:
        if step.kind == DELEGATE:
            return _delegate_args(step, self.values, written=True)
        if step.kind != KERNEL or op_traits(step.label).checks_only:
            return []
        return _tensors_of(step.ret, self.values)

    def _read_values(self, step: Step) -> list[int]:
        if step.kind == DELEGATE:
            return _delegate_args(step, self.values, written=False)
        if step.kind != KERNEL:
            return []
        traits = op_traits(step.label)
        if traits.checks_only or traits.written_arg is not None or writes_self(step.label):
            return _tensor_args(step, self.values)
        # the outs, once each; a tensor that is also an input (``index_put.out(buffer, ..., out=buffer)``) is read
        unread = Counter(_tensors_of(step.ret, self.values))
        reads = []
        for i in reversed(_tensor_args(step, self.values)):
            if unread[i]:
                unread[i] -= 1
            else:
                reads.append(i)
        return reads


def _tensors_of(index: int, values: ValueTable) -> list[int]:
    """The tensor value indices ``index`` stands for: itself, or the items of a tensor list."""
    schema = values.schema[index]
    if isinstance(schema, (TensorList, OptionalTensorList)):
        return [i for i in schema.items if i >= 0]
    return [index] if isinstance(schema, Tensor) else []


def _tensor_args(step: Step, values: ValueTable) -> list[int]:
    return [t for i in step.args for t in _tensors_of(i, values)]


def _delegate_args(step: Step, values: ValueTable, written: bool) -> list[int]:
    """The tensors a delegate call writes (``written``) or reads: its outputs or its inputs where
    its backend says how many inputs lead its arguments (`BackendInterface.input_count`), else all."""
    backend, handle = step.delegate
    count = backend.input_count(handle)
    if count is None:
        return _tensor_args(step, values)
    args = step.args[count:] if written else step.args[:count]
    return [t for i in args for t in _tensors_of(i, values)]


def _bounds(array: np.ndarray) -> tuple[int, int]:
    low, high = byte_bounds(array)
    return int(low), int(high)


def _dense(array: np.ndarray) -> bool:
    return array.flags.c_contiguous
