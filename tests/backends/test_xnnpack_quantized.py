"""torchedge's XNNPACK interpreter on quantized graphs, against ExecuTorch's XNNPACK.

Models are quantized with PT2E (`XNNPACKQuantizer`: static per-channel and per-tensor int8,
dynamic int8 activations with per-channel int8 weights) or torchao (int8 dynamic activations
with 4-bit group-wise weights), lowered with `XnnpackPartitioner` and run on both runtimes.
Outputs that leave the graph through a dequantizing convert must agree within one step of their
quantization (in practice they are equal: torchedge follows XNNPACK's integer arithmetic);
float outputs (dynamic quantization) within 1e-5 relative. The zoo's mlp and cnn run quantized
here; mobilenet_v2, resnet18, llama, vit and bert with ``TORCHEDGE_XNNPACK_MODELS=all``.
"""

from __future__ import annotations

import dataclasses
import functools
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("executorch.runtime")
pytest.importorskip("executorch.backends.xnnpack.quantizer.xnnpack_quantizer")
pytest.importorskip("torchao.quantization.pt2e.quantize_pt2e")

import torch.nn.functional as F  # noqa: E402

from tests.conftest import executorch_run, torchedge_run  # noqa: E402
from torchedge.backends.xnnpack import schema as s  # noqa: E402
from torchedge.backends.xnnpack.header import join_payload, split_payload  # noqa: E402
from torchedge.backends.xnnpack.payload_tables import decode_graph, encode_graph  # noqa: E402
from torchedge.backends.xnnpack.runtime import XnnpackBackend  # noqa: E402
from torchedge.errors import InvalidProgramError  # noqa: E402
from torchedge.runtime.named_data import NamedDataMap  # noqa: E402
from torchedge.serialize import deserialize_pte  # noqa: E402

D = s.XNNDatatype
ALL_MODELS = os.environ.get("TORCHEDGE_XNNPACK_MODELS") == "all"


def _keep_integer_constants(module):
    """prepare_pt2e turns the scalar of an integer ``add(tensor, scalar)`` into a float32 constant
    (transformers' causal mask: ``arange + 0`` then used as an index); give it back the tensor's
    integer dtype."""
    for node in module.graph.nodes:
        if node.target != torch.ops.aten.add.Tensor or len(node.args) < 2:
            continue
        tensor, other = node.args[:2]
        val = getattr(tensor, "meta", {}).get("val")
        if getattr(other, "op", None) == "get_attr" and val is not None and not val.dtype.is_floating_point:
            constant = getattr(module, other.target)
            if constant.dtype.is_floating_point:
                setattr(module, other.target, constant.to(val.dtype))
    return module


def _lower_pt2e(model, inputs, per_channel: bool = True, dynamic: bool = False) -> bytes:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    from executorch.exir import to_edge_transform_and_lower
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    config = get_symmetric_quantization_config(is_per_channel=per_channel, is_dynamic=dynamic)
    quantizer = XNNPACKQuantizer().set_global(config)
    module = _keep_integer_constants(prepare_pt2e(torch.export.export(model, inputs).module(), quantizer))
    module(*inputs)
    module = convert_pt2e(module)
    lowered = to_edge_transform_and_lower(torch.export.export(module, inputs), partitioner=[XnnpackPartitioner()])
    return lowered.to_executorch().buffer


def _graphs(buffer: bytes):
    """(pte, [(decoded graph, constant data)]) of every XNNPACK delegate in ``buffer``."""
    pte = deserialize_pte(buffer)
    found = []
    for delegate in pte.program.execution_plan[0].delegates:
        flatbuffer, constants = split_payload(pte.delegate_data(delegate))
        found.append((decode_graph(flatbuffer), constants))
    return pte, found


def _datatypes(buffer: bytes) -> set:
    _, graphs = _graphs(buffer)
    types = set()
    for graph, _ in graphs:
        for xvalue in graph.xvalues:
            value = xvalue.xvalue_union
            types.add((value.tensor_value if isinstance(value, s.XNNQuantizedTensorValue) else value).datatype)
    return types


def _node_kinds(buffer: bytes) -> set:
    _, graphs = _graphs(buffer)
    return {type(node.xnode_union).__name__ for graph, _ in graphs for node in graph.xnodes}


