"""addmv, addbmm and _trilinear (nn.functional.bilinear) against eager: dtypes, beta == 0
ignoring NaN, broadcast bias, empty operands, errors, shape functions, and end to end."""

import numpy as np
import pytest
import torch

from tests.kernels.harness import run_case_and_shape
from torchedge.errors import KernelError
from torchedge.exir import to_edge
from torchedge.exir.dtypes import to_numpy
from torchedge.kernels.registry import get_kernel
from torchedge.runtime import Runtime

A = torch.ops.aten
DTYPES = [torch.float32, torch.float64, torch.int32, torch.int64, torch.float16, torch.bfloat16]


def _t(*shape, dtype):
    x = torch.randn(shape, dtype=torch.float64) * 3
    return x.to(dtype) if dtype.is_floating_point else x.round().to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("beta", "alpha"), [(1, 1), (0, 2), (2, -1)])
def test_addmv_matches_eager(dtype, beta, alpha):
    torch.manual_seed(0)

    def ref(s, m, v, b, a):
        return A.addmv(s, m, v, beta=b, alpha=a)

    bias = _t(4, dtype=dtype)
    if dtype.is_floating_point:
        bias[0] = float("nan")  # ignored when beta == 0
    run_case_and_shape("aten::addmv.out", ref, bias, _t(4, 6, dtype=dtype), _t(6, dtype=dtype), beta, alpha)
    run_case_and_shape(
        "aten::addmv.out", ref, _t(1, dtype=dtype), _t(4, 6, dtype=dtype), _t(6, dtype=dtype), beta, alpha
    )
    run_case_and_shape(
        "aten::addmv.out", ref, _t(3, dtype=dtype), _t(3, 0, dtype=dtype), _t(0, dtype=dtype), beta, alpha
    )
    run_case_and_shape(
        "aten::addmv.out", ref, _t(0, dtype=dtype), _t(0, 5, dtype=dtype), _t(5, dtype=dtype), beta, alpha
    )


@pytest.mark.parametrize("dtype", DTYPES[:4])
@pytest.mark.parametrize(("beta", "alpha"), [(1, 1), (0, 3), (-2, 2)])
def test_addbmm_matches_eager(dtype, beta, alpha):
    torch.manual_seed(1)

    def ref(s, b1, b2, b, a):
        return A.addbmm(s, b1, b2, beta=b, alpha=a)

    bias = _t(3, 5, dtype=dtype)
    if dtype.is_floating_point:
        bias[0, 0] = float("nan")
    run_case_and_shape("aten::addbmm.out", ref, bias, _t(2, 3, 4, dtype=dtype), _t(2, 4, 5, dtype=dtype), beta, alpha)
    run_case_and_shape(
        "aten::addbmm.out", ref, _t(5, dtype=dtype), _t(2, 3, 4, dtype=dtype), _t(2, 4, 5, dtype=dtype), beta, alpha
    )
    run_case_and_shape(
        "aten::addbmm.out", ref, _t(3, 5, dtype=dtype), _t(0, 3, 4, dtype=dtype), _t(0, 4, 5, dtype=dtype), beta, alpha
    )


def test_products_refuse_what_eager_refuses():
    def mv(s, m, v, b, a):
        return A.addmv(s, m, v, beta=b, alpha=a)

    run_case_and_shape("aten::addmv.out", mv, torch.zeros(4), torch.zeros(4, 5), torch.zeros(6), 1, 1)
    run_case_and_shape(
        "aten::addmv.out", mv, torch.zeros(4), torch.zeros(4, 5), torch.zeros(5, dtype=torch.float64), 1, 1
    )
    run_case_and_shape(
        "aten::addmv.out",
        mv,
        torch.zeros(4, dtype=torch.int64),
        torch.zeros(4, 5, dtype=torch.int64),
        torch.zeros(5, dtype=torch.int64),
        1.7,
        0.5,
    )

    def bmm(s, b1, b2, b, a):
        return A.addbmm(s, b1, b2, beta=b, alpha=a)

    run_case_and_shape("aten::addbmm.out", bmm, torch.zeros(3, 5), torch.zeros(2, 3, 4), torch.zeros(3, 4, 5), 1, 1)
    run_case_and_shape("aten::addbmm.out", bmm, torch.zeros(3, 5), torch.zeros(3, 4), torch.zeros(4, 5), 1, 1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_trilinear_matches_bilinear_and_eager(dtype):
    torch.manual_seed(2)

    def ref(*a):
        return A._trilinear(*a)

    x1, x2, w = _t(4, 3, dtype=dtype), _t(4, 5, dtype=dtype), _t(6, 3, 5, dtype=dtype)
    # the arguments nn.functional.bilinear passes
    run_case_and_shape("aten::_trilinear.out", ref, x1, w, x2, [1, 3], [0], [1, 2], [2, 3], 1)
    run_case_and_shape(
        "aten::_trilinear.out",
        ref,
        _t(2, 4, 3, dtype=dtype),
        w,
        _t(2, 4, 5, dtype=dtype),
        [2, 4],
        [0, 1],
        [2, 3],
        [3, 4],
        1,
    )
    run_case_and_shape(
        "aten::_trilinear.out", ref, _t(0, 3, dtype=dtype), w, _t(0, 5, dtype=dtype), [1, 3], [0], [1, 2], [2, 3], 1
    )
    run_case_and_shape(
        "aten::_trilinear.out",
        ref,
        _t(3, 4, dtype=dtype),
        _t(3, 4, dtype=dtype),
        _t(3, 4, dtype=dtype),
        [],
        [],
        [],
        [],
        1,
    )
    run_case_and_shape(
        "aten::_trilinear.out",
        ref,
        _t(3, 4, dtype=dtype),
        _t(3, 4, dtype=dtype),
        _t(3, 4, dtype=dtype),
        [],
        [],
        [],
        [1],
        1,
    )


@pytest.mark.parametrize("dtype", [np.float16])
def test_16_bit_floats_are_refused_where_rounding_differs(dtype):
    with pytest.raises(KernelError, match="16-bit"):
        get_kernel("aten::addbmm.out").fn(
            np.ones((2, 2), dtype), np.ones((1, 2, 2), dtype), np.ones((1, 2, 2), dtype), 1, 1, np.empty((2, 2), dtype)
        )
    with pytest.raises(KernelError, match="16-bit"):
        x = np.ones((2, 3), dtype)
        get_kernel("aten::_trilinear.out").fn(
            x, np.ones((4, 3, 3), dtype), x, [1, 3], [0], [1, 2], [2, 3], 1, np.empty((2, 4), dtype)
        )


class Products(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bilinear = torch.nn.Bilinear(3, 4, 5)

    def forward(self, x1, x2, bias, mat, vec, b1, b2):
        return (
            self.bilinear(x1, x2),
            torch.addmv(bias, mat, vec, beta=0.5, alpha=2.0),
            torch.addbmm(mat[:, :2], b1, b2, alpha=-1.0),
        )


def test_products_program_matches_eager():
    torch.manual_seed(0)
    model = Products().eval()
    inputs = (
        torch.randn(2, 3),
        torch.randn(2, 4),
        torch.randn(6),
        torch.randn(6, 7),
        torch.randn(7),
        torch.randn(3, 6, 4),
        torch.randn(3, 4, 2),
    )
    program = to_edge(torch.export.export(model, inputs)).to_executorch()
    got = Runtime.get().load_program(program.buffer).load_method("forward").execute([to_numpy(t) for t in inputs])
    with torch.no_grad():
        want = model(*inputs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, to_numpy(w), rtol=1.3e-6, atol=1e-5)
