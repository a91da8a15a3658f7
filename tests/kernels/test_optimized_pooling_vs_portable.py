"""The optimized max and average pooling against the portable reference, without torch.

Every strategy of `torchedge.kernels.optimized.pooling` is forced through the tuned constants
and checked taken by a spy: maxima over strided views of the input (values only), tap by tap
over the padded layout (values with or without indices, and sums), and the portable blocks
the optimized kernels fall back to. Maxima and indices equal the reference's exactly (nan
included); integer averages too; float averages within a bound on reassociation.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.kernels.oracle import assert_reassociated, random_array
from torchedge.kernels import registry
from torchedge.kernels.optimized import pooling as fast

NEVER_STRIDED = {"pool_strided_taps": 0}
BLOCKS = {"pool_strided_taps": 0, "pool_direct_taps": 0}
# (input shape, kernel, stride, padding, dilation, ceil_mode)
GEOMETRIES = [
    ((2, 3, 9, 10), [2, 2], [2, 2], [0, 0], [1, 1], False),
    ((2, 3, 9, 10), [3, 3], [2, 2], [1, 1], [1, 1], False),
    ((1, 4, 9, 10), [3, 2], [2, 3], [1, 1], [1, 1], True),
    ((2, 2, 11, 9), [3, 3], [2, 2], [1, 0], [2, 2], True),
    ((2, 3, 9, 10), [3, 3], [1, 1], [0, 0], [1, 1], False),
    ((3, 8, 8), [2, 2], [2, 2], [0, 0], [1, 1], False),  # unbatched
    ((1, 2, 6, 7, 8), [2, 2, 2], [2, 2, 2], [0, 0, 0], [1, 1, 1], False),
    ((1, 2, 6, 7, 8), [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1], True),
]
IDS = [str(i) for i in range(len(GEOMETRIES))]
MAX_DTYPES = [np.float32, np.float64, np.float16, np.int32, np.uint8]


@pytest.fixture
def taken(monkeypatch):
    """The tap-by-tap strategies the optimized kernels call."""
    called: list[str] = []
    for name in ("max_values_strided", "max_values_direct", "max_direct", "sum_direct"):
        real = getattr(fast, name)

        def wrapper(*args, real=real, name=name):
            called.append(name)
            return real(*args)

        monkeypatch.setattr(fast, name, wrapper)
    return called


def _input(shape, dtype, nan: bool):
    x = random_array(np.random.default_rng(sum(shape)), shape, dtype)
    if nan and x.dtype.kind == "f":
        x.reshape(-1)[:: max(1, x.size // 5)] = np.nan
    return x


def _max_op(shape, kernel) -> str:
    return f"aten::max_pool{len(kernel)}d_with_indices.out"


def _portable_max(x, geometry):
    op = _max_op(x.shape, geometry[0])
    shape = registry.output_shapes(op, [x, *geometry, None, None])[0]
    values, indices = np.full(shape, 7, x.dtype), np.full(shape, -1, np.int64)
    registry.get_kernel(op, library="portable").fn(x, *geometry, values, indices)
    return values, indices


@pytest.mark.parametrize("nan", [False, True], ids=["finite", "nan"])
@pytest.mark.parametrize("dtype", MAX_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("spec", GEOMETRIES, ids=IDS)
@pytest.mark.parametrize("branch", ["max_direct", "blocks"])
def test_max_pool_with_indices_matches_the_reference(taken, forced, branch, spec, dtype, nan):
    forced(BLOCKS if branch == "blocks" else {})
    x = _input(spec[0], dtype, nan)
    want_values, want_indices = _portable_max(x, spec[1:])
    values, indices = np.full_like(want_values, 7), np.full_like(want_indices, -1)
    registry.get_kernel(_max_op(*spec[:2])).fn(x, *spec[1:], values, indices)
    np.testing.assert_array_equal(values, want_values)
    np.testing.assert_array_equal(indices, want_indices)
    assert taken == ([] if branch == "blocks" else ["max_direct"])


@pytest.mark.parametrize("nan", [False, True], ids=["finite", "nan"])
@pytest.mark.parametrize("dtype", MAX_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("spec", GEOMETRIES, ids=IDS)
@pytest.mark.parametrize("branch", ["max_values_strided", "max_values_direct", "blocks"])
def test_max_pool_values_match_the_reference(taken, forced, branch, spec, dtype, nan):
    forced({"max_values_strided": {}, "max_values_direct": NEVER_STRIDED, "blocks": BLOCKS}[branch])
    x = _input(spec[0], dtype, nan)
    want, _ = _portable_max(x, spec[1:])
    got = np.full_like(want, 7)
    dims = len(spec[1])
    registry.get_kernel("torchedge_fused::max_pool_values.out").fn(x, *spec[1:], dims, got)
    np.testing.assert_array_equal(got, want)
    inside = not any(spec[3]) and all(d == 1 for d in spec[4])
    if branch != "max_values_strided" or inside and not spec[5]:
        assert taken == ([] if branch == "blocks" else [branch])


AVG = [  # input shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override
    ((2, 3, 9, 10), [2, 2], [2, 2], [0, 0], False, True, None),
    ((2, 3, 9, 10), [3, 3], [2, 2], [1, 1], True, False, None),
    ((1, 4, 9, 10), [3, 2], [1, 3], [1, 1], True, True, 5),
    ((1, 2, 6, 7, 8), [3, 3, 3], [2, 2, 2], [1, 1, 1], True, False, None),
    ((2, 3, 11), [3], [2], [1], False, False, None),  # avg_pool1d
]
AVG_DTYPES = [np.float32, np.float64, np.float16, np.int64, np.int32]


@pytest.mark.parametrize("dtype", AVG_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("spec", AVG, ids=[str(i) for i in range(len(AVG))])
@pytest.mark.parametrize("branch", ["sum_direct", "blocks"])
def test_avg_pool_matches_the_reference(taken, forced, branch, spec, dtype):
    forced(BLOCKS if branch == "blocks" else {})
    shape, kernel, *args = spec
    dims = len(kernel)
    op = f"aten::avg_pool{dims}d.out"
    x = random_array(np.random.default_rng(sum(shape)), shape, dtype)
    arguments = [kernel, *args] if dims > 1 else [kernel, *args[:-1]]
    out_shape = registry.output_shapes(op, [x, *arguments, None])[0]
    got, want, bound = np.full(out_shape, 7, dtype), np.full(out_shape, 7, dtype), np.empty(out_shape)
    registry.get_kernel(op).fn(x, *arguments, got)
    registry.get_kernel(op, library="portable").fn(x, *arguments, want)
    registry.get_kernel(op, library="portable").fn(np.abs(x.astype(np.float64)), *arguments, bound)
    assert_reassociated(got, want, bound, math.prod(kernel))
    assert taken == ([] if branch == "blocks" else ["sum_direct"])
