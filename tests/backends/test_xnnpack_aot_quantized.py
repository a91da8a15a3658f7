"""torchedge's XNNPACK lowering of quantized graphs (`torchedge.backends.xnnpack.aot.ops_quantized`).

Each recipe is quantized as ExecuTorch users do (PT2E with `XNNPACKQuantizer`: static int8 per
tensor and per channel, dynamic int8 activations with per-channel int8 weights), lowered with
torchedge's `XnnpackPartitioner`, run on ExecuTorch's runtime (XNNPACK itself) and on
torchedge's interpreter, and compared with the same model lowered by ExecuTorch's own
partitioner: static int8 outputs within one output quantization step, dynamic ones within a
small relative error; no fewer delegated operators than ExecuTorch's lowering.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("executorch.runtime")
pytest.importorskip("executorch.backends.xnnpack.quantizer.xnnpack_quantizer")
pytest.importorskip("torchao.quantization.pt2e.quantize_pt2e")

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from tests.conftest import executorch_run, torchedge_run  # noqa: E402
from torchedge.backends.xnnpack import schema as s  # noqa: E402
from torchedge.backends.xnnpack.aot import XnnpackPartitioner  # noqa: E402
from torchedge.backends.xnnpack.header import split_payload  # noqa: E402
from torchedge.backends.xnnpack.payload_tables import decode_graph  # noqa: E402
from torchedge.exir import to_edge_transform_and_lower  # noqa: E402
from torchedge.schema.program import DelegateCall, KernelCall  # noqa: E402
from torchedge.serialize import deserialize_pte  # noqa: E402

D = s.XNNDatatype


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.mid = nn.Conv2d(8, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, stride=2, bias=False)
        self.fc = nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        y = F.relu(self.conv1(x))
        y = F.max_pool2d(y, 2)
        y = y + F.relu(self.mid(y))
        y = F.relu(self.conv2(y))
        return self.fc(y.flatten(1))


class DepthwiseNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.depthwise = nn.Conv2d(8, 16, 3, padding=1, groups=8)
        self.pointwise = nn.Conv2d(16, 8, 1)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        y = F.relu(self.depthwise(F.relu(self.conv(x))))
        return self.fc(F.relu(self.pointwise(y)).mean((-1, -2), keepdim=True).flatten(1))


class MobileBlock(nn.Module):
    """mobilenet_v2's shapes as transformers writes it: explicit pads (ExecuTorch runs them in
    float32 between converts), ReLU6 as a hardtanh of its own, an inverted residual."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, stride=2)
        self.depthwise = nn.Conv2d(8, 8, 3, groups=8)
        self.project = nn.Conv2d(8, 8, 1)

    def forward(self, x):
        y = F.hardtanh(self.stem(F.pad(x, [0, 1, 0, 1])), 0.0, 6.0)
        z = F.hardtanh(self.depthwise(F.pad(y, [1, 1, 1, 1])), 0.0, 6.0)
        return y + self.project(F.pad(z, [0, 0, 0, 0]))


class LinearStack(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 32)
        self.fc2 = nn.Linear(32, 32)
        self.fc3 = nn.Linear(32, 8, bias=False)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def _inputs(shape, seed=0):
    return (torch.randn(*shape, generator=torch.Generator().manual_seed(seed)),)


def _pt2e(model, inputs, per_channel: bool, dynamic: bool = False, dynamic_shapes=None):
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    config = get_symmetric_quantization_config(is_per_channel=per_channel, is_dynamic=dynamic)
    exported = torch.export.export(model.eval(), inputs, dynamic_shapes=dynamic_shapes)
    module = prepare_pt2e(exported.module(), XNNPACKQuantizer().set_global(config))
    module(*inputs)
    return convert_pt2e(module)


