"""Core-ATen reductions, sorts, scatters, gathers, shape copies, creation and random kernels
against PyTorch eager, over every dtype models use (bfloat16 included).

Cases come from tables of (op, reference, dtypes, arguments) and run through the harness,
bfloat16 included; data-dependent outputs (nonzero, masked_select) run through
`_run_dynamic`, since those kernels return their result.
"""

import numpy as np
import pytest
import torch

from tests.kernels.harness import (
    ALL,
    BF16,
    F16,
    F32,
    F64,
    FLOATS,
    I8,
    I16,
    I32,
    I64,
    NP_BF16,
    U8,
    B,
    Case,
    as_float,
    assert_close,
    numpy_dtype_of,
    rand,
    run_case,
    to_kernel_arg,
    to_numpy,
)
from torchedge.errors import KernelError
from torchedge.kernels.allocator import reset_allocator, use_allocator
from torchedge.kernels.portable import random as random_kernels
from torchedge.kernels.registry import get_kernel

aten = torch.ops.aten
NAN = float("nan")
LOW_PRECISION = {F16: 1e-2, BF16: 2e-2}


def _tol(dtype):
    """(rtol, atol) for a case computed in ``dtype``; None keeps the harness defaults."""
    tol = LOW_PRECISION.get(dtype)
    return {"rtol": tol, "atol": tol} if tol else {}


def _name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


# ---- running cases ----------------------------------------------------------------------

# bfloat16 outs of cases without their own tolerances must match to float32 precision (as
# exact as bfloat16 holds), stricter than the harness's default for bfloat16.
BF16_EXACT = {NP_BF16: (1e-5, 1e-6)}


def _run(case: Case) -> None:
    run_case(case, tolerances=BF16_EXACT)


def _run_dynamic(case: Case) -> None:
    """Kernels of data-dependent outputs return an allocated result instead of filling out."""
    kernel = get_kernel(case.op)
    args = [to_kernel_arg(a) for a in case.args]
    try:
        want = case.ref(*case.args)
    except Exception:  # the kernel must refuse too
        with pytest.raises(KernelError):
            kernel.fn(*args, None)
        return
    assert_close(as_float(kernel.fn(*args, None)), as_float(to_numpy(want)), what=case.op)


# ---- inputs ------------------------------------------------------------------------------


def _with_nan(x: torch.Tensor) -> torch.Tensor:
    """Floats get a nan in one row and a whole nan fibre."""
    if x.dtype.is_floating_point and x.ndim == 3 and x.numel():
        x = x.clone()
        x[0, 1, 2] = NAN
        x[1, :, 0] = NAN
    return x


def _inputs(dtype):
    """(tag, tensor, (int dim, flag) pairs, (dim list, keepdim) pairs) to reduce: 3-D with
    nan, 0-dim, zero-size; the flag is keepdim or descending."""
    yield (
        "3d",
        _with_nan(rand(3, 4, 5, dtype=dtype)),
        [(0, True), (-1, False), (1, True)],
        [([1], True), ([-1], False), ([0, 2], True), ([], False), (None, True)],
    )
    yield "0d", rand(1, dtype=dtype).reshape(()), [(0, True), (-1, False)], [([0], False), (None, True)]
    yield (
        "empty",
        rand(2, 0, 3, dtype=dtype),
        [(0, False), (1, True), (-1, True)],
        [([1], False), ([0, 2], True), (None, False)],
    )


# ---- reductions and sorts ----------------------------------------------------------------


def _sorted_consistently(x: torch.Tensor, dim: int):
    """An unstable sort may order ties either way: the values must match, and the indices
    must be a permutation pointing at them."""

    def compare(got, want):
        a = to_numpy(x).reshape(x.shape or (1,))
        values, indices = (g.reshape(a.shape) for g in got)
        np.testing.assert_array_equal(as_float(values), as_float(want[0].reshape(a.shape)))
        np.testing.assert_array_equal(np.sort(indices, axis=dim), np.sort(want[1].reshape(a.shape), axis=dim))
        np.testing.assert_array_equal(as_float(np.take_along_axis(a, indices, axis=dim)), as_float(values))

    return compare


def _values_only(got, want):
    """topk with ties may pick any of the tied indices."""
    assert_close(as_float(got[0]), as_float(want[0]))


