"""Compare a kernel's outputs with eager's.

Exact for integers and bool; per-dtype tolerances for floats, with NaN and infinities
where eager has them. Three documented allowances: random or uninitialised outputs
compare by shape and dtype only; the indices of equal values in ``sort``/``topk`` may come
in any order (they must pick eager's values); a float output beyond tolerance passes when
it is as close to the result computed in float64 as eager's is (sums in another order,
as in matmul and convolution, differ by more than a few ulps where they cancel; eager
accumulates some half-precision operators in half precision).
"""

from __future__ import annotations

import numpy as np
import torch

from torchedge.errors import ExportError
from torchedge.exir import dtypes
from torchedge.exir.ir import bind_arguments

__all__ = ["TOLERANCES", "Unsupported", "numpy_dtype_of", "to_numpy", "compare_outputs"]

# The float tolerances of every comparison with eager (here and in the kernel tests):
# dtype -> (rtol, atol), and a value passes when |got - want| <= atol + rtol * |want|. rtol is
# about two units in the last place (eps = 2**-10 for float16, 2**-7 for bfloat16: its 8
# significant bits make one rounding step up to 0.8% relative, and a kernel computing in
# float32 may round once where eager rounds twice); atol covers results that cancel to ~0.
TOLERANCES = {
    torch.float16: (2e-3, 2e-3),
    torch.bfloat16: (1.6e-2, 1e-2),
    torch.float32: (1e-5, 1e-6),
    torch.float64: (1e-10, 1e-12),
}

# Values that cannot match eager (random, uninitialised): only shapes and dtypes are compared.
_NONDETERMINISTIC = {
    "aten::rand",
    "aten::randn",
    "aten::randperm",
    "aten::native_dropout",
    "aten::empty",
    "aten::empty_strided",
}
# Equal values may come in any order (eager's sort is not stable by default): indices are
# checked by the values they pick.
_ANY_ORDER_OF_TIES = {"aten::sort", "aten::topk"}


class Unsupported(ValueError):
    """A value the harness cannot hand to a kernel (a dtype or memory format without a .pte code)."""


def numpy_dtype_of(dtype: torch.dtype) -> np.dtype:
    try:
        return dtypes.numpy_dtype_of(dtype)
    except (ExportError, KeyError):
        raise Unsupported(f"dtype {dtype} has no NumPy twin") from None


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A read-only NumPy copy of ``tensor`` (bfloat16 through ml_dtypes)."""
    numpy_dtype_of(tensor.dtype)  # Unsupported if it has no NumPy twin
    array = dtypes.to_numpy(tensor)
    array.setflags(write=False)
    return array


def _float_errors(got: np.ndarray, want: np.ndarray, dtype) -> tuple[np.ndarray, np.ndarray]:
    """(|got - want|, allowed) as float64, zero error where both agree (equal, inf, or nan)."""
    rtol, atol = TOLERANCES.get(dtype, (1e-5, 1e-6))
    g, w = got.astype(np.float64), want.astype(np.float64)
    with np.errstate(invalid="ignore"):
        agree = (g == w) | (np.isnan(g) & np.isnan(w))
        error = np.where(agree, 0.0, np.abs(g - w))
    return np.nan_to_num(error, nan=np.inf), atol + rtol * np.abs(np.nan_to_num(w))


def _compare_tensor(got, want: torch.Tensor, values: bool) -> tuple[str, float]:
    """("" or what differs, max error) for one output."""
    if not isinstance(got, np.ndarray):
        return f"expected an array, got {type(got).__name__}", 0.0
    expected = to_numpy(want)
    if got.shape != expected.shape or got.dtype != expected.dtype:
        return f"got {got.dtype}{list(got.shape)}, expected {expected.dtype}{list(expected.shape)}", 0.0
    if not values or got.size == 0:
        return "", 0.0
    if want.is_floating_point():
        error, allowed = _float_errors(got, expected, want.dtype)
    else:
        error = np.abs(got.astype(np.float64) - expected.astype(np.float64))
        allowed = np.zeros_like(error)
    worst_at = np.unravel_index(int(np.argmax(error - allowed)), error.shape)
    max_error = float(error.max())
    if error[worst_at] <= allowed[worst_at]:
        return "", max_error
    count = int(np.count_nonzero(error > allowed))
    return (
        f"{count}/{error.size} elements differ; at {tuple(int(i) for i in worst_at)} got "
        f"{got[worst_at]!r}, expected {expected[worst_at]!r}"
    ), max_error


def _compare_scalar(got, want) -> tuple[str, float]:
    if isinstance(got, np.generic):
        got = got.item()
    same = got == want or (isinstance(want, float) and np.isclose(got, want, equal_nan=True))
    return ("", 0.0) if same else (f"got {got!r}, expected {want!r}", float("inf"))


def _compare_ties(bound: dict, got, want_indices: torch.Tensor, want_values: torch.Tensor) -> tuple[str, float]:
    """Indices of a sort or topk, where equal values may come in any order: they must pick eager's values."""
    problem, _ = _compare_tensor(got, want_indices, values=False)
    if problem:
        return problem, 0.0
    source = np.atleast_1d(to_numpy(bound["self"]))
    try:
        picked = np.take_along_axis(source, np.atleast_1d(got), axis=bound.get("dim", -1))
    except (IndexError, ValueError) as e:
        return f"indices: {e}", 0.0
    problem, error = _compare_tensor(picked.reshape(got.shape), want_values, values=True)
    return (f"indices pick other values: {problem}" if problem else ""), error


