"""Kernels of the fused recurrent cells (``torchedge_fused::lstm_cell`` / ``gru_cell``).

``torch.export`` unrolls ``nn.LSTM`` and ``nn.GRU`` into a dozen small operators per timestep
(split the gates, sigmoids, tanhs, products and sums on a few hundred elements), where the
time goes to calling kernels rather than to arithmetic. The compiler replaces each step's
gate arithmetic with one of these kernels (`torchedge.exir.passes.fuse_recurrent`, with
``fuse_kernels=True``); the projections stay ``addmm``. Each runs the same float32 / float64
operations, in the same order, as the portable kernels of the chain it replaces, so a fused
program computes the same bits as the unfused one.
"""

from __future__ import annotations

import numpy as np

from torchedge.kernels.portable.common import fail, quiet
from torchedge.kernels.portable.fused import NAMESPACE, check_float
from torchedge.kernels.portable.unary import _sigmoid
from torchedge.kernels.registry import register_kernel

__all__ = ["lstm_cell", "gru_cell"]


def _gate_size(op: str, gates: int, input_gates, hidden_gates, state) -> int:
    """The hidden size: the gates' last dim holds ``gates`` chunks of it."""
    width = input_gates.shape[-1] if input_gates.ndim else 0
    size = width // gates
    if not (
        input_gates.ndim >= 1
        and hidden_gates.ndim >= 1
        and width % gates == 0
        and hidden_gates.shape[-1] == width
        and (state.ndim == 0 or state.shape[-1] in (1, size))
    ):
        fail(
            op,
            f"expects gates of {gates} x hidden size in the last dim and a state of the hidden size, got "
            f"{list(input_gates.shape)}, {list(hidden_gates.shape)} and {list(state.shape)}",
        )
    return size


def _step_shape(op: str, gates: int, input_gates, hidden_gates, state) -> tuple:
    """The broadcast shape of one step's state: the gates' shapes with their last dim split."""
    size = _gate_size(op, gates, input_gates, hidden_gates, state)
    try:
        return np.broadcast_shapes(input_gates.shape[:-1] + (size,), hidden_gates.shape[:-1] + (size,), state.shape)
    except ValueError:
        fail(op, f"shapes {list(input_gates.shape)}, {list(hidden_gates.shape)}, {list(state.shape)} do not broadcast")


def _check_out_shape(op: str, shape: tuple, *outs) -> None:
    """Outs must have the step's shape exactly (a ufunc would broadcast into a larger one)."""
    for out in outs:
        if out.shape != shape:
            fail(op, f"out must have shape {list(shape)}, got {list(out.shape)}")


def _lstm_cell_shape(op: str, input_gates, hidden_gates, cell, out0, out1) -> list[tuple]:
    shape = _step_shape(op, 4, input_gates, hidden_gates, cell)
    return [shape, shape]


@register_kernel("torchedge_fused::lstm_cell.out", shape=_lstm_cell_shape)
def lstm_cell(input_gates, hidden_gates, cell, out0, out1):
    """``i, f, g, o = split(input_gates + hidden_gates, 4)``; ``cell' = σ(f)·cell + σ(i)·tanh(g)``,
    ``hidden' = σ(o)·tanh(cell')``: writes hidden' to out0 and cell' to out1."""
    op = f"{NAMESPACE}::lstm_cell.out"
    check_float(op, input_gates, hidden_gates, cell, out0, out1)
    size = _gate_size(op, 4, input_gates, hidden_gates, cell)
    gates = np.add(hidden_gates, input_gates)
    same_shapes = cell.shape == out1.shape == out0.shape and gates.shape[:-1] == out1.shape[:-1]
    if not same_shapes:  # broadcasting: the outs must have the broadcast shape
        _check_out_shape(op, _step_shape(op, 4, input_gates, hidden_gates, cell), out0, out1)
    with quiet():
        activated = np.empty_like(gates)
        _sigmoid(gates, activated)  # σ over all four gates: the g gate's is not used
        candidate = np.tanh(gates[..., 2 * size : 3 * size])
        np.multiply(activated[..., size : 2 * size], cell, out=out1)
        np.multiply(activated[..., :size], candidate, out=candidate)
        out1 += candidate
        cell_tanh = np.tanh(out1, out=candidate if same_shapes else None)
        np.multiply(activated[..., 3 * size :], cell_tanh, out=out0)


def _gru_cell_shape(op: str, input_gates, hidden_gates, hidden, out) -> list[tuple]:
    return [_step_shape(op, 3, input_gates, hidden_gates, hidden)]


@register_kernel("torchedge_fused::gru_cell.out", shape=_gru_cell_shape)
def gru_cell(input_gates, hidden_gates, hidden, out):
    """``r = σ(h_r + x_r)``, ``z = σ(h_z + x_z)``, ``n = tanh(x_n + h_n·r)``,
    ``hidden' = (hidden - n)·z + n``, the gates split in three along the last dim."""
    op = f"{NAMESPACE}::gru_cell.out"
    check_float(op, input_gates, hidden_gates, hidden, out)
    size = _gate_size(op, 3, input_gates, hidden_gates, hidden)
    with quiet():
        gates = np.add(hidden_gates[..., : 2 * size], input_gates[..., : 2 * size])
        _sigmoid(gates, gates)  # r and z together
        candidate = np.multiply(hidden_gates[..., 2 * size :], gates[..., :size])
        if not hidden.shape == candidate.shape == out.shape:  # broadcasting: out must have the broadcast shape
            _check_out_shape(op, _step_shape(op, 3, input_gates, hidden_gates, hidden), out)
        np.add(input_gates[..., 2 * size :], candidate, out=candidate)
        np.tanh(candidate, out=candidate)
        np.subtract(hidden, candidate, out=out)
        out *= gates[..., size:]
        out += candidate
