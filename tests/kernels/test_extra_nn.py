"""Adaptive max pooling (2-d, 3-d), grid_sampler_3d and antialiased bilinear/bicubic resizing
against eager: values and ATen's indices, NaN, inf and tie cases, padding modes, empty and
unbatched inputs, errors, shape functions, and programs using them end to end."""

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
FLOATS = [torch.float32, torch.float64]
HALVES = [torch.float16, torch.bfloat16]


def _special(x: torch.Tensor) -> torch.Tensor:
    flat = x.view(-1)
    n = flat.numel()
    flat[: n // 7] = float("nan") if n > 20 else flat[: n // 7]
    flat[n // 3 : n // 3 + 5] = -float("inf")
    flat[n // 2 : n // 2 + 6] = 0.5  # ties: the first maximum wins
    return x[torch.randperm(x.shape[0])] if x.ndim else x


@pytest.mark.parametrize("dtype", FLOATS + HALVES)
@pytest.mark.parametrize(
    ("shape", "size"),
    [
        ((2, 3, 7, 9), (3, 4)),
        ((3, 5, 5), (5, 5)),
        ((1, 2, 6, 4), (8, 3)),
        ((0, 2, 4, 4), (2, 2)),
        ((1, 2, 5, 7), (1, 1)),
        ((1, 1, 4, 4), (0, 2)),
        ((1, 3, 11, 2), (4, 2)),
    ],
)
def test_adaptive_max_pool2d_matches_eager(dtype, shape, size):
    torch.manual_seed(0)
    x = torch.randn(shape, dtype=dtype)

    def ref(s, o):
        return A.adaptive_max_pool2d(s, o)

    run_case_and_shape("aten::adaptive_max_pool2d.out", ref, x, size)
    if x.numel():
        run_case_and_shape("aten::adaptive_max_pool2d.out", ref, _special(x.clone()), size)


@pytest.mark.parametrize("dtype", FLOATS + HALVES)
@pytest.mark.parametrize(
    ("shape", "size"),
    [
        ((2, 3, 5, 7, 4), (2, 3, 2)),
        ((2, 4, 3, 5), (4, 1, 5)),
        ((1, 1, 3, 3, 3), (5, 2, 3)),
        ((0, 1, 2, 2, 2), (1, 1, 1)),
    ],
)
def test_adaptive_max_pool3d_matches_eager(dtype, shape, size):
    torch.manual_seed(1)
    x = torch.randn(shape, dtype=dtype)

    def ref(s, o):
        return A.adaptive_max_pool3d(s, o)

    run_case_and_shape("aten::adaptive_max_pool3d.out", ref, x, size)
    if x.numel():
        run_case_and_shape("aten::adaptive_max_pool3d.out", ref, _special(x.clone()), size)


def test_adaptive_max_pool_refuses_what_eager_refuses():
    def ref2(s, o):
        return A.adaptive_max_pool2d(s, o)

    run_case_and_shape("aten::adaptive_max_pool2d.out", ref2, torch.ones(1, 2, 3, 3, dtype=torch.int64), (2, 2))
    run_case_and_shape("aten::adaptive_max_pool2d.out", ref2, torch.ones(2, 0, 3, 3), (2, 2))
    run_case_and_shape("aten::adaptive_max_pool2d.out", ref2, torch.ones(3, 3), (2, 2))
    run_case_and_shape(
        "aten::adaptive_max_pool3d.out", lambda s, o: A.adaptive_max_pool3d(s, o), torch.ones(1, 2, 0, 3, 3), (2, 2, 2)
    )


class Pools(torch.nn.Module):
    def forward(self, x, y):
        a, ai = torch.nn.functional.adaptive_max_pool2d(x, (3, 2), return_indices=True)
        b, bi = torch.nn.functional.adaptive_max_pool3d(y, (2, 3, 2), return_indices=True)
        return a * 2, ai, b, bi


def test_pools_program_matches_eager():
    torch.manual_seed(0)
    inputs = (torch.randn(2, 3, 7, 5), torch.randn(1, 2, 5, 7, 4))
    program = to_edge(torch.export.export(Pools(), inputs)).to_executorch()
    got = Runtime.get().load_program(program.buffer).load_method("forward").execute([to_numpy(t) for t in inputs])
    want = Pools()(*inputs)
    for g, w in zip(got, want):
        assert g.dtype == to_numpy(w).dtype
        np.testing.assert_allclose(g, to_numpy(w), rtol=1.3e-6, atol=1e-5)


def _grid(n, d, h, w, dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    grid = torch.rand(n, d, h, w, 3, generator=gen, dtype=torch.float64).mul(2.6).sub(1.3).to(dtype)
    flat = grid.view(-1)
    if flat.numel() < 30:
        return grid
    flat[:5] = torch.tensor([float("nan"), float("inf"), -float("inf"), 1e20, -1.0], dtype=dtype)
    flat[10:30] = torch.round(flat[10:30] * 4) / 4  # on voxel centres and half-way points
    return grid


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("mode", [0, 1])
@pytest.mark.parametrize("padding", [0, 1, 2])
@pytest.mark.parametrize("align_corners", [False, True])
def test_grid_sampler_3d_matches_eager(dtype, mode, padding, align_corners):
    torch.manual_seed(2)

    def ref(x, g, m, p, a):
        return A.grid_sampler_3d(x, g, m, p, a)

    x = torch.randn(2, 3, 4, 5, 6, dtype=dtype)
    x[0, 0, 1, 2, 3] = float("nan")
    run_case_and_shape("aten::grid_sampler_3d.out", ref, x, _grid(2, 3, 4, 2, dtype, 0), mode, padding, align_corners)
    run_case_and_shape(
        "aten::grid_sampler_3d.out", ref, x[:, :, :1, :1], _grid(2, 2, 2, 2, dtype, 1), mode, padding, align_corners
    )
    run_case_and_shape("aten::grid_sampler_3d.out", ref, x, _grid(2, 0, 3, 2, dtype, 2), mode, padding, align_corners)


def test_grid_sampler_3d_refuses_what_eager_refuses():
    def ref(x, g, m, p, a):
        return A.grid_sampler_3d(x, g, m, p, a)

    x, grid = torch.randn(1, 2, 3, 3, 3), torch.rand(1, 2, 2, 2, 3)
    run_case_and_shape("aten::grid_sampler_3d.out", ref, x, grid, 2, 0, False)  # bicubic is 2-d only
    run_case_and_shape("aten::grid_sampler_3d.out", ref, x, torch.rand(2, 2, 2, 2, 3), 0, 0, False)
    run_case_and_shape("aten::grid_sampler_3d.out", ref, x, torch.rand(1, 2, 2, 2, 2), 0, 0, False)
    run_case_and_shape("aten::grid_sampler_3d.out", ref, x, grid.double(), 0, 0, False)
    with pytest.raises(KernelError, match="float32 and float64 only"):
        get_kernel("aten::grid_sampler_3d.out").fn(
            np.ones((1, 1, 2, 2, 2), np.float16),
            np.zeros((1, 1, 1, 1, 3), np.float16),
            0,
            0,
            False,
            np.empty((1, 1, 1, 1, 1), np.float16),
        )


AA = {
    "aten::_upsample_bilinear2d_aa.out": A._upsample_bilinear2d_aa,
    "aten::_upsample_bicubic2d_aa.out": A._upsample_bicubic2d_aa,
}


@pytest.mark.parametrize("op", list(AA))
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize(
    ("size", "out_size"),
    [
        ((7, 9), (3, 4)),
        ((5, 5), (11, 13)),
        ((16, 3), (5, 3)),
        ((1, 10), (1, 1)),
        ((30, 17), (4, 29)),
        ((6, 6), (6, 6)),
        ((100, 3), (7, 3)),
    ],
)
@pytest.mark.parametrize("align_corners", [False, True])
def test_antialias_upsample_matches_eager(op, dtype, size, out_size, align_corners):
    torch.manual_seed(3)

    def ref(x, o, a, sh, sw):
        return AA[op].default(x, o, a, sh, sw)

    x = torch.randn(2, 3, *size, dtype=dtype)
    # eager's own float32 result moves by a few ulp with its vector loop's alignment: keep clear of it
    close = {"rtol": 2e-5, "atol": 2e-5}
    run_case_and_shape(op, ref, x, list(out_size), align_corners, None, None, **close)
    # Explicit scales that differ from the sizes' ratio, yet keep every source centre inside the
    # input: past the input's edge eager reads weights it never wrote (NaN or garbage from run to run).
    scale_h, scale_w = (1.1 * o / i for o, i in zip(out_size, size))
    run_case_and_shape(op, ref, x, list(out_size), align_corners, scale_h, scale_w, **close)
    # No NaN input here: which outputs eager's own vector loop makes NaN (taps of weight zero) varies
    # from run to run with memory alignment, so it is no reference.


@pytest.mark.parametrize("op", list(AA))
def test_antialias_upsample_refuses_what_eager_refuses(op):
    def ref(x, o, a, sh, sw):
        return AA[op].default(x, o, a, sh, sw)

    run_case_and_shape(op, ref, torch.randn(1, 1, 4, 4), [0, 2], False, None, None)
    run_case_and_shape(op, ref, torch.ones(1, 1, 4, 4, dtype=torch.int64), [2, 2], False, None, None)
    run_case_and_shape(op, ref, torch.randn(1, 1, 0, 4), [2, 2], False, None, None)
    run_case_and_shape(op, ref, torch.randn(0, 1, 4, 4), [2, 3], False, None, None)


class Sampling(torch.nn.Module):
    def forward(self, volume, grid, image):
        f = torch.nn.functional
        return (
            f.grid_sample(volume, grid, mode="bilinear", padding_mode="reflection", align_corners=False),
            f.grid_sample(volume, grid, mode="nearest", padding_mode="border", align_corners=True),
            f.interpolate(image, size=(5, 7), mode="bilinear", antialias=True),
            f.interpolate(image, scale_factor=0.5, mode="bicubic", antialias=True),
        )


def test_sampling_program_matches_eager():
    torch.manual_seed(0)
    inputs = (torch.randn(1, 2, 4, 5, 6), torch.rand(1, 3, 2, 4, 3) * 2 - 1, torch.randn(1, 3, 12, 10))
    program = to_edge(torch.export.export(Sampling(), inputs)).to_executorch()
    got = Runtime.get().load_program(program.buffer).load_method("forward").execute([to_numpy(t) for t in inputs])
    want = Sampling()(*inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, to_numpy(w), rtol=1.3e-6, atol=1e-5)
