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


@pytest.fixture(scope="session", params=["bert", "llama"])
def xnnpack_lowering(request):
    """ExecuTorch's XNNPACK lowering of a built-in model, and its inputs."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    from torchedge.models import load_model

    model, inputs = load_model(request.param)
    exported = torch.export.export(model, inputs)
    buffer = to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()]).to_executorch().buffer
    return buffer, inputs
