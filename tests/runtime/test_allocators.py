"""Planned memory the caller gives (`Program.load_method(planned_memory=..., run_allocator=...)`),
sized from `MethodMeta` before loading."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from torchedge.errors import InputError, MemoryPlanError
from torchedge.kernels.allocator import aligned_bytes
from torchedge.runtime import Runtime

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def _case(name: str):
    data = np.load(GOLDEN / f"{name}.npz")
    inputs = [data[k] for k in sorted(data.files) if k.startswith("forward/0/in")]
    return Runtime.get().load_program(GOLDEN / f"{name}.pte"), inputs


def _reference(name: str) -> list:
    program, inputs = _case(name)
    return program.load_method().execute(inputs)


def _same(got, expected) -> None:
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(g, e)


@pytest.mark.parametrize("name", ["mlp", "cnn", "stateful"])
def test_a_run_over_caller_arrays_equals_a_normal_run(name):
    program, inputs = _case(name)
    meta = program.metadata()
    assert meta.num_memory_planned_buffers() == len(meta.planned_buffer_sizes)
    arenas = [aligned_bytes(meta.memory_planned_buffer_size(i)) for i in range(meta.num_memory_planned_buffers())]
    method = program.load_method(planned_memory=arenas)
    for a, planned in zip(method.memory.arenas, arenas):
        assert np.shares_memory(a, planned)
    expected = _reference(name)
    _same(method.execute(inputs), expected)


def test_the_callers_array_holds_the_planned_tensors():
    program, inputs = _case("mlp")
    (size,) = program.metadata().planned_buffer_sizes
    arena = aligned_bytes(size + 100, zeroed=True)  # larger than planned: the first bytes are used
    out = program.load_method(planned_memory={1: arena}).execute(inputs)[0]
    assert out.tobytes() in arena.tobytes()


def test_a_memmap_over_a_file_and_an_allocator(tmp_path):
    program, inputs = _case("mlp")
    expected = _reference("mlp")
    calls = []

    def allocate(memory_id: int, nbytes: int):
        calls.append((memory_id, nbytes))
        return np.memmap(tmp_path / f"arena{memory_id}.bin", dtype=np.uint8, mode="w+", shape=(nbytes,))

    method = program.load_method(planned_memory=allocate)
    assert calls == [(1, program.metadata().planned_buffer_sizes[0])]
    out = method.execute(inputs)
    _same(out, expected)
    method.memory.arenas[0].flush()
    assert out[0].tobytes() in (tmp_path / "arena1.bin").read_bytes()


def test_buffer_protocol_objects_are_taken_without_a_copy():
    program, inputs = _case("mlp")
    (size,) = program.metadata().planned_buffer_sizes
    backing = aligned_bytes(size)
    method = program.load_method(planned_memory=[memoryview(backing)])
    _same(method.execute(inputs), _reference("mlp"))
    assert np.shares_memory(method.memory.arenas[0], backing)


def test_too_small_buffers_raise_naming_the_id_and_sizes():
    program, _ = _case("mlp")
    (size,) = program.metadata().planned_buffer_sizes
    with pytest.raises(MemoryPlanError, match=rf"planned memory id 1: the plan needs {size} bytes.* has {size - 1}"):
        program.load_method(planned_memory=[aligned_bytes(size - 1)])


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda n: np.zeros(n, np.float32), "expected a uint8 array"),
        (lambda n: bytes(n), "read-only"),
        (lambda n: aligned_bytes(2 * n)[::2], "contiguous"),
        (lambda n: aligned_bytes(n + 1)[1:], "16-byte boundary"),
        (lambda n: "no memory", "writable uint8"),
    ],
)
def test_unusable_memory_is_an_input_error(make, message):
    program, _ = _case("mlp")
    (size,) = program.metadata().planned_buffer_sizes
    with pytest.raises(InputError, match=message):
        program.load_method(planned_memory=[make(size)])


def test_a_wrong_number_of_buffers_is_an_input_error():
    program, _ = _case("mlp")
    with pytest.raises(InputError, match="plans 1 memory id"):
        program.load_method(planned_memory=[None, None])


def test_none_lets_the_runtime_allocate():
    program, inputs = _case("mlp")
    _same(program.load_method(planned_memory=[None]).execute(inputs), _reference("mlp"))


def test_runtime_allocations_come_from_the_run_allocator():
    import torch

    from tests.conftest import torchedge_compile

    class NonZero(torch.nn.Module):
        def forward(self, x):
            return torch.nonzero(x)

    x = np.array([0.0, 1.0, 0.0, 2.0], np.float32)
    buffer = torchedge_compile(NonZero(), (torch.from_numpy(x),)).buffer
    program = Runtime.get().load_program(buffer)
    asked: list[int] = []

    def run_allocator(nbytes: int):
        asked.append(nbytes)
        return aligned_bytes(nbytes)

    (out,) = program.load_method(run_allocator=run_allocator).execute([x])
    np.testing.assert_array_equal(out, [[1], [3]])
    assert asked == [2 * 8]
    with pytest.raises(InputError, match="run_allocator"):
        program.load_method(run_allocator=3)  # type: ignore[arg-type]
