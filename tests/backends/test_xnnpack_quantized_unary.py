"""Quantized unary nodes and dynamically quantized convolutions, against ExecuTorch's XNNPACK.

ExecuTorch 1.5.1's partitioner lowers clamps (relu, hardtanh) between int8 values whose
parameters differ, and dynamically quantized 2-D convolutions; those programs come from the real
lowering. It lowers sigmoid, tanh, hardswish, leaky ReLU, ... only in float (their configs list
no static quantization, ELU's config is disabled) and no node that requantizes, yet XNNPACK runs
all of them on int8 values: those payloads are built here from a lowered program (a float node
between a dequantizing and a quantizing convert is rewritten to read and write the int8 values)
and run on ExecuTorch's own runtime too. The int8 input takes every one of the 256 codes, so
the whole lookup table (or fixed-point path) of each node is compared; outputs must be equal.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("executorch.runtime")
pytest.importorskip("executorch.backends.xnnpack.quantizer.xnnpack_quantizer")
pytest.importorskip("torchao.quantization.pt2e.quantize_pt2e")

import torch.nn.functional as F  # noqa: E402

from tests.backends.test_xnnpack_quantized import _graphs, _lower_pt2e, _node_kinds  # noqa: E402
from tests.conftest import executorch_run, torchedge_run  # noqa: E402
from torchedge.backends.xnnpack import schema as s  # noqa: E402
from torchedge.backends.xnnpack.header import join_payload, split_payload  # noqa: E402
from torchedge.backends.xnnpack.payload_tables import decode_graph, encode_graph  # noqa: E402
from torchedge.backends.xnnpack.runtime import XnnpackBackend  # noqa: E402
from torchedge.errors import InvalidProgramError  # noqa: E402
from torchedge.runtime.named_data import NamedDataMap  # noqa: E402
from torchedge.serialize import deserialize_pte, serialize_pte  # noqa: E402

D = s.XNNDatatype
KINDS = {kind.__name__: kind for kind in s.NODE_KINDS}
_QDQ = torch.ops.quantized_decomposed
IN_SCALE, IN_ZERO = 0.05, 3


def _qdq(x, scale: float, zero_point: int):
    """int8 quantize then dequantize: the partitioner sees the node between them as quantized."""
    q = _QDQ.quantize_per_tensor(x, scale, zero_point, -128, 127, torch.int8)
    return _QDQ.dequantize_per_tensor(q, scale, zero_point, -128, 127, torch.int8)


def _lower(model, inputs) -> bytes:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    exported = torch.export.export(model.eval(), inputs)
    return to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()]).to_executorch().buffer


def _every_code() -> tuple:
    """An input whose quantization (scale 0.05, zero point 3) takes all 256 int8 codes."""
    return (torch.linspace(-8, 8, 512).reshape(2, 4, 8, 8),)


def _assert_equal(buffer: bytes, inputs, count: int) -> None:
    """The first ``count`` outputs of both runtimes are equal."""
    inputs = [i.numpy() for i in inputs]
    got, want = torchedge_run(buffer, inputs)[:count], executorch_run(buffer, inputs)[:count]
    for index, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert np.array_equal(g, w), f"output {index}: {int(np.sum(g != w))} values differ"


# node kind (with its fields) and the output's (scale, zero point)
_UNARY = [
    (("XNNSigmoid", {}), (1 / 256, -128)),
    (("XNNSigmoid", {}), (0.0021, 5)),
    (("XNNTanh", {}), (1 / 128, 0)),
    (("XNNTanh", {}), (0.0093, -11)),
    (("XNNELU", {"alpha": 1.0}), (0.035, -70)),
    (("XNNELU", {"alpha": 0.5}), (0.041, 12)),
    (("XNNHardswish", {}), (0.037, -117)),
    (("XNNGelu", {}), (0.033, -120)),
    (("XNNLeakyReLU", {"negative_slope": 0.1}), (0.031, -40)),
    (("XNNLeakyReLU", {"negative_slope": 0.37}), (0.083, 9)),
    (("XNNConvert", {}), (0.021, -6)),
    (("XNNConvert", {}), (0.13, 40)),
    (("XNNExp", {}), (0.091, -128)),
    (("XNNSquareRoot", {}), (0.011, -128)),
    (("XNNSin", {}), (1 / 128, 1)),
    (("XNNNegate", {}), (0.047, -2)),
    (("XNNAbs", {}), (0.033, -128)),
    (("XNNSquare", {}), (0.27, -128)),
    (("XNNFloor", {}), (0.06, 4)),
]


def _quantized(graph: s.XNNGraph, value_id: int) -> s.XNNQuantizedTensorValue | None:
    """The quantized value whose id is ``value_id``, None for a float one."""
    for xvalue in graph.xvalues:
        value = xvalue.xvalue_union
        if isinstance(value, s.XNNQuantizedTensorValue) and value.tensor_value.id_out == value_id:
            return value
    return None


class _Base(torch.nn.Module):
    """relu, hardtanh and relu6 between int8 values (the partitioner lowers these: parameters
    changed, and kept), then a float negate between the input's int8 codes and its own
    (rewritten below)."""

    def forward(self, x):
        a = _qdq(x, IN_SCALE, IN_ZERO)
        return (
            _qdq(F.relu(a), 0.02, -5),
            _qdq(F.hardtanh(a, -1.5, 2.0), 0.013, 7),
            _qdq(F.relu6(a), IN_SCALE, IN_ZERO),
            _qdq(torch.neg(a), IN_SCALE, IN_ZERO),
        )


@functools.cache
def _base() -> bytes:
    return _lower(_Base(), _every_code())


def _rewritten(buffer: bytes, target: str, kind: str, fields: dict, output: tuple[float, int] | None = None) -> bytes:
    """``buffer`` with its float ``target`` node (between a dequantizing and a quantizing convert)
    made a ``kind`` node that reads and writes the int8 values (the quantizing convert goes),
    the output's parameters set to ``output``."""
    contents = deserialize_pte(buffer).unpack()
    [delegate] = contents.program.execution_plan[0].delegates
    entry = contents.program.backend_delegate_data[delegate.processed.index]
    flatbuffer, constants = split_payload(memoryview(entry.data))
    graph = decode_graph(flatbuffer)
    [codes] = {  # the input's int8 codes: what the graph's first convert writes
        n.xnode_union.output_id
        for n in graph.xnodes
        if n.xnode_union.input_id in graph.input_ids and _quantized(graph, n.xnode_union.output_id)
    }
    producers = {n.xnode_union.output_id: n.xnode_union for n in graph.xnodes}
    [index] = [i for i, n in enumerate(graph.xnodes) if type(n.xnode_union).__name__ == target]
    node = graph.xnodes[index].xnode_union
    [after] = [i for i, n in enumerate(graph.xnodes) if getattr(n.xnode_union, "input_id", None) == node.output_id]
    quantize, source = graph.xnodes[after].xnode_union, producers[node.input_id].input_id
    assert type(quantize).__name__ == "XNNConvert" and _quantized(graph, quantize.output_id)
    fields = {**{k: v for k, v in vars(node).items() if k not in ("input_id", "output_id")}, **fields}
    source = source if _quantized(graph, source) else codes
    graph.xnodes[index].xnode_union = KINDS[kind](**{**fields, "input_id": source, "output_id": quantize.output_id})
    if output is not None:
        _quantized(graph, quantize.output_id).quant_params = s.PerTensorQuant(*output)
    del graph.xnodes[after]
    entry.data = join_payload(encode_graph(graph), constants)
    return serialize_pte(contents.program, named_data=contents.named_data, mutable_data=contents.mutable_data)


