"""Randomized leaky ReLU with its noise tensor: ``aten::rrelu_with_noise.out``.

Inference: leaky ReLU with the slope ``(lower + upper) / 2``, ``noise`` left alone.
Training: where ``x <= 0`` a slope is drawn uniformly from ``[lower, upper)`` (from the
random kernels' NumPy generator, which matches PyTorch's distribution, not its stream),
``out = x * slope`` and ``noise`` is set to it in place; elsewhere ``out = x`` and
``noise = 1``. The functional form torch.export leaves (``rrelu_with_noise_functional``)
has no out variant in ATen: it reaches this kernel only through a compiler rewrite.
"""

from __future__ import annotations

import numpy as np

from torchedge.kernels.dtypes import is_floating
from torchedge.kernels.portable import random
from torchedge.kernels.portable.activation import leaky_relu
from torchedge.kernels.portable.common import check, quiet, write
from torchedge.kernels.portable.shape_rules import same_as
from torchedge.kernels.registry import register_kernel

__all__ = ["rrelu_with_noise"]


@register_kernel("aten::rrelu_with_noise.out", shape=same_as())
def rrelu_with_noise(self, noise, lower, upper, training, generator, out):
    op = "aten::rrelu_with_noise.out"
    check(is_floating(self.dtype), op, f"is not implemented for dtype {self.dtype}")
    check(out.dtype == self.dtype, op, f"out must have the input's dtype {self.dtype}, got {out.dtype}")
    if not training:
        leaky_relu(self, (float(lower) + float(upper)) / 2, out)
        return
    check(self.dtype != np.float16, op, "is not implemented for dtype float16 in training (as in ATen)")
    check(lower <= upper, op, f"lower bound {lower} must not exceed upper bound {upper}")
    check(noise.dtype == self.dtype, op, f"noise must have the input's dtype {self.dtype}, got {noise.dtype}")
    check(noise.shape == self.shape, op, f"noise shape {list(noise.shape)} must match input {list(self.shape)}")
    x = self.astype(np.float64)
    slopes = random._GENERATOR.uniform(float(lower), float(upper), size=x.shape)
    slopes = np.where(x <= 0, slopes, 1.0)
    with quiet():
        write(noise, slopes)
        write(out, x * noise.astype(np.float64))
