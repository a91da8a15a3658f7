"""Slicing, joining and padding: select, slice, cat, split, constant/reflection/replication pads."""

from __future__ import annotations

from torchedge.kernels.shapes.common import check, replaced, wrap_dim
from torchedge.kernels.shapes.registry import register_named

__all__ = ["select", "slice_", "cat", "split_with_sizes", "padded", "constant_pad", "border_pad"]


@register_named("aten::select_copy.int_out")
def select(op: str, self, dim, index, out) -> list[tuple]:
    check(self.ndim > 0, op, "cannot select from a 0-dim tensor")
    axis = wrap_dim(dim, self.ndim, op)
    size = self.shape[axis]
    check(-size <= index < size, op, f"index {index} is out of range for dimension {dim} of size {size}")
    return [replaced(self.shape, axis)]


@register_named("aten::slice_copy.Tensor_out")
def slice_(op: str, self, dim, start, end, step, out) -> list[tuple]:
    """start and end count from the end when negative, default to the whole dim when None
    and are clamped to it, as ATen does; Python's slice rules are the same for step > 0."""
    check(self.ndim > 0, op, "cannot slice a 0-dim tensor")
    check(step > 0, op, f"slice step must be positive, got {step}")
    axis = wrap_dim(dim, self.ndim, op)
    return [replaced(self.shape, axis, len(range(*slice(start, end, step).indices(self.shape[axis]))))]


@register_named("aten::cat.out")
def cat(op: str, tensors, dim, out) -> list[tuple]:
    """The sizes along ``dim`` add up; the other dims must agree. 1-D empty tensors are
    skipped, as in ATen."""
    check(len(tensors) > 0, op, "expected a non-empty list of tensors")
    shapes = [t.shape for t in tensors if t.shape != (0,)]
    if not shapes:
        return [(0,)]
    first = shapes[0]
    check(len(first) > 0, op, "zero-dimensional tensors cannot be concatenated")
    axis = wrap_dim(dim, len(first), op)
    for shape in shapes:
        check(len(shape) == len(first) and replaced(shape, axis) == replaced(first, axis), op,
              f"tensors of shapes {[list(s) for s in shapes]} must match except in dimension {dim}")
    return [replaced(first, axis, sum(s[axis] for s in shapes))]


@register_named("aten::split_with_sizes_copy.out")
def split_with_sizes(op: str, self, split_sizes, dim, out) -> list[tuple]:
    axis = wrap_dim(dim, self.ndim, op)
    check(min(split_sizes, default=0) >= 0 and sum(split_sizes) == self.shape[axis], op,
          f"split_sizes {list(split_sizes)} must be non-negative and sum to {self.shape[axis]} (dim {dim})")
    return [replaced(self.shape, axis, size) for size in split_sizes]


def padded(op: str, shape: tuple, pad) -> tuple:
    """``shape`` padded by ``pad``: (before, after) pairs from the last dim backwards;
    negative amounts crop."""
    check(len(pad) % 2 == 0 and len(pad) // 2 <= len(shape), op,
          f"pad {list(pad)} must hold (before, after) pairs for at most {len(shape)} dims")
    result = list(shape)
    for i in range(len(pad) // 2):
        axis = len(shape) - 1 - i
        result[axis] += pad[2 * i] + pad[2 * i + 1]
        check(result[axis] >= 0, op, f"pad {list(pad)} leaves dimension {axis} of shape {list(shape)} with a "
                                     "negative size")
    return tuple(result)


@register_named("aten::constant_pad_nd.out")
def constant_pad(op: str, self, pad, value, out) -> list[tuple]:
    return [padded(op, self.shape, pad)]


def border_pad(op: str, dims: int, self, padding, out) -> list[tuple]:
    """Reflection and replication padding of the last ``dims`` dims of a batched or
    unbatched input; the padded dims must keep some size."""
    check(len(padding) == 2 * dims, op, f"padding must have {2 * dims} values, got {list(padding)}")
    check(self.ndim in (dims + 1, dims + 2), op,
          f"expected a {dims + 1}-D or {dims + 2}-D input, got shape {list(self.shape)}")
    shape = padded(op, self.shape, padding)
    check(min(shape[-dims:]) > 0, op, f"padding {list(padding)} leaves nothing of input shape {list(self.shape)}")
    return [shape]


for _dims in (1, 2, 3):
    register_named(f"aten::reflection_pad{_dims}d.out", f"aten::replication_pad{_dims}d.out", bind=(_dims,))(border_pad)
