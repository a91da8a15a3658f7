"""ONNX Runtime delegates keep their large weights in the program's named data, keyed by SHA-256:
a weight that several methods read is stored once, and the runtime hands ONNX Runtime arrays over
the loaded (mapped) file instead of copies.

References: PyTorch eager, the weights' own bytes (counted in the file), hand-built payloads."""

import json
import struct

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
torch = pytest.importorskip("torch")

from torchedge.backends.onnxruntime import OnnxRuntimePartitioner  # noqa: E402
from torchedge.backends.onnxruntime.payload import EXTERNAL_BYTES, MAGIC, MAGIC_INLINE, read_payload  # noqa: E402
from torchedge.backends.onnxruntime.runtime import OnnxRuntimeDelegate  # noqa: E402
from torchedge.errors import InvalidProgramError  # noqa: E402
from torchedge.exir import ExecutorchBackendConfig, to_edge_transform_and_lower  # noqa: E402
from torchedge.runtime import Runtime  # noqa: E402
from torchedge.runtime.named_data import NamedDataMap  # noqa: E402
from torchedge.serialize import deserialize_pte  # noqa: E402


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up, self.down = torch.nn.Linear(64, 256), torch.nn.Linear(256, 64)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


class Decode(torch.nn.Module):
    """A second entry point over the same weights (one row, a residual): as a decode method reads
    the weights of forward."""

    def __init__(self, block):
        super().__init__()
        self.block = block

    def forward(self, x):
        return x + self.block(x)


def _large_weights(model) -> list[np.ndarray]:
    unique = {p.data_ptr(): p for p in model.parameters()}.values()
    return [p.detach().numpy() for p in unique if p.numel() * p.element_size() >= EXTERNAL_BYTES]


def _copies(buffer: bytes, array: np.ndarray) -> int:
    """How often the array's bytes, as stored or transposed (a linear's weight may be), occur."""
    forms = (array, array.T) if array.ndim == 2 else (array,)
    return sum(buffer.count(np.ascontiguousarray(a).tobytes()) for a in forms)


@pytest.fixture(scope="module")
def two_methods():
    """(the block, the program manager) of forward and decode lowered to ONNX Runtime."""
    torch.manual_seed(0)
    block = Block().eval()
    programs = {
        "forward": torch.export.export(block, (torch.randn(8, 64),)),
        "decode": torch.export.export(Decode(block), (torch.randn(1, 64),)),
    }
    return block, to_edge_transform_and_lower(programs, partitioner=[OnnxRuntimePartitioner(1)]).to_executorch()


def test_two_methods_store_each_weight_once_in_the_named_data(two_methods):
    block, program = two_methods
    buffer, weights = program.buffer, _large_weights(block)
    pte = deserialize_pte(buffer)
    delegates = [d for plan in pte.program.execution_plan for d in plan.delegates]
    assert len(delegates) == 2  # one a method, each reading every large weight
    assert [_copies(buffer, w) for w in weights] == [1] * len(weights)
    assert len(pte.program.named_data) == len(weights)
    described = f"{len(weights)} by key in named data ({sum(w.nbytes for w in weights):,} bytes)"
    assert all(described in OnnxRuntimeDelegate().describe(pte.delegate_data(d))[1] for d in delegates)
    assert len(buffer) - sum(w.nbytes for w in weights) < min(w.nbytes for w in weights if w.ndim == 2)  # one copy


@pytest.mark.parametrize("source", ["bytes", "path", "path without mmap"])
def test_both_methods_equal_eager(two_methods, tmp_path, source):
    block, program = two_methods
    path = tmp_path / "two.pte"
    program.save(path)
    loaded = {
        "bytes": lambda: Runtime.get().load_program(program.buffer),
        "path": lambda: Runtime.get().load_program(str(path)),
        "path without mmap": lambda: Runtime.get().load_program(str(path), mmap=False),
    }[source]()
    torch.manual_seed(1)
    for name, model, x in (("forward", block, torch.randn(8, 64)), ("decode", Decode(block), torch.randn(1, 64))):
        (out,) = loaded.load_method(name).execute([x.numpy()])
        with torch.no_grad():
            np.testing.assert_allclose(out, model(x).numpy(), rtol=1e-5, atol=1e-5)


def test_onnx_runtime_reads_the_weights_where_the_mapped_file_holds_them(two_methods, tmp_path):
    _, program = two_methods
    path = tmp_path / "two.pte"
    program.save(path)
    pte = Runtime.get().load_program(str(path)).pte
    (delegate,) = next(p for p in pte.program.execution_plan if p.name == "decode").delegates
    keys = [entry.key for entry in pte.program.named_data]
    named = NamedDataMap([("the program", keys, pte.named_data)])
    handle = OnnxRuntimeDelegate().init(pte.delegate_data(delegate), {}, named)
    stored = {np.frombuffer(named.get(key), np.uint8).ctypes.data for key in keys}
    assert handle.weights and {w.data_ptr() for w in handle.weights} <= stored


def test_a_payload_whose_named_data_is_missing_is_an_invalid_program_error(two_methods):
    _, program = two_methods
    pte = deserialize_pte(program.buffer)
    payload = pte.delegate_data(pte.program.execution_plan[0].delegates[0])
    with pytest.raises(InvalidProgramError, match="no named data"):
        OnnxRuntimeDelegate().init(payload, {}, NamedDataMap())
    with pytest.raises(InvalidProgramError, match="named data, and none was given"):
        read_payload(payload)


