"""Kernels of the fused recurrent cells (``torchedge_fused::lstm_cell`` / ``gru_cell``).

``torch.export`` unrolls ``nn.LSTM`` and ``nn.GRU`` into about sixteen small operators per
timestep (select the step's input projection, project the hidden state, split the gates,
sigmoids, tanhs, products and sums, on a few hundred elements), where the time goes to calling
kernels rather than to arithmetic. The ``recurrent`` fusion rule (`torchedge.fusion.rules_recurrent`)
replaces each step with one of these kernels, at load or ahead of time: a step's input gates are
``input_gates[step]`` (or all of ``input_gates`` when ``step`` is -1), its hidden gates
``hidden @ weight + hidden_gates`` (or ``hidden_gates`` itself when there is no weight, as on
a first step whose projection constant folding computed). Each runs the same float32 / float64
operations, in the same order, as the portable kernels of the chain it replaces (``addmm``
included), so a fused program computes the same bits as the unfused one.
"""

from __future__ import annotations

import functools

import numpy as np

from torchedge.kernels.optimized.fused import NAMESPACE, check_float
from torchedge.kernels.optimized.prepared import prepared
from torchedge.kernels.portable.common import fail, quiet
from torchedge.kernels.portable.unary import _sigmoid
from torchedge.kernels.registry import register_kernel

__all__ = ["lstm_cell", "gru_cell", "lstm_step", "gru_step"]


def _gate_shapes(op: str, input_gates, hidden_gates, hidden, weight, step) -> tuple[tuple, tuple]:
    """The shapes of a step's input gates and hidden gates (see the module docstring)."""
    shape = input_gates.shape
    if step >= 0:
        if not shape or step >= shape[0]:
            fail(op, f"step {step} is out of range for input gates of shape {list(shape)}")
        shape = shape[1:]
    if weight is None:
        return shape, hidden_gates.shape
    if hidden is None or hidden.ndim < 1 or weight.ndim != 2 or weight.shape[0] != hidden.shape[-1]:
        fail(
            op,
            f"expects a hidden state [..., H] and a weight [H, gates], got "
            f"{None if hidden is None else list(hidden.shape)} and {list(weight.shape)}",
        )
    if hidden_gates.shape not in ((weight.shape[1],), (1, weight.shape[1])):
        fail(op, f"expects a bias of {weight.shape[1]} values, got shape {list(hidden_gates.shape)}")
    return shape, hidden.shape[:-1] + weight.shape[1:]


@functools.lru_cache(maxsize=256)  # a program's steps repeat a few shape combinations: check each once
def _step_shape(op: str, gates: int, input_shape: tuple, hidden_shape: tuple, state: tuple) -> tuple[int, tuple]:
    """The hidden size and the broadcast shape of the step's state."""
    width = input_shape[-1] if input_shape else 0
    size = width // gates
    if not (
        input_shape
        and hidden_shape
        and width % gates == 0
        and hidden_shape[-1] == width
        and (not state or state[-1] in (1, size))
    ):
        fail(
            op,
            f"expects gates of {gates} x hidden size in the last dim and a state of the hidden size, got "
            f"{list(input_shape)}, {list(hidden_shape)} and {list(state)}",
        )
    try:
        return size, np.broadcast_shapes(input_shape[:-1] + (size,), hidden_shape[:-1] + (size,), state)
    except ValueError:
        fail(op, f"shapes {list(input_shape)}, {list(hidden_shape)}, {list(state)} do not broadcast")


def _gates(input_gates, hidden_gates, hidden, weight, step) -> tuple[np.ndarray, np.ndarray]:
    """The step's input and hidden gates as arrays: ``addmm``'s float32 arithmetic for the latter."""
    if step >= 0:
        input_gates = input_gates[step]
    if weight is None:
        return input_gates, hidden_gates
    projected = np.matmul(hidden.reshape(-1, hidden.shape[-1]), weight)
    projected += hidden_gates
    return input_gates, projected.reshape(hidden.shape[:-1] + weight.shape[1:])


def _check_outs(op: str, shape: tuple, *outs) -> None:
    """Outs must have the step's shape exactly (a ufunc would broadcast into a larger one)."""
    for out in outs:
        if out.shape != shape:
            fail(op, f"out must have shape {list(shape)}, got {list(out.shape)}")


