"""Float -> integer conversions: one answer on every machine, written out by hand.

C leaves converting NaN, an infinity or a float out of the target's range to an integer
undefined, and eager's and NumPy's answers differ by CPU and version (ml_dtypes 0.7 turns
bfloat16 -1.0 into uint8 0, this CPU's eager into 255). torchedge defines them
(`torchedge.kernels.dtypes.convert`): truncate toward zero, wrap modulo 2**bits; NaN and
infinities give 0. Every kernel that converts floats to integers goes through it; the kernel
harness judges such calls by it instead of eager (`kernel_check.defined_expectation`).
"""

import ml_dtypes
import numpy as np
import pytest
import torch

from tools.qa.kernel_check import Status, check_call, conversion_target, defined_expectation
from torchedge.kernels.dtypes import conversion_undefined, convert
from torchedge.kernels.registry import Kernel, get_kernel
from torchedge.schema.scalar_type import ScalarType

VALUES = [-1.0, -3.5, 300.0, 255.9, float("nan"), float("inf"), float("-inf")]
SOURCES = [ml_dtypes.bfloat16, np.float16, np.float32, np.float64, np.complex64]
# 255.9 is 256.0 in bfloat16 (8 significant bits), 255.875 in float16, 255.9 in the others.
EXPECTED = {
    np.uint8: ([255, 253, 44, 255, 0, 0, 0], [255, 253, 44, 0, 0, 0, 0]),
    np.int8: ([-1, -3, 44, -1, 0, 0, 0], [-1, -3, 44, 0, 0, 0, 0]),
    np.int16: ([-1, -3, 300, 255, 0, 0, 0], [-1, -3, 300, 256, 0, 0, 0]),
    np.int32: ([-1, -3, 300, 255, 0, 0, 0], [-1, -3, 300, 256, 0, 0, 0]),
    np.int64: ([-1, -3, 300, 255, 0, 0, 0], [-1, -3, 300, 256, 0, 0, 0]),
}
TARGETS = list(EXPECTED)
CODES = {np.uint8: ScalarType.BYTE, np.int8: ScalarType.CHAR, np.int16: ScalarType.SHORT}
CODES |= {np.int32: ScalarType.INT, np.int64: ScalarType.LONG}


def _values(source) -> np.ndarray:
    with np.errstate(over="ignore"):
        return np.array(VALUES, np.float64).astype(source)


def _expected(source, target) -> np.ndarray:
    others, bfloat16 = EXPECTED[target]
    return np.array(bfloat16 if source is ml_dtypes.bfloat16 else others, target)


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("source", SOURCES, ids=lambda s: np.dtype(s).name)
def test_convert_truncates_wraps_and_zeroes_nan_and_infinities(source, target):
    got = convert(_values(source), target)
    assert got.dtype == target
    np.testing.assert_array_equal(got, _expected(source, target))


@pytest.mark.parametrize(
    "target, expected",
    [
        (np.int32, [-(2**31), 5, 0, -2048, 4096]),
        (np.int64, [2**31, 2**32 + 5, -(2**63), 2**63 - 2048, 4096]),
        (np.uint8, [0, 5, 0, 0, 0]),
    ],
)
def test_values_beyond_int64_wrap_exactly(target, expected):
    values = np.array([2.0**31, 2.0**32 + 5, 2.0**63, -(2.0**63) - 2048, 2.0**64 + 4096])
    np.testing.assert_array_equal(convert(values, target), np.array(expected, target))


def test_numbers_and_defined_conversions():
    assert convert(-1.5, np.uint8).tolist() == 255 and convert(2.7, np.int8).tolist() == 2
    assert convert(np.array([-0.5, 0.9]), np.uint8).tolist() == [0, 0]  # truncation to 0 is in range
    assert convert(np.array([1.5, np.nan]), np.bool_).tolist() == [True, True]  # not an integer dtype
    same = np.arange(3, dtype=np.int16)
    assert convert(same, np.int16) is same
    assert conversion_undefined(np.array([-0.9, -1.0, 255.9, 256.0, np.nan]), np.uint8).tolist() == [
        False,
        True,
        False,
        True,
        True,
    ]


# -- every kernel that converts floats to integers -------------------------------------------------


