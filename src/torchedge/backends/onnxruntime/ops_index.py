"""Indexing operators: slice, select, embedding, index_select and single-tensor ``index``."""

from __future__ import annotations

import torch

from torchedge.backends.onnxruntime.builder import GraphBuilder
from torchedge.backends.onnxruntime.registry import NodeArgs, lowers

__all__: list[str] = []  # translations register themselves; nothing to import

aten = torch.ops.aten

_INT64_MAX = 2**63 - 1
_INDEX_DTYPES = (torch.int32, torch.int64)


def _gather(g: GraphBuilder, data, indices: str, axis: int) -> str:
    return g.emit("Gather", [g.tensor(data), indices], axis=int(axis))


@lowers(aten.slice_copy.Tensor, check=lambda a: a.rank() >= 1)
def _slice(g: GraphBuilder, a: NodeArgs) -> str:
    start = 0 if a["start"] is None else int(a["start"])
    end = _INT64_MAX if a["end"] is None else min(int(a["end"]), _INT64_MAX)
    inputs = [g.tensor(a["self"]), g.int64s([start]), g.int64s([end]), g.int64s([int(a["dim"]) % a.rank()]),
              g.int64s([int(a["step"])])]
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


def _single_index(a: NodeArgs) -> int | None:
    """The position of the only index tensor of ``x[..., idx, ...]`` (an integer one), else None."""
    present = [i for i, t in enumerate(a["indices"]) if t is not None]
    if len(present) != 1 or a["indices"][present[0]].meta["val"].dtype not in _INDEX_DTYPES:
        return None
    return present[0]


@lowers(aten.index.Tensor, check=lambda a: _single_index(a) is not None)
def _index(g: GraphBuilder, a: NodeArgs) -> str:
    """One integer index tensor at dimension k is a Gather along k (the output shape agrees)."""
    k = _single_index(a)
    return _gather(g, a["self"], g.tensor(a["indices"][k]), k)
