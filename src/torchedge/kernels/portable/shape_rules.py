"""Shape rules shared by the operators' shape functions: broadcasting, the shape of one
input, reducing and replacing dims. Each operator picks its rule where it registers its
kernel (`torchedge.kernels.registry.register_kernel`)."""

from __future__ import annotations

import numpy as np

from torchedge.errors import KernelError
from torchedge.kernels.portable.common import check, wrap_dims

__all__ = [
    "broadcast_shapes",
    "tensor_shapes",
    "reduced",
    "replaced",
    "masked",
    "broadcast_inputs",
    "same_as",
    "from_size",
]


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
                    raise KernelError(
                        f"{op}: shapes {', '.join(str(list(s)) for s in shapes)} cannot be broadcast together"
                    )
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
    return shape[:axis] + sizes + shape[axis + 1 :]


def masked(output_mask, shapes) -> list[tuple]:
    """Backward ops compute only the gradients ``output_mask`` asks for; the outs of the
    others are left alone, and are empty: (0,)."""
    return [shape if wanted else (0,) for wanted, shape in zip(output_mask, shapes)]


def broadcast_inputs(op: str, *args) -> list[tuple]:
    """Elementwise operators, unary, binary and ternary alike: the broadcast shape of every
    tensor input. Python numbers (``.Scalar`` overloads, alpha, clamp's bounds) take no part,
    and a ``Tensor?`` left out is None. The out is the kernel's last argument."""
    return [broadcast_shapes(op, *tensor_shapes(args[:-1]))]


def same_as(position: int = 0, outs: int = 1):
    """The rule "each of the ``outs`` outputs has the shape of the input at ``position``"
    (copies, casts, scans, orderings, in-place-style updates, pooling gradients...)."""

    def same_shape(op: str, *args) -> list[tuple]:
        return [args[position].shape] * outs

    return same_shape


def from_size(op: str, size, *rest) -> list[tuple]:
    """Tensors made from a size (always the first argument): that size is the shape."""
    check(min(size, default=0) >= 0, op, f"size {list(size)} must not be negative")
    return [tuple(size)]
