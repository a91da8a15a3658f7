"""Pooling kernels cost what their input and output sizes justify, and stay exact.

Windows far larger than the input (EfficientNet's ``AvgPool2d(1280, ceil_mode=True)`` over a
5x5 map), huge strides and paddings, wide overlapping windows and many adaptive windows are
compared with PyTorch eager; the memory they allocate (`tracemalloc`, scratch workspaces
included) must stay within a small multiple of their input and output. Both reduction
strategies (the optimized kernels' tap by tap, and the portable one dim at a time in blocks)
run on the same cases, the second by setting the tuned ``pool_direct_taps`` and
``pool_strided_taps`` to 0. The backward kernels (and col2im, which shares the scatter of
average pooling's backward) are held to the same bounds.
"""

import tracemalloc

import numpy as np
import pytest
import torch

from torchedge.errors import KernelError
from torchedge.kernels.optimized import tuning
from torchedge.kernels.registry import get_kernel, output_shapes

aten = torch.ops.aten
_RNG = np.random.default_rng(7)
_SLACK = 1 << 16  # bytes of small bookkeeping arrays (window bounds, layouts) beyond the proportional bound
_MAX_FACTOR = 24  # max pooling in blocks keeps a dozen scans and tap indices per input element


def _run(op: str, *args, like):
    """Run the kernel of ``op`` into outs shaped like ``like`` (a tensor or tuple of tensors);
    returns the outs and the peak bytes allocated meanwhile."""
    wants = like if isinstance(like, tuple) else (like,)
    outs = [np.empty(tuple(w.shape), w.numpy().dtype) for w in wants]
    kernel_args = [a.numpy() if isinstance(a, torch.Tensor) else a for a in args]
    kernel = get_kernel(op).fn  # loads the kernel modules outside the trace
    tracemalloc.start()
    try:
        kernel(*kernel_args, *outs)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return outs, peak


def _assert_proportional(peak: int, *arrays, factor: int = 8) -> None:
    budget = factor * sum(a.nbytes for a in arrays) + _SLACK
    assert peak <= budget, f"allocated {peak} bytes, more than {budget} for {[a.shape for a in arrays]}"


def _assert_equal(got, want) -> None:
    for g, w in zip(got, want if isinstance(want, tuple) else (want,)):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-6, atol=1e-6, equal_nan=True)
        assert g.dtype == w.numpy().dtype


@pytest.fixture(params=["direct", "blocks"])
def strategy(request):
    """Both reduction strategies: tap by tap where it applies, and always in blocks."""
    names = ("pool_direct_taps", "pool_strided_taps") if request.param == "blocks" else ()
    for name in names:
        tuning.set_tuning(name, 0)
    yield request.param
    for name in names:
        tuning.set_tuning(name, None)


# -- windows larger than the input -------------------------------------------------------------


def test_efficientnet_average_pool_reads_only_the_input(strategy):
    x = torch.randn(1, 1280, 5, 5)
    want = torch.nn.functional.avg_pool2d(x, 1280, ceil_mode=True)
    (got,), peak = _run("aten::avg_pool2d.out", x, [1280, 1280], [1280, 1280], [0, 0], True, True, None, like=want)
    _assert_equal([got], want)
    _assert_proportional(peak, x.numpy(), got)


def test_huge_max_pool_window_reads_only_the_input(strategy):
    x = torch.randn(2, 64, 5, 7)
    want = aten.max_pool2d_with_indices(x, [1280, 999], [1280, 999], [0, 0], [1, 1], True)
    got, peak = _run("aten::max_pool2d_with_indices.out", x, [1280, 999], [1280, 999], [0, 0], [1, 1], True, like=want)
    _assert_equal(got, want)
    _assert_proportional(peak, x.numpy(), *got, factor=_MAX_FACTOR)


@pytest.mark.parametrize("count_include_pad", [True, False])
def test_huge_padding_and_stride(strategy, count_include_pad):
    """Windows mostly in the padding, far apart: each reads a corner of the input."""
    x = torch.randn(1, 8, 5, 5)
    geometry = ([1001, 1001], [300, 300], [500, 500])
    want = aten.avg_pool2d(x, *geometry, True, count_include_pad, None)
    (got,), peak = _run("aten::avg_pool2d.out", x, *geometry, True, count_include_pad, None, like=want)
    _assert_equal([got], want)
    _assert_proportional(peak, x.numpy(), got)
    want = aten.max_pool2d_with_indices(x, *geometry, [1, 1], True)
    got, peak = _run("aten::max_pool2d_with_indices.out", x, *geometry, [1, 1], True, like=want)
    _assert_equal(got, want)
    _assert_proportional(peak, x.numpy(), *got, factor=_MAX_FACTOR)


