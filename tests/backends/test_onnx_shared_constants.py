"""A weight that a delegate and a portable node (or two delegates) read is stored once in the
.pte, and the program still computes what PyTorch eager does."""

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")

from torchedge.backends.onnxruntime import OnnxRuntimePartitioner  # noqa: E402
from torchedge.exir import to_edge_transform_and_lower  # noqa: E402
from torchedge.runtime import Runtime  # noqa: E402
from torchedge.serialize import deserialize_pte  # noqa: E402

VOCAB, WIDTH = 100, 32


class TiedLM(torch.nn.Module):
    """Embedding table and LM head share one matrix (tied embeddings)."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, WIDTH)
        self.norm = torch.nn.LayerNorm(WIDTH)
        self.head = torch.nn.Linear(WIDTH, VOCAB, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids):
        return self.head(torch.relu(self.norm(self.embed(ids))))


class TwoPartitions(torch.nn.Module):
    """atan has no ONNX lowering: the two products reading ``w`` fall in two partitions."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(WIDTH, WIDTH))

    def forward(self, x):
        return torch.atan(torch.relu(x) @ self.w) @ self.w


def _copies(buffer: bytes, matrix: torch.Tensor) -> int:
    """How often the matrix's bytes, as stored or transposed (a linear's weight may be), occur."""
    array = matrix.detach().numpy()
    return sum(buffer.count(np.ascontiguousarray(a).tobytes()) for a in (array, array.T))


def _program(model, example, dynamic_shapes=None):
    exported = torch.export.export(model, (example,), dynamic_shapes=dynamic_shapes)
    return to_edge_transform_and_lower(exported, partitioner=[OnnxRuntimePartitioner(1)]).to_executorch()


def _delegates(buffer: bytes) -> list[str]:
    return [d.id for d in deserialize_pte(buffer).program.execution_plan[0].delegates]


def test_tied_embedding_and_lm_head_store_the_matrix_once():
    torch.manual_seed(0)
    model = TiedLM().eval()
    dims = ({1: torch.export.Dim("t", max=16)},)
    buffer = _program(model, torch.randint(0, VOCAB, (1, 7)), dims).buffer
    assert _copies(buffer, model.embed.weight) == 1
    assert "OnnxRuntimeBackend" in _delegates(buffer)  # the rest of the model is still delegated
    method = Runtime.get().load_program(buffer).load_method("forward")
    for t in (1, 5, 16):
        ids = torch.randint(0, VOCAB, (1, t))
        with torch.no_grad():
            expected = model(ids).numpy()
        (out,) = method.execute([ids.numpy()])
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_a_weight_two_partitions_read_is_stored_once():
    torch.manual_seed(0)
    model, x = TwoPartitions().eval(), torch.randn(4, WIDTH)
    buffer = _program(model, x).buffer
    assert _copies(buffer, model.w) == 1
    assert "OnnxRuntimeBackend" in _delegates(buffer)
    (out,) = Runtime.get().load_program(buffer).load_method("forward").execute([x.numpy()])
    with torch.no_grad():
        np.testing.assert_allclose(out, model(x).numpy(), rtol=1e-5, atol=1e-5)


def test_a_weight_only_one_delegate_reads_stays_in_it():
    """Without a tie, the LM head's weight is delegated with the product that reads it."""
    torch.manual_seed(0)
    model = TiedLM().eval()
    model.head.weight = torch.nn.Parameter(torch.randn(VOCAB, WIDTH))
    ids = torch.randint(0, VOCAB, (1, 7))
    buffer = _program(model, ids).buffer
    assert (_copies(buffer, model.embed.weight), _copies(buffer, model.head.weight)) == (1, 1)
    assert deserialize_pte(buffer).program.execution_plan[0].operators == []
    (out,) = Runtime.get().load_program(buffer).load_method("forward").execute([ids.numpy()])
    with torch.no_grad():
        np.testing.assert_allclose(out, model(ids).numpy(), rtol=1e-5, atol=1e-5)