def _upcast(value):
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.double()
    if isinstance(value, (list, tuple)):
        return type(value)(map(_upcast, value))
    if isinstance(value, dict):
        return {k: _upcast(v) for k, v in value.items()}
    return value


def _as_accurate_as_eager(op, args, kwargs, index: int, got: np.ndarray, want: torch.Tensor) -> bool:
    """Whether a float output that differs from eager's is as close to the float64 result as eager's
    is: its largest error where they differ is at most twice eager's largest error anywhere."""
    try:
        truth = op(*_upcast(args), **_upcast(kwargs))
    except Exception:  # no float64 kernel, or mixed-dtype rules: no second opinion
        return False
    truth = truth[index] if isinstance(truth, (tuple, list)) else truth
    if not isinstance(truth, torch.Tensor) or truth.shape != want.shape:
        return False
    exact, expected = truth.double().numpy(), to_numpy(want).astype(np.float64)
    error, allowed = _float_errors(got, to_numpy(want), want.dtype)
    differ = error > allowed
    finite = np.isfinite(exact) & np.isfinite(expected)
    if not finite[differ].all():
        return False
    ours = np.abs(got.astype(np.float64) - exact)[differ].max()
    return bool(ours <= 2 * np.abs(expected - exact)[finite].max())


def compare_outputs(op, args, kwargs, outs: list, wants: list) -> tuple[str, float]:
    """("" or which output differs and how, the largest error) of a kernel's ``outs`` against
    eager's ``wants`` for the call ``op(*args, **kwargs)``."""
    if len(outs) != len(wants):
        return f"{len(outs)} outputs, expected {len(wants)}", 0.0
    max_error = 0.0
    for i, (got, want) in enumerate(zip(outs, wants)):
        if want is None:
            continue
        if not isinstance(want, torch.Tensor):
            problem, error = _compare_scalar(got, want)
        elif i == 1 and op._schema.name in _ANY_ORDER_OF_TIES:
            problem, error = _compare_ties(bind_arguments(op, args, kwargs), got, want, wants[0])
        else:
            problem, error = _compare_tensor(got, want, values=op._schema.name not in _NONDETERMINISTIC)
            if problem and want.is_floating_point() and _as_accurate_as_eager(op, args, kwargs, i, got, want):
                problem = ""
        max_error = max(max_error, error)
        if problem:
            return f"output {i}: {problem}", max_error
    return "", max_error
