"""The portable kernel library: out-variant NumPy kernels with ATen semantics.

Importing this package imports every module in it, and so registers every kernel
(and the primitive operators) with `torchedge.kernels.registry`: a new kernel
module needs no line here. NumPy is the only dependency.
"""

import importlib
import pkgutil

from torchedge.kernels import prim_ops  # noqa: F401

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