@functools.cache
def _recipe(name: str):
    """(quantized module, inputs, torchedge's .pte, ExecuTorch's .pte)."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner as ETX
    from executorch.exir import to_edge_transform_and_lower as et_lower

    torch.manual_seed(0)
    if name.startswith("conv"):
        model, inputs = ConvNet(), _inputs((2, 3, 16, 16))
    elif name.startswith("mobile"):
        model, inputs = MobileBlock(), _inputs((1, 3, 15, 15))
    elif name.startswith("depthwise"):
        model, inputs = DepthwiseNet(), _inputs((1, 3, 8, 8))
    else:
        model, inputs = LinearStack(), _inputs((4, 64))
    dynamic = name.startswith("dynamic")
    quantized = _pt2e(model, inputs, per_channel=dynamic or name.endswith("per_channel"), dynamic=dynamic)
    ours = to_edge_transform_and_lower(torch.export.export(quantized, inputs), partitioner=[XnnpackPartitioner()])
    theirs = et_lower(torch.export.export(quantized, inputs), partitioner=[ETX()])
    return quantized, inputs, ours.to_executorch().buffer, theirs.to_executorch().buffer


RECIPES = [
    "conv_per_tensor",
    "conv_per_channel",
    "depthwise_per_tensor",
    "depthwise_per_channel",
    "mobile_per_tensor",
    "mobile_per_channel",
    "linear_per_tensor",
    "linear_per_channel",
    "dynamic_linear",
]


def _calls(buffer: bytes) -> tuple[int, int]:
    plan = deserialize_pte(buffer).program.execution_plan[0]
    kinds = [type(i.instr_args) for chain in plan.chains for i in chain.instructions]
    return kinds.count(KernelCall), kinds.count(DelegateCall)


def _graphs(buffer: bytes) -> list:
    pte = deserialize_pte(buffer)
    return [decode_graph(split_payload(pte.delegate_data(d))[0]) for d in pte.program.execution_plan[0].delegates]


def _summary(buffer: bytes) -> tuple[list, list, set]:
    """Compute node kinds in order (layout transposes aside: torchedge may need fewer), the
    (datatype, quantization kind, dims) of the constants, sorted, and every value's datatype and
    quantization kind."""
    nodes, constants, kinds = [], [], set()
    for graph in _graphs(buffer):
        nodes += [type(n.xnode_union).__name__ for n in graph.xnodes]
        for xvalue in graph.xvalues:
            value = xvalue.xvalue_union
            if isinstance(value, s.XNNQuantizedTensorValue):
                tensor, kind = value.tensor_value, type(value.quant_params).__name__
            else:
                tensor, kind = value, ""
            kinds.add((int(tensor.datatype), kind))
            if tensor.constant_buffer_idx:
                constants.append((int(tensor.datatype), kind, tuple(tensor.dims)))
    return [n for n in nodes if n != "XNNStaticTranspose"], sorted(constants), kinds


def _output_step(buffer: bytes) -> float | None:
    """The scale of the quantized value the (single) output's final convert reads."""
    (graph,) = _graphs(buffer)
    producers = {n.xnode_union.output_id: n.xnode_union for n in graph.xnodes}
    node = producers[graph.output_ids[0]]
    if type(node).__name__ != "XNNConvert":
        return None
    params = graph.xvalues[node.input_id].xvalue_union.quant_params
    return params.scale if isinstance(params, s.PerTensorQuant) else None


@pytest.mark.parametrize("name", RECIPES)
def test_quantized_lowering_matches_executorch(name):
    quantized, inputs, ours, theirs = _recipe(name)
    arrays = [i.numpy() for i in inputs]
    want = executorch_run(theirs, arrays)[0]
    on_executorch = executorch_run(ours, arrays)[0]
    on_torchedge = torchedge_run(ours, arrays)[0]
    with torch.no_grad():
        eager = quantized(*inputs).numpy()
    step = _output_step(theirs)
    if name.startswith("dynamic"):
        assert step is None
        scale = float(np.max(np.abs(want)))
        for got in (on_executorch, on_torchedge):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * scale)
        np.testing.assert_allclose(on_executorch, eager, atol=0.05 * scale)  # per-token vs per-tensor
    else:
        assert step is not None and _output_step(ours) == pytest.approx(step)
        for got in (on_executorch, on_torchedge, eager):
            assert got.shape == want.shape and got.dtype == np.float32
            assert float(np.max(np.abs(got - want))) <= step * 1.001, name
    # As many operators delegated as ExecuTorch's lowering: no more kernel calls outside.
    assert _calls(ours)[0] <= _calls(theirs)[0]


