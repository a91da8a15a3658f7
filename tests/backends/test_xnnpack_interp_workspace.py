"""The XNNPACK delegates of one loaded method lay their intermediate values out in one workspace.

Programs are lowered by the real ExecuTorch (`XnnpackPartitioner`). Every run with the shared
workspace is compared bit for bit with the same method loaded with a workspace per plan
(``share_workspace=False``: the arithmetic is the same, only where intermediates live differs),
and within 1e-5 with ExecuTorch's runtime. Outputs handed back are checked after later calls,
and methods and programs that each have a workspace are run interleaved and from two threads.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("executorch.runtime")
pytest.importorskip("executorch.backends.xnnpack.partition.xnnpack_partitioner")

import torch.nn.functional as F  # noqa: E402
from torch.export import Dim  # noqa: E402

from tests.conftest import executorch_run  # noqa: E402
from torchedge.backends.xnnpack.buffer_reuse import ALIGNMENT, BufferReuse  # noqa: E402
from torchedge.backends.xnnpack.runtime import BACKEND_ID  # noqa: E402
from torchedge.runtime import Runtime  # noqa: E402
from torchedge.runtime.backend import get_backend  # noqa: E402

ALL_MODELS = os.environ.get("TORCHEDGE_XNNPACK_MODELS") == "all"


class _Block(torch.nn.Module):
    """Attention (split by the partitioner into two delegates around the softmax's masking) and a
    feed-forward block: several delegates with values of many sizes."""

    def __init__(self, d: int = 16, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.qkv, self.out = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.up, self.down = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = (y.view(b, t, self.heads, d // self.heads).transpose(1, 2) for y in self.qkv(x).chunk(3, dim=-1))
        y = x + self.out(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, d))
        return y + self.down(F.gelu(self.up(y)))


def _lower(programs: dict) -> bytes:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    return to_edge_transform_and_lower(programs, partitioner=[XnnpackPartitioner()]).to_executorch().buffer


def _x(seq: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((1, seq, 16)).astype(np.float32)


@pytest.fixture(scope="module")
def lowered() -> bytes:
    """Methods ``forward`` (the block) and ``head`` (a two-layer perceptron)."""
    torch.manual_seed(0)
    head = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16)).eval()
    return _lower(
        {
            "forward": torch.export.export(_Block().eval(), (torch.from_numpy(_x(6, 0)),)),
            "head": torch.export.export(head, (torch.from_numpy(_x(6, 0)),)),
        }
    )


def _load(buffer: bytes, monkeypatch, share: bool = True, name: str = "forward"):
    with monkeypatch.context() as patch:
        patch.setattr(get_backend(BACKEND_ID), "share_workspace", share)
        return Runtime.get().load_program(buffer).load_method(name)


def _workspace(method) -> np.ndarray:
    (workspace,) = {id(plan.workspace): plan.workspace for _, plan in method._handles}.values()
    return workspace


def _run(method, inputs) -> list[np.ndarray]:
    return [np.array(o) for o in method.execute(inputs)]


def test_the_delegates_of_a_method_share_one_workspace_sized_for_the_largest(lowered, monkeypatch):
    method = _load(lowered, monkeypatch)
    plans = [plan for _, plan in method._handles]
    assert len(plans) >= 3
    workspace = _workspace(method)
    assert workspace.nbytes == max(plan.scratch_bytes for plan in plans) < sum(p.scratch_bytes for p in plans)
    _run(method, [_x(6, 1)])
    bound = [plan.bound[1] for plan in plans]  # the plans laid out in the call's arrays are in it
    assert all(p is not None and p.scratch_bytes <= workspace.nbytes for p in bound)
    assert max(p.scratch_bytes for p in bound) > 0
    assert all(plan.workspace is None for _, plan in _load(lowered, monkeypatch, share=False)._handles)
    assert not np.shares_memory(workspace, _workspace(_load(lowered, monkeypatch)))


@pytest.mark.parametrize("name", ["block", "mlp", "cnn", "bert", "llama"])
def test_runs_give_the_bits_of_a_workspace_per_plan(name, lowered, monkeypatch):
    if name == "block":
        buffer, calls = lowered, [[_x(6, seed)] for seed in range(3)]
    else:
        if name in ("bert", "llama") and not ALL_MODELS:
            pytest.skip("lowering takes long: set TORCHEDGE_XNNPACK_MODELS=all")
        from torchedge.models import load_model

        model, inputs = load_model(name)
        buffer = _lower({"forward": torch.export.export(model, tuple(inputs))})
        calls = [[i.numpy() for i in inputs]] * 2
    shared, own = _load(buffer, monkeypatch), _load(buffer, monkeypatch, share=False)
    for inputs in calls:
        got, want = _run(shared, inputs), _run(own, inputs)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w)
    for g, w in zip(got, executorch_run(buffer, calls[-1]), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5 * float(np.max(np.abs(w))))


def test_outputs_are_never_in_the_workspace_nor_changed_by_later_calls(lowered, monkeypatch):
    method, reference = _load(lowered, monkeypatch), _load(lowered, monkeypatch, share=False)
    kept = [(method.execute([_x(6, seed)]), _run(reference, [_x(6, seed)])) for seed in range(3)]
    workspace = _workspace(method)
    for got, want in kept:
        for g, w in zip(got, want, strict=True):
            assert not np.shares_memory(g, workspace)
            np.testing.assert_array_equal(g, w)


def test_methods_and_programs_interleaved_and_in_two_threads(lowered, monkeypatch):
    program = Runtime.get().load_program(lowered)
    methods = [program.load_method("forward"), program.load_method("head"), _load(lowered, monkeypatch)]
    references = [_load(lowered, monkeypatch, share=False, name=n) for n in ("forward", "head", "forward")]
    calls = [(k, _x(6, seed)) for seed in range(6) for k in (0, 1, 2)]
    want = [_run(references[k], [x]) for k, x in calls]
    got = [_run(methods[k], [x]) for k, x in calls]

    def thread(k: int) -> list:  # methods 0 and 2: one program's forward, and another program's
        return [_run(methods[k], [x]) for j, x in calls * 10 if j == k]

    with ThreadPoolExecutor(2) as pool:
        threaded = dict(zip((0, 2), pool.map(thread, (0, 2))))
    for g, w in zip(got, want, strict=True):
        for a, b in zip(g, w, strict=True):
            np.testing.assert_array_equal(a, b)
    for k, results in threaded.items():
        expected = [w for (j, _), w in zip(calls, want) if j == k] * 10
        for g, w in zip(results, expected, strict=True):
            np.testing.assert_array_equal(g[0], w[0])


def test_a_dynamic_payload_at_every_size_in_range(monkeypatch):
    torch.manual_seed(0)
    model = _Block().eval()
    buffer = _lower(
        {
            "forward": torch.export.export(
                model, (torch.from_numpy(_x(8, 0)),), dynamic_shapes=({1: Dim("seq", min=2, max=12)},)
            )
        }
    )
    shared, own = _load(buffer, monkeypatch), _load(buffer, monkeypatch, share=False)
    for seq in (12, 2, 7, 12, 5):
        x = _x(seq, seq)
        (got,), (want,) = _run(shared, [x]), _run(own, [x])
        np.testing.assert_array_equal(got, want)
        with torch.no_grad():
            eager = model(torch.from_numpy(x)).numpy()
        np.testing.assert_allclose(got, eager, rtol=1e-5, atol=1e-5 * float(np.max(np.abs(eager))))


class _Node:
    def __init__(self, output_id, *inputs):
        self.output_id = output_id
        for k, value in enumerate(inputs, 1):
            setattr(self, f"input{k}_id", value)


def test_buffers_lie_apart_in_the_workspace_until_it_is_full():
    """Each buffer made gets its own aligned bytes; a dead one goes to the next value of its size
    (found from a view of it); what does not fit is an array of its own."""
    nodes = [_Node(1, 0), _Node(2, 1), _Node(3, 2), _Node(4, 3)]
    workspace = np.zeros(3 * ALIGNMENT, np.uint8)
    reuse = BufferReuse(nodes, kept={4}, workspace=workspace)
    first = reuse.take((2, 3), np.dtype(np.float32))
    reuse.defined(1, first.T)  # a view: the value lives on the buffer
    reuse.after(0, nodes[0])
    second = reuse.take((5,), np.dtype(np.float64))
    reuse.defined(2, second)
    reuse.after(1, nodes[1])  # value 1 dies: its buffer is free
    third = reuse.take((6,), np.dtype(np.float32))
    reuse.defined(3, third)
    reuse.after(2, nodes[2])
    fourth = reuse.take((40,), np.dtype(np.float32))  # 160 bytes: past the workspace's end
    offsets = [b.__array_interface__["data"][0] - workspace.ctypes.data for b in (first, second, third)]
    assert offsets == [0, ALIGNMENT, 0]
    assert np.shares_memory(first, workspace) and np.shares_memory(second, workspace)
    assert not np.shares_memory(fourth, workspace) and not np.shares_memory(first, second)
    assert reuse.nbytes == 2 * ALIGNMENT + 3 * ALIGNMENT
