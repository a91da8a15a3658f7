"""Stateful programs (mutable buffers, KV caches) on both runtimes, in both directions.

Each case runs a sequence of calls and compares every step with PyTorch eager
on a copy of the module, so state that is lost, reset or returned as an extra
output shows up as a wrong value in the second or third step.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from tests.conftest import relative_error
from torchedge.errors import ExportError
from torchedge.exir import ExecutorchBackendConfig, to_edge
from torchedge.exir.memory_planning.planning_pass import MemoryPlanningPass
from torchedge.runtime import Runtime


class Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.tensor([5.0, -7.0]))  # not zero: the initial value must be kept

    def forward(self, x):
        self.count.add_(x)
        return self.count * 2


class IntCounter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("steps", torch.tensor([3], dtype=torch.int64))

    def forward(self, x):
        self.steps.add_(1)  # depends on the buffer only: constant folding must leave it alone
        return x * self.steps


class RunningMean(torch.nn.Module):
    """Two in-place updates in a row: the new value is computed by a chain of operators."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.full((4,), 0.5))

    def forward(self, x):
        self.mean.mul_(0.9).add_(0.1 * x.mean(0))
        return x - self.mean


class KVCache(torch.nn.Module):
    def __init__(self, how: str):
        super().__init__()
        self.how = how
        self.register_buffer("k", torch.zeros(1, 2, 8, 4))

    def forward(self, pos, new):
        if self.how == "index_copy":
            self.k.index_copy_(2, pos, new)
        elif self.how == "index_put":
            self.k[:, :, pos] = new
        else:  # slice assignment at the first position given
            self.k[:, :, 2:4] = new
        scores = torch.einsum("bhsd,bhtd->bhst", new, self.k)
        return torch.softmax(scores, dim=-1) @ self.k


class InputMutation(torch.nn.Module):
    def forward(self, x):
        x.add_(1)
        return x * 2


def _steps(model, inputs_per_step):
    """Eager outputs of each step on a private copy of the model (its buffers advance)."""
    model = copy.deepcopy(model)
    with torch.no_grad():
        outs = [model(*[t.clone() for t in inputs]) for inputs in inputs_per_step]
    return [[o.numpy() for o in (out if isinstance(out, tuple) else (out,))] for out in outs]


def _kv_steps():
    generator = torch.Generator().manual_seed(0)
    return [
        (torch.tensor([1, 2]), torch.randn(1, 2, 2, 4, generator=generator)),
        (torch.tensor([5, 6]), torch.randn(1, 2, 2, 4, generator=generator)),
        (torch.tensor([0, 7]), torch.randn(1, 2, 2, 4, generator=generator)),
    ]


