"""tril_indices / triu_indices against eager, kernel, shape function and end to end."""

import numpy as np
import pytest
import torch

from torchedge.errors import KernelError
from torchedge.exir import to_edge
from torchedge.kernels.registry import get_kernel, output_shapes
from torchedge.runtime import Runtime

CASES = [(0, 0, 0), (1, 1, 0), (3, 3, 0), (4, 6, 1), (6, 4, -2), (5, 5, 10), (5, 5, -10), (2, 7, 3)]


@pytest.mark.parametrize("name", ["tril_indices", "triu_indices"])
@pytest.mark.parametrize("row,col,offset", CASES)
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_matches_eager(name, row, col, offset, dtype):
    want = getattr(torch, name)(row, col, offset, dtype=dtype).numpy()
    op = f"aten::{name}.out"
    out = np.empty(want.shape, want.dtype)
    assert output_shapes(op, [row, col, offset, out]) == [want.shape]
    get_kernel(op).fn(row, col, offset, out)
    np.testing.assert_array_equal(out, want)


def test_negative_sizes_raise():
    with pytest.raises(KernelError, match="row must be non-negative"):
        get_kernel("aten::tril_indices.out").fn(-1, 3, 0, np.empty((2, 0), np.int64))


def test_end_to_end():
    class Lower(torch.nn.Module):
        def forward(self, x):
            rows, cols = torch.tril_indices(4, 4, -1)
            return x[rows, cols] + torch.triu_indices(4, 4, 1).sum()

    x = torch.randn(4, 4)
    method = Runtime.get().load_program(to_edge(torch.export.export(Lower(), (x,))).to_executorch().buffer)
    got = method.load_method("forward").execute([x.numpy()])[0]
    np.testing.assert_allclose(got, Lower()(x).numpy(), rtol=1e-6)
