"""``index_put`` into ``self``'s own memory at one position of one dimension: a KV-cache row update.

A decoded token writes its key and value rows into the cache buffers with
``index_put(cache, [None, None, position], rows)``, ``out`` being the cache itself (see
`torchedge.exir.passes.mutable_state`). When the indices are Nones and one integer index of
one element in range, ``accumulate`` is false, ``out`` is ``self`` and ``values`` has exactly
the indexed shape and ``self``'s dtype, the update is the basic-slicing assignment of that one
position: the elements the portable kernel writes, without its general advanced-indexing key.
Every other call runs the portable kernel.
"""

from __future__ import annotations

import numpy as np

from torchedge.kernels.portable import scatter
from torchedge.kernels.registry import register_kernel

__all__ = ["index_put", "row_key"]


def row_key(self: np.ndarray, indices, values: np.ndarray) -> tuple | None:
    """The basic-slicing key of ``self[indices] = values`` when ``indices`` select one position of
    one dimension (Nones around one signed-integer index of one element, in range) and
    ``values`` has exactly the selected shape and ``self``'s dtype; None otherwise."""
    if not 0 < len(indices) <= self.ndim or values.dtype != self.dtype:
        return None
    given = [axis for axis, index in enumerate(indices) if index is not None]
    if len(given) != 1:
        return None
    axis = given[0]
    index = indices[axis]
    if not isinstance(index, np.ndarray) or index.dtype.kind != "i" or index.shape != (1,):
        return None
    size = self.shape[axis]
    if values.shape != self.shape[:axis] + (1,) + self.shape[axis + 1 :]:
        return None
    position = int(index[0])
    if not -size <= position < size:
        return None  # the portable kernel reports it
    position %= size
    return (slice(None),) * axis + (slice(position, position + 1),)


@register_kernel("aten::index_put.out")
def index_put(self, indices, values, accumulate, out):
    """``out = self`` with ``out[indices] = values`` (or ``+=``); one row written in place by basic
    slicing when `row_key` applies, else the portable kernel."""
    if out is self and not accumulate and isinstance(values, np.ndarray):
        key = row_key(self, indices, values)
        if key is not None:
            out[key] = values
            return
    scatter.index_put(self, indices, values, accumulate, out)