# (op, reference, dtypes, kernel arguments after self for (dim, flag)); flag is keepdim or descending
DIM_OPS = [
    ("aten::max.dim_max", lambda x, d, k: aten.max.dim(x, d, k), ALL, lambda d, k: (d, k)),
    ("aten::min.dim_min", lambda x, d, k: aten.min.dim(x, d, k), ALL, lambda d, k: (d, k)),
    ("aten::prod.int_out", lambda x, d, k, dt: aten.prod.dim_int(x, d, k, dtype=dt), ALL, lambda d, k: (d, k, None)),
    ("aten::cumsum.out", lambda x, d, dt: aten.cumsum(x, d, dtype=dt), ALL, lambda d, k: (d, None)),
    ("aten::argmax.out", aten.argmax.default, ALL, lambda d, k: (d, k)),
    ("aten::argmin.out", aten.argmin.default, ALL, lambda d, k: (d, k)),
    ("aten::sort.values", lambda x, d, desc: aten.sort.default(x, d, desc), ALL, lambda d, k: (d, k)),
    (
        "aten::sort.values_stable",
        lambda x, s, d, desc: aten.sort.stable(x, stable=s, dim=d, descending=desc),
        ALL,
        lambda d, k: (True, d, k),
    ),
    (
        "aten::argsort.stable_out",
        lambda x, s, d, desc: aten.argsort.stable(x, stable=s, dim=d, descending=desc),
        ALL,
        lambda d, k: (True, d, k),
    ),
    (
        "aten::topk.values",
        lambda x, k, d, largest, s: aten.topk(x, k, d, largest, s),
        ALL,
        lambda d, k: (1, d, k, True),
    ),
]

# (op, reference, dtypes, kernel arguments after self for (dims, keepdim))
DIMS_OPS = [
    (
        "aten::var.correction_out",
        lambda x, d, c, k: aten.var.correction(x, d, correction=c, keepdim=k),
        ALL,
        lambda d, k: (d, None, k),
    ),
    ("aten::var.out", lambda x, d, u, k: aten.var.dim(x, d, u, k), ALL, lambda d, k: (d, False, k)),
    (
        "aten::std.correction_out",
        lambda x, d, c, k: aten.std.correction(x, d, correction=c, keepdim=k),
        ALL,
        lambda d, k: (d, 2, k),
    ),
    ("aten::std.out", lambda x, d, u, k: aten.std.dim(x, d, u, k), ALL, lambda d, k: (d, True, k)),
    (
        "aten::sum.IntList_out",
        lambda x, d, k, dt: aten.sum.dim_IntList(x, d, k, dtype=dt),
        ALL,
        lambda d, k: (d, k, None),
    ),
    ("aten::mean.out", lambda x, d, k, dt: aten.mean.dim(x, d, k, dtype=dt), ALL, lambda d, k: (d, k, None)),
    ("aten::amax.out", aten.amax.default, ALL, lambda d, k: (d or [], k)),
    ("aten::amin.out", aten.amin.default, ALL, lambda d, k: (d or [], k)),
    ("aten::any.dims_out", aten.any.dims, ALL, lambda d, k: (d, k)),
]

# (op, reference, dtypes, kernel arguments after self)
ALL_OPS = [
    ("aten::max.unary_out", aten.max.default, ALL, ()),
    ("aten::min.unary_out", aten.min.default, ALL, ()),
    ("aten::prod.out", lambda x, dt: aten.prod.default(x, dtype=dt), ALL, (None,)),
    ("aten::mean.dtype_out", lambda x, dt: aten.mean.default(x, dtype=dt), ALL, (None,)),
    ("aten::any.all_out", aten.any.default, ALL, ()),
]


def _compare(op: str, x: torch.Tensor, dim: int):
    if op == "aten::topk.values":
        return _values_only
    if op == "aten::sort.values" and x.ndim:  # torch's default sort is not stable
        return _sorted_consistently(x, dim % x.ndim)
    return None


def _reduction_cases():
    inputs = {dtype: list(_inputs(dtype)) for dtype in ALL}
    for op, ref, dtypes, make in DIM_OPS:
        for dtype in dtypes:
            for tag, x, dims_and_flags, _ in inputs[dtype]:
                for dim, flag in dims_and_flags:
                    yield Case(
                        op,
                        ref,
                        (x, *make(dim, flag)),
                        compare=_compare(op, x, dim),
                        **_tol(dtype),
                        id=f"{op[6:]}-{_name(dtype)}-{tag}-{dim}-{flag}",
                    )
    for op, ref, dtypes, make in DIMS_OPS:
        for dtype in dtypes:
            for tag, x, _, dim_lists in inputs[dtype]:
                for dims, keepdim in dim_lists:
                    yield Case(
                        op,
                        ref,
                        (x, *make(dims, keepdim)),
                        **_tol(dtype),
                        id=f"{op[6:]}-{_name(dtype)}-{tag}-{dims}-{keepdim}",
                    )
    for op, ref, dtypes, extra in ALL_OPS:
        for dtype in dtypes:
            for tag, x, _, _ in inputs[dtype]:
                yield Case(op, ref, (x, *extra), **_tol(dtype), id=f"{op[6:]}-{_name(dtype)}-{tag}")


