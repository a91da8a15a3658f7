"""Methods called from several Python threads at once give the answers they give one call at a time.

Each thread calls with inputs of its own and keeps every output; the outputs are compared with
eager only after all threads are done, so an output that a later or concurrent call overwrote
counts as wrong too. The threads start together and Python switches between them every
microsecond, which makes a race likely to show; the checks never depend on the schedule.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from threadpoolctl import OpenBLASController, get_cached_controller, threadpool_limits

from tests.conftest import torchedge_compile
from torchedge.exir import ExecutorchBackendConfig, to_edge, to_edge_transform_and_lower
from torchedge.exir.memory_planning.planning_pass import MemoryPlanningPass
from torchedge.kernels import registry
from torchedge.kernels.optimized.derived_arrays import cached_keys, derived
from torchedge.runtime import Runtime
from torchedge.runtime.threads import ThreadLimit

THREADS, CALLS = 4, 300
ADDMM = "aten::addmm.out"  # what a Linear with a bias becomes


@contextlib.contextmanager
def _switching_often():
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)


def _in_threads(work: Callable[[int], list]) -> list[list]:
    """``work(thread)`` in `THREADS` threads released at once; their results in thread order."""
    go = threading.Event()

    def start(thread: int) -> list:
        go.wait()
        return work(thread)

    with _switching_often(), ThreadPoolExecutor(THREADS) as pool:
        futures = [pool.submit(start, thread) for thread in range(THREADS)]
        go.set()
        return [future.result() for future in futures]


# -- a two-layer MLP, portable and delegated -------------------------------------------------------


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8)).eval()


EXAMPLE = (torch.randn(4, 16),)


def _xnnpack(model) -> bytes:
    pytest.importorskip("executorch.backends.xnnpack.partition.xnnpack_partitioner")
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower as et_lower

    return et_lower(torch.export.export(model, EXAMPLE), partitioner=[XnnpackPartitioner()]).to_executorch().buffer


def _onnxruntime(model) -> bytes:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from torchedge.backends.onnxruntime import OnnxRuntimePartitioner

    exported = torch.export.export(model, EXAMPLE)
    return to_edge_transform_and_lower(exported, partitioner=[OnnxRuntimePartitioner()]).to_executorch().buffer


COMPILERS = {
    "portable": lambda model: torchedge_compile(model, EXAMPLE).buffer,
    "xnnpack": _xnnpack,
    "onnxruntime": _onnxruntime,
}


@functools.cache
def _program(compiler: str) -> bytes:
    return COMPILERS[compiler](_mlp())


@pytest.fixture(scope="module")
def calls():
    """(inputs [thread, call], eager outputs [thread, call]): every call gets an input of its own."""
    inputs = np.random.default_rng(1).standard_normal((THREADS, CALLS, 4, 16)).astype(np.float32)
    with torch.no_grad():
        outputs = _mlp()(torch.from_numpy(inputs.reshape(-1, 16))).numpy()
    return inputs, outputs.reshape(THREADS, CALLS, 4, 8)


def _wrong(got: list[list], want: np.ndarray) -> int:
    return sum(
        not np.allclose(out, want[thread, call], rtol=1e-4, atol=1e-5)
        for thread, outs in enumerate(got)
        for call, out in enumerate(outs)
    )


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("sharing", ["one method", "a method per thread"])
def test_threads_get_the_answers_of_their_own_inputs(compiler, sharing, calls):
    inputs, want = calls
    program = Runtime.get().load_program(_program(compiler))
    shared = program.load_method() if sharing == "one method" else None

    def work(thread: int) -> list:
        method = shared if shared is not None else program.load_method()  # loads run concurrently too
        return [method.execute([x])[0] for x in inputs[thread]]

    got = _in_threads(work)
    assert _wrong(got, want) == 0, f"{_wrong(got, want)} of {THREADS * CALLS} outputs differ from eager"


def test_methods_of_one_program_run_in_parallel(monkeypatch):
    """While one method's run waits inside a kernel, another method of the program runs to its end."""
    waiting, other_done = threading.Event(), threading.Event()
    original = registry.get_kernel(ADDMM)

    def held_up(*args):
        if threading.current_thread().name.startswith("held up"):
            waiting.set()
            assert other_done.wait(60), "the other method waited for this one"
        return original.fn(*args)

    monkeypatch.setitem(registry._KERNELS, ADDMM, registry.Kernel(ADDMM, held_up, original.num_args))
    program = Runtime.get().load_program(_program("portable"))
    first, second = program.load_method(fuse=False), program.load_method(fuse=False)
    x = np.ones((4, 16), np.float32)
    with ThreadPoolExecutor(1, thread_name_prefix="held up") as pool:
        held = pool.submit(first.execute, [x])
        assert waiting.wait(60)
        alone = second.execute([x])
        other_done.set()
        np.testing.assert_array_equal(held.result()[0], alone[0])  # raises what the held-up run raised


# -- state -----------------------------------------------------------------------------------------


class _Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(1))


class _Step(torch.nn.Module):
    """Adds ``by`` to its owner's counter; returns the input plus the new count."""

    def __init__(self, owner: _Counter, by: float):
        super().__init__()
        self.owner, self.by = owner, by

    def forward(self, x):
        self.owner.count.add_(self.by)
        return x + self.owner.count


