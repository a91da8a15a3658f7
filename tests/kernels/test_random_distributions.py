"""Random distribution kernels (random_distributions.py, random_integers.py) against eager.

Their numbers cannot equal eager's (another generator), so the tests check what must
agree: output shapes and dtypes as eager's, values inside the distribution's support,
moments of 1e5 draws within a few standard errors (a fixed seed keeps them
deterministic), and the same parameter errors as eager.
"""

import math

import numpy as np
import pytest
import torch

from torchedge.errors import KernelError
from torchedge.exir import to_edge
from torchedge.exir.dtypes import numpy_dtype_of, to_numpy
from torchedge.kernels.portable.random import manual_seed
from torchedge.kernels.registry import get_kernel, output_shapes
from torchedge.runtime import Runtime

F16, BF16, F32, F64 = torch.float16, torch.bfloat16, torch.float32, torch.float64
FLOATS = [F16, BF16, F32, F64]
INTS = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]
N = 100_000


@pytest.fixture(autouse=True)
def _seed():
    manual_seed(20261123)


def run(op: str, args: list, dtype) -> np.ndarray:
    """Size the out with the operator's shape function, run the kernel, return the out."""
    probe = [*args, np.empty(0, numpy_dtype_of(dtype))]
    (shape,) = output_shapes(op, probe)
    out = np.empty(shape, numpy_dtype_of(dtype))
    get_kernel(op).fn(*args, out)
    return out


def as_f64(a: np.ndarray) -> np.ndarray:
    return np.asarray(a.astype(np.float32) if a.dtype.name == "bfloat16" else a, dtype=np.float64)


def assert_moments(x: np.ndarray, mean: float, var: float, fourth_central: float, k: float = 5.0):
    """Sample mean and variance within k standard errors of the distribution's."""
    x = as_f64(x).reshape(-1)
    n = x.size
    assert abs(x.mean() - mean) <= k * math.sqrt(var / n), (x.mean(), mean)
    assert abs(x.var() - var) <= k * math.sqrt((fourth_central - var**2) / n), (x.var(), var)


def assert_fraction(hits: np.ndarray, p: float, k: float = 5.0):
    n = hits.size
    assert abs(hits.mean() - p) <= k * math.sqrt(p * (1 - p) / n) + 1e-12, (hits.mean(), p)


X = torch.zeros(3, 4)  # a self whose shape the *_like ops and in-place fills copy


# -- shapes and dtypes as eager, values in the support ------------------------------------------

# name, eager(dtype) -> tensor, operator, kernel args before generator-free out, support
SUPPORT_CASES = [
    (
        "uniform",
        lambda d: torch.zeros(3, 4, dtype=d).uniform_(-2, 3),
        "aten::uniform.out",
        lambda s: [s, -2.0, 3.0, None],
        lambda v: (v >= -2) & (v <= 3),
    ),
    (
        "rand_like",
        lambda d: torch.rand_like(torch.zeros(3, 4, dtype=d)),
        "aten::rand_like.out",
        lambda s: [s, None],
        lambda v: (v >= 0) & (v < 1),
    ),
    (
        "randn_like",
        lambda d: torch.randn_like(torch.zeros(3, 4, dtype=d)),
        "aten::randn_like.out",
        lambda s: [s, None],
        np.isfinite,
    ),
    (
        "normal_out",
        lambda d: torch.zeros(3, 4, dtype=d).normal_(1, 2),
        "aten::normal.out",
        lambda s: [s, 1.0, 2.0, None],
        np.isfinite,
    ),
    (
        "exponential",
        lambda d: torch.zeros(3, 4, dtype=d).exponential_(2),
        "aten::exponential.out",
        lambda s: [s, 2.0, None],
        lambda v: v >= 0,
    ),
    (
        "cauchy",
        lambda d: torch.zeros(3, 4, dtype=d).cauchy_(1, 2),
        "aten::cauchy.out",
        lambda s: [s, 1.0, 2.0, None],
        lambda v: ~np.isnan(v),
    ),
    (
        "log_normal",
        lambda d: torch.zeros(3, 4, dtype=d).log_normal_(0, 0.5),
        "aten::log_normal.out",
        lambda s: [s, 0.0, 0.5, None],
        lambda v: v >= 0,
    ),
    (
        "geometric",
        lambda d: torch.zeros(3, 4, dtype=d).geometric_(0.5),
        "aten::geometric.out",
        lambda s: [s, 0.5, None],
        lambda v: (v >= 1) & (v == np.round(v)),
    ),
    (
        "poisson",
        lambda d: torch.poisson(torch.full((3, 4), 3.0, dtype=d)),
        "aten::poisson.out",
        lambda s: [s + 3, None],
        lambda v: (v >= 0) & (v == np.round(v)),
    ),
    (
        "bernoulli_p",
        lambda d: torch.bernoulli(torch.zeros(3, 4, dtype=d), 0.3),
        "aten::bernoulli.float_out",
        lambda s: [s, 0.3, None],
        lambda v: (v == 0) | (v == 1),
    ),
    (
        "randint_like",
        lambda d: torch.randint_like(torch.zeros(3, 4, dtype=d), 7),
        "aten::randint_like.out",
        lambda s: [s, 7, None],
        lambda v: (v >= 0) & (v < 7) & (v == np.round(v)),
    ),
    (
        "randint_like_low",
        lambda d: torch.randint_like(torch.zeros(3, 4, dtype=d), 2, 9),
        "aten::randint_like.low_dtype_out",
        lambda s: [s, 2, 9, None],
        lambda v: (v >= 2) & (v < 9),
    ),
    (
        "random",
        lambda d: torch.zeros(3, 4, dtype=d).random_(),
        "aten::random.out",
        lambda s: [s, None],
        lambda v: v >= 0,
    ),
    (
        "random_to",
        lambda d: torch.zeros(3, 4, dtype=d).random_(5),
        "aten::random.to_out",
        lambda s: [s, 5, None],
        lambda v: (v >= 0) & (v < 5),
    ),
    (
        "random_from",
        lambda d: torch.zeros(3, 4, dtype=d).random_(1, 6),
        "aten::random.from_out",
        lambda s: [s, 1, 6, None],
        lambda v: (v >= 1) & (v < 6),
    ),
]


