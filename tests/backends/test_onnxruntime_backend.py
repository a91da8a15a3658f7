"""The ONNX Runtime delegate: full and partial delegation, compile specs, eager parity, missing backend."""

import functools
import importlib.metadata
import sys

import pytest
import torch

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

from tests.conftest import assert_matches, executorch_run, torch_outputs, torchedge_run  # noqa: E402
from torchedge.backends.onnxruntime import OnnxRuntimePartitioner  # noqa: E402
from torchedge.errors import BackendMissingError  # noqa: E402
from torchedge.exir import to_edge_transform_and_lower  # noqa: E402
from torchedge.runtime import Runtime  # noqa: E402
from torchedge.serialize import deserialize_pte  # noqa: E402

MODELS = ["mlp", "cnn", "mobilenet_v2", "llama", "resnet18", "vit", "bert"]


def _lower(model, inputs, threads=1):
    exported = torch.export.export(model, tuple(inputs))
    return to_edge_transform_and_lower(exported, partitioner=[OnnxRuntimePartitioner(threads)]).to_executorch()


@functools.cache
def _model(name):
    from torchedge.models import load_model

    model, inputs = load_model(name)
    return model, inputs, torch_outputs(model, inputs)


@pytest.mark.parametrize("name", MODELS)
def test_model_delegates_completely_and_matches_eager(name):
    model, inputs, expected = _model(name)
    program = _lower(model, inputs)
    plan = deserialize_pte(program.buffer).program.execution_plan[0]
    assert [d.id for d in plan.delegates] == ["OnnxRuntimeBackend"]
    assert plan.operators == [], f"not delegated: {[o.name for o in plan.operators]}"
    assert_matches(torchedge_run(program.buffer, inputs), expected)


class PartlySupported(torch.nn.Module):
    """atan has no ONNX lowering: it splits the graph into two delegated partitions."""

    def forward(self, x):
        y = torch.relu(x * 2.0)
        z = torch.atan(y)
        return torch.sigmoid(z + x)


def test_partial_delegation_runs_partly_portable():
    from torchedge.backends.onnxruntime.lowering import is_supported

    model, inputs = PartlySupported().eval(), (torch.randn(3, 5),)
    program = _lower(model, inputs)
    plan = deserialize_pte(program.buffer).program.execution_plan[0]
    ops = {f"{o.name}.{o.overload}" for o in plan.operators}
    assert "aten::atan.out" in ops
    assert len(plan.delegates) == 2
    assert_matches(torchedge_run(program.buffer, inputs), torch_outputs(model, inputs))
    assert is_supported is not None


def test_thread_count_reaches_the_session():
    model, inputs, _ = _model("mlp")
    program = _lower(model, inputs, threads=3)
    plan = deserialize_pte(program.buffer).program.execution_plan[0]
    assert {s.key: bytes(s.value) for s in plan.delegates[0].compile_specs} == {"intra_op_threads": b"\x03\0\0\0"}
    method = Runtime.get().load_program(program.buffer).load_method()
    ((backend, handle),) = method._handles
    assert handle.session.get_session_options().intra_op_num_threads == 3


def test_missing_backend_is_named(monkeypatch):
    from torchedge.runtime import backend as registry

    model, inputs, _ = _model("mlp")
    program = _lower(model, inputs)
    registry.get_backend("OnnxRuntimeBackend")  # make sure the real one is registered, then hide it
    monkeypatch.delitem(registry._BACKENDS, "OnnxRuntimeBackend")
    monkeypatch.setitem(registry.BUILT_IN_BACKENDS, "OnnxRuntimeBackend", "torchedge.backends.no_such_module")
    with pytest.raises(BackendMissingError, match="'OnnxRuntimeBackend' needs a package that is not installed"):
        Runtime.get().load_program(program.buffer).load_method()
    with pytest.raises(RuntimeError):  # the real ExecuTorch loads the file and stops at the backend
        executorch_run(program.buffer, inputs)


def test_built_in_backend_found_without_package_metadata(monkeypatch):
    """A source checkout on PYTHONPATH has no entry points: the built-in backends are found anyway."""
    from torchedge.runtime import backend as registry

    model, inputs, _ = _model("mlp")
    program = _lower(model, inputs)
    registry.get_backend("OnnxRuntimeBackend")
    monkeypatch.delitem(registry._BACKENDS, "OnnxRuntimeBackend")
    monkeypatch.delitem(sys.modules, "torchedge.backends.onnxruntime.runtime")  # imported anew: registers again
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **selection: [])
    assert_matches(torchedge_run(program.buffer, inputs), torch_outputs(model, inputs))


def test_repeated_runs_see_new_inputs():
    """The IO binding is reused between runs: it must read the current input bytes every time."""
    model, inputs, _ = _model("cnn")
    program = _lower(model, inputs)
    method = Runtime.get().load_program(program.buffer).load_method()
    for seed in range(3):
        x = torch.randn(inputs[0].shape, generator=torch.Generator().manual_seed(seed))
        assert_matches(method.execute([x.numpy()]), torch_outputs(model, (x,)))


def test_public_session_api_fallback_matches(monkeypatch):
    """Without ONNX Runtime's inner session object the delegate runs through the public wrapper."""
    from torchedge.backends.onnxruntime.runtime import _Session

    model, inputs, _ = _model("mlp")
    program = _lower(model, inputs)
    method = Runtime.get().load_program(program.buffer).load_method()
    ((_, handle),) = method._handles

    class PublicOnly:  # exposes just the documented InferenceSession method
        def __init__(self, session):
            self.run_with_iobinding = session.run_with_iobinding

    public = _Session(PublicOnly(handle.session), handle.inputs, handle.outputs, handle.binding)
    assert public.run.func == public.session.run_with_iobinding
    for field in ("session", "binding", "run"):
        setattr(handle, field, getattr(public, field))
    for seed in range(2):
        x = torch.randn(inputs[0].shape, generator=torch.Generator().manual_seed(seed))
        assert_matches(method.execute([x.numpy()]), torch_outputs(model, (x,)))


@pytest.mark.parametrize(
    "machine, flags, exact",
    [
        ("x86_64", {"avx2", "avx512f", "avx512bw"}, False),  # vpmaddubsw saturates in int16
        ("x86_64", {"avx2", "avx_vnni"}, True),
        ("x86_64", {"avx512f", "avx512_vnni"}, True),
        ("aarch64", set(), True),  # sdot/udot accumulate in int32
    ],
)
def test_fused_int8_kernels_only_where_their_sums_are_exact(machine, flags, exact):
    from torchedge.backends.onnxruntime.runtime import int8_products_are_exact

    assert int8_products_are_exact(machine, flags) is exact