def test_huge_3d_windows(strategy):
    x = torch.randn(1, 16, 3, 4, 5, dtype=torch.float64)
    want = aten.max_pool3d_with_indices(x, [64, 64, 64], [64, 64, 64], [0, 0, 0], [1, 1, 1], True)
    got, peak = _run(
        "aten::max_pool3d_with_indices.out", x, [64, 64, 64], [64, 64, 64], [0, 0, 0], [1, 1, 1], True, like=want
    )
    _assert_equal(got, want)
    _assert_proportional(peak, x.numpy(), *got, factor=_MAX_FACTOR)


# -- wide, overlapping windows: linear time, whatever the window -----------------------------------


def test_wide_overlapping_average_pool_1d():
    x = torch.randn(2, 3, 3000)
    want = aten.avg_pool1d(x, [1500], [1], [750], False, False)
    (got,), peak = _run("aten::avg_pool1d.out", x, [1500], [1], [750], False, False, like=want)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-4, atol=1e-5)
    _assert_proportional(peak, x.numpy(), got)


def test_wide_dilated_max_pool_with_ties_nans_and_infinities():
    x = torch.round(torch.randn(2, 3, 4, 400) * 2)
    x[x > 3] = float("nan")
    x[x < -3] = -float("inf")
    geometry = ([3, 90], [1, 2], [1, 20], [1, 3], True)
    want = aten.max_pool2d_with_indices(x, *geometry)
    got, peak = _run("aten::max_pool2d_with_indices.out", x, *geometry, like=want)
    _assert_equal(got, want)
    _assert_proportional(peak, x.numpy(), *got, factor=16)


def test_all_lowest_windows_point_at_their_first_tap(strategy):
    x = torch.full((1, 2, 6, 6), -float("inf"))
    geometry = ([5, 5], [2, 2], [2, 2], [1, 1], True)
    want = aten.max_pool2d_with_indices(x, *geometry)
    got, _ = _run("aten::max_pool2d_with_indices.out", x, *geometry, like=want)
    _assert_equal(got, want)
    ints = torch.full((1, 2, 6, 6), torch.iinfo(torch.int32).min, dtype=torch.int32)
    want = aten.max_pool2d_with_indices(ints, *geometry)
    got, _ = _run("aten::max_pool2d_with_indices.out", ints, *geometry, like=want)
    _assert_equal(got, want)


_GEOMETRIES = [  # kernel, stride, padding, dilation, ceil_mode
    ([3, 3], [2, 2], [1, 1], [1, 1], False),
    ([2, 3], [2, 1], [1, 1], [2, 1], True),
    ([7, 9], [3, 4], [3, 2], [1, 2], True),
    ([40, 40], [1, 1], [20, 20], [1, 1], False),
    ([1, 25], [5, 1], [0, 12], [1, 1], True),
    ([6, 4], [100, 100], [3, 2], [1, 1], True),
]


@pytest.mark.parametrize("geometry", _GEOMETRIES, ids=[str(g) for g in _GEOMETRIES])
def test_max_pool_matches_eager(strategy, geometry):
    x = torch.round(torch.from_numpy(_RNG.standard_normal((2, 3, 13, 17))).float() * 3)
    want = aten.max_pool2d_with_indices(x, *geometry)
    got, _ = _run("aten::max_pool2d_with_indices.out", x, *geometry, like=want)
    _assert_equal(got, want)


@pytest.mark.parametrize("geometry", _GEOMETRIES, ids=[str(g) for g in _GEOMETRIES])
@pytest.mark.parametrize("count_include_pad, divisor", [(True, None), (False, None), (True, 7)])
def test_avg_pool_matches_eager(strategy, geometry, count_include_pad, divisor):
    kernel, stride, padding, _, ceil_mode = geometry
    x = torch.from_numpy(_RNG.standard_normal((2, 3, 13, 17)))
    want = aten.avg_pool2d(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor)
    (got,), _ = _run(
        "aten::avg_pool2d.out", x, kernel, stride, padding, ceil_mode, count_include_pad, divisor, like=want
    )
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-12, atol=1e-12)
    ints = (x * 10).long()
    want = aten.avg_pool2d(ints, kernel, stride, padding, ceil_mode, count_include_pad, divisor)
    (got,), _ = _run(
        "aten::avg_pool2d.out", ints, kernel, stride, padding, ceil_mode, count_include_pad, divisor, like=want
    )
    np.testing.assert_array_equal(got, want.numpy())