def _eager_dtypes(name):
    """The dtypes eager accepts for the case (bool takes no bound above 1)."""
    if name in ("bernoulli_p", "random"):
        return [*FLOATS, *INTS, torch.bool]
    if name in ("geometric", "randint_like", "randint_like_low", "random_to", "random_from"):
        return [*FLOATS, *INTS]
    return FLOATS


@pytest.mark.parametrize(("name", "eager", "op", "args", "support"), SUPPORT_CASES, ids=[c[0] for c in SUPPORT_CASES])
def test_shape_dtype_and_support_as_eager(name, eager, op, args, support):
    for dtype in _eager_dtypes(name):
        expected = eager(dtype)
        self = to_numpy(torch.zeros(3, 4, dtype=dtype))
        got = run(op, args(self), expected.dtype)
        assert got.shape == tuple(expected.shape) and got.dtype == to_numpy(expected).dtype, (name, dtype)
        assert np.all(support(as_f64(got))), (name, dtype, got)


def test_factory_shapes_and_dtypes_as_eager():
    for dtype in [torch.int64, torch.int8, torch.uint8, torch.bool, *FLOATS]:
        high = 2 if dtype == torch.bool else 5
        want = torch.randint(high, (2, 3), dtype=dtype)
        got = run("aten::randint.out", [high, (2, 3)], want.dtype)
        assert got.shape == (2, 3) and got.dtype == to_numpy(want).dtype
        assert np.all((as_f64(got) >= 0) & (as_f64(got) < high))
        low = 0 if dtype in (torch.bool, torch.uint8) else -3
        got = run("aten::randint.low_out", [low, high, (4, 0, 2)], dtype)
        assert got.shape == tuple(torch.randint(low, high, (4, 0, 2), dtype=dtype).shape)
    for dtype in FLOATS:
        want = torch.normal(1.0, 2.0, (2, 5), dtype=dtype)
        got = run("aten::normal.float_float_out", [1.0, 2.0, (2, 5), None], dtype)
        assert got.shape == tuple(want.shape) and got.dtype == to_numpy(want).dtype
    mean, std = torch.zeros(3, 1, dtype=F64), torch.ones(4, dtype=F64)
    want = torch.normal(mean, std)
    got = run("aten::normal.Tensor_Tensor_out", [to_numpy(mean), to_numpy(std), None], want.dtype)
    assert got.shape == tuple(want.shape) == (3, 4)
    want = torch.normal(0.0, torch.ones(2))
    assert run("aten::normal.float_Tensor_out", [0.0, to_numpy(torch.ones(2)), None], F32).shape == tuple(want.shape)
    got = run("aten::normal.Tensor_float_out", [to_numpy(torch.zeros(2, 3, dtype=F16)), 1.0, None], F16)
    assert got.shape == (2, 3)
    for probs, k, replacement in [(torch.ones(5), 3, False), (torch.ones(2, 5), 7, True), (torch.ones(0, 3), 2, False)]:
        want = torch.multinomial(probs, k, replacement)
        got = run("aten::multinomial.out", [to_numpy(probs), k, replacement, None], want.dtype)
        assert got.shape == tuple(want.shape) and got.dtype == np.int64


