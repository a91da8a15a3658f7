"""How a bundled program's expected output is compared with a method's output, as ExecuTorch does.

ExecuTorch 1.5.1 (`devtools/bundled_program/bundled_program.cpp`, ``tensors_are_close``):
the dtypes and sizes must be equal; float32, float64 and float16 elements are close when
``|got - expected| <= atol + |rtol * expected|`` (NaN matches NaN, an infinity the infinity of
the same sign; ``rtol == atol == 0`` asks for equality), the difference taken in float32 for
float32 tensors; every other dtype (bfloat16 included) must match bit for bit. Scalars
(the schema's Int, Bool and Double) must be equal. The defaults are ExecuTorch's:
``rtol=1e-5``, ``atol=1e-8``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["DEFAULT_RTOL", "DEFAULT_ATOL", "Comparison", "compare_output"]

DEFAULT_RTOL = 1e-5
DEFAULT_ATOL = 1e-8

# Dtypes ExecuTorch compares with a tolerance; the difference is taken in the dtype of the value.
_CLOSE_DTYPES = {np.dtype(np.float32): np.float32, np.dtype(np.float64): np.float64, np.dtype(np.float16): np.float64}


@dataclass(frozen=True)
class Comparison:
    ok: bool
    max_abs_error: float  # over every element (inf where NaN or an infinity meets a finite value)
    message: str = ""  # why it is not ok


def compare_output(expected, got, rtol: float = DEFAULT_RTOL, atol: float = DEFAULT_ATOL) -> Comparison:
    """Compare one output with its expected value (an array or a Python scalar)."""
    if not isinstance(expected, np.ndarray):
        return _compare_scalar(expected, got)
    if not isinstance(got, np.ndarray):
        return Comparison(False, float("inf"), f"expected a tensor, got {type(got).__name__} {got!r:.40}")
    if got.dtype != expected.dtype or got.shape != expected.shape:
        return Comparison(
            False, float("inf"), f"expected {expected.dtype}{list(expected.shape)}, got {got.dtype}{list(got.shape)}"
        )
    if expected.size == 0:
        return Comparison(True, 0.0)
    error = _abs_error(expected, got)
    max_error = float(error.max())
    kind = _CLOSE_DTYPES.get(expected.dtype)
    if kind is None:
        same = np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(expected).tobytes()
        return Comparison(same, max_error, "" if same else f"{expected.dtype} values differ (compared bit for bit)")
    ok = _close(expected.astype(kind), got.astype(kind), rtol, atol)
    if ok.all():
        return Comparison(True, max_error)
    bad = int(np.count_nonzero(~ok))
    return Comparison(
        False, max_error, f"{bad} of {ok.size} elements differ by more than atol={atol:g} + rtol={rtol:g} * |expected|"
    )


def _close(expected: np.ndarray, got: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    with np.errstate(invalid="ignore", over="ignore"):
        same_special = (np.isnan(expected) & np.isnan(got)) | (
            np.isinf(expected) & np.isinf(got) & ((expected > 0) == (got > 0))
        )
        if rtol == 0 and atol == 0:
            return same_special | (got == expected)
        actual = np.abs(got - expected).astype(np.float64)  # in the dtype of the values, as ExecuTorch
        allowed = atol + np.abs(rtol * expected.astype(np.float64))
        return same_special | (np.isfinite(actual) & (actual <= allowed))


def _abs_error(expected: np.ndarray, got: np.ndarray) -> np.ndarray:
    """|got - expected| per element in float64: 0 where both are the same NaN or infinity, inf for a NaN mismatch."""
    if expected.dtype.kind in "biuc":
        wide = np.complex128 if expected.dtype.kind == "c" else np.float64
        return np.abs(got.astype(wide) - expected.astype(wide)).astype(np.float64)
    want, have = expected.astype(np.float64), got.astype(np.float64)
    with np.errstate(invalid="ignore"):
        error = np.abs(have - want)
        same = (np.isnan(want) & np.isnan(have)) | (np.isinf(want) & (want == have))
    error[same] = 0.0
    error[np.isnan(error)] = np.inf
    return error


def _compare_scalar(expected, got) -> Comparison:
    if isinstance(got, np.ndarray) or isinstance(got, bool) != isinstance(expected, bool):
        return Comparison(False, float("inf"), f"expected {type(expected).__name__} {expected!r}, got {got!r:.40}")
    try:
        error = abs(float(got) - float(expected))
    except (TypeError, ValueError):
        return Comparison(False, float("inf"), f"expected {expected!r}, got {got!r:.40}")
    both_nan = error != error and float(got) != float(got) and float(expected) != float(expected)
    if got == expected or both_nan:
        return Comparison(True, 0.0)
    return Comparison(False, error if error == error else float("inf"), f"expected {expected!r}, got {got!r:.40}")