def _reduction_extra_cases():
    ints = rand(3, 4, dtype=I32)
    yield Case(
        "aten::prod.int_out",
        lambda x, d, k, dt: aten.prod.dim_int(x, d, k, dtype=dt),
        (ints, 1, False, F64),
        id="prod-dtype",
    )
    yield Case(
        "aten::prod.out", lambda x, dt: aten.prod.default(x, dtype=dt), (rand(6, dtype=I16), I8), id="prod-wraps-int8"
    )
    yield Case(
        "aten::prod.out",
        lambda x, dt: aten.prod.default(x, dtype=dt),
        (torch.full((40,), 3, dtype=I64), None),
        id="prod-wraps-int64",
    )
    stats = rand(4, 6, dtype=F64)
    for correction in [0, 1, 2.5, 6, 30]:  # dividing by max(0, n - correction): inf when n <= correction
        yield Case(
            "aten::var.correction_out",
            lambda x, d, c, k: aten.var.correction(x, d, correction=c, keepdim=k),
            (stats, [1], correction, False),
            id=f"var-correction-{correction}",
        )
    yield Case(
        "aten::var.correction_out",
        lambda x, d, c, k: aten.var.correction(x, d, correction=c, keepdim=k),
        (torch.ones(2, 3), [1], 5, False),
        id="var-zero-over-zero",
    )
    ties = torch.tensor([[1.0, 3.0, 3.0, -1.0], [2.0, 2.0, -5.0, -5.0]])
    for op, ref in [("aten::max.dim_max", aten.max.dim), ("aten::min.dim_min", aten.min.dim)]:
        yield Case(op, ref, (ties, 1, False), id=f"{op[6:]}-ties-first")
    sort_nan = torch.tensor(
        [[NAN, 1.0, -np.inf, 2.0, NAN, -0.0, 0.0, np.inf], [3.0, 3.0, 1.0, 1.0, NAN, 0.0, 3.0, 1.0]]
    )
    for dtype in FLOATS:
        for descending in (False, True):
            yield Case(
                "aten::sort.values_stable",
                lambda x, s, d, desc: aten.sort.stable(x, stable=s, dim=d, descending=desc),
                (sort_nan.to(dtype), True, 1, descending),
                id=f"sort-nan-{_name(dtype)}-{descending}",
            )
    long_ties = rand(3, 200, dtype=I64, low=0, high=4)  # long rows: torch sorts them in parallel blocks
    for descending in (False, True):
        yield Case(
            "aten::sort.values_stable",
            lambda x, s, d, desc: aten.sort.stable(x, stable=s, dim=d, descending=desc),
            (long_ties, True, -1, descending),
            id=f"sort-stable-long-{descending}",
        )


# ---- distances ---------------------------------------------------------------------------


def _distance_cases():
    for dtype in FLOATS:
        x1, x2 = rand(2, 1, 4, 3, dtype=dtype), rand(5, 6, 3, dtype=dtype)
        for p in [0.0, 1.0, 2.0, 3.5, float("inf")]:
            yield Case(
                "aten::_cdist_forward.out", aten._cdist_forward.default, (x1, x2, p, 2), id=f"cdist-{_name(dtype)}-{p}"
            )
            yield Case(
                "aten::_pdist_forward.out",
                aten._pdist_forward.default,
                (rand(5, 3, dtype=dtype), p),
                id=f"pdist-{_name(dtype)}-{p}",
            )
    yield Case(
        "aten::_cdist_forward.out",
        aten._cdist_forward.default,
        (rand(3, 0), rand(2, 0), 2.0, None),
        id="cdist-no-columns",
    )
    yield Case(
        "aten::_cdist_forward.out", aten._cdist_forward.default, (rand(0, 4), rand(2, 4), 1.0, None), id="cdist-no-rows"
    )
    yield Case(
        "aten::_cdist_forward.out",
        aten._cdist_forward.default,
        (rand(3, 4), rand(2, 5), 2.0, None),
        id="cdist-columns-differ",
    )
    yield Case(
        "aten::_cdist_forward.out",
        aten._cdist_forward.default,
        (rand(3, 4), rand(2, 4), -1.0, None),
        id="cdist-negative-p",
    )
    yield Case(
        "aten::_cdist_forward.out",
        aten._cdist_forward.default,
        (rand(3, 4), rand(2, 4, dtype=F64), 2.0, None),
        id="cdist-dtypes-differ",
    )
    yield Case(
        "aten::_cdist_forward.out",
        aten._cdist_forward.default,
        (rand(30, 4), rand(28, 4), 2.0, 1),
        rtol=1e-4,
        atol=1e-4,
        id="cdist-matmul-mode",
    )
    yield Case("aten::_pdist_forward.out", aten._pdist_forward.default, (rand(1, 4), 2.0), id="pdist-one-row")


# ---- scatters ----------------------------------------------------------------------------

_RNG = np.random.default_rng(7)


