"""Kernels of torchedge.kernels.portable.executorch_extras (operators ExecuTorch's runtime
registers that torchedge's compiler decomposes) against PyTorch eager."""

import pytest
import torch

from tests.kernels.harness import FLOATS, I32, I64, U8, Case, rand, run_case_and_shape
from tests.kernels.harness import run_case as _run_case
from torchedge.errors import KernelError
from torchedge.kernels.registry import get_kernel

aten = torch.ops.aten


@pytest.mark.parametrize("op", ["aten::detach_copy.out", "aten::lift_fresh_copy.out"])
@pytest.mark.parametrize("dtype", [torch.bool, U8, I64, *FLOATS])
def test_copies(op, dtype):
    run_case_and_shape(op, torch.clone, rand(3, 4, dtype=dtype))


@pytest.mark.parametrize("op", ["et_copy::_h2d_copy.out", "et_copy::_d2h_copy.out"])
def test_device_copies_are_copies(op):
    run_case_and_shape(op, torch.clone, rand(2, 5))


@pytest.mark.parametrize(
    "dtype,value", [(torch.float32, torch.tensor(2.5)), (I32, torch.tensor(7.9)), (U8, torch.tensor(3))]
)
def test_fill_tensor(dtype, value):
    run_case_and_shape("aten::fill.Tensor_out", aten.fill.Tensor, rand(2, 3, dtype=dtype), value)
    run_case_and_shape("aten::fill.Tensor_out", aten.fill.Tensor, rand(2, 3, dtype=dtype), torch.ones(2))  # refused


@pytest.mark.parametrize(
    "shapes",
    [
        ((4, 6), (5, 6), (5,)),
        ((2, 3, 6), (5, 6), None),
        ((6,), (5, 6), (5,)),
        ((3, 6), (6,), None),
        ((2, 6), (5, 6), ()),
    ],
    ids=["2d", "3d-no-bias", "1d-input", "1d-weight", "scalar-bias"],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_linear(shapes, dtype):
    x_shape, w_shape, b_shape = shapes
    bias = None if b_shape is None else rand(*b_shape, dtype=dtype)
    run_case_and_shape(
        "aten::linear.out", aten.linear.default, rand(*x_shape, dtype=dtype), rand(*w_shape, dtype=dtype), bias
    )


def test_linear_mismatch_is_refused():
    run_case_and_shape("aten::linear.out", aten.linear.default, rand(2, 5), rand(3, 6), None)


@pytest.mark.parametrize("shape,factor", [((1, 8, 2, 3), 2), ((2, 3, 9, 2, 2), 3), ((4, 1, 1), 2), ((7, 2, 2), 2)])
def test_pixel_shuffle(shape, factor):
    run_case_and_shape("aten::pixel_shuffle.out", aten.pixel_shuffle.default, rand(*shape), factor)


@pytest.mark.parametrize("shape,factor", [((1, 2, 4, 6), 2), ((2, 3, 1, 6, 3), 3), ((1, 2, 3), 2)])
def test_pixel_unshuffle(shape, factor):
    run_case_and_shape("aten::pixel_unshuffle.out", aten.pixel_unshuffle.default, rand(*shape), factor)


def run_case(op, ref, *args):
    """`run_case`, then the shape function (a ``Tensor[]`` out: one shape per piece)."""
    from tests.kernels.harness import to_kernel_arg
    from torchedge.kernels.registry import output_shapes

    _run_case(Case(op, ref, args))
    want = [tuple(t.shape) for t in ref(*args)]
    assert output_shapes(op, [to_kernel_arg(a) for a in args] + [[]]) == want


@pytest.mark.parametrize(
    "shape,split_size,dim", [((7, 3), 3, 0), ((2, 8), 4, -1), ((4, 5), 10, 1), ((0, 3), 2, 0), ((5,), 1, 0)]
)
def test_split_copy(shape, split_size, dim):
    run_case("aten::split_copy.Tensor_out", aten.split_copy.Tensor, rand(*shape), split_size, dim)


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3])
def test_stack(dim):
    tensors = [rand(2, 3), rand(2, 3), rand(2, 3, dtype=torch.float64)]
    run_case_and_shape("aten::stack.out", aten.stack.default, tensors, dim)


def test_stack_of_scalars_and_mismatch():
    run_case_and_shape("aten::stack.out", aten.stack.default, [torch.tensor(1.0), torch.tensor(2.0)], 0)
    with pytest.raises(KernelError):
        get_kernel("aten::stack.out").fn([rand(2, 3).numpy(), rand(3, 2).numpy()], 0, torch.empty(2, 2, 3).numpy())


def test_empty_dim_order_shape():
    kernel = get_kernel("dim_order_ops::_empty_dim_order.out")
    from torchedge.kernels.registry import output_shapes

    out = torch.empty(0).numpy()
    assert output_shapes("dim_order_ops::_empty_dim_order.out", [(2, 3, 4), (0, 2, 1), out]) == [(2, 3, 4)]
    assert kernel.fn((2, 3), None, out) is None
    with pytest.raises(KernelError):
        kernel.fn((2, 3), (0, 0), out)


@pytest.mark.parametrize("a", [7, -7, 6, -6, 0, 2**62])
@pytest.mark.parametrize("b", [2, -2, 3, -5, 1])
def test_prim_int_division_truncates_like_cpp(a, b):
    """ExecuTorch's floordiv.int and mod.int are C++'s ``/`` and ``%`` on int64."""
    want_quotient = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
    assert get_kernel("executorch_prim::floordiv.int").fn(a, b) == want_quotient
    assert get_kernel("executorch_prim::mod.int").fn(a, b) == a - b * want_quotient
    assert int(torch.tensor(a).fmod(b)) == a - b * want_quotient  # C++ % is fmod's sign rule


def test_prim_int_division_by_zero_is_refused():
    for name in ("executorch_prim::floordiv.int", "executorch_prim::mod.int"):
        with pytest.raises(KernelError):
            get_kernel(name).fn(3, 0)
