"""Control flow (`cond`, `map`, `scan`, `while_loop`) against eager, on both runtimes, both ways.

torchedge compiles all four into the format as ExecuTorch does (sub-graphs inline, jumps,
`et_copy_index`); its programs with `cond`, `map` and `scan` run on the real ExecuTorch, and
ExecuTorch's own programs with them run on torchedge. ExecuTorch 1.5.1 refuses `while_loop`.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch._higher_order_ops.map import map as hop_map
from torch._higher_order_ops.scan import scan
from torch._higher_order_ops.while_loop import while_loop

from tests.conftest import torch_outputs
from torchedge.exir import to_edge
from torchedge.exir.verification import IRVerificationError
from torchedge.runtime import Runtime


class NestedCond(torch.nn.Module):
    """Nested cond whose branches return two outputs computed differently, between other ops."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x, y):
        h = self.linear(x)

        def inner_true(a, b):
            return a * b, a.sum(0, keepdim=True).expand(3, 4) + 1.0

        def inner_false(a, b):
            return a - b, torch.relu(b) * 2.0

        def outer_true(a, b):
            return torch.cond(b.mean() > 0, inner_true, inner_false, (a, b))

        def outer_false(a, b):
            return a.sin(), b.cos() - a

        p, q = torch.cond(h.sum() > 0, outer_true, outer_false, (h, y))
        return p + q * 0.5, torch.tanh(h)


class Map(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(3))

    def forward(self, xs, y):
        return hop_map(lambda x, y: torch.relu(x * self.weight + y).sum(0, keepdim=True) + x, xs, y) * 2.0


class Scan(torch.nn.Module):
    """A running sum and a running maximum: two carried values and two stacked outputs."""

    def forward(self, init, xs):
        def combine(carry, x):
            total, peak = carry
            total = total + x
            peak = torch.maximum(peak, x)
            return (total, peak), (total * 2.0, peak - total)

        (total, peak), (doubled, gap) = scan(combine, (init, init.clone()), xs)
        return total, peak, doubled, gap


class Collatz(torch.nn.Module):
    """Counts Collatz steps: the number of iterations depends on the data."""

    def forward(self, n, x):
        def condition(step, value, acc):
            return value > 1

        def body(step, value, acc):
            odd = torch.remainder(value, 2) == 1
            return step + 1, torch.where(odd, 3 * value + 1, torch.div(value, 2, rounding_mode="floor")), acc * 1.5

        return while_loop(condition, body, (torch.zeros((), dtype=torch.int64), n, x))


def _ints(*values):
    return (torch.tensor(values[0]), torch.randn(3))


CASES = {
    "nested_cond": (
        NestedCond,
        lambda: [(torch.randn(3, 4) + s, torch.randn(3, 4) + t) for s in (-3, 3) for t in (-3, 3)],
    ),
    "map": (Map, lambda: [(torch.randn(5, 3), torch.randn(3)) for _ in range(2)]),
    "scan": (Scan, lambda: [(torch.randn(2, 3), torch.randn(6, 2, 3)) for _ in range(2)]),
    "while_loop": (Collatz, lambda: [(torch.tensor(v), torch.randn(3)) for v in (6, 1, 27, 7)]),
}
ON_EXECUTORCH = ["nested_cond", "map", "scan"]  # ExecuTorch 1.5.1 refuses while_loop


def _build(name):
    torch.manual_seed(0)
    make, calls = CASES[name]
    model = make().eval()
    inputs = calls()
    return model, inputs, torch.export.export(model, inputs[0])


def _compare(outputs, model, inputs):
    expected = torch_outputs(model, inputs)
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected):
        got = np.asarray(got)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", list(CASES))
def test_torchedge_program_on_torchedge(name):
    model, calls, ep = _build(name)
    method = Runtime.get().load_program(to_edge(ep).to_executorch().buffer).load_method("forward")
    for inputs in calls:  # the same loaded method, again and again: loops reset their counters
        _compare(method.execute([t.numpy() for t in inputs]), model, inputs)


def test_while_loop_runs_a_data_dependent_number_of_times():
    model, calls, ep = _build("while_loop")
    method = Runtime.get().load_program(to_edge(ep).to_executorch().buffer).load_method("forward")
    steps = [int(method.execute([t.numpy() for t in inputs])[0]) for inputs in calls]
    assert steps == [8, 0, 111, 16]  # Collatz stopping times of 6, 1, 27 and 7


@pytest.mark.parametrize("name", ON_EXECUTORCH)
def test_torchedge_program_on_executorch(name):
    from executorch.runtime import Runtime as ETRuntime

    model, calls, ep = _build(name)
    program = ETRuntime.get().load_program(to_edge(ep).to_executorch().buffer)
    method = program.load_method("forward")
    for inputs in calls:
        _compare([o.numpy() for o in method.execute(list(inputs))], model, inputs)


@pytest.mark.parametrize("name", ON_EXECUTORCH)
def test_executorch_program_on_torchedge(name):
    from executorch.exir import to_edge as et_to_edge

    model, calls, ep = _build(name)
    method = Runtime.get().load_program(et_to_edge(ep).to_executorch().buffer).load_method("forward")
    for inputs in calls:
        _compare(method.execute([t.numpy() for t in inputs]), model, inputs)


def test_sub_graph_operators_are_verified_and_named():
    class Unsupported(torch.nn.Module):
        def forward(self, x):
            return torch.cond(x.sum() > 0, lambda t: torch.special.zeta(t, t), lambda t: t * 2, (x,))

    ep = torch.export.export(Unsupported(), (torch.rand(3) + 1,))
    try:
        to_edge(ep)
    except IRVerificationError as e:
        assert "special_zeta" in str(e) and "test_control_flow.py" in str(e)
    else:  # zeta has a kernel: then the program must run exactly
        x = torch.rand(3) + 1
        method = Runtime.get().load_program(to_edge(ep).to_executorch().buffer).load_method("forward")
        _compare(method.execute([x.numpy()]), Unsupported(), (x,))


def test_map_over_a_dynamic_dimension_and_cond_on_a_size():
    class MapThenCond(torch.nn.Module):
        def forward(self, xs, y):
            out = hop_map(lambda x, y: x * y + 1, xs, y)
            return torch.cond(xs.shape[0] > 4, lambda a: a.sin(), lambda a: a.cos(), (out,))

    batch = torch.export.Dim("batch", min=1, max=8)
    model = MapThenCond()
    ep = torch.export.export(model, (torch.randn(5, 3), torch.randn(3)), dynamic_shapes=({0: batch}, None))
    method = Runtime.get().load_program(to_edge(ep).to_executorch().buffer).load_method("forward")
    for rows in (5, 2, 8, 1):  # both branches, a run shorter than the last one, the bound
        inputs = (torch.randn(rows, 3), torch.randn(3))
        _compare(method.execute([t.numpy() for t in inputs]), model, inputs)