def _unique_index(rows: int, cols: int, size: int) -> torch.Tensor:
    """An index of shape (rows, cols) along dim 0 with no repeated target in a column."""
    return torch.from_numpy(np.stack([_RNG.permutation(size)[:rows] for _ in range(cols)], axis=1))


def _scatter_ref(x, d, i, s):
    return aten.scatter.src(x, d, i, s)


def _scatter_reduce_ref(x, d, i, s, reduce, include_self):
    return aten.scatter_reduce.two(x, d, i, s, reduce, include_self=include_self)


def _scatter_cases():
    for dtype in ALL:
        self, src = rand(4, 5, dtype=dtype), rand(3, 6, dtype=dtype)
        unique = _unique_index(3, 5, 4)
        repeated = torch.from_numpy(_RNG.integers(0, 4, (3, 5)))
        with_nan = self.clone()
        if dtype.is_floating_point:
            with_nan[1, 2] = src[0, 4] = NAN
        yield Case("aten::scatter.src_out", _scatter_ref, (self, 0, unique, src), id=f"scatter-{_name(dtype)}")
        yield Case(
            "aten::scatter.src_out",
            _scatter_ref,
            (self, -1, unique.T.contiguous(), src.T.contiguous()),
            id=f"scatter-last-{_name(dtype)}",
        )
        yield Case(
            "aten::scatter.value_out", aten.scatter.value, (self, 0, unique, 2.5), id=f"scatter-value-{_name(dtype)}"
        )
        yield Case(
            "aten::scatter_add.out",
            aten.scatter_add.default,
            (self, 0, repeated, src),
            **_tol(dtype),
            id=f"scatter_add-{_name(dtype)}",
        )
        for reduce in ["sum", "prod", "mean", "amax", "amin"]:
            for include_self in (True, False):
                yield Case(
                    "aten::scatter_reduce.two_out",
                    _scatter_reduce_ref,
                    (with_nan, 0, repeated, src, reduce, include_self),
                    **_tol(dtype),
                    id=f"scatter_reduce-{reduce}-{include_self}-{_name(dtype)}",
                )
    x, src, index = rand(4, 5), rand(3, 6), _unique_index(3, 5, 4)
    yield Case("aten::scatter.src_out", _scatter_ref, (x, 0, index.int(), src), id="scatter-int32-index")
    yield Case(
        "aten::scatter.value_out",
        aten.scatter.value,
        (x, 1, index.T.contiguous(), 1.0),
        id="scatter-index-exceeds-self",
    )
    yield Case("aten::scatter.src_out", _scatter_ref, (x, 0, index + 1, src), id="scatter-out-of-bounds")
    yield Case("aten::scatter.src_out", _scatter_ref, (x, 0, -index - 1, src), id="scatter-negative")
    yield Case("aten::scatter.src_out", _scatter_ref, (x, 0, index, src[:, :4]), id="scatter-src-too-small")
    yield Case("aten::scatter.src_out", _scatter_ref, (x, 0, index, src.double()), id="scatter-dtypes-differ")
    yield Case("aten::scatter.src_out", _scatter_ref, (x, 1, torch.zeros(0, dtype=I64), src), id="scatter-empty")
    yield Case(
        "aten::scatter.src_out",
        _scatter_ref,
        (torch.tensor(1.0), 0, torch.tensor(0), torch.tensor(5.0)),
        id="scatter-0d",
    )
    yield Case(
        "aten::scatter.value_out",
        aten.scatter.value,
        (rand(3, dtype=I32), 0, torch.tensor([1]), 2.5),
        id="scatter-value-truncates",
    )
    yield Case(
        "aten::scatter_reduce.two_out",
        _scatter_reduce_ref,
        (torch.tensor([-5, 5, 5]), 0, torch.tensor([0, 1, 1]), torch.tensor([2, 3, 4]), "mean", True),
        id="scatter_reduce-mean-floors",
    )
    yield Case(
        "aten::scatter_reduce.two_out",
        _scatter_reduce_ref,
        (x, 0, index, src, "median", True),
        id="scatter_reduce-unknown",
    )
    for reduce in ["add", "multiply"]:
        yield Case(
            "aten::scatter.reduce_out",
            lambda s, d, i, v, r: aten.scatter.reduce(s, d, i, v, reduce=r),
            (x, 0, index, src, reduce),
            id=f"scatter-legacy-{reduce}",
        )
        yield Case(
            "aten::scatter.value_reduce_out",
            lambda s, d, i, v, r: aten.scatter.value_reduce(s, d, i, v, reduce=r),
            (x, 0, index, 1.5, reduce),
            id=f"scatter-legacy-value-{reduce}",
        )


def _index_put_ref(x, indices, values, accumulate):
    return aten.index_put(x, indices, values, accumulate)


