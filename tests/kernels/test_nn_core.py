"""Core ATen NN kernels against PyTorch eager: convolutions (1-3 d, grouped, transposed),
pooling, padding, resizing, grid sampling, norms, fold/unfold, backward ops and FFTs.

Cases come from tables of (operator, reference, argument configurations, dtypes); every
configuration runs in every dtype of its row, bfloat16 included (the harness feeds the
kernel ml_dtypes arrays and compares in float32).
"""

import math

import numpy as np
import pytest
import torch

from tests.kernels.harness import (
    BF16,
    F16,
    F32,
    F64,
    FLOATS,
    I8,
    I16,
    I32,
    I64,
    U8,
    Case,
    assert_close,
    positive,
    rand,
    run_case,
    to_kernel_arg,
)
from torchedge.exir.dtypes import numpy_dtype_of
from torchedge.kernels.dtypes import convert
from torchedge.kernels.registry import get_kernel

aten = torch.ops.aten
TOL = {F16: (1e-2, 1e-2), BF16: (3e-2, 3e-2), F32: (1e-4, 1e-4), F64: (1e-10, 1e-10)}


def _cases(op, ref, configs, dtypes, tol=None, name=None):
    """One case per (configuration, dtype); a configuration maps a dtype to the arguments."""
    name = name or op.split("::")[1].split(".")[0]
    for i, config in enumerate(configs):
        for dtype in dtypes:
            rtol, atol = (tol or TOL).get(dtype, (None, None))
            yield Case(op, ref, config(dtype), rtol=rtol, atol=atol, id=f"{name}-{i}-{str(dtype)[6:]}").param()


# -- convolution ------------------------------------------------------------------------------


def _conv(x, w, b, stride, padding, dilation, transposed, output_padding, groups):
    return aten.convolution.default(x, w, b, stride, padding, dilation, transposed, output_padding, groups)


CONVOLUTIONS = [  # input, weight, stride, padding, dilation, transposed, output_padding, groups, bias
    ((2, 3, 11), (4, 3, 3), [2], [1], [1], False, [0], 1, True),
    ((1, 4, 9, 8), (4, 1, 3, 3), [2, 2], [1, 1], [1, 1], False, [0, 0], 4, True),  # depthwise, stride 2
    ((2, 6, 5, 6, 7), (4, 3, 3, 2, 3), [1, 2, 1], [1, 0, 2], [1, 1, 2], False, [0, 0, 0], 2, True),
    ((1, 3, 4, 5, 4), (6, 1, 1, 1, 1), [1], [0], [1], False, [0, 0, 0], 3, False),  # pointwise 3-d depthwise
    ((2, 4, 5, 6), (12, 4, 1, 1), [1, 1], [0, 0], [1, 1], False, [0, 0], 1, True),  # expansion: bias in the GEMM
    ((1, 4, 3, 7), (16, 2, 1, 1), [1, 1], [0, 0], [1, 1], False, [0, 0], 2, True),  # ... grouped
    ((2, 4, 5, 6), (4, 3, 3, 3), [2, 2], [1, 1], [1, 1], True, [1, 0], 1, True),
    ((1, 4, 5, 4), (4, 2, 3, 2), [2, 3], [0, 1], [2, 1], True, [1, 2], 2, True),
    ((2, 3, 7), (3, 2, 4), [3], [2], [1], True, [1], 1, False),
    ((1, 2, 3, 4, 3), (2, 3, 2, 3, 2), [2, 1, 2], [1, 0, 0], [1, 2, 1], True, [1, 0, 0], 1, True),
    ((1, 6, 5, 5), (6, 1, 3, 3), [1, 1], [1, 1], [1, 1], True, [0, 0], 6, True),  # depthwise transposed
    ((2, 3, 12, 8), (5, 3, 4, 4), [4, 4], [0, 0], [1, 1], False, [0, 0], 1, True),  # patches (ViT-style)
    ((1, 4, 10, 9), (6, 2, 2, 3), [4, 3], [0, 0], [1, 1], False, [0, 0], 2, False),  # gaps, cut edge, grouped
    ((2, 3, 7), (4, 3, 1), [2], [0], [1], False, [0], 1, True),  # strided 1x1
    ((1, 2, 4, 6, 6), (3, 2, 2, 2, 3), [2, 3, 3], [0, 0, 0], [1, 1, 1], False, [0, 0, 0], 1, True),
    ((1, 32, 10, 14), (4, 16, 3, 3), [1, 1], [2, 1], [1, 2], False, [0, 0], 2, True),  # per kernel column, dilated
    ((2, 16, 20), (4, 16, 3), [1], [1], [1], False, [0], 1, True),  # one GEMM per tap (1-d)
    # depthwise on planes large enough to sum tap by tap: multiplier 2, dilated; strided, no bias
    ((2, 3, 46, 47), (6, 1, 3, 3), [1, 1], [1, 2], [1, 2], False, [0, 0], 3, True),
    ((1, 4, 100, 90), (4, 1, 5, 5), [2, 2], [2, 2], [1, 1], False, [0, 0], 4, False),
    # depthwise on small planes of many channels, channels-last; strided without bias
    ((2, 256, 8, 7), (256, 1, 3, 3), [1, 1], [1, 1], [1, 1], False, [0, 0], 256, True),
    ((1, 300, 13, 14), (300, 1, 3, 3), [2, 2], [1, 0], [1, 1], False, [0, 0], 300, False),
    # ... dilated 5x3 taps, columns that read padding only; taps that read nothing but padding
    ((1, 256, 9, 8), (256, 1, 5, 3), [1, 2], [2, 3], [2, 1], False, [0, 0], 256, True),
    ((2, 256, 1, 8), (256, 1, 3, 3), [5, 1], [2, 1], [1, 1], False, [0, 0], 256, True),
    # Winograd F(2x2, 3x3): batched, an odd output width; unequal padding, an odd height, no bias
    ((2, 48, 12, 11), (48, 48, 3, 3), [1, 1], [1, 1], [1, 1], False, [0, 0], 1, True),
    ((1, 50, 13, 15), (64, 50, 3, 3), [1, 1], [0, 2], [1, 1], False, [0, 0], 1, False),
]


