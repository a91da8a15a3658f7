"""`BackendDetails`: the AOT half of a backend, turning an Edge program into opaque bytes."""

from __future__ import annotations

from dataclasses import dataclass, field

from torch.export import ExportedProgram

from torchedge.errors import ExportError
from torchedge.exir.backend.compile_spec import CompileSpec

__all__ = ["BackendDetails", "PreprocessResult", "backend_by_id"]


@dataclass
class PreprocessResult:
    processed_bytes: bytes
    debug_handle_map: dict | None = None
    data_store_output: dict = field(default_factory=dict)


class BackendDetails:
    """Subclass and implement ``preprocess``; the subclass name is the backend id.

    The runtime half of the backend registers under the same id
    (`torchedge.runtime.register_backend`).
    """

    @staticmethod
    def preprocess(edge_program: ExportedProgram, compile_specs: list[CompileSpec]) -> PreprocessResult:
        raise NotImplementedError


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def backend_by_id(backend_id: str) -> type[BackendDetails]:
    for sub in _subclasses(BackendDetails):
        if sub.__name__ == backend_id:
            return sub
    known = ", ".join(sorted(s.__name__ for s in _subclasses(BackendDetails))) or "none"
    raise ExportError(
        f"no BackendDetails subclass named '{backend_id}' (known backends: {known}); import the module that defines it"
    )
