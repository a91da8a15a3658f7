"""Shape and data-movement operators: reshapes, transposes, expand, cat, split, pad, copies, casts.

Shapes are static: a reshape-like operator reshapes to its output's meta shape.
"""

from __future__ import annotations

import torch

from torchedge.backends.onnxruntime.builder import GraphBuilder
from torchedge.backends.onnxruntime.registry import NUMERIC, NodeArgs, lowers

__all__: list[str] = []  # translations register themselves; nothing to import

aten = torch.ops.aten


def _reshape(g: GraphBuilder, x: str, shape: list[int]) -> str:
    return g.emit("Reshape", [x, g.int64s(shape)], allowzero=1 if 0 in shape else None)


@lowers(aten.view_copy.default, aten._unsafe_view.default, aten.unsqueeze_copy.default,
        aten.squeeze_copy.default, aten.squeeze_copy.dim, aten.squeeze_copy.dims)
def _to_output_shape(g: GraphBuilder, a: NodeArgs) -> str:
    return _reshape(g, g.tensor(a["self"]), a.out_shape)


@lowers(aten.clone.default, aten.alias_copy.default, aten.detach_copy.default, aten.lift_fresh_copy.default)
def _identity(g: GraphBuilder, a: NodeArgs) -> str:
    return g.emit("Identity", [g.tensor(a["self"])])


@lowers(aten._to_copy.default)
def _to_copy(g: GraphBuilder, a: NodeArgs) -> str:
    """A dtype conversion (device, layout and memory format do not exist in the ONNX graph)."""
    return g.emit("Identity", [g.tensor(a["self"], a.out_dtype)])


def _transpose(g: GraphBuilder, a: NodeArgs, perm: list[int]) -> str:
    rank = a.rank()
    return g.emit("Transpose", [g.tensor(a["self"])], perm=[int(d) % rank for d in perm])


@lowers(aten.permute_copy.default)
def _permute(g: GraphBuilder, a: NodeArgs) -> str:
    return _transpose(g, a, a["dims"]) if a.rank() else _identity(g, a)


@lowers(aten.t_copy.default)
def _t(g: GraphBuilder, a: NodeArgs) -> str:
    return _transpose(g, a, [1, 0]) if a.rank() == 2 else _identity(g, a)


@lowers(aten.transpose_copy.int)
def _transpose_int(g: GraphBuilder, a: NodeArgs) -> str:
    rank = a.rank()
    if rank == 0:
        return _identity(g, a)
    perm = list(range(rank))
    i, j = int(a["dim0"]) % rank, int(a["dim1"]) % rank
    perm[i], perm[j] = perm[j], perm[i]
    return _transpose(g, a, perm)


@lowers(aten.expand_copy.default)
def _expand(g: GraphBuilder, a: NodeArgs) -> str:
    return g.emit("Expand", [g.tensor(a["self"]), g.int64s(a.out_shape)])


@lowers(aten.cat.default)
def _cat(g: GraphBuilder, a: NodeArgs) -> str:
    """Concat in the output dtype; 1-D empty inputs, which ``cat`` skips whatever their shape, are dropped."""
    rank = len(a.out_shape)
    parts = [t for t in a["tensors"] if rank == 1 or tuple(t.meta["val"].shape) != (0,)]
    return g.emit("Concat", [g.tensor(t, a.out_dtype) for t in parts], axis=int(a["dim"]) % rank)


@lowers(aten.split_with_sizes_copy.default, aten.split_copy.Tensor, aten.unbind_copy.int,
        check=lambda a: a.rank() >= 1 and len(a.out) >= 1)
def _split(g: GraphBuilder, a: NodeArgs) -> list[str]:
    """Split along ``dim`` into the node's outputs; ``unbind``'s parts then lose that dimension."""
    outs, rank = list(a.out), a.rank()
    dim = int(a["dim"]) % rank
    sizes = [int(o.shape[dim]) if o.dim() == rank else 1 for o in outs]
    parts = g.emit_multi("Split", [g.tensor(a["self"]), g.int64s(sizes)], len(outs), axis=dim)
    return [p if o.dim() == rank else _reshape(g, p, [int(s) for s in o.shape]) for p, o in zip(parts, outs)]


@lowers(aten.constant_pad_nd.default, dtypes=NUMERIC | {torch.bool, torch.uint8, torch.int8})
def _constant_pad(g: GraphBuilder, a: NodeArgs) -> str:
    """ATen pads the last dimension first, (begin, end) pairs; ONNX wants all begins, then all ends."""
    rank = a.rank()
    begins, ends = [0] * rank, [0] * rank
    pad = [int(p) for p in a["pad"]]
    for i in range(len(pad) // 2):
        begins[rank - 1 - i], ends[rank - 1 - i] = pad[2 * i], pad[2 * i + 1]
    dtype = a.out_dtype
    return g.emit("Pad", [g.tensor(a["self"]), g.int64s(begins + ends), g.scalar(a["value"], dtype)])