def _output_steps(buffer: bytes) -> list[float | None]:
    """Per method output (one delegate, outputs in order): the scale of the quantized value its
    final convert dequantizes, or None for an output computed in float."""
    _, [(graph, _)] = _graphs(buffer)
    values = {}
    for xvalue in graph.xvalues:
        value = xvalue.xvalue_union
        if isinstance(value, s.XNNQuantizedTensorValue):
            values[value.tensor_value.id_out] = value.quant_params
    producers = {node.xnode_union.output_id: node.xnode_union for node in graph.xnodes}
    steps = []
    for value_id in sorted(graph.output_ids, key=lambda i: graph.xvalues[i].xvalue_union.external_id):
        node = producers[value_id]
        params = values.get(node.input_id) if type(node).__name__ == "XNNConvert" else None
        steps.append(params.scale if isinstance(params, s.PerTensorQuant) else None)
    return steps


MAX_STEPS: dict[str, float] = {}  # name -> largest |torchedge - executorch| in quantization steps


def _matches_executorch(name: str, buffer: bytes, inputs) -> None:
    inputs = [i.numpy() for i in inputs]
    got, want = torchedge_run(buffer, inputs), executorch_run(buffer, inputs)
    assert len(got) == len(want)
    for g, w, step in zip(got, want, _output_steps(buffer)):
        assert g.shape == w.shape and g.dtype == w.dtype
        diff = np.abs(g.astype(np.float64) - w)
        if step is None:
            scale = float(np.max(np.abs(w))) if w.size else 0.0
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5 * scale)
        else:
            steps = float(diff.max() / step) if diff.size else 0.0
            MAX_STEPS[name] = max(MAX_STEPS.get(name, 0.0), steps)
            assert steps <= 1.0 + 1e-6, f"{name}: off by {steps:.3f} quantization steps"


class _Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))

    def forward(self, x):
        return self.layers(x)


class _Cnn(torch.nn.Module):
    """conv + relu, depthwise conv + relu, max pooling, flatten, linear."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.depthwise = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.linear = torch.nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        y = F.max_pool2d(F.relu(self.depthwise(F.relu(self.conv(x)))), 2)
        return self.linear(y.flatten(1))


class _Blocks(torch.nn.Module):
    """A residual add block, strided conv, hardtanh and relu6 clamps, multiply, subtract,
    concatenate, padded max pooling, global mean, slice, linear, and an add of a second input."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(4, 4, 3, padding=1)
        self.pointwise = torch.nn.Conv2d(4, 4, 1)
        self.strided = torch.nn.Conv2d(4, 8, 3, stride=2, padding=1)
        self.expand = torch.nn.Conv2d(8, 8, 1)
        self.linear = torch.nn.Linear(8, 6)

    def forward(self, x, y):
        residual = F.relu(x + self.pointwise(F.relu(self.conv(x))))
        a = F.hardtanh(self.strided(residual))
        b = F.relu6(self.expand(a))
        c = torch.cat([a * b, a - b], 1)
        pooled = F.adaptive_avg_pool2d(F.max_pool2d(c, 3, stride=2, padding=1), 1).flatten(1)
        return residual, self.linear(pooled[:, :8]) + y


class _Deconvolution(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.deconvolution = torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1)

    def forward(self, x):
        return torch.relu(self.deconvolution(x))


