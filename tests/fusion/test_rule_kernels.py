"""The kernels only load-time rules call (`torchedge.kernels.optimized.fused_rules_ops`) against
PyTorch eager, their typed errors, and the copy rule's strides against NumPy's reshapes."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from torchedge.errors import TorchEdgeError
from torchedge.fusion.rules_copies import reshaped_strides
from torchedge.kernels.registry import get_kernel, output_shapes


def _kernel(name):
    return get_kernel(f"torchedge_fused::{name}.out").fn


@pytest.mark.parametrize("dims, ceil_mode", [(2, False), (2, True), (3, False)])
def test_max_pool_values_gives_eager_maxima(dims, ceil_mode):
    x = torch.randn(2, 3, *(7,) * dims)
    pool = torch.nn.functional.max_pool2d if dims == 2 else torch.nn.functional.max_pool3d
    want = pool(x, 3, 2, 1, 1, ceil_mode).numpy()
    arguments = [x.numpy(), [3] * dims, [2] * dims, [1] * dims, [1] * dims, ceil_mode, dims]
    (shape,) = output_shapes("torchedge_fused::max_pool_values.out", [*arguments, None])
    out = np.empty(shape, np.float32)
    _kernel("max_pool_values")(*arguments, out)
    np.testing.assert_array_equal(out, want)


def test_strided_copy_gives_eager_as_strided():
    x = torch.randn(24)
    out = np.empty((3, 4), np.float32)
    _kernel("strided_copy")(x.numpy(), [3, 4], [1, 6], out)
    np.testing.assert_array_equal(out, torch.as_strided(x, (3, 4), (1, 6)).numpy())
    with pytest.raises(TorchEdgeError, match="do not view the input"):
        _kernel("strided_copy")(x.numpy(), [3, 4], [2, 7], out)


@pytest.mark.parametrize("stride, bounds", [(1, (0.0, 6.0)), (2, None)])
def test_inverted_residual_gives_eager_block(stride, bounds):
    torch.manual_seed(0)
    expand, depthwise = torch.nn.Conv2d(4, 12, 1), torch.nn.Conv2d(12, 12, 3, stride, 1, groups=12)
    project, x = torch.nn.Conv2d(12, 5, 1), torch.randn(2, 4, 7, 6)
    with torch.no_grad():
        hidden = depthwise(torch.relu(expand(x)))
        want = project(hidden if bounds is None else hidden.clamp(*bounds)).numpy()
    tensors = [t.detach().numpy() for c in (expand, depthwise, project) for t in (c.weight, c.bias)]
    arguments = [x.numpy(), *tensors, (0, None), [stride] * 2, [1, 1], [1, 1], [1, 1], bounds]
    (shape,) = output_shapes("torchedge_fused::inverted_residual.out", [*arguments, None])
    out = np.empty(shape, np.float32)
    _kernel("inverted_residual")(*arguments, out)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(TorchEdgeError, match="out has shape"):
        _kernel("inverted_residual")(*arguments, np.empty((1, 1, 1, 1), np.float32))


SHAPES = [(2, 3, 4), (6, 4), (1, 6, 1, 4), (24,), (4, 1, 6)]


@pytest.mark.parametrize("shape, permutation", [(s, p) for s in SHAPES for p in itertools.permutations(range(len(s)))])
def test_reshaped_strides_agree_with_numpy(shape, permutation):
    """Every reshape of a permuted view: strides where NumPy reshapes without a copy, None where it copies."""
    view = np.arange(24).reshape(shape).transpose(permutation)
    strides = tuple(s // view.itemsize for s in view.strides)
    for new in [(24,), (2, 12), (12, 2), (4, 6), (6, 4), (2, 3, 4), (4, 3, 2), (1, 24), (2, 1, 12), (3, 8)]:
        found = reshaped_strides(view.shape, strides, new)
        reshaped = view.view()
        try:
            reshaped.shape = new
        except AttributeError:
            assert found is None, (shape, permutation, new)
            continue
        assert found is not None, (shape, permutation, new)
        base = np.arange(24)
        got = np.lib.stride_tricks.as_strided(base, new, [s * base.itemsize for s in found])
        np.testing.assert_array_equal(got, reshaped)
