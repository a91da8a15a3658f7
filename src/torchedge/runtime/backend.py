"""The runtime side of delegation: backend interface and registry by name."""

from __future__ import annotations

import importlib
from typing import Any

from torchedge.errors import BackendMissingError

__all__ = ["BackendInterface", "register_backend", "get_backend", "registered_backends"]


class BackendInterface:
    """What a backend implements to run the delegate blobs that name it.

    ``init`` runs once per delegate at `Program.load_method`; ``execute`` gets
    the delegate call's argument values (inputs, then outputs to write into).
    """

    def is_available(self) -> bool:
        return True

    def init(self, processed: memoryview, compile_specs: dict[str, bytes]) -> Any:
        raise NotImplementedError

    def execute(self, handle: Any, args: list) -> None:
        raise NotImplementedError

    def destroy(self, handle: Any) -> None:
        """Release what ``init`` created; optional."""


_BACKENDS: dict[str, BackendInterface] = {}
# Backends shipped with torchedge register themselves when their runtime module is imported.
_BUILTIN = {"OnnxRuntimeBackend": "torchedge.backends.onnxruntime.runtime"}


def register_backend(name: str, backend: BackendInterface) -> None:
    _BACKENDS[name] = backend


def get_backend(name: str) -> BackendInterface:
    if name not in _BACKENDS and name in _BUILTIN:
        try:
            importlib.import_module(_BUILTIN[name])
        except ImportError as e:
            raise BackendMissingError(f"backend '{name}' needs a package that is not installed: {e}") from None
    backend = _BACKENDS.get(name)
    if backend is None:
        known = ", ".join(sorted(_BACKENDS)) or "none"
        raise BackendMissingError(f"backend '{name}' is not registered (registered backends: {known})")
    if not backend.is_available():
        raise BackendMissingError(f"backend '{name}' is registered but not available on this machine")
    return backend


def registered_backends() -> list[str]:
    return sorted(_BACKENDS)