def _write_cases():
    for dtype in ALL:
        x = rand(5, 6, 7, dtype=dtype)
        keys = {
            "first": [torch.tensor([0, 4, -1])],
            "second": [None, torch.tensor([[1], [5]])],
            "mask": [rand(5, 6, dtype=B)],
            "apart": [torch.tensor([1, 2]), None, torch.tensor([0, 6])],
            "int32": [torch.tensor([3, 0], dtype=I32)],
        }
        for tag, key in keys.items():
            shape = x[tuple(slice(None) if k is None else k for k in key)].shape
            for accumulate in (False, True):
                yield Case(
                    "aten::index_put.out",
                    _index_put_ref,
                    (x, key, rand(*shape, dtype=dtype), accumulate),
                    **_tol(dtype),
                    id=f"index_put-{tag}-{accumulate}-{_name(dtype)}",
                )
        repeated = [torch.tensor([1, 1, 3, 1])]
        yield Case(
            "aten::index_put.out",
            _index_put_ref,
            (x, repeated, rand(7, dtype=dtype), True),
            **_tol(dtype),
            id=f"index_put-repeated-{_name(dtype)}",
        )
        mask = rand(2, 3, dtype=B)
        yield Case(
            "aten::masked_scatter.out",
            aten.masked_scatter.default,
            (rand(2, 3, dtype=dtype), mask, rand(7, dtype=dtype)),
            id=f"masked_scatter-{_name(dtype)}",
        )
        yield Case(
            "aten::masked_scatter.out",
            aten.masked_scatter.default,
            (rand(3, dtype=dtype), mask, rand(2, 4, dtype=dtype)),
            id=f"masked_scatter-broadcast-{_name(dtype)}",
        )
        yield Case(
            "aten::select_scatter.out",
            aten.select_scatter.default,
            (x, rand(5, 7, dtype=dtype), -2, -1),
            id=f"select_scatter-{_name(dtype)}",
        )
        yield Case(
            "aten::slice_scatter.out",
            aten.slice_scatter.default,
            (x, rand(5, 6, 3, dtype=dtype), 2, 1, None, 2),
            id=f"slice_scatter-{_name(dtype)}",
        )
    x = rand(3, 4)
    yield Case(
        "aten::index_put.out",
        _index_put_ref,
        (x, [torch.tensor([0, 1])], rand(2, 4, dtype=F64), False),
        id="index_put-dtypes-differ",
    )
    yield Case(
        "aten::index_put.out",
        _index_put_ref,
        (x, [torch.tensor([0, 3])], rand(2, 4), False),
        id="index_put-out-of-bounds",
    )
    yield Case(
        "aten::index_put.out", _index_put_ref, (x, [torch.tensor([0, 1])], rand(5), False), id="index_put-values-misfit"
    )
    yield Case(
        "aten::index_put.out",
        _index_put_ref,
        (x, [torch.tensor([0, 0])], torch.tensor(2.0), True),
        id="index_put-0d-values",
    )
    yield Case(
        "aten::masked_scatter.out",
        aten.masked_scatter.default,
        (x, rand(3, 4, dtype=B), rand(1)),
        id="masked_scatter-source-too-small",
    )
    yield Case(
        "aten::masked_scatter.out",
        aten.masked_scatter.default,
        (x, rand(3, 4, dtype=U8), rand(12)),
        id="masked_scatter-uint8-mask",
    )
    yield Case(
        "aten::select_scatter.out",
        aten.select_scatter.default,
        (rand(4), torch.tensor(9.0), 0, 2),
        id="select_scatter-1d",
    )
    yield Case(
        "aten::select_scatter.out", aten.select_scatter.default, (x, rand(1, 4), 0, 0), id="select_scatter-misfit"
    )
    yield Case("aten::select_scatter.out", aten.select_scatter.default, (x, rand(4), 0, 3), id="select_scatter-range")
    yield Case(
        "aten::slice_scatter.out",
        aten.slice_scatter.default,
        (x, rand(3, 4, dtype=F64), 0, -100, 100, 1),
        id="slice_scatter-casts",
    )
    yield Case(
        "aten::slice_scatter.out", aten.slice_scatter.default, (x, rand(3), 0, 0, 1, 1), id="slice_scatter-misfit"
    )
    yield Case(
        "aten::slice_scatter.out",
        aten.slice_scatter.default,
        (torch.tensor(1.0), torch.tensor(1.0), 0, 0, 1, 1),
        id="slice_scatter-0d",
    )


# ---- gathers, embeddings, shape copies ---------------------------------------------------


def _embedding_bag_ref(*args):
    return aten._embedding_bag(*args)