def _conv_config(xs, ws, stride, padding, dilation, transposed, output_padding, groups, bias):
    out_channels = ws[1] * groups if transposed else ws[0]

    def make(dtype):
        low, high = (-3, 3) if dtype.is_floating_point else (-2, 2)
        return (
            rand(*xs, dtype=dtype, low=low, high=high),
            rand(*ws, dtype=dtype, low=low, high=high),
            rand(out_channels, dtype=dtype, low=low, high=high) if bias else None,
            stride,
            padding,
            dilation,
            transposed,
            output_padding,
            groups,
        )

    return make


def _convolution_cases():
    configs = [_conv_config(*c) for c in CONVOLUTIONS]
    tol = {**TOL, F16: (2e-2, 5e-2), BF16: (5e-2, 2e-1)}
    yield from _cases("aten::convolution.out", _conv, configs, FLOATS, tol)
    plain = [c for c, spec in zip(configs, CONVOLUTIONS) if not spec[5]]
    yield from _cases("aten::convolution.out", _conv, plain, [I32, I8], name="convolution-int")
    transposed = [c for c, spec in zip(configs, CONVOLUTIONS) if spec[5]]
    yield from _cases("aten::convolution.out", _conv, transposed[:1], [I64, I32], name="convolution-transposed-int")
    yield Case(
        "aten::convolution.out",
        _conv,
        (rand(2, 3, 6, 6), rand(4, 3, 3, 3), None, [1, 1], [0, 0], [1, 1], True, [2, 0], 1),
        id="convolution-bad-output-padding",
    ).param()