def test_randint_like_tensor_bound():
    got = run("aten::randint_like.Tensor_out", [to_numpy(X), np.array(4), None], F32)
    assert got.shape == (3, 4) and np.all((got >= 0) & (got < 4))


# -- statistics of 1e5 draws ------------------------------------------------------------------

SELF = np.zeros((N,))


@pytest.mark.parametrize("dtype", [F32, F64])
def test_continuous_moments(dtype):
    lo, hi = -2.0, 3.0
    w = hi - lo
    assert_moments(run("aten::uniform.out", [SELF, lo, hi, None], dtype), 0.5, w**2 / 12, w**4 / 80)
    assert_moments(run("aten::rand_like.out", [SELF, None], dtype), 0.5, 1 / 12, 1 / 80)
    assert_moments(run("aten::randn_like.out", [SELF, None], dtype), 0.0, 1.0, 3.0)
    assert_moments(run("aten::normal.out", [SELF, 1.5, 2.0, None], dtype), 1.5, 4.0, 3 * 16.0)
    assert_moments(run("aten::normal.float_float_out", [1.5, 0.5, (N,), None], dtype), 1.5, 0.25, 3 * 0.0625)
    lam = 2.5
    assert_moments(run("aten::exponential.out", [SELF, lam, None], dtype), 1 / lam, 1 / lam**2, 9 / lam**4)
    logs = np.log(as_f64(run("aten::log_normal.out", [SELF, 0.5, 0.75, None], dtype)))
    assert_moments(logs, 0.5, 0.75**2, 3 * 0.75**4)
    c = as_f64(run("aten::cauchy.out", [SELF, 1.0, 2.0, None], dtype))
    assert_fraction(c < 1.0, 0.5)  # the median
    assert_fraction(c < 3.0, 0.75)  # the quartiles lie one sigma from it
    assert_fraction(c < -1.0, 0.25)


def test_normal_tensor_parameters_broadcast():
    mean = np.array([[-3.0], [4.0]], np.float32)
    std = np.array([0.5, 2.0, 0.0], np.float32)
    draws = np.stack([run("aten::normal.Tensor_Tensor_out", [mean, std, None], F32) for _ in range(4000)])
    assert draws.shape == (4000, 2, 3)
    np.testing.assert_allclose(draws.mean(0), np.broadcast_to(mean, (2, 3)), atol=5 * 2 / math.sqrt(4000))
    np.testing.assert_allclose(draws.std(0), np.broadcast_to(std, (2, 3)), rtol=0.05, atol=1e-12)
    assert np.all(draws[:, :, 2] == mean[:, 0])  # std 0: the mean itself
    x = run("aten::normal.Tensor_float_out", [np.full(N, 2.0), 3.0, None], F64)
    assert_moments(x, 2.0, 9.0, 3 * 81.0)
    x = run("aten::normal.float_Tensor_out", [-1.0, np.full(N, 0.5, np.float32), None], F32)
    assert_moments(x, -1.0, 0.25, 3 * 0.0625)


@pytest.mark.parametrize("dtype", [F32, F64, torch.int64, torch.int16])
def test_geometric_moments(dtype):
    p = 0.3
    x = as_f64(run("aten::geometric.out", [SELF, p, None], dtype))
    assert x.min() >= 1 and np.all(x == np.round(x))
    q = 1 - p
    fourth = q * (p**2 + 9 * q) / p**4  # fourth central moment of the geometric distribution
    assert_moments(x, 1 / p, q / p**2, fourth)


