"""`QuantFusion`: PT2E's dequantize -> add [-> relu] -> quantize and dequantize -> embedding chains
become ExecuTorch's quantized operators, computing bit for bit what the chains compute: in
PyTorch eager, on torchedge's runtime unfused, and on ExecuTorch's runtime with its quantized
kernels (``add.out``, ``embedding_byte.out``; it has no ``add_relu.out``, see
test_backend_dialect.py)."""

import numpy as np
import pytest
import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401  (quantized_decomposed)

from torchedge.exir import to_edge
from torchedge.exir.backend_dialect import QuantFusion, to_backend_dialect
from torchedge.runtime import Runtime

qd = torch.ops.quantized_decomposed
g = torch.Generator().manual_seed(0)


class QuantizedAdd(torch.nn.Module):
    """The graph PT2E's convert writes for a quantized add (each use dequantizes on its own)."""

    def __init__(self, relu: bool, dtype=torch.uint8, low=0, high=255):
        super().__init__()
        self.relu, self.dtype, self.low, self.high = relu, dtype, low, high

    def forward(self, a, b):
        x = qd.dequantize_per_tensor.default(a, 0.05, 128 + self.low, self.low, self.high, self.dtype)
        y = qd.dequantize_per_tensor.default(b, 0.1, 120 + self.low, self.low, self.high, self.dtype)
        z = torch.relu(x + y) if self.relu else x + y
        return qd.quantize_per_tensor.default(z, 0.08, 100 + self.low, self.low, self.high, self.dtype)


class QuantizedEmbedding(torch.nn.Module):
    def __init__(self, dtype, zero_points: torch.dtype | None):
        super().__init__()
        low, high = (0, 255) if dtype == torch.uint8 else (-128, 127)
        self.qparams = (0, low, high, dtype)
        self.register_buffer("weight", torch.randint(low, high + 1, (10, 6), generator=g).to(dtype))
        self.register_buffer("scales", torch.rand(10, generator=g) * 0.1 + 0.01)
        zps = torch.randint(-4, 5, (10,), generator=g) + (128 if dtype == torch.uint8 else 0)
        self.register_buffer("zero_points", None if zero_points is None else zps.to(zero_points))

    def forward(self, indices):
        rows = qd.dequantize_per_channel.default(self.weight, self.scales, self.zero_points, *self.qparams)
        return torch.ops.aten.embedding.default(rows, indices)


def _programs(model, inputs):
    """(unfused edge, fused edge) programs of ``model``."""
    edge = to_edge(torch.export.export(model, inputs))
    return edge, to_backend_dialect(edge, passes=[QuantFusion()])


def _targets(edge) -> set:
    return {str(n.target) for n in edge.exported_program().graph.nodes if n.op == "call_function"}


def _run(edge, inputs) -> np.ndarray:
    buffer = edge.to_executorch().buffer
    return Runtime.get().load_program(buffer).load_method("forward").execute([i.numpy() for i in inputs])[0]


def _executorch_run(edge, inputs) -> np.ndarray:
    executorch_runtime = pytest.importorskip("executorch.runtime")
    import executorch.kernels.quantized  # noqa: F401  (registers ExecuTorch's quantized kernels)

    program = executorch_runtime.Runtime.get().load_program(edge.to_executorch().buffer)
    return program.load_method("forward").execute(list(inputs))[0].numpy()


def _uint8(*shape):
    return torch.randint(0, 256, shape, generator=g, dtype=torch.uint8)


@pytest.mark.parametrize("relu", [False, True], ids=["add", "add_relu"])
def test_quantized_add_fuses_with_the_chains_numerics(relu):
    model, inputs = QuantizedAdd(relu), (_uint8(4, 33), _uint8(4, 33))
    unfused, fused = _programs(model, inputs)
    name = "add_relu" if relu else "add"
    assert _targets(fused) == {f"torchedge_quantized.{name}.default"}
    want = model(*inputs).numpy()
    np.testing.assert_array_equal(_run(fused, inputs), want)
    np.testing.assert_array_equal(_run(unfused, inputs), want)


