"""The optimized ``index_put`` (one cache row written by basic slicing, `cache_rows`) against the
portable kernel, without torch: the same bytes on every call it takes, and the portable kernel's
answer (or error) on every call it leaves to it."""

from __future__ import annotations

import numpy as np
import pytest

from tests.kernels.oracle import random_array
from torchedge.errors import KernelError
from torchedge.kernels.optimized import cache_rows
from torchedge.kernels.registry import get_kernel

OP = "aten::index_put.out"


def _both(self, indices, values, accumulate=False, separate_out=False):
    """(optimized result, portable result), each on its own copy of ``self`` (written in place
    unless ``separate_out``)."""
    results = []
    for library in ("optimized", "portable"):
        target = self.copy()
        out = np.empty_like(self) if separate_out else target
        get_kernel(OP, library=library).fn(target, indices, values, accumulate, out)
        results.append(out)
    return results


def _index(position, dtype=np.int64):
    return np.array([position], dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64])
@pytest.mark.parametrize(
    ("shape", "indices_of"),
    [
        ((1, 3, 8, 4), lambda i: [None, None, i]),  # a transformers static cache: [b, heads, seq, dim]
        ((1, 8, 3, 4), lambda i: [None, i]),  # ExecuTorch's layout: [b, seq, heads, dim]
        ((8, 5), lambda i: [i]),
        ((2, 8, 5), lambda i: [None, i, None]),
    ],
    ids=["bhsd", "bshd", "rows", "trailing-none"],
)
@pytest.mark.parametrize("position", [0, 5, 7, -1, -8])
def test_one_row_is_the_portable_write(shape, indices_of, position, dtype):
    rng = np.random.default_rng(abs(position))
    cache = random_array(rng, shape, dtype)
    indices = indices_of(_index(position))
    axis = next(a for a, i in enumerate(indices) if i is not None)
    values = random_array(rng, shape[:axis] + (1,) + shape[axis + 1 :], dtype)
    assert cache_rows.row_key(cache, indices, values) is not None
    got, want = _both(cache, indices, values)
    np.testing.assert_array_equal(got, want)
    expected = cache.copy()
    np.moveaxis(expected, axis, 0)[position] = np.moveaxis(values, axis, 0)[0]
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize(
    ("indices", "values_shape", "accumulate", "separate_out"),
    [
        ([None, None, np.array([2, 3])], (1, 3, 2, 4), False, False),  # two rows (a prefill)
        ([None, None, _index(2)], (1, 1, 1, 4), False, False),  # values broadcast
        ([None, None, _index(2)], (1, 3, 1, 4), True, False),  # accumulate
        ([None, None, _index(2)], (1, 3, 1, 4), False, True),  # out is not self
        ([None, None, np.array(2)], (1, 3, 4), False, False),  # a 0-d index drops the dimension
        ([None, None, _index(2, np.int32)], (1, 3, 1, 4), False, False),
        ([np.array([0]), None, _index(2)], (1, 3, 4), False, False),  # two index tensors
        ([None, None, np.array([True] + [False] * 7)], (1, 3, 1, 4), False, False),  # a mask
    ],
    ids=["two-rows", "broadcast", "accumulate", "separate-out", "0-d", "int32", "two-indices", "mask"],
)
def test_other_calls_get_the_portable_answer(indices, values_shape, accumulate, separate_out):
    rng = np.random.default_rng(3)
    cache = random_array(rng, (1, 3, 8, 4), np.float32)
    values = random_array(rng, values_shape, np.float32)
    got, want = _both(cache, indices, values, accumulate, separate_out)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("position", [8, -9])
def test_a_position_out_of_range_is_the_portable_error(position):
    cache = np.zeros((1, 3, 8, 4), np.float32)
    values = np.ones((1, 3, 1, 4), np.float32)
    assert cache_rows.row_key(cache, [None, None, _index(position)], values) is None
    errors = []
    for library in ("optimized", "portable"):
        with pytest.raises(KernelError) as error:
            get_kernel(OP, library=library).fn(cache, [None, None, _index(position)], values, False, cache)
        errors.append(str(error.value))
    assert errors[0] == errors[1]
    assert not cache.any()


def test_values_of_another_dtype_are_the_portable_error():
    cache = np.zeros((1, 3, 8, 4), np.float32)
    with pytest.raises(KernelError, match="dtype"):
        get_kernel(OP, library="optimized").fn(cache, [None, None, _index(1)], np.ones((1, 3, 1, 4)), False, cache)
