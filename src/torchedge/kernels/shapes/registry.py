"""The shape-function registry: operator name (``"aten::add.out"``) -> output shapes.

Shape function contract
-----------------------
A shape function takes exactly the positional arguments of the operator's kernel (see
`torchedge.kernels.registry`), out tensors included, and returns one shape tuple per
output tensor in schema order (a ``Tensor[]`` out gives one per element). It computes
them from the inputs' shapes and the scalar arguments only: the out arrays still have
the shape they were planned with (an upper bound), so a shape function never reads
their shapes (it may read their dtypes). It reads no tensor data (one exception: a
boolean mask index of ``index.Tensor`` sets the output size by its number of true values)
and raises `KernelError` naming the operator when the shapes cannot be combined. An out
that a backward op's ``output_mask`` turns off is left alone by the kernel; its shape is
(0,), empty.

>>> import numpy as np
>>> output_shapes("aten::add.out", [np.ones((2, 1)), np.ones(3), 1, np.empty(0)])
[(2, 3)]
"""

from __future__ import annotations

import functools
from typing import Callable

from torchedge.errors import OperatorMissingError

__all__ = ["register_shape", "register_named", "has_shape_function", "output_shapes", "shape_operators"]

_SHAPES: dict[str, Callable] = {}


def register_shape(*op_names: str):
    """Decorator registering ``fn(*kernel_args)`` as the shape function of each name.

    A later registration of the same name replaces the earlier one, as for kernels.
    """

    def decorate(fn: Callable) -> Callable:
        for name in op_names:
            _SHAPES[name] = fn
        return fn

    return decorate


def register_named(*op_names: str, bind: tuple = ()):
    """Decorator registering ``fn(op, *bind, *kernel_args)`` for each name, with ``op``
    bound to that name (so that errors name the operator) and ``bind`` to what a family
    table says about it (its number of outs, its spatial dims...)."""

    def decorate(fn: Callable) -> Callable:
        for name in op_names:
            _SHAPES[name] = functools.partial(fn, name, *bind)
        return fn

    return decorate


def has_shape_function(op_name: str) -> bool:
    return op_name in _SHAPES


def output_shapes(op_name: str, args: list) -> list[tuple[int, ...]]:
    """The shape of every output of ``op_name`` called with the kernel arguments ``args``."""
    fn = _SHAPES.get(op_name)
    if fn is None:
        raise OperatorMissingError(f"no shape function registered for operator '{op_name}': dynamic shapes need "
                                   "one to size its outputs (see torchedge.kernels.shapes.register_shape)")
    return fn(*args)


def shape_operators() -> list[str]:
    """Every operator name that has a shape function, sorted."""
    return sorted(_SHAPES)
