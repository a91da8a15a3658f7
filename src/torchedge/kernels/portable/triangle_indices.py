"""``tril_indices`` and ``triu_indices``: the coordinates of a matrix's lower or upper triangle.

Row-major order, as a (2, N) tensor of rows then columns; ``offset`` moves the diagonal
(positive: above the main one).
"""

from __future__ import annotations

import numpy as np

from torchedge.kernels.portable.common import check, write
from torchedge.kernels.registry import register_kernel

__all__ = ["tril_indices", "triu_indices"]


def _coordinates(op: str, row: int, col: int, offset: int, lower: bool) -> np.ndarray:
    check(row >= 0, op, f"row must be non-negative, got {row}")
    check(col >= 0, op, f"col must be non-negative, got {col}")
    rows, cols = np.indices((row, col)).reshape(2, -1)
    keep = cols - rows <= offset if lower else cols - rows >= offset
    return np.stack([rows[keep], cols[keep]])


def _shape(lower: bool):
    def shape(op: str, row, col, offset, out) -> list[tuple]:
        return [_coordinates(op, row, col, offset, lower).shape]

    return shape


@register_kernel("aten::tril_indices.out", shape=_shape(lower=True))
def tril_indices(row, col, offset, out):
    write(out, _coordinates("aten::tril_indices.out", row, col, offset, lower=True))


@register_kernel("aten::triu_indices.out", shape=_shape(lower=False))
def triu_indices(row, col, offset, out):
    write(out, _coordinates("aten::triu_indices.out", row, col, offset, lower=False))
