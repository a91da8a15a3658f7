"""Probe calls for every core ATen operator: templates over a `Draw` (see `kernel_probe`).

Values are chosen so that every dtype eager accepts computes something well defined:
divisors and exponents are non-zero and small, indices are valid, norms get positive
variances. Each template returns ``(args, kwargs)``; an operator has one template, or one
per operand shape that promotes differently. `WRONG` lists the combinations a kernel
supports but is known to compute wrongly, which the spec leaves out until it is fixed.
"""

from __future__ import annotations

import torch

from tools.qa.kernel_probe import Draw, Template, Wrong

__all__ = ["TEMPLATES", "WRONG"]

L, B, C64 = torch.int64, torch.bool, torch.complex64
ALL3 = [True, True, True]


def call(*args, **kwargs) -> tuple[tuple, dict]:
    return args, kwargs


def unary(d: Draw):
    return call(d.tensor(3, 4))


def binary(a: tuple, b: tuple) -> Template:
    return lambda d: call(d.tensor(*a), d.tensor(*b))


def with_alpha(a: tuple, b: tuple) -> Template:
    return lambda d: call(d.tensor(*a), d.tensor(*b), alpha=d.scalar(2))


def where(a: tuple, b: tuple) -> Template:
    return lambda d: call(d.tensor(3, 4, dtype=B), d.tensor(*a), d.tensor(*b))


def with_scalar(value) -> Template:
    return lambda d: call(d.tensor(3, 4), d.scalar(value))


def along(*args, **kwargs) -> Template:
    """A (3, 4) tensor followed by fixed arguments."""
    return lambda d: call(d.tensor(3, 4), *args, **kwargs)


def of_shape(shape, *args, **kwargs) -> Template:
    return lambda d: call(d.tensor(*shape), *args, **kwargs)


def factory(*args) -> Template:
    return lambda d: call(*args, dtype=d.dtype())


def reduce_with_dtype(*args) -> Template:
    return lambda d: call(d.tensor(3, 4), *args, dtype=d.dtype(optional=True))


def index_of(d: Draw, data) -> torch.Tensor:
    return d.tensor(data=data, dtype=L)


def scatter(*extra) -> Template:
    return lambda d: call(d.tensor(3, 4), 1, index_of(d, [[0, 1], [2, 3], [3, 0]]), d.tensor(3, 2), *extra)


def norm_args(d: Draw, channels: int) -> tuple[torch.Tensor, torch.Tensor]:
    return d.tensor(channels), d.tensor(channels)


def batch_norm(running_stats: bool, *training: bool) -> Template:
    """input, weight, bias, [running mean, running var], [training], momentum, eps."""

    def template(d):
        stats = (d.tensor(3), d.tensor(3, low=0.5, high=2)) if running_stats else ()
        return call(d.tensor(2, 3, 4), *norm_args(d, 3), *stats, *training, 0.1, 1e-5)

    return template


_UNARY = [
    "abs",
    "acos",
    "acosh",
    "alias",
    "asin",
    "asinh",
    "atan",
    "atanh",
    "bitwise_not",
    "ceil",
    "clone",
    "cos",
    "cosh",
    "erf",
    "exp",
    "expm1",
    "floor",
    "isinf",
    "isnan",
    "log",
    "log10",
    "log1p",
    "log2",
    "logical_not",
    "neg",
    "nonzero",
    "reciprocal",
    "relu",
    "round",
    "rsqrt",
    "sigmoid",
    "sign",
    "sin",
    "sinh",
    "sqrt",
    "tan",
    "tanh",
    "trunc",
    "any",
    "sym_numel",
    "sym_storage_offset",
    "sym_is_contiguous",
]
_BINARY = [
    "atan2",
    "bitwise_and.Tensor",
    "bitwise_or.Tensor",
    "bitwise_xor.Tensor",
    "div.Tensor",
    "eq.Tensor",
    "fmod.Tensor",
    "ge.Tensor",
    "gt.Tensor",
    "le.Tensor",
    "logical_and",
    "logical_or",
    "logical_xor",
    "lt.Tensor",
    "maximum",
    "minimum",
    "mul.Tensor",
    "ne.Tensor",
    "remainder.Tensor",
]
_WITH_SCALAR = [
    "bitwise_and.Scalar",
    "bitwise_or.Scalar",
    "bitwise_xor.Scalar",
    "div.Scalar",
    "eq.Scalar",
    "fill.Scalar",
    "fmod.Scalar",
    "ge.Scalar",
    "gt.Scalar",
    "le.Scalar",
    "lt.Scalar",
    "mul.Scalar",
    "ne.Scalar",
    "remainder.Scalar",
    "pow.Tensor_Scalar",
]

