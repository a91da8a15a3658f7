"""How torchedge's XNNPACK interpreter lays a payload out: fused node groups (the fusion rules'
adapter), the plan laid out in the delegate call's own arrays, buffers reused by later values,
and the native pools held at the runtime's thread count.

Payloads are lowered by the real ExecuTorch (`XnnpackPartitioner`); every optimized layout is
compared bit for bit with the plain one (no fusion, arguments copied in and out) and within 1e-5
with ExecuTorch's runtime on the same program.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("executorch.runtime")
pytest.importorskip("executorch.backends.xnnpack.partition.xnnpack_partitioner")

import torch.nn.functional as F  # noqa: E402

from tests.conftest import executorch_run  # noqa: E402
from torchedge.backends.xnnpack.buffer_reuse import BufferReuse  # noqa: E402
from torchedge.backends.xnnpack.graph import build_plan  # noqa: E402
from torchedge.backends.xnnpack.header import split_payload  # noqa: E402
from torchedge.backends.xnnpack.payload_tables import decode_graph  # noqa: E402
from torchedge.backends.xnnpack.plan import Plan  # noqa: E402
from torchedge.backends.xnnpack.runtime import XnnpackBackend  # noqa: E402
from torchedge.fusion import FusionOptions  # noqa: E402
from torchedge.runtime import Runtime  # noqa: E402
from torchedge.runtime.named_data import NamedDataMap  # noqa: E402
from torchedge.runtime.threads import RUNTIME_NUM_THREADS, encode_num_threads  # noqa: E402
from torchedge.serialize import deserialize_pte  # noqa: E402


class _Block(torch.nn.Module):
    """A transformer's feed-forward block (linear, exact gelu, linear, residual) and a linear with a
    relu in one delegate; a constant pad (handed back too) and a convolution in another."""

    def __init__(self):
        super().__init__()
        self.up, self.down, self.head = torch.nn.Linear(16, 48), torch.nn.Linear(48, 16), torch.nn.Linear(16, 8)
        self.conv = torch.nn.Conv2d(3, 4, 3)

    def forward(self, x, image):
        y = x + self.down(F.gelu(self.up(x)))
        padded = F.pad(image, (1, 2, 1, 0), value=0.5)
        return torch.relu(self.head(y)), self.conv(padded), padded


def _inputs():
    rng = np.random.default_rng(0)
    return [rng.standard_normal((2, 5, 16)).astype(np.float32), rng.standard_normal((1, 3, 6, 7)).astype(np.float32)]


@pytest.fixture(scope="module")
def lowered() -> bytes:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    exported = torch.export.export(_Block().eval(), tuple(torch.from_numpy(i) for i in _inputs()))
    return to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()]).to_executorch().buffer


def _delegates(buffer: bytes):
    """(payload, graph, constant data, named data) of each XNNPACK delegate in ``buffer``."""
    pte = deserialize_pte(buffer)
    named = NamedDataMap([("the program", [e.key for e in pte.program.named_data or []], pte.named_data)])
    found = []
    for delegate in pte.program.execution_plan[0].delegates:
        payload = pte.delegate_data(delegate)
        flatbuffer, constants = split_payload(payload)
        found.append((payload, decode_graph(flatbuffer), constants, named))
    return found


def _run_plain(buffer: bytes, inputs, monkeypatch) -> list[np.ndarray]:
    """The program on torchedge with every delegate unfused and its arguments copied in and out."""
    with monkeypatch.context() as patch:
        patch.setattr(Plan, "MAX_BINDS", 0)
        patch.setattr("torchedge.backends.xnnpack.graph.plan_fusions", lambda graph, options=None: {})
        method = Runtime.get().load_program(buffer).load_method("forward")
        return [np.array(o) for o in method.execute(inputs)]


def _assert_close(got, want, tol: float = 1e-5) -> None:
    for g, w in zip(got, want, strict=True):
        scale = float(np.max(np.abs(w)))
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol * scale)


def test_linear_gelu_is_one_linear_act_step(lowered):
    """The rules' adapter runs fully connected + gelu as rule linear_act; nothing at level none."""
    fused, unfused = [], []
    for _, graph, constants, named in _delegates(lowered):
        fused += [kind for _, kind, _ in build_plan(graph, constants, named).steps]
        unfused += [kind for _, kind, _ in build_plan(graph, constants, named, fusion=FusionOptions("none")).steps]
    assert [k for k in fused if k.startswith("linear_act")] == ["linear_act: XNNFullyConnected + XNNGelu"]
    assert unfused.count("XNNGelu") == 1 and not any(k.startswith("linear_act") for k in unfused)
    assert len(fused) == len(unfused) - 1


