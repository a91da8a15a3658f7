"""Groups of Edge nodes the ONNX lowering writes as one ONNX Runtime kernel (RMSNorm) or as fewer
nodes (the masking of a safe softmax): the lowered model has the fused form exactly where the
group's guards hold, and its outputs equal PyTorch eager's on the same inputs."""

import collections

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")

from torchedge.backends.onnxruntime.lowering import lower_exported_program  # noqa: E402
from torchedge.exir import to_edge  # noqa: E402

EPS = 1e-6


class _RMSNorm(torch.nn.Module):
    """transformers' LlamaRMSNorm, optionally also returning an inner value or reducing another axis."""

    def __init__(self, size=64, dim=-1, dtype=torch.float32, expose_root=False):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(size, dtype=dtype))
        self.dim, self.expose_root = dim, expose_root

    def forward(self, x):
        root = torch.rsqrt(x.pow(2).mean(self.dim, keepdim=True) + EPS)
        y = self.weight * (x * root)
        return (y, root) if self.expose_root else y


def _lowered(module, *inputs, dynamic_shapes=None):
    ep = to_edge(torch.export.export(module, inputs, dynamic_shapes=dynamic_shapes)).exported_program()
    model = lower_exported_program(ep)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return collections.Counter(n.op_type for n in model.graph.node), session


def _run(session, *inputs):
    return session.run(None, {i.name: a.numpy() for i, a in zip(session.get_inputs(), inputs)})


def test_rms_norm_is_one_simplified_layer_normalization_equal_to_eager():
    torch.manual_seed(0)
    module, x = _RMSNorm(), torch.randn(1, 5, 64) * 3
    s = torch.export.Dim("s", min=2, max=16)
    ops, session = _lowered(module, x, dynamic_shapes={"x": {1: s}})
    assert ops["SimplifiedLayerNormalization"] == 1
    assert not ops.keys() & {"Pow", "ReduceMean", "Sqrt", "Reciprocal", "Mul"}
    for rows in (1, 5, 9):
        x = torch.randn(1, rows, 64) * 3
        (got,) = _run(session, x)
        np.testing.assert_allclose(got, module(x).detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "module",
    [_RMSNorm(expose_root=True), _RMSNorm(dim=1), _RMSNorm(dtype=torch.float64)],
    ids=["inner-value-read-twice", "other-axis", "float64"],
)
def test_rms_norm_outside_its_guards_is_translated_node_by_node(module):
    x = torch.randn(1, 64, 64, dtype=module.weight.dtype)
    ops, session = _lowered(module, x)
    assert ops["SimplifiedLayerNormalization"] == 0 and ops["Reciprocal"] == 1
    expected = module(x)
    for got, want in zip(_run(session, x), expected if isinstance(expected, tuple) else (expected,)):
        np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-6, atol=1e-7)


class _MaskedAttention(torch.nn.Module):
    def forward(self, q, k, v, mask):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def test_safe_softmax_masking_is_fewer_nodes_with_eager_results_for_masked_rows_and_nans():
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 4, 8) for _ in range(3))
    mask = torch.tensor([[True, False, True, True], [False] * 4, [True] * 4, [False, False, False, True]])
    ops, session = _lowered(_MaskedAttention(), q, k, v, mask)
    assert not ops.keys() & {"Not", "Expand", "Shape", "ReduceMax"}
    assert ops["ReduceMin"] == 1 and ops["Where"] == 2  # the bool mask to 0 or -inf, and the masked rows
    k_nan = k.clone()
    k_nan[0, 1, 2, 0] = float("nan")  # a NaN score in the rows that see key 2
    for keys in (k, k_nan):  # with the NaN, the fully masked row of head 1 has a NaN score, not only -inf
        (got,) = _run(session, q, keys, v, mask)
        want = _MaskedAttention()(q, keys, v, mask).numpy()
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_array_equal(got[0, 0, 1], 0.0)  # the fully masked row
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


class _FilledWhere(torch.nn.Module):
    def forward(self, x, cond):
        return torch.where(cond, torch.full_like(x, 2.5), x), torch.where(cond, x, torch.zeros_like(x))


def test_a_full_like_branch_of_where_is_its_fill_value():
    x, cond = torch.randn(3, 4, 6), torch.rand(4, 1) > 0.5
    s = torch.export.Dim("s", min=2, max=16)
    ops, session = _lowered(_FilledWhere(), x, cond, dynamic_shapes={"x": {0: s}, "cond": None})
    assert ops["Where"] == 2 and not ops.keys() & {"Expand", "Shape"}
    x = torch.randn(5, 4, 6)
    for got, want in zip(_run(session, x, cond), _FilledWhere()(x, cond)):
        np.testing.assert_array_equal(got, want.numpy())


class _ResidualNorms(torch.nn.Module):
    """Two pre-norm residual blocks, as in a decoder layer: the sums are normalised and read on."""

    def __init__(self):
        super().__init__()
        self.first, self.second = _RMSNorm(), _RMSNorm()

    def forward(self, x, update):
        h = x + update
        y = self.first(h) * 2
        h2 = h + y
        return self.second(h2), h2


@pytest.mark.parametrize("leading", [[1], []], ids=["rank-3", "rank-2"])
def test_a_normalised_residual_sum_joins_the_kernel_and_its_readers_read_its_sum(leading):
    torch.manual_seed(0)
    module, x, update = _ResidualNorms(), torch.randn(*leading, 5, 64), torch.randn(*leading, 5, 64)
    s = torch.export.Dim("s", min=2, max=16)
    dims = {"x": {len(leading): s}, "update": {len(leading): s}}
    ops, session = _lowered(module, x, update, dynamic_shapes=dims)
    assert ops["SkipSimplifiedLayerNormalization"] == 2 and ops["Add"] == 0
    for rows in (1, 7):
        x, update = torch.randn(*leading, rows, 64), torch.randn(*leading, rows, 64)
        for got, want in zip(_run(session, x, update), module(x, update)):
            np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-5, atol=1e-5)


class _SumReadBeforeNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = _RMSNorm()

    def forward(self, x, update):
        h = x + update
        early = h * 3  # translated before the norm: it reads the Add's value
        return self.norm(h), early


def test_a_sum_read_before_its_norm_stays_an_add():
    module, x, update = _SumReadBeforeNorm(), torch.randn(1, 5, 64), torch.randn(1, 5, 64)
    ops, session = _lowered(module, x, update)
    assert ops["SkipSimplifiedLayerNormalization"] == 0 and ops["SimplifiedLayerNormalization"] == 1
    assert ops["Add"] == 1
    for got, want in zip(_run(session, x, update), module(x, update)):
        np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-5, atol=1e-5)
