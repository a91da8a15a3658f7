"""torchedge's XNNPACK lowering of programs exported with dynamic dims.

As ExecuTorch writes them, the payload's values carry the upper-bound dims, and ExecuTorch's
runtime (and torchedge's interpreter) reshape the graph to each call's inputs: the program runs
at every size in range on both runtimes, like eager, with no more operators left outside
delegates than ExecuTorch's lowering of the same program (for the transformer block, see
`test_transformer_block_runs_at_every_sequence_length`).
"""

from __future__ import annotations

import collections
import functools

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("executorch.runtime")

import torch.nn as nn  # noqa: E402
from torch.export import Dim  # noqa: E402

from tests.conftest import executorch_run, torchedge_run  # noqa: E402
from torchedge.backends.xnnpack.aot import XnnpackPartitioner  # noqa: E402
from torchedge.backends.xnnpack.header import split_payload  # noqa: E402
from torchedge.backends.xnnpack.payload_tables import decode_graph  # noqa: E402
from torchedge.exir import to_edge_transform_and_lower  # noqa: E402
from torchedge.models import load_model  # noqa: E402
from torchedge.schema.program import DelegateCall, KernelCall  # noqa: E402
from torchedge.serialize import deserialize_pte  # noqa: E402

MAX_BATCH, MAX_TOKENS = 6, 12


class Block(nn.Module):
    """A pre-norm attention block: layer norm, qkv projection, two heads, softmax, output
    projection, residual."""

    def __init__(self):
        super().__init__()
        self.norm, self.qkv, self.out = nn.LayerNorm(16), nn.Linear(16, 48), nn.Linear(16, 16)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(self.norm(x)).view(b, t, 3, 2, 8).permute(2, 0, 3, 1, 4)
        attended = torch.softmax(q @ k.transpose(-1, -2) / 8**0.5, -1) @ v
        return self.out(attended.transpose(1, 2).reshape(b, t, 16)) + x


@functools.cache
def _programs(name: str):
    """(model, example input, dynamic dim, torchedge's .pte, ExecuTorch's .pte)."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner as ETX
    from executorch.exir import to_edge_transform_and_lower as et_lower

    if name == "block":
        torch.manual_seed(0)
        model, inputs, dim = Block().eval(), (torch.randn(1, 5, 16),), 1
        dynamic = ({1: Dim("tokens", min=1, max=MAX_TOKENS)},)
    elif name == "batched block":
        torch.manual_seed(0)
        model, inputs, dim = Block().eval(), (torch.randn(2, 5, 16),), None
        dynamic = ({0: Dim("batch", min=1, max=MAX_BATCH), 1: Dim("tokens", min=1, max=MAX_TOKENS)},)
    else:
        model, inputs = load_model(name)
        dim, dynamic = 0, ({0: Dim("batch", min=1, max=MAX_BATCH)},)
    exported = torch.export.export(model.eval(), inputs, dynamic_shapes=dynamic)
    ours = to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()]).to_executorch().buffer
    exported = torch.export.export(model, inputs, dynamic_shapes=dynamic)
    theirs = et_lower(exported, partitioner=[ETX()]).to_executorch().buffer
    return model, inputs[0], dim, ours, theirs


def _calls(buffer: bytes) -> collections.Counter:
    plan = deserialize_pte(buffer).program.execution_plan[0]
    return collections.Counter(type(i.instr_args) for chain in plan.chains for i in chain.instructions)


def _portable_ops(buffer: bytes) -> collections.Counter:
    plan = deserialize_pte(buffer).program.execution_plan[0]
    calls = [i.instr_args for chain in plan.chains for i in chain.instructions]
    return collections.Counter(plan.operators[c.op_index].name for c in calls if isinstance(c, KernelCall))


def _input_dims(buffer: bytes) -> list:
    pte = deserialize_pte(buffer)
    found = []
    for delegate in pte.program.execution_plan[0].delegates:
        graph = decode_graph(split_payload(pte.delegate_data(delegate))[0])
        found += [list(graph.xvalues[i].xvalue_union.dims) for i in graph.input_ids]
    return found


def _runs_at_every_size(name: str, sizes) -> None:
    model, example, dim, ours, _ = _programs(name)
    for size in sizes:
        shape = list(example.shape)
        shape[dim] = size
        x = torch.randn(*shape, generator=torch.Generator().manual_seed(size))
        with torch.no_grad():
            want = model(x).numpy()
        scale = float(np.abs(want).max())
        for got in (executorch_run(ours, [x.numpy()])[0], torchedge_run(ours, [x.numpy()])[0]):
            assert got.shape == want.shape, (name, size)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * scale)


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_dynamic_batch_runs_at_every_size(name):
    _runs_at_every_size(name, range(1, MAX_BATCH + 1))
    _, example, _, ours, theirs = _programs(name)
    assert _calls(ours)[DelegateCall] >= 1
    assert _calls(ours)[KernelCall] <= _calls(theirs)[KernelCall]
    # The payload's external inputs hold the upper bound.
    assert [MAX_BATCH, *example.shape[1:]] in _input_dims(ours)


def test_transformer_block_runs_at_every_sequence_length():
    """Every node whose shapes follow its inputs' is delegated (projections, attention's
    matrix products, softmax, permutes, residual add), and the views with one dynamic dim
    (XNNPACK's reshape infers it), among them those around the 3-D linear layers, which
    ExecuTorch's lowering keeps whole: no more operators outside than ExecuTorch leaves."""
    _runs_at_every_size("block", range(1, MAX_TOKENS + 1))
    _, _, _, ours, theirs = _programs("block")
    dims = _input_dims(ours)
    assert dims and all(MAX_TOKENS in d for d in dims if len(d) > 1)
    assert _calls(ours)[KernelCall] <= _calls(theirs)[KernelCall]


def test_views_with_two_dynamic_dims_stay_outside_as_in_executorch():
    """With a dynamic batch and length, views with two dynamic dims, which XNNPACK's reshape (one
    inferred dim) cannot take, stay on portable kernels, as ExecuTorch's partitioner leaves them;
    every other operator ExecuTorch delegates is delegated (clones included). ExecuTorch keeps a
    linear layer whole on its 3-D input, where torchedge's Edge graph has view, addmm, view: the
    view back to [batch, tokens, features] stays outside as well. Both runtimes give eager's output
    at every (batch, tokens)."""
    model, _, _, ours, theirs = _programs("batched block")
    for batch, tokens in [(1, 1), (1, MAX_TOKENS), (MAX_BATCH, 1), (3, 7), (MAX_BATCH, MAX_TOKENS)]:
        x = torch.randn(batch, tokens, 16, generator=torch.Generator().manual_seed(batch * 100 + tokens))
        with torch.no_grad():
            want = model(x).numpy()
        for got in (executorch_run(ours, [x.numpy()])[0], torchedge_run(ours, [x.numpy()])[0]):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * float(np.abs(want).max()))
    views = {"executorch_prim::et_view", "executorch_prim::mul"}  # views and the sizes they read
    ours_outside, theirs_outside = _portable_ops(ours), _portable_ops(theirs)
    assert ours_outside["executorch_prim::et_view"] > 0 and theirs_outside["executorch_prim::et_view"] > 0
    assert {op: n for op, n in ours_outside.items() if op not in views} == {
        op: n for op, n in theirs_outside.items() if op not in views
    }