# -- adaptive windows ------------------------------------------------------------------------------


@pytest.mark.parametrize("size, out_size", [(5000, 4999), (5000, 7), (3000, 9001), (97, 45)])
def test_adaptive_average_pool_is_linear(size, out_size):
    x = torch.randn(2, 4, size, dtype=torch.float64)
    want = aten.adaptive_avg_pool1d(x, [out_size])
    (got,), peak = _run("aten::adaptive_avg_pool1d.out", x, [out_size], like=want)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-12, atol=1e-12)
    _assert_proportional(peak, x.numpy(), got)


def test_adaptive_average_pool_2d_with_many_windows():
    x = torch.randn(1, 3, 300, 200)
    want = aten._adaptive_avg_pool2d(x, [299, 150])
    (got,), peak = _run("aten::_adaptive_avg_pool2d.out", x, [299, 150], like=want)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)
    _assert_proportional(peak, x.numpy(), got)


def test_adaptive_average_pool_growing_one_dim_and_shrinking_the_other():
    """(5000, 1) -> (1, 5000): the shrinking dim goes first, so no (5000, 5000) intermediate."""
    x = torch.randn(1, 2, 5000, 1)
    want = aten._adaptive_avg_pool2d(x, [1, 5000])
    (got,), peak = _run("aten::_adaptive_avg_pool2d.out", x, [1, 5000], like=want)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)
    _assert_proportional(peak, x.numpy(), got)


# -- backward --------------------------------------------------------------------------------------


def _avg_backward(x, geometry, ceil_mode, count_include_pad, divisor=None, rtol=1e-6, atol=1e-6):
    """avg_pool{2,3}d_backward against eager, with its peak memory bounded."""
    name = f"avg_pool{x.ndim - 2}d_backward"
    args = (*geometry, ceil_mode, count_include_pad, divisor)
    grad = torch.randn_like(getattr(aten, name[:10])(x, *args))
    want = getattr(aten, name)(grad, x, *args)
    (got,), peak = _run(f"aten::{name}.grad_input", grad, x, *args, like=want)
    np.testing.assert_allclose(got, want.numpy(), rtol=rtol, atol=atol)
    _assert_proportional(peak, grad.numpy(), x.numpy(), got)


def test_efficientnet_average_pool_backward(strategy):
    _avg_backward(torch.randn(1, 1280, 5, 5), ([1280, 1280], [1280, 1280], [0, 0]), True, True)


@pytest.mark.parametrize("count_include_pad", [True, False])
def test_average_pool_backward_huge_padding_and_stride(strategy, count_include_pad):
    _avg_backward(torch.randn(1, 8, 5, 5), ([1001, 1001], [300, 300], [500, 500]), True, count_include_pad)


def test_average_pool_3d_backward_huge_stride_and_wide_windows(strategy):
    _avg_backward(torch.randn(1, 16, 3, 4, 5), ([3, 4, 5], [1000, 1000, 1000], [1, 2, 2]), True, True)
    _avg_backward(
        torch.randn(1, 2, 16, 16, 16, dtype=torch.float64),
        ([10, 10, 10], [1, 1, 1], [5, 5, 5]),
        False,
        False,
        rtol=1e-12,
        atol=1e-12,
    )


