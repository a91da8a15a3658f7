"""ATen mode: run programs with PyTorch's own kernels instead of the portable ones.

The differential reference for the portable library. torch is imported only
when a program is loaded in this mode (``Runtime.get(kernels="aten")``), so it
never becomes a dependency of the runtime. Operators torch does not know
(ExecuTorch's ``executorch_prim::*``, ``dim_order_ops::*``) use the portable
kernels.
"""

from __future__ import annotations

import functools

from torchedge.errors import KernelError
from torchedge.kernels.registry import Kernel, get_kernel
from torchedge.kernels.torch_arrays import to_numpy, to_torch
from torchedge.schema.scalar_type import numpy_dtype

__all__ = ["get_aten_kernel"]


@functools.cache
def _torch():
    import torch

    return torch


def _dtype(code: int):
    # NumPy's dtype names (float32, int64, bool, bfloat16 from ml_dtypes...) are torch's attribute names.
    return getattr(_torch(), numpy_dtype(code).name)


def _converter(arg_type: str):
    """How one schema argument goes from the runtime's value to torch's."""
    torch = _torch()
    if "Tensor" in arg_type and "[]" not in arg_type and "List" not in arg_type:
        return lambda v: None if v is None else to_torch(v)
    if "Tensor" in arg_type:
        return lambda v: [None if t is None else to_torch(t) for t in v]
    if "ScalarType" in arg_type:
        return lambda v: None if v is None else _dtype(v)
    if "MemoryFormat" in arg_type:
        formats = [torch.contiguous_format, torch.preserve_format]
        return lambda v: None if v is None else formats[v]
    if "Layout" in arg_type:
        return lambda v: None if v is None else torch.strided
    return lambda v: list(v) if isinstance(v, tuple) else v


@functools.cache
def get_aten_kernel(op_name: str) -> Kernel:
    """A kernel calling ``torch.ops.<ns>.<op>.<overload>``, or the portable one if torch lacks it."""
    namespace, _, rest = op_name.partition("::")
    name, _, overload = rest.partition(".")
    packet = getattr(getattr(_torch().ops, namespace, None), name, None)
    op = getattr(packet, overload or "default", None) if packet is not None else None
    if op is None:
        return get_kernel(op_name)
    arguments = op._schema.arguments
    converters = [_converter(str(a.type)) for a in arguments]
    kwarg_only = [a.kwarg_only for a in arguments]
    names = [a.name for a in arguments]
    returns_value = not any(a.alias_info is not None and a.alias_info.is_write for a in arguments)

    def call(*values):
        args, kwargs = [], {}
        for value, convert, is_kw, arg_name in zip(values, converters, kwarg_only, names):
            converted = convert(value)
            if is_kw:
                kwargs[arg_name] = converted
            else:
                args.append(converted)
        try:
            result = op(*args, **kwargs)
        except RuntimeError as e:
            raise KernelError(f"{op_name} (ATen): {e}") from None
        if returns_value:
            return to_numpy(result) if isinstance(result, _torch().Tensor) else result
        return None

    call.__name__ = f"aten_{name}_{overload}"
    return Kernel(op_name, call, len(arguments))
