"""The runtime side of delegation: backend interface and registry by name.

A backend registers itself with `register_backend` when its runtime module is imported. The
first look-up of a backend id imports the module that registers it: torchedge's own backends
are listed here (so a source checkout or a bundle without package metadata finds them); an
installed third-party package declares its backend id and module in the ``torchedge.backends``
entry-point group.
"""

from __future__ import annotations

import importlib
from typing import Any

from torchedge.errors import BackendMissingError
from torchedge.runtime.named_data import NamedDataMap

__all__ = [
    "BackendInterface",
    "register_backend",
    "get_backend",
    "registered_backends",
    "ENTRY_POINT_GROUP",
    "BUILT_IN_BACKENDS",
    "RUNTIME_PROFILING",
]

ENTRY_POINT_GROUP = "torchedge.backends"
# A compile spec the runtime adds at init when the program is traced (``enable_etdump``): a
# backend that can profile itself turns its profiler on and answers `BackendInterface.profile`.
RUNTIME_PROFILING = "torchedge.runtime.profiling"


class BackendInterface:
    """What a backend implements to run the delegate blobs that name it.

    ``init`` runs once per delegate at `Program.load_method`, with the delegate's payload, its
    compile specs and the program's `NamedDataMap` (data stored by key: in the program's
    segments or in `.ptd` files); ``execute`` gets the delegate call's argument values
    (inputs, then outputs to write into).
    """

    # What to install when `is_available` is False (said in the error that refuses the backend).
    install_hint = ""

    def is_available(self) -> bool:
        return True

    def init(self, processed: memoryview, compile_specs: dict[str, bytes], named_data: NamedDataMap) -> Any:
        raise NotImplementedError

    def init_method(self, handles: list) -> None:
        """Called once per loaded method after its delegates' ``init``, with the handles of those
        this backend runs, in the method's order; optional. The method calls them one at a time,
        under its lock, and each loaded method has handles of its own: they may share scratch
        memory that holds nothing between calls."""

    def execute(self, handle: Any, args: list) -> dict[int, Any] | None:
        """Run the delegate: ``args`` are its inputs, then the outputs to write into. An output
        whose shape this run differs from its argument's (a dynamic output) is returned instead,
        by argument position; the runtime resizes the method's tensor within its planned memory
        and copies it there. None (or an empty dict): every output was written in place."""
        raise NotImplementedError

    def destroy(self, handle: Any) -> None:
        """Release what ``init`` created; optional."""

    def input_count(self, handle: Any) -> int | None:
        """How many leading arguments of `execute` are inputs, when it reads only those and
        writes each of the others whole, none read first (load-time fusion's dataflow then sees
        the bytes it reads and writes); optional: None, any argument may be read and written."""
        return None

    def profile(self, handle: Any) -> list[list[tuple[str, int, int]]]:
        """The delegate's own events, one list per `execute` since init (in order): ``(name,
        start, duration)`` in nanoseconds, ``start`` counted from the start of that execute.
        Asked once, when the trace is written; optional (a backend without a profiler has none)."""
        return []

    def describe(self, processed: memoryview) -> list[str]:
        """Lines saying what a payload holds, for ``torchedge inspect``; optional."""
        return []


_BACKENDS: dict[str, BackendInterface] = {}

# torchedge's own backends: id -> the runtime module that registers it (no torch below them).
BUILT_IN_BACKENDS = {
    "OnnxRuntimeBackend": "torchedge.backends.onnxruntime.runtime",
    "XnnpackBackend": "torchedge.backends.xnnpack.runtime",
}


def register_backend(name: str, backend: BackendInterface) -> None:
    _BACKENDS[name] = backend


def _load_module_of(name: str) -> None:
    """Import the module that registers backend ``name``: torchedge's own, else the ones installed
    packages declare for it."""
    try:
        if name in BUILT_IN_BACKENDS:
            importlib.import_module(BUILT_IN_BACKENDS[name])
            return
        from importlib.metadata import entry_points  # here: importing it slows the runtime's import

        for entry_point in entry_points(group=ENTRY_POINT_GROUP, name=name):
            entry_point.load()
    except ImportError as e:
        raise BackendMissingError(f"backend '{name}' needs a package that is not installed: {e}") from None


def get_backend(name: str) -> BackendInterface:
    if name not in _BACKENDS:
        _load_module_of(name)
    backend = _BACKENDS.get(name)
    if backend is None:
        known = ", ".join(sorted(_BACKENDS)) or "none"
        raise BackendMissingError(f"backend '{name}' is not registered (registered backends: {known})")
    if not backend.is_available():
        hint = f": {backend.install_hint}" if backend.install_hint else ""
        raise BackendMissingError(f"backend '{name}' is registered but not available on this machine{hint}")
    return backend


def registered_backends() -> list[str]:
    return sorted(_BACKENDS)
