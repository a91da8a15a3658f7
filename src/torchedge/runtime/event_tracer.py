"""`EventTracer`: what a program's methods did, recorded as ETDump run data.

Tracing is off unless a program is loaded with ``enable_etdump=True``. A traced method wraps
each compiled step's call once, at load (`traced_steps`), so an untraced method runs exactly
the dispatch loop it ran before: no flag is tested per instruction.

The events follow ExecuTorch's runtime, so its `Inspector` reads torchedge's dumps as its own:

* a ``Default`` block with ``Program::load_method`` and ``Method::init`` spans (and, with
  ``track_memory``, one allocation event per planned arena);
* one ``Execute`` block per run with a ``Method::execute`` span; for every kernel call a
  ``native_call_<operator>`` (a step fused at load: ``fused_<rule>``, at its first instruction;
  `EventTracer.fused_instructions` names the instructions it replaced) and an ``OPERATOR_CALL``
  event, for every delegate call a ``DELEGATE_CALL`` event, each carrying its instruction id;
* with a debug level, the value each instruction wrote (``intermediates``) or the method's
  outputs (``outputs``) as debug events whose tensors live in the debug buffer;
* with ``track_memory``, the bytes each run allocated at run time. Allocation events are part of
  the format, but ExecuTorch 1.5.1's Inspector refuses dumps that hold them, hence opt-in.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import numpy as np

from torchedge.errors import InputError
from torchedge.runtime.fusion import replaced_instructions
from torchedge.runtime.pal import now_ns
from torchedge.runtime.steps import DELEGATE, KERNEL, RESIZING_KERNEL, Step
from torchedge.schema import etdump as ed
from torchedge.serialize.debug_buffer import DebugBufferWriter, tensor_entry
from torchedge.serialize.etdump import serialize_etdump

__all__ = ["EventTracer", "DEBUG_LEVELS", "traced_steps"]

DEBUG_LEVELS = ("none", "outputs", "intermediates")
_NO_CHAIN = (1 << 64) - 1  # DebugEvent.chain_index is unsigned: -1 as ExecuTorch writes it
_now = now_ns  # the PAL clock (`torchedge.runtime.pal.set_clock`)


class EventTracer:
    """Collects the events of one program's methods; `write` saves them as an ETDump.

    ``debug_buffer_size``: bytes for logged tensors (0: log none). ``debug_level``: ``none``,
    ``outputs`` or ``intermediates``; by default ``intermediates`` when there is a debug
    buffer, as ExecuTorch's runtime does. Values that no longer fit are counted in
    ``dropped_values``, not raised. ``track_memory``: record planned and run-time allocations.
    """

    def __init__(self, debug_buffer_size: int = 0, debug_level: str | None = None, track_memory: bool = False):
        if not isinstance(debug_buffer_size, int) or debug_buffer_size < 0:
            raise InputError(f"debug_buffer_size must be a number of bytes >= 0, got {debug_buffer_size!r}")
        level = debug_level or ("intermediates" if debug_buffer_size else "none")
        if level not in DEBUG_LEVELS:
            raise InputError(f"debug_level must be one of {', '.join(DEBUG_LEVELS)}, got {level!r}")
        if level != "none" and not debug_buffer_size:
            raise InputError(f"debug_level {level!r} logs tensors: give a debug_buffer_size > 0")
        self.debug_level = level
        self.track_memory = track_memory
        self._buffer = DebugBufferWriter(debug_buffer_size) if debug_buffer_size else None
        self._blocks: list[ed.RunData] = [ed.RunData(name="Default", allocators=[], events=[])]
        self.dropped_values = 0
        # id(handle) -> (backend, handle, instruction id, [(block, DELEGATE_CALL event)]) for each delegate
        self._delegate_calls: dict[int, tuple] = {}
        self._delegates_profiled = False
        # instruction id of a step fused at load -> (its rule, the instructions it runs in their place)
        self.fused_instructions: dict[int, tuple[str, tuple[int, ...]]] = {}

    @property
    def logs_intermediates(self) -> bool:
        return self.debug_level == "intermediates"

    @property
    def logs_outputs(self) -> bool:
        """Outputs are logged at both debug levels, as ExecuTorch's runtime logs them."""
        return self.debug_level != "none"

    # -- recording ---------------------------------------------------------------

    def begin_block(self, name: str) -> None:
        self._blocks.append(ed.RunData(name=name, allocators=[], events=[]))

    @contextlib.contextmanager
    def span(self, name: str) -> Iterator[None]:
        """A profile event around the body (load and execute spans: no instruction)."""
        start = _now()
        try:
            yield
        finally:
            self.profile(name, -1, 0, start, _now())

    def profile(self, name: str, chain_index: int, instruction_id: int, start: int, end: int) -> None:
        event = ed.ProfileEvent(
            name=name, chain_index=chain_index, instruction_id=instruction_id, start_time=start, end_time=end
        )
        self._blocks[-1].events.append(ed.Event(profile_event=event))

    def delegate_call(self, delegate: tuple, instruction_id: int, start: int, end: int) -> None:
        """A delegate call's span; the backend's own events for it are added when the dump is made."""
        self.profile("DELEGATE_CALL", 0, instruction_id, start, end)
        backend, handle = delegate
        calls = self._delegate_calls.setdefault(id(handle), (backend, handle, instruction_id, []))[3]
        calls.append((self._blocks[-1], self._blocks[-1].events[-1]))

    def _add_delegate_events(self) -> None:
        """Ask each traced delegate's backend for its own events (once: profilers such as ONNX
        Runtime's report when they stop) and place them after the calls they belong to."""
        if self._delegates_profiled:
            return
        self._delegates_profiled = True
        inserted: dict[int, list] = {}  # id(call event) -> the backend's events inside it
        for backend, handle, instruction_id, calls in self._delegate_calls.values():
            for (_, call), events in zip(calls, backend.profile(handle)):
                start = call.profile_event.start_time
                inserted[id(call)] = [
                    ed.Event(
                        profile_event=ed.ProfileEvent(
                            name=name,
                            chain_index=0,
                            instruction_id=instruction_id,
                            delegate_debug_id_str=name,
                            start_time=start + offset,
                            end_time=start + offset + duration,
                        )
                    )
                    for name, offset, duration in events
                ]
        for block in self._blocks:
            if any(id(e) in inserted for e in block.events):
                block.events = [x for e in block.events for x in [e, *inserted.get(id(e), [])]]

    def allocation(self, allocator: str, size: int) -> None:
        """One allocation of ``size`` bytes from the named allocator (a planned arena, the run's allocator)."""
        block = self._blocks[-1]
        names = [a.name for a in block.allocators]
        if allocator not in names:
            block.allocators.append(ed.Allocator(name=allocator))
            names.append(allocator)
        event = ed.AllocationEvent(allocator_id=names.index(allocator), allocation_size=int(size))
        block.events.append(ed.Event(allocation_event=event))

    def value(self, instruction_id: int, value) -> None:
        """A debug event holding what instruction ``instruction_id`` wrote (tensors go to the debug buffer)."""
        self._debug_event(0, instruction_id, self._entry(value))

    def output(self, value) -> None:
        """A debug event holding one of the method's outputs, marked as ExecuTorch marks them
        (``output`` set, chain index -1 as an unsigned number, instruction 0)."""
        entry = self._entry(value)
        if entry is not None:
            entry.output = ed.Bool(bool_val=True)
        self._debug_event(_NO_CHAIN, 0, entry)

    def _debug_event(self, chain_index: int, instruction_id: int, entry: ed.Value | None) -> None:
        if entry is not None:
            event = ed.DebugEvent(chain_index=chain_index, instruction_id=instruction_id, debug_entry=entry)
            self._blocks[-1].events.append(ed.Event(debug_event=event))

    def _entry(self, value) -> ed.Value | None:
        if isinstance(value, np.ndarray):
            tensor = self._tensor(value)
            return None if tensor is None else ed.Value(val=ed.ValueType.TENSOR, tensor=tensor)
        if isinstance(value, (list, tuple)) and all(isinstance(v, np.ndarray) for v in value):
            tensors = [t for t in map(self._tensor, value) if t is not None]
            if len(tensors) < len(value):
                return None
            return ed.Value(val=ed.ValueType.TENSOR_LIST, tensor_list=ed.TensorList(tensors=tensors))
        if isinstance(value, (bool, np.bool_)):
            return ed.Value(val=ed.ValueType.BOOL, bool_value=ed.Bool(bool_val=bool(value)))
        if isinstance(value, (int, np.integer)):
            return ed.Value(val=ed.ValueType.INT, int_value=ed.Int(int_val=int(value)))
        if isinstance(value, (float, np.floating)):
            return ed.Value(val=ed.ValueType.DOUBLE, double_value=ed.Double(double_val=float(value)))
        return None  # None, strings, optional lists: nothing to compare

    def _tensor(self, array: np.ndarray) -> ed.Tensor | None:
        if self._buffer is None:  # debug events without tensors' data: none (a level needs a buffer)
            return None
        offset = self._buffer.append(array)
        if offset is None:
            self.dropped_values += 1
            return None
        return tensor_entry(array, offset)

    # -- results -----------------------------------------------------------------

    def etdump(self) -> ed.ETDump:
        """Everything recorded so far. The first call also collects the delegates' own events,
        which end their profilers: later runs are timed, but no longer inside the delegates."""
        self._add_delegate_events()
        return ed.ETDump(version=0, run_data=list(self._blocks))

    @property
    def debug_buffer(self) -> bytes:
        return b"" if self._buffer is None else self._buffer.data

    def write(self, etdump_path, debug_buffer_path=None) -> None:
        """Write the ETDump (and, when given a path, the debug buffer) as ExecuTorch's runtime does."""
        with open(etdump_path, "wb") as f:
            f.write(serialize_etdump(self.etdump()))
        if debug_buffer_path is not None:
            with open(debug_buffer_path, "wb") as f:
                f.write(self.debug_buffer)