def test_clamps_that_requantize_match_executorch():
    """(The lowered program itself does not load on ExecuTorch: its float negate reads the int8
    codes, whose dequantizing convert the clamps absorbed; XNNPACK refuses that mix, as torchedge
    does. The negate is rewritten first.)"""
    _, [(graph, _)] = _graphs(_base())
    clamps = [n for n in graph.xnodes if type(n.xnode_union).__name__ == "XNNClamp"]
    assert len(clamps) == 3, "the partitioner no longer lowers the clamps on int8 values"
    assert all(_quantized(graph, n.xnode_union.input_id) for n in clamps)
    with pytest.raises(InvalidProgramError, match=r"\(XNNNegate\).*must be per-tensor qint8"):
        torchedge_run(_base(), [i.numpy() for i in _every_code()])
    _assert_equal(_rewritten(_base(), "XNNNegate", "XNNConvert", {}), _every_code(), 3)


@pytest.mark.parametrize("kind, fields, output", [(k, f, o) for (k, f), o in _UNARY], ids=lambda v: str(v))
def test_quantized_unary_node_matches_executorch(kind, fields, output):
    """Lookup tables (sigmoid, tanh, ELU, hardswish, GELU, exp, ...), the fixed-point leaky
    ReLU and requantizing convert, on all 256 codes, equal to XNNPACK's."""
    buffer = _rewritten(_base(), "XNNNegate", kind, fields, output)
    _, [(graph, _)] = _graphs(buffer)
    assert any(
        type(n.xnode_union).__name__ == kind
        and _quantized(graph, n.xnode_union.input_id)
        and _quantized(graph, n.xnode_union.output_id)
        for n in graph.xnodes
    )
    _assert_equal(buffer, _every_code(), 4)