def _gather_cases():
    for dtype in ALL:
        x = rand(5, 6, 7, dtype=dtype)
        yield Case(
            "aten::index.Tensor_out", aten.index.Tensor, (x, [None, torch.tensor([1, -1])]), id=f"index-{_name(dtype)}"
        )
        yield Case(
            "aten::index_select.out",
            aten.index_select.default,
            (x, -1, torch.tensor([6, 0, 0])),
            id=f"index_select-{_name(dtype)}",
        )
        yield Case(
            "aten::gather.out",
            lambda s, d, i, sg: aten.gather(s, d, i, sparse_grad=sg),
            (x, 1, torch.from_numpy(_RNG.integers(0, 6, (2, 3, 4))), False),
            id=f"gather-{_name(dtype)}",
        )
        yield Case(
            "aten::masked_fill.Scalar_out",
            aten.masked_fill.Scalar,
            (x, rand(7, dtype=B), 1),
            id=f"masked_fill-{_name(dtype)}",
        )
        yield Case("aten::tril.out", aten.tril.default, (x, -1), id=f"tril-{_name(dtype)}")
        yield Case("aten::flip.out", aten.flip.default, (x, [0, -1]), id=f"flip-{_name(dtype)}")
        yield Case("aten::roll.out", aten.roll.default, (x, [2, -9], [-1, 0]), id=f"roll-{_name(dtype)}")
        yield Case("aten::diagonal_copy.out", aten.diagonal_copy.default, (x, 1, -1, 0), id=f"diagonal-{_name(dtype)}")
        yield Case(
            "aten::as_strided_copy.out",
            aten.as_strided_copy.default,
            (x, [3, 4], [7, 2], 5),
            id=f"as_strided-{_name(dtype)}",
        )
        yield Case(
            "aten::slice_copy.Tensor_out", aten.slice_copy.Tensor, (x, -1, 1, None, 3), id=f"slice-{_name(dtype)}"
        )
        yield Case("aten::cat.out", aten.cat.default, ([x, x[:2]], 0), id=f"cat-{_name(dtype)}")
        yield Case("aten::constant_pad_nd.out", aten.constant_pad_nd.default, (x, [1, -2], 0), id=f"pad-{_name(dtype)}")
        yield Case("aten::permute_copy.out", aten.permute_copy.default, (x, [2, 0, 1]), id=f"permute-{_name(dtype)}")
        yield Case(
            "aten::embedding.out",
            aten.embedding.default,
            (x[0], torch.tensor([[1, 5], [0, 0]]), -1, False, False),
            id=f"embedding-{_name(dtype)}",
        )
        yield Case(
            "aten::_to_copy.out",
            lambda s, nb, m, d=dtype: aten._to_copy(s, dtype=d),
            (rand(3, 4, low=0.0), False, None),  # C leaves eager's -1.5 -> uint8 undefined
            id=f"to_copy-{_name(dtype)}",
        )
    x = rand(2, 3, 4)
    for dims in [[], [1], [-1, 0, 1]]:
        yield Case("aten::flip.out", aten.flip.default, (x, dims), id=f"flip-{dims}")
    yield Case("aten::flip.out", aten.flip.default, (x, [0, -3]), id="flip-repeated")
    yield Case("aten::flip.out", aten.flip.default, (torch.tensor(3.0), [0]), id="flip-0d")
    for shifts, dims in [([5], []), ([1], [1]), ([-1, 2], [2, 0]), ([1, 2], [0])]:
        yield Case("aten::roll.out", aten.roll.default, (x, shifts, dims), id=f"roll-{shifts}-{dims}")
    yield Case("aten::roll.out", aten.roll.default, (rand(0, 3), [2], [0]), id="roll-empty")
    yield Case("aten::roll.out", aten.roll.default, (torch.tensor(3.0), [1], [0]), id="roll-0d")
    for offset, dim1, dim2 in [(0, 0, 1), (-1, 2, 1), (5, 0, 2), (0, 1, -2)]:
        yield Case(
            "aten::diagonal_copy.out",
            aten.diagonal_copy.default,
            (x, offset, dim1, dim2),
            id=f"diagonal-{offset}-{dim1}-{dim2}",
        )
    flat = torch.arange(12.0)
    for size, stride, offset in [
        ([2, 2], [1, 2], 1),
        ([3, 2], [0, 5], None),
        ([0, 2], [100, 2], 30),
        ([], [], 4),
        ([2, 2], [1, 2], 10),
        ([2], [-1], 3),
    ]:
        yield Case(
            "aten::as_strided_copy.out",
            aten.as_strided_copy.default,
            (flat, size, stride, offset),
            id=f"as_strided-{size}-{stride}-{offset}",
        )
    weight = rand(6, 3)
    yield Case(
        "aten::embedding_dense_backward.out",
        aten.embedding_dense_backward.default,
        (rand(2, 3, 3), torch.tensor([[0, 1, 1], [2, 4, 1]]), 6, 1, False),
        id="embedding_backward",
    )
    for dtype in [F16, BF16, F32, F64]:
        yield Case(
            "aten::embedding_dense_backward.out",
            aten.embedding_dense_backward.default,
            (rand(4, 3, dtype=dtype), torch.tensor([0, 5, 5, 2]), 6, -1, True),
            **_tol(dtype),
            id=f"embedding_backward-freq-{_name(dtype)}",
        )
    indices = torch.tensor([1, 2, 4, 5, 4, 3, 2, 0])
    for dtype in [F16, BF16, F32, F64]:
        for mode in (0, 1, 2):
            for last, offsets in [(False, [0, 2, 2, 5]), (True, [0, 2, 2, 5, 8])]:
                for padding_idx in (-1, 2):
                    args = (
                        weight.to(dtype),
                        indices,
                        torch.tensor(offsets),
                        False,
                        mode,
                        False,
                        None,
                        last,
                        padding_idx,
                    )
                    yield Case(
                        "aten::_embedding_bag.out",
                        _embedding_bag_ref,
                        args,
                        **_tol(dtype),
                        id=f"embedding_bag-{mode}-{last}-{padding_idx}-{_name(dtype)}",
                    )
    yield Case(
        "aten::_embedding_bag.out",
        _embedding_bag_ref,
        (weight, indices.int(), torch.tensor([0, 3], dtype=I32), False, 0, False, rand(8), False, -1),
        id="embedding_bag-weighted-int32",
    )
    yield Case(
        "aten::_embedding_bag.out",
        _embedding_bag_ref,
        (weight, indices, torch.tensor([0, 3]), False, 1, False, rand(8), False, -1),
        id="embedding_bag-weighted-mean",
    )
    yield Case(
        "aten::_embedding_bag.out",
        _embedding_bag_ref,
        (weight, indices + 1, torch.tensor([0, 3]), False, 0, False, None, False, -1),
        id="embedding_bag-out-of-range",
    )


