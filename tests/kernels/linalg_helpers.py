"""Shared helpers of the linalg kernel tests: call a kernel like the runtime and compare with eager."""

from __future__ import annotations

import numpy as np
import torch

from tests.kernels.harness import TOLERANCES
from torchedge.exir.dtypes import to_numpy
from torchedge.kernels.registry import get_kernel, output_shapes


def outputs_like(expected) -> list[np.ndarray]:
    """Fresh out arrays shaped and typed like eager's results (garbage-filled, as planned memory)."""
    results = expected if isinstance(expected, tuple) else (expected,)
    return [np.full(tuple(t.shape), 7, to_numpy(t).dtype) for t in results]


def call(op: str, args: list, expected) -> list[np.ndarray]:
    """Run ``op`` on ``args`` into outs like ``expected``; check its shape function first."""
    outs = outputs_like(expected)
    results = expected if isinstance(expected, tuple) else (expected,)
    assert output_shapes(op, [*args, *outs]) == [tuple(t.shape) for t in results]
    get_kernel(op).fn(*args, *outs)
    return outs


def assert_close(got: np.ndarray, expected: torch.Tensor, scale: float = 1.0) -> None:
    want = to_numpy(expected)
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
        return
    rtol, atol = TOLERANCES[np.dtype(want.dtype)]
    np.testing.assert_allclose(got, want, rtol=rtol * scale, atol=atol * scale, equal_nan=True)


def check_op(op: str, args: list, expected, skip: tuple = (), scale: float = 1.0) -> list[np.ndarray]:
    """``call`` then compare every output with eager's but those at the ``skip`` positions."""
    outs = call(op, args, expected)
    results = expected if isinstance(expected, tuple) else (expected,)
    for i, (got, want) in enumerate(zip(outs, results)):
        if i not in skip:
            assert_close(got, want, scale)
    return outs


def well_conditioned(shape: tuple, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    """Random square matrices with a dominant diagonal (condition numbers near 1)."""
    g = torch.Generator().manual_seed(seed)
    n = shape[-1]
    a = torch.randn(shape, generator=g, dtype=torch.float64)
    return (a + 2 * n**0.5 * torch.eye(n, dtype=torch.float64)).to(dtype)


def spd(shape: tuple, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    n = shape[-1]
    a = torch.randn(shape, generator=g, dtype=torch.float64)
    return (a @ a.mT + n * torch.eye(n, dtype=torch.float64)).to(dtype)


def randn(shape: tuple, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g, dtype=torch.float64).to(dtype)
