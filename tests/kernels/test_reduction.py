"""Reductions, cumsum and topk against PyTorch."""

import numpy as np
import pytest
import torch

from tests.kernels.harness import Case, assert_close, rand, run_case

aten = torch.ops.aten
F16, F32, F64, I32, I64, B = torch.float16, torch.float32, torch.float64, torch.int32, torch.int64, torch.bool
NAN = float("nan")


# References taking the kernels' positional arguments (dtype is keyword-only in the schemas).
def sum_ref(x, dims, keepdim, dtype):
    return aten.sum.dim_IntList(x, dims, keepdim, dtype=dtype)


def mean_ref(x, dims, keepdim, dtype):
    return aten.mean.dim(x, dims, keepdim, dtype=dtype)


def cumsum_ref(x, dim, dtype):
    return aten.cumsum.default(x, dim, dtype=dtype)


def _dims_cases():
    """sum / mean / amax / amin / any over dim lists, with keepdim, None and negative dims."""
    dim_choices = [[1], [-1], [0, 2], [], None, [-3, -1]]
    for dtype in [F32, F64, F16, I32, I64, B]:
        x = rand(3, 4, 5, dtype=dtype)
        for dims in dim_choices:
            for keepdim in [False, True]:
                tag = f"{dtype}-{dims}-{keepdim}"
                yield Case(
                    "aten::sum.IntList_out",
                    sum_ref,
                    (x, dims, keepdim, None),
                    rtol=1e-5 if dtype != F16 else 1e-2,
                    id=f"sum-{tag}",
                ).param()
                if dtype.is_floating_point:
                    yield Case("aten::mean.out", mean_ref, (x, dims, keepdim, None), id=f"mean-{tag}").param()
                if dims is not None:
                    yield Case("aten::amax.out", aten.amax.default, (x, dims, keepdim), id=f"amax-{tag}").param()
                    yield Case("aten::amin.out", aten.amin.default, (x, dims, keepdim), id=f"amin-{tag}").param()
                yield Case("aten::any.dims_out", aten.any.dims, (x, dims, keepdim), id=f"any-{tag}").param()


def _other_cases():
    x = rand(3, 4)
    ints = rand(3, 4, dtype=I32)
    yield Case("aten::sum.IntList_out", sum_ref, (ints, [1], False, torch.float64), id="sum-dtype").param()
    yield Case("aten::sum.IntList_out", sum_ref, (rand(0, 3), [0], False, None), id="sum-empty").param()
    yield Case("aten::sum.IntList_out", sum_ref, (torch.tensor(2.5), [0], True, None), id="sum-0dim").param()
    yield Case("aten::mean.out", mean_ref, (ints, [0], False, torch.float32), id="mean-int-dtype").param()
    yield Case("aten::mean.out", mean_ref, (ints, [0], False, None), id="mean-int-refused").param()
    yield Case(
        "aten::mean.out", mean_ref, (rand(2, 3, dtype=F16), [1], True, torch.float32), id="mean-half-to-float"
    ).param()
    yield Case("aten::mean.dtype_out", lambda a, dt: aten.mean.default(a, dtype=dt), (x, None), id="mean-all").param()
    nan = torch.tensor([[1.0, NAN, 3.0], [4.0, 5.0, 6.0]])
    for op, ref in [("amax", aten.amax.default), ("amin", aten.amin.default)]:
        yield Case(f"aten::{op}.out", ref, (nan, [1], False), id=f"{op}-nan").param()
        yield Case(f"aten::{op}.out", ref, (rand(0, 3), [0], False), id=f"{op}-empty-refused").param()
    yield Case("aten::any.out", aten.any.dim, (rand(3, 4, dtype=B), -1, True), id="any-dim").param()
    yield Case("aten::any.out", aten.any.dim, (torch.tensor([[0.0, NAN], [0.0, 0.0]]), 1, False), id="any-nan").param()
    yield Case("aten::any.all_out", aten.any.default, (rand(3, 4, dtype=I32, low=0, high=0),), id="any-all").param()
    yield Case(
        "aten::any.all_out", aten.any.default, (torch.tensor([0, 3], dtype=torch.uint8),), id="any-uint8"
    ).param()
    for op, ref in [("argmax", aten.argmax.default), ("argmin", aten.argmin.default)]:
        for dim, keepdim in [(None, False), (None, True), (1, False), (-2, True), (0, False)]:
            yield Case(
                f"aten::{op}.out", ref, (rand(3, 4, dtype=I32, low=0, high=4), dim, keepdim), id=f"{op}-{dim}-{keepdim}"
            ).param()
        yield Case(f"aten::{op}.out", ref, (nan, 1, False), id=f"{op}-nan").param()
        yield Case(f"aten::{op}.out", ref, (torch.tensor(3.0), 0, False), id=f"{op}-0dim").param()
    for dtype in [F32, F64, F16, I32, B]:
        for dim in [0, -1]:
            yield Case(
                "aten::cumsum.out",
                cumsum_ref,
                (rand(3, 5, dtype=dtype), dim, None),
                rtol=1e-5 if dtype != F16 else 1e-2,
                id=f"cumsum-{dtype}-{dim}",
            ).param()
    yield Case("aten::cumsum.out", cumsum_ref, (ints, 1, torch.float64), id="cumsum-dtype").param()
    yield Case("aten::cumsum.out", cumsum_ref, (torch.tensor(1.5), 0, None), id="cumsum-0dim").param()


def _distinct(*shape, dtype=F32):
    values = torch.randperm(int(np.prod(shape)), generator=torch.Generator().manual_seed(1)).reshape(shape)
    return values.to(dtype)


def _topk_consistent(x: torch.Tensor):
    """Compare values only, and check the indices point at those values."""

    def compare(got, want):
        assert_close(got[0], want[0])
        assert_close(np.take_along_axis(x.numpy(), got[1], axis=1), want[0])

    return compare


def _topk_cases():
    for dtype in [F32, F64, I32, I64]:
        x = _distinct(4, 7, dtype=dtype)
        for k, dim, largest in [(3, -1, True), (3, -1, False), (2, 0, True), (4, 0, False), (0, 1, True), (7, 1, True)]:
            yield Case(
                "aten::topk.values",
                aten.topk.default,
                (x, k, dim, largest, True),
                id=f"topk-{dtype}-{k}-{dim}-{largest}",
            ).param()
    nan = torch.tensor([[1.0, NAN, 3.0, -1.0], [NAN, 2.0, NAN, 0.5]])
    for largest in [True, False]:  # which of two nans comes first is unspecified
        yield Case(
            "aten::topk.values",
            aten.topk.default,
            (nan, 3, 1, largest, True),
            compare=_topk_consistent(nan),
            id=f"topk-nan-{largest}",
        ).param()
    yield Case("aten::topk.values", aten.topk.default, (_distinct(5), 6, 0, True, True), id="topk-k-too-big").param()


CASES = [*_dims_cases(), *_other_cases(), *_topk_cases()]


@pytest.mark.parametrize("case", CASES)
def test_reduction(case):
    run_case(case)


def test_topk_ties_keep_values():
    """With ties PyTorch may return any of the tied indices; values must still match."""
    x = torch.tensor([[1, 3, 3, 2, 3], [0, 0, 1, 1, 0]])
    run_case(Case("aten::topk.values", aten.topk.default, (x, 2, 1, True, True), compare=_topk_consistent(x)))
