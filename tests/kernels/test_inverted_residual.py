"""`inverted_residual` (the kernel load-time fusion runs MobileNetV2's blocks with) against
PyTorch's three convolutions and clamps, over the geometries a depthwise convolution takes,
and with its result in the bytes of its input."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.nn import functional

from torchedge.kernels.optimized.inverted_residual import DepthwiseGeometry, inverted_residual

GEOMETRIES = [  # kernel, stride, padding before, padding after, dilation
    ((3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),
    ((3, 3), (2, 2), (0, 0), (1, 1), (1, 1)),  # TensorFlow's "same": zeros after only
    ((5, 5), (2, 1), (2, 1), (2, 3), (1, 1)),
    ((3, 3), (3, 3), (1, 2), (1, 0), (2, 2)),
    ((1, 3), (1, 1), (0, 4), (0, 4), (1, 1)),  # columns reading nothing but zeros
    ((3, 3), (4, 1), (3, 1), (3, 1), (1, 1)),  # taps that read only zeros
]


def _reference(x, expand, expand_bias, expand_bounds, weight, bias, geometry, bounds, project, project_bias):
    kernel, stride, before, after, dilation = geometry
    y = functional.conv2d(x, expand, expand_bias)
    if expand_bounds is not None:
        y = y.clamp(*expand_bounds)
    y = functional.pad(y, (before[1], after[1], before[0], after[0]))
    y = functional.conv2d(y, weight, bias, stride, 0, dilation, groups=weight.shape[0])
    if bounds is not None:
        y = y.clamp(*bounds)
    return functional.conv2d(y, project, project_bias).numpy()


def _operands(geometry, dtype, biases=True, batch=2, channels=5, hidden=12, size=(9, 8)):
    torch.manual_seed(0)
    kernel = geometry[0]
    tensors = [
        torch.randn(batch, channels, *size, dtype=dtype),
        torch.randn(hidden, channels, 1, 1, dtype=dtype),
        torch.randn(hidden, dtype=dtype) if biases else None,
        torch.randn(hidden, 1, *kernel, dtype=dtype),
        torch.randn(hidden, dtype=dtype) if biases else None,
        torch.randn(channels, hidden, 1, 1, dtype=dtype),
        torch.randn(channels, dtype=dtype) if biases else None,
    ]
    return tensors


def _run(tensors, geometry, expand_bounds, bounds):
    """(the kernel's result, PyTorch's)."""
    expected = _reference(*tensors[:3], expand_bounds, *tensors[3:5], geometry, bounds, *tensors[5:])
    out = np.empty(expected.shape, expected.dtype)
    _, stride, before, _, dilation = geometry
    arrays = [None if t is None else t.numpy() for t in tensors]
    inverted_residual(expand_bounds, DepthwiseGeometry(stride, before, dilation), bounds, *arrays, out)
    return out, expected


@pytest.mark.parametrize("geometry", GEOMETRIES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_matches_the_three_convolutions(geometry, dtype):
    result, expected = _run(_operands(geometry, dtype), geometry, (0.0, 6.0), (0.0, 6.0))
    tol = (1e-5, 1e-4) if dtype == torch.float32 else (1e-12, 1e-11)
    np.testing.assert_allclose(result, expected, *tol)


@pytest.mark.parametrize("bounds", [(None, None), ((0.0, None), None), (None, (-1.0, 0.5))])
@pytest.mark.parametrize("biases", [True, False])
def test_clamps_and_biases_are_optional(bounds, biases):
    geometry = GEOMETRIES[0]
    result, expected = _run(_operands(geometry, torch.float64, biases), geometry, *bounds)
    np.testing.assert_allclose(result, expected, 1e-12, 1e-11)


def test_a_result_over_the_bytes_of_its_input():
    """Memory planning may give the block's result bytes of its input: every image is read
    before any is written (here image i's result lands on image i + 1's input)."""
    geometry = GEOMETRIES[0]
    tensors = _operands(geometry, torch.float64, batch=3, channels=7, size=(6, 6))
    separate, _ = _run(tensors, geometry, (0.0, 6.0), None)
    memory = np.zeros((4,) + separate.shape[1:])
    x, out = memory[:3], memory[1:]
    x[...] = tensors[0].numpy()
    _, stride, before, _, dilation = geometry
    arrays = [t.numpy() for t in tensors[1:]]
    inverted_residual((0.0, 6.0), DepthwiseGeometry(stride, before, dilation), None, x, *arrays, out)
    np.testing.assert_array_equal(out, separate)
