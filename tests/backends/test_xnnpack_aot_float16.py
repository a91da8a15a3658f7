"""torchedge's XNNPACK lowering of float16 programs (``model.half()``).

The payload is compared with the same model lowered by ExecuTorch's own partitioner: float16
values, float16 fully-connected weights, float32 convolution filters and biases (as ExecuTorch
writes them), run on ExecuTorch's runtime (XNNPACK's f16 kernels) and on torchedge's
interpreter; no more operators left outside delegates than ExecuTorch leaves.
"""

from __future__ import annotations

import collections
import functools

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("executorch.runtime")

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from tests.conftest import executorch_run, torchedge_run  # noqa: E402
from torchedge.backends.xnnpack import schema as s  # noqa: E402
from torchedge.backends.xnnpack.aot import XnnpackPartitioner  # noqa: E402
from torchedge.backends.xnnpack.header import split_payload  # noqa: E402
from torchedge.backends.xnnpack.payload_tables import decode_graph  # noqa: E402
from torchedge.exir import to_edge_transform_and_lower  # noqa: E402
from torchedge.schema.program import KernelCall  # noqa: E402
from torchedge.serialize import deserialize_pte  # noqa: E402

D = s.XNNDatatype


class HalfNet(nn.Module):
    """Convolutions (regular, depthwise), poolings, pad, mean, linear layers, activations,
    softmax, concatenation, slice, binary operators."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.depthwise = nn.Conv2d(8, 8, 3, groups=8)
        self.fc = nn.Linear(8, 16)
        self.out = nn.Linear(16, 8, bias=False)

    def forward(self, x):
        y = F.max_pool2d(F.relu(self.conv(x)), 2)
        y = F.hardtanh(self.depthwise(F.pad(y, [1, 1, 1, 1])), 0.0, 6.0)
        y = F.avg_pool2d(y, 2).mean((2, 3), keepdim=True).flatten(1)
        z = torch.sigmoid(self.fc(y)) * torch.tanh(self.fc(y))
        z = torch.cat([torch.softmax(z, -1), -z], 1)[:, 4:20]
        return self.out(z) + y.abs()


@functools.cache
def _programs():
    """(half model, inputs, torchedge's .pte, ExecuTorch's .pte)."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner as ETX
    from executorch.exir import to_edge_transform_and_lower as et_lower

    torch.manual_seed(0)
    model = HalfNet().eval().half()
    inputs = (torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(1)).half(),)
    ours = to_edge_transform_and_lower(torch.export.export(model, inputs), partitioner=[XnnpackPartitioner()])
    theirs = et_lower(torch.export.export(model, inputs), partitioner=[ETX()])
    return model, inputs, ours.to_executorch().buffer, theirs.to_executorch().buffer


def _graphs(buffer: bytes) -> list:
    pte = deserialize_pte(buffer)
    return [decode_graph(split_payload(pte.delegate_data(d))[0]) for d in pte.program.execution_plan[0].delegates]


def _kernel_calls(buffer: bytes) -> int:
    plan = deserialize_pte(buffer).program.execution_plan[0]
    return sum(isinstance(i.instr_args, KernelCall) for chain in plan.chains for i in chain.instructions)


def _constants_by_consumer(buffer: bytes) -> dict:
    """The datatypes of the constants each node kind reads (filters, biases, operands)."""
    found = collections.defaultdict(set)
    for graph in _graphs(buffer):
        values = {v.xvalue_union.id_out: v.xvalue_union for v in graph.xvalues}
        for xnode in graph.xnodes:
            node = xnode.xnode_union
            for name in ("filter_id", "bias_id", "input1_id", "input2_id", "input_id"):
                value = values.get(getattr(node, name, None))
                if value is not None and value.constant_buffer_idx:
                    found[type(node).__name__].add(D(value.datatype))
    return dict(found)


def test_float16_lowering_runs_like_executorchs():
    model, inputs, ours, theirs = _programs()
    arrays = [i.numpy() for i in inputs]
    want = executorch_run(theirs, arrays)[0]
    scale = float(np.max(np.abs(want.astype(np.float32))))
    with torch.no_grad():
        eager = model(*inputs).numpy()
    for got in (executorch_run(ours, arrays)[0], torchedge_run(ours, arrays)[0], eager):
        assert got.shape == want.shape and got.dtype == np.float16
        # float16 keeps 11 significant bits: a few units in the last place of the largest output.
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), atol=4e-3 * scale)
    assert _kernel_calls(ours) <= _kernel_calls(theirs)


def test_float16_payload_datatypes_match_executorch():
    _, _, ours, theirs = _programs()
    activations = {
        D(v.xvalue_union.datatype) for g in _graphs(ours) for v in g.xvalues if not v.xvalue_union.constant_buffer_idx
    }
    assert activations == {D.xnn_datatype_fp16}
    constants = _constants_by_consumer(ours)
    assert constants["XNNConv2d"] == constants["XNNDepthwiseConv2d"] == {D.xnn_datatype_fp32}
    assert constants["XNNFullyConnected"] == {D.xnn_datatype_fp16}
    reference = _constants_by_consumer(theirs)
    for kind in ("XNNConv2d", "XNNDepthwiseConv2d", "XNNFullyConnected"):
        assert constants[kind] == reference[kind], kind


def test_mixed_float_types_split_at_the_cast():
    """A float32 part and a float16 part lower to delegates of one float type each."""

    class Mixed(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)

        def forward(self, x):
            return torch.relu(self.fc(x).half()) * 2

    model, inputs = Mixed().eval(), (torch.randn(3, 8),)
    program = to_edge_transform_and_lower(torch.export.export(model, inputs), partitioner=[XnnpackPartitioner()])
    buffer = program.to_executorch().buffer
    for graph in _graphs(buffer):
        kinds = {D(v.xvalue_union.datatype) for v in graph.xvalues if not v.xvalue_union.constant_buffer_idx}
        assert len(kinds) == 1
    with torch.no_grad():
        want = model(*inputs).numpy()
    for got in (executorch_run(buffer, [inputs[0].numpy()])[0], torchedge_run(buffer, [inputs[0].numpy()])[0]):
        assert got.dtype == np.float16
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), atol=4e-3 * np.abs(want).max())