def _lstm_cell_shape(op: str, input_gates, hidden_gates, cell, hidden, weight, step, out0, out1) -> list[tuple]:
    shapes = _gate_shapes(op, input_gates, hidden_gates, hidden, weight, step)
    shape = _step_shape(op, 4, *shapes, cell.shape)[1]
    return [shape, shape]


def _prepare_lstm_cell(input_gates, hidden_gates, cell, hidden, weight, step, out0, out1):
    """`lstm_cell`'s checks; its arithmetic."""
    op = f"{NAMESPACE}::lstm_cell.out"
    check_float(op, input_gates, hidden_gates, cell, hidden, weight, out0, out1)
    shapes = _gate_shapes(op, input_gates, hidden_gates, hidden, weight, step)
    size, shape = _step_shape(op, 4, *shapes, cell.shape)
    _check_outs(op, shape, out0, out1)
    return functools.partial(lstm_step, size=size)


@register_kernel("torchedge_fused::lstm_cell.out", shape=_lstm_cell_shape)
@prepared(_prepare_lstm_cell)
def lstm_cell(input_gates, hidden_gates, cell, hidden, weight, step, out0, out1):
    """``i, f, g, o = split(input gates + hidden gates, 4)``; ``cell' = σ(f)·cell + σ(i)·tanh(g)``,
    ``hidden' = σ(o)·tanh(cell')``: writes hidden' to out0 and cell' to out1."""
    with quiet():
        arguments = (input_gates, hidden_gates, cell, hidden, weight, step, out0, out1)
        _prepare_lstm_cell(*arguments)(*arguments)


def lstm_step(input_gates, hidden_gates, cell, hidden, weight, step: int, out0, out1, *, size: int) -> None:
    """`lstm_cell`'s arithmetic on arguments it has checked (``size``: the hidden size)."""
    x, h = _gates(input_gates, hidden_gates, hidden, weight, step)
    gates = np.add(h, x)
    activated = np.empty_like(gates)
    _sigmoid(gates, activated)  # σ over all four gates: the g gate's is not used
    candidate = np.tanh(gates[..., 2 * size : 3 * size])
    np.multiply(activated[..., size : 2 * size], cell, out=out1)
    np.multiply(activated[..., :size], candidate, out=candidate)
    out1 += candidate
    cell_tanh = np.tanh(out1, out=candidate if candidate.shape == out1.shape else None)
    np.multiply(activated[..., 3 * size :], cell_tanh, out=out0)


def _gru_cell_shape(op: str, input_gates, hidden_gates, hidden, weight, step, out) -> list[tuple]:
    shapes = _gate_shapes(op, input_gates, hidden_gates, hidden, weight, step)
    return [_step_shape(op, 3, *shapes, hidden.shape)[1]]


def _prepare_gru_cell(input_gates, hidden_gates, hidden, weight, step, out):
    """`gru_cell`'s checks; its arithmetic."""
    op = f"{NAMESPACE}::gru_cell.out"
    check_float(op, input_gates, hidden_gates, hidden, weight, out)
    shapes = _gate_shapes(op, input_gates, hidden_gates, hidden, weight, step)
    size, shape = _step_shape(op, 3, *shapes, hidden.shape)
    _check_outs(op, shape, out)
    return functools.partial(gru_step, size=size)


@register_kernel("torchedge_fused::gru_cell.out", shape=_gru_cell_shape)
@prepared(_prepare_gru_cell)
def gru_cell(input_gates, hidden_gates, hidden, weight, step, out):
    """``r = σ(h_r + x_r)``, ``z = σ(h_z + x_z)``, ``n = tanh(x_n + h_n·r)``,
    ``hidden' = (hidden - n)·z + n``, the gates split in three along the last dim."""
    with quiet():
        arguments = (input_gates, hidden_gates, hidden, weight, step, out)
        _prepare_gru_cell(*arguments)(*arguments)


def gru_step(input_gates, hidden_gates, hidden, weight, step: int, out, *, size: int) -> None:
    """`gru_cell`'s arithmetic on arguments it has checked (``size``: the hidden size)."""
    x, h = _gates(input_gates, hidden_gates, hidden, weight, step)
    gates = np.add(h[..., : 2 * size], x[..., : 2 * size])
    _sigmoid(gates, gates)  # r and z together
    candidate = np.multiply(h[..., 2 * size :], gates[..., :size])
    np.add(x[..., 2 * size :], candidate, out=candidate)
    np.tanh(candidate, out=candidate)
    np.subtract(hidden, candidate, out=out)
    out *= gates[..., size:]
    out += candidate