INT_CONVOLUTIONS = [  # input, weight, stride, padding, groups: each path of conv_forward
    ((2, 8, 5, 6), (6, 8, 1, 1), [1, 1], [0, 0], 1),  # pointwise (int64: the input is the column matrix)
    ((2, 3, 5, 6), (8, 3, 1, 1), [1, 1], [0, 0], 1),  # ... an expansion: (int64) the bias as a row of ones
    ((1, 2, 4, 30), (3, 2, 3, 3), [1, 1], [0, 0], 1),  # im2col over whole rows, the bias as a column
    ((1, 300, 2, 30), (300, 300, 1, 3), [1, 1], [0, 0], 1),  # ... large weights: the bias in the extraction
    ((1, 2, 5, 5), (3, 2, 3, 3), [1, 1], [1, 1], 1),  # im2col position by position
    ((1, 16, 12, 12), (4, 16, 3, 3), [1, 1], [1, 1], 1),  # one GEMM per kernel column
    ((1, 16, 12, 12), (4, 16, 3, 3), [2, 2], [1, 1], 1),  # one GEMM per tap (strided)
    ((2, 4, 7, 7), (8, 1, 3, 3), [2, 2], [1, 1], 4),  # depthwise, multiplier 2
    ((1, 2, 48, 48), (4, 1, 3, 3), [1, 1], [1, 1], 2),  # depthwise tap by tap, multiplier 2
    ((1, 256, 7, 7), (256, 1, 3, 3), [1, 1], [1, 1], 256),  # depthwise channels-last
    ((2, 3, 11), (4, 3, 3), [2], [1], 1),
    ((1, 4, 4, 5, 4), (4, 2, 3, 1, 3), [1, 1, 1], [1, 0, 1], 2),
    ((2, 4, 9, 8), (6, 2, 2, 2), [3, 2], [0, 0], 2),  # windows that do not overlap: one strided copy
]
BIASES = [-0.5, 2.7, -3.7, 200.7, -200.5, 0.99]  # truncated to the output dtype, wrapping (`convert`)


def _conv_converting_bias(x, w, b, *rest):
    """Eager's integer convolution with a float bias converted first, as torchedge defines it
    (`convert`): eager's own conversion of -3.7 to uint8 or 200.7 to int8 is undefined in C."""
    if b is not None and b.is_floating_point():
        b = torch.from_numpy(convert(b.double().numpy(), numpy_dtype_of(x.dtype)))
    return _conv(x, w, b, *rest)


def _int_conv_config(xs, ws, stride, padding, groups, bias_dtype):
    def make(dtype):
        low = 0 if dtype == U8 else -2
        bias = None if bias_dtype is None else torch.tensor(BIASES * ws[0])[: ws[0]].to(bias_dtype)
        return (
            rand(*xs, dtype=dtype, low=low, high=2),
            rand(*ws, dtype=dtype, low=low, high=2),
            bias,
            stride,
            padding,
            [1] * len(stride),
            False,
            [0] * len(stride),
            groups,
        )

    return make


def _int_convolution_float_bias_cases():
    for i, spec in enumerate(INT_CONVOLUTIONS):
        for dtype, bias_dtype in [(I64, F32), (I32, F64), (U8, F16), (I8, BF16), (I16, F32), (I32, None)]:
            yield Case(
                "aten::convolution.out",
                _conv_converting_bias,
                _int_conv_config(*spec, bias_dtype)(dtype),
                id=f"convolution-int-{i}-{str(dtype)[6:]}-bias-{str(bias_dtype)[6:] or None}",
            ).param()
    x, w = rand(2, 4, 5, 6, dtype=I64), rand(4, 3, 3, 3, dtype=I64)
    for bias in [torch.tensor([1.5, -2.5, 3.0]), torch.tensor([1, -2, 3], dtype=I32)]:  # ATen refuses the float
        yield Case(
            "aten::convolution.out",
            _conv,
            (x, w, bias, [2, 2], [1, 1], [1, 1], True, [1, 0], 1),
            id=f"convolution-transposed-int-bias-{str(bias.dtype)[6:]}",
        ).param()


# -- pooling ----------------------------------------------------------------------------------


