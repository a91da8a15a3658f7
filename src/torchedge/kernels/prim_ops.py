"""Primitive operators of ExecuTorch programs: symbolic-size arithmetic and ``et_view``.

Scalar operators take Python numbers and return one, which the runtime stores in the
instruction's return slot; they follow Python semantics (as the ``executorch_prim``
definitions do), except that float division by zero gives ±inf or nan instead of raising,
as ExecuTorch's C++ runtime does.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from torchedge.errors import KernelError
from torchedge.kernels.allocator import allocate_output
from torchedge.kernels.registry import register_kernel

__all__ = [
    "sym_size",
    "sym_numel",
    "sym_stride",
    "sym_storage_offset",
    "sym_is_contiguous",
    "resize_",
    "local_scalar_dense",
    "et_view",
    "et_copy_index",
]


@register_kernel("aten::sym_size.int", returns_value=True)
def sym_size(self, dim):
    ndim = self.ndim
    if not -ndim <= dim < ndim:
        raise KernelError(f"aten::sym_size.int: dim {dim} is out of range for a tensor of {ndim} dims")
    return int(self.shape[dim])


@register_kernel("aten::sym_numel", returns_value=True)
def sym_numel(self):
    return int(self.size)


@register_kernel("aten::sym_stride.int", returns_value=True)
def sym_stride(self, dim):
    ndim = self.ndim
    if not -ndim <= dim < ndim:
        raise KernelError(f"aten::sym_stride.int: dim {dim} is out of range for a tensor of {ndim} dims")
    return int(self.strides[dim] // self.itemsize) if self.itemsize else 0


@register_kernel("aten::sym_storage_offset", returns_value=True)
def sym_storage_offset(self):
    return 0  # a .pte tensor starts at its data pointer (the format supports storage_offset 0 only)


@register_kernel("aten::sym_is_contiguous", returns_value=True)
def sym_is_contiguous(self, memory_format=0):
    if memory_format in (0, 1):  # contiguous, preserve
        return bool(self.flags.c_contiguous)
    raise KernelError(f"aten::sym_is_contiguous: memory format code {memory_format} is not supported")


@register_kernel("aten::resize_", data_dependent=True)
def resize_(self, size, memory_format=None):
    """A tensor of the new size keeping the old elements that fit (the runtime rebinds ``self``)."""
    resized = allocate_output(tuple(size), self.dtype)
    keep = min(resized.size, self.size)
    resized.reshape(-1)[:keep] = self.reshape(-1)[:keep]
    return resized


@register_kernel("aten::_local_scalar_dense", returns_value=True, value_from_data=True)
def local_scalar_dense(self):
    return self.item()


@register_kernel("executorch_prim::et_view.default", view=True)
def et_view(self, size, out):
    """A view of ``self`` with shape ``size`` (one -1 allowed), never a copy: the runtime
    binds the out slot to the returned array."""
    try:
        view = self.reshape(size)
    except (ValueError, TypeError):
        raise KernelError(
            f"executorch_prim::et_view.default: a tensor of shape {list(self.shape)} cannot be viewed as {list(size)}"
        ) from None
    if view.size and not np.shares_memory(view, self):
        raise KernelError(
            f"executorch_prim::et_view.default: a tensor with strides {self.strides} cannot be "
            f"viewed as {list(size)} without a copy"
        )
    return view


def _et_copy_index_shape(op: str, copy_to, copy_from, index) -> list[tuple]:
    if copy_to.ndim != copy_from.ndim + 1:
        raise KernelError(
            f"{op}: copy_to has rank {copy_to.ndim}, copy_from rank {copy_from.ndim}; they must differ by 1"
        )
    if index < 0:
        raise KernelError(f"{op}: index {index} is negative")
    if index > 0 and copy_to.shape[1:] != copy_from.shape:
        raise KernelError(
            f"{op}: copy_from has shape {list(copy_from.shape)}, the rows of copy_to {list(copy_to.shape[1:])}"
        )
    return [(index + 1, *copy_from.shape)]


@register_kernel("executorch_prim::et_copy_index.tensor", shape=_et_copy_index_shape, written_arg=0)
def et_copy_index(copy_to, copy_from, index):
    """Row ``index`` of ``copy_to`` becomes ``copy_from``, ``copy_to`` (dynamic) having been resized
    to ``index + 1`` rows first. The loops that `map` and `scan` compile to stack their results with it."""
    if copy_to.shape[0] <= index:
        raise KernelError(
            f"executorch_prim::et_copy_index.tensor: row {index} is outside copy_to of shape {list(copy_to.shape)}"
        )
    copy_to[index] = copy_from


def _ieee_divide(a, b) -> float:
    if b == 0:  # C++ double division: ±inf, or nan for 0/0 (the zero's sign counts)
        with np.errstate(all="ignore"):
            return float(np.float64(a) / np.float64(b))
    return a / b


def _floor_divide(a, b):
    if isinstance(a, int) and isinstance(b, int):
        if b == 0:
            raise KernelError("executorch_prim::floordiv.Scalar: integer division by zero")
        return a // b
    if b == 0:
        return math.copysign(math.inf, a)  # as ExecuTorch's floor_div_double
    return float(a // b)


def _modulo(a, b):
    if b == 0:
        raise KernelError("executorch_prim::mod.Scalar: modulo by zero")
    return a % b


_BINARY = {
    "executorch_prim::add.Scalar": operator.add,
    "executorch_prim::sub.Scalar": operator.sub,
    "executorch_prim::mul.Scalar": operator.mul,
    "executorch_prim::floordiv.Scalar": _floor_divide,
    "executorch_prim::truediv.Scalar": lambda a, b: _ieee_divide(float(a), float(b)),
    "executorch_prim::mod.Scalar": _modulo,
    "executorch_prim::eq.Scalar": operator.eq,
    "executorch_prim::gt.Scalar": operator.gt,
    "executorch_prim::lt.Scalar": operator.lt,
    "executorch_prim::ge.Scalar": operator.ge,
    "executorch_prim::le.Scalar": operator.le,
    "executorch_prim::sym_max.Scalar": max,
    "executorch_prim::sym_min.Scalar": min,
}

_UNARY = {
    "executorch_prim::neg.Scalar": operator.neg,
    "executorch_prim::sym_float.Scalar": float,
    "executorch_prim::sym_int.Scalar": int,
    "executorch_prim::ceil.Scalar": math.ceil,
    "executorch_prim::trunc.Scalar": math.trunc,
    "executorch_prim::round.Scalar": round,
    "executorch_prim::sym_not.Scalar": operator.not_,
}


def _kernel_name(op: str) -> str:
    return op[len("executorch_prim::") :].split(".")[0]


def _binary_kernel(op, fn):
    def kernel(a, b):
        return fn(a, b)

    kernel.__name__ = _kernel_name(op)
    return kernel


def _unary_kernel(op, fn):
    def kernel(a):
        return fn(a)

    kernel.__name__ = _kernel_name(op)
    return kernel


for _op, _binary in _BINARY.items():
    register_kernel(_op, returns_value=True)(_binary_kernel(_op, _binary))
for _op, _unary in _UNARY.items():
    register_kernel(_op, returns_value=True)(_unary_kernel(_op, _unary))


@register_kernel("executorch_prim::sym_ite.Scalar", returns_value=True)
def sym_ite(b, t, f):
    return t if b else f
