"""`LoweredBackendModule`: a partition after ``preprocess``, called through `executorch_call_delegate`."""

from __future__ import annotations

import torch
from torch.export import ExportedProgram

from torchedge.exir.backend.compile_spec import CompileSpec
from torchedge.exir.ir import executorch_call_delegate

__all__ = ["LoweredBackendModule"]


class LoweredBackendModule(torch.nn.Module):
    """A partition after ``preprocess``: the backend id, its opaque bytes and compile specs.

    ``original_module`` (the partition's Edge program) keeps the graph runnable
    in eager mode and lets devtools map the delegate back to source; ``debug_handle_map``
    is the backend's own (`PreprocessResult.debug_handle_map`), ``named_data`` the bytes the
    payload names by key (`PreprocessResult.data_store_output`), which the program stores.
    """

    def __init__(
        self,
        backend_id: str,
        processed_bytes: bytes,
        compile_specs: list[CompileSpec],
        original_module: ExportedProgram,
        debug_handle_map: dict | None = None,
        named_data: dict[str, bytes] | None = None,
    ):
        super().__init__()
        self.backend_id = backend_id
        self.processed_bytes = processed_bytes
        self.compile_specs = list(compile_specs)
        self.named_data = dict(named_data or {})
        self.original_module = original_module
        # What the backend says its internal events stand for (ExecuTorch's ``meta["debug_handle_map"]``).
        self.meta = {"debug_handle_map": debug_handle_map or {}}

    def forward(self, *args):
        return executorch_call_delegate(self, *args)