def test_wide_overlapping_average_pool_backward():
    _avg_backward(torch.randn(2, 3, 1, 3000), ([1, 1500], [1, 1], [0, 750]), False, False, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("geometry", _GEOMETRIES, ids=[str(g) for g in _GEOMETRIES])
@pytest.mark.parametrize("count_include_pad, divisor", [(True, None), (False, None), (True, 7)])
def test_avg_pool_backward_matches_eager(strategy, geometry, count_include_pad, divisor):
    kernel, stride, padding, _, ceil_mode = geometry
    x = torch.from_numpy(_RNG.standard_normal((2, 3, 13, 17)))
    _avg_backward(x, (kernel, stride, padding), ceil_mode, count_include_pad, divisor, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dims, kernel", [(2, [1280, 999]), (3, [64, 64, 64])])
def test_huge_max_pool_backward(dims, kernel):
    x = torch.randn(2, 16, *[5, 7, 3][:dims])
    geometry = (kernel, kernel, [0] * dims, [1] * dims, True)
    _, indices = getattr(aten, f"max_pool{dims}d_with_indices")(x, *geometry)
    grad = torch.randn(indices.shape)
    want = getattr(aten, f"max_pool{dims}d_with_indices_backward")(grad, x, *geometry, indices)
    (got,), peak = _run(
        f"aten::max_pool{dims}d_with_indices_backward.grad_input", grad, x, *geometry, indices, like=want
    )
    _assert_equal([got], want)
    _assert_proportional(peak, grad.numpy(), x.numpy(), indices.numpy(), got)


@pytest.mark.parametrize(
    "size, out_size",
    [
        ((1, 5000), (1, 4999)),
        ((1, 3000), (1, 9001)),
        ((5000, 1), (1, 5000)),
        ((9, 10), (4, 3)),
        ((13, 17), (26, 18)),
        ((3, 3, 4000), (3, 3, 3999)),
    ],
)
def test_adaptive_average_pool_backward_is_linear(size, out_size):
    x = torch.randn(1, 2, *size, dtype=torch.float64)
    grad = torch.randn(1, 2, *out_size, dtype=torch.float64)
    name = f"_adaptive_avg_pool{len(size)}d_backward"
    want = getattr(aten, name)(grad, x)
    (got,), peak = _run(f"aten::{name}.out", grad, x, like=want)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-12, atol=1e-12)
    _assert_proportional(peak, grad.numpy(), x.numpy(), got)


def test_col2im_drops_the_padding_before_adding():
    """col2im shares `scatter_taps` with average pooling's backward: huge padding costs nothing."""
    geometry = ([5, 5], [2, 2], [1, 1], [1000, 1000], [1000, 1000])  # output_size, kernel, dilation, padding, stride
    columns = torch.randn(2, 3 * 4, 9)
    want = aten.col2im(columns, *geometry)
    (got,), peak = _run("aten::col2im.out", columns, *geometry, like=want)
    _assert_equal([got], want)
    _assert_proportional(peak, columns.numpy(), got)


# -- ATen's argument checks ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "op, call, args",
    [
        (
            "aten::max_pool2d_with_indices.out",
            aten.max_pool2d_with_indices,  # padding above kernel/2, dilation aside
            ([10, 2], [1, 1], [6, 0], [2, 1], False),
        ),
        ("aten::avg_pool2d.out", aten.avg_pool2d, ([3, 3], [1, 1], [2, 0], False, True, None)),
        (
            "aten::avg_pool3d.out",
            aten.avg_pool3d,
            ([3, 3, 9], [1, 1, 1], [1, 1, 1], False, True, None),
        ),  # window > input
    ],
)
def test_refuses_what_aten_refuses(op, call, args):
    x = torch.randn(1, 2, 4, 5, 6)[..., 0, :, :] if "2d" in op else torch.randn(1, 2, 4, 5, 6)
    with pytest.raises(RuntimeError):
        call(x, *args)
    with pytest.raises(KernelError):
        get_kernel(op).fn(x.numpy(), *args, *[np.empty(1, np.float32)] * (2 if "max" in op else 1))


@pytest.mark.parametrize("shape", [(1, 0, 4, 4), (1, 2, 0, 4), (0, 4, 4)])
def test_refuses_empty_channel_or_spatial_dims(shape):
    x = torch.randn(shape)
    with pytest.raises(RuntimeError):
        aten.avg_pool2d(x, [2, 2])
    with pytest.raises(KernelError):
        get_kernel("aten::avg_pool2d.out").fn(x.numpy(), [2, 2], [], [0, 0], False, True, None, np.empty(1, np.float32))
    with pytest.raises(KernelError):
        output_shapes("aten::_adaptive_avg_pool2d.out", [x.numpy(), [1, 1], None])


def test_shape_function_agrees_on_huge_windows():
    x = np.zeros((1, 1280, 5, 5), np.float32)
    shape = output_shapes("aten::avg_pool2d.out", [x, [1280, 1280], [1280, 1280], [0, 0], True, True, None, None])
    assert shape == [(1, 1280, 1, 1)]
