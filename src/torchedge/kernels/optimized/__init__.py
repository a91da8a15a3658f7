"""The optimized kernel library: faster strategies that override portable kernels, and the
fused operators (``torchedge_fused::``).

Importing this package imports every module in it, and so registers every kernel with
`torchedge.kernels.registry` in the ``optimized`` library, over the portable kernels of the
same operators (with their shape functions and traits). The portable library is the
reference these kernels are tested against; it never imports this one. Tuned constants are
in `tuning`, scratch memory in `scratch`.
"""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
