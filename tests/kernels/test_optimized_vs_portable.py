"""Every optimized kernel against the portable reference, without torch.

The portable library is the oracle: each operator the optimized library overrides runs both
kernels over a grid of shapes and dtypes that takes every strategy branch (forced through the
tuned constants, `torchedge.kernels.optimized.tuning`; a spy checks the branch was taken;
pooling in `test_optimized_pooling_vs_portable`), and each fused operator runs against the
chain of portable kernels it replaces (`test_fused_vs_portable`). Integers compare exactly
(wrapping sums are associative); floats within a bound on reassociation
(`oracle.assert_reassociated`).
"""

from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pytest

from tests.kernels.oracle import NP_BF16, assert_reassociated, random_array
from torchedge.kernels import registry
from torchedge.kernels.optimized import convolution as fast
from torchedge.kernels.optimized import convolution_columns, tuning
from torchedge.kernels.portable import convolution as reference

PORTABLE = Path(reference.__file__).parent
CONV = "aten::convolution.out"
FUSED = {
    "torchedge_fused::attention.out",
    "torchedge_fused::attention_interleaved.out",
    "torchedge_fused::attention_exact.out",
    "torchedge_fused::conv_bn_act.out",
    "torchedge_fused::linear_act.out",
    "torchedge_fused::lstm_cell.out",
    "torchedge_fused::gru_cell.out",
    "torchedge_fused::inverted_residual.out",
    "torchedge_fused::max_pool_values.out",
    "torchedge_fused::safe_softmax_rows.out",
    "torchedge_fused::strided_copy.out",
}
OVERRIDES = (
    {CONV}
    | {f"aten::max_pool{d}d_with_indices.out" for d in (2, 3)}
    | {f"aten::avg_pool{d}d.out" for d in (1, 2, 3)}
    | {  # test_optimized_small_kernels_vs_portable
        "aten::upsample_linear1d.out",
        "aten::upsample_bilinear2d.out",
        "aten::upsample_bilinear2d.vec_out",
        "aten::upsample_trilinear3d.out",
        "aten::upsample_bicubic2d.out",
        "aten::adaptive_avg_pool1d.out",
        "aten::_adaptive_avg_pool2d.out",
        "aten::_adaptive_avg_pool3d.out",
        "aten::_adaptive_avg_pool2d_backward.out",
        "aten::_adaptive_avg_pool3d_backward.out",
        "aten::pow.Tensor_Scalar_out",
    }
    | {"aten::index_put.out"}  # test_cache_rows
)
FLOATS = [np.float32, np.float64]
INTEGERS = [np.int64, np.int32, np.int16, np.int8, np.uint8]