def test_poisson_moments():
    rates = np.repeat(np.array([0.0, 0.5, 7.0, 2e16]), N // 4)
    x = run("aten::poisson.out", [rates, None], F64).reshape(4, -1)
    assert np.all(x[0] == 0)
    assert_moments(x[1], 0.5, 0.5, 0.5 + 3 * 0.25)
    assert_moments(x[2], 7.0, 7.0, 7.0 + 3 * 49.0)
    assert np.all(np.abs(x[3] - 2e16) < 10 * math.sqrt(2e16))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int8, torch.uint8, F32, F16])
def test_integer_draws_are_uniform_over_the_half_open_range(dtype):
    low, high = (0, 10) if dtype == torch.uint8 else (-4, 6)
    x = as_f64(run("aten::randint.low_out", [low, high, (N,)], dtype))
    assert x.min() == low and x.max() == high - 1  # the upper bound is excluded
    k = high - low
    assert_moments(x, (low + high - 1) / 2, (k**2 - 1) / 12, (k**2 - 1) * (3 * k**2 - 7) / 240)
    counts = np.bincount((x - low).astype(np.int64), minlength=k)
    np.testing.assert_allclose(counts / N, 1 / k, atol=5 * math.sqrt(1 / k / N))
    y = as_f64(run("aten::randint.out", [3, (N,)], dtype))
    assert set(np.unique(y)) == {0.0, 1.0, 2.0}


def test_random_defaults_cover_the_dtype():
    x = run("aten::random.out", [np.zeros(N, np.int8), None], torch.int8)
    assert x.min() >= 0 and x.max() == 127 and x.mean() == pytest.approx(63.5, abs=0.5)
    x = run("aten::random.out", [np.zeros(N, np.float16), None], F16)
    assert x.min() >= 0 and x.max() <= 2048 and np.all(x == np.round(x))
    x = run("aten::random.out", [np.zeros(N, bool), None], torch.bool)
    assert_fraction(x, 0.5)
    x = run("aten::random.from_out", [np.zeros(N, np.int8), 100, None, None], torch.int8)
    assert x.min() == 100 and x.max() == 127
    x = run("aten::random.from_out", [np.zeros(N, np.int64), -(2**63), None, None], torch.int64)
    assert x.min() < -(2**61) and x.max() > 2**61  # the whole int64 range
    x = run("aten::random.to_out", [np.zeros(N, np.int16), 3, None], torch.int16)
    assert set(np.unique(x)) == {0, 1, 2}


@pytest.mark.parametrize("dtype", [F32, torch.int32, torch.bool])
def test_bernoulli_p(dtype):
    assert_fraction(as_f64(run("aten::bernoulli.float_out", [SELF, 0.3, None], dtype)) == 1, 0.3)
    assert np.all(as_f64(run("aten::bernoulli.float_out", [SELF[:100], 0.0, None], dtype)) == 0)
    assert np.all(as_f64(run("aten::bernoulli.float_out", [SELF[:100], 1.0, None], dtype)) == 1)


@pytest.mark.parametrize("dtype", [F16, F32, F64])
def test_multinomial_with_replacement_frequencies(dtype):
    weights = to_numpy(torch.tensor([[0.0, 1.0, 3.0, 0.0, 4.0, 0.0], [5.0, 0.0, 0.0, 0.0, 0.0, 5.0]], dtype=dtype))
    x = run("aten::multinomial.out", [weights, N, True, None], torch.int64)
    assert x.shape == (2, N) and x.dtype == np.int64
    for row, w in zip(x, as_f64(weights)):
        p = w / w.sum()
        counts = np.bincount(row, minlength=6) / N
        assert np.all(counts[p == 0] == 0)  # a zero weight is never drawn
        np.testing.assert_allclose(counts, p, atol=5 * math.sqrt(0.25 / N))