def _pooling_cases():
    x3 = rand(2, 3, 6, 7, 5, dtype=F64)
    max3d = [
        ([2, 2, 2], [], [0, 0, 0], [1, 1, 1], False),
        ([3, 2, 3], [2, 1, 2], [1, 1, 1], [1, 2, 1], True),
        ([3, 3, 3], [2, 2, 2], [1, 0, 1], [1, 1, 1], False),
    ]
    yield from _cases(
        "aten::max_pool3d_with_indices.out",
        aten.max_pool3d_with_indices.default,
        [lambda dt, c=c: (x3.to(dt), *c) for c in max3d],
        FLOATS + [I32, I8],
    )
    avg3d = [
        ([2, 2, 2], [], [0, 0, 0], False, True, None),
        ([3, 2, 3], [2, 1, 2], [1, 1, 1], True, False, None),
        ([3, 3, 3], [2, 2, 2], [1, 0, 1], False, True, 5),
        ([2, 3, 2], [1, 2, 2], [1, 1, 0], True, True, None),
    ]
    yield from _cases(
        "aten::avg_pool3d.out",
        aten.avg_pool3d.default,
        [lambda dt, c=c: ((x3 * 3).to(dt), *c) for c in avg3d],
        [F32, F64, I64],
    )
    adaptive3d = [[1, 1, 1], [3, 4, 5], [4, 5, 3], [6, 7, 5], [2, 3, 2]]
    yield from _cases(
        "aten::_adaptive_avg_pool3d.out",
        aten._adaptive_avg_pool3d.default,
        [lambda dt, s=s: (x3.to(dt), s) for s in adaptive3d] + [lambda dt: (x3[0].to(dt), [2, 2, 2])],
        FLOATS,
    )
    x2 = rand(2, 3, 9, 10, dtype=F64)
    yield from _cases(
        "aten::max_pool2d_with_indices.out",
        aten.max_pool2d_with_indices.default,
        [lambda dt: (x2.to(dt), [3, 3], [2, 2], [1, 1], [1, 1], True)],
        [F16, BF16, I8, U8, I64],
        name="max_pool2d-dtypes",
    )
    yield from _cases(
        "aten::avg_pool2d.out",
        aten.avg_pool2d.default,
        [lambda dt: (x2.to(dt), [3, 2], [2, 2], [1, 1], True, False, None)],
        [F16, BF16],
        name="avg_pool2d-dtypes",
    )
    yield from _cases(
        "aten::_adaptive_avg_pool2d.out",
        aten._adaptive_avg_pool2d.default,
        [lambda dt: (x2.to(dt), [4, 3])],
        [F16, BF16],
        name="adaptive2d-dtypes",
    )


# -- padding ----------------------------------------------------------------------------------


def _padding_cases():
    shapes = {1: (2, 3, 6), 2: (2, 3, 5, 6), 3: (1, 2, 4, 5, 6)}
    pads = {
        1: [[2, 3], [0, 5], [-1, 2]],
        2: [[1, 2, 3, 0], [4, 4, 4, 4], [-2, 1, 0, -1]],
        3: [[1, 2, 0, 3, 2, 1], [3, 3, 1, 0, 0, 2], [-1, 2, 1, -2, 1, 0]],
    }
    for mode in ["reflection", "replication"]:
        for dims, shape in shapes.items():
            x = rand(*shape, dtype=F64)
            configs = [lambda dt, p=p, x=x: (x.to(dt), p) for p in pads[dims]]
            configs.append(lambda dt, p=pads[dims][0], x=x: (x[0].to(dt), p))  # unbatched
            op = f"{mode}_pad{dims}d"
            yield from _cases(f"aten::{op}.out", getattr(aten, op).default, configs, [F32, BF16, I64])
            yield from _cases(
                f"aten::{op}.out", getattr(aten, op).default, configs[:1], [F16, F64, U8], name=f"{op}-dtypes"
            )
    yield Case(
        "aten::reflection_pad2d.out",
        aten.reflection_pad2d.default,
        (rand(1, 2, 3, 3), [3, 0, 0, 0]),
        id="reflection_pad2d-too-wide",
    ).param()
    yield Case(
        "aten::reflection_pad1d.out",
        aten.reflection_pad1d.default,
        (rand(2, 3), [-2, 2]),
        id="reflection_pad1d-mirrors-the-cropped-part",
    ).param()


# -- resizing and grid sampling ---------------------------------------------------------------


def _resize_cases():
    x, long = rand(2, 3, 5, 7, dtype=F64), rand(1, 2, 3, 100, dtype=F64)
    sizes = [([9, 13], None), ([3, 4], None), ([10, 14], None), ([5, 7], None), (None, [1.7, 2.3]), (None, [0.6, 2.0])]
    nearest = [lambda dt, s=s: (x.to(dt), *s) for s in sizes]
    yield from _cases("aten::upsample_nearest2d.vec_out", aten.upsample_nearest2d.vec, nearest, FLOATS + [U8])
    bilinear = [lambda dt, s=s, ac=ac: (x.to(dt), s[0], ac, s[1]) for s in sizes for ac in [False, True]]
    yield from _cases("aten::upsample_bilinear2d.vec_out", aten.upsample_bilinear2d.vec, bilinear, FLOATS)
    fixed = [  # op, reference, arguments after the input
        ("upsample_nearest2d", [[9, 13], 1.9, 2.1], x),
        ("upsample_bilinear2d", [[9, 13], False, 1.9, 2.1], x),
        ("upsample_bilinear2d", [[4, 13], True, None, None], x),
        ("upsample_bicubic2d", [[9, 13], False, None, None], x),
        ("upsample_bicubic2d", [[3, 5], True, None, None], x),
        ("_upsample_nearest_exact2d", [[9, 13], None, None], x),
        ("_upsample_nearest_exact2d", [[3, 4], None, None], x),
        ("upsample_nearest1d", [[11], None], x[0]),
        ("upsample_linear1d", [[11], False, None], x[0]),
        ("upsample_linear1d", [[4], True, 0.7], x[0]),
        ("upsample_nearest3d", [[3, 9, 4], None, None, None], x[None]),
        ("upsample_trilinear3d", [[3, 9, 4], False, None, None, None], x[None]),
        ("upsample_trilinear3d", [[7, 3, 8], True, None, None, None], x[None]),
        ("upsample_bilinear2d", [[5, 130], False, None, None], long),  # long dims take the gather path
        ("upsample_bicubic2d", [[4, 77], True, None, None], long),
    ]
    for i, (name, rest, source) in enumerate(fixed):
        yield from _cases(
            f"aten::{name}.out",
            getattr(aten, name).default,
            [lambda dt, s=source, r=rest: (s.to(dt), *r)],
            [F32, F64, BF16],
            name=f"{name}-{i}",
        )


