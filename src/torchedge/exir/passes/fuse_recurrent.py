"""Kernel fusion of recurrent cells: each unrolled LSTM or GRU timestep becomes one
``torchedge_fused::lstm_cell`` or ``gru_cell``.

``torch.export`` decomposes ``nn.LSTM`` per timestep into the step's slice of the layer's input
projections (``squeeze_copy(slice_copy(...))``), the hidden projection
(``view_copy(addmm(bias, view_copy(hidden), weight))``), ``add`` of the two, a split in four
along the last dim, ``sigmoid`` / ``tanh`` of the chunks and the products and sums of the new
cell and hidden state; ``nn.GRU`` into splits of the two projections in three, two ``sigmoid``
gates, a ``tanh`` candidate and the interpolation ``(hidden - n) * z + n``. Each matcher starts
at a split, follows exactly that structure (each intermediate used only inside the step) and
replaces it, taking the slice and the hidden projection in when they have that form (the
layer's input projection, one GEMM over all steps, stays). A GRU's first step, whose hidden
projection constant folding has already split into three constants, stays unfused.
"""

from __future__ import annotations

import math
import operator

import torch

from torchedge.exir.passes.fusion_matching import (
    is_call,
    is_float_tensor,
    meta_val,
    only_user,
    replace_with_fused,
    replace_with_fused_results,
    shape_of,
)

__all__ = ["RECURRENT_SPLITS", "fuse_recurrent"]

_aten = torch.ops.aten
RECURRENT_SPLITS = (_aten.split_with_sizes_copy.default, _aten.split_copy.Tensor)


