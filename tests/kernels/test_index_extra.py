"""narrow_copy, unfold_copy, diagonal_scatter, as_strided_scatter, put, nonzero_static and
repeat_interleave against eager: dtypes, negative and edge arguments, empty and 0-d inputs,
errors, shape functions, and a program using them end to end."""

import numpy as np
import pytest
import torch

from tests.kernels.harness import run_case_and_shape
from torchedge.errors import KernelError
from torchedge.exir import to_edge
from torchedge.exir.dtypes import to_numpy
from torchedge.kernels.registry import get_kernel, output_shapes
from torchedge.runtime import Runtime

A = torch.ops.aten
DTYPES = [torch.float32, torch.float64, torch.int32, torch.int64, torch.bool]
HALVES = [torch.float16, torch.bfloat16]


def _t(*shape, dtype):
    x = torch.randn(shape, dtype=torch.float64) * 3
    if dtype == torch.bool:
        return x > 0
    return x.to(dtype) if dtype.is_floating_point else x.round().to(dtype)


@pytest.mark.parametrize("dtype", DTYPES + HALVES)
def test_narrow_copy_matches_eager(dtype):
    def ref(s, d, st, n):
        return A.narrow_copy(s, d, st, n)

    x = _t(4, 5, 3, dtype=dtype)
    for dim, start, length in ((0, 1, 2), (-1, 0, 3), (1, -3, 2), (1, 5, 0), (2, 1, 5), (1, -6, 1)):
        run_case_and_shape("aten::narrow_copy.out", ref, x, dim, start, length)
    run_case_and_shape("aten::narrow_copy.out", ref, x, 3, 0, 1)


@pytest.mark.parametrize("dtype", DTYPES + HALVES)
def test_unfold_copy_matches_eager(dtype):
    def ref(s, d, size, step):
        return A.unfold_copy(s, d, size, step)

    x = _t(4, 7, 3, dtype=dtype)
    for dim, size, step in ((1, 3, 1), (1, 3, 2), (-1, 3, 5), (0, 4, 3), (1, 0, 1), (1, 8, 1), (1, 2, 0)):
        run_case_and_shape("aten::unfold_copy.out", ref, x, dim, size, step)
    run_case_and_shape("aten::unfold_copy.out", ref, _t(dtype=dtype), 0, 1, 1)
    run_case_and_shape("aten::unfold_copy.out", ref, _t(0, 3, dtype=dtype), 1, 2, 1)


@pytest.mark.parametrize("dtype", DTYPES + HALVES)
def test_diagonal_scatter_matches_eager(dtype):
    def ref(s, src, o, d1, d2):
        return A.diagonal_scatter(s, src, o, d1, d2)

    x = _t(3, 4, 5, dtype=dtype)
    for offset, d1, d2 in ((0, 0, 1), (1, 0, 1), (-2, 0, 1), (2, -1, 0), (0, 1, 2), (7, 0, 1)):
        diag = torch.diagonal(x, offset, d1, d2)
        run_case_and_shape("aten::diagonal_scatter.out", ref, x, _t(*diag.shape, dtype=dtype), offset, d1, d2)
    run_case_and_shape("aten::diagonal_scatter.out", ref, x, _t(2, dtype=dtype), 0, 0, 1)  # wrong src shape
    run_case_and_shape("aten::diagonal_scatter.out", ref, x, _t(3, dtype=dtype), 0, 1, 1)


@pytest.mark.parametrize("dtype", DTYPES + HALVES)
def test_as_strided_scatter_matches_eager(dtype):
    def ref(s, src, size, stride, off):
        return A.as_strided_scatter(s, src, size, stride, off)

    x = _t(4, 5, dtype=dtype)
    for size, stride, offset in (
        ((2, 2), (1, 2), None),
        ((3,), (6,), 1),
        ((2, 3), (5, 1), 7),
        ((0, 3), (1, 1), 0),
        ((), (), 19),
    ):
        run_case_and_shape("aten::as_strided_scatter.out", ref, x, _t(*size, dtype=dtype), size, stride, offset)
    run_case_and_shape("aten::as_strided_scatter.out", ref, x, _t(3, dtype=dtype), (3,), (8,), 5)  # out of bounds


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float64, torch.int32, torch.int64, torch.float16, torch.bfloat16]
)
def test_put_matches_eager(dtype):
    def ref(s, i, src, acc):
        return A.put(s, i, src, acc)

    x = _t(3, 4, dtype=dtype)
    index = torch.tensor([[0, -1], [5, 11]])
    for accumulate in (False, True):
        run_case_and_shape("aten::put.out", ref, x, index, _t(2, 2, dtype=dtype), accumulate)
        run_case_and_shape("aten::put.out", ref, x, torch.tensor([2, 2, -10]), _t(3, dtype=dtype), True)
        run_case_and_shape("aten::put.out", ref, x, torch.zeros(0, dtype=torch.int64), _t(0, dtype=dtype), accumulate)
        run_case_and_shape("aten::put.out", ref, _t(dtype=dtype), torch.tensor([0]), _t(1, dtype=dtype), accumulate)
    run_case_and_shape("aten::put.out", ref, x, torch.tensor([12]), _t(1, dtype=dtype), False)
    run_case_and_shape("aten::put.out", ref, x, torch.tensor([-13]), _t(1, dtype=dtype), False)
    run_case_and_shape("aten::put.out", ref, x, torch.tensor([1, 2]), _t(1, dtype=dtype), False)
    run_case_and_shape("aten::put.out", ref, x, torch.tensor([1], dtype=torch.int32), _t(1, dtype=dtype), False)