def _uint8_resize_cases():
    """ATen's fixed-point uint8 path, exactly: up and down, both dims or one, scale factors,
    as few channels as its AVX2 kernel takes (<= 4) and more."""
    sizes = [
        ([9, 13], None),
        ([3, 4], None),
        ([5, 13], None),
        ([9, 7], None),
        ([2, 3], None),
        ([40, 2], None),
        (None, [1.7, 2.3]),
        (None, [0.6, 2.0]),
        (None, [3.0, 0.45]),
    ]
    for c in [3, 5]:
        x = rand(2, c, 5, 7, dtype=U8, low=0, high=255)
        for i, (size, scales) in enumerate(sizes):
            for ac in [False, True]:
                yield Case(
                    "aten::upsample_bilinear2d.vec_out",
                    aten.upsample_bilinear2d.vec,
                    (x, size, ac, scales),
                    id=f"upsample_bilinear2d-uint8-{c}-{i}-{ac}",
                ).param()
                if size is not None:
                    yield Case(
                        "aten::upsample_bicubic2d.out",
                        aten.upsample_bicubic2d.default,
                        (x, size, ac, None, None),
                        id=f"upsample_bicubic2d-uint8-{c}-{i}-{ac}",
                    ).param()
        yield Case(
            "aten::upsample_bilinear2d.out",
            aten.upsample_bilinear2d.default,
            (x, [9, 13], False, 1.9, 2.1),
            id=f"upsample_bilinear2d-uint8-scales-{c}",
        ).param()
        yield Case(
            "aten::upsample_bicubic2d.out",
            aten.upsample_bicubic2d.default,
            (x, [4, 9], False, 0.9, 1.4),
            id=f"upsample_bicubic2d-uint8-scales-{c}",
        ).param()
    x = rand(1, 2, 3, 40, dtype=U8, low=0, high=255)
    yield Case(
        "aten::upsample_linear1d.out",
        aten.upsample_linear1d.default,
        (x[0], [11], False, None),
        id="upsample_linear1d-uint8-refused",
    ).param()
    yield Case(
        "aten::upsample_trilinear3d.out",
        aten.upsample_trilinear3d.default,
        (x[None], [2, 4, 9], False, None, None, None),
        id="upsample_trilinear3d-uint8-refused",
    ).param()


def _grid_sampler_cases():
    x = rand(2, 3, 5, 7, dtype=F64)
    grid = rand(2, 4, 6, 2, dtype=F64, low=-1.3, high=1.3)
    grid[0, 0, 0] = torch.tensor([1.0, -1.0])  # exactly on the corners and the centre
    grid[0, 0, 1] = torch.tensor([0.0, 0.0])
    configs = [
        lambda dt, m=m, p=p, ac=ac: (x.to(dt), grid.to(dt), m, p, ac)
        for m in [0, 1, 2]
        for p in [0, 1, 2]
        for ac in [False, True]
    ]
    tol = {**TOL, F16: (2e-2, 5e-2), BF16: (5e-2, 2e-1)}
    yield from _cases("aten::grid_sampler_2d.out", aten.grid_sampler_2d.default, configs, [F32, F64], tol)
    yield from _cases("aten::grid_sampler_2d.out", aten.grid_sampler_2d.default, configs[:2], [F16, BF16], tol)


