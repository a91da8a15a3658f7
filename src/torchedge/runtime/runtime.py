"""`Runtime`: the entry point that loads programs."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from torchedge.kernels.registry import Kernel, KernelList, get_kernel
from torchedge.runtime.data_loader import loader_for
from torchedge.runtime.program import Program
from torchedge.runtime.threads import check_num_threads

__all__ = ["Runtime"]


_KERNEL_SETS = ("portable", "aten")


def _kernel_list(kernels) -> KernelList | None:
    """None for a named kernel set; else the operator list (names, or a selected-operators YAML path)."""
    if isinstance(kernels, str) and kernels in _KERNEL_SETS:
        return None
    if isinstance(kernels, str) and not (kernels.endswith((".yaml", ".yml")) or os.path.exists(kernels)):
        raise ValueError(
            f"unknown kernel set '{kernels}': use 'portable' (NumPy), 'aten' (PyTorch's kernels), a list of "
            "operator names or the path of a selected-operators YAML file"
        )
    if not isinstance(kernels, (str, os.PathLike, Iterable)):
        raise ValueError(f"kernels: expected a kernel set name, operator names or a YAML path, got {kernels!r}")
    return KernelList(kernels)


def _kernel_lookup(kernels: str) -> Callable[[str], Kernel]:
    if kernels == "portable":
        return get_kernel
    if kernels == "aten":
        from torchedge.kernels.aten_mode import get_aten_kernel  # imports torch when a kernel is looked up

        return get_aten_kernel
    raise ValueError(f"unknown kernel set '{kernels}': use 'portable' (NumPy) or 'aten' (PyTorch's kernels)")


class Runtime:
    """Loads programs. One instance per kernel set and thread count:

    * ``Runtime.get()`` — the portable NumPy kernels (no torch);
    * ``Runtime.get(kernels="aten")`` — PyTorch's own kernels, the reference the
      portable ones are tested against (needs torch installed);
    * ``Runtime.get(kernels=["aten::add.out", ...])`` or ``Runtime.get(kernels="ops.yaml")`` — the
      portable kernels of those operators only (a list, or ExecuTorch's selected-operators YAML
      that ``torchedge kernels --oplist`` writes): loading a method that needs another operator
      raises `OperatorMissingError` naming it and the list, as a selectively built ExecuTorch would;
    * ``Runtime.get(num_threads=2)`` — methods run their kernels on two threads
      (default: one) and pass the number to their delegates; `Program.load_method`
      can override it per method. See `torchedge.runtime.threads`.
    """

    _instances: dict[tuple[object, int | None], Runtime] = {}

    def __init__(self, kernels: str | Iterable[str] | os.PathLike = "portable", num_threads: int | None = None):
        self.kernel_list = kernels if isinstance(kernels, KernelList) else _kernel_list(kernels)
        # "portable", "aten", or the sorted operator names of a restricted runtime (None: all of them)
        self.kernels: object = kernels if self.kernel_list is None else self._listed()
        self.num_threads = None if num_threads is None else check_num_threads(num_threads)
        # A restricted runtime checks each method's operators against its list at load (`Program.load_method`)
        # and then resolves them as the portable one does, load-time fusion included.
        self._lookup = _kernel_lookup(kernels if isinstance(kernels, str) and self.kernel_list is None else "portable")

    def _listed(self) -> tuple[str, ...] | None:
        operators = self.kernel_list.operators if self.kernel_list is not None else None
        return None if operators is None else tuple(sorted(operators))

    @classmethod
    def get(cls, kernels: str | Iterable[str] | os.PathLike = "portable", num_threads: int | None = None) -> Runtime:
        threads = None if num_threads is None else check_num_threads(num_threads)
        kernel_list = _kernel_list(kernels)
        if kernel_list is None:
            key: tuple[object, int | None] = (kernels, threads)
        else:  # a list is read once: the instance is the one of its operators
            key = (("list", kernel_list.operators, kernel_list.source), threads)
            kernels = kernel_list  # type: ignore[assignment]
        found = cls._instances.get(key)
        if found is None:  # threads asking at once: one instance is kept, all get it
            found = cls._instances.setdefault(key, cls(kernels, num_threads))
        return found

    def load_program(
        self,
        source,
        *,
        mmap: bool = True,
        data_path=None,
        enable_etdump: bool = False,
        debug_buffer_size: int = 0,
        debug_level: str | None = None,
        etdump_memory: bool = False,
    ) -> Program:
        """Load a `.pte` from a path (memory-mapped unless ``mmap=False``), bytes, or a binary file.

        ``data_path`` (ExecuTorch's name): a `.ptd` file, or a list of them, holding the data the
        program keeps outside itself (external constants, delegate weights stored by key).

        ``enable_etdump`` (ExecuTorch's names): record every load and run of the program's methods
        (per-instruction times, memory); ``debug_buffer_size`` bytes hold the tensors logged at
        ``debug_level`` (``"intermediates"`` by default when the buffer is given, or ``"outputs"``);
        ``etdump_memory`` also records the planned and run-time allocations (which ExecuTorch 1.5.1's
        Inspector cannot read; torchedge's can).
        Save them with `Program.write_etdump_result_to_file`; read them with
        `torchedge.devtools.Inspector`. See `torchedge.runtime.event_tracer`.
        """
        sources = [] if data_path is None else data_path if isinstance(data_path, (list, tuple)) else [data_path]
        data = [(_name_of(d), loader_for(d, mmap_file=mmap, what=".ptd file")) for d in sources]
        tracer = None
        if enable_etdump:
            from torchedge.runtime.event_tracer import EventTracer  # tracing code loads only when used

            tracer = EventTracer(debug_buffer_size, debug_level, etdump_memory)
        loader = loader_for(source, mmap_file=mmap)
        return Program(loader, self._lookup, self.num_threads, data, tracer, kernel_list=self.kernel_list)


def _name_of(source) -> str:
    return f"'{os.fspath(source)}'" if isinstance(source, (str, os.PathLike)) else "a .ptd buffer"
