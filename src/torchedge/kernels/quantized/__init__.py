"""The quantized kernel library: kernels of the ``quantized_decomposed`` operators that
PT2E-quantized programs call (ExecuTorch's ``kernels/quantized``). NumPy only.

Importing this package registers them with `torchedge.kernels.registry`.
"""

from torchedge.kernels.quantized import add_relu, affine, decomposed_extra  # noqa: F401