class ParameterMutation(torch.nn.Module):
    """A parameter the program writes is state too."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.tensor([1.0, 2.0]), requires_grad=False)

    def forward(self, x):
        self.weight.add_(x)
        return self.weight * 3


class Overwrite(torch.nn.Module):
    """The new state is an input itself: the buffer is not read before it is overwritten."""

    def __init__(self):
        super().__init__()
        self.register_buffer("last", torch.zeros(3))

    def forward(self, x):
        previous = self.last.clone()
        self.last.copy_(x)
        return previous * 2


CASES = {
    "parameter": (ParameterMutation, [(torch.ones(2),), (torch.tensor([0.5, 1.0]),), (torch.ones(2),)]),
    "overwrite": (
        Overwrite,
        [(torch.tensor([1.0, 2.0, 3.0]),), (torch.tensor([4.0, 5.0, 6.0]),), (torch.tensor([7.0, 8.0, 9.0]),)],
    ),
    "counter": (Counter, [(torch.ones(2),), (torch.tensor([2.0, 3.0]),), (torch.ones(2),)]),
    "int_counter": (IntCounter, [(torch.ones(3, dtype=torch.int64),)] * 3),
    "running_mean": (RunningMean, [(torch.randn(3, 4, generator=torch.Generator().manual_seed(i)),) for i in range(3)]),
    "kv_index_copy": (lambda: KVCache("index_copy"), _kv_steps()),
    "kv_index_put": (lambda: KVCache("index_put"), _kv_steps()),
    "kv_slice": (lambda: KVCache("slice"), _kv_steps()),
}


def _torchedge_runner(buffer):
    method = Runtime.get().load_program(buffer).load_method("forward")
    return lambda inputs: method.execute([t.numpy() for t in inputs])


def _executorch_runner(buffer):
    from executorch.runtime import Runtime as ETRuntime

    method = ETRuntime.get().load_program(buffer).load_method("forward")
    return lambda inputs: [o.numpy() for o in method.execute([t.clone() for t in inputs])]


def _executorch_buffer(model, example, config=None) -> bytes:
    from executorch.exir import to_edge as et_to_edge
    from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass

    names = [name for name, _ in model.named_buffers()]
    return (
        et_to_edge(torch.export.export(model, example))
        .transform([InitializedMutableBufferPass(names)])
        .to_executorch(config)
        .buffer
    )


def _check_steps(run, model, steps):
    for step, (inputs, want) in enumerate(zip(steps, _steps(model, steps))):
        got = run(inputs)
        assert len(got) == len(want), f"step {step}: {len(got)} outputs, eager has {len(want)}"
        for g, w in zip(got, want):
            assert relative_error(g, w) <= 1e-5, f"step {step}: relative error {relative_error(g, w):.2e}"


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("runtime", ["torchedge", "executorch"])
@pytest.mark.parametrize("reinplace", [True, False], ids=["in_place", "write_back"])
def test_torchedge_program_keeps_state(case, runtime, reinplace):
    factory, steps = CASES[case]
    model = factory()
    program = to_edge(torch.export.export(copy.deepcopy(model), steps[0])).to_executorch(
        ExecutorchBackendConfig(run_reinplace_pass=reinplace)
    )
    runner = _torchedge_runner if runtime == "torchedge" else _executorch_runner
    _check_steps(runner(program.buffer), model, steps)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("reinplace", [False, True], ids=["write_back", "reinplaced"])
def test_executorch_program_keeps_state_on_torchedge(case, reinplace):
    """ExecuTorch writes state back with ``aten::copy_``, or with ``aten::index_put_`` when it reinplaces."""
    if case == "parameter":
        pytest.skip("ExecuTorch 1.5.1 compiles a parameter mutation into an extra output, not state")
    from executorch.exir import ExecutorchBackendConfig as ETConfig

    factory, steps = CASES[case]
    model = factory()
    buffer = _executorch_buffer(copy.deepcopy(model), steps[0], ETConfig(run_reinplace_pass=reinplace))
    _check_steps(_torchedge_runner(buffer), model, steps)


def test_state_is_not_an_output_and_a_new_load_starts_over():
    steps = CASES["counter"][1]
    program = to_edge(torch.export.export(Counter(), steps[0])).to_executorch()
    assert len(program.program.execution_plan[0].outputs) == 1
    loaded = Runtime.get().load_program(program.buffer)
    first = loaded.load_method("forward")
    first.execute([steps[0][0].numpy()])
    again = loaded.load_method("forward")  # a method of its own: starts from [5, -7]
    np.testing.assert_array_equal(again.execute([np.ones(2, np.float32)])[0], [12.0, -12.0])


class _BigCache(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("k", torch.zeros(1, 2, 64, 4))

    def forward(self, pos, new):
        self.k[:, :, pos] = new
        return self.k.sum(dim=(2, 3))


def test_kv_update_writes_into_the_cache_itself():
    """The update costs the new rows: no write-back copy, and the cache is planned once."""
    model, example = _BigCache(), (torch.tensor([3]), torch.randn(1, 2, 1, 4))
    program = to_edge(torch.export.export(model, example)).to_executorch()
    graph = program.graph_module()
    assert torch.ops.aten.copy_.default not in {n.target for n in graph.graph.nodes}
    updates = [n for n in graph.graph.nodes if n.target is torch.ops.aten.index_put.out]
    assert len(updates) == 1 and updates[0].kwargs["out"].op == "placeholder"
    cache_bytes = model.k.numel() * 4
    write_back = to_edge(torch.export.export(model, example)).to_executorch(
        ExecutorchBackendConfig(run_reinplace_pass=False)
    )
    planned = sum(program.memory_plans["forward"].planned_buffer_sizes)
    assert planned < 2 * cache_bytes <= sum(write_back.memory_plans["forward"].planned_buffer_sizes)


def test_user_input_mutation_returns_the_new_input_like_executorch():
    x = torch.ones(2)
    program = to_edge(torch.export.export(InputMutation(), (x,))).to_executorch()
    want = _executorch_runner(_executorch_buffer(InputMutation(), (x,)))([x])
    got = _torchedge_runner(program.buffer)([x])
    assert len(got) == len(want) == 2
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(x.numpy(), [1.0, 1.0])  # the caller's array is not touched


def test_emit_mutable_buffer_names():
    program = to_edge(torch.export.export(Counter(), (torch.ones(2),))).to_executorch(
        ExecutorchBackendConfig(emit_mutable_buffer_names=True)
    )
    tensors = [v.val for v in program.program.execution_plan[0].values if hasattr(v.val, "extra_tensor_info")]
    assert [t.extra_tensor_info.fully_qualified_name for t in tensors if t.extra_tensor_info] == ["count"]


class _SharedCache(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("cache", torch.zeros(8, 4))


class _Prefill(torch.nn.Module):
    def __init__(self, owner):
        super().__init__()
        self.owner = owner

    def forward(self, x):
        self.owner.cache[0:4] = x
        return self.owner.cache.sum(0)


class _Decode(torch.nn.Module):
    def __init__(self, owner):
        super().__init__()
        self.owner = owner

    def forward(self, pos, x):
        self.owner.cache.index_copy_(0, pos, x)
        return self.owner.cache.sum(0)


def _two_methods():
    owner = _SharedCache()
    x, pos, y = torch.randn(4, 4), torch.tensor([4]), torch.randn(1, 4)
    eps = {
        "prefill": torch.export.export(_Prefill(owner), (x,)),
        "decode": torch.export.export(_Decode(owner), (pos, y)),
    }
    reference = copy.deepcopy(owner)
    want = [_Prefill(reference)(x).numpy(), _Decode(reference)(pos, y).numpy(), _Decode(reference)(pos + 1, y).numpy()]
    calls = [("prefill", [x]), ("decode", [pos, y]), ("decode", [pos + 1, y])]
    return eps, calls, want


def _run_two(load, calls):
    methods = {name: load(name) for name in ("prefill", "decode")}  # both loaded before running
    return [methods[name](inputs) for name, inputs in calls]


def _te_loader(buffer):
    program = Runtime.get().load_program(buffer)

    def load(name):
        method = program.load_method(name)
        return lambda inputs: method.execute([t.numpy() for t in inputs])[0]

    return load


def _et_loader(buffer):
    from executorch.runtime import Runtime as ETRuntime

    program = ETRuntime.get().load_program(buffer)

    def load(name):
        method = program.load_method(name)
        return lambda inputs: method.execute(inputs)[0].numpy()

    return load


@pytest.mark.parametrize("compiler", ["torchedge", "executorch"])
@pytest.mark.parametrize("runtime", ["torchedge", "executorch"])
def test_two_methods_share_one_cache(compiler, runtime):
    eps, calls, want = _two_methods()
    if compiler == "torchedge":
        buffer = (
            to_edge(eps)
            .to_executorch(
                ExecutorchBackendConfig(
                    memory_planning_pass=MemoryPlanningPass(share_mutable_buffers=True), emit_mutable_buffer_names=True
                )
            )
            .buffer
        )
    else:
        from executorch.exir import ExecutorchBackendConfig as ETConfig
        from executorch.exir import to_edge as et_to_edge
        from executorch.exir.passes import MemoryPlanningPass as ETMemoryPlanningPass
        from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass

        buffer = (
            et_to_edge(eps)
            .transform([InitializedMutableBufferPass(["cache"])])
            .to_executorch(
                ETConfig(
                    memory_planning_pass=ETMemoryPlanningPass(share_mutable_buffers=True),
                    emit_mutable_buffer_names=True,
                )
            )
            .buffer
        )
    got = _run_two(_te_loader(buffer) if runtime == "torchedge" else _et_loader(buffer), calls)
    for g, w in zip(got, want):
        assert relative_error(g, w) <= 1e-6


def test_shared_buffers_disagreeing_in_shape_are_an_export_error():
    class A(torch.nn.Module):
        def __init__(self, n):
            super().__init__()
            self.register_buffer("cache", torch.zeros(n))

        def forward(self, x):
            self.cache.add_(x)
            return self.cache + 0

    eps = {"a": torch.export.export(A(4), (torch.ones(4),)), "b": torch.export.export(A(5), (torch.ones(5),))}
    with pytest.raises(ExportError, match="'cache'"):
        to_edge(eps).to_executorch(
            ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(share_mutable_buffers=True))
        )


def test_state_with_onnxruntime_delegate():
    pytest.importorskip("onnxruntime")
    from torchedge.backends.onnxruntime import OnnxRuntimePartitioner
    from torchedge.exir import to_edge_transform_and_lower

    model, steps = KVCache("index_put"), _kv_steps()
    program = to_edge_transform_and_lower(
        torch.export.export(copy.deepcopy(model), steps[0]), partitioner=[OnnxRuntimePartitioner(intra_op_threads=1)]
    ).to_executorch()
    targets = [n.target for n in program.graph_module().graph.nodes if n.op == "call_function"]
    assert torch.ops.aten.index_put.out in targets and any("delegate" in str(t) for t in targets)
    _check_steps(_torchedge_runner(program.buffer), model, steps)


def test_a_mutation_that_changes_dtype_is_an_export_error_naming_the_buffer_and_line():
    """torch.export drops the conversion of ``int_buffer.copy_(float_x)``: refuse, never compute with x."""

    class Converting(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("counts", torch.ones(2, dtype=torch.int32))

        def forward(self, x):
            self.counts.copy_(x)
            return self.counts + 1

    with pytest.raises(ExportError, match=r"buffer 'counts'.*test_stateful.py\", line \d+"):
        to_edge(torch.export.export(Converting(), (torch.tensor([1.7, 2.2]),)))


def test_shared_state_is_capped_before_it_is_allocated():
    """A corrupt size for the shared state memory is refused before anything is allocated."""
    import tracemalloc

    from torchedge.errors import MemoryPlanError
    from torchedge.serialize import deserialize_pte, serialize_pte

    eps, _, _ = _two_methods()
    config = ExecutorchBackendConfig(
        memory_planning_pass=MemoryPlanningPass(share_mutable_buffers=True), emit_mutable_buffer_names=True
    )
    contents = deserialize_pte(to_edge(eps).to_executorch(config).buffer).unpack()
    state_ids = {len(plan.non_const_buffer_sizes) - 1 for plan in contents.program.execution_plan}
    assert state_ids == {2}  # memory id 2 holds the shared cache in both methods
    for plan in contents.program.execution_plan:
        plan.non_const_buffer_sizes[2] = 3 << 30
    data = serialize_pte(contents.program, mutable_data=contents.mutable_data, named_data=contents.named_data)
    program = Runtime.get().load_program(data)
    tracemalloc.start()
    try:
        with pytest.raises(MemoryPlanError, match="shared state .* needs 3221225472 bytes"):
            program.load_method("prefill", max_arena_bytes=64 << 20)
        assert tracemalloc.get_traced_memory()[1] < 16 << 20
    finally:
        tracemalloc.stop()
