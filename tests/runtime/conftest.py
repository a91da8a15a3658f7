"""Small programs compiled once per session for the runtime tests."""

import pytest
import torch


class AddRelu(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.arange(6, dtype=torch.float32).reshape(2, 3))

    def forward(self, x):
        return torch.relu(x + self.bias)


@pytest.fixture(scope="session")
def add_relu():
    """(model, example inputs, .pte bytes) of relu(x + bias)."""
    from tests.conftest import torchedge_compile

    model = AddRelu().eval()
    inputs = (torch.randn(2, 3),)
    return model, inputs, torchedge_compile(model, inputs).buffer