def test_the_portable_library_does_not_import_the_optimized_one():
    for path in sorted(PORTABLE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            assert not any(n.startswith("torchedge.kernels.optimized") for n in names), f"{path.name} imports {names}"


def test_every_tuned_constant_is_read_by_name():
    """Each `tuning.TABLE` entry is read (``tuned("name")``) by the optimized kernels or the fusion
    rules, and each such read names an entry: a constant cannot live outside the table, or stay in
    it unused."""
    read: set[str] = set()
    for path in sorted(PORTABLE.parents[1].rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "tuned" and node.args:
                name = node.args[0]
                assert isinstance(name, ast.Constant), f"{path.name} reads a tuned constant by a computed name"
                read.add(name.value)
    assert read == set(tuning.TABLE)


def test_every_optimized_kernel_is_checked_here():
    optimized = set(registry.registered_operators("optimized"))
    assert optimized == OVERRIDES | FUSED
    portable = set(registry.registered_operators("portable"))
    assert OVERRIDES <= portable and not FUSED & portable, "fused operators register only in optimized"
    for name in optimized:
        assert registry.kernel_library(name) == "optimized"
        assert registry.get_kernel(name).fn is registry.get_kernel(name, library="optimized").fn


def test_an_override_keeps_the_reference_traits():
    assert registry.op_traits(CONV).shape.func is reference._convolution_shape
    assert registry.registering_module(CONV).startswith("torchedge.kernels.")
    assert registry.registering_module(CONV, library="portable") == reference.__name__


# -- convolution: every strategy of the optimized kernel -----------------------------------------

# (input, weight, stride, padding, dilation, groups, the branch it takes, tuning that forces it)
ALWAYS = {"conv_per_tap_min_channels": 1, "conv_per_tap_weight_ratio": 0}
NEVER_PER_TAP = {"conv_per_tap_min_channels": 1 << 30}
ROWS = {**NEVER_PER_TAP, "conv_rows_max_length_ratio": 1e9, "conv_rows_gap_cost": 1e9}
POSITIONS = {**NEVER_PER_TAP, "conv_rows_max_length_ratio": 0}
BRANCHES = [
    ((2, 6, 5, 7), (9, 6, 1, 1), [1, 1], [0, 0], [1, 1], 1, "_pointwise", {"conv_pointwise_bias_ratio": 1}),
    ((2, 6, 5, 7), (9, 2, 1, 1), [1, 1], [0, 0], [1, 1], 3, "_pointwise", {"conv_pointwise_bias_ratio": 1 << 30}),
    ((2, 4, 12, 9), (6, 2, 2, 3), [3, 3], [0, 0], [1, 1], 2, "patches", {}),
    (
        (2, 40, 9, 8),
        (40, 1, 3, 3),
        [1, 2],
        [1, 1],
        [1, 1],
        40,
        "depthwise_channels_last",
        {"channels_last_min_channels": 1, "channels_last_max_positions": 1 << 30},
    ),
    (
        (1, 24, 9, 8),
        (24, 1, 5, 3),
        [2, 1],
        [2, 3],
        [2, 1],
        24,
        "depthwise_channels_last",
        {"channels_last_min_channels": 1, "channels_last_max_positions": 1 << 30},
    ),
    (
        (2, 6, 11, 10),
        (7, 6, 3, 3),
        [1, 1],
        [1, 0],
        [1, 1],
        1,
        "winograd_conv",
        {"winograd_min_channels": 1, "winograd_min_tiles": 1},
    ),
    (
        (2, 3, 14, 13),
        (6, 1, 3, 3),
        [1, 1],
        [1, 2],
        [1, 2],
        3,
        "_depthwise_tap_by_tap",
        {"channels_last_min_channels": 1 << 30, "depthwise_tap_by_tap_length": 0, "depthwise_tap_by_tap_block": 64},
    ),
    (
        (2, 4, 9, 8),
        (8, 1, 3, 3),
        [2, 2],
        [1, 1],
        [1, 1],
        4,
        "_depthwise_by_product",
        {"channels_last_min_channels": 1 << 30, "depthwise_tap_by_tap_length": 1 << 30, "depthwise_product_block": 64},
    ),
    ((1, 6, 8, 9), (4, 3, 3, 3), [1, 1], [2, 1], [1, 2], 2, "gemm_per_kernel_column", ALWAYS),
    ((2, 4, 9, 8), (5, 4, 3, 2), [2, 2], [1, 0], [1, 1], 1, "gemm_per_tap", ALWAYS),
    ((2, 5, 13), (4, 5, 3), [1], [1], [1], 1, "gemm_per_tap", ALWAYS),  # one kernel row: per tap
    ((1, 2, 3, 4, 5), (3, 2, 2, 2, 2), [1, 2, 1], [1, 0, 1], [1, 1, 2], 1, "gemm_per_kernel_column", ALWAYS),
    ((2, 4, 6, 9), (6, 2, 3, 3), [1, 1], [1, 1], [1, 1], 2, "rows", {**ROWS, "conv_bias_column_elements": 1 << 30}),
    ((2, 4, 6, 9), (6, 4, 3, 3), [1, 1], [1, 1], [1, 1], 1, "rows", {**ROWS, "conv_bias_column_elements": 0}),
    ((1, 3, 7, 8), (4, 3, 2, 3), [2, 1], [0, 1], [2, 1], 1, "positions", POSITIONS),
    ((2, 3, 11), (4, 3, 3), [2], [1], [1], 1, "positions", POSITIONS),
]


@pytest.fixture
def spies(monkeypatch):
    """The strategies the optimized convolution takes: the functions it calls, and "rows" or
    "positions" for the two im2col forms."""
    called: list[str] = []

    def spy(module, name, record):
        real = getattr(module, name)

        def wrapper(*args):
            result = real(*args)
            called.append(record(result))
            return result

        monkeypatch.setattr(module, name, wrapper)

    for name in ("_pointwise", "patches", "depthwise_channels_last", "winograd_conv", "gemm_per_tap"):
        spy(fast, name, lambda _, name=name: name)
    spy(fast, "gemm_per_kernel_column", lambda _: "gemm_per_kernel_column")
    spy(fast, "_rows_pay", lambda pays: "rows" if pays else "positions")
    for name in ("_depthwise_tap_by_tap", "_depthwise_by_product"):
        spy(convolution_columns, name, lambda _, name=name: name)
    return called


def _conv_args(rng, xs, ws, groups, dtype, bias: bool, transposed=False):
    x, w = random_array(rng, xs, dtype), random_array(rng, ws, dtype)
    channels = ws[1] * groups if transposed else ws[0]
    return x, w, random_array(rng, (channels,), dtype) if bias else None


def _both(args, dtype):
    """(optimized, portable, bound on the terms) outs of one convolution."""
    shape = registry.output_shapes(CONV, [*args, None])[0]
    outs = [np.full(shape, 7, dtype) for _ in range(2)]
    registry.get_kernel(CONV).fn(*args, outs[0])
    registry.get_kernel(CONV, library="portable").fn(*args, outs[1])
    x, w, b = (None if a is None else np.abs(a.astype(np.float64)) for a in args[:3])
    bound = np.empty(shape, np.float64)
    registry.get_kernel(CONV, library="portable").fn(x, w, b, *args[3:], bound)
    return outs[0], outs[1], bound


@pytest.mark.parametrize("dtype", [*FLOATS, np.float16, NP_BF16, *INTEGERS], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
@pytest.mark.parametrize("spec", BRANCHES, ids=[f"{b[6]}-{i}" for i, b in enumerate(BRANCHES)])
def test_convolution_strategies_match_the_reference(spies, forced, spec, bias, dtype):
    xs, ws, stride, padding, dilation, groups, branch, overrides = spec
    forced(overrides)
    rng = np.random.default_rng(len(spies) + sum(xs) + sum(ws))
    x, w, b = _conv_args(rng, xs, ws, groups, dtype, bias)
    args = (x, w, b, stride, padding, dilation, False, [0] * len(stride), groups)
    got, want, bound = _both(args, np.dtype(dtype))
    assert_reassociated(got, want, bound, ws[1] * math.prod(ws[2:]))
    # the pointwise form reads an input of the accumulation dtype in place; Winograd is float only
    if dtype in FLOATS or branch not in ("_pointwise", "winograd_conv") or (branch, dtype) == ("_pointwise", np.int64):
        assert branch in spies, f"took {spies}, expected {branch}"


TRANSPOSED = [  # input, weight, stride, padding, dilation, output_padding, groups
    ((2, 4, 5, 6), (4, 3, 3, 3), [2, 2], [1, 1], [1, 1], [1, 0], 1),
    ((1, 4, 5, 4), (4, 2, 3, 2), [2, 3], [0, 1], [2, 1], [1, 2], 2),
    ((2, 3, 7), (3, 2, 4), [3], [2], [1], [1], 1),
    ((1, 2, 3, 4, 3), (2, 3, 2, 3, 2), [2, 1, 2], [1, 0, 0], [1, 2, 1], [1, 0, 0], 1),
    ((1, 6, 5, 5), (6, 1, 3, 3), [1, 1], [1, 1], [1, 1], [0, 0], 6),
]


@pytest.mark.parametrize("dtype", [*FLOATS, np.float16, np.int64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("spec", TRANSPOSED, ids=[str(i) for i in range(len(TRANSPOSED))])
def test_transposed_convolution_matches_the_reference(spec, dtype):
    xs, ws, stride, padding, dilation, output_padding, groups = spec
    rng = np.random.default_rng(sum(xs))
    x, w, b = _conv_args(rng, xs, ws, groups, dtype, True, transposed=True)
    got, want, bound = _both((x, w, b, stride, padding, dilation, True, output_padding, groups), np.dtype(dtype))
    assert_reassociated(got, want, bound, ws[0] * math.prod(ws[2:]))


@pytest.mark.parametrize("overrides", [ALWAYS, {"winograd_min_channels": 1, "winograd_min_tiles": 1}])
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_asymmetric_padding_matches_the_reference(forced, overrides, dtype):
    forced(overrides)
    rng = np.random.default_rng(5)
    x, w, b = _conv_args(rng, (2, 6, 9, 8), (7, 6, 3, 3), 1, dtype, True)
    got, want, bound = (np.empty((2, 7, 9, 8), t) for t in (dtype, dtype, np.float64))
    geometry = ((1, 1), (2, 0), (1, 1), 1)
    fast.conv_forward(x, w, b, *geometry, got, padding_after=(0, 2))
    reference.conv_forward(x, w, b, *geometry, want, padding_after=(0, 2))
    reference.conv_forward(*(np.abs(a.astype(np.float64)) for a in (x, w, b)), *geometry, bound, padding_after=(0, 2))
    assert_reassociated(got, want, bound, 54)