# -- norms, fold/unfold -----------------------------------------------------------------------


def _norm_cases():
    configs = []
    for shape, group in [((2, 6, 4, 3), 3), ((3, 4, 5), 1), ((2, 8), 4), ((1, 6, 2, 2, 2), 6)]:
        n, c = shape[:2]
        hw = math.prod(shape[2:])
        for affine in [True, False]:
            configs.append(
                lambda dt, s=shape, a=affine, g=group, n=n, c=c, hw=hw: (
                    rand(*s, dtype=dt) * 2 + 1,
                    rand(c, dtype=dt) if a else None,
                    rand(c, dtype=dt) if a else None,
                    n,
                    c,
                    hw,
                    g,
                    1e-5,
                )
            )
    yield from _cases("aten::native_group_norm.out", aten.native_group_norm.default, configs, FLOATS)
    no_stats = [
        lambda dt, s=s, a=a: (
            rand(*s, dtype=dt) * 2 + 1,
            rand(s[1], dtype=dt) if a else None,
            rand(s[1], dtype=dt) if a else None,
            True,
            0.1,
            1e-5,
        )
        for s in [(4, 3, 5, 2), (6, 4), (2, 3, 2, 2, 2)]
        for a in [True, False]
    ]
    yield from _cases(
        "aten::_native_batch_norm_legit.no_stats_out", aten._native_batch_norm_legit.no_stats, no_stats, FLOATS
    )


def _fold_cases():
    unfold = [((2, 3, 6, 7), [3, 2], [1, 2], [1, 0], [2, 1]), ((3, 5, 5), [2, 2], [1, 1], [0, 0], [1, 1])]
    yield from _cases(
        "aten::im2col.out",
        aten.im2col.default,
        [lambda dt, c=c: (rand(*c[0], dtype=dt), *c[1:]) for c in unfold],
        FLOATS,
    )
    fold = [
        ((2, 12, 15), [6, 7], [3, 2], [1, 2], [1, 0], [2, 1]),
        ((8, 16), [5, 5], [2, 2], [1, 1], [0, 0], [1, 1]),
        ((1, 18, 9), [5, 6], [3, 3], [2, 1], [1, 1], [1, 2]),
    ]
    yield from _cases(
        "aten::col2im.out", aten.col2im.default, [lambda dt, c=c: (rand(*c[0], dtype=dt), *c[1:]) for c in fold], FLOATS
    )
    yield Case(
        "aten::col2im.out",
        aten.col2im.default,
        (rand(1, 8, 4) > 0, [3, 3], [2, 2], [1, 1], [0, 0], [1, 1]),
        id="col2im-bool",
    ).param()


# -- backward ---------------------------------------------------------------------------------


