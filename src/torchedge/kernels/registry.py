"""The operator registry: operator name (``"aten::add.out"``) -> kernel, shape function and traits.

Each operator has one home: the kernel module that registers it, under its full literal
name, together with its shape function and its traits::

    @register_kernel("aten::relu.out", shape=broadcast_inputs, inplace_safe=True)
    def relu(self, out): ...

Libraries
---------
Kernels come in libraries, as in ExecuTorch: ``portable`` (`torchedge.kernels.portable`,
one plain algorithm per operator: the reference), ``optimized``
(`torchedge.kernels.optimized`: faster strategies and the fused operators, registered with
``library="optimized"``) and ``user`` (any other module: a user's own kernels). `get_kernel`
returns the kernel of the highest library that has one (user, then optimized, then
portable); ``get_kernel(name, library="portable")`` returns the reference. An override keeps
the shape function and traits of the operator unless it gives its own.

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
``masked_select``, ``unique``...) are the exception (``data_dependent``): their
``out`` is planned for an upper bound or not planned at all (``None``, a
DYNAMIC_UNBOUND tensor), so they allocate their result with `allocate_output` and
return it; the runtime rebinds the out value to the returned array (for several
outs, a tuple in schema order). Operators that produce a non-tensor value
(``aten::sym_size.int``, ``executorch_prim::add.Scalar``, ...; ``returns_value``)
return it, and the runtime stores it in the instruction's return slot.

Shape function contract
-----------------------
With bounded dynamic shapes the runtime resizes each ``out`` array before the kernel
runs, to the shapes the operator's shape function computes. A shape function is
called as ``shape(op_name, *kernel_args)`` (the registry binds the name, so that errors
name the operator) and returns one shape tuple per output tensor in schema order (a
``Tensor[]`` out gives one per element). It computes them from the inputs' shapes and
the scalar arguments only: the out arrays still have their planned (upper-bound)
shape, so it never reads their shapes (it may read their dtypes). It reads no tensor
data (one exception: a boolean mask index of ``index.Tensor`` sets the output size by
its number of true values) and raises `KernelError` naming the operator when the
shapes cannot be combined. An out that a backward op's ``output_mask`` turns off is
left alone by the kernel; its shape is (0,), empty.

>>> import numpy as np
>>> output_shapes("aten::add.out", [np.ones((2, 1)), np.ones(3), 1, np.empty(0)])
[(2, 3)]
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from torchedge.errors import OperatorMissingError

__all__ = [
    "Kernel",
    "OpTraits",
    "LIBRARIES",
    "register_kernel",
    "get_kernel",
    "kernel_library",
    "has_kernel",
    "registered_operators",
    "op_traits",
    "registering_module",
    "has_shape_function",
    "output_shapes",
    "shape_operators",
    "KernelList",
    "read_selected_operators",
]


@dataclass(frozen=True)
class Kernel:
    """A registered kernel and how many schema arguments it takes."""

    name: str
    fn: Callable
    num_args: int


@dataclass(frozen=True)
class OpTraits:
    """What the executor and the memory planner need to know about an operator.

    An operator with a tensor out has a ``shape`` function, unless it is
    ``data_dependent``; ``returns_value``, ``checks_only`` and ``view`` operators have no out to size.
    """

    shape: Callable | None = None  # shape(*kernel_args) -> output shapes, the op name bound
    data_dependent: bool = False  # allocates and returns its result: its size depends on the data
    returns_value: bool = False  # no out tensor: returns a Python scalar
    checks_only: bool = False  # no out tensor and no value: it raises or does nothing (``_linalg_check_errors``)
    value_from_data: bool = False  # that scalar is read from tensor data, so later sizes may depend on it
    view: bool = False  # returns a view of its input that the runtime binds as it is
    inplace_safe: bool = False  # correct when out aliases self (same shape and dtype), element by element
    mask_index_arg: int | None = None  # the index list at this argument sizes the output by its masks' counts
    written_arg: int | None = None  # the tensor written is this argument (default: the last one, the out)


LIBRARIES = ("portable", "optimized", "user")  # lowest precedence first

_KERNELS: dict[str, Kernel] = {}  # the kernel of the highest library, per operator
_MODULES: dict[str, str] = {}  # the module that registered it
_LIBRARY_OF: dict[str, str] = {}  # and its library
_LIBRARY_KERNELS: dict[tuple[str, str], tuple[Kernel, str]] = {}  # (library, operator) -> kernel, module
_TRAITS: dict[str, OpTraits] = {}
_NO_TRAITS = OpTraits()


def _default_library(module: str) -> str:
    if module.startswith("torchedge.kernels.optimized."):
        return "optimized"
    return "portable" if module.startswith("torchedge.kernels.") else "user"


def register_kernel(*op_names: str, shape: Callable | None = None, library: str | None = None, **traits):
    """Decorator registering ``fn`` as the kernel of each ``"ns::op.overload"`` name in
    ``library`` (default: ``optimized`` for modules of `torchedge.kernels.optimized`,
    ``portable`` for the other modules of `torchedge.kernels`, ``user`` for everyone else),
    with its shape function ``shape(op_name, *kernel_args)`` and its `OpTraits` flags.

    A later registration of the same name in the same library replaces the earlier kernel;
    a library of higher precedence overrides the lower ones (see Libraries). The traits are
    the operator's, whatever the library: a registration replaces them when it gives a shape
    function or a trait, and keeps them otherwise.
    """
    module = sys._getframe(1).f_globals.get("__name__", "")
    library = _default_library(module) if library is None else library
    if library not in LIBRARIES:
        raise ValueError(f"unknown kernel library {library!r}: expected one of {list(LIBRARIES)}")

    def decorate(fn: Callable) -> Callable:
        params = inspect.signature(fn).parameters.values()
        if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
            raise TypeError(f"kernel {fn.__name__} must list its schema arguments, not *args")
        num_args = sum(1 for p in params if p.kind is not inspect.Parameter.KEYWORD_ONLY)
        for name in op_names:
            kernel = Kernel(name, fn, num_args)
            _LIBRARY_KERNELS[library, name] = kernel, module
            if LIBRARIES.index(library) >= LIBRARIES.index(_LIBRARY_OF.get(name, library)):
                _KERNELS[name], _MODULES[name], _LIBRARY_OF[name] = kernel, module, library
            if shape is not None or traits:
                bound = functools.partial(shape, name) if shape is not None else None
                _TRAITS[name] = OpTraits(shape=bound, **traits)
        return fn

    return decorate


def _ensure_portable_loaded() -> None:
    # Importing the kernel libraries registers their kernels: portable first, then the
    # optimized overrides.
    import torchedge.kernels.optimized  # noqa: F401
    import torchedge.kernels.portable  # noqa: F401
    import torchedge.kernels.quantized  # noqa: F401


def get_kernel(op_name: str, library: str | None = None) -> Kernel:
    """The kernel for ``op_name``: that of the highest library that has one, or that of
    ``library``. Raises `OperatorMissingError` naming the operator when there is none."""
    _ensure_portable_loaded()
    kernel = _KERNELS.get(op_name) if library is None else _LIBRARY_KERNELS.get((library, op_name), (None,))[0]
    if kernel is None:
        where = "" if library is None else f" in the {library!r} kernel library"
        raise OperatorMissingError(f"no kernel registered for operator '{op_name}'{where}")
    return kernel


def kernel_library(op_name: str) -> str:
    """The library whose kernel `get_kernel` returns for ``op_name``."""
    _ensure_portable_loaded()
    return _LIBRARY_OF[op_name]


def has_kernel(op_name: str) -> bool:
    _ensure_portable_loaded()
    return op_name in _KERNELS


def registered_operators(library: str | None = None) -> list[str]:
    """Every operator with a kernel (in ``library``, if given), sorted."""
    _ensure_portable_loaded()
    if library is None:
        return sorted(_KERNELS)
    return sorted(name for lib, name in _LIBRARY_KERNELS if lib == library)


def op_traits(op_name: str) -> OpTraits:
    """The traits of ``op_name``; an operator registered without any has none set."""
    _ensure_portable_loaded()
    return _TRAITS.get(op_name, _NO_TRAITS)


def registering_module(op_name: str, library: str | None = None) -> str:
    """The name of the module whose `register_kernel` call registered the kernel `get_kernel`
    returns for ``op_name`` (or that of ``library``)."""
    _ensure_portable_loaded()
    return _MODULES[op_name] if library is None else _LIBRARY_KERNELS[library, op_name][1]


def has_shape_function(op_name: str) -> bool:
    return op_traits(op_name).shape is not None


def output_shapes(op_name: str, args: list) -> list[tuple[int, ...]]:
    """The shape of every output of ``op_name`` called with the kernel arguments ``args``."""
    shape = op_traits(op_name).shape
    if shape is None:
        raise OperatorMissingError(
            f"no shape function registered for operator '{op_name}': dynamic shapes need "
            "one to size its outputs (register_kernel(..., shape=...))"
        )
    return shape(*args)


def shape_operators() -> list[str]:
    """Every operator name that has a shape function, sorted."""
    _ensure_portable_loaded()
    return sorted(name for name, traits in _TRAITS.items() if traits.shape is not None)


def read_selected_operators(path) -> list[str] | None:
    """The operator names of an ExecuTorch selected-operators YAML file (``torchedge kernels
    --oplist``, ExecuTorch's ``gen_oplist``): the keys of its ``operators`` mapping, or None when
    it sets ``include_all_operators: true`` (every operator). Parsed with PyYAML when installed,
    else by reading the ``operators:`` block of the block-style YAML those tools write."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise OperatorMissingError(f"cannot read the operator list '{os.fspath(path)}': {e.strerror or e}") from None
    try:
        import yaml  # optional at run time: the fallback reads what the tools write
    except ImportError:
        document = _read_block_yaml(text)
    else:
        try:
            document = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise OperatorMissingError(f"'{os.fspath(path)}' is not YAML: {e}") from None
    if not isinstance(document, dict) or not isinstance(document.get("operators", {}), (dict, list, type(None))):
        raise OperatorMissingError(
            f"'{os.fspath(path)}' is not a selected-operators file: expected a mapping with an 'operators' mapping"
        )
    if document.get("include_all_operators") is True:
        return None
    return sorted(str(name) for name in document.get("operators") or {})


def _read_block_yaml(text: str) -> dict:
    """The ``include_all_operators`` flag and ``operators`` keys of block-style YAML (no PyYAML)."""
    document: dict = {"operators": {}}
    section = None
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line[0].isspace():
            key, _, value = line.partition(":")
            section = key.strip()
            if section == "include_all_operators":
                document[section] = value.strip().lower() == "true"
        elif section == "operators" and line.startswith("  ") and not line[2].isspace() and line.rstrip().endswith(":"):
            document["operators"][line.strip()[:-1].strip("'\"")] = {}
    return document


class KernelList:
    """The operators a runtime is restricted to (`Runtime.get(kernels=[...])`): a list of names
    (``"aten::add.out"``) or the path of a selected-operators YAML file (`read_selected_operators`).
    ``lookup`` resolves the kernels of the listed operators; others are refused by name."""

    def __init__(self, operators: Iterable[str] | str | os.PathLike, lookup: Callable[[str], Kernel] = get_kernel):
        if isinstance(operators, (str, os.PathLike)):
            names = read_selected_operators(operators)
            self.source = f"the operator list '{os.fspath(operators)}'"
        else:
            names = [str(name) for name in operators]
            self.source = "the runtime's kernel list"
        self.operators: frozenset[str] | None = None if names is None else frozenset(names)
        self._lookup = lookup

    def allows(self, op_name: str) -> bool:
        return self.operators is None or op_name in self.operators

    def missing(self, op_names: Iterable[str]) -> list[str]:
        """The operators among ``op_names`` the list leaves out, sorted."""
        return sorted({name for name in op_names if not self.allows(name)})

    def describe(self) -> str:
        if self.operators is None:
            return f"{self.source} (every operator)"
        shown = sorted(self.operators)
        more = f", ... ({len(shown)} in all)" if len(shown) > 12 else ""
        return f"{self.source} ({', '.join(shown[:12]) or 'no operators'}{more})"

    def check(self, method: str, op_names: Iterable[str]) -> None:
        """Raise `OperatorMissingError` naming the operators ``method`` needs beyond the list."""
        missing = self.missing(op_names)
        if missing:
            raise OperatorMissingError(
                f"method '{method}' needs operator(s) {', '.join(repr(m) for m in missing)}, "
                f"which are not in {self.describe()}"
            )

    def __call__(self, op_name: str) -> Kernel:
        if not self.allows(op_name):
            raise OperatorMissingError(f"operator '{op_name}' is not in {self.describe()}")
        return self._lookup(op_name)
