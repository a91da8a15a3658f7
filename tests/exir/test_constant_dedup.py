"""Each distinct constant is stored once: in the Edge program, the .pte and ONNX payloads.

An unrolled LSTM transposes the same weights at every timestep; a GPT-2 language model
ties its output projection to its token embedding; weights may be equal under two names.
Counting the stored tensors against the distinct contents of the constants shows the
duplicates, and the outputs still match eager.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
import torch
from onnx import numpy_helper
from torch import nn
from torch.export import Dim

from tests.conftest import assert_matches, executorch_compile, torch_outputs, torchedge_run
from torchedge.exir import to_edge, to_edge_transform_and_lower
from torchedge.exir.emit.constants import ConstantTable
from torchedge.exir.passes.constant_folding import ConstantContents
from torchedge.schema.program import Tensor
from torchedge.schema.scalar_type import element_size
from torchedge.serialize import deserialize_pte

aten = torch.ops.aten


class LSTMHead(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lstm = nn.LSTM(32, 64, batch_first=True)
        self.head = nn.Linear(64, 8)

    def forward(self, x):
        return self.head(self.lstm(x)[0])


def _tiny_gpt2():
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(
        vocab_size=1000, n_positions=64, n_embd=64, n_layer=2, n_head=2, bos_token_id=0, eos_token_id=0
    )
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(config).eval()


class Logits(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        return self.model(input_ids=ids, use_cache=False).logits


def _edge_constants(ep) -> list[torch.Tensor]:
    """The constant inputs of an Edge program."""
    return [
        ep.state_dict[s.target] if s.target in ep.state_dict else ep.constants[s.target]
        for s in ep.graph_signature.input_specs
        if s.target is not None
    ]


def _distinct(tensors) -> int:
    contents = ConstantContents()
    for t in tensors:
        if contents.find(t) is None:
            contents.add(t, t)
    return sum(len(group) for group in contents._groups.values())


def _pte_constants(buffer: bytes) -> dict[int, bytes]:
    """Constant buffer index -> the bytes of the tensors the program reads from it."""
    pte = deserialize_pte(buffer)
    found = {}
    for plan in pte.program.execution_plan:
        for value in plan.values:
            tensor = value.val
            if isinstance(tensor, Tensor) and tensor.data_buffer_idx > 0:
                nbytes = math.prod(tensor.sizes) * element_size(tensor.scalar_type)
                data = bytes(pte.constant_data(tensor.data_buffer_idx)[:nbytes])
                found[tensor.data_buffer_idx] = max(found.get(tensor.data_buffer_idx, b""), data, key=len)
    return found


def _onnx_initializers(buffer: bytes) -> list[np.ndarray]:
    """Every initializer of every ONNX delegate: those inside the model and the large ones the
    payload names in the program's named data."""
    from onnx import TensorProto

    from torchedge.backends.onnxruntime.payload import read_payload

    pte = deserialize_pte(buffer)
    delegates = [d for plan in pte.program.execution_plan for d in plan.delegates]
    payloads = [read_payload(pte.delegate_data(d), pte.named_data) for d in delegates]
    assert payloads, "nothing was delegated"
    arrays = []
    for model_bytes, raw in payloads:
        model = onnx.load_from_string(model_bytes)
        arrays += [numpy_helper.to_array(t) for t in model.graph.initializer if t.data_location != TensorProto.EXTERNAL]
        arrays += [array for _, array in raw]
    return arrays


def _lowered(model, inputs):
    from torchedge.backends.onnxruntime import OnnxRuntimePartitioner

    exported = torch.export.export(model, inputs)
    return to_edge_transform_and_lower(exported, partitioner=[OnnxRuntimePartitioner(1)]).to_executorch()


# -- an unrolled LSTM: every timestep transposes the same weights ------------------------------------


def test_lstm_timesteps_share_one_folded_transpose():
    model, inputs = LSTMHead().eval(), (torch.randn(1, 10, 32),)
    edge = to_edge(torch.export.export(model, inputs)).exported_program()
    constants = _edge_constants(edge)
    assert len(constants) == _distinct(constants)
    folded = [n for n in edge.graph.nodes if n.op == "placeholder" and n.name.startswith("_folded_")]
    recurrent = [n for n in folded if tuple(n.meta["val"].shape) == (64, 256)]
    assert len(recurrent) == 1 and len(recurrent[0].users) == 9  # one w_hh transpose (step 0 reads h0 = 0)


def test_lstm_pte_and_onnx_payload_store_each_constant_once():
    model, inputs = LSTMHead().eval(), (torch.randn(1, 10, 32),)
    expected = torch_outputs(model, inputs)
    portable = to_edge(torch.export.export(model, inputs)).to_executorch()
    stored = list(_pte_constants(portable.buffer).values())
    assert len(stored) == len(set(stored))
    delegated = _lowered(model, inputs)
    initializers = _onnx_initializers(delegated.buffer)
    assert len(initializers) == len({(a.dtype.str, a.tobytes()) for a in initializers})
    assert len(delegated.buffer) < 1.2 * len(portable.buffer)
    for program in (portable, delegated):
        assert_matches(torchedge_run(program.buffer, inputs), expected)


# -- GPT-2: the token embedding is the output projection --------------------------------------------