def _backward_cases():
    for i, spec in enumerate(CONVOLUTIONS):
        xs, ws, stride, padding, dilation, transposed, output_padding, groups, bias = spec
        for dtype in [F32, F64]:
            x, w = rand(*xs, dtype=dtype), rand(*ws, dtype=dtype)
            y = _conv(x, w, None, stride, padding, dilation, transposed, output_padding, groups)
            args = (
                rand(*y.shape, dtype=dtype),
                x,
                w,
                [y.shape[1]] if bias else None,
                stride,
                padding,
                dilation,
                transposed,
                output_padding,
                groups,
                [True, True, True],
            )
            yield Case(
                "aten::convolution_backward.out",
                aten.convolution_backward.default,
                args,
                rtol=1e-4,
                atol=1e-4,
                id=f"convolution_backward-{i}-{str(dtype)[6:]}",
            ).param()
    x = rand(2, 3, 9, 10, dtype=F64)
    for i, (kernel, stride, padding, ceil, include, divisor) in enumerate(
        [
            ([3, 3], [2, 2], [1, 1], False, True, None),
            ([2, 3], [2, 2], [1, 1], True, False, None),
            ([3, 3], [1, 1], [1, 1], False, True, 4),
            ([2, 2], [2, 2], [0, 0], True, True, None),
        ]
    ):
        y = aten.avg_pool2d(x, kernel, stride, padding, ceil, include, divisor)
        yield from _cases(
            "aten::avg_pool2d_backward.grad_input",
            aten.avg_pool2d_backward.default,
            [
                lambda dt, y=y, c=(kernel, stride, padding, ceil, include, divisor): (
                    rand(*y.shape, dtype=dt),
                    x.to(dt),
                    *c,
                )
            ],
            [F32, F64, BF16],
            name=f"avg_pool2d_backward-{i}",
        )
    for i, config in enumerate(
        [
            ([3, 3], [2, 2], [1, 1], [1, 1], True),
            ([2, 2], [1, 1], [0, 0], [1, 1], False),
            ([3, 2], [1, 2], [1, 1], [2, 1], False),
        ]
    ):
        y, indices = aten.max_pool2d_with_indices(x, *config)
        yield from _cases(
            "aten::max_pool2d_with_indices_backward.grad_input",
            aten.max_pool2d_with_indices_backward.default,
            [lambda dt, y=y, ind=indices, c=config: (rand(*y.shape, dtype=dt), x.to(dt), *c, ind)],
            [F32, F64, F16],
            name=f"max_pool2d_backward-{i}",
        )
    x3 = rand(1, 2, 5, 6, 4, dtype=F64)
    y3, indices3 = aten.max_pool3d_with_indices(x3, [2, 3, 2], [2, 2, 1], [1, 1, 0], [1, 1, 2], True)
    yield from _cases(
        "aten::max_pool3d_with_indices_backward.grad_input",
        aten.max_pool3d_with_indices_backward.default,
        [lambda dt: (rand(*y3.shape, dtype=dt), x3.to(dt), [2, 3, 2], [2, 2, 1], [1, 1, 0], [1, 1, 2], True, indices3)],
        [F32, F64],
    )
    z3 = aten.avg_pool3d(x3, [2, 3, 2], [2, 1, 2], [1, 1, 0], True, False, None)
    yield from _cases(
        "aten::avg_pool3d_backward.grad_input",
        aten.avg_pool3d_backward.default,
        [lambda dt: (rand(*z3.shape, dtype=dt), x3.to(dt), [2, 3, 2], [2, 1, 2], [1, 1, 0], True, False, None)],
        [F32, F64],
    )
    for size in [[4, 3], [9, 10], [1, 1], [5, 7]]:
        yield from _cases(
            "aten::_adaptive_avg_pool2d_backward.out",
            aten._adaptive_avg_pool2d_backward.default,
            [lambda dt, s=size: (rand(2, 3, *s, dtype=dt), x.to(dt))],
            [F32, F64, F16],
            name=f"adaptive2d_backward-{size}",
        )
    yield from _cases(
        "aten::_adaptive_avg_pool3d_backward.out",
        aten._adaptive_avg_pool3d_backward.default,
        [lambda dt: (rand(1, 2, 3, 4, 3, dtype=dt), x3.to(dt))],
        [F32, F64],
    )
    yield from _norm_backward_cases()


def _norm_backward_cases():
    for shape, normalized in [((3, 4, 6), [6]), ((2, 3, 4, 5), [4, 5])]:
        for dtype in [F32, F64]:
            x = rand(*shape, dtype=dtype) * 2 + 1
            w, b = rand(*normalized, dtype=dtype), rand(*normalized, dtype=dtype)
            _, mean, rstd = aten.native_layer_norm(x, normalized, w, b, 1e-5)
            yield Case(
                "aten::native_layer_norm_backward.out",
                aten.native_layer_norm_backward.default,
                (rand(*shape, dtype=dtype), x, normalized, mean, rstd, w, b, [True, True, True]),
                rtol=1e-4,
                atol=1e-4,
                id=f"layer_norm_backward-{shape}-{str(dtype)[6:]}",
            ).param()
    for shape, group in [((2, 6, 4, 3), 3), ((3, 4, 5), 2)]:
        n, c, hw = shape[0], shape[1], math.prod(shape[2:])
        for dtype in [F32, F64]:
            x = rand(*shape, dtype=dtype) * 2 + 1
            w = rand(c, dtype=dtype)
            _, mean, rstd = aten.native_group_norm(x, w, rand(c, dtype=dtype), n, c, hw, group, 1e-5)
            yield Case(
                "aten::native_group_norm_backward.out",
                aten.native_group_norm_backward.default,
                (rand(*shape, dtype=dtype), x, mean, rstd, w, n, c, hw, group, [True, True, True]),
                rtol=1e-4,
                atol=1e-4,
                id=f"group_norm_backward-{shape}-{str(dtype)[6:]}",
            ).param()


# -- FFT --------------------------------------------------------------------------------------


