"""Copies, slicing, indexing and creation kernels against PyTorch."""

import numpy as np
import pytest
import torch

from tests.kernels.harness import Case, rand, run_case

aten = torch.ops.aten
F16, F32, F64, I32, I64, B = torch.float16, torch.float32, torch.float64, torch.int32, torch.int64, torch.bool


def _copy_cases():
    x = rand(2, 3, 4)
    yield Case("aten::view_copy.out", aten.view_copy.default, (x, [4, -1]), id="view").param()
    yield Case("aten::view_copy.out", aten.view_copy.default, (x.transpose(0, 2), [-1]), id="view-noncontig").param()
    yield Case("aten::_unsafe_view.out", aten._unsafe_view.default, (x, [6, 4]), id="unsafe_view").param()
    yield Case("aten::unsqueeze_copy.out", aten.unsqueeze_copy.default, (x, -1), id="unsqueeze").param()
    yield Case("aten::squeeze_copy.dim_out", aten.squeeze_copy.dim, (rand(2, 1, 3), 1), id="squeeze-dim").param()
    yield Case(
        "aten::squeeze_copy.dims_out", aten.squeeze_copy.dims, (rand(1, 2, 1, 3), [0, 1, -2]), id="squeeze-dims"
    ).param()
    yield Case("aten::permute_copy.out", aten.permute_copy.default, (x, [2, 0, 1]), id="permute").param()
    yield Case("aten::permute_copy.out", aten.permute_copy.default, (x, [-1, 1, 0]), id="permute-negative").param()
    yield Case("aten::transpose_copy.int_out", aten.transpose_copy.int, (x, 0, -1), id="transpose").param()
    yield Case("aten::t_copy.out", aten.t_copy.default, (rand(3, 5, dtype=I32),), id="t").param()
    yield Case("aten::t_copy.out", aten.t_copy.default, (rand(5),), id="t-1d").param()
    yield Case(
        "aten::expand_copy.out",
        lambda s, size, i: aten.expand_copy(s, size, implicit=i),
        (rand(3, 1), [2, -1, 4], False),
        id="expand",
    ).param()
    for repeats in [[2, 3], [2, 1, 3], [1, 1], [0, 2]]:
        yield Case(
            "aten::repeat.out", aten.repeat.default, (rand(2, 3, dtype=I64), repeats), id=f"repeat-{repeats}"
        ).param()
    yield Case("aten::repeat.out", aten.repeat.default, (torch.tensor(2.0), [3, 2]), id="repeat-0dim").param()
    for dtype in [F32, I64, B]:
        src = rand(3, 4, dtype=dtype)
        yield Case(
            "aten::clone.out", lambda s, m: aten.clone(s, memory_format=m), (src, None), id=f"clone-{dtype}"
        ).param()
        yield Case("aten::alias_copy.out", aten.alias_copy.default, (src,), id=f"alias-{dtype}").param()
    for src_dtype, dst_dtype in [(F32, I32), (F64, F16), (I64, F32), (F32, B), (B, F32)]:
        src = rand(3, 4, dtype=src_dtype)
        yield Case(
            "aten::_to_copy.out",
            lambda s, nb, m, d=dst_dtype: aten._to_copy(s, dtype=d),
            (src, False, None),
            id=f"to_copy-{src_dtype}-{dst_dtype}",
        ).param()
        yield Case(
            "dim_order_ops::_to_dim_order_copy.out",
            lambda s, nb, order, d=dst_dtype: s.to(d),
            (src, False, [0, 1]),
            id=f"to_dim_order_copy-{src_dtype}-{dst_dtype}",
        ).param()
    yield Case(
        "dim_order_ops::_clone_dim_order.out", lambda s, nb, order: s.clone(), (x, False, None), id="clone_dim_order"
    ).param()
    yield Case(
        "aten::copy.out",
        lambda s, src, nb: aten.copy(s, src, nb),
        (rand(3, 4), rand(4, dtype=I32), False),
        id="copy-broadcast",
    ).param()


