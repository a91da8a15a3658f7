"""Attention in programs ExecuTorch's `XnnpackPartitioner` lowered: the scores and their softmax
come out of one delegate, the safe softmax's masking runs as portable steps, and the product with
the values runs in the next delegate. At load, rule ``safe_softmax_rows`` runs that masking as one
kernel (`torchedge.kernels.optimized.safe_softmax_rows`), which the load-time dataflow can prove
safe because the backend says which arguments of a call are its inputs.

The kernel is compared with PyTorch's ``where(all(scores == -inf), 0, probs)``; the fused program
bit for bit with the unfused one, and with PyTorch eager and ExecuTorch's runtime within 1e-5.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("executorch.runtime")
pytest.importorskip("executorch.backends.xnnpack.partition.xnnpack_partitioner")

import torch.nn.functional as F  # noqa: E402

import torchedge.backends.xnnpack.runtime  # noqa: E402,F401  (registers XnnpackBackend)
from tests.conftest import executorch_run  # noqa: E402
from torchedge.errors import TorchEdgeError  # noqa: E402
from torchedge.kernels.registry import get_kernel, output_shapes  # noqa: E402
from torchedge.runtime import Runtime  # noqa: E402
from torchedge.runtime.fusion import Dataflow, replaced_instructions  # noqa: E402
from torchedge.runtime.steps import DELEGATE  # noqa: E402

_OP = "torchedge_fused::safe_softmax_rows.out"


def _eager_rows(scores: torch.Tensor, probs: torch.Tensor, dim: int) -> np.ndarray:
    fully_masked = torch.all(scores == -torch.inf, dim=dim, keepdim=True)
    return torch.where(fully_masked, torch.zeros_like(probs), probs).numpy()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("dim", [-1, 1])
def test_kernel_zeros_exactly_the_rows_of_all_minus_inf(dtype, dim):
    rng = np.random.default_rng(0)
    scores = rng.standard_normal((2, 5, 6)).astype(dtype)
    scores[0, :, 0] = -np.inf  # all -inf along dim 1
    scores[1, 2, :] = -np.inf  # all -inf along the last dim
    scores[1, 3, :] = [-np.inf, np.nan, -np.inf, -np.inf, -np.inf, -np.inf]  # a nan: not fully masked
    scores[1, 4, :] = [-np.inf, np.inf, -np.inf, -np.inf, -np.inf, -np.inf]
    scores[0, 1, 1:] = -np.inf  # -inf but for its first score
    probs = rng.standard_normal(scores.shape).astype(dtype)
    (shape,) = output_shapes(_OP, [scores, probs, dim, None])
    out = np.full(shape, 7, dtype)
    get_kernel(_OP).fn(scores, probs, dim, out)
    want = _eager_rows(torch.from_numpy(scores), torch.from_numpy(probs), dim)
    np.testing.assert_array_equal(out, want)
    get_kernel(_OP).fn(scores, probs, dim, scores)  # out over the scores (the rule's reads_first)
    np.testing.assert_array_equal(scores, want)


def test_kernel_refuses_operands_of_other_shapes_or_dtypes():
    scores, probs = np.zeros((2, 3), np.float32), np.zeros((2, 4), np.float32)
    with pytest.raises(TorchEdgeError, match="must have one shape"):
        output_shapes(_OP, [scores, probs, -1, None])
    with pytest.raises(TorchEdgeError, match="out of range"):
        output_shapes(_OP, [scores, scores, 2, None])
    with pytest.raises(TorchEdgeError, match="one dtype"):
        get_kernel(_OP).fn(scores, scores.astype(np.float64), -1, np.zeros((2, 3), np.float64))


class _Attention(torch.nn.Module):
    """Self-attention over 4 heads with an additive mask that hides every key from query 2."""

    def __init__(self):
        super().__init__()
        self.qkv, self.out = torch.nn.Linear(16, 48), torch.nn.Linear(16, 16)

    def forward(self, x, mask):
        q, k, v = (t.reshape(1, 6, 4, 4).transpose(1, 2) for t in self.qkv(x).chunk(3, dim=-1))
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.out(y.transpose(1, 2).reshape(1, 6, 16))


def _inputs():
    mask = torch.zeros(1, 1, 6, 6)
    mask[..., 2, :] = -torch.inf
    mask[..., 4, 3:] = -torch.inf
    return torch.randn(1, 6, 16, generator=torch.Generator().manual_seed(0)), mask


def _model() -> _Attention:
    torch.manual_seed(0)
    return _Attention().eval()


@pytest.fixture(scope="module")
def lowered() -> bytes:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    exported = torch.export.export(_model(), _inputs())
    return to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()]).to_executorch().buffer


def test_the_masking_between_delegates_is_one_step_with_the_bits_of_the_steps(lowered):
    program = Runtime.get().load_program(lowered)
    fused, plain = program.load_method("forward"), program.load_method("forward", fuse=False)
    groups = [(rule, len(pcs)) for rule, pcs in replaced_instructions(fused._steps).values()]
    assert groups == [("safe_softmax_rows", 6)]
    inputs = [t.numpy() for t in _inputs()]
    got, want = fused.execute(inputs)[0], plain.execute(inputs)[0]
    np.testing.assert_array_equal(got, want)
    with torch.no_grad():
        eager = _model()(*_inputs()).numpy()
    np.testing.assert_allclose(got, eager, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, executorch_run(lowered, inputs)[0], rtol=1e-5, atol=1e-5)


def test_the_dataflow_sees_a_delegate_read_its_inputs_and_write_its_outputs(lowered):
    """`XnnpackBackend.input_count`: the payload's inputs lead a call's arguments, the rest it writes."""
    method = Runtime.get().load_program(lowered).load_method("forward", fuse=False)
    flow = Dataflow(method._steps, method._values, method._inputs, method._outputs, method.memory.arenas, [])
    delegates = [(pc, step) for pc, step in enumerate(method._steps) if step.kind == DELEGATE]
    assert delegates
    for pc, step in delegates:
        backend, plan = step.delegate
        count = backend.input_count(plan)
        assert count == len(plan.inputs) and len(step.args) == count + len(plan.outputs)
        planned = {a.value for a in flow.reads[pc] + flow.writes[pc]}
        assert {a.value for a in flow.reads[pc]} == planned & set(step.args[:count])
        assert {a.value for a in flow.writes[pc]} == planned & set(step.args[count:])