def _fft_cases():
    tol = {F32: (1e-4, 1e-4), F64: (1e-10, 1e-10)}
    for dtype in [F32, F64]:
        x = rand(3, 8, 6, dtype=dtype)
        for norm in [0, 1, 2]:
            for dims, onesided in [([2], True), ([1, 2], True), ([0, 2], False), ([2, 0], True)]:
                yield Case(
                    "aten::_fft_r2c.out",
                    aten._fft_r2c.default,
                    (x, dims, norm, onesided),
                    *tol[dtype],
                    id=f"fft_r2c-{dims}-{norm}-{onesided}-{str(dtype)[6:]}",
                ).param()
            for dims, last in [([2], 10), ([1, 2], 11), ([0], 4)]:
                shape = [3, 8, 5]
                shape[dims[-1]] = last
                spectrum = aten._fft_r2c(rand(*shape, dtype=dtype), dims, 0, True)
                yield Case(
                    "aten::_fft_c2r.out",
                    aten._fft_c2r.default,
                    (spectrum, dims, norm, last),
                    *tol[dtype],
                    id=f"fft_c2r-{dims}-{norm}-{last}-{str(dtype)[6:]}",
                ).param()
            z = torch.complex(x, rand(3, 8, 6, dtype=dtype))
            for dims, forward in [([1], True), ([0, 2], False), ([], True)]:
                yield Case(
                    "aten::_fft_c2c.out",
                    aten._fft_c2c.default,
                    (z, dims, norm, forward),
                    *tol[dtype],
                    id=f"fft_c2c-{dims}-{norm}-{forward}-{str(dtype)[6:]}",
                ).param()


CASES = [
    *_convolution_cases(),
    *_int_convolution_float_bias_cases(),
    *_pooling_cases(),
    *_padding_cases(),
    *_resize_cases(),
    *_uint8_resize_cases(),
    *_grid_sampler_cases(),
    *_norm_cases(),
    *_fold_cases(),
    *_backward_cases(),
    *_fft_cases(),
]


@pytest.mark.parametrize("case", CASES)
def test_nn_core(case):
    run_case(case)


@pytest.mark.parametrize("case", [*_convolution_cases(), *_int_convolution_float_bias_cases()])
def test_portable_convolution(case):
    """The reference convolution itself (the oracle of the optimized one) against eager."""
    run_case(case, library="portable")


# -- batch norm: the running stats are updated in place ---------------------------------------

BATCH_NORMS = [  # input shape, affine, training, momentum
    ((4, 3, 5, 2), True, True, 0.1),
    ((6, 4), False, True, 0.3),
    ((2, 3, 2, 2, 2), True, True, 1.0),
    ((4, 3, 5, 2), True, False, 0.1),
    ((5, 2, 3), False, False, 0.5),
]


@pytest.mark.parametrize("dtype", [F16, F32, F64])
@pytest.mark.parametrize("config", BATCH_NORMS, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}")
def test_batch_norm_legit_updates_running_stats(config, dtype):
    shape, affine, training, momentum = config
    c = shape[1]
    x = rand(*shape, dtype=dtype) * 2 + 1
    w, b = (rand(c, dtype=dtype), rand(c, dtype=dtype)) if affine else (None, None)
    running = [rand(c, dtype=dtype), positive(c, dtype=dtype)]
    expected_running = [r.clone() for r in running]
    wants = aten._native_batch_norm_legit(x, w, b, *expected_running, training, momentum, 1e-5)
    got_running = [r.numpy().copy() for r in running]
    outs = [np.empty(tuple(t.shape), t.numpy().dtype) for t in wants]
    get_kernel("aten::_native_batch_norm_legit.out").fn(
        *[to_kernel_arg(a) for a in (x, w, b)], *got_running, training, momentum, 1e-5, *outs
    )
    rtol, atol = TOL[dtype] if dtype != F32 else (1e-5, 1e-5)
    for got, want in zip(outs + got_running, list(wants) + expected_running):
        assert_close(got, want.numpy(), rtol, atol)


def test_batch_norm_without_stats_needs_training():
    from torchedge.errors import KernelError

    x = np.ones((2, 3, 4), np.float32)
    with pytest.raises(KernelError):
        get_kernel("aten::_native_batch_norm_legit.no_stats_out").fn(
            x, None, None, False, 0.1, 1e-5, np.empty_like(x), np.empty(3, np.float32), np.empty(3, np.float32)
        )