def _slicing_cases():
    x = rand(5, 6, 4)
    slices = [
        (0, 1, 4, 1),
        (1, None, None, 2),
        (-1, -3, None, 1),
        (1, -100, 100, 3),
        (0, 4, 2, 1),
        (2, 9223372036854775807, None, 1),
        (1, 2, 9223372036854775807, 1),
    ]
    for i, (dim, start, end, step) in enumerate(slices):
        yield Case(
            "aten::slice_copy.Tensor_out", aten.slice_copy.Tensor, (x, dim, start, end, step), id=f"slice-{i}"
        ).param()
    for dim, index in [(0, 2), (1, -1), (-1, 0)]:
        yield Case(
            "aten::select_copy.int_out", aten.select_copy.int, (x, dim, index), id=f"select-{dim}-{index}"
        ).param()
    yield Case("aten::select_copy.int_out", aten.select_copy.int, (x, 0, 5), id="select-out-of-range").param()
    yield Case("aten::cat.out", aten.cat.default, ([rand(2, 3), rand(4, 3), rand(0, 3)], 0), id="cat-0").param()
    yield Case("aten::cat.out", aten.cat.default, ([rand(2, 3), rand(2, 1)], -1), id="cat-last").param()
    yield Case("aten::cat.out", aten.cat.default, ([rand(2, 3), torch.empty(0)], 0), id="cat-legacy-empty").param()
    yield Case("aten::cat.out", aten.cat.default, ([rand(2, 3, dtype=I32), rand(1, 3)], 0), id="cat-promote").param()
    yield Case(
        "aten::split_with_sizes_copy.out",
        lambda s, sizes, d: list(aten.split_with_sizes_copy(s, sizes, d)),
        (x, [1, 3, 2], 1),
        id="split",
    ).param()
    yield Case(
        "aten::split_with_sizes_copy.out",
        lambda s, sizes, d: list(aten.split_with_sizes_copy(s, sizes, d)),
        (x, [5, 0], -3),
        id="split-empty-piece",
    ).param()
    for pad in [[1, 2], [1, 1, 2, 0], [-1, 2, 0, 1, 1, 1], [0, -2], [2, 1, -3, 0]]:
        for value in [0.0, -1.5]:
            yield Case(
                "aten::constant_pad_nd.out", aten.constant_pad_nd.default, (x, pad, value), id=f"pad-{pad}-{value}"
            ).param()
    yield Case(
        "aten::constant_pad_nd.out", aten.constant_pad_nd.default, (rand(2, 3, dtype=I64), [1, 1], 7), id="pad-int"
    ).param()


