"""`aten::glu.out` (a kernel ExecuTorch's portable library has) against eager: dtypes, dims, errors."""

import numpy as np
import pytest
import torch

from tests.kernels.harness import TOLERANCES
from torchedge.errors import KernelError
from torchedge.exir.dtypes import to_numpy
from torchedge.kernels.registry import get_kernel, output_shapes

GLU = get_kernel("aten::glu.out").fn


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize(("shape", "dim"), [((4, 6), -1), ((4, 6), 0), ((2, 4, 7), -2), ((2, 4, 5), 1), ((6,), 0)])
def test_glu_matches_eager(dtype, shape, dim):
    torch.manual_seed(0)
    x = torch.randn(shape, dtype=torch.float64).mul(4).to(dtype)
    x.view(-1)[0] = -100  # exp overflows: sigmoid 0, as in ATen
    expected = to_numpy(torch.nn.functional.glu(x, dim))
    self = to_numpy(x)
    out = np.empty(expected.shape, expected.dtype)
    assert output_shapes("aten::glu.out", [self, dim, out]) == [expected.shape]
    GLU(self, dim, out)
    rtol, atol = TOLERANCES[np.dtype(expected.dtype)]
    np.testing.assert_allclose(out.astype(np.float64), expected.astype(np.float64), rtol=rtol, atol=atol)


@pytest.mark.parametrize(
    ("self", "dim", "message"),
    [
        (np.ones((3, 5), np.float32), 1, "even size"),
        (np.ones((), np.float32), 0, "0-dimensional"),
        (np.ones((2, 4), np.int64), 1, "not implemented for dtype int64"),
    ],
)
def test_glu_refuses_what_eager_refuses(self, dim, message):
    with pytest.raises(RuntimeError):
        torch.nn.functional.glu(torch.from_numpy(self), dim)
    with pytest.raises(KernelError, match=message):
        GLU(self, dim, np.empty((2, 2), self.dtype))
