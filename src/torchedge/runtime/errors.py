"""Errors the runtime raises (the shared hierarchy of `torchedge.errors`)."""

from torchedge.errors import (
    BackendMissingError,
    InputError,
    InternalError,
    InvalidProgramError,
    KernelError,
    MemoryPlanError,
    OperatorMissingError,
    TorchEdgeError,
)

__all__ = [
    "TorchEdgeError",
    "InvalidProgramError",
    "InputError",
    "OperatorMissingError",
    "KernelError",
    "BackendMissingError",
    "MemoryPlanError",
    "InternalError",
]
