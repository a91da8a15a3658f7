"""torchedge's NumPy interpreter of ExecuTorch's XNNPACK delegate.

Programs are lowered by the real ExecuTorch with its `XnnpackPartitioner` and run on torchedge
(the ``XnnpackBackend`` of `torchedge.backends.xnnpack`) and on ExecuTorch (XNNPACK itself); the
outputs must agree within 1e-5 relative. The zoo models that take long to lower (mobilenet_v2,
resnet18, vit, bert, llama: 20 to 30 s each) run with ``TORCHEDGE_XNNPACK_MODELS=all``; the
node-coverage models here cover their node kinds meanwhile (mobilenet's inverted residual
block with its explicit padding is in `_Images`).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("executorch.runtime")
pytest.importorskip("executorch.backends.xnnpack.partition.xnnpack_partitioner")

import torch.nn.functional as F  # noqa: E402

from tests.conftest import executorch_run, torchedge_run  # noqa: E402
from torchedge.backends.xnnpack import schema as s  # noqa: E402
from torchedge.backends.xnnpack.header import join_payload, split_payload  # noqa: E402
from torchedge.backends.xnnpack.payload_tables import decode_graph, encode_graph  # noqa: E402
from torchedge.backends.xnnpack.runtime import XnnpackBackend  # noqa: E402
from torchedge.errors import InvalidProgramError  # noqa: E402
from torchedge.runtime.named_data import NamedDataMap  # noqa: E402
from torchedge.serialize import deserialize_pte  # noqa: E402

FAST_MODELS = ["mlp", "cnn"]
SLOW_MODELS = ["mobilenet_v2", "resnet18", "vit", "bert", "llama"]
ALL_MODELS = os.environ.get("TORCHEDGE_XNNPACK_MODELS") == "all"


def _lower(model, inputs) -> bytes:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    exported = torch.export.export(model, tuple(inputs))
    return to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()]).to_executorch().buffer


@functools.cache
def _zoo(name: str):
    from torchedge.models import load_model

    model, inputs = load_model(name)
    return _lower(model, inputs), [i.numpy() for i in inputs]


def _graphs(buffer: bytes):
    """(pte, [(delegate, decoded graph, constant data)]) of every XNNPACK delegate in ``buffer``."""
    pte = deserialize_pte(buffer)
    found = []
    for delegate in pte.program.execution_plan[0].delegates:
        assert delegate.id == "XnnpackBackend"
        flatbuffer, constants = split_payload(pte.delegate_data(delegate))
        found.append((delegate, decode_graph(flatbuffer), constants))
    return pte, found


def _node_kinds(buffer: bytes) -> collections.Counter:
    _, graphs = _graphs(buffer)
    return collections.Counter(type(n.xnode_union).__name__ for _, g, _ in graphs for n in g.xnodes)


def _assert_close(got, want, tol: float = 1e-5) -> None:
    """Within ``tol`` of each value, or of the output's largest magnitude for values near 0."""
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, f"{g.shape} {g.dtype} != {w.shape} {w.dtype}"
        scale = float(np.max(np.abs(w.astype(np.float64)))) if w.size else 0.0
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol * scale)


def _matches_executorch(buffer: bytes, inputs, tol: float = 1e-5) -> None:
    _assert_close(torchedge_run(buffer, inputs), executorch_run(buffer, inputs), tol)


@pytest.mark.parametrize("name", FAST_MODELS + SLOW_MODELS)
def test_zoo_model_matches_executorch(name):
    if name in SLOW_MODELS and not ALL_MODELS:
        pytest.skip("lowering takes long: set TORCHEDGE_XNNPACK_MODELS=all")
    buffer, inputs = _zoo(name)
    assert _node_kinds(buffer), "nothing was delegated to XNNPACK"
    _matches_executorch(buffer, inputs)


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_float16_model_matches_executorch(name):
    """Half-precision graphs (float32 filters and biases where the partitioner keeps them):
    products sum in float32 and round once per node, as XNNPACK's f16 kernels do here."""
    from torchedge.models import load_model

    model, inputs = load_model(name)
    model, inputs = model.half(), tuple(i.half() for i in inputs)
    buffer = _lower(model, inputs)
    _, graphs = _graphs(buffer)
    datatypes = {v.xvalue_union.datatype for _, g, _ in graphs for v in g.xvalues}
    assert s.XNNDatatype.xnn_datatype_fp16 in datatypes
    _matches_executorch(buffer, [i.numpy() for i in inputs], tol=1e-3)