def _counts(got: list[list[tuple]]) -> list[tuple[int, float]]:
    """(count each call saw, its step) of every call, checked against its input, in count order."""
    seen = []
    for outs in got:
        for x, by, out in outs:
            count = round(float(np.mean(out - x)))
            np.testing.assert_allclose(out, x + count, rtol=0, atol=1e-3)
            seen.append((count, by))
    return sorted(seen)


def _assert_one_after_another(seen: list[tuple[int, float]]) -> None:
    """Each call found the count the call before it left: no update lost, none seen twice."""
    previous = 0
    for count, by in seen:
        assert count == previous + by, f"a call saw {count}, expected {previous} + {by}"
        previous = count


def test_state_of_one_method_counts_every_call():
    owner = _Counter()
    buffer = to_edge(torch.export.export(_Step(owner, 1.0), (torch.randn(4),))).to_executorch().buffer
    method = Runtime.get().load_program(buffer).load_method()
    inputs = np.random.default_rng(2).standard_normal((THREADS, CALLS, 4)).astype(np.float32)

    got = _in_threads(lambda thread: [(x, 1, method.execute([x])[0]) for x in inputs[thread]])
    _assert_one_after_another(_counts(got))
    assert method.execute([np.zeros(4, np.float32)])[0][0] == THREADS * CALLS + 1


def test_state_shared_by_two_methods_counts_every_call():
    """``one`` and ``two`` update one counter: one method object for two threads, and a method per
    thread for the other two (which join the state of the loaded ``one``)."""
    owner = _Counter()
    x = (torch.randn(4),)
    exported = {name: torch.export.export(_Step(owner, by), x) for name, by in (("one", 1.0), ("two", 2.0))}
    planning = MemoryPlanningPass(share_mutable_buffers=True)
    config = ExecutorchBackendConfig(memory_planning_pass=planning, emit_mutable_buffer_names=True)
    program = Runtime.get().load_program(to_edge(exported).to_executorch(config).buffer)
    one = program.load_method("one")
    inputs = np.random.default_rng(3).standard_normal((THREADS, CALLS, 4)).astype(np.float32)

    def work(thread: int) -> list:
        method, by = (one, 1) if thread < 2 else (program.load_method("two"), 2)
        return [(x, by, method.execute([x])[0]) for x in inputs[thread]]

    seen = _counts(_in_threads(work))
    _assert_one_after_another(seen)
    total = 3 * 2 * CALLS
    assert seen[-1][0] == total
    assert one.execute([np.zeros(4, np.float32)])[0][0] == total + 1


def test_traced_runs_from_threads_are_recorded_one_block_each():
    program = Runtime.get().load_program(_program("portable"), enable_etdump=True)
    methods = [program.load_method() for _ in range(THREADS)]  # loads record into the last block
    x = np.ones((4, 16), np.float32)
    methods[0].execute([x])
    single = [e.profile_event.name for e in program.event_tracer.etdump().run_data[-1].events]
    runs = 20
    _in_threads(lambda thread: [methods[thread].execute([x]) for _ in range(runs)])
    blocks = [r for r in program.event_tracer.etdump().run_data if r.name == "Execute"]
    assert len(blocks) == 1 + THREADS * runs
    assert all([e.profile_event.name for e in block.events] == single for block in blocks)


# -- process-wide state: native thread pools, derived arrays ---------------------------------------


def _blas_sizes() -> list[int]:
    return [pool.get_num_threads() for pool in get_cached_controller().select(user_api="blas").lib_controllers]


@pytest.fixture
def blas_at_three():
    with threadpool_limits(limits=3, user_api="blas"):
        if not _blas_sizes() or set(_blas_sizes()) != {3}:
            pytest.skip("no BLAS that can be resized to three threads")
        OpenBLASController.clear_controlling_thread(force=True)  # as after a run: any thread may resize it
        yield


def test_overlapping_runs_leave_the_pools_as_they_found_them(blas_at_three):
    """A run that started first and ends first must not leave its size to the pools."""
    entered, other_entered = threading.Event(), threading.Event()

    def first() -> None:
        with ThreadLimit(1):
            entered.set()
            other_entered.wait()

    thread = threading.Thread(target=first)
    thread.start()
    entered.wait()
    with ThreadLimit(2):
        other_entered.set()
        thread.join()  # the first run has left; this one is still in
    assert set(_blas_sizes()) == {3}


def test_concurrent_methods_of_other_thread_counts_restore_the_pools(blas_at_three, calls):
    inputs, want = calls
    program = Runtime.get().load_program(_program("portable"))
    methods = [program.load_method(num_threads=1 + thread % 2) for thread in range(THREADS)]
    got = _in_threads(lambda thread: [methods[thread].execute([x])[0] for x in inputs[thread]])
    assert _wrong(got, want) == 0
    assert set(_blas_sizes()) == {3}


def _constant(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


def _doubled(array: np.ndarray) -> np.ndarray:
    return array * 2


def _sum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a + b


def test_derived_arrays_serve_only_the_arrays_they_were_made_from():
    """An array made where a dead one was (same id) gets its own derived array, not the dead one's."""
    for i in range(200):
        source = _constant(np.full(8, i, np.float32))
        assert derived(_doubled, (source,))[0] == 2 * i
        del source
    weight = _constant(np.ones(8, np.float32))
    for i in range(200):
        assert derived(_sum, (weight, _constant(np.full(8, i, np.float32))))[0] == 1 + i
    assert cached_keys(_sum) == []  # an entry goes with any of its sources