@pytest.mark.parametrize("name", RECIPES)
def test_quantized_payload_layout_matches_executorch(name):
    """The same XNNPACK nodes and value datatypes/quantization kinds as ExecuTorch writes."""
    _, _, ours, theirs = _recipe(name)
    assert _summary(ours) == _summary(theirs)


@functools.cache
def _int4(group_size: int, tokens: bool = False):
    """torchao's 8da4w (Int8DynamicActivationIntxWeightConfig, int4, PerGroup(group_size))."""
    quant_api = pytest.importorskip("torchao.quantization.quant_api")
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner as ETX
    from executorch.exir import to_edge_transform_and_lower as et_lower
    from torchao.quantization.granularity import PerGroup

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 64, bias=False)
    )
    config = quant_api.Int8DynamicActivationIntxWeightConfig(
        weight_dtype=torch.int4, weight_granularity=PerGroup(group_size)
    )
    quant_api.quantize_(model.eval(), config)
    inputs = _inputs((1, 5, 256) if tokens else (5, 256))
    ours = to_edge_transform_and_lower(torch.export.export(model, inputs), partitioner=[XnnpackPartitioner()])
    theirs = et_lower(torch.export.export(model, inputs), partitioner=[ETX()])
    return model, inputs, ours.to_executorch().buffer, theirs.to_executorch().buffer


@pytest.mark.parametrize("group_size", [32, 64, 128, 256])
def test_8da4w_lowering_matches_executorch(group_size):
    model, inputs, ours, theirs = _int4(group_size)
    arrays = [i.numpy() for i in inputs]
    want = executorch_run(theirs, arrays)[0]
    scale = float(np.max(np.abs(want)))
    for got in (executorch_run(ours, arrays)[0], torchedge_run(ours, arrays)[0]):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * scale)
    with torch.no_grad():
        eager = model(*inputs).numpy()
    np.testing.assert_allclose(want, eager, atol=0.02 * scale)
    assert _calls(ours) == _calls(theirs) == (0, 1)
    assert _summary(ours) == _summary(theirs)
    (graph,) = _graphs(ours)
    groups = {
        v.xvalue_union.quant_params.group_size
        for v in graph.xvalues
        if isinstance(v.xvalue_union, s.XNNQuantizedTensorValue)
        and isinstance(v.xvalue_union.quant_params, s.PerChannelGroupQuant)
    }
    assert groups == {group_size}


def test_8da4w_token_inputs_match_executorch():
    """[1, tokens, dim] inputs (an LLM's): rows flattened before the dynamic quantization."""
    model, inputs, ours, theirs = _int4(64, tokens=True)
    arrays = [i.numpy() for i in inputs]
    want = executorch_run(theirs, arrays)[0]
    scale = float(np.max(np.abs(want)))
    for got in (executorch_run(ours, arrays)[0], torchedge_run(ours, arrays)[0]):
        assert got.shape == want.shape == (1, 5, 64)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * scale)
    assert _calls(ours)[0] <= _calls(theirs)[0]
    nodes, _, _ = _summary(ours)
    assert nodes.count("XNNFullyConnected") == 3 and nodes.count("XNNConvert") == 3


def test_config_precisions_select_what_is_lowered():
    from torchedge.errors import ExportError

    quantized, inputs, _, _ = _recipe("linear_per_channel")
    only_float = to_edge_transform_and_lower(
        torch.export.export(quantized, inputs), partitioner=[XnnpackPartitioner(config_precisions=["FP32"])]
    ).to_executorch()
    assert not any(k == "XNNFullyConnected" for k in _summary(only_float.buffer)[0])
    static = to_edge_transform_and_lower(
        torch.export.export(quantized, inputs), partitioner=[XnnpackPartitioner(config_precisions=["STATIC_QUANT"])]
    ).to_executorch()
    assert _calls(static.buffer) == (0, 1)
    with pytest.raises(ExportError, match="config_precisions"):
        XnnpackPartitioner(config_precisions=["FP16"])


