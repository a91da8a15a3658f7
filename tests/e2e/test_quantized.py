"""PT2E-quantized programs: int8 weights stay int8 in the .pte, results match the quantized
model in PyTorch, and programs cross between torchedge and ExecuTorch both ways."""

import functools
import math

import numpy as np
import pytest
import torch

from tests.conftest import executorch_run, torch_outputs
from torchedge.exir import to_edge
from torchedge.runtime import Runtime
from torchedge.schema.scalar_type import ScalarType, numpy_dtype
from torchedge.serialize import deserialize_pte

xnnpack_quantizer = pytest.importorskip("executorch.backends.xnnpack.quantizer.xnnpack_quantizer")
quantize_pt2e = pytest.importorskip("torchao.quantization.pt2e.quantize_pt2e")


class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.linear = torch.nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        return self.linear(torch.nn.functional.max_pool2d(torch.relu(self.conv(x)), 2).flatten(1))


def _mlp():
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)), (4, 32)


def _cnn():
    return SmallCNN(), (2, 3, 16, 16)


MODELS = {"mlp": _mlp, "cnn": _cnn}


@functools.cache
def _quantized(name: str, per_channel: bool):
    torch.manual_seed(0)
    model, shape = MODELS[name]()
    example = (torch.randn(shape),)
    graph = torch.export.export(model.eval(), example).module()
    quantizer = xnnpack_quantizer.XNNPACKQuantizer().set_global(
        xnnpack_quantizer.get_symmetric_quantization_config(is_per_channel=per_channel)
    )
    prepared = quantize_pt2e.prepare_pt2e(graph, quantizer)
    for _ in range(4):  # calibrate
        prepared(torch.randn(shape))
    converted = quantize_pt2e.convert_pt2e(prepared)
    return converted, shape, torch.export.export(converted, example), model


def _inputs(shape, seed):
    return (torch.randn(shape, generator=torch.Generator().manual_seed(seed)),)


def _output_step(converted) -> float:
    """The scale of the quantized model's output: one step of its last dequantize."""
    (output,) = [n for n in converted.graph.nodes if n.op == "output"]
    last = output.args[0][0] if isinstance(output.args[0], (list, tuple)) else output.args[0]
    assert "dequantize" in str(last.target)
    return float(last.args[1])


def _assert_close_to_quantized_model(got, expected, step):
    # identical arithmetic up to float rounding: an activation may land on the other side of a
    # rounding boundary (where depends on the CPU's float summation order), which moves an output
    # by one quantization step; most outputs are exact
    for g, e in zip(got, expected):
        assert g.shape == e.shape
        np.testing.assert_allclose(g, e, atol=1.01 * step, rtol=0)
        assert np.mean(np.abs(g - e) <= 1e-5 * max(float(np.abs(e).max()), 1.0)) >= 0.75


@pytest.mark.parametrize("per_channel", [True, False], ids=["per_channel", "per_tensor"])
@pytest.mark.parametrize("name", MODELS)
def test_quantized_model_matches_pytorch_on_both_runtimes(name, per_channel, has_executorch):
    converted, shape, exported, _ = _quantized(name, per_channel)
    program = to_edge(exported).to_executorch()
    method = Runtime.get().load_program(program.buffer).load_method()
    for seed in range(3):
        inputs = _inputs(shape, seed)
        expected = torch_outputs(converted, inputs)
        _assert_close_to_quantized_model(method.execute([inputs[0].numpy()]), expected, _output_step(converted))
        if has_executorch:
            import executorch.kernels.quantized  # noqa: F401  (registers ExecuTorch's quantized kernels)

            _assert_close_to_quantized_model(
                executorch_run(program.buffer, [inputs[0].numpy()]), expected, _output_step(converted)
            )


@pytest.mark.parametrize("name", MODELS)
def test_executorch_quantized_program_runs_on_torchedge(name, has_executorch):
    if not has_executorch:
        pytest.skip("ExecuTorch is not installed")
    import executorch.kernels.quantized  # noqa: F401  (ExecuTorch's out variants and kernels)
    from executorch.exir import to_edge as et_to_edge

    converted, shape, exported, _ = _quantized(name, True)
    buffer = et_to_edge(exported).to_executorch().buffer
    method = Runtime.get().load_program(buffer).load_method()
    inputs = _inputs(shape, 7)
    _assert_close_to_quantized_model(
        method.execute([inputs[0].numpy()]), torch_outputs(converted, inputs), _output_step(converted)
    )


def _constants(buffer) -> list:
    plan = deserialize_pte(buffer).program.execution_plan[0]
    return [v.val for v in plan.values if getattr(v.val, "data_buffer_idx", 0) > 0]


def _constant_bytes(buffer) -> int:
    return sum(math.prod(t.sizes) * numpy_dtype(t.scalar_type).itemsize for t in _constants(buffer))


@pytest.mark.parametrize("name", MODELS)
def test_weights_stay_int8(name):
    _, shape, exported, model = _quantized(name, True)
    quantized = to_edge(exported).to_executorch().buffer
    plain = to_edge(torch.export.export(model, (torch.randn(shape),))).to_executorch().buffer
    weights = [t for t in _constants(quantized) if len(t.sizes) >= 2]
    assert weights and all(w.scalar_type == ScalarType.CHAR for w in weights)
    assert _constant_bytes(quantized) < 0.4 * _constant_bytes(plain)  # int8 weights; float32 biases and scales


@pytest.mark.parametrize("per_channel", [True, False], ids=["per_channel", "per_tensor"])
@pytest.mark.parametrize("name", MODELS)
def test_onnxruntime_delegates_quantized_models_completely(name, per_channel):
    pytest.importorskip("onnxruntime")
    from torchedge.backends.onnxruntime import OnnxRuntimePartitioner
    from torchedge.exir import to_edge_transform_and_lower

    converted, shape, exported, _ = _quantized(name, per_channel)
    program = to_edge_transform_and_lower(exported, partitioner=[OnnxRuntimePartitioner(1)]).to_executorch()
    plan = program.program.execution_plan[0]
    assert len(plan.delegates) == 1 and not plan.operators  # QuantizeLinear / DequantizeLinear in ONNX
    method = Runtime.get().load_program(program.buffer).load_method()
    for seed in range(3):
        inputs = _inputs(shape, seed)
        _assert_close_to_quantized_model(
            method.execute([inputs[0].numpy()]), torch_outputs(converted, inputs), _output_step(converted)
        )


def test_narrow_range_quantize_stays_portable():
    """ONNX's QuantizeLinear saturates to the dtype's whole range: [-127, 127] must not be delegated."""
    pytest.importorskip("onnxruntime")
    from torchedge.backends.onnxruntime.lowering import is_supported

    qd = torch.ops.quantized_decomposed

    class Narrow(torch.nn.Module):
        def forward(self, x):
            q = qd.quantize_per_tensor.default(x, 0.01, 0, -127, 127, torch.int8)
            return qd.dequantize_per_tensor.default(q, 0.01, 0, -127, 127, torch.int8)

    edge = to_edge(torch.export.export(Narrow(), (torch.randn(8),))).exported_program()
    support = {n.target.__name__: is_supported(n) for n in edge.graph.nodes if n.op == "call_function"}
    assert support == {"quantize_per_tensor.default": False, "dequantize_per_tensor.default": True}
    x = torch.randn(8) * 3
    got = Runtime.get().load_program(to_edge(torch.export.export(Narrow(), (x,))).to_executorch().buffer)
    np.testing.assert_array_equal(got.load_method().execute([x.numpy()])[0], Narrow()(x).numpy())
