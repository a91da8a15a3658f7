"""`aten::linalg_vector_norm.out` and `aten::dist.out` against eager: orders, dims, dtypes, edges, errors."""

import math

import numpy as np
import pytest
import torch

from tests.kernels.harness import numpy_dtype_of
from tests.kernels.linalg_helpers import check_op
from torchedge.errors import KernelError
from torchedge.exir.dtypes import to_numpy
from torchedge.kernels.registry import get_kernel
from torchedge.schema.scalar_type import scalar_type_of

NORM = "aten::linalg_vector_norm.out"
ORDS = [2, 1, 0, 3, 0.5, -1, -2.5, math.inf, -math.inf]
FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def _input(shape, dtype):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(shape, generator=g, dtype=torch.float64).mul(3)
    if x.numel() > 3:
        x.view(-1)[1] = 0.0
        x.view(-1)[2] = -0.0
    return x.to(dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("ord", ORDS)
@pytest.mark.parametrize(
    ("shape", "dim", "keepdim"),
    [
        ((3, 4, 5), None, False),
        ((3, 4, 5), (1,), False),
        ((3, 4, 5), (0, 2), True),
        ((7,), (-1,), True),
        ((), None, False),
    ],
)
def test_vector_norm_matches_eager(dtype, ord, shape, dim, keepdim):
    x = _input(shape, dtype)
    expected = torch.linalg.vector_norm(x, ord, dim, keepdim)
    check_op(NORM, [to_numpy(x), ord, dim, keepdim, None], expected)


@pytest.mark.parametrize("ord", ORDS)
def test_vector_norm_of_nan_inf_and_large_values(ord):
    for dtype in (torch.float32, torch.float64):
        x = torch.tensor(
            [[1.0, math.inf, -2.0], [math.nan, 0.0, 1.0], [1e20, 1e20, 0.0], [1e-30, 0.0, 0.0]], dtype=dtype
        )
        check_op(NORM, [to_numpy(x), ord, (1,), False, None], torch.linalg.vector_norm(x, ord, 1))


@pytest.mark.parametrize(("source", "target"), [(torch.float32, torch.float64), (torch.float16, torch.float32)])
def test_vector_norm_dtype_argument(source, target):
    x = _input((4, 5), source)
    expected = torch.linalg.vector_norm(x, 3, (0,), dtype=target)
    check_op(NORM, [to_numpy(x), 3, (0,), False, int(scalar_type_of(numpy_dtype_of(target)))], expected)


@pytest.mark.parametrize("ord", [2, 0, 1])
def test_vector_norm_of_empty_tensors(ord):
    for shape, dim in [((0, 3), (0,)), ((0, 3), (1,)), ((0,), None), ((2, 0), None)]:
        x = torch.ones(shape)
        check_op(NORM, [to_numpy(x), ord, dim, False, None], torch.linalg.vector_norm(x, ord, dim))


@pytest.mark.parametrize(
    ("x", "ord", "dim", "dtype", "message"),
    [
        (torch.ones(3, dtype=torch.int64), 2, None, None, "floating point or complex"),
        (torch.ones(3, dtype=torch.bool), 2, None, None, "floating point or complex"),
        (torch.ones(0, 3), math.inf, (0,), None, "empty dimension 0"),
        (torch.ones(0, 3), -1, None, None, "the -1 norm"),
        (torch.ones(3, dtype=torch.float64), 2, None, torch.float32, "without narrowing"),
        (torch.ones(3), 2, (1,), None, "out of range"),
    ],
)
def test_vector_norm_refuses_what_eager_refuses(x, ord, dim, dtype, message):
    with pytest.raises((RuntimeError, IndexError)):
        torch.linalg.vector_norm(x, ord, dim, dtype=dtype)
    code = None if dtype is None else int(scalar_type_of(numpy_dtype_of(dtype)))
    with pytest.raises(KernelError, match=message):
        get_kernel(NORM).fn(to_numpy(x), ord, dim, False, code, np.empty((), np.float32))


@pytest.mark.parametrize(
    "dtypes", [(torch.float32, torch.float32), (torch.float64, torch.float32), (torch.float16, torch.float16)]
)
@pytest.mark.parametrize("p", [2, 1, 0, 3.5, -1, math.inf, -math.inf])
def test_dist_matches_eager(dtypes, p):
    a, b = _input((3, 4), dtypes[0]), _input((4,), dtypes[1]).flip(0)
    check_op("aten::dist.out", [to_numpy(a), to_numpy(b), p], torch.dist(a, b, p))


def test_dist_of_empty_and_refused_inputs():
    a = torch.ones(0, 3)
    check_op("aten::dist.out", [to_numpy(a), to_numpy(a), 2], torch.dist(a, a, 2))
    ints = torch.ones(3, dtype=torch.int64)
    with pytest.raises(RuntimeError):
        torch.dist(ints, ints)
    with pytest.raises(KernelError, match="floating point"):
        get_kernel("aten::dist.out").fn(to_numpy(ints), to_numpy(ints), 2, np.empty((), np.int64))
    with pytest.raises(KernelError, match="do not broadcast"):
        get_kernel("aten::dist.out").fn(np.ones(3), np.ones(4), 2, np.empty(()))


@pytest.mark.parametrize("ord", [2, 1, 0, 3, math.inf, -math.inf])
def test_vector_norm_of_complex_inputs_is_real(ord):
    x = torch.tensor([[1 + 1j, -2j, 0j], [3.0 + 0j, 1j, -1 - 1j]], dtype=torch.complex64)
    check_op(NORM, [to_numpy(x), ord, (1,), False, None], torch.linalg.vector_norm(x, ord, 1))
