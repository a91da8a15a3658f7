"""Vector norms of the torch.linalg family: ``linalg_vector_norm`` and ``dist``.

``torch.linalg.norm``, ``matrix_norm`` (except 2 and nuc, which need the SVD), ``torch.norm``,
``renorm``, ``normalize``, ``cosine_similarity`` and ``pairwise_distance`` all reach the runtime
as ``linalg_vector_norm``. Like ATen, float16 and bfloat16 compute in float32; float32 sums stay in
float32 (``vector_norm([1e20, 1e20])`` is inf, as in eager).
"""

from __future__ import annotations

import math

import numpy as np

from torchedge.kernels.dtypes import accumulate_dtype, category, dtype_from_code, promote_types, result_type
from torchedge.kernels.portable.common import check, fail, quiet, wrap_dims, write
from torchedge.kernels.registry import register_kernel

__all__ = ["linalg_vector_norm", "dist", "vector_norm_values", "reduced_shape"]

_FLOATING = category(np.float32)


def _is_float_or_complex(dtype) -> bool:
    return category(dtype) >= _FLOATING


def _ord_text(ord: float) -> str:
    if math.isinf(ord):
        return "inf" if ord > 0 else "-inf"
    return str(int(ord)) if float(ord).is_integer() else str(ord)


def reduced_shape(shape: tuple, axes: tuple, keepdim: bool) -> tuple:
    """``shape`` with ``axes`` removed (or kept as 1)."""
    if keepdim:
        return tuple(1 if i in axes else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in axes)


def vector_norm_values(op: str, x: np.ndarray, ord: float, axes: tuple, keepdim: bool) -> np.ndarray:
    """The ``ord`` norm of ``x`` (float or complex) over ``axes``, as a real array in the dtype
    ATen accumulates in; raises like ATen for inf/negative norms over empty dims."""
    ord = float(ord)
    if ord < 0 or math.isinf(ord):
        for axis in axes:
            if x.shape[axis] == 0:
                fail(
                    op, f"cannot compute the {_ord_text(ord)} norm over the empty dimension {axis}: it has no identity"
                )
    work = accumulate_dtype(x.real.dtype)
    with quiet():
        a = np.abs(x).astype(work, copy=False)
        if ord == 0:
            return np.count_nonzero(a, axis=axes, keepdims=keepdim).astype(work)
        if ord == math.inf:
            return np.max(a, axis=axes, keepdims=keepdim)
        if ord == -math.inf:
            return np.min(a, axis=axes, keepdims=keepdim)
        if ord == 1:
            return np.sum(a, axis=axes, keepdims=keepdim, dtype=work)
        if ord == 2:
            return np.sqrt(np.sum(a * a, axis=axes, keepdims=keepdim, dtype=work))
        p = work.type(ord)
        return np.power(np.sum(np.power(a, p), axis=axes, keepdims=keepdim, dtype=work), work.type(1) / p)


def _vector_norm_shape(op: str, self, ord, dim, keepdim, dtype, out) -> list[tuple]:
    axes = wrap_dims(dim, self.ndim, op)
    return [reduced_shape(self.shape, axes, keepdim)]


@register_kernel("aten::linalg_vector_norm.out", shape=_vector_norm_shape)
def linalg_vector_norm(self, ord, dim, keepdim, dtype, out):
    op = "aten::linalg_vector_norm.out"
    check(
        _is_float_or_complex(self.dtype), op, f"expected a floating point or complex tensor as input, got {self.dtype}"
    )
    target = dtype_from_code(dtype, self.dtype)
    if dtype is not None:
        check(
            (self.dtype.kind == "c") == (target.kind == "c"),
            op,
            f"dtype {target} must be complex exactly when the input ({self.dtype}) is complex",
        )
        check(
            promote_types(self.dtype, target) == target,
            op,
            f"the input dtype {self.dtype} must convert to dtype {target} without narrowing",
        )
    axes = wrap_dims(dim, self.ndim, op)
    x = self.astype(target, copy=False)
    write(out, vector_norm_values(op, x, ord, axes, keepdim))


def _dist_shape(op: str, self, other, p, out) -> list[tuple]:
    try:
        np.broadcast_shapes(self.shape, other.shape)
    except ValueError:
        fail(op, f"the shapes {list(self.shape)} and {list(other.shape)} do not broadcast")
    return [()]


@register_kernel("aten::dist.out", shape=_dist_shape)
def dist(self, other, p, out):
    op = "aten::dist.out"
    _dist_shape(op, self, other, p, out)
    dtype = result_type(self, other)
    check(_is_float_or_complex(dtype), op, f"input dtype should be floating point or complex, got {dtype}")
    with quiet():
        diff = np.subtract(self, other, dtype=dtype)
    write(out, vector_norm_values(op, diff, p, tuple(range(diff.ndim)), False))
