"""`aten::fractional_max_pool2d.output` and `aten::fractional_max_pool3d.output` against eager:
exact values and indices over float dtypes (NaN, ties, empty dims), errors, shapes, end to end."""

import numpy as np
import pytest
import torch

from torchedge.errors import KernelError
from torchedge.exir import to_edge
from torchedge.exir.dtypes import to_numpy
from torchedge.kernels.registry import get_kernel, output_shapes
from torchedge.runtime import Runtime

NAMES = {2: "aten::fractional_max_pool2d.output", 3: "aten::fractional_max_pool3d.output"}
EAGER = {2: torch.ops.aten.fractional_max_pool2d, 3: torch.ops.aten.fractional_max_pool3d}
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def _run(dims, x, kernel, size, samples):
    expected, expected_indices = EAGER[dims](x, kernel, size, samples)
    self, random_samples = to_numpy(x), to_numpy(samples)
    output = np.empty(expected.shape, to_numpy(expected).dtype)
    indices = np.empty(expected.shape, np.int64)
    args = [self, tuple(kernel), tuple(size), random_samples, output, indices]
    assert output_shapes(NAMES[dims], args) == [tuple(expected.shape)] * 2
    get_kernel(NAMES[dims]).fn(*args)
    np.testing.assert_array_equal(indices, to_numpy(expected_indices))
    np.testing.assert_array_equal(output.astype(np.float64), to_numpy(expected).astype(np.float64))