def _chunks(split: torch.fx.Node, count: int) -> list | None:
    """The getitem nodes of a split of its input's last dim into ``count`` equal chunks, each used
    once, in chunk order; None when the split is anything else."""
    source = split.args[0]
    dim = split.args[2] if len(split.args) > 2 else split.kwargs.get("dim", 0)
    if not is_float_tensor(source) or len(split.args) < 2:
        return None
    shape = meta_val(source).shape
    width = shape[-1] if len(shape) else None
    if not isinstance(width, int) or width % count or dim not in (-1, len(shape) - 1):
        return None
    sizes = split.args[1]
    expected = [width // count] * count
    if (list(sizes) if isinstance(sizes, (list, tuple)) else [sizes] * count) != expected:
        return None
    by_index: dict[int, torch.fx.Node] = {}
    for user in split.users:
        index = user.args[1] if is_call(user, operator.getitem) else None
        if not isinstance(index, int):
            return None
        by_index[index] = user
    if sorted(by_index) != list(range(count)) or len(by_index) != len(split.users):
        return None
    items = [by_index[i] for i in range(count)]
    return items if all(len(n.users) == 1 for n in items) else None


def _projection(node, width: int):
    """``(hidden, weight, bias, nodes)`` when ``node`` is a step's hidden projection as exported,
    ``view_copy(addmm(bias, view_copy(hidden, [rows, H]), weight), [*hidden.shape[:-1], width])``
    with each intermediate used once; else None."""
    if not is_call(node, _aten.view_copy.default) or len(node.users) != 1:
        return None
    product = node.args[0]
    if not is_call(product, _aten.addmm.default) or len(product.args) != 3 or product.kwargs:
        return None
    bias, flat, weight = product.args
    if len(product.users) != 1 or not is_call(flat, _aten.view_copy.default) or len(flat.users) != 1:
        return None
    hidden = flat.args[0]
    if not all(is_float_tensor(n) and all(isinstance(d, int) for d in shape_of(n)) for n in (hidden, weight, bias)):
        return None
    rows, size = shape_of(hidden)[:-1], shape_of(hidden)[-1:]
    if (
        shape_of(flat) != (math.prod(rows),) + size
        or shape_of(node) != rows + (width,)
        or shape_of(weight) != size + (width,)
        or shape_of(bias) not in ((width,), (1, width))
    ):
        return None
    return hidden, weight, bias, [node, product, flat]


def _selected(node):
    """``(projections, step, nodes)`` when ``node`` is ``projections[step]`` as exported,
    ``squeeze_copy(slice_copy(projections, 0, step, step + 1), [0])`` with the slice used once;
    else ``(node, -1, [])``."""
    if not is_call(node, _aten.squeeze_copy.dims) or list(node.args[1]) != [0] or len(node.users) != 1:
        return node, -1, []
    piece = node.args[0]
    if not is_call(piece, _aten.slice_copy.Tensor) or len(piece.users) != 1 or piece.kwargs:
        return node, -1, []
    source, dim, start, end = (list(piece.args) + [0, None, None])[:4]
    step = piece.args[4] if len(piece.args) > 4 else 1
    start = 0 if start is None else start
    if dim != 0 or step != 1 or not isinstance(start, int) or end != start + 1 or not is_float_tensor(source):
        return node, -1, []
    length = shape_of(source)[0] if shape_of(source) else None
    if not isinstance(length, int) or not 0 <= start < length:
        return node, -1, []
    return source, start, [node, piece]


def _binary(node, target, operand) -> torch.fx.Node | None:
    """The other operand of ``target(operand, other)`` or ``target(other, operand)``, for a
    two-argument call without ``alpha``; None when ``node`` is not such a call."""
    if not is_call(node, target) or len(node.args) != 2 or node.kwargs:
        return None
    first, second = node.args
    if first is operand:
        return second
    return first if second is operand else None


def _activation(node, target) -> torch.fx.Node | None:
    """The single-use ``target(node)`` that is node's only user."""
    user = only_user(node)
    return user if is_call(user, target) and len(user.users) == 1 else None


def _same_float(*nodes) -> bool:
    return all(is_float_tensor(n) for n in nodes) and len({meta_val(n).dtype for n in nodes}) == 1


def _fuse_lstm(graph: torch.fx.Graph, split: torch.fx.Node, ops: dict) -> bool:
    items = _chunks(split, 4)
    gates = split.args[0]
    if items is None or not is_call(gates, _aten.add.Tensor) or len(gates.args) != 2 or gates.kwargs:
        return False
    if len(gates.users) != 1:
        return False
    input_sig, forget_sig = _activation(items[0], _aten.sigmoid.default), _activation(items[1], _aten.sigmoid.default)
    candidate, output_sig = _activation(items[2], _aten.tanh.default), _activation(items[3], _aten.sigmoid.default)
    if None in (input_sig, forget_sig, candidate, output_sig):
        return False
    forget_mul, input_mul = only_user(forget_sig), only_user(input_sig)
    cell = _binary(forget_mul, _aten.mul.Tensor, forget_sig)
    if cell is None or _binary(input_mul, _aten.mul.Tensor, input_sig) is not candidate:
        return False
    new_cell = only_user(forget_mul)
    if only_user(input_mul) is not new_cell or _binary(new_cell, _aten.add.Tensor, forget_mul) is not input_mul:
        return False
    cell_tanh = next((u for u in new_cell.users if is_call(u, _aten.tanh.default) and len(u.users) == 1), None)
    new_hidden = only_user(cell_tanh) if cell_tanh is not None else None
    if _binary(new_hidden, _aten.mul.Tensor, output_sig) is not cell_tanh or only_user(output_sig) is not new_hidden:
        return False
    if not _same_float(*gates.args, cell, new_cell, new_hidden):
        return False
    if meta_val(new_cell).shape != meta_val(new_hidden).shape:
        return False
    width = shape_of(gates)[-1]
    hidden_gates, input_gates = gates.args
    if _projection(input_gates, width) is not None or _selected(hidden_gates)[2]:
        input_gates, hidden_gates = gates.args  # the add's operands the other way round
    projection = _projection(hidden_gates, width)
    hidden, weight, absorbed = None, None, []
    if projection is not None:
        hidden, weight, hidden_gates, absorbed = projection
    input_gates, step, selected = _selected(input_gates)
    args = (input_gates, hidden_gates, cell, hidden, weight, step)
    matched = [new_hidden, cell_tanh, new_cell, input_mul, forget_mul, output_sig, candidate, forget_sig, input_sig]
    matched += [*items, split, gates, *absorbed, *selected]
    replace_with_fused_results(graph, [new_hidden, new_cell], ops["lstm_cell"], args, matched)
    return True


def _fuse_gru(graph: torch.fx.Graph, split: torch.fx.Node, ops: dict) -> bool:
    hidden_items = _chunks(split, 3)
    if hidden_items is None:
        return False
    reset_add, update_add, hidden_n = only_user(hidden_items[0]), only_user(hidden_items[1]), hidden_items[2]
    x_r = _binary(reset_add, _aten.add.Tensor, hidden_items[0])
    x_z = _binary(update_add, _aten.add.Tensor, hidden_items[1])
    reset, update = _activation(reset_add, _aten.sigmoid.default), _activation(update_add, _aten.sigmoid.default)
    if None in (x_r, x_z, reset, update):
        return False
    gated = only_user(hidden_n)
    if _binary(gated, _aten.mul.Tensor, hidden_n) is not reset or only_user(reset) is not gated:
        return False
    candidate_add = only_user(gated)
    x_n = _binary(candidate_add, _aten.add.Tensor, gated)
    candidate = only_user(candidate_add) if x_n is not None else None
    if not is_call(candidate, _aten.tanh.default) or len(candidate.users) != 2:
        return False
    difference = next((u for u in candidate.users if is_call(u, _aten.sub.Tensor)), None)
    if difference is None or len(difference.args) != 2 or difference.kwargs or difference.args[1] is not candidate:
        return False
    hidden = difference.args[0]
    interpolated = only_user(difference)
    if _binary(interpolated, _aten.mul.Tensor, difference) is not update or only_user(update) is not interpolated:
        return False
    new_hidden = only_user(interpolated)
    if _binary(new_hidden, _aten.add.Tensor, interpolated) is not candidate or set(candidate.users) != {
        difference,
        new_hidden,
    }:
        return False
    if not all(is_call(x, operator.getitem) for x in (x_r, x_z, x_n)) or len({x.args[0] for x in (x_r, x_z, x_n)}) != 1:
        return False
    input_split = x_r.args[0]
    if not is_call(input_split, *RECURRENT_SPLITS) or _chunks(input_split, 3) != [x_r, x_z, x_n]:
        return False
    input_gates, hidden_gates = input_split.args[0], split.args[0]
    if not _same_float(input_gates, hidden_gates, hidden, new_hidden):
        return False
    weight, absorbed = None, []
    projection = _projection(hidden_gates, shape_of(hidden_gates)[-1])
    if projection is not None and projection[0] is hidden:  # the projected state is the one carried on
        _, weight, hidden_gates, absorbed = projection
    input_gates, step, selected = _selected(input_gates)
    matched = [interpolated, difference, candidate, candidate_add, gated, reset, update, reset_add, update_add]
    matched += [*hidden_items, split, x_r, x_z, x_n, input_split, *absorbed, *selected]
    args = (input_gates, hidden_gates, hidden, weight, step)
    replace_with_fused(graph, new_hidden, ops["gru_cell"], args, [new_hidden, *matched])
    return True


def fuse_recurrent(graph: torch.fx.Graph, split: torch.fx.Node, ops: dict) -> bool:
    """Fuse the LSTM or GRU step whose gates ``split`` divides (see the module docstring)."""
    return _fuse_lstm(graph, split, ops) or _fuse_gru(graph, split, ops)