def test_gpt2_tied_embedding_is_stored_once():
    gpt2 = _tiny_gpt2()
    assert gpt2.lm_head.weight is gpt2.transformer.wte.weight
    model, inputs = Logits(gpt2), (torch.randint(0, 1000, (1, 12)),)
    program = to_edge(torch.export.export(model, inputs)).to_executorch()
    weights = {p.data_ptr(): p for p in gpt2.parameters()}.values()
    parameter_bytes = sum(p.numel() * p.element_size() for p in weights)
    stored = _pte_constants(program.buffer)
    assert sum(len(b) for b in stored.values()) < parameter_bytes + (64 << 10)  # no second (transposed) copy
    assert len(program.buffer) <= len(executorch_compile(model, inputs)) * 1.01
    embedding_bytes = gpt2.transformer.wte.weight.numel() * 4
    assert sum(len(b) == embedding_bytes for b in stored.values()) == 1
    assert_matches(torchedge_run(program.buffer, inputs), torch_outputs(model, inputs))


def test_gpt2_onnx_payload_stores_the_tied_embedding_once():
    gpt2 = _tiny_gpt2()
    model, inputs = Logits(gpt2), (torch.randint(0, 1000, (1, 12)),)
    program = _lowered(model, inputs)
    initializers = _onnx_initializers(program.buffer)
    assert len(initializers) == len({(a.dtype.str, a.tobytes()) for a in initializers})
    assert sum(a.size == gpt2.transformer.wte.weight.numel() for a in initializers) == 1
    assert_matches(torchedge_run(program.buffer, inputs), torch_outputs(model, inputs))


def test_tied_embedding_with_a_dynamic_sequence_length():
    gpt2 = _tiny_gpt2()
    model, ids = Logits(gpt2), torch.randint(0, 1000, (1, 12))
    exported = torch.export.export(model, (ids,), dynamic_shapes=({1: Dim("seq", min=2, max=32)},))
    edge = to_edge(exported).exported_program()
    lookups = [n for n in edge.graph.nodes if n.target is aten.embedding.default]
    assert [tuple(n.args[0].meta["val"].shape) for n in lookups] == [(64, 64)]  # positions only; tokens: a gather
    assert edge.range_constraints[next(iter(edge.range_constraints))].upper == 32  # the bound survives
    program = to_edge(exported).to_executorch()
    for length in (2, 7, 32):
        tokens = torch.randint(0, 1000, (1, length))
        assert_matches(torchedge_run(program.buffer, (tokens,)), torch_outputs(model, (tokens,)))


# -- constants under two names, equal folded results ---------------------------------------------


class TwoNames(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Parameter(torch.randn(4, 8))
        self.b = nn.Parameter(self.a.detach().clone())  # equal contents, another parameter
        self.register_buffer("zero", torch.zeros(8))
        self.register_buffer("negative_zero", torch.full((8,), -0.0))  # equal as numbers, not as bytes

    def forward(self, x):
        y = x @ self.a.t() + (x * 2) @ self.b.permute(1, 0)  # two spellings of one transpose
        return y.sum(-1, keepdim=True) + (1.0 / (x + self.zero)) + (1.0 / (x + self.negative_zero))


def test_equal_constants_become_one_and_different_bytes_stay_apart():
    model, inputs = TwoNames().eval(), (torch.randn(3, 8),)
    edge = to_edge(torch.export.export(model, inputs)).exported_program()
    constants = _edge_constants(edge)
    assert len(constants) == _distinct(constants)
    assert sum(tuple(c.shape) == (8, 4) for c in constants) == 1  # a.t() and b.permute(1, 0): one constant
    assert sum(tuple(c.shape) == (8,) for c in constants) == 2  # 0.0 and -0.0 differ
    program = to_edge(torch.export.export(model, inputs)).to_executorch()
    assert_matches(torchedge_run(program.buffer, inputs), torch_outputs(model, inputs))


class LiteralSpellings(nn.Module):
    """Calls that differ only in how a literal is spelled compute different constants."""

    def __init__(self):
        super().__init__()
        self.register_buffer("counts", torch.arange(6))
        self.register_buffer("ones", torch.ones(6))

    def forward(self, x):
        as_int, as_float = self.counts + 1, self.counts + 1.0  # int64 and float32
        return (x * as_int + as_float, 1.0 / (x + self.ones * 0.0), 1.0 / (x + self.ones * -0.0))


def test_identical_calls_share_a_constant_and_different_literals_do_not():
    model, inputs = LiteralSpellings().eval(), (torch.full((6,), -0.0),)
    edge = to_edge(torch.export.export(model, inputs)).exported_program()
    constants = _edge_constants(edge)
    assert len(constants) == _distinct(constants)
    assert sorted(str(c.dtype) for c in constants if c.shape == (6,)) == sorted(
        ["torch.int64", "torch.float32", "torch.float32", "torch.float32"]
    )  # +1, +1.0, *0.0, *-0.0
    program = to_edge(torch.export.export(model, inputs)).to_executorch()
    got, want = torchedge_run(program.buffer, inputs), torch_outputs(model, inputs)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)  # 1/(-0.0 + 0.0) = inf, 1/(-0.0 + -0.0) = -inf
    assert np.isposinf(got[1]).all() and np.isneginf(got[2]).all()


def test_constant_table_dedups_by_content():
    table = ConstantTable()
    first = table.add(b"\x01\x02\x03\x04")
    assert table.add(bytes([1, 2, 3, 4])) == first
    assert table.add(b"\x01\x02\x03\x05") != first
    assert len(table.buffers()) == 3  # the reserved empty buffer and two distinct ones