def _random_geometry(gen, dims):
    spatial = [int(v) for v in torch.randint(3, 12, (dims,), generator=gen)]
    kernel = [int(torch.randint(1, s, (), generator=gen)) for s in spatial]
    spare = 1 if dims == 2 else 0  # ATen's 3-d check is strict
    size = [max(1, int(torch.randint(1, s - k + 1 + spare, (), generator=gen))) for s, k in zip(spatial, kernel)]
    size = [min(o, s - k + spare) or 1 for o, s, k in zip(size, spatial, kernel)]
    return spatial, kernel, size


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dims", [2, 3])
@pytest.mark.parametrize("seed", range(6))
def test_fractional_max_pool_matches_eager(dims, dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    spatial, kernel, size = _random_geometry(gen, dims)
    x = torch.randn(2, 3, *spatial, generator=gen, dtype=torch.float64)
    if seed % 2:
        x = x.mul(2).round()  # ties: the first maximum wins
    x = x.to(dtype)
    if seed % 3 == 0:
        x.view(-1)[::5] = float("nan")  # the last NaN of a window wins
        x.view(-1)[1::7] = float("-inf")
    samples = torch.rand(2, 3, dims, generator=gen, dtype=torch.float64).to(dtype)
    _run(dims, x, kernel, size, samples)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("dims", [2, 3])
def test_fractional_max_pool_edge_geometry(dims, dtype):
    x = torch.randn(3, *[9] * dims).to(dtype)  # unbatched
    _run(dims, x, [2] * dims, [4] * dims, torch.rand(1, 3, dims).to(dtype))
    _run(dims, x, [3] * dims, [1] * dims, torch.rand(1, 3, dims).to(dtype))  # one output cell
    _run(dims, x, [1] * dims, [8] * dims, torch.rand(1, 3, dims).to(dtype))
    _run(dims, x[None], [2] * dims, [0] + [3] * (dims - 1), torch.rand(1, 3, dims).to(dtype))  # empty output
    _run(dims, x[None], [0] + [2] * (dims - 1), [3] * dims, torch.rand(1, 3, dims).to(dtype))  # empty windows
    _run(dims, torch.empty(0, 3, *[9] * dims, dtype=dtype), [2] * dims, [3] * dims, torch.rand(0, 3, dims).to(dtype))
    batch = torch.randn(2, 3, *[9] * dims).to(dtype)
    _run(dims, batch, [2] * dims, [5] * dims, torch.rand(4, 3, dims).to(dtype))  # extra sample rows
    _run(
        dims,
        batch,
        [2] * dims,
        [5] * dims,
        torch.tensor([0.0, 0.5, 0.999]).reshape(1, 3, 1).expand(2, 3, dims).to(dtype),
    )


@pytest.mark.parametrize(
    ("dims", "shape", "kernel", "size", "samples", "message"),
    [
        (2, (1, 2, 7, 8), [2, 2], [7, 4], (1, 2, 2), "too large"),
        (3, (1, 1, 10, 5, 5), [9, 2, 2], [2, 2, 2], (1, 1, 3), "too large"),
        (2, (2, 2, 7, 8), [2, 2], [3, 3], (1, 2, 2), "batch size"),
        (2, (1, 2, 7, 8), [2, 2], [3, 3], (1, 3, 2), "channel"),
        (2, (1, 2, 7, 8), [2, 2], [3, 3], (1, 2, 3), "size\\(2\\)"),
        (2, (1, 2, 7, 8), [2, 2], [3, 3], (1, 2), "3 dims"),
        (2, (1, 0, 7, 8), [2, 2], [3, 3], (1, 0, 2), "non-empty"),
        (2, (7, 8), [2, 2], [3, 3], (1, 2, 2), "input"),
    ],
)
def test_fractional_max_pool_refuses_what_eager_refuses(dims, shape, kernel, size, samples, message):
    x, r = torch.randn(shape), torch.rand(samples)
    with pytest.raises(RuntimeError):
        EAGER[dims](x, kernel, size, r)
    out = np.empty((1,), np.float32)
    with pytest.raises(KernelError, match=message):
        get_kernel(NAMES[dims]).fn(to_numpy(x), tuple(kernel), tuple(size), to_numpy(r), out, np.empty((1,), np.int64))


def test_fractional_max_pool_refuses_mismatched_dtypes():
    x, r = torch.randn(1, 2, 7, 8), torch.rand(1, 2, 2, dtype=torch.float64)
    with pytest.raises(RuntimeError):
        EAGER[2](x, [2, 2], [3, 3], r)
    with pytest.raises(KernelError, match="dtype"):
        get_kernel(NAMES[2]).fn(
            to_numpy(x),
            (2, 2),
            (3, 3),
            to_numpy(r),
            np.empty((1, 2, 3, 3), np.float32),
            np.empty((1, 2, 3, 3), np.int64),
        )
    with pytest.raises(KernelError, match="not implemented"):
        xi = np.ones((1, 2, 7, 8), np.int64)
        get_kernel(NAMES[2]).fn(xi, (2, 2), (3, 3), xi[:, :, 0, :2], xi[:, :, :3, :3], xi[:, :, :3, :3])


class FractionalPools(torch.nn.Module):
    def forward(self, x, y, r2, r3):
        a, ai = torch.ops.aten.fractional_max_pool2d(x, [2, 3], [4, 3], r2)
        b, bi = torch.ops.aten.fractional_max_pool3d(y, [2, 2, 2], [3, 4, 2], r3)
        pooled = torch.nn.functional.fractional_max_pool2d(x, 3, output_size=(3, 2), _random_samples=r2)
        return a, ai, b, bi, pooled


def test_fractional_max_pool_end_to_end():
    gen = torch.Generator().manual_seed(0)
    inputs = (
        torch.randn(2, 3, 9, 7, generator=gen),
        torch.randn(1, 2, 6, 7, 5, generator=gen),
        torch.rand(2, 3, 2, generator=gen),
        torch.rand(1, 2, 3, generator=gen),
    )
    module = FractionalPools()
    expected = module(*inputs)
    program = to_edge(torch.export.export(module, inputs)).to_executorch()
    got = Runtime.get().load_program(program.buffer).load_method("forward").execute([to_numpy(t) for t in inputs])
    assert len(got) == len(expected)
    for value, want in zip(got, expected):
        np.testing.assert_array_equal(value, to_numpy(want))


@pytest.mark.parametrize("value", [7.0, -3.0, -0.6, 1e6])
@pytest.mark.parametrize("dims", [2, 3])
def test_fractional_max_pool_samples_outside_the_unit_interval(dims, value):
    """ATen does not check the samples; any that keep the windows inside the input work."""
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(1, 2, *[9] * dims, generator=gen)
    _run(dims, x, [2] * dims, [4] * dims, torch.full((1, 2, dims), value))