def _operator_event_name(operator: str) -> str:
    """``aten::addmm.out`` -> ``native_call_addmm.out`` (ExecuTorch drops the aten namespace)."""
    return "native_call_" + operator.removeprefix("aten::")


def _traced_kernel(fn: Callable, pc: int, name: str, ret: int, tracer: EventTracer, table: list) -> Callable:
    log = tracer.logs_intermediates

    def call(*args):
        start = _now()
        result = fn(*args)
        end = _now()
        if log:
            tracer.value(pc, result if result is not None else table[ret] if ret >= 0 else None)
        tracer.profile(name, 0, pc, start, end)
        tracer.profile("OPERATOR_CALL", 0, pc, start, end)
        return result

    return call


def _traced_delegate(fn: Callable, pc: int, step: Step, tracer: EventTracer) -> Callable:
    """A delegate call's span (what it wrote is the backend's to log: its outputs are not marked)."""
    delegate = step.delegate

    def call(args):
        start = _now()
        resized = fn(args)
        tracer.delegate_call(delegate, pc, start, _now())
        return resized

    return call


def traced_steps(steps: list[Step], tracer: EventTracer, table: list) -> list[Step]:
    """The same steps, with each kernel and delegate call wrapped to record its events. A step
    fused at load records ``fused_<rule>`` events at its instruction, and the tracer's
    `EventTracer.fused_instructions` maps that instruction to its rule and the instructions it replaced."""
    traced = []
    fused = replaced_instructions(steps)
    for pc, (rule, pcs) in fused.items():
        tracer.fused_instructions[pc] = (rule, tuple(pcs))
    for pc, step in enumerate(steps):
        if step.kind in (KERNEL, RESIZING_KERNEL):
            name = f"fused_{fused[pc][0]}" if pc in fused else _operator_event_name(step.label)
            fn = _traced_kernel(step.fn, pc, name, step.ret, tracer, table)
        elif step.kind == DELEGATE:
            fn = _traced_delegate(step.fn, pc, step, tracer)
        else:
            traced.append(step)
            continue
        traced.append(Step(step.kind, fn, step.args, step.ret, step.label, step.outs, step.shapes, step.delegate))
    return traced