class _Images(torch.nn.Module):
    """NHWC nodes: grouped and depthwise (multiplier, stride, dilation) convolutions, pooling,
    PReLU, hardswish, bilinear resize in both modes, slice, concatenate, mean, fused clamp, and
    MobileNetV2's inverted residual block as `transformers` writes it (explicit padding)."""

    def __init__(self):
        super().__init__()
        self.grouped = torch.nn.Conv2d(8, 8, 3, padding=1, groups=2)
        self.multiplier = torch.nn.Conv2d(8, 16, 3, stride=2, padding=2, dilation=2, groups=8)
        self.prelu = torch.nn.PReLU(16)
        self.depthwise = torch.nn.Conv2d(8, 8, 3, stride=(1, 2), padding=1, groups=8, bias=False)
        self.expand = torch.nn.Conv2d(8, 16, 1)
        self.inverted = torch.nn.Conv2d(16, 16, 3, groups=16)
        self.project = torch.nn.Conv2d(16, 8, 1)

    def forward(self, x):
        y = F.hardswish(self.grouped(x))
        average = F.avg_pool2d(y, 2)
        peak = F.max_pool2d(y, 3, stride=2, padding=1)
        z = self.prelu(self.multiplier(y))
        up = F.interpolate(average, scale_factor=2, mode="bilinear", align_corners=False)
        corners = F.interpolate(average, size=(5, 7), mode="bilinear", align_corners=True)
        clamped = F.hardtanh(self.depthwise(x), -0.5, 0.5)
        block = F.relu6(self.inverted(F.pad(F.relu6(self.expand(x)), (1, 1, 1, 1))))
        residual = x + self.project(block)
        return torch.cat([peak, average, z[:, :8]], 1), up, corners.mean((2, 3), keepdim=True), clamped, residual


class _Elementwise(torch.nn.Module):
    """Unary and binary math, activations, concatenations of 3-5, softmax, bmm, slice, pad, permute."""

    def forward(self, x, y):
        a = torch.tanh(x) + torch.sigmoid(y) - F.leaky_relu(y, 0.1) * x
        b = torch.sqrt(torch.abs(x)) / (torch.exp(y) + 1) + torch.log(torch.abs(y) + 1)
        c = torch.maximum(torch.floor(x), torch.ceil(y)) - torch.minimum(-x, y * y)
        d = torch.rsqrt(torch.abs(x) + 1) + F.gelu(y) + torch.sin(x) * torch.cos(y)
        soft = torch.softmax(torch.cat([a, b, c], -1), -1)
        products = torch.bmm(x, y.transpose(1, 2))
        padded = F.pad(x, (1, 2, 0, 1), value=0.5)
        return (
            soft,
            torch.cat([a, b, c, d], 0),
            torch.cat([a, b, c, d, x], 1),
            products,
            x[:, 1:3, 2:].clamp(-1, 1),
            padded,
            torch.relu(x).permute(2, 0, 1),
        )


class _Deconvolution(torch.nn.Module):
    """Transposed convolutions: stride, padding, output padding, groups, dilation, fused relu."""

    def __init__(self):
        super().__init__()
        self.plain = torch.nn.ConvTranspose2d(8, 6, 3, stride=2, padding=1, output_padding=1)
        self.grouped = torch.nn.ConvTranspose2d(
            8, 4, (2, 3), stride=(1, 2), padding=(0, 1), groups=2, dilation=(2, 1), bias=False
        )

    def forward(self, x):
        return torch.relu(self.plain(x)), self.grouped(x)


