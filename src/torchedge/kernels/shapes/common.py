"""Helpers shared by the shape functions: broadcasting, reducing and replacing dims."""

from __future__ import annotations

import numpy as np

from torchedge.errors import KernelError
from torchedge.kernels.portable.common import check, wrap_dim, wrap_dims

__all__ = ["check", "wrap_dim", "wrap_dims", "broadcast_shapes", "tensor_shapes", "reduced", "replaced", "masked"]


def broadcast_shapes(op: str, *shapes: tuple) -> tuple:
    """The shape ``shapes`` broadcast to (NumPy's and ATen's rule: trailing dims align, and
    each dim is equal or 1; a 1 against a 0 gives 0)."""
    first = shapes[0] if shapes else ()
    if all(shape == first for shape in shapes):  # the common case, at once
        return first
    result = [1] * max(map(len, shapes))
    for shape in shapes:
        for i, n in enumerate(shape, len(result) - len(shape)):
            if n != 1 and result[i] != n:
                if result[i] != 1:
                    raise KernelError(f"{op}: shapes {', '.join(str(list(s)) for s in shapes)} cannot be broadcast "
                                      "together")
                result[i] = n
    return tuple(result)


def tensor_shapes(values) -> list[tuple]:
    """The shapes of the arrays among ``values`` (numbers, None and options are passed over)."""
    return [v.shape for v in values if isinstance(v, np.ndarray)]


def reduced(op: str, shape: tuple, dims, keepdim: bool) -> tuple:
    """``shape`` reduced over ``dims`` (an int, a list, or None or [] for every dim), the
    reduced dims kept as 1 with ``keepdim``."""
    axes = wrap_dims((dims,) if isinstance(dims, int) else dims, len(shape), op)
    if keepdim:
        return tuple(1 if d in axes else n for d, n in enumerate(shape))
    return tuple(n for d, n in enumerate(shape) if d not in axes)


def replaced(shape: tuple, axis: int, *sizes: int) -> tuple:
    """``shape`` with dim ``axis`` replaced by ``sizes`` (none: the dim is removed)."""
    return shape[:axis] + sizes + shape[axis + 1:]


def masked(output_mask, shapes) -> list[tuple]:
    """Backward ops compute only the gradients ``output_mask`` asks for; the outs of the
    others are left alone, and are empty: (0,)."""
    return [shape if wanted else (0,) for wanted, shape in zip(output_mask, shapes)]
