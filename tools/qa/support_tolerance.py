"""How a support check judges a kernel's outputs against eager's.

`layout_problem` tells outputs of other number, dtypes or shapes than eager's (a kernel
that does not support the call); `values_problem` tells values beyond a tolerance of
``ULPS`` machine epsilons, scaled by the magnitude of the reduction computing each value
(a kernel that supports the call inaccurately).
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils._pytree import tree_map

from tools.qa.aten_calls import leaves
from torchedge.devtools.output_compare import compare_outputs, numpy_dtype_of, to_numpy

__all__ = ["ULPS", "layout_problem", "values_problem"]

# A support check's float tolerance in units of the call's machine epsilon (see `values_problem`).
ULPS = 8


def _is_float(value) -> bool:
    """Whether ``value`` is a floating-point or complex tensor."""
    return isinstance(value, torch.Tensor) and (value.is_floating_point() or value.is_complex())


def layout_problem(outs: list, wants: list) -> str:
    """How the kernel's outputs differ from eager's in number, dtype or shape ("" if they do not)."""
    if len(outs) != len(wants):
        return f"{len(outs)} outputs, expected {len(wants)}"
    for i, (got, want) in enumerate(zip(outs, wants)):
        if isinstance(want, torch.Tensor):
            expected = (numpy_dtype_of(want.dtype), tuple(want.shape))
            found = (got.dtype, got.shape) if isinstance(got, np.ndarray) else type(got).__name__
            if found != expected:
                return f"output {i}: got {found}, expected {expected}"
        elif want is not None and not np.isscalar(got):
            return f"output {i}: got {type(got).__name__}, expected a scalar"
    return ""


def _epsilon(tensors: list[torch.Tensor]) -> float:
    """The machine epsilon of the least precise of ``tensors``; integers and bool compute in
    float32 (the default dtype), complex numbers in the dtype of their parts."""

    def eps(dtype: torch.dtype) -> float:
        dtype = dtype.to_real() if dtype.is_complex else dtype
        return torch.finfo(dtype if dtype.is_floating_point else torch.float32).eps

    return max(eps(t.dtype) for t in tensors)


def _float64_outputs(op, args, kwargs, magnitudes: bool) -> list:
    """Eager's outputs (NumPy, None if not a float tensor) with every float tensor of the call
    in float64 (complex128), as its magnitudes if ``magnitudes``; [] if eager refuses that."""

    def widen(value):
        return (
            value.to(torch.complex128 if value.is_complex() else torch.float64, copy=True)
            if _is_float(value)
            else value
        )

    def inputs(value):
        return widen(value.abs().to(value.dtype) if magnitudes and _is_float(value) else value)

    try:
        result = op(*tree_map(inputs, args), **tree_map(inputs, kwargs))
    except Exception:  # no float64 kernel, or mixed-dtype rules
        return []
    return [
        widen(r).detach().numpy() if _is_float(r) else None
        for r in (result if isinstance(result, (tuple, list)) else [result])
    ]


def _close(got: np.ndarray, reference, scale, eps: float) -> bool:
    """Whether each element of ``got`` is ``reference``'s (NaN and infinities included) or
    within ``ULPS * eps * (|reference| + scale)`` of it."""
    if reference is None or reference.shape != got.shape:
        return False
    g, r = (a.astype(np.complex128 if a.dtype.kind == "c" else np.float64) for a in (got, reference))
    with np.errstate(invalid="ignore"):
        same = (g == r) | (np.isnan(g) & np.isnan(r))
        near = np.isfinite(g) & np.isfinite(r) & (np.abs(g - r) <= ULPS * eps * (np.abs(r) + scale))
    return bool(np.all(same | near))


def values_problem(op, args, kwargs, outs: list, wants: list) -> tuple[str, float]:
    """`compare_outputs`, where a float output counts as eager's when each element is within
    ``ULPS`` machine epsilons of the call (`_epsilon`) of eager's value or of the float64
    result, relative to its magnitude plus that of the reduction computing it: the call
    on the magnitudes of its float inputs, in float64 (for a sum of products such as a
    convolution, the sum of the terms' magnitudes, which bounds its rounding errors)."""
    eps = _epsilon([t for t in leaves((args, kwargs, wants)) if isinstance(t, torch.Tensor)])
    exact, magnitudes = (_float64_outputs(op, args, kwargs, m) or [None] * len(wants) for m in (False, True))
    judged = list(outs)
    for i, want in enumerate(wants):
        if _is_float(want):
            expected, magnitude = to_numpy(want), magnitudes[i]
            scale = (
                0.0
                if magnitude is None or magnitude.shape != expected.shape
                else np.nan_to_num(np.abs(magnitude), nan=0.0, posinf=0.0)
            )
            if _close(outs[i], expected, scale, eps) or _close(outs[i], exact[i], scale, eps):
                judged[i] = expected
    return compare_outputs(op, args, kwargs, judged, wants)