def test_optimized_plans_match_the_plain_interpreter_bit_for_bit_and_executorch(lowered, monkeypatch):
    inputs = _inputs()
    plain = _run_plain(lowered, inputs, monkeypatch)
    method = Runtime.get().load_program(lowered).load_method("forward")
    for _ in range(3):  # the first call lays the plans out in the call's arrays, the others reuse them
        got = [np.array(o) for o in method.execute(inputs)]
        for g, p in zip(got, plain, strict=True):
            np.testing.assert_array_equal(g, p)
    _assert_close(got, executorch_run(lowered, inputs))
    plans = [handle for _, handle in method._handles]
    assert plans and all(p.bound is not None and p.bound[1] is not None for p in plans)


def test_outputs_are_rewritten_whole_after_the_caller_reused_their_memory(lowered):
    """Between calls the caller's arrays hold other values: a run writes every element it hands
    back (a constant pad's border included)."""
    inputs = _inputs()
    method = Runtime.get().load_program(lowered).load_method("forward")
    first = [np.array(o) for o in method.execute(inputs)]
    for _, plan in method._handles:
        for buffer in plan.bound[1].outputs:
            buffer.fill(np.nan)
    again = [np.array(o) for o in method.execute(inputs)]
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(first[2], F.pad(torch.from_numpy(inputs[1]), (1, 2, 1, 0), value=0.5).numpy())


def _plan(lowered, specs=None):
    (payload, _, _, named), *_ = _delegates(lowered)
    backend = XnnpackBackend()
    return backend, backend.init(payload, specs or {}, named)


def test_arguments_that_do_not_fit_are_copied(lowered):
    backend, plan = _plan(lowered)
    by_size = {i.size: i for i in _inputs()}
    xs = [by_size[b.size].reshape(b.shape) for b in plan.inputs]
    want = [np.zeros(o.shape, o.dtype) for o in plan.outputs]
    backend.execute(plan, [*xs, *want])
    assert plan.bound[1] is not None
    # Strided inputs, and fresh arrays on every call (laid out again up to MAX_BINDS, then copied).
    for _ in range(Plan.MAX_BINDS + 2):
        strided = [np.repeat(x, 2, axis=-1)[..., ::2] for x in xs]
        outs = [np.full(o.shape, np.nan, o.dtype) for o in plan.outputs]
        backend.execute(plan, [*strided, *outs])
        for got, expected in zip(outs, want, strict=True):
            np.testing.assert_array_equal(got, expected)
    assert plan.binds == Plan.MAX_BINDS
    # An output over an input's memory is not laid out in place: the input is read first.
    shared = np.zeros(max(xs[0].size, want[0].size), np.float32)
    inside, out = shared[: xs[0].size].reshape(xs[0].shape), shared[: want[0].size].reshape(want[0].shape)
    inside[...] = xs[0]
    plan.binds = 0
    backend.execute(plan, [inside, *xs[1:], out, *[np.empty_like(w) for w in want[1:]]])
    assert plan.bound[1] is None
    np.testing.assert_array_equal(out, want[0])


def test_native_pools_take_the_runtime_thread_count(lowered):
    assert _plan(lowered)[1].threads.num_threads == 1
    assert _plan(lowered, {RUNTIME_NUM_THREADS: encode_num_threads(3)})[1].threads.num_threads == 3


class _Node:
    def __init__(self, output_id, *inputs):
        self.output_id = output_id
        for k, value in enumerate(inputs, 1):
            setattr(self, f"input{k}_id", value)


def test_buffers_are_reused_after_their_last_reader():
    nodes = [_Node(1, 0), _Node(2, 1), _Node(3, 2), _Node(4, 3, 1)]
    reuse = BufferReuse(nodes, kept={4})
    made = {}
    for index, node in enumerate(nodes):
        made[node.output_id] = reuse.take((2, 3), np.dtype(np.float32))
        reuse.defined(node.output_id, made[node.output_id])
        if index == 1:  # value 2 is also seen as a view: its buffer lives while either does
            reuse.defined(9, made[2].reshape(6))
        reuse.after(index, node)
    same = {k: {j for j in made if made[j].base is made[k].base} for k in made}
    assert same[1] == {1} and same[2] == {2}  # 1 is read by the last node; 2 has a view that never dies
    assert same[3] == {3} and 4 not in same[3]  # 3 dies at node 3, after 4 was laid out beside it


def test_a_dead_buffer_goes_to_the_next_value_of_its_size():
    nodes = [_Node(1, 0), _Node(2, 1), _Node(3, 2)]
    reuse = BufferReuse(nodes, kept={3})
    first = reuse.take((4,), np.dtype(np.float32))
    reuse.defined(1, first)
    reuse.after(0, nodes[0])
    second = reuse.take((2, 2), np.dtype(np.float32))
    reuse.defined(2, second)
    reuse.after(1, nodes[1])  # value 1's last reader: its buffer is free
    third = reuse.take((4,), np.dtype(np.float32))
    assert third.base is first.base and second.base is not first.base
    assert reuse.take((4,), np.dtype(np.float64)).base is not first.base
