"""unbind_copy, new_empty_strided and resize (what resize_/resize_as_ become) against eager, and a
program using them end to end."""

import numpy as np
import pytest
import torch

from torchedge.errors import KernelError
from torchedge.exir import to_edge
from torchedge.exir.dtypes import to_numpy
from torchedge.kernels.registry import get_kernel, output_shapes
from torchedge.runtime import Runtime

DTYPES = [
    torch.bool,
    torch.uint8,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
]


def _values(shape, dtype) -> torch.Tensor:
    x = torch.arange(int(np.prod(shape)), dtype=torch.float64).reshape(shape) - 3
    return x > 0 if dtype == torch.bool else x.abs().to(dtype) if dtype == torch.uint8 else x.to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("shape", "dim"), [((3, 4), 0), ((3, 4), 1), ((2, 3, 4), -1), ((5,), 0), ((0, 3), 1), ((2, 0), 1)]
)
def test_unbind_copy_matches_eager(dtype, shape, dim):
    x = _values(shape, dtype)
    want = torch.unbind_copy(x, dim)
    outs = [np.full(tuple(w.shape), 7, to_numpy(w).dtype) for w in want]
    args = [to_numpy(x), dim, outs]
    assert output_shapes("aten::unbind_copy.int_out", args) == [tuple(w.shape) for w in want]
    get_kernel("aten::unbind_copy.int_out").fn(*args)
    for got, w in zip(outs, want):
        np.testing.assert_array_equal(got, to_numpy(w))


def test_unbind_copy_refuses_bad_dims_and_outs():
    kernel = get_kernel("aten::unbind_copy.int_out").fn
    with pytest.raises(KernelError, match="no dimensions"):
        kernel(np.float32(1) * np.ones(()), 0, [])
    with pytest.raises(KernelError, match="out of range"):
        kernel(np.ones((2, 3)), 2, [])
    with pytest.raises(KernelError, match="expected 2 output tensors"):
        kernel(np.ones((2, 3)), 0, [np.empty(3)])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("size", "stride"), [((2, 3), (3, 1)), ((4,), (2,)), ((), ()), ((0, 5), (5, 1))])
def test_new_empty_strided_has_eager_shape_and_zeros(dtype, size, stride):
    x = _values((2, 2), dtype)
    want = x.new_empty_strided(size, stride)
    out = np.full(tuple(want.shape), 7, to_numpy(want).dtype)
    args = [to_numpy(x), size, stride, out]
    assert output_shapes("aten::new_empty_strided.out", args) == [tuple(want.shape)]
    get_kernel("aten::new_empty_strided.out").fn(*args)
    assert out.dtype == to_numpy(want).dtype
    assert not out.astype(np.float64).any()
    with pytest.raises(KernelError, match="same length"):
        output_shapes("aten::new_empty_strided.out", [to_numpy(x), (2, 3), (1,), out])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("shape", "size"),
    [((2, 6), (3, 4)), ((2, 6), (5,)), ((3, 4), (2, 2, 3)), ((4,), (0,)), ((), (1, 1)), ((2, 3), (4, 3))],
)
def test_resize_matches_eager_where_eager_is_defined(dtype, shape, size):
    x = _values(shape, dtype)
    want = torch.ops.aten.resize(x, size)
    out = np.full(tuple(want.shape), 7, to_numpy(want).dtype)
    args = [to_numpy(x), size, None, out]
    assert output_shapes("aten::resize.out", args) == [tuple(want.shape)]
    get_kernel("aten::resize.out").fn(*args)
    kept = min(x.numel(), want.numel())  # eager leaves the elements after these uninitialised
    np.testing.assert_array_equal(out.reshape(-1)[:kept], to_numpy(want).reshape(-1)[:kept])
    assert not out.reshape(-1)[kept:].astype(np.float64).any()
    with pytest.raises(KernelError, match="negative"):
        output_shapes("aten::resize.out", [to_numpy(x), (-1, 2), None, out])


class Copies(torch.nn.Module):
    def forward(self, x, y):
        rows = torch.unbind_copy(x, 1)
        fresh = x.new_empty_strided((2, 3), (3, 1)).zero_() + 1
        resized = x.clone().resize_as_(y)
        return (*rows, fresh, resized * 2)


def test_copies_program_matches_eager():
    inputs = (torch.randn(4, 3, generator=torch.Generator().manual_seed(0)), torch.zeros(2, 6))
    program = to_edge(torch.export.export(Copies(), inputs)).to_executorch()
    got = Runtime.get().load_program(program.buffer).load_method("forward").execute([to_numpy(t) for t in inputs])
    want = Copies()(*inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == to_numpy(w).dtype and g.shape == tuple(w.shape)
        np.testing.assert_array_equal(g, to_numpy(w))
