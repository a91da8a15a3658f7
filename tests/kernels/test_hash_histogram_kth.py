"""hash_tensor, histogramdd (its three kernels) and kthvalue's index among ties against PyTorch
eager: dtypes, dims, keepdim, nan and -0.0, values on bin edges, weights, density, empty
inputs and the errors eager raises."""

import math

import numpy as np
import pytest
import torch

from tests.kernels.harness import ALL, BF16, F16, F32, F64, I8, I32, I64, U8, Case, rand, run_case_and_shape

aten = torch.ops.aten
nan, inf = math.nan, math.inf
T = torch.tensor


def _hash(x, dim, keepdim=False, mode=0):
    return aten.hash_tensor.default(x, dim, keepdim=keepdim, mode=mode)


def _hash_case(name, x, dim, keepdim=False, mode=0):
    return Case("aten::hash_tensor.out", _hash, (x, dim, keepdim, mode), id=f"hash-{name}").param()


def _hash_cases():
    for dtype in ALL:
        x = rand(3, 4, 5, dtype=dtype, low=-100, high=100)
        for dim, keepdim in [([], False), ([], True), ([1], False), ([0, 2], True), ([-1, 0], False), ([2], True)]:
            yield _hash_case(f"{dtype}-{dim}-{keepdim}", x, dim, keepdim)
    special = T([[1.0, -0.0, nan, 2.5], [-nan, inf, -inf, 0.0]])
    for dtype in [F16, BF16, F32, F64]:
        yield _hash_case(f"special-{dtype}", special.to(dtype), [1])
    signaling = T([0x7FA00001, 0xFFA00001 - 2**32], dtype=torch.int32).view(torch.float32)
    yield _hash_case("signaling-nan", signaling, [])
    negative = T([[-1, 5, -7], [-(2**40), 3, 2**62]])
    for dtype in [I8, I32, I64, U8]:
        yield _hash_case(f"negative-{dtype}", negative.to(dtype), [1])
    yield _hash_case("bool", T([True, False, True, True]), [])
    yield _hash_case("0dim", T(3.0), [])
    yield _hash_case("0dim-dim", T(3.0), [0], True)
    yield _hash_case("empty-kept-dim", torch.zeros(0, 3), [1])
    yield _hash_case("empty-other", torch.zeros(2, 0), [0], True)
    for name, args in [
        ("empty-all", (torch.zeros(0, 3), [])),
        ("empty-reduced", (torch.zeros(2, 0), [1])),
        ("mode", (rand(3), [], False, 1)),
        ("repeated", (rand(2, 3), [0, 0])),
        ("out-of-range", (rand(2, 3), [2])),
    ]:
        yield _hash_case(f"bad-{name}", *args)


def _bin_edges(x, bins, range=None, weight=None, density=False):
    return aten._histogramdd_bin_edges.default(x, bins, range=range, weight=weight, density=density)


def _from_counts(x, bins, range=None, weight=None, density=False):
    return aten._histogramdd_from_bin_cts.default(x, bins, range=range, weight=weight, density=density)


def _from_edges(x, bins, weight=None, density=False):
    return aten._histogramdd_from_bin_tensors.default(x, bins, weight=weight, density=density)


def _edges_case(name, x, bins, limits=None, weight=None, density=False):
    args = (x, bins, limits, weight, density)
    return Case("aten::_histogramdd_bin_edges.out", _bin_edges, args, id=f"edges-{name}").param()


def _counts_case(name, x, bins, limits=None, weight=None, density=False):
    args = (x, bins, limits, weight, density)
    return Case("aten::_histogramdd_from_bin_cts.out", _from_counts, args, id=f"cts-{name}").param()


def _tensors_case(name, x, bins, weight=None, density=False):
    args = (x, bins, weight, density)
    return Case("aten::_histogramdd_from_bin_tensors.out", _from_edges, args, id=f"tensors-{name}").param()


ON_EDGES = T([[0.0, 0.5], [0.25, 1.0], [0.5, -1.0], [1.0, 0.75], [-0.5, 0.0], [nan, 0.5], [0.75, nan]])