_IMPORT_FIRST = """
import torch
from torchedge.backends.xnnpack.aot import XnnpackPartitioner  # before any quantization library
from torchedge.exir import to_edge_transform_and_lower
from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import XNNPACKQuantizer, get_symmetric_quantization_config
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
model, inputs = torch.nn.Linear(8, 4).eval(), (torch.randn(2, 8),)
quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config())
module = prepare_pt2e(torch.export.export(model, inputs).module(), quantizer)
module(*inputs)
module = convert_pt2e(module)
program = to_edge_transform_and_lower(torch.export.export(module, inputs), partitioner=[XnnpackPartitioner()])
calls = [n.target for n in program.exported_program().graph.nodes if n.op == "call_function"]
print(sum("call_delegate" in str(t) for t in calls), len(calls))
"""


def test_quantized_operators_are_recognized_whatever_the_import_order():
    """quantized_decomposed operators are matched by name: they may be registered after
    torchedge's lowering is imported."""
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", _IMPORT_FIRST], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split()[-2:] == ["1", "2"]  # one delegate call and its getitem


class _Residual(nn.Module):
    """A residual whose branch has an operator the lowering leaves out (a cumulative sum on a
    dequantized value): one delegate holding both ends would make a cycle."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x):
        y = self.conv1(x)
        return y + self.conv2(torch.cumsum(y, 1))


def test_split_quantized_patterns_stay_outside_whole():
    """A quantized pattern the partitioning would cut lowers whole or not at all: the program
    compiles and runs on torchedge's runtime like the quantized eager model."""
    inputs = _inputs((1, 3, 8, 8))
    quantized = _pt2e(_Residual(), inputs, per_channel=True)
    program = to_edge_transform_and_lower(torch.export.export(quantized, inputs), partitioner=[XnnpackPartitioner()])
    buffer = program.to_executorch().buffer
    got = torchedge_run(buffer, [i.numpy() for i in inputs])[0]
    with torch.no_grad():
        want = quantized(*inputs).numpy()
    assert np.max(np.abs(got - want)) <= 0.05 * np.max(np.abs(want))


@functools.cache
def _dynamic_tokens(kind: str):
    """Two linear layers, torchao's 8da4w or PT2E's dynamic int8, exported with a dynamic
    sequence length (1..8): (model, torchedge's .pte, ExecuTorch's .pte)."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner as ETX
    from executorch.exir import to_edge_transform_and_lower as et_lower
    from torch.export import Dim

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 32)).eval()
    if kind == "8da4w":
        quant_api = pytest.importorskip("torchao.quantization.quant_api")
        from torchao.quantization.granularity import PerGroup

        config = quant_api.Int8DynamicActivationIntxWeightConfig(
            weight_dtype=torch.int4, weight_granularity=PerGroup(32)
        )
        quant_api.quantize_(model, config)
        inputs, dynamic = _inputs((1, 5, 64)), ({1: Dim("tokens", min=1, max=8)},)
    else:
        inputs, dynamic = _inputs((5, 64)), ({0: Dim("tokens", min=1, max=8)},)
        model = _pt2e(model, inputs, per_channel=True, dynamic=True, dynamic_shapes=dynamic)
    ours = to_edge_transform_and_lower(
        torch.export.export(model, inputs, dynamic_shapes=dynamic), partitioner=[XnnpackPartitioner()]
    )
    theirs = et_lower(torch.export.export(model, inputs, dynamic_shapes=dynamic), partitioner=[ETX()])
    return model, ours.to_executorch().buffer, theirs.to_executorch().buffer


@pytest.mark.parametrize("kind", ["8da4w", "dynamic_int8"])
def test_dynamic_quantized_linears_run_at_every_sequence_length(kind):
    """Lowered whole at the upper bound, as ExecuTorch lowers them: at every length in range,
    on both runtimes, ExecuTorch's lowering's result (within float rounding) and eager's within
    the activations' quantization error."""
    model, ours, theirs = _dynamic_tokens(kind)
    assert _calls(ours) == _calls(theirs) == (0, 1)
    for tokens in range(1, 9):
        x = torch.randn(
            *((1, tokens, 64) if kind == "8da4w" else (tokens, 64)), generator=torch.Generator().manual_seed(tokens)
        )
        want = executorch_run(theirs, [x.numpy()])[0]
        scale = float(np.max(np.abs(want)))
        for got in (executorch_run(ours, [x.numpy()])[0], torchedge_run(ours, [x.numpy()])[0]):
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * scale)
        with torch.no_grad():
            eager = model(x).numpy()
        np.testing.assert_allclose(want, eager, atol=0.05 * scale)