@pytest.mark.parametrize(
    "entry",
    [["w", "float32", [-1], "k"], ["w", "object", [4], "k"], ["w", "float32", [1 << 40, 1 << 40], "k"], ["w"], 7],
)
def test_a_malformed_weight_table_is_an_invalid_program_error(entry):
    table = json.dumps([entry]).encode()
    payload = struct.pack("<8sQQ", MAGIC, 0, len(table)) + table
    with pytest.raises(InvalidProgramError):
        read_payload(payload, {"k": bytes(16)}.__getitem__)


def _inline_payload(model, name: str, weight: np.ndarray) -> bytes:
    """A payload as written before named data: ``MAGIC_INLINE``, sizes, model, table, then the
    weight's bytes from the next multiple of 64."""
    tensor = next(t for t in model.graph.initializer if t.name == name)
    tensor.ClearField("raw_data")
    tensor.data_location = onnx.TensorProto.EXTERNAL
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", "torchedge-payload"
    proto, table = model.SerializeToString(), json.dumps([[name, "float32", list(weight.shape), 0]]).encode()
    head = struct.pack("<8sQQ", MAGIC_INLINE, len(proto), len(table)) + proto + table
    return head.ljust(-(-len(head) // 64) * 64, b"\0") + weight.tobytes()


def test_a_payload_with_its_weights_inline_still_runs():
    from onnx import TensorProto, helper, numpy_helper

    weight = np.arange(64 * 32, dtype=np.float32).reshape(64, 32) / 100
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 32])],
        [numpy_helper.from_array(weight, "w")],
    )
    payload = _inline_payload(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), "w", weight)
    backend = OnnxRuntimeDelegate()
    handle = backend.init(memoryview(payload), {}, None)
    a = np.random.default_rng(0).standard_normal((2, 64)).astype(np.float32)
    y = np.empty((2, 32), np.float32)
    backend.execute(handle, [a, y])
    np.testing.assert_allclose(y, a @ weight, rtol=1e-5, atol=1e-4)
    assert "1 mapped at load: 0 by key in named data (0 bytes)" in backend.describe(payload)[1]


class Mixed(torch.nn.Module):
    """``w`` is read by a portable node (atan2 has no ONNX lowering), so its readers stay portable:
    with external constants it goes to the .ptd; ``mid``'s weight, delegated, to the named data."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(32, 32))
        self.mid = torch.nn.Linear(32, 32)

    def forward(self, x):
        return torch.atan2(self.mid(torch.relu(x) @ self.w).unsqueeze(1), self.w).sum(1)


def test_external_constants_and_delegate_named_data_load_together(tmp_path):
    torch.manual_seed(0)
    model, x = Mixed().eval(), torch.randn(4, 32)
    edge = to_edge_transform_and_lower(torch.export.export(model, (x,)), partitioner=[OnnxRuntimePartitioner(1)])
    program = edge.to_executorch(ExecutorchBackendConfig(external_constants=True))
    pte = deserialize_pte(program.buffer)
    assert "OnnxRuntimeBackend" in [d.id for d in pte.program.execution_plan[0].delegates] and pte.program.named_data
    (ptd_bytes,) = program.data_files.values()
    w, mid = model.w.detach().numpy(), model.mid.weight.detach().numpy()
    assert (_copies(program.buffer, w), _copies(ptd_bytes, w), _copies(program.buffer, mid)) == (0, 1, 1)
    program.save(tmp_path / "mixed.pte")
    (ptd,) = program.write_tensor_data_to_file(tmp_path)
    method = Runtime.get().load_program(str(tmp_path / "mixed.pte"), data_path=ptd).load_method("forward")
    (out,) = method.execute([x.numpy()])
    with torch.no_grad():
        np.testing.assert_allclose(out, model(x).numpy(), rtol=1e-5, atol=1e-5)
    with pytest.raises(InvalidProgramError, match="ptd"):
        Runtime.get().load_program(str(tmp_path / "mixed.pte")).load_method("forward")


def test_a_tied_llama_directory_exports_to_onnx_runtime_and_generates_as_eager(tmp_path):
    """SmolLM's shape in small: a Llama with a tied embedding, from a transformers directory."""
    pytest.importorskip("transformers")
    pytest.importorskip("tokenizers")
    from transformers import PreTrainedTokenizerFast

    from tests.generation.hf_support import byte_level_bpe, tiny_llama
    from torchedge.cli.main import main
    from torchedge.generation import TextGenerator

    text = ("Once upon a time there was a small model.", "The quick brown fox jumps over the lazy dog.")
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=byte_level_bpe(text), bos_token="<s>", eos_token="</s>")
    model = tiny_llama(len(tokenizer), tied=True)
    model.save_pretrained(tmp_path / "llama")
    tokenizer.save_pretrained(tmp_path / "llama")
    pte = tmp_path / "llama.pte"
    assert (
        main(["export", str(tmp_path / "llama"), "--recipe", "onnxruntime", "-o", str(pte), "--max-seq-len", "32"]) == 0
    )
    data = pte.read_bytes()
    assert deserialize_pte(data).program.named_data
    assert {_copies(data, w) for w in _large_weights(model)} == {1}
    ids = tokenizer.encode("Once upon a time", add_special_tokens=False)
    expected = list(ids)
    with torch.no_grad():
        for _ in range(6):
            expected.append(int(model(input_ids=torch.tensor([expected])).logits[0, -1].argmax()))
    tokens = TextGenerator(Runtime.get().load_program(str(pte))).generate(ids, 6).tokens
    assert tokens == expected[len(ids) :][: len(tokens)] and tokens
