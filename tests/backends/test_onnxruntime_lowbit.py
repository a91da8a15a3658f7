"""torchao's quantized linear layers on ONNX Runtime's MatMulNBits, and the delegate payload whose
weights the runtime maps instead of copying.

References: torchao eager (the quantized layers as they run in PyTorch), hand-packed nibbles, and
a worst-case bound of the activation quantization's effect computed from the data."""

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("torchao")
torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")

from torchedge.backends.onnxruntime import OnnxRuntimePartitioner  # noqa: E402
from torchedge.backends.onnxruntime.lowbit import use_lowbit_linears  # noqa: E402
from torchedge.backends.onnxruntime.ops_lowbit import pack_weight  # noqa: E402
from torchedge.backends.onnxruntime.payload import read_payload, write_payload  # noqa: E402
from torchedge.cli.recipes import quantize_model  # noqa: E402
from torchedge.errors import InvalidProgramError  # noqa: E402
from torchedge.exir import to_edge_transform_and_lower  # noqa: E402
from torchedge.runtime import Runtime  # noqa: E402

RECIPES = {"8da4w": True, "int8-dynamic": True, "int4-weight": False, "int8-weight": False}  # -> int8 activations


def _quantized(recipe: str) -> torch.nn.Module:
    torch.manual_seed(0)
    layers = [torch.nn.Linear(64, 96, bias=False), torch.nn.ReLU(), torch.nn.Linear(96, 32, bias=False)]
    return quantize_model(torch.nn.Sequential(*layers).eval(), recipe, 32)


def test_four_bit_weights_are_packed_two_a_byte_low_nibble_first():
    qdata = np.array([[-8, 7, 0, 1] * 8, [3, -1, -8, 2] * 8], np.int8)  # 2 x 32, one group a row
    scale, zero = np.array([[0.5], [2.0]], np.float32), np.array([[0], [-3]], np.int8)
    packed, scales, zeros, block = pack_weight(qdata, scale, zero, 4, 32)
    assert block == 32 and packed.shape == (2, 1, 16)
    assert packed[0, 0, :2].tolist() == [0 | (15 << 4), 8 | (9 << 4)]  # (-8+8, 7+8), (0+8, 1+8)
    assert packed[1, 0, :2].tolist() == [11 | (7 << 4), 0 | (10 << 4)]
    assert scales.tolist() == [[0.5], [2.0]]
    assert zeros.tolist() == [[8], [5]]  # one block a row: the high nibble is padding


def test_a_group_wider_than_a_block_spans_blocks_of_the_same_scale():
    qdata = np.zeros((1, 576), np.int8)  # per channel over 576 = 9 x 64: blocks of 64
    packed, scales, zeros, block = pack_weight(qdata, np.array([[0.25]], np.float32), np.zeros((1, 1), np.int8), 8, 576)
    assert block == 64 and packed.shape == (1, 9, 64) and np.all(packed == 128)
    assert scales.tolist() == [[0.25] * 9] and zeros.tolist() == [[128] * 9]


def _activation_bound(weight, x: torch.Tensor) -> torch.Tensor:
    """Worst case of |MatMulNBits - torchao| per output of the first layer: each activation moves by
    at most half a step of torchao's per-row asymmetric int8 and half of a symmetric int8 step over
    the row's largest magnitude (MLAS's blocks have at most that)."""
    rows = x.reshape(-1, x.shape[-1])
    asymmetric = (rows.amax(-1).clamp(min=0) - rows.amin(-1).clamp(max=0)) / 255
    symmetric = rows.abs().amax(-1) / 127
    magnitude = weight.dequantize().abs().sum(-1)
    return ((asymmetric + symmetric)[:, None] / 2 * magnitude[None, :]).reshape(*x.shape[:-1], -1) + 1e-4


@pytest.mark.parametrize("recipe", list(RECIPES))
def test_quantized_layers_run_as_matmul_nbits_on_any_number_of_rows(recipe):
    model = _quantized(recipe)
    torch.manual_seed(1)
    inputs = {t: torch.randn(1, t, 64) for t in (5, 1, 3)}
    with torch.no_grad():
        expected = {t: model[0](x) for t, x in inputs.items()}
    weight = model[0].weight
    assert use_lowbit_linears(model) == 2
    first = torch.nn.Sequential(model[0])
    ep = torch.export.export(first, (inputs[5],), dynamic_shapes=({1: torch.export.Dim("t", max=16)},))
    program = to_edge_transform_and_lower(ep, partitioner=[OnnxRuntimePartitioner()]).to_executorch()
    assert program.buffer.count(b"MatMulNBits") == 1
    method = Runtime.get().load_program(program.buffer).load_method("forward")
    for t, x in inputs.items():
        (out,) = method.execute([x.numpy()])
        assert out.shape == (1, t, 96)
        error = np.abs(out - expected[t].numpy())
        if RECIPES[recipe]:
            assert np.all(error <= _activation_bound(weight, x).numpy())
        else:
            np.testing.assert_allclose(out, expected[t].numpy(), rtol=1e-5, atol=1e-5)


def test_the_swapped_layers_compute_what_torchao_computes_in_eager():
    model = _quantized("8da4w")
    x = torch.randn(2, 7, 64)
    with torch.no_grad():
        expected = model(x)
        use_lowbit_linears(model)
        assert torch.equal(model(x), expected)


def _model_with(initializer: np.ndarray) -> onnx.ModelProto:
    from onnx import TensorProto, helper, numpy_helper

    rows, cols = initializer.shape
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, rows])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, cols])],
        [numpy_helper.from_array(initializer, "w")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_large_weights_go_to_named_data_and_are_read_in_place():
    from torchedge.backends.onnxruntime.runtime import OnnxRuntimeDelegate
    from torchedge.runtime.named_data import NamedDataMap

    weight = np.arange(64 * 32, dtype=np.float32).reshape(64, 32) / 100
    payload, named = write_payload(_model_with(weight))
    assert weight.tobytes() not in payload and list(named.values()) == [weight.tobytes()]
    model, arrays = read_payload(payload, named.__getitem__)
    assert [name for name, _ in arrays] == ["w"] and np.array_equal(arrays[0][1], weight)
    (stored,) = named.values()
    assert np.shares_memory(arrays[0][1], np.frombuffer(stored, np.uint8))  # a view, not a copy
    backend = OnnxRuntimeDelegate()
    handle = backend.init(memoryview(payload), {}, NamedDataMap([("the test", list(named), named.__getitem__)]))
    a = np.random.default_rng(0).standard_normal((2, 64)).astype(np.float32)
    y = np.empty((2, 32), np.float32)
    backend.execute(handle, [a, y])
    np.testing.assert_allclose(y, a @ weight, rtol=1e-5, atol=1e-4)
    assert "1 mapped at load" in " ".join(backend.describe(payload))


@pytest.mark.parametrize("cut", [12, 40, -8])
def test_a_truncated_payload_is_an_invalid_program_error(cut):
    payload, named = write_payload(_model_with(np.ones((64, 32), np.float32)))
    with pytest.raises(InvalidProgramError):
        read_payload(payload[:cut], named.__getitem__)
