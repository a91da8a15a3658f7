"""The kernel registry: operator name (``"aten::add.out"``) -> Python kernel.

Kernel contract
---------------
A kernel is a plain function whose positional parameters are the arguments of
the operator's schema, in schema order, including kwarg-only ones and the
``out`` tensor(s) of out variants. The runtime resolves every argument from the
method's value table before the call:

* Tensor -> ``numpy.ndarray`` (a view into planned memory, or a read-only
  constant); Int -> ``int``; Double -> ``float``; Bool -> ``bool``;
  Null -> ``None``; String -> ``str``; IntList -> ``tuple[int, ...]``;
  DoubleList/BoolList -> ``tuple``; TensorList -> ``list[ndarray]``;
  OptionalTensorList -> ``list[ndarray | None]``; dtype arguments arrive as
  the ``int`` ScalarType code.

Out-variant kernels write their result into the ``out`` array(s) in place and
return nothing. Operators whose output shape depends on the data (``nonzero``,
``masked_select``, ``unique``...) are the exception: their ``out`` is planned
for an upper bound or not planned at all (``None``, a DYNAMIC_UNBOUND tensor), so
they allocate their result with `allocate_output` and return it; the runtime
rebinds the out value to the returned array (for several outs, a tuple in
schema order). Operators that produce a non-tensor value (``aten::sym_size.int``,
``executorch_prim::add.Scalar``, ...) return it, and the runtime stores it in the
instruction's return slot.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable

from torchedge.errors import OperatorMissingError

__all__ = ["Kernel", "register_kernel", "get_kernel", "has_kernel", "registered_operators"]


@dataclass(frozen=True)
class Kernel:
    """A registered kernel and how many schema arguments it takes."""

    name: str
    fn: Callable
    num_args: int


_KERNELS: dict[str, Kernel] = {}


def register_kernel(*op_names: str):
    """Decorator registering ``fn`` as the kernel of each ``"ns::op.overload"`` name.

    A later registration of the same name replaces the earlier one, so users can
    override the portable kernels with their own.
    """

    def decorate(fn: Callable) -> Callable:
        params = inspect.signature(fn).parameters.values()
        if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
            raise TypeError(f"kernel {fn.__name__} must list its schema arguments, not *args")
        num_args = sum(1 for p in params if p.kind is not inspect.Parameter.KEYWORD_ONLY)
        for name in op_names:
            _KERNELS[name] = Kernel(name, fn, num_args)
        return fn

    return decorate


def _ensure_portable_loaded() -> None:
    # Importing the portable and quantized libraries registers their kernels.
    import torchedge.kernels.portable  # noqa: F401
    import torchedge.kernels.quantized  # noqa: F401


def get_kernel(op_name: str) -> Kernel:
    """Return the kernel for ``op_name`` or raise `OperatorMissingError` naming it."""
    _ensure_portable_loaded()
    kernel = _KERNELS.get(op_name)
    if kernel is None:
        raise OperatorMissingError(f"no kernel registered for operator '{op_name}'")
    return kernel


def has_kernel(op_name: str) -> bool:
    _ensure_portable_loaded()
    return op_name in _KERNELS


def registered_operators() -> list[str]:
    _ensure_portable_loaded()
    return sorted(_KERNELS)
