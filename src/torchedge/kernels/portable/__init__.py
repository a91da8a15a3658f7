"""The portable kernel library: out-variant NumPy kernels with ATen semantics.

Importing this package registers every kernel (and the primitive operators) with
`torchedge.kernels.registry`. NumPy is the only dependency.
"""

from torchedge.kernels import prim_ops  # noqa: F401
from torchedge.kernels.portable import (  # noqa: F401
    activation,
    adaptive_pooling,
    arithmetic,
    backward,
    comparison,
    convolution,
    creation,
    fft,
    fused,
    indexing,
    linear_algebra,
    normalization,
    padding,
    pooling,
    random,
    reduction,
    sampling,
    scatter,
    shape,
    slicing,
    sorting,
    unary,
    unfold,
    upsample,
)