def test_quantized_add_runs_on_executorch_as_on_torchedge():
    model, inputs = QuantizedAdd(relu=False), (_uint8(3, 40), _uint8(3, 40))
    _, fused = _programs(model, inputs)
    np.testing.assert_array_equal(_executorch_run(fused, inputs), _run(fused, inputs))
    np.testing.assert_array_equal(_run(fused, inputs), model(*inputs).numpy())


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8])
@pytest.mark.parametrize("zero_points", [torch.float32, None])
def test_quantized_embedding_fuses_with_the_chains_numerics(dtype, zero_points):
    model, inputs = QuantizedEmbedding(dtype, zero_points), (torch.tensor([[0, 3, 9], [9, 1, 1]]),)
    unfused, fused = _programs(model, inputs)
    assert _targets(fused) == {"torchedge_quantized.embedding_byte.default"}
    want = model(*inputs).numpy()
    np.testing.assert_array_equal(_run(fused, inputs), want)
    np.testing.assert_array_equal(_run(unfused, inputs), want)
    np.testing.assert_array_equal(_executorch_run(fused, inputs), want)


@pytest.mark.parametrize(
    "model,shapes",
    [
        (QuantizedAdd(relu=False, dtype=torch.int8, low=-128, high=127), [(2, 5), (2, 5)]),  # int8 ranges
        (QuantizedAdd(relu=True), [(2, 5), (1, 5)]),  # broadcasting: the kernel takes one shape
    ],
    ids=["int8", "broadcast"],
)
def test_chains_the_kernels_cannot_compute_stay_unfused(model, shapes):
    inputs = tuple(torch.randint(model.low, model.high + 1, s, generator=g).to(model.dtype) for s in shapes)
    _check_unfused(model, inputs)


def test_embedding_with_integer_zero_points_stays_unfused():
    """ExecuTorch's embedding_byte kernel aborts the process on zero points not in the output's dtype."""
    _check_unfused(QuantizedEmbedding(torch.int8, torch.int64), (torch.tensor([4, 0, 2]),))


def _check_unfused(model, inputs):
    unfused, fused = _programs(model, inputs)
    assert _targets(fused) == _targets(unfused)
    np.testing.assert_array_equal(_run(fused, inputs), model(*inputs).numpy())


def test_the_fused_operators_run_in_eager_as_their_chains():
    a, b = _uint8(2, 7), _uint8(2, 7)
    args = (a, 0.05, 128, 0, 255, b, 0.1, 120, 0, 255, 0.08, 100, 0, 255)
    QuantFusion()  # defines the operators
    fused = torch.ops.torchedge_quantized.add_relu.default(*args)
    torch.testing.assert_close(fused, QuantizedAdd(relu=True)(a, b), rtol=0, atol=0)


@pytest.mark.parametrize("zero_point,low,high", [(100, 0, 255), (2, 5, 200), (250, 5, 200)])
def test_add_relu_kernel_floors_at_the_clamped_zero_point(zero_point, low, high):
    """torchedge's add_relu kernel against the chain in eager, output ranges narrower than uint8."""
    from torchedge.kernels.registry import get_kernel

    a, b = _uint8(5, 9), _uint8(5, 9)
    x = qd.dequantize_per_tensor.default(a, 0.05, 128, 0, 255, torch.uint8)
    y = qd.dequantize_per_tensor.default(b, 0.1, 120, 0, 255, torch.uint8)
    want = qd.quantize_per_tensor.default(torch.relu(x + y), 0.03, zero_point, low, high, torch.uint8)
    out = np.empty((5, 9), np.uint8)
    kernel = get_kernel("quantized_decomposed::add_relu.out").fn
    kernel(a.numpy(), 0.05, 128, 0, 255, b.numpy(), 0.1, 120, 0, 255, 0.03, zero_point, low, high, out)
    np.testing.assert_array_equal(out, want.numpy())


def test_quant_fusion_runs_as_a_pass_of_to_executorch():
    from torchedge.exir import ExecutorchBackendConfig

    model, inputs = QuantizedAdd(relu=True), (_uint8(3, 8), _uint8(3, 8))
    program = to_edge(torch.export.export(model, inputs)).to_executorch(ExecutorchBackendConfig(passes=[QuantFusion()]))
    operators = {n.target for n in program.graph_module().graph.nodes if isinstance(n.target, torch._ops.OpOverload)}
    assert operators == {torch.ops.torchedge_quantized.add_relu.out}
    got = Runtime.get().load_program(program.buffer).load_method("forward").execute([i.numpy() for i in inputs])
    np.testing.assert_array_equal(got[0], model(*inputs).numpy())
