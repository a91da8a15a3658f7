"""Kernels that ExecuTorch's runtime registers and that programs built by ExecuTorch may call,
though torchedge's own compiler decomposes them away: copies (``detach_copy``,
``lift_fresh_copy``, the ``et_copy`` device copies), ``fill.Tensor``, ``linear``,
``pixel_shuffle``/``pixel_unshuffle``, ``split_copy``, ``stack``, ``_empty_dim_order``, and the
integer ``executorch_prim`` overloads ``floordiv.int``/``mod.int``.
"""

from __future__ import annotations

import numpy as np

from torchedge.errors import KernelError
from torchedge.kernels.dtypes import accumulate_dtype, result_type
from torchedge.kernels.portable.common import check, fail, quiet, wrap_dim, write
from torchedge.kernels.portable.linear_algebra import matmul_into
from torchedge.kernels.portable.shape_rules import broadcast_shapes, from_size, replaced, same_as
from torchedge.kernels.registry import register_kernel

__all__ = [
    "copy_into",
    "device_copy",
    "fill_tensor",
    "linear",
    "pixel_shuffle",
    "pixel_unshuffle",
    "split_copy",
    "stack",
    "empty_dim_order",
    "floordiv_int",
    "mod_int",
]


@register_kernel("aten::detach_copy.out", "aten::lift_fresh_copy.out", shape=same_as(), inplace_safe=True)
def copy_into(self, out):
    """A copy of ``self``."""
    write(out, self)


# The compiler maps inplace_safe operators to torch ops, which exist only once ExecuTorch's
# libraries are imported: these names carry no traits beyond their shape function.
@register_kernel("et_copy::_h2d_copy.out", "et_copy::_d2h_copy.out", shape=same_as())
def device_copy(self, out):
    """The CPU is both host and device: a copy of ``self``."""
    write(out, self)


@register_kernel("aten::fill.Tensor_out", shape=same_as())
def fill_tensor(self, value, out):
    check(value.ndim == 0, "aten::fill.Tensor_out", f"value must be a 0-dim tensor, got {value.ndim} dims")
    write(out, value)


def _linear_shape(op: str, input, weight, bias, out) -> list[tuple]:
    check(weight.ndim in (1, 2), op, f"weight must be 1-D or 2-D, got shape {list(weight.shape)}")
    check(input.ndim >= 1, op, "input must have at least one dimension")
    check(
        input.shape[-1] == weight.shape[-1],
        op,
        f"input of shape {list(input.shape)} and weight of shape {list(weight.shape)} cannot be multiplied",
    )
    shape = input.shape[:-1] + weight.shape[:-1]
    if bias is not None:
        broadcast_shapes(op, bias.shape, shape)
    return [shape]


@register_kernel("aten::linear.out", shape=_linear_shape)
def linear(input, weight, bias, out):
    """``input @ weight.T + bias``."""
    _linear_shape("aten::linear.out", input, weight, bias, out)
    dtype = result_type(input, weight) if bias is None else result_type(input, weight, bias)
    if weight.ndim == 2:
        buf = matmul_into(input, weight.T, out, dtype)
    else:
        with quiet():
            buf = np.matmul(input, weight, dtype=accumulate_dtype(dtype), casting="unsafe")
    if bias is not None:
        with quiet():
            buf = np.add(buf, bias, dtype=buf.dtype, casting="unsafe")
    if buf is not out:
        write(out, buf)


def _pixel_dims(op: str, self, factor, name: str) -> tuple:
    """(channels, height, width) of a pixel (un)shuffle's input, its ``name`` factor checked positive."""
    if self.ndim < 3:
        fail(op, f"expects at least 3 dims, got shape {list(self.shape)}")
    if factor <= 0:
        fail(op, f"{name} must be positive, got {factor}")
    return self.shape[-3:]