# ---- creation and random -----------------------------------------------------------------


def _shape_and_dtype(got, want):
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype


def _creation_cases():
    for dtype in ALL:
        yield Case(
            "aten::empty.out",
            lambda size, m, d=dtype: aten.empty.memory_format(size, dtype=d),
            ([2, 3], None),
            compare=_shape_and_dtype,
            id=f"empty-{_name(dtype)}",
        )
        yield Case(
            "aten::empty_strided.out",
            lambda size, s, d=dtype: aten.empty_strided(size, s, dtype=d),
            ([2, 3], [3, 1]),
            compare=_shape_and_dtype,
            id=f"empty_strided-{_name(dtype)}",
        )
        yield Case(
            "aten::native_dropout.out",
            aten.native_dropout.default,
            (rand(3, 4, dtype=dtype), 0.5, False),
            id=f"dropout-eval-{_name(dtype)}",
        )
        yield Case(
            "aten::full.out",
            lambda size, v, d=dtype: aten.full(size, v, dtype=d),
            ([2, 3], 1),
            id=f"full-{_name(dtype)}",
        )
        if dtype != B:  # torch refuses, and the harness needs a tensor argument to check that the kernel does
            yield Case(
                "aten::arange.start_out",
                lambda s, e, st, d=dtype: aten.arange.start_step(s, e, st, dtype=d),
                (0, 5, 1),
                id=f"arange-{_name(dtype)}",
            )


CASES = [
    *_reduction_cases(),
    *_reduction_extra_cases(),
    *_distance_cases(),
    *_scatter_cases(),
    *_write_cases(),
    *_gather_cases(),
    *_creation_cases(),
]


def _groups(cases):
    """Cases grouped by the first two fields of their id (op and dtype, mostly): one test each."""
    groups = {}
    for case in cases:
        groups.setdefault("-".join(case.id.split("-")[:2]), []).append(case)
    return [pytest.param(group, id=key) for key, group in groups.items()]


@pytest.mark.parametrize("cases", _groups(CASES))
def test_kernel(cases):
    for case in cases:
        try:
            _run(case)
        except Exception as error:
            raise AssertionError(f"case {case.id} failed: {error}") from error


DYNAMIC = (
    [
        Case(
            "aten::nonzero.out",
            aten.nonzero.default,
            (_with_nan(rand(3, 4, 5, dtype=dtype, low=-1, high=1)),),
            id=f"nonzero-{_name(dtype)}",
        ).param()
        for dtype in ALL
    ]
    + [
        Case("aten::nonzero.out", aten.nonzero.default, (x,), id=f"nonzero-{tag}").param()
        for tag, x in [
            ("0d", torch.tensor(3.0)),
            ("0d-zero", torch.tensor(0.0)),
            ("empty", rand(2, 0)),
            ("nan-and-negative-zero", torch.tensor([0.0, NAN, -0.0])),
        ]
    ]
    + [
        Case(
            "aten::masked_select.out",
            aten.masked_select.default,
            (rand(3, 4, dtype=dtype), rand(4, dtype=B)),
            id=f"masked_select-{_name(dtype)}",
        ).param()
        for dtype in ALL
    ]
    + [
        Case(
            "aten::masked_select.out",
            aten.masked_select.default,
            (rand(4), rand(2, 4, dtype=B)),
            id="masked_select-broadcast-self",
        ).param(),
        Case(
            "aten::masked_select.out",
            aten.masked_select.default,
            (rand(4), rand(4, dtype=U8)),
            id="masked_select-uint8-mask",
        ).param(),
    ]
)