_COVERAGE = {
    "deconvolution": (_Deconvolution, lambda: (torch.randn(2, 8, 5, 7),), {"XNNConvTranspose2d"}),
    "images": (
        _Images,
        lambda: (torch.randn(2, 8, 10, 12),),
        {
            "XNNConv2d",
            "XNNDepthwiseConv2d",
            "XNNHardswish",
            "XNNAvgPooling2d",
            "XNNMaxPooling2d",
            "XNNPReLU",
            "XNNStaticResizeBilinear2D",
            "XNNStaticSlice",
            "XNNConcatenate3",
            "XNNGlobalAvgPooling2d",
            "XNNStaticTranspose",
            "XNNStaticConstantPad",
            "XNNAdd",
        },
    ),
    "elementwise": (
        _Elementwise,
        lambda: (torch.randn(2, 4, 6), torch.randn(2, 4, 6)),
        {
            "XNNTanh",
            "XNNSigmoid",
            "XNNLeakyReLU",
            "XNNAdd",
            "XNNSubtract",
            "XNNMultiply",
            "XNNDiv",
            "XNNAbs",
            "XNNSquareRoot",
            "XNNReciprocalSquareRoot",
            "XNNExp",
            "XNNLog",
            "XNNFloor",
            "XNNCeiling",
            "XNNMaximum",
            "XNNMinimum",
            "XNNNegate",
            "XNNGelu",
            "XNNSin",
            "XNNCos",
            "XNNConcatenate3",
            "XNNConcatenate4",
            "XNNConcatenate5",
            "XNNSoftmax",
            "XNNBatchMatrixMultiply",
            "XNNStaticSlice",
            "XNNStaticConstantPad",
            "XNNClamp",
        },
    ),
}


@pytest.mark.parametrize("name", sorted(_COVERAGE))
def test_node_kinds_match_executorch(name):
    module, make_inputs, kinds = _COVERAGE[name]
    torch.manual_seed(0)
    model, inputs = module().eval(), make_inputs()
    buffer = _lower(model, inputs)
    missing = kinds - set(_node_kinds(buffer))
    assert not missing, f"the partitioner no longer emits {sorted(missing)} for this model"
    _matches_executorch(buffer, [i.numpy() for i in inputs])


def test_wide_3x3_convolutions_take_winograd_and_match_executorch(monkeypatch):
    """Dense 3x3 stride-1 convolutions wide enough for the optimized kernels' Winograd step
    (padded and not, a fused relu) run it on the NHWC values, within 1e-5 of XNNPACK itself."""
    from torchedge.backends.xnnpack import nodes_linear_conv

    calls = []
    real = nodes_linear_conv.winograd_conv
    monkeypatch.setattr(nodes_linear_conv, "winograd_conv", lambda *a: calls.append(1) or real(*a))
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(64, 64, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(64, 48, 3, bias=False)
    ).eval()
    inputs = [torch.randn(2, 64, 15, 17)]
    _matches_executorch(_lower(model, inputs), [i.numpy() for i in inputs])
    assert len(calls) == 2


# ----------------------------------------------------------------------------
# Payloads built or altered here


def _mlp_delegate():
    buffer, inputs = _zoo("mlp")
    pte, [(delegate, graph, constants)] = _graphs(buffer)
    keys = [entry.key for entry in pte.program.named_data or []]
    return graph, constants, NamedDataMap([("the program", keys, pte.named_data)]), pte, inputs


def _run_payload(payload: bytes, named_data, inputs) -> np.ndarray:
    backend = XnnpackBackend()
    plan = backend.init(memoryview(payload), {}, named_data)
    out = np.empty(plan.outputs[0].shape, plan.outputs[0].dtype)
    backend.execute(plan, [*inputs, out])
    return out


def test_reencoded_graph_decodes_to_the_same_graph():
    graph, constants, named_data, _, inputs = _mlp_delegate()
    flatbuffer = encode_graph(graph)
    assert decode_graph(memoryview(flatbuffer)) == graph
    want = executorch_run(_zoo("mlp")[0], inputs)[0]
    _assert_close([_run_payload(join_payload(flatbuffer, constants), named_data, inputs)], [want])


