"""The typed errors shared by every layer of torchedge.

Two families, kept apart on purpose: `TorchEdgeError` subclasses are the user's
problem (a bad file, a wrong input, an unsupported operator) and say what was
expected, what was found and where; `InternalError` marks a broken invariant
inside torchedge itself.
"""

__all__ = [
    "TorchEdgeError",
    "InvalidProgramError",
    "InputError",
    "OperatorMissingError",
    "MethodMissingError",
    "KernelError",
    "OutputMismatchError",
    "BackendMissingError",
    "MemoryPlanError",
    "ExportError",
    "InternalError",
]


class TorchEdgeError(Exception):
    """Base class of every error torchedge raises for bad input."""


class InvalidProgramError(TorchEdgeError, ValueError):
    """The bytes are not a valid `.pte` program (wrong identifier, truncated, corrupt)."""


class InputError(TorchEdgeError, ValueError):
    """Inputs given to `Method.execute` do not match the method's signature."""


class OperatorMissingError(TorchEdgeError, LookupError):
    """A program calls an operator for which no kernel is registered."""


class MethodMissingError(TorchEdgeError, LookupError):
    """A program has no method of the requested name."""


class KernelError(TorchEdgeError, RuntimeError):
    """A kernel failed while executing an instruction."""


class OutputMismatchError(TorchEdgeError, RuntimeError):
    """A method's outputs differ from the outputs its bundled test case expects."""


class BackendMissingError(TorchEdgeError, LookupError):
    """A program delegates to a backend that is not registered or not available."""


class MemoryPlanError(TorchEdgeError, ValueError):
    """A memory plan cannot be satisfied (for example a capacity is exceeded)."""


class ExportError(TorchEdgeError, ValueError):
    """The AOT compiler cannot lower a program (for example an unsupported operator)."""


class InternalError(Exception):
    """A broken invariant inside torchedge: please report it as a bug."""
