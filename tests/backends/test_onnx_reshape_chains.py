"""A Reshape of a Reshape is lowered as one Reshape (`reshape_chains`), and a linear layer over a
3-D input as one MatMul of that input (no Reshape to rows and back). References: NumPy's reshape
for the composed shapes, PyTorch eager for a lowered module at several token counts."""

import numpy as np
import pytest

onnxruntime = pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")

from torchedge.backends.onnxruntime.lowering import lower_exported_program  # noqa: E402
from torchedge.backends.onnxruntime.reshape_chains import composed_shape  # noqa: E402
from torchedge.backends.onnxruntime.symbolic_sizes import infer_symbolic_sizes  # noqa: E402
from torchedge.exir import to_edge  # noqa: E402


def _onnx_reshape(x: np.ndarray, shape: list[int]) -> np.ndarray:
    """ONNX's Reshape without allowzero: 0 copies the input's size there, -1 is inferred."""
    return x.reshape([x.shape[i] if s == 0 else s for i, s in enumerate(shape)])


@pytest.mark.parametrize(
    ("source", "first", "second"),
    [
        ((5, 576), [1, -1, 576], [1, 0, 9, 64]),  # a linear's rows, then its heads
        ((1, 5, 576), [-1, 576], [1, -1, 576]),
        ((9, 5, 64), [3, -1, 64], [0, 0, 8, 8]),
        ((1, 5, 3, 64), [1, 0, 192], [0, 0, 3, 8, 8]),
        ((2, 6), [0, 3, 2], [-1]),
    ],
)
def test_one_reshape_gives_the_two_reshapes_elements_and_shape(source, first, second):
    x = np.arange(np.prod(source)).reshape(source)
    shape = composed_shape(first, second)
    assert shape is not None and shape.count(-1) <= 1
    want = _onnx_reshape(_onnx_reshape(x, first), second)
    got = _onnx_reshape(x, shape)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_two_inferred_sizes_are_not_merged():
    assert composed_shape([1, -1, 576], [2, 0, -1]) is None
    assert composed_shape([4], [0, 0]) is None  # the second copies a size the first does not have


class Heads(torch.nn.Module):
    """A linear's output split into heads and joined back: views of views."""

    def __init__(self):
        super().__init__()
        self.q = torch.nn.Linear(16, 16, bias=False)

    def forward(self, x):
        t = x.shape[1]
        heads = self.q(x).view(1, t, 4, 4).transpose(1, 2)
        return (heads * heads.sum(-1, keepdim=True)).transpose(1, 2).reshape(1, t, 16).view(t, 16)


def test_a_lowered_model_has_no_reshape_of_a_reshape_nor_of_a_linears_rows_and_matches_eager():
    torch.manual_seed(0)
    model = Heads().eval()
    dims = ({1: torch.export.Dim("t", max=8)},)
    edge = to_edge(torch.export.export(model, (torch.randn(1, 3, 16),), dynamic_shapes=dims))
    infer_symbolic_sizes(edge.exported_program().graph_module)  # as the partitioner does: no sym_size read
    onnx_model = lower_exported_program(edge.exported_program())
    made_by = {out: node.op_type for node in onnx_model.graph.node for out in node.output}
    reshapes = [n for n in onnx_model.graph.node if n.op_type == "Reshape"]
    assert reshapes and all(made_by.get(n.input[0]) != "Reshape" for n in reshapes)
    views = [n for n in edge.exported_program().graph.nodes if n.target is torch.ops.aten.view_copy.default]
    assert len(reshapes) < len(views)
    (product,) = [n for n in onnx_model.graph.node if n.op_type == "MatMul"]
    assert product.input[0] == onnx_model.graph.input[0].name  # x [1, t, 16] itself, not its rows
    session = onnxruntime.InferenceSession(onnx_model.SerializeToString(), providers=["CPUExecutionProvider"])
    for t in (1, 5, 8):
        x = torch.randn(1, t, 16)
        (got,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
        with torch.no_grad():
            np.testing.assert_allclose(got, model(x).numpy(), rtol=1e-6, atol=1e-6)