class _Tokens(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(24, 48)
        self.down = torch.nn.Linear(48, 12, bias=False)

    def forward(self, x):
        return self.down(F.relu(self.up(x)))


def _inputs(*shapes):
    generator = torch.Generator().manual_seed(0)
    return tuple(torch.randn(*shape, generator=generator) for shape in shapes)


class _Together(torch.nn.Module):
    """Several models side by side in one program (lowering dominates the tests' time): the
    inputs go to each part in turn, ``arity`` at a time, and the outputs are all of theirs."""

    def __init__(self, *parts: tuple[type, int]):
        super().__init__()
        self.parts = torch.nn.ModuleList(part() for part, _ in parts)
        self.arity = [arity for _, arity in parts]

    def forward(self, *inputs):
        outputs, start = [], 0
        for part, arity in zip(self.parts, self.arity):
            out = part(*inputs[start : start + arity])
            outputs.extend(out if isinstance(out, tuple) else (out,))
            start += arity
        return tuple(outputs)


_STATIC_KINDS = {"XNNConv2d", "XNNDepthwiseConv2d", "XNNMaxPooling2d", "XNNFullyConnected", "XNNConvert"}
_MODELS = {
    # name: (module, input shapes, quantization options, datatypes and node kinds expected)
    "mlp_cnn_blocks_deconvolution_per_channel": (
        lambda: _Together((_Mlp, 1), (_Cnn, 1), (_Blocks, 2), (_Deconvolution, 1)),
        [(5, 16), (2, 3, 8, 8), (2, 4, 9, 9), (2, 6), (2, 4, 5, 5)],
        {},
        {D.xnn_datatype_qint8, D.xnn_datatype_qcint8, D.xnn_datatype_qcint32},
        _STATIC_KINDS
        | {"XNNAdd", "XNNMultiply", "XNNSubtract", "XNNClamp", "XNNConcatenate2", "XNNGlobalAvgPooling2d"}
        | {"XNNConvTranspose2d", "XNNStaticSlice", "XNNStaticReshape", "XNNStaticTranspose"},
    ),
    "mlp_cnn_per_tensor": (
        lambda: _Together((_Mlp, 1), (_Cnn, 1)),
        [(5, 16), (2, 3, 8, 8)],
        {"per_channel": False},
        {D.xnn_datatype_qint8, D.xnn_datatype_qint32},
        _STATIC_KINDS,
    ),
    "tokens_dynamic": (
        _Tokens,
        [(3, 5, 24)],
        {"dynamic": True},
        {D.xnn_datatype_qdint8, D.xnn_datatype_qcint8},
        {"XNNFullyConnected", "XNNConvert"},
    ),
}


@functools.cache
def _program(name: str) -> tuple[bytes, tuple]:
    module, shapes, options, _, _ = _MODELS[name]
    torch.manual_seed(0)
    inputs = _inputs(*shapes)
    return _lower_pt2e(module().eval(), inputs, **options), inputs


@pytest.mark.parametrize("name", sorted(_MODELS))
def test_quantized_model_matches_executorch(name):
    _, _, _, datatypes, kinds = _MODELS[name]
    buffer, inputs = _program(name)
    assert datatypes <= _datatypes(buffer), f"the payload no longer holds {sorted(datatypes - _datatypes(buffer))}"
    assert kinds <= _node_kinds(buffer), f"the partitioner no longer emits {sorted(kinds - _node_kinds(buffer))}"
    _matches_executorch(name, buffer, inputs)
    if name == "tokens_dynamic":  # other inputs give other per-row parameters at run time
        _matches_executorch(name, buffer, tuple(3 * i + 0.5 for i in _inputs((3, 5, 24))))


@functools.cache
def _int4_program() -> tuple[bytes, tuple]:
    quant_api = pytest.importorskip("torchao.quantization.quant_api")
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from torchao.quantization.granularity import PerGroup

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8, bias=False)).eval()
    config = quant_api.Int8DynamicActivationIntxWeightConfig(weight_dtype=torch.int4, weight_granularity=PerGroup(32))
    quant_api.quantize_(model, config)
    inputs = _inputs((3, 64))
    exported = torch.export.export(model, inputs)
    return to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()]).to_executorch().buffer, inputs


def test_int4_groupwise_weights_match_executorch():
    """torchao's int8 dynamic activations with int4 group-wise weights: qbint4 filters with
    bfloat16 scales per channel and group of 32, packed two values a byte."""
    buffer, inputs = _int4_program()
    assert {D.xnn_datatype_qbint4, D.xnn_datatype_qdint8} <= _datatypes(buffer)
    _matches_executorch("int4_groupwise", buffer, inputs)


def test_int4_per_channel_weights_hand_built():
    """qcint4 filters (per-channel float32 scales; the partitioner writes one-group qbint4
    instead): the payload's one-group filter rewritten as qcint4 must give ExecuTorch's result
    for the original, within float rounding (the scales apply in another order)."""
    buffer, inputs = _int4_program()
    pte, [(graph, constants)] = _graphs(buffer)
    keys = [entry.key for entry in pte.program.named_data or []]
    named_data = NamedDataMap([("the program", keys, pte.named_data)])
    rewritten = 0
    for index in _ids(graph, D.xnn_datatype_qbint4):
        value = _quantized(graph, index)
        params, (channels, columns) = value.quant_params, value.tensor_value.dims
        if params.group_size != columns:
            continue
        entry = graph.constant_data[params.scale_buffer_idx]
        bits = np.frombuffer(named_data.get(entry.named_key), np.uint16, count=channels)
        scales = (bits.astype(np.uint32) << 16).view(np.float32)
        value.tensor_value = dataclasses.replace(value.tensor_value, datatype=D.xnn_datatype_qcint4)
        value.quant_params = s.PerChannelQuant(scale=[float(v) for v in scales], channel_dim=0)
        rewritten += 1
    assert rewritten == 1
    plan = _init(graph, constants, named_data)
    out = np.empty(plan.outputs[0].shape, np.float32)
    XnnpackBackend().execute(plan, [inputs[0].numpy(), out])
    want = executorch_run(buffer, [i.numpy() for i in inputs])[0]
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5 * float(np.max(np.abs(want))))


