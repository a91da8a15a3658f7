"""The fused recurrent cells (``torchedge_fused::lstm_cell`` / ``gru_cell``) against PyTorch's own
``nn.LSTMCell`` / ``nn.GRUCell``, given the same gate projections, with broadcasting and bad outs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from torchedge.errors import KernelError
from torchedge.kernels.registry import get_kernel


def _projections(cell: torch.nn.RNNCellBase, x: torch.Tensor, h: torch.Tensor):
    return x @ cell.weight_ih.T + cell.bias_ih, h @ cell.weight_hh.T + cell.bias_hh


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_lstm_cell_matches_torch(dtype):
    torch.manual_seed(0)
    cell = torch.nn.LSTMCell(5, 7).to(dtype)
    x, h, c = torch.randn(3, 5, dtype=dtype) * 3, torch.randn(3, 7, dtype=dtype), torch.randn(3, 7, dtype=dtype)
    with torch.no_grad():
        input_gates, hidden_gates = _projections(cell, x, h)
        want_h, want_c = cell(x, (h, c))
    out0, out1 = np.empty((3, 7), input_gates.numpy().dtype), np.empty((3, 7), input_gates.numpy().dtype)
    kernel, tol = get_kernel("torchedge_fused::lstm_cell.out").fn, 1e-6 if dtype == torch.float32 else 1e-13
    kernel(input_gates.numpy(), hidden_gates.numpy(), c.numpy(), None, None, -1, out0, out1)
    np.testing.assert_allclose(out0, want_h.numpy(), rtol=0, atol=tol)
    np.testing.assert_allclose(out1, want_c.numpy(), rtol=0, atol=tol * 10)
    # the same step from all steps' input gates (step 1 of 2) and the hidden state with its weight
    steps = torch.stack([torch.zeros_like(input_gates), input_gates]).numpy()
    weight, bias = cell.weight_hh.detach().T.contiguous().numpy(), cell.bias_hh.detach().numpy()
    kernel(steps, bias, c.numpy(), h.numpy(), weight, 1, out0, out1)
    np.testing.assert_allclose(out0, want_h.numpy(), rtol=0, atol=tol)
    np.testing.assert_allclose(out1, want_c.numpy(), rtol=0, atol=tol * 10)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gru_cell_matches_torch(dtype):
    torch.manual_seed(0)
    cell = torch.nn.GRUCell(5, 7).to(dtype)
    x, h = torch.randn(3, 5, dtype=dtype) * 3, torch.randn(3, 7, dtype=dtype)
    with torch.no_grad():
        input_gates, hidden_gates = _projections(cell, x, h)
        want = cell(x, h)
    out = np.empty((3, 7), input_gates.numpy().dtype)
    kernel, tol = get_kernel("torchedge_fused::gru_cell.out").fn, 1e-6 if dtype == torch.float32 else 1e-13
    kernel(input_gates.numpy(), hidden_gates.numpy(), h.numpy(), None, -1, out)
    np.testing.assert_allclose(out, want.numpy(), rtol=0, atol=tol)
    steps = torch.stack([input_gates, torch.zeros_like(input_gates)]).numpy()
    weight, bias = cell.weight_hh.detach().T.contiguous().numpy(), cell.bias_hh.detach().numpy()
    kernel(steps, bias, h.numpy(), weight, 0, out)
    np.testing.assert_allclose(out, want.numpy(), rtol=0, atol=tol)


def test_cells_broadcast_their_operands():
    """A [1, 1, 4H] hidden projection against [B, 4H] input gates and a [B, H] state, as unrolled
    layers pass them: the step's shape is the broadcast one."""
    rng = np.random.default_rng(0)
    gates_x, gates_h, cell = (rng.standard_normal(s).astype(np.float32) for s in ((2, 12), (1, 1, 12), (2, 3)))
    out0, out1 = np.empty((1, 2, 3), np.float32), np.empty((1, 2, 3), np.float32)
    get_kernel("torchedge_fused::lstm_cell.out").fn(gates_x, gates_h, cell, None, None, -1, out0, out1)
    i, f, g, o = torch.from_numpy(gates_x + gates_h).chunk(4, -1)
    want_c = torch.sigmoid(f) * torch.from_numpy(cell) + torch.sigmoid(i) * torch.tanh(g)
    np.testing.assert_allclose(out1, want_c.numpy(), rtol=0, atol=1e-6)
    np.testing.assert_allclose(out0, (torch.sigmoid(o) * torch.tanh(want_c)).numpy(), rtol=0, atol=1e-6)

    gates_x, gates_h, hidden = (rng.standard_normal(s).astype(np.float32) for s in ((2, 9), (1, 1, 9), (2, 3)))
    out = np.empty((1, 2, 3), np.float32)
    get_kernel("torchedge_fused::gru_cell.out").fn(gates_x, gates_h, hidden, None, -1, out)
    x_r, x_z, x_n = torch.from_numpy(gates_x).chunk(3, -1)
    h_r, h_z, h_n = torch.from_numpy(gates_h).chunk(3, -1)
    n = torch.tanh(x_n + h_n * torch.sigmoid(h_r + x_r))
    want = (torch.from_numpy(hidden) - n) * torch.sigmoid(h_z + x_z) + n
    np.testing.assert_allclose(out, want.numpy(), rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    "name, shapes, extra, message",
    [
        ("lstm_cell", [(2, 10), (2, 10), (2, 3)], [None, None, -1], "4 x hidden size"),
        ("lstm_cell", [(2, 12), (2, 8), (2, 3)], [None, None, -1], "4 x hidden size"),
        ("lstm_cell", [(2, 12), (2, 12), (2, 3)], [None, None, 2], "step 2 is out of range"),
        ("lstm_cell", [(2, 12), (12,), (2, 3)], [(2, 3), (4, 12), -1], "a weight"),
        ("lstm_cell", [(2, 12), (11,), (2, 3)], [(2, 3), (3, 12), -1], "a bias of 12 values"),
        ("gru_cell", [(2, 9), (2, 9), (3, 3)], [None, -1], "do not broadcast"),
    ],
)
def test_malformed_cells_are_kernel_errors(name, shapes, extra, message):
    op = f"torchedge_fused::{name}.out"
    arrays = [np.zeros(s, np.float32) for s in shapes]
    arrays += [np.zeros(a, np.float32) if isinstance(a, tuple) else a for a in extra]
    outs = [np.zeros((2, 3), np.float32) for _ in range(2 if name == "lstm_cell" else 1)]
    with pytest.raises(KernelError, match=message):
        get_kernel(op).fn(*arrays, *outs)
    with pytest.raises(KernelError, match="float32 and float64"):
        get_kernel(op).fn(*[a.astype(np.int32) if isinstance(a, np.ndarray) else a for a in arrays + outs])


def test_outs_of_another_shape_are_kernel_errors():
    gates, state = np.zeros((2, 12), np.float32), np.zeros((2, 3), np.float32)
    with pytest.raises(KernelError, match="out must have shape"):
        get_kernel("torchedge_fused::lstm_cell.out").fn(
            gates, gates, state, None, None, -1, state, np.zeros((2, 4), np.float32)
        )
    gates = np.zeros((2, 9), np.float32)
    with pytest.raises(KernelError, match="out must have shape"):
        get_kernel("torchedge_fused::gru_cell.out").fn(gates, gates, state, None, -1, np.zeros((1, 3), np.float32))
