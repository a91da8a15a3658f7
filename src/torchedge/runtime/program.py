"""`Program`: a loaded `.pte`, from which methods are loaded."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from torchedge.errors import InputError, InvalidProgramError, MethodMissingError
from torchedge.kernels.registry import Kernel, KernelList, get_kernel
from torchedge.runtime.data_loader import DataLoader
from torchedge.runtime.memory import caller_arenas
from torchedge.runtime.method import Method
from torchedge.runtime.method_meta import MethodMeta
from torchedge.runtime.named_data import NamedDataMap
from torchedge.runtime.pal import log
from torchedge.runtime.shared_state import SharedState
from torchedge.runtime.threads import check_num_threads
from torchedge.serialize import deserialize_pte
from torchedge.serialize.ptd import read_ptd

if TYPE_CHECKING:
    from torchedge.fusion.options import FusionOptions
    from torchedge.runtime.event_tracer import EventTracer

__all__ = ["Program"]


class Program:
    """``num_threads``: the threads of the methods it loads, unless `load_method` says otherwise
    (None: the runtime's default, see `torchedge.runtime.threads`). ``tracer``: records the
    loads and runs of its methods (see `Runtime.load_program`'s ``enable_etdump``).

    Methods may be loaded and run from several threads. Each method's runs hold a lock; the
    methods that share mutable state (buffers shared between methods, the tracer) share the
    program's, which their loads hold too: a method joining the state never sees it half made."""

    def __init__(
        self,
        loader: DataLoader,
        kernel_lookup: Callable[[str], Kernel] = get_kernel,
        num_threads: int | None = None,
        data: Sequence[tuple[str, DataLoader]] = (),
        tracer: EventTracer | None = None,
        kernel_list: KernelList | None = None,
    ):
        self._kernel_lookup = kernel_lookup
        self._kernel_list = kernel_list
        self._tracer = tracer
        self._num_threads = None if num_threads is None else check_num_threads(num_threads)
        self._loader = loader  # constants are views onto its bytes: keep it alive
        self._pte = deserialize_pte(loader.data)
        self._plans = {plan.name: plan for plan in self._pte.program.execution_plan or []}
        if len(self._plans) != len(self._pte.program.execution_plan or []):
            raise InvalidProgramError("the program has two methods with the same name")
        self._shared_state = SharedState(self._plans.values())
        self._shared_lock = threading.Lock()  # held by the runs and loads of methods that share state
        self._data_loaders = [d for _, d in data]  # external data are views onto their bytes too
        keys = [entry.key for entry in self._pte.program.named_data or []]
        sources: list[tuple[str, list[str], Callable[[str], memoryview]]] = [
            ("the program", keys, self._pte.named_data)
        ]
        for name, data_loader in data:
            contents = read_ptd(data_loader.data, name)
            sources.append((name, list(contents.data), contents.data.__getitem__))
        self._named_data = NamedDataMap(sources)
        log(logging.DEBUG, f"loaded a program of {len(loader.data)} bytes, methods {list(self._plans)}")

    @property
    def method_names(self) -> list[str]:
        return list(self._plans)

    @property
    def pte(self):
        """The decoded file: schema objects and segment access."""
        return self._pte

    def _plan(self, name: str):
        plan = self._plans.get(name)
        if plan is None:
            methods = ", ".join(self._plans) or "none"
            raise MethodMissingError(f"the program has no method '{name}'; methods: {methods}")
        return plan

    def load_method(
        self,
        name: str = "forward",
        max_arena_bytes: int | None = None,
        num_threads: int | None = None,
        fuse: bool | str | FusionOptions = True,
        planned_memory=None,
        run_allocator: Callable[[int], object] | None = None,
        fold: bool = True,
    ) -> Method:
        """Allocate the method's planned memory and resolve its kernels and delegates.

        Mutable buffers start from their initial values, except state this method shares
        with another loaded method of the program (see `torchedge.runtime.shared_state`).
        ``num_threads`` overrides the program's (the runtime's) thread count for this method.
        ``fuse``: which load-time fusions run (see `Method`): ``"exact"`` (the default, also
        ``True``: only fusions that give the bits of the instructions they replace), ``"all"``
        (also faster ones within a stated error bound), ``"none"`` (also ``False``: every
        instruction as written), or ``FusionOptions(level, disabled={"rule", ...})``. ``fold``: unless
        ``fuse`` is ``"none"``, steps that read only constants run once, at load (False: at each run).

        ``planned_memory``: the caller's memory for the planned arenas instead of the runtime's
        (pre-allocated, pinned or shared memory, a ``np.memmap``...): one writable uint8 buffer
        per memory id in id order (None: the runtime allocates it), a dict ``{memory_id: buffer}``,
        or an allocator ``allocate(memory_id, nbytes) -> buffer``. Each must hold the id's
        planned size (`metadata(name).planned_buffer_sizes`) and start on a 16-byte boundary;
        its first bytes become the arena, without a copy. ``run_allocator(nbytes) -> buffer``:
        where a run's data-dependent outputs go (ExecuTorch's temp allocator), still bounded by
        ``max_arena_bytes``. See `torchedge.runtime.memory.caller_arenas`.

        A runtime restricted to a kernel list (`Runtime.get(kernels=[...])`) refuses a method
        needing an operator outside it with an `OperatorMissingError` naming them.
        """
        plan = self._plan(name)
        if self._kernel_list is not None:
            self._kernel_list.check(name, MethodMeta.from_plan(plan).operators)
        if num_threads is None:
            num_threads = self._num_threads
        shares = self._tracer is not None or self._shared_state.used_by(plan)
        lock = self._shared_lock if shares else None
        with contextlib.nullcontext() if lock is None else lock:
            memory, rewrites = (planned_memory, run_allocator), {"fuse": fuse, "fold": fold}
            if self._tracer is None:
                method = self._load_method(plan, max_arena_bytes, num_threads, rewrites, lock, memory)
            else:
                with self._tracer.span("Program::load_method"):
                    method = self._load_method(plan, max_arena_bytes, num_threads, rewrites, lock, memory)
        log(logging.DEBUG, f"loaded method '{name}': {method.memory.planned_bytes} bytes of planned memory")
        return method

    def _load_method(
        self, plan, max_arena_bytes: int | None, num_threads: int | None, rewrites, lock: threading.Lock | None, memory
    ) -> Method:
        planned_memory, run_allocator = memory
        if run_allocator is not None and not callable(run_allocator):
            raise InputError(f"run_allocator: expected allocate(nbytes) -> buffer, got {type(run_allocator).__name__}")
        shared, live = self._shared_state.arenas_for(plan, max_arena_bytes)
        if planned_memory is not None:
            sizes = MethodMeta.from_plan(plan).planned_buffer_sizes
            # The caller's arenas join the method as shared ones do: used as given, not counted against the
            # limit, and (for load-time fusion) read by someone after each run.
            shared = {**caller_arenas(sizes, planned_memory, shared), **shared}
        args = (plan, self._pte, self._kernel_lookup, max_arena_bytes, shared, live, num_threads, self._named_data)
        if self._tracer is None:
            method = Method(*args, **rewrites, lock=lock)
        else:
            with self._tracer.span("Method::init"):
                method = Method(*args, tracer=self._tracer, **rewrites, lock=lock)
        method.memory.runtime_allocator = run_allocator
        return method

    @property
    def event_tracer(self) -> EventTracer | None:
        """The tracer of a program loaded with ``enable_etdump=True`` (None otherwise)."""
        return self._tracer

    def write_etdump_result_to_file(self, etdump_path, debug_buffer_path=None) -> None:
        """Write what the program's methods recorded as an ETDump file (ExecuTorch's name and format);
        with ``debug_buffer_path``, also the debug buffer holding the logged tensors."""
        if self._tracer is None:
            raise InputError("the program was loaded without enable_etdump=True: it recorded no events")
        with self._shared_lock:  # not while a method records a run
            self._tracer.write(etdump_path, debug_buffer_path)

    def metadata(self, name: str = "forward") -> MethodMeta:
        """Signature and planned memory of a method, without allocating it."""
        return MethodMeta.from_plan(self._plan(name), self._named_data)