# Operand shapes of the operators with two tensor operands: broadcasting, and a 0-dim operand
# on either side (a Python scalar the Edge dialect turned into a tensor: its own promotion rule).
_SHAPES = [((3, 4), (4,)), ((3, 4), ()), ((), (3, 4))]
_PAIRWISE = {
    **{name: binary for name in _BINARY},
    "add.Tensor": with_alpha,
    "sub.Tensor": with_alpha,
    "where.self": where,
}

_SINGLE: dict[str, Template] = {
    **{f"aten::{name}": unary for name in _UNARY},
    **{f"aten::{name}": with_scalar(3) for name in _WITH_SCALAR},
    "aten::add.Scalar": lambda d: call(d.tensor(3, 4), d.scalar(3), d.scalar(2)),
    "aten::sub.Scalar": lambda d: call(d.tensor(3, 4), d.scalar(3), d.scalar(2)),
    "aten::atan2.out": lambda d: call(d.tensor(3, 4), d.tensor(4), out=d.tensor(3, 4)),
    "aten::div.Tensor_mode": lambda d: call(d.tensor(3, 4), d.tensor(4), rounding_mode="floor"),
    "aten::div.Scalar_mode": lambda d: call(d.tensor(3, 4), d.scalar(3), rounding_mode="trunc"),
    "aten::pow.Tensor_Tensor": lambda d: call(d.tensor(3, 4, low=-3, high=3), d.tensor(4, low=0, high=3)),
    "aten::pow.Scalar": lambda d: call(d.scalar(2), d.tensor(3, 4, low=0, high=3)),
    "aten::clamp": lambda d: call(d.tensor(3, 4), d.scalar(-2), d.scalar(3)),
    "aten::clamp.Tensor": lambda d: call(d.tensor(3, 4), d.tensor(4, low=-4, high=1), d.tensor(3, 4, low=0, high=5)),
    "aten::hardtanh": lambda d: call(d.tensor(3, 4), d.scalar(-2), d.scalar(3)),
    "aten::leaky_relu": with_scalar(0.1),
    "aten::elu": with_scalar(1.5),
    "aten::gelu": along(approximate="tanh"),
    "aten::_local_scalar_dense": of_shape((1,)),
    "aten::sym_size.int": along(1),
    "aten::sym_stride.int": along(0),
    # matrix products
    "aten::addmm": lambda d: call(d.tensor(3, 5), d.tensor(3, 4), d.tensor(4, 5)),
    "aten::bmm": lambda d: call(d.tensor(2, 3, 4), d.tensor(2, 4, 5)),
    "aten::mm": lambda d: call(d.tensor(3, 4), d.tensor(4, 5)),
    "aten::_cdist_forward": lambda d: call(d.tensor(3, 4), d.tensor(5, 4), 2.0, None),
    "aten::_pdist_forward": of_shape((4, 3), 2.0),
    # reductions
    "aten::amax": along([1]),
    "aten::amin": along([1]),
    "aten::any.dim": along(1),
    "aten::any.dims": along([1]),
    "aten::argmax": along(1),
    "aten::argmin": along(1),
    "aten::max.dim": along(1),
    "aten::min.dim": along(1),
    "aten::cumsum": reduce_with_dtype(1),
    "aten::mean": reduce_with_dtype(),
    "aten::mean.dim": reduce_with_dtype([1]),
    "aten::sum.dim_IntList": reduce_with_dtype([1]),
    "aten::prod": lambda d: call(d.tensor(3, 4, low=-3, high=3), dtype=d.dtype(optional=True)),
    "aten::prod.dim_int": lambda d: call(d.tensor(3, 4, low=-3, high=3), 1, dtype=d.dtype(optional=True)),
    "aten::var.correction": lambda d: call(d.tensor(3, 4), [1], correction=d.scalar(1)),
    "aten::var.dim": along([1], True),
    "aten::_log_softmax": along(1, False),
    "aten::_softmax": along(1, False),
    "aten::sort": along(1),
    "aten::topk": of_shape((3, 5), 2),
    # shapes, copies and views
    "aten::_to_copy": lambda d: call(d.tensor(3, 4), dtype=d.dtype()),
    "aten::as_strided": along([2, 2], [1, 2], 1),
    "aten::cat": lambda d: call(d.tensors(2, 2, 3), 1),
    "aten::constant_pad_nd": lambda d: call(d.tensor(3, 4), [1, 2], d.scalar(1)),
    "aten::copy": lambda d: call(d.tensor(3, 4), d.tensor(3, 4)),
    "aten::diagonal": along(1, 0, 1),
    "aten::expand": of_shape((3, 1), [3, 4]),
    "aten::flip": along([0]),
    "aten::permute": of_shape((2, 3, 4), [2, 0, 1]),
    "aten::repeat": of_shape((2, 3), [2, 1, 2]),
    "aten::resize_": along([2, 3]),
    "aten::select.int": along(1, 2),
    "aten::slice.Tensor": along(1, 1, 3),
    "aten::split_with_sizes": of_shape((4, 3), [1, 3]),
    "aten::squeeze.dim": of_shape((3, 1, 4), 1),
    "aten::squeeze.dims": of_shape((3, 1, 4), [1]),
    "aten::unsqueeze": along(1),
    "aten::view": along([4, 3]),
    # factories
    "aten::full": lambda d: call([2, 3], d.scalar(2), dtype=d.dtype()),
    "aten::full_like": lambda d: call(d.tensor(3, 4), d.scalar(2), dtype=d.dtype(optional=True)),
    "aten::scalar_tensor": lambda d: call(d.scalar(2), dtype=d.dtype()),
    "aten::arange.start_step": lambda d: call(d.scalar(0), d.scalar(5), d.scalar(1), dtype=d.dtype()),
    "aten::empty.memory_format": factory([2, 3]),
    "aten::empty_strided": factory([2, 3], [3, 1]),
    "aten::rand": factory([2, 3]),
    "aten::randn": factory([2, 3]),
    "aten::randperm": factory(5),
    "aten::native_dropout": along(0.5, True),
    # indexing and scattering
    "aten::gather": lambda d: call(d.tensor(3, 4), 1, index_of(d, [[0, 3], [1, 1], [2, 0]])),
    # indices [1, 0] read as a boolean (or byte) mask select row 0 of 2
    "aten::index.Tensor": lambda d: call(d.tensor(2, 4), [index_of(d, [1, 0])]),
    "aten::index_put": lambda d: call(d.tensor(2, 4), [index_of(d, [1, 0])], d.tensor(4), False),
    "aten::index_select": lambda d: call(d.tensor(3, 4), 0, index_of(d, [2, 0])),
    "aten::masked_scatter": lambda d: call(d.tensor(3, 4), d.tensor(3, 4, dtype=B), d.tensor(12)),
    "aten::scatter.src": scatter(),
    "aten::scatter_add": scatter(),
    "aten::scatter_reduce.two": scatter("sum"),
    "aten::scatter.value": lambda d: call(d.tensor(3, 4), 1, index_of(d, [[0, 1], [2, 3], [3, 0]]), d.scalar(2)),
    "aten::select_scatter": lambda d: call(d.tensor(3, 4), d.tensor(4), 0, 1),
    "aten::slice_scatter": lambda d: call(d.tensor(3, 4), d.tensor(3, 2), 1, 0, 2),
    "aten::embedding": lambda d: call(d.tensor(5, 3), index_of(d, [0, 4, 2, 2])),
    "aten::embedding_dense_backward": lambda d: call(d.tensor(4, 3), index_of(d, [0, 4, 2, 2]), 5, -1, False),
    "aten::_embedding_bag": lambda d: call(
        d.tensor(5, 3), index_of(d, [0, 4, 2, 2, 1, 3]), index_of(d, [0, 2, 4]), False, 0
    ),
    # convolution, pooling, padding, resampling
    "aten::convolution": lambda d: call(
        d.tensor(1, 2, 5, 5), d.tensor(3, 2, 3, 3), d.tensor(3), [1, 1], [1, 1], [1, 1], False, [0, 0], 1
    ),
    "aten::convolution_backward": lambda d: call(
        d.tensor(1, 3, 5, 5),
        d.tensor(1, 2, 5, 5),
        d.tensor(3, 2, 3, 3),
        [3],
        [1, 1],
        [1, 1],
        [1, 1],
        False,
        [0, 0],
        1,
        ALL3,
    ),
    "aten::avg_pool1d": of_shape((1, 2, 6), [2]),
    "aten::avg_pool2d": of_shape((1, 2, 5, 5), [2, 2]),
    "aten::avg_pool3d": of_shape((1, 1, 4, 4, 4), [2, 2, 2]),
    "aten::avg_pool2d_backward": lambda d: call(
        d.tensor(1, 2, 2, 2), d.tensor(1, 2, 5, 5), [2, 2], [2, 2], [0, 0], False, True, None
    ),
    "aten::adaptive_avg_pool1d": of_shape((1, 2, 6), [3]),
    "aten::_adaptive_avg_pool2d": of_shape((1, 2, 6, 6), [3, 3]),
    "aten::_adaptive_avg_pool3d": of_shape((1, 1, 4, 4, 4), [2, 2, 2]),
    "aten::_adaptive_avg_pool2d_backward": lambda d: call(d.tensor(1, 2, 3, 3), d.tensor(1, 2, 6, 6)),
    "aten::max_pool2d_with_indices": of_shape((1, 2, 4, 4), [2, 2]),
    "aten::max_pool3d_with_indices": of_shape((1, 1, 4, 4, 4), [2, 2, 2]),
    "aten::max_pool2d_with_indices_backward": lambda d: call(
        d.tensor(1, 2, 2, 2),
        d.tensor(1, 2, 4, 4),
        [2, 2],
        [2, 2],
        [0, 0],
        [1, 1],
        False,
        index_of(d, [[[[0, 2], [8, 10]], [[5, 7], [13, 15]]]]),
    ),
    "aten::reflection_pad1d": of_shape((1, 2, 5), [1, 2]),
    "aten::reflection_pad2d": of_shape((1, 2, 4, 4), [1, 1, 2, 1]),
    "aten::reflection_pad3d": of_shape((1, 1, 3, 3, 3), [1, 1, 1, 1, 1, 1]),
    "aten::replication_pad2d": of_shape((1, 2, 4, 4), [1, 1, 2, 1]),
    "aten::replication_pad3d": of_shape((1, 1, 3, 3, 3), [1, 1, 1, 1, 1, 1]),
    "aten::upsample_bilinear2d.vec": of_shape((1, 2, 3, 3), [5, 6], False, None),
    "aten::upsample_nearest2d.vec": of_shape((1, 2, 3, 3), [5, 6], None),
    "aten::grid_sampler_2d": lambda d: call(d.tensor(1, 2, 4, 4), d.tensor(1, 3, 3, 2, low=-1, high=1), 0, 0, False),
    "aten::col2im": of_shape((1, 8, 4), [3, 3], [2, 2], [1, 1], [0, 0], [1, 1]),
    "aten::_fft_r2c": of_shape((4, 6), [1], 0, True),
    "aten::_fft_c2r": lambda d: call(d.tensor(4, 4, dtype=C64), [1], 0, 6),
    # normalization
    "aten::native_layer_norm": lambda d: call(d.tensor(2, 3, 4), [4], *norm_args(d, 4), 1e-5),
    "aten::native_layer_norm_backward": lambda d: call(
        d.tensor(2, 3, 4),
        d.tensor(2, 3, 4),
        [4],
        d.tensor(2, 3, 1),
        d.tensor(2, 3, 1, low=0.5, high=2),
        *norm_args(d, 4),
        ALL3,
    ),
    "aten::native_group_norm": lambda d: call(d.tensor(2, 4, 3), *norm_args(d, 4), 2, 4, 3, 2, 1e-5),
    "aten::native_group_norm_backward": lambda d: call(
        d.tensor(2, 4, 3),
        d.tensor(2, 4, 3),
        d.tensor(2, 2),
        d.tensor(2, 2, low=0.5, high=2),
        d.tensor(4),
        2,
        4,
        3,
        2,
        ALL3,
    ),
    "aten::_native_batch_norm_legit": batch_norm(True, True),
    "aten::_native_batch_norm_legit.no_stats": batch_norm(False, True),
    "aten::_native_batch_norm_legit_no_training": batch_norm(True),
}

TEMPLATES: dict[str, tuple[Template, ...]] = {
    **{name: (template,) for name, template in _SINGLE.items()},
    **{f"aten::{name}": tuple(make(a, b) for a, b in _SHAPES) for name, make in _PAIRWISE.items()},
    # one tensor bound too: clamp_min/clamp_max, the only calls eager computes for bool
    "aten::clamp.Tensor": (
        _SINGLE["aten::clamp.Tensor"],
        lambda d: call(d.tensor(3, 4), d.tensor(4, low=-4, high=1), None),
        lambda d: call(d.tensor(3, 4), None, d.tensor(3, 4, low=0, high=5)),
    ),
}

WRONG: dict[str, Wrong] = {}
