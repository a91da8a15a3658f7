"""torchedge.kernels.dtypes against torch's own promotion rules."""

import itertools

import numpy as np
import pytest
import torch

from torchedge.kernels import dtypes

DTYPES = [
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.float32,
    torch.float64,
]
SCALARS = [True, 3, 2.5]


def _np(dtype: torch.dtype) -> np.dtype:
    return torch.empty(0, dtype=dtype).numpy().dtype


def _operands(kind: str, dtype):
    """The same operand for torch and for dtypes.result_type."""
    if kind == "scalar":
        return dtype, dtype
    shape = (2,) if kind == "dim" else ()
    t = torch.zeros(shape, dtype=dtype)
    return t, np.zeros(shape, _np(dtype))


@pytest.mark.parametrize("a,b", list(itertools.combinations_with_replacement(DTYPES, 2)))
def test_promote_types(a, b):
    assert dtypes.promote_types(_np(a), _np(b)) == _np(torch.promote_types(a, b))


KINDS = [("dim", d) for d in DTYPES] + [("zero", d) for d in DTYPES] + [("scalar", s) for s in SCALARS]


@pytest.mark.parametrize("first", KINDS, ids=str)
def test_result_type(first):
    for second in KINDS:
        (t1, n1), (t2, n2) = _operands(*first), _operands(*second)
        if not isinstance(t1, torch.Tensor) and not isinstance(t2, torch.Tensor):
            continue
        want = _np(torch.result_type(t1, t2) if isinstance(t1, torch.Tensor) else torch.result_type(t2, t1))
        assert dtypes.result_type(n1, n2) == want, (first, second)


def test_result_type_three_operands_and_none():
    a, b = np.zeros(3, np.int32), np.array(1.5, np.float64)
    assert dtypes.result_type(a, b, None, 2) == np.float64
    assert dtypes.float_result_type(np.zeros(2, np.int64), 3) == np.float32


@pytest.mark.parametrize("src,dst", list(itertools.product(DTYPES, DTYPES)))
def test_can_cast(src, dst):
    assert dtypes.can_cast(_np(src), _np(dst)) == torch.can_cast(src, dst)
