"""A program that would not load fails to compile, naming the operator, dtypes and source line."""

import pytest
import torch

from torchedge.errors import ExportError
from torchedge.exir import ExecutorchBackendConfig, to_edge


class Model(torch.nn.Module):
    def forward(self, x):
        y = torch.relu(x)
        return torch.cumsum(y, dim=0)  # the line the error must point at


def _edge():
    return to_edge(torch.export.export(Model().eval(), (torch.randn(4, 3),)))


def test_default_kernel_set_compiles():
    _edge().to_executorch()


def test_missing_operator_names_op_dtypes_and_line():
    config = ExecutorchBackendConfig(kernel_set=["aten::relu.out"])
    with pytest.raises(ExportError) as info:
        _edge().to_executorch(config)
    message = str(info.value)
    assert "aten::cumsum.out" in message and "float32" in message
    assert "test_loadability.py" in message and "line" in message
    assert "aten::relu.out'" not in message


def test_check_can_be_disabled():
    _edge().to_executorch(ExecutorchBackendConfig(kernel_set=[], check_kernels=False))


def test_real_executorch_kernel_set_is_accepted():
    pytest.importorskip("executorch.extension.pybindings.portable_lib")
    from executorch.extension.pybindings.portable_lib import _get_operator_names

    _edge().to_executorch(ExecutorchBackendConfig(kernel_set=_get_operator_names()))
