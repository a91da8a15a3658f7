"""Load-time fusion of recurrent cells: the default program of an ``nn.LSTM`` / ``nn.GRU`` (core
ATen, which ExecuTorch runs too) runs each unrolled timestep as one fused kernel in torchedge.
Every case runs the same file fused, with ``fuse=False`` (the program as written: the fused
kernels must give the same bits) and against eager, and counts the fused steps."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from tests.conftest import assert_matches, executorch_run, torch_outputs, torchedge_compile
from torchedge.runtime import Runtime
from torchedge.runtime.steps import NOP

LSTM = "torchedge_fused::lstm_cell.out (fused at load)"
GRU = "torchedge_fused::gru_cell.out (fused at load)"


class Recurrent(nn.Module):
    """A recurrent layer stack and a linear head on every step's output."""

    def __init__(self, kind: str, layers: int = 2, hidden: int = 16, states: bool = False):
        super().__init__()
        self.rnn = getattr(nn, kind)(8, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, 3)
        self.states = states

    def forward(self, x, *state):
        out, last = self.rnn(x, (state if len(state) > 1 else state[0]) if state else None)
        last = last if isinstance(last, tuple) else (last,)
        return (self.head(out), *last) if self.states else self.head(out)


def _run(model, inputs, dtype=torch.float32):
    """The fused and unfused outputs (equal bits asserted) and the fused method's step labels."""
    model, inputs = model.to(dtype).eval(), tuple(i.to(dtype) for i in inputs)
    buffer = torchedge_compile(model, inputs).buffer
    program = Runtime.get().load_program(buffer)
    fused, plain = program.load_method("forward"), program.load_method("forward", fuse=False)
    arrays = [i.numpy() for i in inputs]
    expected = plain.execute(arrays)
    for _ in range(2):  # a second run: nothing stale
        got = fused.execute(arrays)
        assert len(got) == len(expected)
        for a, b in zip(got, expected):
            np.testing.assert_array_equal(a, b)
    assert_matches(got, torch_outputs(model, inputs), 1e-5 if dtype == torch.float32 else 1e-12)
    return [step.label for step in fused._steps if step.kind != NOP], buffer, arrays, got


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("batch", [1, 3])
def test_every_lstm_step_fuses(batch, dtype):
    torch.manual_seed(0)
    labels, *_ = _run(Recurrent("LSTM"), (torch.randn(batch, 5, 8),), dtype)
    assert labels.count(LSTM) == 2 * 5  # the first steps too: their projection of the zero state is a constant
    assert not any(label.startswith(("aten::sigmoid", "aten::tanh", "aten::split")) for label in labels)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("batch", [1, 3])
def test_gru_steps_fuse_but_the_first(batch, dtype):
    torch.manual_seed(1)
    labels, *_ = _run(Recurrent("GRU"), (torch.randn(batch, 5, 8),), dtype)
    assert labels.count(GRU) == 2 * 4  # a first step's gates are three folded constants, no split
    assert labels.count("aten::sigmoid.out") == 2 * 2


class Bidirectional(nn.Module):
    """Two bidirectional layers, the sequence first."""

    def __init__(self, kind: str):
        super().__init__()
        self.rnn = getattr(nn, kind)(8, 16, num_layers=2, bidirectional=True)

    def forward(self, x):
        return self.rnn(x)[0]


@pytest.mark.parametrize("kind, fused", [("LSTM", 2 * 2 * 5), ("GRU", 2 * 2 * 4)])
def test_both_directions_of_sequence_first_layers_fuse(kind, fused):
    torch.manual_seed(7)
    labels, *_ = _run(Bidirectional(kind), (torch.randn(5, 2, 8),))
    assert labels.count(LSTM if kind == "LSTM" else GRU) == fused


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_initial_states_given_as_inputs(kind):
    """The first step then projects its state like every other: all steps fuse, and the final
    states (outputs read after the run) come out right."""
    torch.manual_seed(2)
    state = [torch.randn(1, 2, 16) for _ in range(2 if kind == "LSTM" else 1)]
    labels, *_ = _run(Recurrent(kind, layers=1, hidden=16, states=True), (torch.randn(2, 6, 8), *state))
    assert labels.count(LSTM if kind == "LSTM" else GRU) == 6


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_a_single_step_takes_its_slice_of_the_input_projection_in(kind):
    """With one timestep the step's slice of the input projection runs right before its cell:
    the fused step reads that row of the projection itself."""
    torch.manual_seed(8)
    state = [torch.randn(1, 2, 16) for _ in range(2 if kind == "LSTM" else 1)]
    labels, buffer, *_ = _run(Recurrent(kind, layers=1, hidden=16, states=True), (torch.randn(2, 1, 8), *state))
    assert labels.count(LSTM if kind == "LSTM" else GRU) == 1
    plain = [step.label for step in Runtime.get().load_program(buffer).load_method("forward", fuse=False)._steps]
    for copy in ("aten::slice_copy.Tensor_out", "aten::squeeze_copy.dims_out"):  # (the states' slices stay)
        assert plain.count(copy) - labels.count(copy) == 1


