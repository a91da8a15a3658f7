"""`NarrowRowsPass`: a select or slice moves before the operators whose rows it reads.

Each case checks three things: the rows the rewritten operators compute (the pass did, or did
not, move the cut), the Edge program run in eager against the model (the rewrite is exact:
float64, so only the rows computed differ, not the arithmetic), and torchedge's runtime
against eager."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn
from torch.fx.experimental.proxy_tensor import make_fx

from tests.conftest import assert_matches, executorch_run, torch_outputs
from torchedge.exir import to_edge
from torchedge.exir.config import EdgeCompileConfig
from torchedge.exir.passes.narrow_rows import narrow_rows
from torchedge.runtime import Runtime

aten = torch.ops.aten


class Block(nn.Module):
    """A pre-norm transformer block (Hugging Face's layout: q, k, v projections, heads moved by
    a view and a transpose) and a head on one token, as ViT's classifier reads it."""

    def __init__(self, width=16, heads=2, tokens=7):
        super().__init__()
        self.heads, self.tokens = heads, tokens
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(width), nn.LayerNorm(width), nn.LayerNorm(width)
        self.q, self.k, self.v, self.proj = (nn.Linear(width, width) for _ in range(4))
        self.fc1, self.fc2, self.head = nn.Linear(width, 4 * width), nn.Linear(4 * width, width), nn.Linear(width, 3)

    def forward(self, x):
        h = self.norm1(x)
        shape = (1, self.tokens, self.heads, -1)
        q, k, v = (proj(h).view(shape).transpose(1, 2) for proj in (self.q, self.k, self.v))
        y = nn.functional.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(x.shape)
        x = x + self.proj(y)
        x = x + self.fc2(nn.functional.gelu(self.fc1(self.norm2(x))))
        return self.head(self.norm3(x)[:, 0])


class Last(nn.Module):
    """A language model's head on its last positions: ``h[:, -1]`` or ``h[:, -2:]``."""

    def __init__(self, keep_two=False):
        super().__init__()
        self.body, self.lm_head, self.keep_two = nn.Linear(8, 8), nn.Linear(8, 11), keep_two

    def forward(self, x):
        h = torch.tanh(self.body(x)) * 2
        return self.lm_head(h[:, -2:] if self.keep_two else h[:, -1])


