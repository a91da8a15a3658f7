"""A buffer that one method writes and another only reads (an encoder writing the
cross-attention cache its decoder reads) is state in both methods: the reader sees the
writer's updates on both runtimes, never the buffer's initial value folded into a constant."""

from __future__ import annotations

import copy

import pytest
import torch

from tests.conftest import relative_error
from torchedge.errors import ExportError
from torchedge.exir import EdgeCompileConfig, ExecutorchBackendConfig, to_edge
from torchedge.exir.memory_planning.planning_pass import MemoryPlanningPass
from torchedge.runtime import Runtime


class _Owner(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("cache", torch.zeros(4, 3))


class _Write(torch.nn.Module):
    def __init__(self, owner):
        super().__init__()
        self.owner = owner

    def forward(self, x, pos):
        self.owner.cache.index_copy_(0, pos, x)
        return x + 1


class _Peek(torch.nn.Module):
    """Reads the cache; ``reduce`` adds a part computed from the cache alone (what folding takes)."""

    def __init__(self, owner, reduce: bool):
        super().__init__()
        self.owner = owner
        self.reduce = reduce

    def forward(self, y):
        out = self.owner.cache * y
        return out + (self.owner.cache * 2).sum(0) if self.reduce else out


X, POS, Y = torch.randn(1, 3), torch.tensor([1]), torch.randn(4, 3)
CALLS = [("forward", (X, POS)), ("forward", (2 * X, POS + 2)), ("peek", (Y,)), ("forward", (-X, POS)), ("peek", (Y,))]


def _programs(reduce: bool):
    owner = _Owner()
    eps = {
        "forward": torch.export.export(_Write(owner), (X, POS)),
        "peek": torch.export.export(_Peek(owner, reduce), (Y,)),
    }
    reference = copy.deepcopy(owner)
    modules = {"forward": _Write(reference), "peek": _Peek(reference, reduce)}
    want = [modules[name](*inputs).numpy() for name, inputs in CALLS]
    return eps, want


def _config(share: bool) -> ExecutorchBackendConfig:
    return ExecutorchBackendConfig(
        emit_mutable_buffer_names=True, memory_planning_pass=MemoryPlanningPass(share_mutable_buffers=share)
    )


def _run_torchedge(buffer: bytes) -> list:
    program = Runtime.get().load_program(buffer)
    methods = {name: program.load_method(name) for name in ("forward", "peek")}  # both alive: one state
    return [methods[name].execute([t.numpy() for t in inputs])[0] for name, inputs in CALLS]


def _run_executorch(buffer: bytes) -> list:
    from executorch.runtime import Runtime as ETRuntime

    program = ETRuntime.get().load_program(buffer)
    methods = {name: program.load_method(name) for name in ("forward", "peek")}
    return [methods[name].execute(list(inputs))[0].numpy() for name, inputs in CALLS]


@pytest.mark.parametrize("fold", [True, False], ids=["fold", "no_fold"])
@pytest.mark.parametrize("reduce", [False, True], ids=["mul", "mul_and_sum"])
def test_a_method_reading_a_buffer_another_writes_sees_the_writes(fold, reduce):
    eps, want = _programs(reduce)
    edge = to_edge(eps, compile_config=EdgeCompileConfig(fold_constants=fold))
    buffer = edge.to_executorch(_config(share=True)).buffer
    for run in (_run_torchedge, _run_executorch):
        got = run(buffer)
        for step, (g, w) in enumerate(zip(got, want)):
            assert relative_error(g, w) <= 1e-6, f"{run.__name__}, call {step} ({CALLS[step][0]})"


def _state_tensors(program) -> dict[str, list]:
    """Method -> [(name, memory id, offset)] of every named (mutable) tensor of its plan."""
    found: dict[str, list] = {}
    for plan in program.execution_plan:
        for value in plan.values:
            tensor = value.val
            info = getattr(tensor, "extra_tensor_info", None)
            if info is not None and info.fully_qualified_name:
                allocation = tensor.allocation_info
                found.setdefault(plan.name, []).append(
                    (info.fully_qualified_name, allocation.memory_id, allocation.memory_offset_low)
                )
    return found


def test_the_reader_places_the_buffer_where_the_writer_does_as_executorch_does():
    from executorch.exir import ExecutorchBackendConfig as ETConfig
    from executorch.exir import to_edge as et_to_edge
    from executorch.exir.passes import MemoryPlanningPass as ETMemoryPlanningPass

    eps, _ = _programs(reduce=False)
    ours = to_edge(eps).to_executorch(_config(share=True)).program
    theirs = (
        et_to_edge(_programs(reduce=False)[0])
        .to_executorch(
            ETConfig(
                emit_mutable_buffer_names=True, memory_planning_pass=ETMemoryPlanningPass(share_mutable_buffers=True)
            )
        )
        .executorch_program
    )
    assert (
        _state_tensors(ours)
        == _state_tensors(theirs)
        == {"forward": [("owner.cache", 2, 0)], "peek": [("owner.cache", 2, 0)]}
    )


def test_without_shared_state_a_reader_of_written_state_is_an_export_error():
    """Each method would keep its own copy: the reader could never see a write (ExecuTorch
    compiles it and the reader returns the initial value)."""
    eps, _ = _programs(reduce=False)
    with pytest.raises(ExportError, match=r"method 'peek' reads buffer 'owner.cache', which method 'forward' mutates"):
        to_edge(eps).to_executorch(_config(share=False))


@pytest.mark.parametrize("fold", [True, False], ids=["fold", "no_fold"])
def test_a_reader_compiled_alone_keeps_the_buffer_as_a_constant(fold):
    """Nothing in that program writes the buffer: its value is a weight, folded or not."""
    owner = _Owner()
    owner.cache.normal_()
    peek = _Peek(owner, reduce=True)
    program = to_edge(
        torch.export.export(peek, (Y,)), compile_config=EdgeCompileConfig(fold_constants=fold)
    ).to_executorch(_config(share=True))
    assert _state_tensors(program.program) == {}
    got = Runtime.get().load_program(program.buffer).load_method("forward").execute([Y.numpy()])
    assert relative_error(got[0], peek(Y).numpy()) <= 1e-6
