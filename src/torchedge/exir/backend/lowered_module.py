"""`LoweredBackendModule` and the graph call that invokes it."""

from __future__ import annotations

import torch
from torch.export import ExportedProgram

from torchedge.exir.backend.compile_spec import CompileSpec

__all__ = ["LoweredBackendModule", "executorch_call_delegate"]


class LoweredBackendModule(torch.nn.Module):
    """A partition after ``preprocess``: the backend id, its opaque bytes and compile specs.

    ``original_module`` (the partition's Edge program) keeps the graph runnable
    in eager mode and lets devtools map the delegate back to source.
    """

    def __init__(self, backend_id: str, processed_bytes: bytes, compile_specs: list[CompileSpec],
                 original_module: ExportedProgram):
        super().__init__()
        self.backend_id = backend_id
        self.processed_bytes = processed_bytes
        self.compile_specs = list(compile_specs)
        self.original_module = original_module

    def forward(self, *args):
        return executorch_call_delegate(self, *args)


def executorch_call_delegate(lowered: LoweredBackendModule, *args, out=None):
    """Graph-level delegate call: eager semantics are the partition's own program.

    The out-variant pass adds ``out=`` buffers (one per output); the emitter turns
    the call into a DelegateCall instruction over inputs then outputs.
    """
    outputs = lowered.original_module.module()(*args)
    return tuple(outputs) if isinstance(outputs, (tuple, list)) else (outputs,)