class Lambda(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn
        self.register_buffer("rows", torch.randn(5, 8))  # varies along the rows: cut with them
        self.register_buffer("shift", torch.randn(1, 1, 8))  # broadcast along them: left whole

    def forward(self, *xs):
        return self.fn(self, *xs)


def _lower(model, inputs, narrow=True, dynamic_shapes=None):
    exported = torch.export.export(model, inputs, dynamic_shapes=dynamic_shapes)
    return to_edge(exported, compile_config=EdgeCompileConfig(narrow_rows=narrow))


def _shapes(edge, target) -> list[tuple]:
    """The output shapes of the Edge program's ``target`` nodes, in graph order."""
    nodes = edge.exported_program().graph.nodes
    values = [n.meta["val"] for n in nodes if n.op == "call_function" and n.target is target]
    return [tuple((v[0] if isinstance(v, tuple) else v).shape) for v in values]


def _check_results(model, inputs, edge):
    double, wide = copy.deepcopy(model).double(), tuple(x.double() for x in inputs)
    program = to_edge(torch.export.export(double, wide), compile_config=EdgeCompileConfig(narrow_rows=True))
    assert_matches(torch_outputs(program.exported_program().module(), wide), torch_outputs(double, wide), tol=1e-12)
    got = Runtime.get().load_program(edge.to_executorch().buffer).load_method("forward")
    assert_matches(got.execute([x.numpy() for x in inputs]), torch_outputs(model, inputs), tol=1e-5)


def test_a_classifier_runs_its_last_block_for_the_token_its_head_reads():
    torch.manual_seed(0)
    model, inputs = Block().eval(), (torch.randn(1, 7, 16),)
    edge = _lower(model, inputs)
    # q, proj, fc1, fc2 and the head on one row; k and v read every token
    assert sorted(shape[0] for shape in _shapes(edge, aten.addmm.default)) == [1, 1, 1, 1, 1, 7, 7]
    assert [shape[1] for shape in _shapes(edge, aten.bmm.default)] == [1, 1]  # scores, weighted values
    assert [shape[1] for shape in _shapes(edge, aten.native_layer_norm.default)] == [7, 1, 1]
    assert all(shape[-2] == 1 for shape in _shapes(edge, aten._softmax.default))
    _check_results(model, inputs, edge)


def test_the_narrowed_program_runs_in_executorch():
    """The rewrite uses core ATen operators only (``slice_copy``): ExecuTorch runs it too."""
    torch.manual_seed(0)
    model, inputs = Block().eval(), (torch.randn(1, 7, 16),)
    program = _lower(model, inputs).to_executorch()
    assert_matches(executorch_run(program.buffer, inputs), torch_outputs(model, inputs), tol=1e-5)


def test_switched_off_the_program_computes_every_row():
    torch.manual_seed(0)
    model, inputs = Block().eval(), (torch.randn(1, 7, 16),)
    edge = _lower(model, inputs, narrow=False)
    assert sorted(shape[0] for shape in _shapes(edge, aten.addmm.default)) == [1, 7, 7, 7, 7, 7, 7]
    assert len(_shapes(edge, aten.select_copy.int)) == 1


@pytest.mark.parametrize("keep_two", [False, True], ids=["select-last", "slice-last-two"])
def test_a_language_model_head_reads_only_its_last_positions(keep_two):
    torch.manual_seed(0)
    model, inputs = Last(keep_two).eval(), (torch.randn(1, 6, 8),)
    edge = _lower(model, inputs)
    rows = 2 if keep_two else 1
    assert [shape[0] for shape in _shapes(edge, aten.addmm.default)] == [rows, rows]
    assert _shapes(edge, aten.tanh.default) == [(1, rows, 8)]
    _check_results(model, inputs, edge)


# (forward, input shapes, the operators to look at, their output shape after the pass; None:
# the whole (2, 5, 8))
CASES = {
    "softmax-over-other-dim": (
        lambda m, x: torch.softmax(x * 2, -1)[:, 3],
        [(2, 5, 8)],
        aten._softmax.default,
        (2, 1, 8),
    ),
    "softmax-over-the-dim-stays": (
        lambda m, x: torch.softmax(x * 2, 1)[:, 3],
        [(2, 5, 8)],
        aten._softmax.default,
        (2, 5, 8),
    ),
    "sum-drops-a-dim-before-it": (lambda m, x: x.exp().sum(1)[:, 3], [(2, 5, 8)], aten.exp.default, (2, 5, 1)),
    "sum-over-the-dim-stays": (
        lambda m, x: x.exp().sum(2, keepdim=True)[:, :, 0],
        [(2, 5, 8)],
        aten.exp.default,
        (2, 5, 8),
    ),
    "layer-norm-over-the-dim-stays": (
        lambda m, x: nn.functional.layer_norm(x, (5, 8))[:, 2],
        [(2, 5, 8)],
        aten.native_layer_norm.default,
        None,
    ),
    "columns-of-a-product-stay": (lambda m, x, w: (x @ w)[:, 1], [(5, 8), (8, 6)], aten.mm.default, (5, 6)),
    "view-splitting-the-dim-stays": (
        lambda m, x: (x * 2).view(2, 5, 2, 4)[:, :, 1],
        [(2, 5, 8)],
        aten.mul.Tensor,
        (2, 5, 8),
    ),
    "view-merging-the-dim-stays": (lambda m, x: (x * 2).view(10, 8)[3], [(2, 5, 8)], aten.mul.Tensor, (2, 5, 8)),
    "view-keeping-the-dim": (lambda m, x: (x * 2).view(2, 5, 2, 4)[:, 3], [(2, 5, 8)], aten.mul.Tensor, (2, 1, 8)),
    "broadcast-inputs": (lambda m, x: (x + m.rows + m.shift)[:, 2], [(1, 5, 8)], aten.add.Tensor, (1, 1, 8)),
    "batched-product-batch": (
        lambda m, a, b: torch.bmm(a.sin(), b)[1],
        [(3, 4, 5), (3, 5, 2)],
        aten.sin.default,
        (1, 4, 5),
    ),
    "permuted": (lambda m, x: x.cos().permute(0, 2, 1)[:, 6], [(2, 5, 8)], aten.cos.default, (2, 5, 1)),
    "expanded-broadcast": (
        lambda m, x, y: (x.expand(2, 5, 8) * y.abs())[:, 1:3],
        [(1, 1, 8), (2, 5, 8)],
        aten.abs.default,
        (2, 2, 8),
    ),
    "select-of-a-select": (lambda m, x: x.neg()[1][:, 4], [(2, 5, 8)], aten.neg.default, (1, 5, 1)),
    "dtype-change": (lambda m, x: (x.to(torch.float64) * 3)[2], [(5, 8)], aten._to_copy.default, (1, 8)),
    "read-whole-elsewhere-stays": (
        lambda m, x: (lambda y: (y[:, 0], y.sum()))(x.sigmoid()),
        [(2, 5, 8)],
        aten.sigmoid.default,
        (2, 5, 8),
    ),
    "strided-slice-stays": (lambda m, x: x.exp()[:, ::2], [(2, 5, 8)], aten.exp.default, (2, 5, 8)),
    # the scalar becomes a constant scalar_tensor node, whose value is a real tensor, first
    "scalar-first-operand": (lambda m, x: (1.0 - x.sigmoid())[:, 0], [(2, 5, 8)], aten.sigmoid.default, (2, 1, 8)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_rules(name):
    fn, shapes, target, narrowed = CASES[name]
    torch.manual_seed(1)
    model, inputs = Lambda(fn).eval(), tuple(torch.randn(s) for s in shapes)
    edge = _lower(model, inputs)
    assert set(_shapes(edge, target)) == {narrowed or (2, 5, 8)}
    _check_results(model, inputs, edge)


def test_dynamic_shapes_are_left_alone():
    torch.manual_seed(0)
    model, inputs = Last().eval(), (torch.randn(1, 6, 8),)
    tokens = torch.export.Dim("tokens", min=2, max=16)
    edge = _lower(model, inputs, dynamic_shapes=({1: tokens},))
    assert [isinstance(shape[1], int) for shape in _shapes(edge, aten.tanh.default)] == [False]
    got = Runtime.get().load_program(edge.to_executorch().buffer).load_method("forward")
    for n in (3, 9):
        x = torch.randn(1, n, 8)
        assert_matches(got.execute([x.numpy()]), torch_outputs(model, (x,)), tol=1e-5)


def test_an_operator_that_writes_into_an_input_is_left_whole():
    """Edge graphs are functional, but a user pass could leave ``add_``: cutting its input would
    move the write onto a copy."""

    def f(x, y):
        z = x * 2
        z.add_(y)
        return z[:, 0]

    graph = make_fx(f, tracing_mode="fake")(torch.randn(2, 5, 3), torch.randn(2, 5, 3)).graph
    (select,) = (n for n in graph.nodes if n.target is aten.select.int)
    select.target = aten.select_copy.int
    assert not narrow_rows(graph)
    (write,) = (n for n in graph.nodes if n.target is aten.add_.Tensor)
    assert tuple(write.meta["val"].shape) == (2, 5, 3)


def test_a_dynamically_quantized_product_keeps_its_rows():
    """Dynamic quantization's parameters come from the whole activation at run time; a backend
    computes them on the rows it is given (XNNPACK's ``qdint8``), so the product keeps every row
    and the cut stays after it (the delegate then takes the layer whole)."""
    import torch.ao.quantization.fx._decomposed  # noqa: F401  (registers quantized_decomposed)

    ops = torch.ops.quantized_decomposed

    def head(m, x):
        scale, zero_point = ops.choose_qparams.tensor(x, -128, 127, 1e-5, torch.int8)
        q = ops.quantize_per_tensor.tensor(x, scale, zero_point, -128, 127, torch.int8)
        rows = ops.dequantize_per_tensor.tensor(q, scale, zero_point, -128, 127, torch.int8)
        return nn.functional.linear(rows, m.rows)[:, 0]

    torch.manual_seed(0)
    model, inputs = Lambda(head).eval(), (torch.randn(1, 5, 8),)
    edge = _lower(model, inputs)
    assert _shapes(edge, aten.mm.default) == [(5, 5)]  # (1, 5) were it cut
    got = Runtime.get().load_program(edge.to_executorch().buffer).load_method("forward")
    assert_matches(got.execute([inputs[0].numpy()]), torch_outputs(model, inputs), tol=1e-5)
