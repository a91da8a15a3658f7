"""_unique2, unique_consecutive, unique_dim and unique_dim_consecutive against eager: every dtype,
NaN/inf/zeros, empty and 0-d inputs, every flag; and a program using them end to end."""

import numpy as np
import pytest
import torch

from torchedge.errors import KernelError
from torchedge.exir import to_edge
from torchedge.exir.dtypes import to_numpy
from torchedge.kernels.registry import get_kernel, op_traits
from torchedge.runtime import Runtime

DTYPES = [
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
]
FLAGS = [(False, False), (True, False), (False, True), (True, True)]
OPS = ["aten::_unique2.out", "aten::unique_consecutive.out", "aten::unique_dim.out", "aten::unique_dim_consecutive.out"]


def _data(shape, dtype, seed=0) -> torch.Tensor:
    """Few distinct values (so that runs and repeats happen), in the dtype's range."""
    g = torch.Generator().manual_seed(seed)
    values = torch.randint(-3, 4, shape, generator=g)
    if dtype == torch.bool:
        return values > 0
    if dtype == torch.uint8:
        return (values + 3).to(dtype)
    return values.to(dtype)


def _special(dtype) -> torch.Tensor:
    nan, inf = float("nan"), float("inf")
    return torch.tensor([3.0, nan, -inf, 0.0, -0.0, 3.0, 3.0, nan, inf, 1e30, -2.5, 0.0, 1e30], dtype=dtype)


def _run(op: str, args: list) -> tuple:
    """Call the data-dependent kernel like the runtime: outs planned but unused (empty here)."""
    outs = [np.empty(0, np.float32), np.empty(0, np.int64), np.empty(0, np.int64)]
    return get_kernel(op).fn(*args, *outs)


def _compare(got: tuple, want: tuple) -> None:
    assert len(got) == 3
    for g, w in zip(got, want):
        w = to_numpy(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        if w.dtype.kind not in "biuf":  # bfloat16: compare its exact float32 values
            g, w = g.astype(np.float32), w.astype(np.float32)
        np.testing.assert_array_equal(g, w)  # NaN matches NaN, -0.0 matches 0.0


def test_unique_operators_are_data_dependent():
    for op in OPS:
        assert op_traits(op).data_dependent


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("return_inverse", "return_counts"), FLAGS)
@pytest.mark.parametrize("sorted_", [True, False])
@pytest.mark.parametrize("shape", [(20,), (4, 5), (2, 3, 4), (), (0,), (0, 3)])
def test_unique2_matches_eager(dtype, return_inverse, return_counts, sorted_, shape):
    x = _data(shape, dtype)
    want = torch.ops.aten._unique2(x, sorted_, return_inverse, return_counts)
    _compare(_run("aten::_unique2.out", [to_numpy(x), sorted_, return_inverse, return_counts]), want)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize("op", ["_unique2", "unique_consecutive"])
def test_unique_of_nan_inf_and_zeros_matches_eager(dtype, op):
    x = _special(dtype)
    if op == "_unique2":
        want = torch.ops.aten._unique2(x, True, True, True)
        got = _run("aten::_unique2.out", [to_numpy(x), True, True, True])
    else:
        want = torch.ops.aten.unique_consecutive(x, True, True)
        got = _run("aten::unique_consecutive.out", [to_numpy(x), True, True, None])
    _compare(got, want)


def test_unique_large_integers_keep_their_order():
    x = torch.tensor([2**62, -(2**63), 2**63 - 1, 2**62 + 1, 2**62], dtype=torch.int64)
    _compare(_run("aten::_unique2.out", [to_numpy(x), True, True, True]), torch.ops.aten._unique2(x, True, True, True))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("return_inverse", "return_counts"), FLAGS)
