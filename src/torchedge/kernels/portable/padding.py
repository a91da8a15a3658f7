"""Reflection and replication padding of the trailing 1-3 dims.

``padding`` lists (before, after) pairs starting from the last dim, as in
``torch.nn.functional.pad``; negative amounts crop. Along each dim an output position
reads one input position: mirrored without repeating the edge, or clamped to it. The
input is copied into the middle of ``out`` once; then, dim by dim from the innermost,
the border slabs are filled from the part of ``out`` already written.
"""

from __future__ import annotations

import numpy as np

from torchedge.kernels.portable.common import fail, write
from torchedge.kernels.portable.slicing import padded
from torchedge.kernels.registry import register_kernel

__all__ = ["pad_indices", "pad"]


def pad_indices(size: int, before: int, after: int, mode: str) -> np.ndarray:
    """Input index of every output position along one dim padded by ``before``/``after``."""
    i = np.arange(-before, size + after)
    if mode == "reflect":
        i = np.abs(i)
        return np.where(i >= size, 2 * (size - 1) - i, i)
    return np.clip(i, 0, size - 1)


def _padded_shape(op: str, dims: int, x, padding) -> tuple:
    """The shape of a batched or unbatched input padded in its last ``dims`` dims, which must
    keep some size: the checks of the shape function and the kernels."""
    if len(padding) != 2 * dims:
        fail(op, f"padding must have {2 * dims} values, got {list(padding)}")
    if x.ndim not in (dims + 1, dims + 2):
        fail(op, f"expected a {dims + 1}-D or {dims + 2}-D input, got shape {list(x.shape)}")
    shape = padded(op, x.shape, padding)
    if min(shape[-dims:]) <= 0:
        fail(op, f"padding {list(padding)} leaves nothing of input shape {list(x.shape)}")
    return shape


def pad(op: str, mode: str, dims: int, x: np.ndarray, padding, out: np.ndarray) -> None:
    if 0 in x.shape[1:]:
        fail(op, f"expected a non-empty {dims + 1}-D or {dims + 2}-D input, got shape {list(x.shape)}")
    shape = _padded_shape(op, dims, x, padding)
    lead = x.ndim - dims
    amounts = [(padding[2 * (dims - 1 - d)], padding[2 * (dims - 1 - d) + 1]) for d in range(dims)]
    maps = []
    for d, (before, after) in enumerate(amounts):
        size = x.shape[lead + d]
        if mode == "reflect" and max(before, after) >= size:
            fail(op, f"padding ({before}, {after}) must be less than the size ({size}) of dim {d - dims}")
        maps.append(pad_indices(size, before, after, mode))
    if out.shape != shape:
        fail(op, f"out has shape {list(out.shape)}, expected {list(shape)}")
    inner = [(max(b, 0), max(b, 0) + len(m) - max(b, 0) - max(a, 0)) for (b, a), m in zip(amounts, maps)]
    borders_read_inside = all(
        ((m[:start] + b >= start) & (m[:start] + b < stop)).all()
        and ((m[stop:] + b >= start) & (m[stop:] + b < stop)).all()
        for (b, _), m, (start, stop) in zip(amounts, maps, inner)
    )
    if not borders_read_inside:  # a crop removed what a border mirrors: gather everything at once
        index = [slice(None)] * lead + [m.reshape((-1,) + (1,) * (dims - 1 - d)) for d, m in enumerate(maps)]
        write(out, x[tuple(index)])
        return
    middle = tuple(slice(start, stop) for start, stop in inner)
    source = tuple(slice(max(-b, 0), max(-b, 0) + stop - start) for (b, _), (start, stop) in zip(amounts, inner))
    write(out[(Ellipsis,) + middle], x[(Ellipsis,) + source])
    for d in reversed(range(dims)):  # innermost first; outer dims only over their middle
        (before, _), m, (start, stop) = amounts[d], maps[d], inner[d]
        region = out[(Ellipsis,) + middle[:d] + (slice(None),) + (slice(None),) * (dims - 1 - d)]
        for border in (slice(0, start), slice(stop, len(m))):
            if border.stop > border.start:
                region[(Ellipsis, border) + (slice(None),) * (dims - 1 - d)] = np.take(
                    region, m[border] + before, axis=region.ndim - dims + d
                )


def _border_pad_shape(dims: int):
    """The shape rule of reflection and replication padding of the last ``dims`` dims of a
    batched or unbatched input; the padded dims must keep some size."""

    def border_pad(op: str, self, padding, out) -> list[tuple]:
        return [_padded_shape(op, dims, self, padding)]

    return border_pad


def _pad_kernel(op: str, mode: str, dims: int):
    def kernel(self, padding, out):
        pad(op, mode, dims, self, padding, out)

    kernel.__name__ = op[len("aten::") :].split(".")[0]
    kernel.__doc__ = f"{kernel.__name__.split('_')[0].capitalize()} padding of the last {dims} dim(s)."
    return register_kernel(op, shape=_border_pad_shape(dims))(kernel)


reflection_pad1d = _pad_kernel("aten::reflection_pad1d.out", "reflect", 1)
reflection_pad2d = _pad_kernel("aten::reflection_pad2d.out", "reflect", 2)
reflection_pad3d = _pad_kernel("aten::reflection_pad3d.out", "reflect", 3)
replication_pad1d = _pad_kernel("aten::replication_pad1d.out", "replicate", 1)
replication_pad2d = _pad_kernel("aten::replication_pad2d.out", "replicate", 2)
replication_pad3d = _pad_kernel("aten::replication_pad3d.out", "replicate", 3)
