"""What a quantized transformer or ViT needs of the XNNPACK lowering: int8 linear layers on more
than two dims, static and dynamic (`torchedge.backends.xnnpack.aot.quantized_views`), int8
values crossing between delegates (`lowering`'s int8 inputs and outputs), and dynamically
quantized convolutions (a ViT's patch embedding).

``to_edge`` writes a linear layer of a [B, S, K] activation as ``view -> addmm -> view``, outside
PT2E's quantize/dequantize pairs; a transformer's quantized values also flow between delegates
that unsupported operators separate. Both lower as ExecuTorch's lowering does them: every layer
delegated, outputs the same as ExecuTorch's program on its runtime and on torchedge's.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("executorch.runtime")
pytest.importorskip("executorch.backends.xnnpack.quantizer.xnnpack_quantizer")
pytest.importorskip("torchao.quantization.pt2e.quantize_pt2e")

import torch.nn as nn  # noqa: E402

from tests.backends.test_xnnpack_aot_quantized import _calls, _graphs, _output_step, _pt2e  # noqa: E402
from tests.conftest import executorch_run, torchedge_run  # noqa: E402
from torchedge.backends.xnnpack import schema as s  # noqa: E402
from torchedge.backends.xnnpack.aot import XnnpackPartitioner  # noqa: E402
from torchedge.backends.xnnpack.aot.quantized_views import requantize_linear_views  # noqa: E402
from torchedge.exir import to_edge, to_edge_transform_and_lower  # noqa: E402


class Tokens(nn.Module):
    """Linear layers on [batch, tokens, features], a relu after the first."""

    def __init__(self):
        super().__init__()
        self.up = nn.Linear(16, 32)
        self.down = nn.Linear(32, 8)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


class Crossing(nn.Module):
    """An int8 result read by two delegates: the cumulative sum (no XNNPACK node) between them
    splits the quantized pattern."""

    def __init__(self):
        super().__init__()
        self.first = nn.Linear(16, 16)
        self.second = nn.Linear(16, 8)

    def forward(self, x):
        h = self.first(x)
        return self.second(h + torch.cumsum(h, dim=-1))


def _programs(model, shape, per_channel: bool, dynamic: bool = False):
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner as ETX
    from executorch.exir import to_edge_transform_and_lower as et_lower

    torch.manual_seed(0)
    inputs = (torch.randn(*shape, generator=torch.Generator().manual_seed(1)),)
    quantized = _pt2e(model, inputs, per_channel=per_channel, dynamic=dynamic)
    ours = to_edge_transform_and_lower(torch.export.export(quantized, inputs), partitioner=[XnnpackPartitioner()])
    theirs = et_lower(torch.export.export(quantized, inputs), partitioner=[ETX()])
    return quantized, inputs, ours.to_executorch().buffer, theirs.to_executorch().buffer


@pytest.mark.parametrize("per_channel", [True, False])
def test_linear_layers_on_three_dims_are_delegated_whole(per_channel):
    quantized, inputs, ours, theirs = _programs(Tokens(), (2, 5, 16), per_channel)
    assert _calls(ours) == (0, 1)  # without the pairs: the first layer's addmm ran outside, in float
    arrays = [i.numpy() for i in inputs]
    want = executorch_run(theirs, arrays)[0]
    np.testing.assert_array_equal(executorch_run(ours, arrays)[0], want)
    np.testing.assert_array_equal(torchedge_run(ours, arrays)[0], want)
    step = _output_step(ours)
    assert step is not None and step == pytest.approx(_output_step(theirs))
    with torch.no_grad():
        eager = quantized(*inputs).numpy()
    assert float(np.max(np.abs(eager - want))) <= step * 1.001


def test_dynamically_quantized_linear_layers_on_three_dims_are_delegated_whole():
    """Each layer's activation is viewed, then quantized per call inside its delegate (a chain of
    its own, as ExecuTorch duplicates them)."""
    _, inputs, ours, theirs = _programs(Tokens(), (2, 5, 16), per_channel=True, dynamic=True)
    assert _calls(ours) == (0, 1)
    datatypes = {
        v.xvalue_union.tensor_value.datatype
        for g in _graphs(ours)
        for v in g.xvalues
        if isinstance(v.xvalue_union, s.XNNQuantizedTensorValue)
    }
    assert s.XNNDatatype.xnn_datatype_qdint8 in datatypes
    arrays = [i.numpy() for i in inputs]
    want = executorch_run(theirs, arrays)[0]
    scale = float(np.max(np.abs(want)))
    for got in (executorch_run(ours, arrays)[0], torchedge_run(ours, arrays)[0]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * scale)


@pytest.mark.parametrize("dynamic", [False, True])
def test_the_rewrite_changes_no_value(dynamic):
    """The rewritten graph computes the same bits as the one PT2E made."""
    torch.manual_seed(0)
    inputs = (torch.randn(2, 5, 16),)
    quantized = _pt2e(Tokens(), inputs, per_channel=True, dynamic=dynamic)
    program = to_edge(torch.export.export(quantized, inputs)).exported_program()
    before = program.module()(*inputs)
    assert requantize_linear_views(program.graph_module) == (2 if dynamic else 4)  # inputs (and results)
    assert torch.equal(program.module()(*inputs), before)
    assert requantize_linear_views(program.graph_module) == 0  # once


def test_int8_values_cross_between_delegates():
    _, inputs, ours, theirs = _programs(Crossing(), (4, 16), per_channel=True)
    assert _calls(ours)[1] == 2 and _calls(ours)[0] <= _calls(theirs)[0]
    # The first delegate hands its quantized result to the second as int8.
    first, second = _graphs(ours)
    int8 = s.XNNDatatype.xnn_datatype_qint8

    def datatype(graph, value_id):
        value = graph.xvalues[value_id].xvalue_union
        return value.tensor_value.datatype if isinstance(value, s.XNNQuantizedTensorValue) else value.datatype

    assert int8 in [datatype(first, v) for v in first.output_ids]
    assert int8 in [datatype(second, v) for v in second.input_ids]
    arrays = [i.numpy() for i in inputs]
    want = executorch_run(theirs, arrays)[0]
    np.testing.assert_array_equal(executorch_run(ours, arrays)[0], want)
    np.testing.assert_array_equal(torchedge_run(ours, arrays)[0], want)


class Patches(nn.Module):
    """A ViT's patch embedding and a convolution after it."""

    def __init__(self):
        super().__init__()
        self.patches = nn.Conv2d(3, 8, 4, stride=4)
        self.mix = nn.Conv2d(8, 4, 3, padding=1)

    def forward(self, x):
        return self.mix(torch.relu(self.patches(x)))


@pytest.mark.parametrize("batch", [1, 2])
def test_dynamically_quantized_convolutions_are_delegated(batch):
    """Each image quantized with parameters of its own, channels-last, as ExecuTorch writes it (for
    one image, the per-tensor quantization of the eager model)."""
    quantized, inputs, ours, theirs = _programs(Patches(), (batch, 3, 16, 16), per_channel=True, dynamic=True)
    assert _calls(ours) == (0, 1)
    arrays = [i.numpy() for i in inputs]
    want = executorch_run(theirs, arrays)[0]
    scale = float(np.max(np.abs(want)))
    for got in (executorch_run(ours, arrays)[0], torchedge_run(ours, arrays)[0]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * scale)
    if batch == 1:
        with torch.no_grad():
            np.testing.assert_allclose(quantized(*inputs).numpy(), want, rtol=1e-5, atol=1e-5 * scale)
