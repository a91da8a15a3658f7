"""ETDump run data grouped into event blocks: one event per instruction with its timings over runs.

Consecutive run data blocks with the same name and the same events (repeated runs of one
method) form one `EventBlock`; each `Event` collects its duration in every run (`PerfData`)
and the value the instruction wrote in the last run. ``OPERATOR_CALL`` events, which repeat
their ``native_call_*`` event, are dropped.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

import numpy as np

from torchedge.schema import etdump as ed
from torchedge.serialize.debug_buffer import read_tensor

__all__ = ["PerfData", "Event", "EventBlock", "event_blocks", "TIME_SCALES"]

# Nanoseconds per unit.
TIME_SCALES = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_OPERATOR_PREFIX = "native_call_"


@dataclass
class PerfData:
    """Durations of one event over the runs of its block, in the inspector's time unit."""

    raw: list[float]

    @property
    def p10(self) -> float:
        return float(np.percentile(self.raw, 10))

    @property
    def p50(self) -> float:
        return float(np.percentile(self.raw, 50))

    @property
    def p90(self) -> float:
        return float(np.percentile(self.raw, 90))

    @property
    def avg(self) -> float:
        return statistics.fmean(self.raw)

    @property
    def min(self) -> float:
        return min(self.raw)

    @property
    def max(self) -> float:
        return max(self.raw)


@dataclass
class Event:
    """One instruction (or span) of a block. ``debug_data``: the values it wrote in the block's
    last run; ``debug_handles``, ``op_types``, ``stack_traces``, ``source`` (the user's line) and
    ``module_hierarchy`` come from an ETRecord when the inspector has one."""

    name: str
    instruction_id: int | None
    perf_data: PerfData | None = None
    start_time: list[int] = field(default_factory=list)
    debug_data: list = field(default_factory=list)
    is_delegated_op: bool = False
    delegate_backend_name: str | None = None
    delegate_debug_identifier: int | str | None = None  # set on a delegate's own (internal) events
    debug_handles: tuple[int, ...] = ()
    op_types: list[str] = field(default_factory=list)
    stack_traces: dict[str, str] = field(default_factory=dict)
    source: str | None = None
    module_hierarchy: list[str] = field(default_factory=list)  # the nn.Module path, outermost first

    @property
    def operator(self) -> str | None:
        """``addmm.out`` for a kernel call's event, None for spans and delegate calls."""
        return self.name.removeprefix(_OPERATOR_PREFIX) if self.name.startswith(_OPERATOR_PREFIX) else None

    @property
    def label(self) -> str:
        """The event's row in tables: its name, with the delegate it belongs to for a delegate call
        (``DELEGATE_CALL XnnpackBackend (instruction 3)``) or a delegate's own event
        (``Gemm_0 (OnnxRuntimeBackend, instruction 3)``), so that each delegate has rows of its own."""
        if not self.is_delegated_op or self.instruction_id is None:
            return self.name
        backend = self.delegate_backend_name
        if self.delegate_debug_identifier is None:  # the call itself
            return " ".join(filter(None, [self.name, backend, f"(instruction {self.instruction_id})"]))
        return f"{self.name} ({backend + ', ' if backend else ''}instruction {self.instruction_id})"


@dataclass
class EventBlock:
    """The events of one or more identical runs (or of loading)."""

    name: str
    events: list[Event]
    runs: int = 1
    allocations: dict[str, int] = field(default_factory=dict)  # allocator -> bytes, in the last run
    run_output: list = field(default_factory=list)  # the method's outputs, when the dump logged them


def _value(entry: ed.Value | None, buffer: bytes | memoryview | None):
    if entry is None:
        return None
    kind = entry.val
    if kind == ed.ValueType.TENSOR and entry.tensor is not None:
        return None if buffer is None else read_tensor(buffer, entry.tensor)
    if kind == ed.ValueType.TENSOR_LIST and entry.tensor_list is not None:
        return None if buffer is None else [read_tensor(buffer, t) for t in entry.tensor_list.tensors]
    if kind == ed.ValueType.INT and entry.int_value is not None:
        return entry.int_value.int_val
    if kind == ed.ValueType.BOOL and entry.bool_value is not None:
        return entry.bool_value.bool_val
    if kind == ed.ValueType.DOUBLE and entry.double_value is not None:
        return entry.double_value.double_val
    if kind == ed.ValueType.FLOAT and entry.float_value is not None:
        return entry.float_value.float_val
    return None


def _signature(run: ed.RunData) -> tuple:
    return (run.name, tuple((e.profile_event.name, e.profile_event.instruction_id) for e in _profiles(run)))


def _profiles(run: ed.RunData) -> list:
    return [e for e in run.events or [] if e.profile_event is not None and e.profile_event.name != "OPERATOR_CALL"]


def _block(runs: list[ed.RunData], buffer, scale: int) -> EventBlock:
    events = []
    for position, event in enumerate(_profiles(runs[0])):
        profile = event.profile_event
        timings = [_profiles(run)[position].profile_event for run in runs]
        instruction = profile.instruction_id if profile.chain_index >= 0 else None
        identifier = profile.delegate_debug_id_str or (
            profile.delegate_debug_id_int if profile.delegate_debug_id_int not in (None, -1) else None
        )
        events.append(
            Event(
                name=profile.name,
                instruction_id=instruction,
                perf_data=PerfData([(t.end_time - t.start_time) / scale for t in timings]),
                start_time=[t.start_time for t in timings],
                is_delegated_op=profile.name == "DELEGATE_CALL" or identifier is not None,
                delegate_debug_identifier=identifier,
            )
        )
    by_instruction = {
        e.instruction_id: e for e in events if e.instruction_id is not None and e.delegate_debug_identifier is None
    }
    allocations: dict[str, int] = {}
    outputs = []
    last = runs[-1]
    names = [a.name for a in last.allocators or []]
    for event in last.events or []:
        debug = event.debug_event
        if debug is not None and debug.debug_entry is not None and debug.debug_entry.output is not None:
            outputs.append(_value(debug.debug_entry, buffer))
        elif debug is not None and debug.instruction_id in by_instruction:
            by_instruction[debug.instruction_id].debug_data.append(_value(debug.debug_entry, buffer))
        allocation = event.allocation_event
        if allocation is not None and 0 <= allocation.allocator_id < len(names):
            name = names[allocation.allocator_id]
            allocations[name] = allocations.get(name, 0) + allocation.allocation_size
    return EventBlock(runs[0].name or "", events, len(runs), allocations, outputs)


def event_blocks(etdump: ed.ETDump, debug_buffer: bytes | memoryview | None = None, unit: str = "ms") -> list:
    """The ETDump's run data as `EventBlock`\\ s, durations in ``unit`` (ns, us, ms or s)."""
    scale = TIME_SCALES[unit]
    groups: list[list[ed.RunData]] = []
    for run in etdump.run_data or []:
        if groups and _signature(groups[-1][0]) == _signature(run):
            groups[-1].append(run)
        else:
            groups.append([run])
    return [_block(group, debug_buffer, scale) for group in groups]