@pytest.mark.parametrize("dtype", DTYPES + HALVES)
def test_take_matches_eager(dtype):
    x = _t(3, 4, dtype=dtype)
    for index in ([[0, -1], [5, 11]], [3], [], [-12, 7, 7]):
        run_case_and_shape("aten::take.out", A.take, x, torch.tensor(index, dtype=torch.int64))
    run_case_and_shape("aten::take.out", A.take, _t(dtype=dtype), torch.tensor([[0]]))
    run_case_and_shape("aten::take.out", A.take, _t(0, 2, dtype=dtype), torch.zeros(0, dtype=torch.int64))
    for bad in ([12], [-13], torch.tensor([1], dtype=torch.int32)):  # eager refuses: so must the kernel
        run_case_and_shape("aten::take.out", A.take, x, bad if isinstance(bad, torch.Tensor) else torch.tensor(bad))


@pytest.mark.parametrize("dtype", DTYPES + HALVES)
def test_nonzero_static_matches_eager(dtype):
    def ref(s, size, fill):
        return A.nonzero_static(s, size=size, fill_value=fill)

    x = _t(3, 4, dtype=dtype)
    if dtype.is_floating_point:
        x[0, 0], x[1, 1] = float("nan"), 0.0
    for size, fill in ((0, -1), (3, -1), (12, 7), (20, -5)):
        run_case_and_shape("aten::nonzero_static.out", ref, x, size, fill)
    run_case_and_shape("aten::nonzero_static.out", ref, _t(dtype=dtype), 2, -1)
    run_case_and_shape("aten::nonzero_static.out", ref, _t(0, 2, dtype=dtype), 2, -1)
    with pytest.raises(KernelError, match="non-negative"):
        output_shapes("aten::nonzero_static.out", [np.ones(3), -1, -1, np.empty((0, 1), np.int64)])


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_repeat_interleave_matches_eager(dtype):
    kernel = get_kernel("aten::repeat_interleave.Tensor_out").fn
    for repeats in ([1, 0, 3, 2], [0, 0], [], [5]):
        r = torch.tensor(repeats, dtype=dtype)
        want = to_numpy(torch.repeat_interleave(r))
        got = kernel(to_numpy(r), None, None)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(kernel(to_numpy(r), int(r.sum()), None), want)
    for repeats, size, message in (([1, -1], None, "negative"), ([[1]], None, "1D"), ([1, 2], 4, "output_size")):
        with pytest.raises(KernelError, match=message):
            kernel(np.array(repeats, np.int64), size, None)
    with pytest.raises(KernelError, match="Long or Int"):
        kernel(np.array([1.0]), None, None)


class Copies(torch.nn.Module):
    def forward(self, x, diag, flat, idx, repeats):
        r = torch.repeat_interleave(x[:, 0], repeats, dim=0)
        torch._check(r.shape[0] <= 64)
        return (
            torch.narrow_copy(x, 1, 1, 2),
            x.unfold(1, 2, 1) * 2,
            torch.diagonal_scatter(x, diag, 1),
            torch.as_strided_scatter(x, flat, (2,), (3,), 1),
            x.put(idx, flat, accumulate=True),
            torch.nonzero_static(x > 0, size=5),
            r,
        )


