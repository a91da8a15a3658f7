"""Recurrent models for the benchmarks (random weights): ``python benchmarks/models.py
benchmarks/recurrent_models.py:lstm benchmarks/recurrent_models.py:gru``."""

import torch


class _Recurrent(torch.nn.Module):
    def __init__(self, kind: str):
        super().__init__()
        self.rnn = getattr(torch.nn, kind)(32, 64, num_layers=2, batch_first=True)
        self.head = torch.nn.Linear(64, 10)

    def forward(self, x):
        return self.head(self.rnn(x)[0][:, -1])


def lstm():
    """A two-layer LSTM (hidden 64) over 20 steps of 32 features, then a linear head."""
    return _Recurrent("LSTM").eval(), (torch.randn(1, 20, 32),)


def gru():
    """The same with a GRU."""
    return _Recurrent("GRU").eval(), (torch.randn(1, 20, 32),)
