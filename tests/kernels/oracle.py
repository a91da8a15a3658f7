"""Helpers of the oracle tests: optimized kernels against the portable reference, without torch."""

from __future__ import annotations

import numpy as np

from torchedge.kernels import registry
from torchedge.schema.scalar_type import ScalarType, numpy_dtype

NP_BF16 = numpy_dtype(ScalarType.BFLOAT16)


def random_array(rng, shape, dtype):
    """Small integers, or standard normal floats, of ``shape``."""
    if np.dtype(dtype).kind in "iu":
        low = 0 if np.dtype(dtype).kind == "u" else -3
        return rng.integers(low, 4, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def assert_reassociated(got, want, bound, depth: int) -> None:
    """``got`` equals ``want`` up to reordering sums of ``depth`` terms whose absolute values sum
    to ``bound`` (exactly, for integers): each side is within ``depth * eps * bound`` of the exact
    sum; the factor 4 and the 8 extra terms leave room for a few roundings around the sums."""
    assert got.shape == want.shape and got.dtype == want.dtype
    if got.dtype.kind in "iu":
        np.testing.assert_array_equal(got, want)
        return
    eps = {np.dtype(np.float16): 2.0**-10, NP_BF16: 2.0**-7}.get(got.dtype) or float(np.finfo(got.dtype).eps)
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    allowed = 4 * (depth + 8) * eps * np.abs(bound) + 1e-300
    assert np.all(diff <= allowed), f"max excess {np.max(diff - allowed)}"


def run_portable(op: str, *args, outs: int = 1, dtype=None):
    """Run the portable kernel of ``op`` with outs of ``dtype`` (default: the first array's),
    sized by its shape function."""
    kernel = registry.get_kernel(op, library="portable")
    dtype = next(a for a in args if isinstance(a, np.ndarray)).dtype if dtype is None else np.dtype(dtype)
    placeholders = [np.empty(0, dtype)] * outs
    arrays = [np.empty(shape, dtype) for shape in registry.output_shapes(op, [*args, *placeholders])]
    kernel.fn(*args, *arrays)
    return arrays[0] if outs == 1 else arrays
