"""pow of a float array to a small integer exponent by repeated products.

The portable kernel computes a float ``x ** n`` by products only where ATen does (n = 2, 3 and
-2) and by NumPy's pow otherwise. Here integer exponents from 4 to `pow_product_max_exponent`
are binary powering too (`arithmetic.product_power`): within an ulp or two of the correctly
rounded pow, for a fraction of its cost. The limit is in `tuning`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from torchedge.kernels.optimized.tuning import tuned
from torchedge.kernels.portable import arithmetic
from torchedge.kernels.registry import register_kernel

__all__ = ["power"]


@functools.cache
def _powers(limit: int) -> dict[float, Callable]:
    """The portable table of scalar powers plus products for 4 .. ``limit``."""
    return {**arithmetic.SCALAR_POWERS, **{n: arithmetic.product_power(n) for n in range(4, limit + 1)}}


@register_kernel("aten::pow.Tensor_Scalar_out", library="optimized")
def power(self, exponent, out):
    """`arithmetic.power`, with integer exponents 4 .. `pow_product_max_exponent` as products."""
    arithmetic.power(self, exponent, out, powers=_powers(int(tuned("pow_product_max_exponent"))))