@pytest.mark.parametrize("case", DYNAMIC)
def test_data_dependent(case):
    _run_dynamic(case)


def test_data_dependent_outputs_use_the_runtime_allocator():
    requests = []

    def allocator(shape, dtype):
        requests.append((shape, dtype))
        return np.empty(shape, dtype)

    token = use_allocator(allocator)
    try:
        result = get_kernel("aten::nonzero.out").fn(np.array([[0, 1], [2, 0]], np.int32), None)
    finally:
        reset_allocator(token)
    assert requests == [((2, 2), np.dtype(np.int64))]
    np.testing.assert_array_equal(result, [[0, 1], [1, 0]])


RANDOM_DTYPES = [F16, BF16, F32, F64]


@pytest.mark.parametrize("dtype", RANDOM_DTYPES, ids=_name)
def test_rand_and_randn_statistics(dtype):
    random_kernels.manual_seed(0)
    uniform = np.empty((200, 100), numpy_dtype_of(dtype))
    get_kernel("aten::rand.out").fn([200, 100], uniform)
    values = uniform.astype(np.float64)
    assert values.min() >= 0 and values.max() < 1
    assert abs(values.mean() - 0.5) < 0.01 and abs(values.std() - 12**-0.5) < 0.01
    normal = np.empty((200, 100), numpy_dtype_of(dtype)).T  # a non-contiguous out
    get_kernel("aten::randn.out").fn([100, 200], normal)
    values = normal.astype(np.float64)
    assert abs(values.mean()) < 0.03 and abs(values.std() - 1) < 0.03


@pytest.mark.parametrize("dtype", ALL, ids=_name)
def test_random_kernels_refuse_what_torch_refuses(dtype):
    out = np.empty((3,), numpy_dtype_of(dtype))
    for op in ["aten::rand.out", "aten::randn.out"]:
        if dtype.is_floating_point:
            get_kernel(op).fn([3], out)
        else:
            with pytest.raises(RuntimeError):
                torch.empty(3, dtype=dtype).uniform_() if op == "aten::rand.out" else torch.randn(3, dtype=dtype)
            with pytest.raises(KernelError):
                get_kernel(op).fn([3], out)


@pytest.mark.parametrize("dtype", [d for d in ALL if d != B], ids=_name)
def test_randperm_is_a_permutation(dtype):
    n = 100
    out = np.empty((n,), numpy_dtype_of(dtype))
    get_kernel("aten::randperm.out").fn(n, out)
    np.testing.assert_array_equal(np.sort(out.astype(np.float64)), np.arange(n))
    assert torch.randperm(n, dtype=dtype).shape == (n,)


@pytest.mark.parametrize("dtype,n", [(B, 3), (U8, 300), (I8, 200), (F16, 2050), (BF16, 300)])
def test_randperm_refuses_values_the_dtype_cannot_hold(dtype, n):
    with pytest.raises(KernelError):
        get_kernel("aten::randperm.out").fn(n, np.empty((n,), numpy_dtype_of(dtype)))


@pytest.mark.parametrize("dtype", RANDOM_DTYPES, ids=_name)
@pytest.mark.parametrize("p", [0.0, 0.3, 1.0])
def test_dropout_in_training(dtype, p):
    x = rand(100, 100, dtype=F32, low=1.0, high=2.0).to(dtype)
    out, mask = np.empty((100, 100), numpy_dtype_of(dtype)), np.empty((100, 100), np.bool_)
    get_kernel("aten::native_dropout.out").fn(to_kernel_arg(x), p, True, out, mask)
    torch_out, torch_mask = aten.native_dropout(x, p, True)
    assert torch_out.shape == out.shape and torch_mask.dtype == torch.bool
    assert abs(mask.mean() - (1 - p)) < 0.03
    scale = 0.0 if p == 1 else 1 / (1 - p)
    want = to_numpy(x).astype(np.float32) * mask * scale
    tol = LOW_PRECISION.get(dtype, 1e-6)
    np.testing.assert_allclose(out.astype(np.float32), want, rtol=tol, atol=tol)


def test_dropout_refuses_integers():
    with pytest.raises(KernelError):
        get_kernel("aten::native_dropout.out").fn(np.arange(4), 0.5, True, np.empty(4), np.empty(4, bool))