def _indexing_cases():
    x = rand(5, 6, 7)
    i1 = torch.tensor([0, 4, -1, 2])
    i2 = torch.tensor([[1], [3]])
    mask = rand(5, 6, dtype=B)
    index_keys = [
        [i1],
        [None, i1],
        [i2, None, torch.tensor([0, 6])],
        [i2, i1.clamp(min=0)],
        [mask],
        [None, None, torch.tensor([True, False, True, True, False, False, True])],
        [i1.int()],
        [torch.tensor([1, 0, 1, 1, 0], dtype=torch.uint8)],
        [torch.tensor(3)],
        [i2, None, torch.tensor([[0, 6, 1]])],
    ]
    for i, key in enumerate(index_keys):
        yield Case("aten::index.Tensor_out", aten.index.Tensor, (x, key), id=f"index-{i}").param()
    for dim, index in [
        (0, torch.tensor([4, 0, 0])),
        (-1, torch.tensor([6, 1])),
        (1, torch.tensor(2)),
        (1, torch.tensor([], dtype=I64)),
    ]:
        yield Case(
            "aten::index_select.out",
            aten.index_select.default,
            (x, dim, index),
            id=f"index_select-{dim}-{index.tolist()}",
        ).param()
    yield Case(
        "aten::index_select.out", aten.index_select.default, (x, 0, torch.tensor([5])), id="index_select-out-of-range"
    ).param()
    gather_index = torch.from_numpy(np.random.default_rng(3).integers(0, 5, (4, 3, 2)))
    for dim in [0, 1, -1]:
        yield Case(
            "aten::gather.out",
            lambda s, d, i, sg: aten.gather(s, d, i, sparse_grad=sg),
            (x, dim, gather_index, False),
            id=f"gather-{dim}",
        ).param()
    weight = rand(10, 4)
    for indices in [torch.tensor([1, 9, 0]), torch.tensor([[2, 2], [3, 0]]), torch.tensor(5)]:
        yield Case(
            "aten::embedding.out",
            aten.embedding.default,
            (weight, indices, -1, False, False),
            id=f"embedding-{indices.ndim}d",
        ).param()
    yield Case(
        "aten::embedding.out",
        aten.embedding.default,
        (weight, torch.tensor([10]), -1, False, False),
        id="embedding-out-of-range",
    ).param()
    for value in [-1e9, 0, True]:
        yield Case(
            "aten::masked_fill.Scalar_out",
            aten.masked_fill.Scalar,
            (rand(3, 4), rand(4, dtype=B), value),
            id=f"masked_fill-{value}",
        ).param()
    yield Case(
        "aten::masked_fill.Scalar_out",
        aten.masked_fill.Scalar,
        (rand(2, 3, dtype=I32), rand(2, 3, dtype=B), 5),
        id="masked_fill-int",
    ).param()
    for diagonal in [0, 1, -1]:
        yield Case("aten::tril.out", aten.tril.default, (rand(2, 4, 5), diagonal), id=f"tril-{diagonal}").param()
    yield Case("aten::tril.out", aten.tril.default, (rand(4, 4, dtype=B), 0), id="tril-bool").param()


def _creation_cases():
    for dtype in [F32, I64, B, F16]:
        yield Case(
            "aten::full.out", lambda size, v, d=dtype: aten.full(size, v, dtype=d), ([2, 3], 1.5), id=f"full-{dtype}"
        ).param()
        yield Case(
            "aten::zeros.out", lambda size, d=dtype: aten.zeros(size, dtype=d), ([3, 2],), id=f"zeros-{dtype}"
        ).param()
        yield Case("aten::ones.out", lambda size, d=dtype: aten.ones(size, dtype=d), ([3],), id=f"ones-{dtype}").param()
        yield Case(
            "aten::scalar_tensor.out",
            lambda s, d=dtype: aten.scalar_tensor(s, dtype=d),
            (3,),
            id=f"scalar_tensor-{dtype}",
        ).param()
    yield Case(
        "aten::full_like.out", lambda s, v, m: aten.full_like(s, v), (rand(2, 3, dtype=I32), 7, None), id="full_like"
    ).param()
    yield Case("aten::fill.Scalar_out", aten.fill.Scalar, (rand(2, 3), -2.5), id="fill").param()
    arange = [
        ((0, 10, 1), I64),
        ((2, 11, 3), I64),
        ((0.5, 3.7, 0.25), F32),
        ((1, -2, -0.5), F64),
        ((0, 5, 1), F32),
        ((-3, 3, 1), I32),
        ((0.1, 1.0, 0.1), F32),
        ((0.5, 5.2, 1.5), I64),
        ((-2.7, 4.0, 2.9), I32),
    ]
    for i, (args, dtype) in enumerate(arange):
        yield Case(
            "aten::arange.start_out",
            lambda s, e, st, d=dtype: aten.arange.start_step(s, e, st, dtype=d),
            args,
            id=f"arange-{i}",
        ).param()
    yield Case("aten::arange.out", lambda e: aten.arange.default(e), (6,), id="arange-end").param()


CASES = [*_copy_cases(), *_slicing_cases(), *_indexing_cases(), *_creation_cases()]


@pytest.mark.parametrize("case", CASES)
def test_shape(case):
    run_case(case)