@pytest.mark.parametrize(
    ("shape", "dim"),
    [((20,), None), ((4, 5), None), ((), None), ((0, 2), None), ((6, 2), 0), ((2, 6), 1), ((3, 6, 2), -2), ((6,), 0)],
)
def test_unique_consecutive_matches_eager(dtype, return_inverse, return_counts, shape, dim):
    x = _data(shape, dtype, seed=1)
    if dim is not None:  # runs of equal slices: repeat some slices
        x = torch.repeat_interleave(x, torch.tensor([1, 2, 1, 3, 1, 2])[: x.shape[dim]], dim=dim)
    want = torch.ops.aten.unique_consecutive(x, return_inverse, return_counts, dim)
    got = _run("aten::unique_consecutive.out", [to_numpy(x), return_inverse, return_counts, dim])
    _compare(got, want)
    if dim is not None:
        want = torch.ops.aten.unique_dim_consecutive(x, dim, return_inverse, return_counts)
        _compare(_run("aten::unique_dim_consecutive.out", [to_numpy(x), dim, return_inverse, return_counts]), want)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("return_inverse", "return_counts"), FLAGS)
@pytest.mark.parametrize(
    ("shape", "dim"), [((8, 2), 0), ((2, 8), 1), ((3, 7, 2), 1), ((7,), 0), ((6, 3, 2), -3), ((0, 3), 0), ((3, 0), 1)]
)
def test_unique_dim_matches_eager(dtype, return_inverse, return_counts, shape, dim):
    x = _data(shape, dtype, seed=2)
    if x.shape[dim] > 1:  # equal slices
        x = torch.cat([x, x.flip(dim)], dim=dim)
    want = torch.ops.aten.unique_dim(x, dim, True, return_inverse, return_counts)
    _compare(_run("aten::unique_dim.out", [to_numpy(x), dim, True, return_inverse, return_counts]), want)


@pytest.mark.parametrize("op", ["aten::unique_dim.out", "aten::unique_dim_consecutive.out"])
def test_unique_dim_refuses_what_eager_refuses(op):
    with pytest.raises(IndexError):
        torch.ops.aten.unique_dim(torch.tensor(1.0), 0)
    with pytest.raises(RuntimeError):
        torch.ops.aten.unique_dim(torch.zeros(3, 0), 0)
    args = (lambda x, d: [x, d, True, False, False]) if op.endswith("dim.out") else (lambda x, d: [x, d, False, False])
    with pytest.raises(KernelError, match="no dimensions"):
        _run(op, args(np.float32(1.0) * np.ones(()), 0))
    with pytest.raises(KernelError, match="0-sized"):
        _run(op, args(np.zeros((3, 0)), 0))
    with pytest.raises(KernelError, match="out of range"):
        _run(op, args(np.zeros((3, 2)), 2))


class Unique(torch.nn.Module):
    def forward(self, x, y):
        values, inverse, counts = torch.unique(x, return_inverse=True, return_counts=True)
        runs, run_ids, run_counts = torch.unique_consecutive(y, return_inverse=True, return_counts=True)
        rows, row_ids = torch.unique(y.reshape(-1, 2), dim=0, return_inverse=True)
        return values * 2, inverse, counts, runs, run_ids, run_counts, rows, row_ids


def test_unique_program_matches_eager():
    example = (torch.tensor([3.0, 1.0, 3.0, -2.0, 1.0, 7.0]), torch.tensor([1, 1, 2, 2, 2, 3, 1, 1]))
    program = to_edge(torch.export.export(Unique(), example)).to_executorch()
    method = Runtime.get().load_program(program.buffer).load_method("forward")
    for x, y in [
        example,
        (torch.tensor([5.0, 5.0, 5.0, 5.0, 5.0, 5.0]), torch.tensor([4, 4, 4, 4, 4, 4, 4, 4])),
        (torch.tensor([6.0, 5.0, 4.0, 3.0, 2.0, 1.0]), torch.tensor([0, 1, 2, 3, 4, 5, 6, 7])),
    ]:
        got = method.execute([to_numpy(x), to_numpy(y)])
        want = Unique()(x, y)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.dtype == to_numpy(w).dtype
            np.testing.assert_array_equal(g, to_numpy(w))
