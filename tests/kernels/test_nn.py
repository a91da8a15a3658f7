"""Matrix products, convolution, pooling and normalisation against PyTorch."""

import math

import pytest
import torch

from tests.kernels.harness import Case, positive, rand, run_case

aten = torch.ops.aten
F16, F32, F64, I32, I64 = torch.float16, torch.float32, torch.float64, torch.int32, torch.int64
NAN, INF = float("nan"), float("inf")


def _linear_algebra_cases():
    for dtype in [F32, F64, I64]:
        a, b = rand(5, 7, dtype=dtype), rand(7, 3, dtype=dtype)
        yield Case("aten::mm.out", aten.mm.default, (a, b), rtol=1e-5, atol=1e-5, id=f"mm-{dtype}").param()
        yield Case(
            "aten::mm.out", aten.mm.default, (b.t(), a.t()), rtol=1e-5, atol=1e-5, id=f"mm-transposed-inputs-{dtype}"
        ).param()
        yield Case(
            "aten::bmm.out",
            aten.bmm.default,
            (rand(4, 5, 7, dtype=dtype), rand(4, 7, 2, dtype=dtype)),
            rtol=1e-5,
            atol=1e-5,
            id=f"bmm-{dtype}",
        ).param()
    yield Case("aten::mm.out", aten.mm.default, (rand(3, 0), rand(0, 4)), id="mm-empty-k").param()
    for beta, alpha in [(1, 1), (0.5, 2.0), (0, 1)]:
        bias = rand(3) if beta else torch.full((3,), NAN)  # beta == 0 ignores self, even nan
        yield Case(
            "aten::addmm.out",
            lambda s, a, b, be, al: aten.addmm(s, a, b, beta=be, alpha=al),
            (bias, rand(4, 6), rand(6, 3), beta, alpha),
            rtol=1e-5,
            atol=1e-5,
            id=f"addmm-{beta}-{alpha}",
        ).param()
    yield Case(
        "aten::addmm.out",
        lambda s, a, b, be, al: aten.addmm(s, a, b, beta=be, alpha=al),
        (rand(4, 3, dtype=F64), rand(4, 6, dtype=F64), rand(6, 3, dtype=F64), 1, 1),
        id="addmm-2d-bias",
    ).param()


def _conv(x, w, b, stride, padding, dilation, transposed, output_padding, groups):
    return aten.convolution.default(x, w, b, stride, padding, dilation, transposed, output_padding, groups)


def _convolution_cases():
    configs = [  # input shape, weight shape, stride, padding, dilation, groups, bias
        ((2, 3, 9, 8), (4, 3, 3, 3), [1, 1], [1, 1], [1, 1], 1, True),
        ((1, 4, 10, 11), (6, 2, 3, 2), [2, 1], [1, 0], [1, 2], 2, True),
        ((2, 6, 7, 7), (6, 1, 3, 3), [1, 1], [1, 1], [1, 1], 6, True),  # depthwise
        ((1, 4, 9, 9), (8, 1, 5, 5), [2, 2], [2, 2], [1, 1], 4, False),  # depthwise, multiplier 2
        ((2, 8, 5, 6), (16, 8, 1, 1), [1, 1], [0, 0], [1, 1], 1, True),  # pointwise
        ((1, 3, 8, 8), (5, 3, 3, 3), [3, 2], [0, 1], [2, 1], 1, False),
        ((1, 2, 4, 4), (3, 2, 4, 4), [1, 1], [0, 0], [1, 1], 1, True),  # 1x1 output
        ((3, 3, 7, 7), (2, 3, 3, 3), [1], [2], [1], 1, True),  # one value for both dims
    ]
    for i, (xs, ws, stride, padding, dilation, groups, bias) in enumerate(configs):
        for dtype in [F32, F64]:
            args = (
                rand(*xs, dtype=dtype),
                rand(*ws, dtype=dtype),
                rand(ws[0], dtype=dtype) if bias else None,
                stride,
                padding,
                dilation,
                False,
                [0, 0],
                groups,
            )
            yield Case("aten::convolution.out", _conv, args, rtol=1e-5, atol=1e-5, id=f"conv2d-{i}-{dtype}").param()
    conv1d = [
        ((2, 3, 10), (4, 3, 3), [1], [1], [1], 1),
        ((1, 4, 12), (4, 1, 3), [2], [1], [2], 4),
        ((1, 4, 12), (6, 2, 5), [1], [0], [1], 2),
    ]
    for i, (xs, ws, stride, padding, dilation, groups) in enumerate(conv1d):
        args = (rand(*xs), rand(*ws), rand(ws[0]), stride, padding, dilation, False, [0], groups)
        yield Case("aten::convolution.out", _conv, args, rtol=1e-5, atol=1e-5, id=f"conv1d-{i}").param()
    yield Case(
        "aten::convolution.out",
        _conv,
        (rand(1, 2, 5, 5, dtype=F16), rand(3, 2, 3, 3, dtype=F16), None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1),
        rtol=1e-2,
        atol=1e-2,
        id="conv2d-half",
    ).param()
    yield Case(
        "aten::convolution.out",
        _conv,
        (rand(2, 3, 4), rand(4, 2, 3), None, [1], [0], [1], True, [0], 1),
        id="conv-transposed-refused",
    ).param()


