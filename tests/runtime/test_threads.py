"""The runtime owns its threads: BLAS pools sized per method for the duration of `execute`,
restored after; the ONNX Runtime delegate takes the method's thread count at load."""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from threadpoolctl import get_cached_controller, threadpool_limits

from tests.conftest import torchedge_compile
from torchedge.errors import InputError, KernelError
from torchedge.kernels import registry
from torchedge.runtime import Runtime
from torchedge.runtime.threads import RUNTIME_NUM_THREADS, ThreadLimit, encode_num_threads

MATMUL = "aten::addmm.out"  # what a Linear with a bias becomes


def blas_sizes() -> list[int]:
    pools = get_cached_controller().select(user_api="blas").lib_controllers
    assert pools, "NumPy's BLAS is not visible to threadpoolctl"
    return [pool.get_num_threads() for pool in pools]


@pytest.fixture(scope="module")
def linear_pte() -> bytes:
    """A BLAS-heavy method: a 512 x 512 Linear on 64 rows."""
    torch.manual_seed(0)
    return torchedge_compile(torch.nn.Linear(512, 512).eval(), (torch.randn(64, 512),)).buffer


@pytest.fixture
def sizes_during_matmul(monkeypatch) -> list:
    """Wraps the matmul kernel so that each call records the BLAS pool sizes it runs with."""
    seen = []
    original = registry.get_kernel(MATMUL)

    def spy(*args):
        seen.append(blas_sizes())
        return original.fn(*args)

    monkeypatch.setitem(registry._KERNELS, MATMUL, registry.Kernel(MATMUL, spy, original.num_args))
    return seen


@pytest.fixture
def blas_at_three():
    """BLAS pools at three threads around the test, so that a run at one or two must change them."""
    with threadpool_limits(limits=3, user_api="blas"):
        if set(blas_sizes()) != {3}:
            pytest.skip("this BLAS cannot be resized to three threads")
        yield


X = np.random.default_rng(0).standard_normal((64, 512)).astype(np.float32)


@pytest.mark.parametrize(
    "load, expected",
    [
        (lambda pte: Runtime.get().load_program(pte).load_method(), 1),
        (lambda pte: Runtime.get().load_program(pte).load_method(num_threads=2), 2),
        (lambda pte: Runtime.get(num_threads=2).load_program(pte).load_method(), 2),
        (lambda pte: Runtime.get(num_threads=2).load_program(pte).load_method(num_threads=1), 1),
    ],
    ids=["default", "method", "runtime", "method-overrides-runtime"],
)
def test_blas_pool_has_the_asked_size_during_execute_and_is_restored(
    linear_pte, sizes_during_matmul, blas_at_three, load, expected
):
    method = load(linear_pte)
    assert method.num_threads == expected
    for _ in range(2):
        method.execute([X])
        assert blas_sizes() == [3] * len(blas_sizes())
    assert sizes_during_matmul == [[expected] * len(blas_sizes())] * 2


def test_pool_already_at_the_size_is_left_as_is(linear_pte, sizes_during_matmul):
    with threadpool_limits(limits=1, user_api="blas"):
        Runtime.get().load_program(linear_pte).load_method().execute([X])
        assert set(blas_sizes()) == {1}
    assert sizes_during_matmul == [[1] * len(blas_sizes())]


def test_runs_from_other_python_threads_are_limited_too(linear_pte, sizes_during_matmul, blas_at_three):
    method = Runtime.get().load_program(linear_pte).load_method()
    method.execute([X])  # the main thread resizes OpenBLAS first; the worker must be able to as well
    with ThreadPoolExecutor(1) as pool:
        pool.submit(method.execute, [X]).result()
    assert sizes_during_matmul == [[1] * len(blas_sizes())] * 2
    assert set(blas_sizes()) == {3}


def test_pool_is_restored_when_a_kernel_fails(linear_pte, monkeypatch, blas_at_three):
    def fail(*args):
        raise RuntimeError("boom")

    monkeypatch.setitem(registry._KERNELS, MATMUL, registry.Kernel(MATMUL, fail, registry.get_kernel(MATMUL).num_args))
    with pytest.raises(KernelError, match="boom"):
        Runtime.get().load_program(linear_pte).load_method().execute([X])
    assert set(blas_sizes()) == {3}


def test_results_do_not_depend_on_the_thread_count(linear_pte):
    one = Runtime.get().load_program(linear_pte).load_method().execute([X])[0]
    two = Runtime.get().load_program(linear_pte).load_method(num_threads=2).execute([X])[0]
    np.testing.assert_allclose(one, two, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_bad_thread_counts_are_input_errors(linear_pte, bad):
    with pytest.raises(InputError, match="num_threads must be a whole number >= 1"):
        Runtime.get(num_threads=bad)
    with pytest.raises(InputError, match="num_threads must be a whole number >= 1"):
        Runtime.get().load_program(linear_pte).load_method(num_threads=bad)
    with pytest.raises(InputError):
        ThreadLimit(bad)


def test_runtime_instances_are_per_thread_count():
    assert Runtime.get() is Runtime.get()
    assert Runtime.get(num_threads=2) is Runtime.get(num_threads=2) is not Runtime.get()
    assert Runtime.get().num_threads is None and Runtime.get(num_threads=2).num_threads == 2


# -- the ONNX Runtime delegate ---------------------------------------------------------------


def test_onnxruntime_threads_precedence():
    from torchedge.backends.onnxruntime.compile_specs import INTRA_OP_THREADS, encode_threads, session_threads

    exported, runtime = {INTRA_OP_THREADS: encode_threads(3)}, {RUNTIME_NUM_THREADS: encode_num_threads(2)}
    assert session_threads({}) == 1
    assert session_threads(exported) == 3
    assert session_threads(runtime) == 2
    assert session_threads({**exported, **runtime}) == 2


@pytest.mark.parametrize(
    "exported, load, expected",
    [
        (None, lambda pte: Runtime.get().load_program(pte).load_method(), 1),
        (3, lambda pte: Runtime.get().load_program(pte).load_method(), 3),
        (3, lambda pte: Runtime.get().load_program(pte).load_method(num_threads=2), 2),
        (3, lambda pte: Runtime.get(num_threads=1).load_program(pte).load_method(), 1),
    ],
    ids=["default", "export-time", "method-wins", "runtime-wins"],
)
def test_onnxruntime_session_gets_the_method_threads_at_load(monkeypatch, exported, load, expected):
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from torchedge.backends.onnxruntime import OnnxRuntimePartitioner
    from torchedge.backends.onnxruntime.runtime import OnnxRuntimeDelegate
    from torchedge.exir import to_edge_transform_and_lower

    model, inputs = torch.nn.Linear(8, 4).eval(), (torch.randn(2, 8),)
    pte = (
        to_edge_transform_and_lower(
            torch.export.export(model, inputs), partitioner=[OnnxRuntimePartitioner(intra_op_threads=exported)]
        )
        .to_executorch()
        .buffer
    )
    handles = []
    init = OnnxRuntimeDelegate.init

    def recording_init(self, processed, compile_specs, named_data):
        handles.append(init(self, processed, compile_specs, named_data))
        return handles[-1]

    monkeypatch.setattr(OnnxRuntimeDelegate, "init", recording_init)
    method = load(pte)
    assert [h.session.get_session_options().intra_op_num_threads for h in handles] == [expected]
    np.testing.assert_allclose(method.execute([inputs[0].numpy()])[0], model(*inputs).detach().numpy(), rtol=1e-5)
