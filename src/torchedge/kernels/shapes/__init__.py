"""Shape functions: the output shapes of an out-variant kernel call, for dynamic shapes.

With bounded dynamic shapes a planned tensor owns memory for its upper-bound shape;
before a kernel runs, the runtime resizes each ``out`` array (a new view of the same
memory) to the shape `output_shapes` computes from the call's inputs and arguments.
ExecuTorch puts that logic into every C++ kernel; here it is one shape function per
operator, most of them registered from family tables (modules by family below).

>>> import numpy as np
>>> output_shapes("aten::cat.out", [[np.ones((2, 3)), np.ones((4, 3))], 0, np.empty(0)])
[(6, 3)]

Every registered kernel has a shape function or is listed in one of the tuples below
(a test keeps it so).
"""

# The families, from the simplest rule to the most specific; importing one registers its
# shape functions.
from torchedge.kernels.shapes import (  # noqa: F401
    elementwise,  # broadcast every tensor input
    same_shape,  # the shape of one input
    reduction,
    shape_ops,  # views made copies
    slicing,  # slices, joins, pads
    indexing,
    linear_algebra,
    convolution,
    pooling,
    resampling,
    normalization,
    creation,  # from sizes and numbers
    fft,
    fused,  # torchedge's own fused operators
)
from torchedge.kernels.shapes.registry import has_shape_function, output_shapes, register_shape, shape_operators

__all__ = ["register_shape", "has_shape_function", "output_shapes", "shape_operators", "DATA_DEPENDENT",
           "NO_TENSOR_OUTPUT_OR_VIEW"]

# Kernels that allocate their result (`torchedge.kernels.allocator.allocate_output`) and
# return it, so there is no planned out to resize: the output size depends on the data
# (nonzero, masked_select), or the op rebinds its input to a tensor of a new size (resize_).
DATA_DEPENDENT = (
    "aten::nonzero.out",
    "aten::masked_select.out",
    "aten::resize_",
)

# Operators without an out tensor: they return a Python scalar (the symbolic-size and
# scalar arithmetic of `torchedge.kernels.prim_ops`, `_local_scalar_dense`), or, for
# et_view, a view of their input that the runtime binds as it is.
NO_TENSOR_OUTPUT_OR_VIEW = (
    "aten::_local_scalar_dense",
    "aten::sym_size.int",
    "aten::sym_numel",
    "aten::sym_stride.int",
    "aten::sym_storage_offset",
    "aten::sym_is_contiguous",
    "executorch_prim::et_view.default",
    *(f"executorch_prim::{name}.Scalar" for name in (
        "add", "sub", "mul", "truediv", "floordiv", "mod", "eq", "gt", "lt", "ge", "le", "neg", "ceil", "round",
        "trunc", "sym_float", "sym_int", "sym_ite", "sym_max", "sym_min", "sym_not")),
)