def test_constants_inside_the_payload():
    """Older payloads keep constants after the flatbuffer, by offset, instead of in named data."""
    graph, _, named_data, _, inputs = _mlp_delegate()
    blob, entries = bytearray(), [graph.constant_data[0]]
    for entry in graph.constant_data[1:]:
        blob += b"\0" * (-len(blob) % 16)
        entries.append(s.ConstantDataOffset(offset=len(blob), size=entry.size))
        blob += bytes(named_data.get(entry.named_key))
    inline = dataclasses.replace(graph, constant_data=entries)
    payload = join_payload(encode_graph(inline), bytes(blob))
    want = executorch_run(_zoo("mlp")[0], inputs)[0]
    _assert_close([_run_payload(payload, NamedDataMap(), inputs)], [want])


def test_unsupported_node_kind_is_a_typed_error():
    graph, constants, named_data, _, _ = _mlp_delegate()
    attention = s.NODE_KINDS[[k.__name__ for k in s.NODE_KINDS].index("XNNScaledDotProductAttention")]
    graph.xnodes[1] = s.XNode(xnode_union=attention(query_id=3, key_id=3, value_id=3, output_id=6))
    payload = join_payload(encode_graph(graph), constants)
    with pytest.raises(InvalidProgramError, match=r"node 1 \(XNNScaledDotProductAttention\).*not supported"):
        XnnpackBackend().init(memoryview(payload), {}, named_data)


def test_quantized_input_to_a_float_filter_is_a_typed_error():
    """A quantized activation feeding a float32 fully connected node: a mix XNNPACK has no kernel for."""
    graph, constants, named_data, _, _ = _mlp_delegate()
    tensor = graph.xvalues[1].xvalue_union
    graph.xvalues[1] = s.XValue(
        s.XNNQuantizedTensorValue(
            dataclasses.replace(tensor, datatype=s.XNNDatatype.xnn_datatype_qint8), s.PerTensorQuant(0.1, 0)
        )
    )
    payload = join_payload(encode_graph(graph), constants)
    with pytest.raises(InvalidProgramError, match=r"value 1 \(xnn_datatype_qint8, PerTensorQuant\).*not supported"):
        XnnpackBackend().init(memoryview(payload), {}, named_data)


def test_malformed_payloads_are_typed_errors():
    graph, constants, named_data, _, _ = _mlp_delegate()
    with pytest.raises(InvalidProgramError, match="header magic"):
        XnnpackBackend().init(memoryview(b"\0" * 64), {}, named_data)
    payload = bytearray(join_payload(encode_graph(graph), constants))
    payload[14:18] = (10**6).to_bytes(4, "little")  # flatbuffer size past the end
    with pytest.raises(InvalidProgramError, match="does not lie in"):
        XnnpackBackend().init(memoryview(bytes(payload)), {}, named_data)
    graph.xnodes[0].xnode_union.filter_id = 10**6
    with pytest.raises(InvalidProgramError, match=r"node 0 \(XNNFullyConnected\).*value 1000000"):
        XnnpackBackend().init(memoryview(join_payload(encode_graph(graph), constants)), {}, named_data)


def test_backend_loads_by_its_entry_point_without_an_import():
    import subprocess
    import sys

    code = "from torchedge.runtime.backend import get_backend; print(type(get_backend('XnnpackBackend')).__name__)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "XnnpackBackend"


def test_inspect_shows_what_the_payload_holds(tmp_path):
    from torchedge.devtools.describe import describe_program

    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).eval()
    buffer = _lower(model, (torch.randn(3, 4),))
    text = describe_program(buffer)
    assert "delegate 0 (XnnpackBackend)" in text
    assert "2 x XNNFullyConnected" in text
    assert "weights: 4 by key in named data (the program's segments or a .ptd), 0 in the payload (0 bytes)" in text