class HandWrittenCell(nn.Module):
    """An LSTM cell written out (its input projected each step, ``chunk`` for the split), whose
    second step's forget gate is also returned: that step must stay as written."""

    def __init__(self):
        super().__init__()
        self.ih, self.hh = nn.Linear(8, 64), nn.Linear(16, 64)

    def forward(self, x):
        h = c = torch.zeros(x.shape[0], 16)
        peek = None
        for t in range(3):
            i, f, g, o = (self.ih(x[:, t]) + self.hh(h)).chunk(4, 1)
            f = torch.sigmoid(f)
            c = f * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            peek = f if t == 1 else peek
        return h, c, peek


def test_hand_written_cells_fuse_where_their_steps_match():
    torch.manual_seed(3)
    labels, *_ = _run(HandWrittenCell(), (torch.randn(2, 3, 8),))
    assert labels.count(LSTM) == 2
    assert labels.count("aten::tanh.out") == 2  # the second step's two tanhs


class HandWrittenGRU(nn.Module):
    """A GRU written out, its interpolation ``(h - n) * z + n`` with ``sub``'s ``alpha``."""

    def __init__(self, alpha):
        super().__init__()
        self.ih, self.hh, self.alpha = nn.Linear(8, 48), nn.Linear(16, 48), alpha

    def forward(self, x):
        h = torch.ones(x.shape[0], 16)
        for t in range(3):
            x_r, x_z, x_n = self.ih(x[:, t]).chunk(3, 1)
            h_r, h_z, h_n = self.hh(h).chunk(3, 1)
            r, z = torch.sigmoid(h_r + x_r), torch.sigmoid(h_z + x_z)
            n = torch.tanh(x_n + h_n * r)
            h = torch.sub(h, n, alpha=self.alpha) * z + n
        return h


@pytest.mark.parametrize("alpha, fused", [(1, 2), (2, 0)])  # the first step: constant gates
def test_a_hand_written_gru_fuses_only_the_interpolation_it_computes(alpha, fused):
    torch.manual_seed(6)
    labels, *_ = _run(HandWrittenGRU(alpha), (torch.randn(2, 3, 8),))
    assert labels.count(GRU) == fused


def test_the_same_file_runs_in_executorch():
    torch.manual_seed(4)
    model = Recurrent("LSTM", layers=1)
    labels, buffer, arrays, got = _run(model, (torch.randn(1, 4, 8),))
    assert labels.count(LSTM) == 4
    assert_matches(got, executorch_run(buffer, arrays), 1e-6)


@pytest.mark.parametrize("offset", [0, 8])
def test_a_result_planned_over_the_state_needs_no_scratch_memory(offset):
    """Memory planning may put the new cell over the old one (or part of it): the kernel the fused
    step calls without scratch memory (the rule's ``reads_first``) reads the state only in the
    call that writes the new cell, which NumPy runs on a copy where they overlap, so the values
    are those of separate memory."""
    from torchedge.fusion.rules_recurrent import RECURRENT_RULES
    from torchedge.kernels.optimized.fused_recurrent import lstm_cell

    assert {"input_gates", "hidden_gates", "cell", "hidden", "weight"} <= set(RECURRENT_RULES[0].reads_first)
    rng = np.random.default_rng(5)
    gates, hidden_gates = rng.standard_normal((1, 64)), rng.standard_normal((1, 64))
    memory = rng.standard_normal(48)
    cell, new_cell = memory[:16].reshape(1, 16), memory[offset : offset + 16].reshape(1, 16)
    expected = np.empty((1, 16)), np.empty((1, 16))
    lstm_cell(gates, hidden_gates, cell.copy(), None, None, -1, *expected)
    new_hidden = np.empty((1, 16))
    lstm_cell(gates, hidden_gates, cell, None, None, -1, new_hidden, new_cell)
    np.testing.assert_array_equal(new_hidden, expected[0])
    np.testing.assert_array_equal(new_cell, expected[1])