def test_multinomial_without_replacement():
    weights = np.array([1.0, 2.0, 0.0, 7.0])
    rows = np.broadcast_to(weights, (N // 2, 4)).copy()
    x = run("aten::multinomial.out", [rows, 3, False, None], torch.int64)
    assert np.all(np.sort(x, axis=1) == [0, 1, 3])  # three distinct categories, never the zero weight
    p = weights / weights.sum()
    counts = np.bincount(x[:, 0], minlength=4) / x.shape[0]
    np.testing.assert_allclose(counts, p, atol=5 * math.sqrt(0.25 / x.shape[0]))
    second_is_0 = sum(p[j] * p[0] / (1 - p[j]) for j in (1, 3))  # P(second draw = 0), drawn in order
    assert_fraction(x[:, 1] == 0, second_is_0)
    one = run("aten::multinomial.out", [np.array([0.0, 0.0, 2.0], np.float32), 1, False, None], torch.int64)
    assert one.tolist() == [2]


def test_multinomial_without_replacement_draws_zero_weights_last_as_eager():
    weights = torch.tensor([[0.0, 1.0, 0.0, 0.0, 3.0]] * 4)
    want = torch.multinomial(weights, 4)  # eager does not refuse: it runs out of positive weights
    got = run("aten::multinomial.out", [to_numpy(weights), 4, False, None], want.dtype)
    assert got.shape == tuple(want.shape)
    assert np.all(np.sort(got[:, :2], axis=1) == [1, 4]) and np.all(np.isin(got[:, 2:], [0, 2, 3]))
    assert np.all(got[:, 2] != got[:, 3])


# -- errors as eager's ----------------------------------------------------------------------

Z = np.zeros(3, np.float32)
ZI = np.zeros(3, np.int64)
ERROR_CASES = [
    (lambda: torch.zeros(3).uniform_(3, 2), "aten::uniform.out", [Z, 3.0, 2.0, None], F32, "from=3.0 > to=2.0"),
    (lambda: torch.zeros(3).uniform_(-3e38, 3e38), "aten::uniform.out", [Z, -3e38, 3e38, None], F32, "to - from"),
    (lambda: torch.zeros(3).uniform_(float("nan"), 1), "aten::uniform.out", [Z, np.nan, 1.0, None], F32, "from is out"),
    (lambda: torch.zeros(3).uniform_(0, float("inf")), "aten::uniform.out", [Z, 0.0, np.inf, None], F32, "to is out"),
    (lambda: torch.zeros(3, dtype=F16).uniform_(0, 1e5), "aten::uniform.out", [Z, 0.0, 1e5, None], F16, "to is out"),
    (
        lambda: torch.zeros(3, dtype=torch.int64).uniform_(),
        "aten::uniform.out",
        [ZI, 0.0, 1.0, None],
        torch.int64,
        "int64",
    ),
    (
        lambda: torch.rand_like(torch.zeros(3, dtype=torch.int64)),
        "aten::rand_like.out",
        [ZI, None],
        torch.int64,
        "int64",
    ),
    (
        lambda: torch.randn_like(torch.zeros(3, dtype=torch.int64)),
        "aten::randn_like.out",
        [ZI, None],
        torch.int64,
        "int64",
    ),
    (lambda: torch.normal(torch.zeros(3), -1.0), "aten::normal.Tensor_float_out", [Z, -1.0, None], F32, "std >= 0.0"),
    (
        lambda: torch.normal(torch.zeros(3), torch.tensor([1.0, float("nan"), 1.0])),
        "aten::normal.Tensor_Tensor_out",
        [Z, np.array([1.0, np.nan, 1.0]), None],
        F32,
        "all elements of std",
    ),
    (
        lambda: torch.normal(0.0, -torch.ones(3)),
        "aten::normal.float_Tensor_out",
        [0.0, -np.ones(3), None],
        F32,
        "all elements of std",
    ),
    (lambda: torch.normal(0.0, -1.0, (2,)), "aten::normal.float_float_out", [0.0, -1.0, (3,), None], F32, "std >= 0.0"),
    (lambda: torch.zeros(3).normal_(0, -1), "aten::normal.out", [Z, 0.0, -1.0, None], F32, "std >= 0.0"),
    (
        lambda: torch.normal(0.0, 1.0, (2,), dtype=torch.int64),
        "aten::normal.float_float_out",
        [0.0, 1.0, (3,), None],
        torch.int64,
        "int64",
    ),
    (lambda: torch.zeros(3).exponential_(0), "aten::exponential.out", [Z, 0.0, None], F32, "lambda > 0.0"),
    (lambda: torch.zeros(3).exponential_(-1), "aten::exponential.out", [Z, -1.0, None], F32, "lambda > 0.0"),
    (
        lambda: torch.zeros(3, dtype=torch.int64).exponential_(1),
        "aten::exponential.out",
        [ZI, 1.0, None],
        torch.int64,
        "floating point",
    ),
    (lambda: torch.zeros(3).cauchy_(0, 0), "aten::cauchy.out", [Z, 0.0, 0.0, None], F32, "sigma > 0.0"),
    (
        lambda: torch.zeros(3, dtype=torch.int64).cauchy_(),
        "aten::cauchy.out",
        [ZI, 0.0, 1.0, None],
        torch.int64,
        "floating point",
    ),
    (lambda: torch.zeros(3).geometric_(0), "aten::geometric.out", [Z, 0.0, None], F32, r"p to be in \(0, 1\)"),
    (lambda: torch.zeros(3).geometric_(1), "aten::geometric.out", [Z, 1.0, None], F32, r"p to be in \(0, 1\)"),
    (
        lambda: torch.zeros(3, dtype=torch.bool).geometric_(0.5),
        "aten::geometric.out",
        [Z > 0, 0.5, None],
        torch.bool,
        "bool",
    ),
    (lambda: torch.zeros(3).log_normal_(1, 0), "aten::log_normal.out", [Z, 1.0, 0.0, None], F32, "std > 0.0"),
    (
        lambda: torch.zeros(3, dtype=torch.int64).log_normal_(),
        "aten::log_normal.out",
        [ZI, 1.0, 2.0, None],
        torch.int64,
        "int64",
    ),
    (lambda: torch.poisson(-torch.ones(3)), "aten::poisson.out", [-np.ones(3, np.float32), None], F32, "non-negative"),
    (
        lambda: torch.poisson(torch.tensor([np.nan])),
        "aten::poisson.out",
        [np.array([np.nan]), None],
        F64,
        "non-negative",
    ),
    (
        lambda: torch.bernoulli(torch.zeros(3), 1.5),
        "aten::bernoulli.float_out",
        [Z, 1.5, None],
        F32,
        r"p to be in \[0, 1\]",
    ),
    (lambda: torch.randint(3, 3, (2,)), "aten::randint.low_out", [3, 3, (2,)], torch.int64, "from=3 >= to=3"),
    (lambda: torch.randint(0, (2,)), "aten::randint.out", [0, (2,)], torch.int64, "from=0 >= to=0"),
    (
        lambda: torch.randint(0, 300, (2,), dtype=torch.int8),
        "aten::randint.low_out",
        [0, 300, (2,)],
        torch.int8,
        "to - 1 is out of bounds",
    ),
    (
        lambda: torch.randint(-5, 200, (2,), dtype=torch.uint8),
        "aten::randint.low_out",
        [-5, 200, (2,)],
        torch.uint8,
        "from is out of bounds",
    ),
    (
        lambda: torch.randint_like(torch.zeros(2, dtype=torch.bool), 3),
        "aten::randint_like.out",
        [Z > 0, 3, None],
        torch.bool,
        "to - 1 is out of bounds",
    ),
    (
        lambda: torch.zeros(3, dtype=torch.float16).random_(0, 70000),
        "aten::random.from_out",
        [Z, 0, 70000, None],
        F16,
        "to - 1 is out of bounds",
    ),
    (
        lambda: torch.zeros(3, dtype=torch.int8).random_(-200, 3),
        "aten::random.from_out",
        [ZI, -200, 3, None],
        torch.int8,
        "from is out of bounds",
    ),
    (
        lambda: torch.zeros(3, dtype=torch.int8).random_(300),
        "aten::random.to_out",
        [ZI, 300, None],
        torch.int8,
        "to - 1 is out of bounds",
    ),
    (
        lambda: torch.multinomial(torch.ones(3), 0),
        "aten::multinomial.out",
        [np.ones(3), 0, False, None],
        torch.int64,
        "n_sample <= 0",
    ),
    (
        lambda: torch.multinomial(torch.ones(3), 4),
        "aten::multinomial.out",
        [np.ones(3), 4, False, None],
        torch.int64,
        "without replacement",
    ),
    (
        lambda: torch.multinomial(torch.tensor([1.0, -1]), 1),
        "aten::multinomial.out",
        [np.array([1.0, -1]), 1, True, None],
        torch.int64,
        "element < 0",
    ),
    (
        lambda: torch.multinomial(torch.tensor([1.0, np.inf]), 1),
        "aten::multinomial.out",
        [np.array([1.0, np.inf]), 1, True, None],
        torch.int64,
        "inf",
    ),
    (
        lambda: torch.multinomial(torch.zeros(3), 1, True),
        "aten::multinomial.out",
        [np.zeros(3), 1, True, None],
        torch.int64,
        "sum of probabilities",
    ),
    (
        lambda: torch.multinomial(torch.ones(3, dtype=torch.int64), 1),
        "aten::multinomial.out",
        [ZI + 1, 1, True, None],
        torch.int64,
        "floating-point",
    ),
    (
        lambda: torch.multinomial(torch.ones(2, 3, 4), 1),
        "aten::multinomial.out",
        [np.ones((2, 3, 4)), 1, True, None],
        torch.int64,
        "1 or 2 dim",
    ),
]


@pytest.mark.parametrize(
    ("eager", "op", "args", "dtype", "message"), ERROR_CASES, ids=[f"{c[1]}-{i}" for i, c in enumerate(ERROR_CASES)]
)
def test_refuses_what_eager_refuses(eager, op, args, dtype, message):
    with pytest.raises((RuntimeError, NotImplementedError)):
        eager()
    out = np.empty(3 if op != "aten::multinomial.out" else 1, numpy_dtype_of(dtype))
    with pytest.raises(KernelError, match=message):
        get_kernel(op).fn(*args, out)
        output_shapes(op, [*args, out])


# -- end to end: export -> to_edge -> to_executorch -> Runtime --------------------------------


class Continuous(torch.nn.Module):
    def forward(self, x):
        return (
            torch.ops.aten.uniform(x, -2.0, 3.0),
            torch.normal(x, x.abs() + 1),
            torch.normal(x, 0.5),
            torch.normal(1.0, x.abs()),
            torch.normal(0.0, 2.0, (2, 5), dtype=torch.float64),
            torch.randn_like(x),
            torch.rand_like(x),
            x.clone().exponential_(2.0),
            x.clone().cauchy_(0.0, 2.0),
            x.clone().log_normal_(0.0, 0.5),
            x.clone().geometric_(0.25),
            torch.poisson(x.abs()),
        )


class Discrete(torch.nn.Module):
    def forward(self, x, w):
        return (
            torch.randint(10, (3, 4)),
            torch.randint(-3, 3, (2, 2), dtype=torch.int8),
            torch.randint_like(x, 10),
            torch.randint_like(x, 3, 10),
            torch.bernoulli(x, 0.3),
            x.clone().random_(),
            x.clone().random_(7),
            torch.multinomial(w, 2),
            torch.multinomial(w, 9, replacement=True),
        )


CONTINUOUS_SUPPORT = [
    lambda v: (v >= -2) & (v <= 3),
    np.isfinite,
    np.isfinite,
    np.isfinite,
    np.isfinite,
    np.isfinite,
    lambda v: (v >= 0) & (v < 1),
    lambda v: v >= 0,
    lambda v: ~np.isnan(v),
    lambda v: v >= 0,
    lambda v: (v >= 1) & (v == np.round(v)),
    lambda v: (v >= 0) & (v == np.round(v)),
]
DISCRETE_SUPPORT = [
    lambda v: (v >= 0) & (v < 10),
    lambda v: (v >= -3) & (v < 3),
    lambda v: (v >= 0) & (v < 10),
    lambda v: (v >= 3) & (v < 10),
    lambda v: (v == 0) | (v == 1),
    lambda v: (v >= 0) & (v <= 2**24),
    lambda v: (v >= 0) & (v < 7),
    lambda v: (v >= 0) & (v < 5) & (v != 1),
    lambda v: (v >= 0) & (v < 5) & (v != 1),
]


@pytest.mark.parametrize(
    ("module", "inputs", "supports"),
    [
        (Continuous(), (torch.randn(3, 4),), CONTINUOUS_SUPPORT),
        (
            Discrete(),
            (torch.randn(3, 4), torch.tensor([[1.0, 0.0, 2.0, 3.0, 1.0], [0.5, 0.0, 0.5, 0.5, 0.5]])),
            DISCRETE_SUPPORT,
        ),
    ],
    ids=["continuous", "discrete"],
)
def test_random_program_runs_with_eager_shapes_and_dtypes(module, inputs, supports):
    program = to_edge(torch.export.export(module, inputs)).to_executorch()
    got = Runtime.get().load_program(program.buffer).load_method("forward").execute([to_numpy(t) for t in inputs])
    want = module(*inputs)
    assert len(got) == len(want) == len(supports)
    for g, w, support in zip(got, want, supports):
        assert g.shape == tuple(w.shape) and g.dtype == to_numpy(w).dtype
        assert np.all(support(as_f64(g)))
    rows = got[-2]
    assert np.all(rows[:, 0] != rows[:, 1])  # without replacement: distinct categories in a row