# ----------------------------------------------------------------------------
# Payloads altered here


def _mlp_delegate():
    buffer, _ = _program("tokens_dynamic")  # the smallest graph
    pte, [(graph, constants)] = _graphs(buffer)
    keys = [entry.key for entry in pte.program.named_data or []]
    return graph, constants, NamedDataMap([("the program", keys, pte.named_data)])


def _init(graph, constants, named_data):
    return XnnpackBackend().init(memoryview(join_payload(encode_graph(graph), constants)), {}, named_data)


def _quantized(graph, index: int) -> s.XNNQuantizedTensorValue:
    value = graph.xvalues[index].xvalue_union
    assert isinstance(value, s.XNNQuantizedTensorValue)
    return value


def _ids(graph, datatype) -> list[int]:
    return [
        i
        for i, v in enumerate(graph.xvalues)
        if isinstance(v.xvalue_union, s.XNNQuantizedTensorValue) and v.xvalue_union.tensor_value.datatype == datatype
    ]


def test_unsupported_quantized_datatype_is_a_typed_error():
    graph, constants, named_data = _mlp_delegate()
    index = _ids(graph, D.xnn_datatype_qdint8)[0]
    value = _quantized(graph, index)
    value.tensor_value = dataclasses.replace(value.tensor_value, datatype=D.xnn_datatype_qpint8)
    pattern = rf"value {index} \(xnn_datatype_qpint8, PerTokenDynamicQuant\).*not supported"
    with pytest.raises(InvalidProgramError, match=pattern):
        _init(graph, constants, named_data)


def test_mismatched_quantization_parameters_are_typed_errors():
    graph, constants, named_data = _mlp_delegate()
    weight = _ids(graph, D.xnn_datatype_qcint8)[0]
    _quantized(graph, weight).quant_params = s.PerTensorQuant(0.1, 0)
    with pytest.raises(
        InvalidProgramError, match=rf"value {weight} \(xnn_datatype_qcint8, PerTensorQuant\).*PerChannel"
    ):
        _init(graph, constants, named_data)
    graph, constants, named_data = _mlp_delegate()
    channels = _quantized(graph, weight).tensor_value.dims[0]
    _quantized(graph, weight).quant_params.scale = [0.5] * 7
    with pytest.raises(InvalidProgramError, match=f"7 scales for {channels} channels"):
        _init(graph, constants, named_data)
    graph, constants, named_data = _mlp_delegate()
    index = _ids(graph, D.xnn_datatype_qdint8)[0]
    value = _quantized(graph, index)
    value.tensor_value = dataclasses.replace(value.tensor_value, datatype=D.xnn_datatype_qint8)
    value.quant_params = s.PerTensorQuant(0.1, 300)
    with pytest.raises(InvalidProgramError, match="zero point 300 is out of range"):
        _init(graph, constants, named_data)


def test_quantized_value_in_an_unsupported_node_is_a_typed_error():
    graph, constants, named_data = _mlp_delegate()
    last = len(graph.xnodes) - 1
    node = graph.xnodes[last].xnode_union  # a fully connected node reading a qdint8 value
    softmax = s.NODE_KINDS[[k.__name__ for k in s.NODE_KINDS].index("XNNSoftmax")]
    graph.xnodes[last] = s.XNode(xnode_union=softmax(input_id=node.input1_id, output_id=node.output_id))
    pattern = rf"node {last} \(XNNSoftmax\).*quantized values \[{node.input1_id}\].*not supported"
    with pytest.raises(InvalidProgramError, match=pattern):
        _init(graph, constants, named_data)


def test_max_steps_report():
    """Prints the largest differences seen (in quantization steps) for the report (-s)."""
    print({name: round(steps, 3) for name, steps in sorted(MAX_STEPS.items())})