def _max_pool(x, kernel, stride, padding, dilation, ceil_mode):
    return aten.max_pool2d_with_indices.default(x, kernel, stride, padding, dilation, ceil_mode)


def _avg_pool(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override):
    return aten.avg_pool2d.default(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)


def _pooling_cases():
    x = rand(2, 3, 9, 10)
    max_configs = [
        ([3, 3], [2, 2], [1, 1], [1, 1], False),
        ([2, 2], [], [0, 0], [1, 1], False),
        ([3, 2], [2, 3], [1, 1], [1, 1], True),
        ([3, 3], [2, 2], [1, 0], [2, 2], True),
        ([2], [1], [1], [1], False),
        ([3, 3], [3, 3], [0, 0], [1, 1], True),
    ]
    for i, config in enumerate(max_configs):
        for dtype in [F32, F64]:
            yield Case(
                "aten::max_pool2d_with_indices.out", _max_pool, (x.to(dtype), *config), id=f"maxpool-{i}-{dtype}"
            ).param()
    yield Case(
        "aten::max_pool2d_with_indices.out",
        _max_pool,
        (x[0], [2, 2], [2, 2], [1, 1], [1, 1], False),
        id="maxpool-unbatched",
    ).param()
    special = torch.full((1, 1, 4, 5), -INF)
    special[0, 0, 1, 1] = NAN
    special[0, 0, 1, 3] = NAN
    special[0, 0, 2, 2] = 5.0
    special[0, 0, 3, 4] = 5.0
    for config in [([2, 2], [1, 1], [1, 1], [1, 1], False), ([3, 3], [2, 2], [1, 1], [1, 1], True)]:
        yield Case("aten::max_pool2d_with_indices.out", _max_pool, (special, *config), id="maxpool-nan-inf").param()
    ties = torch.ones(1, 2, 4, 4)
    yield Case(
        "aten::max_pool2d_with_indices.out", _max_pool, (ties, [2, 2], [1, 1], [1, 1], [1, 1], False), id="maxpool-ties"
    ).param()
    avg_configs = [
        ([3, 3], [2, 2], [1, 1], False, True, None),
        ([3, 3], [2, 2], [1, 1], False, False, None),
        ([2, 3], [2, 2], [1, 1], True, True, None),
        ([2, 3], [2, 2], [1, 1], True, False, None),
        ([2, 2], [], [0, 0], False, True, None),
        ([3, 3], [1, 1], [1, 1], False, True, 4),
    ]
    for i, config in enumerate(avg_configs):
        for dtype in [F32, F64]:
            yield Case("aten::avg_pool2d.out", _avg_pool, (x.to(dtype), *config), id=f"avgpool-{i}-{dtype}").param()
    yield Case(
        "aten::avg_pool2d.out",
        _avg_pool,
        (rand(1, 2, 5, 5, dtype=I64, low=-9, high=9), [2, 2], [2, 2], [0, 0], True, True, None),
        id="avgpool-int",
    ).param()
    for size in [[1, 1], [3, 5], [4, 3], [9, 10], [2, 7]]:
        yield Case(
            "aten::_adaptive_avg_pool2d.out", aten._adaptive_avg_pool2d.default, (x, size), id=f"adaptive-{size}"
        ).param()
    yield Case(
        "aten::_adaptive_avg_pool2d.out",
        aten._adaptive_avg_pool2d.default,
        (x[0].double(), [4, 4]),
        id="adaptive-unbatched",
    ).param()


def _normalization_cases():
    for dtype in [F32, F64]:
        for shape in [(2, 4, 3, 5), (3, 4), (2, 4, 6)]:
            c = shape[1]
            stats = (rand(c, dtype=dtype), positive(c, dtype=dtype))
            for affine in [True, False]:
                w, b = (rand(c, dtype=dtype), rand(c, dtype=dtype)) if affine else (None, None)
                yield Case(
                    "aten::_native_batch_norm_legit_no_training.out",
                    aten._native_batch_norm_legit_no_training.default,
                    (rand(*shape, dtype=dtype), w, b, *stats, 0.1, 1e-5),
                    id=f"batchnorm-{shape}-{affine}-{dtype}",
                ).param()
        for shape, normalized in [((2, 3, 8), [8]), ((4, 6), [6]), ((2, 3, 4, 5), [4, 5]), ((7,), [7])]:
            width = math.prod(normalized)
            for affine in [True, False]:
                w, b = (rand(*normalized, dtype=dtype), rand(*normalized, dtype=dtype)) if affine else (None, None)
                yield Case(
                    "aten::native_layer_norm.out",
                    aten.native_layer_norm.default,
                    (rand(*shape, dtype=dtype) * 3 + 1, normalized, w, b, 1e-5),
                    rtol=1e-5,
                    atol=1e-5,
                    id=f"layernorm-{shape}-{width}-{affine}-{dtype}",
                ).param()
    yield Case(
        "aten::native_layer_norm.out",
        aten.native_layer_norm.default,
        (rand(3, 8, dtype=F16), [8], rand(8, dtype=F16), None, 1e-5),
        rtol=1e-2,
        atol=1e-2,
        id="layernorm-half",
    ).param()


CASES = [*_linear_algebra_cases(), *_convolution_cases(), *_pooling_cases(), *_normalization_cases()]


@pytest.mark.parametrize("case", CASES)
def test_nn(case):
    run_case(case)