def test_quantized_average_pooling_is_refused_as_xnnpack_does():
    """XNNPACK defines average pooling on float values only: a payload asking for it on int8
    values fails to load on ExecuTorch's runtime, and is a typed error here."""

    class Pool(torch.nn.Module):
        def forward(self, x):
            return _qdq(F.avg_pool2d(_qdq(x, IN_SCALE, IN_ZERO), 2), 0.04, 1)

    rewritten = _rewritten(_lower(Pool(), _every_code()), "XNNAvgPooling2d", "XNNAvgPooling2d", {})
    inputs = [i.numpy() for i in _every_code()]
    with pytest.raises(RuntimeError):
        executorch_run(rewritten, inputs)
    with pytest.raises(InvalidProgramError, match=r"\(XNNAvgPooling2d\).*quantized values.*not supported"):
        torchedge_run(rewritten, inputs)


class _Convolutions(torch.nn.Module):
    """Convolutions the dynamic config quantizes (not those followed by a ReLU): padded,
    grouped, strided without a bias."""

    def __init__(self):
        super().__init__()
        self.padded = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.grouped = torch.nn.Conv2d(8, 8, 3, padding=(2, 1), groups=2)
        self.strided = torch.nn.Conv2d(8, 4, 3, stride=2, padding=1, bias=False)

    def forward(self, x):
        return self.strided(torch.tanh(self.grouped(torch.tanh(self.padded(x)))))


def test_dynamically_quantized_convolutions_match_executorch():
    """qdint8 input (one set of parameters per image) x qcint8 filter -> float32."""
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    inputs = (torch.randn(2, 3, 11, 11, generator=generator),)
    buffer = _lower_pt2e(_Convolutions().eval(), inputs, dynamic=True)
    _, [(graph, _)] = _graphs(buffer)
    dynamic = [
        n
        for n in graph.xnodes
        if type(n.xnode_union).__name__ == "XNNConv2d" and _quantized(graph, n.xnode_union.input1_id)
    ]
    assert len(dynamic) == 3 and "XNNConvert" in _node_kinds(buffer)
    for run_inputs in (inputs, (3 * inputs[0] + 0.5,)):  # other per-image parameters at run time
        arrays = [i.numpy() for i in run_inputs]
        [got], [want] = torchedge_run(buffer, arrays), executorch_run(buffer, arrays)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * float(np.max(np.abs(want))))


def test_scale_ratio_outside_xnnpack_fixed_point_range_is_a_typed_error():
    """XNNPACK's Q8 multipliers hold input / output scale ratios in [2**-8, 2**7] only."""
    pte = deserialize_pte(_rewritten(_base(), "XNNNegate", "XNNConvert", {}, (IN_SCALE / 1000, 0)))
    [delegate] = pte.program.execution_plan[0].delegates
    flatbuffer, constants = split_payload(pte.delegate_data(delegate))
    keys = [entry.key for entry in pte.program.named_data or []]
    named_data = NamedDataMap([("the program", keys, pte.named_data)])
    with pytest.raises(
        InvalidProgramError, match=r"\(XNNConvert\): input / output scale 1000.* outside XNNPACK's range"
    ):
        XnnpackBackend().init(memoryview(join_payload(bytes(flatbuffer), constants)), {}, named_data)