def test_copies_program_matches_eager():
    torch.manual_seed(0)
    inputs = (torch.randn(4, 5), torch.randn(4), torch.randn(2), torch.tensor([3, -1]), torch.tensor([1, 0, 2, 3]))
    program = to_edge(torch.export.export(Copies(), inputs)).to_executorch()
    got = Runtime.get().load_program(program.buffer).load_method("forward").execute([to_numpy(t) for t in inputs])
    want = Copies()(*inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == to_numpy(w).dtype
        np.testing.assert_allclose(g, to_numpy(w), rtol=1.3e-6, atol=1e-5)


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float64, torch.int32, torch.int64, torch.float16, torch.bfloat16]
)
@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce_matches_eager(dtype, reduce, include_self):
    torch.manual_seed(3)

    def ref(s, d, i, src, r, inc):
        return A.index_reduce(s, d, i, src, r, include_self=inc)

    x = _t(5, 3, dtype=dtype)
    src = _t(4, 3, dtype=dtype)
    if dtype.is_floating_point:
        src[1, 2] = float("nan")
        x[4, 0] = float("inf")
    index = torch.tensor([0, 4, 0, 2])
    run_case_and_shape("aten::index_reduce.out", ref, x, 0, index, src, reduce, include_self)
    run_case_and_shape("aten::index_reduce.out", ref, x, 0, index.to(torch.int32), src, reduce, include_self)
    run_case_and_shape(
        "aten::index_reduce.out", ref, x, -1, torch.tensor([2, 2, 1, 2, 0]), _t(5, 5, dtype=dtype), reduce, include_self
    )
    run_case_and_shape(
        "aten::index_reduce.out",
        ref,
        x,
        1,
        torch.zeros(0, dtype=torch.int64),
        _t(5, 0, dtype=dtype),
        reduce,
        include_self,
    )
    run_case_and_shape(
        "aten::index_reduce.out", ref, _t(dtype=dtype), 0, torch.tensor([0]), _t(dtype=dtype), reduce, include_self
    )
    run_case_and_shape(
        "aten::index_reduce.out", ref, x, 0, torch.tensor([5]), _t(1, 3, dtype=dtype), reduce, include_self
    )
    run_case_and_shape(
        "aten::index_reduce.out", ref, x, 0, torch.tensor([-1]), _t(1, 3, dtype=dtype), reduce, include_self
    )
    run_case_and_shape(
        "aten::index_reduce.out", ref, x, 0, torch.tensor([1]), _t(1, 2, dtype=dtype), reduce, include_self
    )


def test_index_reduce_refuses_what_eager_refuses():
    def ref(s, d, i, src, r, inc):
        return A.index_reduce(s, d, i, src, r, include_self=inc)

    run_case_and_shape(
        "aten::index_reduce.out", ref, torch.ones(3) > 0, 0, torch.tensor([1]), torch.ones(1) > 0, "amax", True
    )
    run_case_and_shape("aten::index_reduce.out", ref, torch.ones(3), 0, torch.tensor([1]), torch.ones(1), "sum", True)
    run_case_and_shape(
        "aten::index_reduce.out", ref, torch.ones(3), 0, torch.tensor([1.0]), torch.ones(1), "prod", True
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod"])
def test_segment_reduce_matches_eager(dtype, reduce):
    torch.manual_seed(4)

    def ref(d, r, lengths, indices, offsets, axis, unsafe, initial):
        return A.segment_reduce(
            d, r, lengths=lengths, indices=indices, offsets=offsets, axis=axis, unsafe=unsafe, initial=initial
        )

    data = _t(6, 3, dtype=dtype)
    data[3, 1] = float("nan")
    lengths = torch.tensor([2, 0, 3, 1])
    for initial in (None, 2.0, -1.5):
        run_case_and_shape("aten::segment_reduce.out", ref, data, reduce, lengths, None, None, 0, False, initial)
        run_case_and_shape(
            "aten::segment_reduce.out", ref, data, reduce, None, None, torch.tensor([0, 2, 2, 5, 6]), 0, False, initial
        )
        run_case_and_shape(
            "aten::segment_reduce.out", ref, data, reduce, lengths.to(torch.int32), None, None, 0, False, initial
        )
    batched = _t(3, 4, 2, dtype=dtype)
    run_case_and_shape(
        "aten::segment_reduce.out",
        ref,
        batched,
        reduce,
        torch.tensor([[1, 3], [2, 2], [4, 0]]),
        None,
        None,
        1,
        False,
        None,
    )
    run_case_and_shape("aten::segment_reduce.out", ref, data, reduce, torch.tensor([2, 2]), None, None, 0, False, None)
    run_case_and_shape("aten::segment_reduce.out", ref, data, reduce, torch.tensor([7, -1]), None, None, 0, False, None)
    run_case_and_shape(
        "aten::segment_reduce.out", ref, data.to(torch.int64), reduce, lengths, None, None, 0, False, None
    )
    run_case_and_shape(
        "aten::segment_reduce.out", ref, _t(0, 2, dtype=dtype), reduce, torch.tensor([0, 0]), None, None, 0, False, None
    )


class Reductions(torch.nn.Module):
    def forward(self, x, index, source, data, lengths):
        return (
            x.index_reduce(0, index, source, "amax", include_self=False),
            x.index_reduce(1, index[:2], source[:, :2].T.contiguous().T, "mean"),
            torch.segment_reduce(data, "max", lengths=lengths, initial=0.0),
        )


def test_reductions_program_matches_eager():
    torch.manual_seed(0)
    inputs = (
        torch.randn(4, 4),
        torch.tensor([1, 3, 1, 0]),
        torch.randn(4, 4),
        torch.randn(6, 2),
        torch.tensor([1, 2, 3]),
    )
    program = to_edge(torch.export.export(Reductions(), inputs)).to_executorch()
    got = Runtime.get().load_program(program.buffer).load_method("forward").execute([to_numpy(t) for t in inputs])
    want = Reductions()(*inputs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, to_numpy(w), rtol=1.3e-6, atol=1e-5)