def _pixel_shuffle_shape(op: str, self, factor, out) -> list[tuple]:
    channels, height, width = _pixel_dims(op, self, factor, "upscale_factor")
    check(channels % (factor * factor) == 0, op, f"channels {channels} not divisible by {factor * factor}")
    return [self.shape[:-3] + (channels // (factor * factor), height * factor, width * factor)]


@register_kernel("aten::pixel_shuffle.out", shape=_pixel_shuffle_shape)
def pixel_shuffle(self, upscale_factor, out):
    _pixel_shuffle_shape("aten::pixel_shuffle.out", self, upscale_factor, out)
    r = upscale_factor
    lead = self.shape[:-3]
    c, h, w = self.shape[-3:]
    n = len(lead)
    x = self.reshape(lead + (c // (r * r), r, r, h, w))
    x = x.transpose(tuple(range(n)) + (n, n + 3, n + 1, n + 4, n + 2))
    write(out, x.reshape(out.shape))


def _pixel_unshuffle_shape(op: str, self, factor, out) -> list[tuple]:
    channels, height, width = _pixel_dims(op, self, factor, "downscale_factor")
    check(
        height % factor == 0 and width % factor == 0,
        op,
        f"height {height} and width {width} must be divisible by {factor}",
    )
    return [self.shape[:-3] + (channels * factor * factor, height // factor, width // factor)]


@register_kernel("aten::pixel_unshuffle.out", shape=_pixel_unshuffle_shape)
def pixel_unshuffle(self, downscale_factor, out):
    _pixel_unshuffle_shape("aten::pixel_unshuffle.out", self, downscale_factor, out)
    r = downscale_factor
    lead = self.shape[:-3]
    c, h, w = self.shape[-3:]
    n = len(lead)
    x = self.reshape(lead + (c, h // r, r, w // r, r))
    x = x.transpose(tuple(range(n)) + (n, n + 2, n + 4, n + 1, n + 3))
    write(out, x.reshape(out.shape))


def _split_sizes(op: str, self, split_size: int, dim: int) -> tuple[int, list[int]]:
    check(self.ndim > 0, op, "cannot split a 0-dim tensor")
    axis = wrap_dim(dim, self.ndim, op)
    length = self.shape[axis]
    check(split_size >= 0, op, f"split_size must be non-negative, got {split_size}")
    if split_size == 0:
        check(length == 0, op, f"split_size 0 can only split an empty dimension, got size {length}")
        return axis, [0]
    chunks = max(1, -(-length // split_size))
    return axis, [min(split_size, length - i * split_size) for i in range(chunks)]


def _split_copy_shape(op: str, self, split_size, dim, *out) -> list[tuple]:
    axis, sizes = _split_sizes(op, self, split_size, dim)
    return [replaced(self.shape, axis, size) for size in sizes]


@register_kernel("aten::split_copy.Tensor_out", shape=_split_copy_shape)
def split_copy(self, split_size, dim, out):
    op = "aten::split_copy.Tensor_out"
    axis, sizes = _split_sizes(op, self, split_size, dim)
    check(len(out) == len(sizes), op, f"splits into {len(sizes)} pieces, got {len(out)} outputs")
    start = 0
    for size, piece in zip(sizes, out):
        index = (slice(None),) * axis + (slice(start, start + size),)
        write(piece, self[index])
        start += size


def _stack_shape(op: str, tensors, dim, out) -> list[tuple]:
    check(len(tensors) > 0, op, "expects a non-empty list of tensors")
    first = tensors[0].shape
    for t in tensors:
        check(t.shape == first, op, f"all tensors must have the same shape, got {[list(t.shape) for t in tensors]}")
    axis = wrap_dim(dim, len(first) + 1, op)
    return [first[:axis] + (len(tensors),) + first[axis:]]


@register_kernel("aten::stack.out", shape=_stack_shape)
def stack(tensors, dim, out):
    op = "aten::stack.out"
    _stack_shape(op, tensors, dim, out)
    axis = wrap_dim(dim, tensors[0].ndim + 1, op)
    for i, t in enumerate(tensors):
        write(out[(slice(None),) * axis + (slice(i, i + 1),)], np.expand_dims(t, axis))


def _empty_dim_order_shape(op: str, size, dim_order, out) -> list[tuple]:
    if dim_order is not None:
        check(
            sorted(dim_order) == list(range(len(size))),
            op,
            f"dim_order {list(dim_order)} is not a permutation of {len(size)} dims",
        )
    return from_size(op, size)


@register_kernel("dim_order_ops::_empty_dim_order.out", shape=_empty_dim_order_shape)
def empty_dim_order(size, dim_order, out):
    """An uninitialized tensor: the planned out is the result; nothing to write."""
    _empty_dim_order_shape("dim_order_ops::_empty_dim_order.out", size, dim_order, out)


def _int_operands(op: str, a, b) -> None:
    if not (isinstance(a, int) and isinstance(b, int)):
        raise KernelError(f"{op}: expects two ints, got {type(a).__name__} and {type(b).__name__}")
    if b == 0:
        raise KernelError(f"{op}: integer division by zero")


@register_kernel("executorch_prim::floordiv.int", returns_value=True)
def floordiv_int(a, b):
    """C++ ``a / b`` on int64, as ExecuTorch computes it: the quotient truncated toward zero."""
    _int_operands("executorch_prim::floordiv.int", a, b)
    quotient = abs(a) // abs(b)
    return quotient if (a < 0) == (b < 0) else -quotient


@register_kernel("executorch_prim::mod.int", returns_value=True)
def mod_int(a, b):
    """C++ ``a % b`` on int64: the remainder takes the sign of ``a``."""
    _int_operands("executorch_prim::mod.int", a, b)
    return a - b * floordiv_int(a, b)