def _histogramdd_cases():
    for dtype in [F32, F64]:
        x = rand(6, 3, dtype=dtype)
        w = rand(6, dtype=dtype)
        for bins, limits in [([2, 3, 4], None), ([1, 1, 1], [-1.0, 1.0, 0.0, 2.0, -3.0, 3.0]), ([5, 2, 3], None)]:
            for weight, density in [(None, False), (w, False), (None, True), (w, True)]:
                tag = f"{dtype}-{bins}-{limits is not None}-{weight is not None}-{density}"
                yield _edges_case(tag, x, bins, limits, weight, density)
                yield _counts_case(tag, x, bins, limits, weight, density)
                edges = list(_bin_edges(x, bins, limits, weight, density))
                yield _tensors_case(tag, x, edges, weight, density)
    # values on interior edges go right, the last bin holds its right edge, nan is not counted
    for bins in [[4, 4], [2, 3], [3, 1]]:
        yield _counts_case(f"on-edges-{bins}", ON_EDGES, bins, [0.0, 1.0, 0.0, 1.0])
    yield _tensors_case("on-edges", ON_EDGES, [T([0.0, 0.25, 0.5, 1.0]), T([-1.0, 0.0, 0.5, 0.75])])
    flat = T([[1.0, 2.0], [1.0, 3.0], [1.0, 4.0]])  # a constant column: its range widens by 0.5 each way
    yield _edges_case("constant", flat, [3, 2])
    yield _counts_case("constant", flat, [3, 2], None, None, True)
    yield _counts_case("3d-weighted", rand(2, 3, 2), [2, 2], None, rand(2, 3))
    empty = torch.zeros(5, 0, 2)
    yield _edges_case("empty", empty, [2, 3])
    yield _counts_case("empty", empty, [2, 3], None, None, True)
    yield _tensors_case("empty", empty, [T([0.0, 1.0]), T([2.0, 3.0, 4.0])])
    for name, args in [
        ("int", (T([[1, 2]]), [2, 2])),
        ("one-dim", (T([1.0, 2.0]), [2])),
        ("bin-count", (rand(3, 2), [2])),
        ("zero-bins", (rand(3, 2), [2, 0])),
        ("range-length", (rand(3, 2), [2, 2], [0.0, 1.0])),
        ("reversed-range", (rand(3, 2), [2, 2], [1.0, 0.0, 0.0, 1.0])),
        ("infinite-range", (rand(3, 2), [2, 2], [0.0, inf, 0.0, 1.0])),
        ("nan-data", (T([[nan, 1.0], [0.0, 2.0]]), [2, 2])),
        ("weight-shape", (rand(3, 2), [2, 2], None, rand(2))),
    ]:
        yield _counts_case(f"bad-{name}", *args)
    yield _tensors_case("bad-count", rand(3, 2), [T([0.0, 1.0])])
    yield _tensors_case("bad-zero-bins", rand(3, 2), [T([0.0, 1.0]), T([2.0])])
    yield _tensors_case("bad-dtype", rand(3, 2), [T([0.0, 1.0]), T([0.0, 1.0], dtype=F64)])


def _tied(shape, dtype, high, seed):
    values = np.random.default_rng(seed).integers(0, high + 1, shape)
    return torch.from_numpy(values).to(dtype)


def _kthvalue_cases():
    """Few distinct values: the index among equal values is the one eager's quickselect leaves."""
    for dtype in [U8, I8, I32, I64, F16, BF16, F32, F64]:
        for seed, (shape, dim) in enumerate([((5, 9), 1), ((7, 4, 3), 0), ((2, 33), -1), ((3, 5, 17), 2)]):
            x = _tied(shape, dtype, high=2 + seed, seed=seed)
            n = shape[dim]
            for k, keepdim in sorted({(1, False), (n, True), ((n + 1) // 2, False), (max(n - 2, 1), True)}):
                yield Case(
                    "aten::kthvalue.values",
                    aten.kthvalue.default,
                    (x, k, dim, keepdim),
                    id=f"kth-{dtype}-{shape}-{k}-{keepdim}",
                ).param()
    nans = T([[nan, 1.0, nan, 1.0, 0.0, nan, -0.0, 0.0], [2.0, nan, nan, 2.0, 2.0, -inf, nan, 2.0]])
    for k in range(1, 9):
        yield Case("aten::kthvalue.values", aten.kthvalue.default, (nans, k, 1, False), id=f"kth-nan-{k}").param()
    same = torch.full((2, 40), 7, dtype=I64)
    for k in [1, 13, 20, 40]:
        yield Case("aten::kthvalue.values", aten.kthvalue.default, (same, k, 1, True), id=f"kth-equal-{k}").param()
    yield Case("aten::kthvalue.values", aten.kthvalue.default, (torch.zeros(0, 3), 2, 1, False), id="kth-empty").param()


@pytest.mark.parametrize("case", [*_hash_cases(), *_histogramdd_cases(), *_kthvalue_cases()])
def test_matches_eager(case):
    run_case_and_shape(case.op, case.ref, *case.args, id=case.id)
