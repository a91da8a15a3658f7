"""`Method`: one loaded execution plan, ready to execute.

Loading does all the work it can: arenas are allocated, every value is
materialised (planned tensors as views, constants as zero-copy views),
kernels and backends are resolved, static views are bound. `execute` then
copies inputs in, runs a plain dispatch loop over the instructions and returns
the outputs.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import numpy as np

from torchedge.errors import BackendMissingError, InputError, InvalidProgramError, KernelError, TorchEdgeError
from torchedge.fusion.options import FusionOptions, fusion_options
from torchedge.kernels.allocator import reset_allocator, use_allocator
from torchedge.kernels.portable.common import quiet_run
from torchedge.kernels.registry import get_kernel
from torchedge.runtime.backend import RUNTIME_PROFILING, get_backend
from torchedge.runtime.folding import fold_constant_steps
from torchedge.runtime.fusion import Dataflow, fuse_steps
from torchedge.runtime.inputs import as_numpy, input_list
from torchedge.runtime.memory import MemoryManager
from torchedge.runtime.method_meta import MethodMeta, TensorMeta
from torchedge.runtime.named_data import NamedDataMap
from torchedge.runtime.outputs import delivered, planned_output_buffers
from torchedge.runtime.pal import run_failure
from torchedge.runtime.steps import DELEGATE, FREE, JUMP, KERNEL, MOVE, RESIZING_KERNEL, Step, StepCompiler, truthy
from torchedge.runtime.threads import (
    DEFAULT_NUM_THREADS,
    RUNTIME_NUM_THREADS,
    ThreadLimit,
    check_num_threads,
    encode_num_threads,
)
from torchedge.runtime.validation import check_signature, kind_of
from torchedge.runtime.values import ValueTable
from torchedge.schema.program import Tensor

if TYPE_CHECKING:
    from torchedge.runtime.event_tracer import EventTracer

__all__ = ["Method"]


class Method:
    """``num_threads``: the threads its kernels use (None: `DEFAULT_NUM_THREADS`); when given, it
    is also passed to its delegates, overriding their compile-time thread settings.

    ``fuse``: run groups of the program's instructions as torchedge's fused kernels where the
    method's dataflow proves it safe (`torchedge.runtime.fusion`): a level (``"none"``,
    ``"exact"``: the bits of the unfused run, ``"all"``), a `FusionOptions` (a level and rules
    switched off by name) or a bool (True: ``"exact"``, False: ``"none"``). A tracer records each
    fused step as one event; one that logs every intermediate value runs unfused. Unless ``"none"``,
    steps that read only constants run once, at load (`torchedge.runtime.folding`; ``fold=False``: each run).

    ``max_backward_jumps``: how many backward jumps (loop iterations) one run may take before it
    stops with a `KernelError`, so that a corrupt loop condition cannot hang the caller.

    ``lock``: held by each run (see `execute`); the program passes one lock to the methods that
    share mutable state (buffers shared between methods, its tracer), else each method has its own.
    """

    max_backward_jumps = 1 << 20

    def __init__(
        self,
        plan,
        pte,
        kernel_lookup=get_kernel,
        max_arena_bytes: int | None = None,
        shared_memory: dict | None = None,
        live_memory: frozenset[int] = frozenset(),
        num_threads: int | None = None,
        named_data: NamedDataMap | None = None,
        tracer: EventTracer | None = None,
        fuse: bool | str | FusionOptions = True,
        fold: bool = True,
        lock: threading.Lock | None = None,
    ):
        self.name = plan.name
        self._lock = threading.Lock() if lock is None else lock
        self._tracer = tracer
        named_data = named_data if named_data is not None else NamedDataMap()
        self._requested_threads = None if num_threads is None else check_num_threads(num_threads)
        sizes = list(plan.non_const_buffer_sizes or [0])[1:]
        limit = {} if max_arena_bytes is None else {"max_arena_bytes": max_arena_bytes}
        self.memory = MemoryManager(sizes, shared=shared_memory, live=live_memory, **limit)
        self._values = ValueTable(plan, pte, self.memory, self.name, named_data)
        self._inputs = list(plan.inputs or [])
        self._outputs = list(plan.outputs or [])
        check_signature(self.name, self._inputs, self._outputs, self._values)
        self.meta = MethodMeta.from_plan(plan, named_data)
        chains = plan.chains or []
        if len(chains) > 1:
            raise InvalidProgramError(f"method '{self.name}' has {len(chains)} chains; only one is supported")
        instructions = chains[0].instructions if chains else []
        self._handles: list = []
        self._delegates = [self._init_delegate(d, pte, named_data) for d in (plan.delegates or [])]
        for backend in {id(b): b for b, _ in self._handles}.values():
            backend.init_method([h for b, h in self._handles if b is backend])
        compiler = StepCompiler(self.name, plan, self._values, self._delegates, kernel_lookup, len(instructions))
        # Outputs the plan gives no memory: the caller supplies it (or execute allocates it).
        unallocated = [self._values.is_unallocated_tensor(i) and i not in self._inputs for i in self._outputs]
        self._caller_outputs = {pos for pos, caller in enumerate(unallocated) if caller}
        # Inputs the plan gives no memory: each run binds the caller's array (never writes into the last one).
        self._caller_inputs = {i for i in self._inputs if self._values.is_unallocated_tensor(i)}
        self._steps = [compiler.compile(pc, ins) for pc, ins in enumerate(instructions)]
        self._thread_limit = ThreadLimit(self._requested_threads or DEFAULT_NUM_THREADS)  # pools of kernels, delegates
        options = fusion_options(fuse if tracer is None or not tracer.logs_intermediates else False)
        if options.level != "none" and kernel_lookup is get_kernel and Dataflow.supports(self._steps, self._values):
            shared = [self.memory.arena(memory_id) for memory_id in (shared_memory or {})]
            layout = (self._values, self._inputs, self._outputs, self.memory.arenas, shared)
            flow = Dataflow(self._steps, *layout)
            if fold:
                with quiet_run(), self._thread_limit:
                    steps = fold_constant_steps(flow, self._store_result)
                flow = flow if steps is flow.steps else Dataflow(steps, *layout)
            self._steps = fuse_steps(flow, options)
        if tracer is not None:
            from torchedge.runtime.event_tracer import traced_steps  # tracing code loads only when used

            self._steps = traced_steps(self._steps, tracer, self._values.values)
            if tracer.track_memory:
                for memory_id, arena in enumerate(self.memory.arenas, start=1):
                    tracer.allocation(f"planned memory {memory_id}", arena.nbytes)
        # Kernels need the run's allocator (data-dependent outputs), error scope and thread limit; a fully
        # delegated method runs without them (its delegates sized their own pools at load).
        self._runs_kernels = any(s.kind in (KERNEL, RESIZING_KERNEL) for s in self._steps)
        # Dynamic shapes: when a run's input shapes equal the last run's, every tensor already has
        # its size (unless some size depends on data), so the run can skip the shape functions.
        self._steps_without_resizing = self._steps
        if any(s.kind == RESIZING_KERNEL for s in self._steps):
            self._steps_without_resizing = [
                Step(KERNEL, s.fn, s.args, s.ret, s.label) if s.kind == RESIZING_KERNEL else s for s in self._steps
            ]
        self._shapes_follow_inputs = not any(compiler.sizes_depend_on_data(s) for s in self._steps)
        self._shapes_current = False  # tensors have the sizes of the current inputs
        self._copied_outputs = tuple(pos not in self._caller_outputs for pos in range(len(self._outputs)))

    @property
    def num_threads(self) -> int:
        """The number of threads this method's kernels run with."""
        return self._thread_limit.num_threads

    # -- loading ---------------------------------------------------------------

    def _init_delegate(self, delegate, pte, named_data: NamedDataMap):
        try:
            backend = get_backend(delegate.id)
        except BackendMissingError as e:
            raise BackendMissingError(f"method '{self.name}' cannot load its delegate: {e}") from None
        specs = {s.key: bytes(s.value) for s in (delegate.compile_specs or [])}
        if self._tracer is not None:
            specs[RUNTIME_PROFILING] = b"1"
        if self._requested_threads is not None:
            specs[RUNTIME_NUM_THREADS] = encode_num_threads(self._requested_threads)
        data = pte.delegate_data(delegate)
        try:
            handle = backend.init(data, specs, named_data)
        except TorchEdgeError:
            raise
        except Exception as e:  # a backend's own error on a corrupt blob: name the method and delegate
            raise InvalidProgramError(
                f"method '{self.name}', delegate {delegate.id!r}: expected data its backend can load, "
                f"init failed: {type(e).__name__}: {e}"
            ) from e
        self._handles.append((backend, handle))
        return backend, handle

    # -- execution -------------------------------------------------------------

    def set_inputs(self, inputs) -> None:
        with self._lock:
            self._set_inputs(inputs)

    def _set_inputs(self, inputs) -> None:
        inputs = input_list(self.name, inputs)
        if len(inputs) != len(self._inputs):
            raise InputError(f"method '{self.name}' takes {len(self._inputs)} input(s), got {len(inputs)}")
        table = self._values.values
        for position, (index, value) in enumerate(zip(self._inputs, inputs)):
            target = table[index]
            # Fast path: an array of the planned dtype and of the shape the input memory has now.
            if (
                type(value) is np.ndarray
                and type(target) is np.ndarray
                and value.dtype == target.dtype
                and value.shape == target.shape
                and index not in self._caller_inputs
            ):
                target[...] = value
            else:
                self._set_input(position, index, value)

    def _set_input(self, position: int, index: int, value) -> None:
        schema = self._values.schema[index]
        current = self._values[index]
        where = f"method '{self.name}', input {position}"
        if not isinstance(schema, Tensor):
            if isinstance(value, np.ndarray) or type(value).__module__.startswith("torch"):
                raise InputError(f"{where}: expected a {type(current).__name__} scalar, got a tensor")
            if value != current:  # a size may derive from it
                self._shapes_current = False
            self._values.set(index, value)
            return
        expected = self.meta.input_tensor_meta(position)
        array = as_numpy(value, expected.dtype, where)
        if array.dtype != expected.dtype:
            raise InputError(f"{where}: expected dtype {expected.dtype}, got {array.dtype}")
        if expected.dynamic:
            self._resize_input(index, array.shape, expected, where)
            current = self._values[index]
        elif array.shape != expected.shape:
            raise InputError(f"{where}: expected shape {list(expected.shape)}, got {list(array.shape)}")
        if index in self._caller_inputs:
            if current is None or current.shape != array.shape:
                self._shapes_current = False
            self._values.set(index, np.ascontiguousarray(array))
        elif current.shape != array.shape:  # a program whose input tensor disagrees with its own metadata
            raise InvalidProgramError(
                f"{where}: the input's tensor (value {index}) has shape {list(current.shape)}, "
                f"which cannot hold an input of shape {list(array.shape)}"
            )
        else:
            np.copyto(current, array)

    def _resize_input(self, index: int, shape, expected: TensorMeta, where: str) -> None:
        bound, lowest = expected.shape, expected.lower_bound
        if len(shape) != len(bound) or any(not low <= s <= b for s, low, b in zip(shape, lowest, bound)):
            raise InputError(
                f"{where}: shape {list(shape)} is outside the dynamic range the method was "
                f"exported for (rank {len(bound)}, at least {list(lowest)}, at most {list(bound)})"
            )
        if index in self._values.capacity and self._values.resize(index, tuple(shape)):
            self._shapes_current = False

    def set_outputs(self, outputs) -> None:
        """Bind caller-provided buffers to the outputs the plan does not place (``None`` entries: allocate)."""
        with self._lock:
            self._set_outputs(outputs)

    def _set_outputs(self, outputs) -> None:
        outputs = list(outputs) if outputs is not None else [None] * len(self._outputs)
        if len(outputs) != len(self._outputs):
            raise InputError(f"method '{self.name}' has {len(self._outputs)} output(s), got {len(outputs)} buffers")
        for position, buffer in enumerate(outputs):
            if position not in self._caller_outputs:
                if buffer is not None:
                    raise InputError(
                        f"method '{self.name}', output {position} is planned memory: pass None for it here "
                        "(execute(inputs, outputs=[...]) copies a planned output into the array given)"
                    )
                continue
            expected = self.meta.outputs[position]
            where = f"method '{self.name}', output buffer {position}"
            if buffer is None:
                buffer = np.empty(expected.shape, expected.dtype)
            elif not isinstance(buffer, np.ndarray) or not buffer.flags.writeable:
                raise InputError(f"{where}: expected a writable NumPy array")
            elif buffer.dtype != expected.dtype or buffer.shape != expected.shape:
                raise InputError(
                    f"{where}: expected {expected.dtype}{list(expected.shape)}, got {buffer.dtype}{list(buffer.shape)}"
                )
            self._values.set(self._outputs[position], buffer)

    def execute(self, inputs=(), outputs=None) -> list:
        """Run the method on ``inputs`` and return its outputs.

        ``inputs``: a list (NumPy arrays, DLPack or buffer-protocol objects, torch tensors, scalars).
        Planned outputs are returned as copies (the next run reuses their memory), or copied into
        the arrays given for them in ``outputs`` (None entries: a new copy). Outputs compiled with
        ``alloc_graph_output=False`` are written into the arrays given in ``outputs`` (or freshly
        allocated ones) and returned as is.

        Safe to call from several threads: a run holds the method's lock from copying the
        inputs in to copying the outputs out, so concurrent calls run one after another and
        no later call changes an array an earlier one returned. Methods of one program that
        share mutable buffers (or its tracer) share one lock, so their updates are never lost.
        For calls that run in parallel, load a method per thread (`Program.load_method`):
        each has its own memory and delegate handles.
        """
        with self._lock:
            unplanned, into = planned_output_buffers(self.name, outputs, self._copied_outputs)
            if self._tracer is not None:
                return self._traced_execute(self._tracer, inputs, unplanned, into)
            self._execute(inputs, unplanned)
            return self._results(into)

    def _execute(self, inputs, outputs) -> None:
        self._set_inputs(inputs)
        if self._caller_outputs or outputs is not None:
            self._set_outputs(outputs)
        self._run()

    def _traced_execute(self, tracer: EventTracer, inputs, outputs, into) -> list:
        """`execute` recorded as one ``Execute`` event block of the program's tracer."""
        tracer.begin_block("Execute")
        with tracer.span("Method::execute"):
            self._execute(inputs, outputs)
        if tracer.track_memory and self.memory.runtime_bytes:
            tracer.allocation("runtime", self.memory.runtime_bytes)
        results = self._results(into)
        if tracer.logs_outputs:
            for value in results:
                tracer.output(value)
        return results

    def _results(self, into: dict) -> list:
        table = self._values.values
        return delivered(self.name, [table[i] for i in self._outputs], self._copied_outputs, into)

    def _run(self) -> None:
        if not self._runs_kernels:
            self._dispatch()
            return
        self.memory.reset_runtime()
        token = use_allocator(self.memory.allocate)
        try:
            with quiet_run(), self._thread_limit:
                self._dispatch()
        finally:
            reset_allocator(token)

    def _dispatch(self) -> None:
        values = self._values
        table = values.values
        steps = self._steps_without_resizing if self._shapes_current else self._steps
        self._shapes_current = False  # until this run completes
        pc, n = 0, len(steps)
        budget = self.max_backward_jumps
        try:
            while pc < n:
                step = steps[pc]
                kind = step.kind
                if kind == KERNEL:
                    result = step.fn(*[table[i] for i in step.args])
                    if result is not None:
                        self._store_result(step.ret, result)
                elif kind == RESIZING_KERNEL:
                    for index, shape in zip(step.outs, step.shapes(*[table[i] for i in step.args])):
                        values.resize(index, shape)
                    step.fn(*[table[i] for i in step.args])
                elif kind == DELEGATE:
                    resized = step.fn([table[i] for i in step.args])
                    for position, array in (resized or {}).items():  # dynamic outputs, at this run's shape
                        values.resize(step.args[position], array.shape)
                        np.copyto(table[step.args[position]], array)
                elif kind == JUMP:
                    if not truthy(table[step.args[0]]):
                        if step.ret <= pc:
                            budget -= 1
                            if budget < 0:
                                raise KernelError(
                                    f"more than {self.max_backward_jumps} backward jumps in one run "
                                    "(raise Method.max_backward_jumps if the loop is meant to be that long)"
                                )
                        pc = step.ret
                        continue
                elif kind == MOVE:
                    values.set(step.ret, table[step.args[0]])
                elif kind == FREE:
                    values.set(step.args[0], None)
                pc += 1
            self._shapes_current = self._shapes_follow_inputs
        except Exception as e:  # named, logged through the PAL, an invariant's failure aborted (`pal.run_failure`)
            raise run_failure(self.name, pc, steps[pc].label, e, lambda: self._describe_args(steps[pc])) from e

    def _describe_args(self, step: Step) -> str:
        """The values a failed step received, for its error message: "value 3 (Tensor float32[2, 3]), ..."."""
        parts = []
        for i in step.args:
            value = self._values[i]
            shape = f" {value.dtype}{list(value.shape)}" if isinstance(value, np.ndarray) else ""
            parts.append(f"value {i} ({kind_of(self._values, i)}{shape})")
        return "[" + ", ".join(parts) + "]"

    def _store_result(self, index: int, result) -> None:
        """Bind a kernel's returned value: a scalar, a runtime-allocated tensor, or one per out."""
        if isinstance(result, tuple):
            targets = getattr(self._values.schema[index], "items", None)
            if targets is None or len(targets) != len(result):
                raise InvalidProgramError(
                    f"kernel returned {len(result)} outputs but value {index} is not a tensor list of that length"
                )
            for target, value in zip(targets, result):
                self._values.set(target, value)
            self._values.set(index, list(result))
        else:
            self._values.set(index, result)

    def __del__(self):
        for backend, handle in getattr(self, "_handles", ()):
            try:
                backend.destroy(handle)
            except Exception:  # destruction must never raise out of __del__
                pass