def _run(op: str, *args, out) -> np.ndarray:
    get_kernel(op).fn(*args, out)
    return out


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("source", SOURCES[:4], ids=lambda s: np.dtype(s).name)
def test_copies_convert_as_defined(source, target):
    x, want = _values(source), _expected(source, target)
    n = len(VALUES)
    assert _run("aten::_to_copy.out", x, False, None, out=np.empty(n, target)).tolist() == want.tolist()
    zeros = np.zeros(n, target)
    assert _run("aten::copy.out", zeros, x, False, out=np.empty(n, target)).tolist() == want.tolist()
    grid = np.zeros((2, n), target)
    selected = _run("aten::select_scatter.out", grid, x, 0, 1, out=np.empty((2, n), target))
    assert selected[1].tolist() == want.tolist() and not selected[0].any()
    sliced = _run("aten::slice_scatter.out", grid, x[None], 0, 0, 1, 1, out=np.empty((2, n), target))
    assert sliced[0].tolist() == want.tolist() and not sliced[1].any()


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("source", SOURCES[:4], ids=lambda s: np.dtype(s).name)
def test_reductions_with_a_dtype_convert_first(source, target):
    """cumsum, sum and prod with an integer dtype convert their float input first, as ATen."""
    x, want, code = _values(source)[None], _expected(source, target), int(CODES[target])
    n = len(VALUES)
    cumsum = _run("aten::cumsum.out", x, 1, code, out=np.empty((1, n), target))
    assert cumsum[0].tolist() == np.cumsum(want, dtype=target).tolist()
    total = _run("aten::sum.IntList_out", x, [1], False, code, out=np.empty(1, target))
    assert total.tolist() == [want.sum(dtype=target)]
    head = x[:, :4]  # the finite values: their product is not 0
    product = _run("aten::prod.out", head, code, out=np.empty((), target))
    assert product.tolist() == want[:4].prod(dtype=target)


def test_number_fills_convert_as_defined():
    out = _run("aten::full.out", [3], -1.5, out=np.empty(3, np.uint8))
    assert out.tolist() == [255] * 3
    mask = np.array([True, False, True])
    filled = _run("aten::masked_fill.Scalar_out", np.ones(3, np.int8), mask, 300.7, out=np.empty(3, np.int8))
    assert filled.tolist() == [44, 1, 44]


def test_an_integer_convolution_converts_its_float_bias_as_defined():
    x, weight = np.ones((1, 1, 1, 1), np.uint8), np.ones((3, 1, 1, 1), np.uint8)
    bias = np.array([-1.0, 300.0, np.nan], np.float32)
    out = np.empty((1, 3, 1, 1), np.uint8)
    get_kernel("aten::convolution.out").fn(x, weight, bias, [1, 1], [0, 0], [1, 1], False, [0, 0], 1, out)
    assert out.ravel().tolist() == [0, 45, 1]  # 1 + (255, 44, 0), modulo 256


# -- the kernel harness judges undefined conversions by them ---------------------------------------


def _to_uint8(values) -> tuple:
    x = torch.tensor(values, dtype=torch.bfloat16)
    return torch.ops.aten._to_copy.default, (x,), {"dtype": torch.uint8}


def test_the_harness_compares_undefined_conversions_with_torchedges():
    op, args, kwargs = _to_uint8(VALUES)
    assert conversion_target(args, kwargs, op(*args, **kwargs)) is torch.uint8
    assert check_call(op, args, kwargs, op(*args, **kwargs)).status is Status.PASS

    def saturating(name):  # what eager computes on some CPUs: negative floats become 0
        def fn(self, non_blocking, memory_format, out):
            np.copyto(out, np.clip(np.nan_to_num(self.astype(np.float64)), 0, 255).astype(np.uint8))

        return Kernel(name, fn, get_kernel(name).num_args)

    result = check_call(op, args, kwargs, op(*args, **kwargs), kernels=saturating)
    assert result.status is Status.MISMATCH and "got np.uint8(0), expected np.uint8(255)" in result.detail


def test_the_harness_compares_defined_values_with_eager():
    op, args, kwargs = _to_uint8([0.5, 3.9, 255.0])
    assert conversion_target(args, kwargs, op(*args, **kwargs)) is None
    argmax = torch.ops.aten.argmax.default
    x = torch.tensor([1.0, float("inf"), float("nan")])
    assert conversion_target((x,), {}, argmax(x)) is None  # indices: no conversion


@pytest.mark.parametrize(
    "op, args",
    [
        (torch.ops.aten.view.dtype, (torch.tensor([float("nan"), 1e10, 1.5]), torch.int32)),
        (torch.ops.aten.bucketize.Tensor, (torch.tensor([float("inf"), 2.5]), torch.tensor([1, 2, 3]))),
    ],
    ids=["view.dtype", "bucketize"],
)
def test_calls_that_do_not_convert_their_floats_first_are_not_judged_by_conversion(op, args):
    """A view of the bits, a search: eager's result on the defined values is not that of
    their conversion, so no converted call stands for theirs (their values are not compared)."""
    assert conversion_target(args, {}, op(*args)) is not None
    assert defined_expectation(op, args, {}, op(*args)) is None


def test_the_op_db_sweep_does_not_compare_undefined_conversions_with_eager():
    from tools.qa.op_db_sweep import _unjudged

    module = torch.nn.Module()
    module.forward = lambda x: (x.to(torch.uint8),)
    assert "C leaves undefined" in _unjudged(False, module, [torch.tensor([-1.0, 2.0])])
    assert _unjudged(False, module, [torch.tensor([1.0, 2.0])]) == ""
