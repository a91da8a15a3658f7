"""Indexing operators: slice, select, embedding, index_select, ``index`` and ``as_strided_copy``."""

from __future__ import annotations

import math

import numpy as np
import torch

from torchedge.backends.onnxruntime.builder import GraphBuilder
from torchedge.backends.onnxruntime.registry import NodeArgs, lowers

__all__: list[str] = []  # translations register themselves; nothing to import

aten = torch.ops.aten

_INT64_MAX = 2**63 - 1
_INDEX_DTYPES = (torch.int32, torch.int64)


def _gather(g: GraphBuilder, data, indices: str, axis: int) -> str:
    return g.emit("Gather", [g.tensor(data), indices], axis=int(axis))


def _static_bounds(a: NodeArgs) -> bool:
    return a.rank() >= 1 and all(a[name] is None or isinstance(a[name], int) for name in ("start", "end"))


@lowers(aten.slice_copy.Tensor, check=_static_bounds, dynamic_rows=True)
def _slice(g: GraphBuilder, a: NodeArgs) -> str:
    start = 0 if a["start"] is None else int(a["start"])
    end = _INT64_MAX if a["end"] is None else min(int(a["end"]), _INT64_MAX)
    inputs = [
        g.tensor(a["self"]),
        g.int64s([start]),
        g.int64s([end]),
        g.int64s([int(a["dim"]) % a.rank()]),
        g.int64s([int(a["step"])]),
    ]
    return g.emit("Slice", inputs)


@lowers(aten.select_copy.int, check=lambda a: a.rank() >= 1)
def _select(g: GraphBuilder, a: NodeArgs) -> str:
    """Gather with a 0-d index drops the dimension, as ``select`` does."""
    return _gather(g, a["self"], g.scalar(int(a["index"]), torch.int64), int(a["dim"]) % a.rank())


@lowers(aten.embedding.default, check=lambda a: a.val("indices").dtype in _INDEX_DTYPES)
def _embedding(g: GraphBuilder, a: NodeArgs) -> str:
    return _gather(g, a["weight"], g.tensor(a["indices"]), 0)


@lowers(aten.index_select.default, check=lambda a: a.val("index").dtype in _INDEX_DTYPES and a.rank() >= 1)
def _index_select(g: GraphBuilder, a: NodeArgs) -> str:
    return _gather(g, a["self"], g.tensor(a["index"]), int(a["dim"]) % a.rank())


def _index_positions(a: NodeArgs) -> list[int] | None:
    """The dims that ``x[..., idx, ...]`` indexes with integer tensors (None entries are whole
    dims), or None when some index is not an integer tensor (a boolean mask selects a number
    of elements only the data decides)."""
    present = [i for i, t in enumerate(a["indices"]) if t is not None]
    if not present or any(a["indices"][i].meta["val"].dtype not in _INDEX_DTYPES for i in present):
        return None
    return present


@lowers(aten.index.Tensor, check=lambda a: _index_positions(a) is not None)
def _index(g: GraphBuilder, a: NodeArgs) -> str:
    """ATen's advanced indexing. One index tensor at dim k is a Gather along k. Several are
    broadcast together, made non-negative and stacked, and one GatherND reads the indexed
    dims moved to the front; the broadcast dims lead the result, unless the indexed dims are
    adjacent, where ATen puts them in place of those dims."""
    dims = _index_positions(a)
    if len(dims) == 1:
        return _gather(g, a["self"], g.tensor(a["indices"][dims[0]]), dims[0])
    rank, sizes = a.rank(), a.val("self").shape
    rest = [d for d in range(rank) if d not in dims]
    data = (
        g.tensor(a["self"])
        if dims + rest == list(range(rank))
        else g.emit("Transpose", [g.tensor(a["self"])], perm=dims + rest)
    )
    tensors = [a["indices"][d] for d in dims]
    shape = list(torch.broadcast_shapes(*(t.meta["val"].shape for t in tensors)))
    stacked = [_nonnegative(g, g.tensor(t, torch.int64), int(sizes[d]), shape) for t, d in zip(tensors, dims)]
    result = g.emit("GatherND", [data, g.emit("Concat", stacked, axis=-1)])
    if dims != list(range(dims[0], dims[-1] + 1)) or dims[0] == 0:
        return result
    batch, before = len(shape), dims[0]  # [broadcast dims, rest] -> [rest before, broadcast dims, rest after]
    perm = list(range(batch, batch + before)) + list(range(batch)) + list(range(batch + before, batch + len(rest)))
    return g.emit("Transpose", [result], perm=perm)


def _nonnegative(g: GraphBuilder, index: str, size: int, shape: list[int]) -> str:
    """An int64 index tensor with ``size`` added to its negative entries, broadcast to
    ``shape`` plus a trailing unit dim (one column of GatherND's index tuples)."""
    wrapped = g.emit(
        "Where",
        [g.emit("Less", [index, g.scalar(0, torch.int64)]), g.emit("Add", [index, g.scalar(size, torch.int64)]), index],
    )
    return g.emit("Unsqueeze", [g.emit("Expand", [wrapped, g.int64s(shape)]), g.int64s([-1])])


def _strided_offsets(a: NodeArgs) -> np.ndarray | None:
    """The flat input offset every output element of ``as_strided_copy`` reads (as the
    portable kernel does: strides in elements over the input in memory order), or None where
    the kernel refuses (negative strides or offset, a window reaching past the input)."""
    size, stride, offset = list(a["size"]), list(a["stride"]), a["storage_offset"] or 0
    if len(size) != len(stride) or min(stride, default=0) < 0 or offset < 0:
        return None
    last = offset + sum((n - 1) * s for n, s in zip(size, stride))
    numel = math.prod(a.val("self").shape)
    if 0 not in size and last >= numel:
        return None
    offsets = np.full([int(n) for n in size], offset, dtype=np.int64)
    for d, (n, s) in enumerate(zip(size, stride)):
        offsets += (np.arange(n, dtype=np.int64) * s).reshape([-1] + [1] * (len(size) - d - 1))
    return offsets.astype(np.int32) if numel < 2**31 else offsets


@lowers(aten.as_strided_copy.default, check=lambda a: _strided_offsets(a) is not None)
def _as_strided(g: GraphBuilder, a: NodeArgs) -> str:
    """One Gather from the flattened input at the offsets of the strided window."""
    flat = g.emit("Reshape", [g.tensor(a["self"]), g.int64s([-1])])
    return g.emit("Gather", [flat, g.constant(_strided_offsets(a), hint="strided_offsets")], axis=0)
