"""Run a portable kernel and its PyTorch reference on the same inputs and compare.

A case names the operator, a reference callable and the positional arguments the
kernel takes before its out tensor(s). The harness computes the reference on torch
tensors, converts the arguments (tensors to read-only NumPy arrays, dtypes to
ScalarType codes), preallocates outs of the reference's shapes and dtypes, runs the
kernel, and compares: exactly for integers and bool, with tolerances for floats.
Outs of two or more dims are tried a second time as non-contiguous (transposed) views.
When the reference raises, the kernel must raise too.

Every dtype runs through it, bfloat16 included: torch cannot hand bfloat16 tensors to
NumPy, so `to_numpy` and `from_numpy` (`torchedge.exir.dtypes`' bridge) convert them bit for
bit (an int16 view read as ``ml_dtypes.bfloat16``), and bfloat16 results are compared in
float32 with the tolerances of `torchedge.devtools.output_compare.TOLERANCES`.
The dtype names below (``B``, ``U8`` ... ``F64``, ``INTS``, ``FLOATS``, ``ALL``) are the ones
the test tables share.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import torch

from torchedge.devtools import output_compare
from torchedge.errors import KernelError
from torchedge.exir.dtypes import numpy_dtype_of, to_numpy
from torchedge.kernels.registry import get_kernel
from torchedge.schema.scalar_type import ScalarType, numpy_dtype, scalar_type_of

B, U8, I8, I16, I32, I64 = torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64
F16, BF16, F32, F64 = torch.float16, torch.bfloat16, torch.float32, torch.float64
INTS = [U8, I8, I16, I32, I64]
FLOATS = [F16, BF16, F32, F64]
ALL = [B, *INTS, *FLOATS]  # the ten dtypes models use

NP_BF16 = numpy_dtype(ScalarType.BFLOAT16)

# dtype -> (rtol, atol): output_compare's table (the one shared with `torchedge kernels`), by NumPy dtype.
TOLERANCES = {numpy_dtype_of(dtype): tolerance for dtype, tolerance in output_compare.TOLERANCES.items()}


# -- torch <-> NumPy, bfloat16 included: numpy_dtype_of, to_numpy, from_numpy (imported) ------


def as_float(array: np.ndarray) -> np.ndarray:
    """bfloat16 arrays as float32 (exactly), for NumPy's comparisons; other arrays as they are."""
    return array.astype(np.float32) if array.dtype == NP_BF16 else array


_RNG = np.random.default_rng(0)


def reseed(seed: int) -> None:
    """Restart the generator `rand` draws from (the suite's fixtures do, before each test)."""
    _RNG.bit_generator.state = np.random.PCG64(seed).state


def rand(*shape, dtype=torch.float32, low=-3.0, high=3.0) -> torch.Tensor:
    """Uniform random values (integers in [low, high], bool at random) of ``dtype``."""
    if dtype == torch.bool:
        return torch.from_numpy(_RNG.random(shape) < 0.5)
    if dtype.is_floating_point:
        return torch.from_numpy(_RNG.uniform(low, high, shape)).to(dtype)
    return torch.from_numpy(_RNG.integers(int(low), int(high) + 1, shape)).to(dtype)


def positive(*shape, dtype=torch.float32) -> torch.Tensor:
    return rand(*shape, dtype=dtype, low=0.1, high=4.0)


@dataclass
class Case:
    op: str
    ref: object  # callable(*args) -> tensor | tuple of tensors | list of tensors
    args: tuple
    rtol: float | None = None
    atol: float | None = None
    id: str = ""
    noncontiguous: bool = True
    compare: object = None  # optional callable(got_list, want_list) replacing the default check

    def param(self):
        return pytest.param(self, id=self.id or self.op.split("::")[1])


def to_kernel_arg(value):
    if isinstance(value, torch.Tensor):
        array = to_numpy(value)
        array.setflags(write=False)  # kernels must not write into their inputs
        return array
    if isinstance(value, torch.dtype):
        return int(scalar_type_of(numpy_dtype_of(value)))
    if isinstance(value, list):
        return [to_kernel_arg(v) for v in value]
    return value


def _as_list(result):
    if isinstance(result, torch.Tensor):
        return [result], False
    return [r for r in result], isinstance(result, list)


def _empty_out(want: torch.Tensor, transposed: bool) -> np.ndarray:
    dtype = numpy_dtype_of(want.dtype)
    if transposed:
        return np.empty(tuple(reversed(want.shape)), dtype).T
    return np.empty(tuple(want.shape), dtype)


def assert_close(got: np.ndarray, want: np.ndarray, rtol=None, atol=None, what="out", tolerances=None) -> None:
    """Equal shapes and dtypes, then values: exact for integers and bool, within tolerances
    for floats (bfloat16 compared in float32). ``rtol``/``atol`` override the defaults of
    ``TOLERANCES``, which ``tolerances`` (dtype -> (rtol, atol)) may override per dtype."""
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    if want.dtype.kind in "fc" or want.dtype == NP_BF16:
        default_rtol, default_atol = {**TOLERANCES, **(tolerances or {})}.get(want.dtype, (1e-5, 1e-6))
        np.testing.assert_allclose(
            as_float(got),
            as_float(want),
            rtol=rtol or default_rtol,
            atol=atol or default_atol,
            equal_nan=True,
            err_msg=what,
        )
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def run_case(case: Case, tolerances=None, library: str | None = None) -> None:
    """Run ``case`` against its reference; ``tolerances`` (dtype -> (rtol, atol)) overrides the
    default tolerances of `assert_close` for outs of those dtypes. ``library`` picks the kernel
    of that library (default: the one the runtime runs)."""
    kernel = get_kernel(case.op, library)
    args = [to_kernel_arg(a) for a in case.args]
    try:
        expected = case.ref(*case.args)
    except Exception as error:  # the kernel must refuse too
        with pytest.raises(KernelError):
            like = next(a for a in args if isinstance(a, np.ndarray))
            kernel.fn(*args, *[np.empty(like.shape, like.dtype) for _ in range(kernel.num_args - len(args))])
            raise AssertionError(f"PyTorch raised {error!r} but the kernel did not") from None
        return
    wants, as_list = _as_list(expected)
    wants = [w.detach().contiguous() for w in wants]
    layouts = [False]
    if case.noncontiguous and any(w.ndim >= 2 for w in wants):
        layouts.append(True)
    for transposed in layouts:
        outs = [_empty_out(w, transposed and w.ndim >= 2) for w in wants]
        result = kernel.fn(*args, outs) if as_list else kernel.fn(*args, *outs)
        assert result is None, f"{case.op} returned {type(result).__name__}; out kernels return None"
        got, want = outs, [to_numpy(w) for w in wants]
        if case.compare is not None:
            case.compare(got, want)
            continue
        for i, (g, w) in enumerate(zip(got, want)):
            layout = "transposed" if transposed else "contiguous"
            assert_close(g, w, case.rtol, case.atol, what=f"{case.op} out {i} ({layout} out)", tolerances=tolerances)


def run_case_and_shape(op: str, ref, *args, **case_options) -> None:
    """`run_case`, then the operator's shape function against eager's output shapes."""
    from torchedge.kernels.registry import output_shapes

    run_case(Case(op, ref, args, **case_options))
    try:
        want = ref(*args)
    except Exception:  # run_case checked that the kernel refuses too
        return
    wants = [want] if isinstance(want, torch.Tensor) else list(want)
    outs = [np.empty(tuple(w.shape), to_numpy(w).dtype) for w in wants]
    assert output_shapes(op, [to_kernel_arg(a) for a in args] + outs) == [tuple(w.shape) for w in wants]
