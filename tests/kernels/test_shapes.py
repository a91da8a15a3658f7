"""Shape functions (registered with each kernel, `torchedge.kernels.registry`) against PyTorch
eager and hand-computed cases.

Every registered kernel has a shape function or a trait saying why it needs none. Each shape function
is compared with eager's output shapes on the calls PyTorch's OpInfo samples make (one dtype
per operator), plus hand-written eager calls for the operators OpInfo does not reach. The
out arrays handed to a shape function have a wrong shape, so that one reading them fails.
Edge cases (broadcasting with 0-size dims, slice clamping, -1 in views, conv and pooling
arithmetic, arange lengths, errors) have hand-computed expected shapes.
"""

import subprocess
import sys

import numpy as np
import pytest
import torch

from tests.kernels.executorch_calls import AVAILABLE as executorch_calls_available
from tests.kernels.executorch_calls import NAMESPACES as EXECUTORCH_NAMESPACES
from tests.kernels.executorch_calls import executorch_calls
from tools.qa.aten_calls import AtenCall
from tools.qa.kernel_check import kernel_arguments, kernel_op
from tools.qa.opinfo_sampling import opinfo_calls
from torchedge.devtools.output_compare import Unsupported
from torchedge.errors import KernelError, OperatorMissingError
from torchedge.exir.op_schema import op_name
from torchedge.kernels import registry
from torchedge.kernels.registry import (
    has_shape_function,
    op_traits,
    output_shapes,
    register_kernel,
    registered_operators,
    shape_operators,
)

aten = torch.ops.aten


# -- coverage ------------------------------------------------------------------------------


def _has_no_out_to_size(name: str) -> bool:
    traits = op_traits(name)
    return traits.data_dependent or traits.returns_value or traits.view or traits.checks_only


def test_every_kernel_has_a_shape_function_or_a_trait_saying_why_not():
    missing = [
        name for name in registered_operators() if not has_shape_function(name) and not _has_no_out_to_size(name)
    ]
    assert not missing, (
        "kernels without a shape function (register one with register_kernel(..., shape=...), or "
        f"mark the operator data_dependent, returns_value or view): {missing}"
    )
    both = sorted(name for name in shape_operators() if _has_no_out_to_size(name))
    assert not both, f"operators with a shape function and a trait saying they need none: {both}"


def test_shape_functions_import_without_torch():
    check = (
        "import sys, torchedge.kernels.registry as r; r.shape_operators()\n"
        "print(','.join(m for m in sys.modules if m == 'torch' or m.startswith(('torch.', 'torchedge.exir'))))"
    )
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "", f"importing the shape functions imported: {result.stdout.strip()}"


# -- against eager -----------------------------------------------------------------------


def _call(op, *args, expected=None, **kwargs) -> AtenCall:
    """An eager call of ``op``; ``expected`` gives the result when ``op`` is an out variant."""
    return AtenCall(op, args, kwargs, op(*args, **kwargs) if expected is None else expected)


def _extra_calls() -> list:
    """Eager calls of the operators OpInfo's samples do not reach (and a few edge cases)."""
    x, x4, x5 = torch.randn(2, 3, 4), torch.randn(2, 3, 6, 5), torch.randn(1, 2, 4, 5, 6)
    ints, c = torch.randint(-5, 5, (2, 3), dtype=torch.int32), torch.randn(4, 6, dtype=torch.complex64)
    grad4, idx = torch.randn(2, 3, 3, 2), torch.tensor([[0, 1, 0], [1, 0, 1]])
    w, b, y = torch.randn(4), torch.randn(4), torch.randn(2, 3, 4)
    _, mean, rstd = aten.native_layer_norm.default(y, [4], w, b, 1e-5)
    gn, gn_mean, gn_rstd = torch.randn(2, 6, 5), torch.randn(2, 3), torch.randn(2, 3)
    weights, bag_indices, offsets = torch.randn(10, 3), torch.tensor([1, 2, 4, 5, 4, 3, 2, 9]), torch.tensor([0, 3, 5])
    conv_in, conv_w = torch.randn(2, 3, 8, 8), torch.randn(4, 3, 3, 3)
    pooled, indices = aten.max_pool3d_with_indices.default(x5, [2, 2, 2], [2, 2, 2])
    calls = [
        _call(aten.glu.default, x4, 2),
        _call(aten._adaptive_avg_pool2d_backward.default, torch.randn(2, 3, 2, 2), x4),
        _call(aten._adaptive_avg_pool3d_backward.default, torch.randn(1, 2, 2, 2, 3), x5),
        _call(aten.avg_pool2d_backward.default, grad4, x4, [2, 2], [2, 2], [0, 0], False, True, None),
        _call(aten.avg_pool3d_backward.default, pooled, x5, [2, 2, 2], [2, 2, 2], [0, 0, 0], False, True, None),
        _call(
            aten.max_pool3d_with_indices_backward.default,
            pooled,
            x5,
            [2, 2, 2],
            [2, 2, 2],
            [0, 0, 0],
            [1, 1, 1],
            False,
            indices,
        ),
        _call(aten.avg_pool1d.default, x, [3], [2], [1], True),
        _call(aten.adaptive_avg_pool1d.default, x, [3]),
        _call(aten._fft_r2c.default, torch.randn(4, 7), [0, 1], 0, True),
        _call(aten._fft_r2c.default, torch.randn(4, 7), [1], 2, False),
        _call(aten._fft_c2r.default, c, [0, 1], 0, 11),
        _call(aten._fft_c2c.default, c, [1], 1, False),
        _call(aten._conj_copy.default, c),
        _call(aten._conj_physical.default, c),
        _call(aten.conj_physical.default, c),
        _call(aten.complex.default, torch.randn(4, 1), torch.randn(6)),
        _call(aten.polar.default, torch.rand(3, 1), torch.randn(2)),
        _call(aten.view_as_real_copy.default, c),
        _call(aten.view_as_complex_copy.default, x4[..., :2].contiguous()),
        _call(aten.linalg_eig.default, torch.randn(2, 3, 3)),
        _call(aten.take.default, torch.randn(3, 4), torch.tensor([[0, -1], [5, 11]])),
        _call(aten.hash_tensor.default, torch.randn(3, 4), [1]),
        _call(aten.hash_tensor.default, torch.randint(-5, 5, (2, 3, 4)), [0, 2], keepdim=True),
        _call(aten.hash_tensor.default, torch.randn(2, 3)),
        _call(aten._native_batch_norm_legit.no_stats, x, None, None, True, 0.1, 1e-5),
        _call(
            aten._native_batch_norm_legit_no_training.default, x, None, None, torch.zeros(3), torch.ones(3), 0.1, 1e-5
        ),
        _call(aten._native_batch_norm_legit.default, x, None, None, torch.zeros(3), torch.ones(3), False, 0.1, 1e-5),
        _call(aten.native_layer_norm_backward.default, y, y, [4], mean, rstd, w, b, [True, True, True]),
        _call(aten.native_layer_norm_backward.default, y, y, [4], mean, rstd, w, b, [True, False, True]),
        _call(
            aten.native_group_norm_backward.default,
            gn,
            gn,
            gn_mean,
            gn_rstd,
            torch.randn(6),
            2,
            6,
            5,
            3,
            [True, True, False],
        ),
        _call(
            aten.convolution_backward.default,
            torch.randn(2, 4, 6, 6),
            conv_in,
            conv_w,
            [4],
            [1, 1],
            [0, 0],
            [1, 1],
            False,
            [0, 0],
            1,
            [True, True, True],
        ),
        _call(
            aten.convolution_backward.default,
            torch.randn(2, 4, 6, 6),
            conv_in,
            conv_w,
            None,
            [1, 1],
            [0, 0],
            [1, 1],
            False,
            [0, 0],
            1,
            [False, True, False],
        ),
        _call(
            aten.convolution.default,
            torch.randn(2, 4, 5, 5),
            torch.randn(4, 3, 3, 3),
            None,
            [2, 2],
            [1, 1],
            [2, 2],
            True,
            [1, 1],
            2,
        ),
        _call(aten.im2col.default, x4, [2, 3], [1, 1], [1, 0], [2, 1]),
        _call(aten.col2im.default, torch.randn(2, 12, 12), [4, 5], [2, 2], [1, 1], [0, 0], [1, 1]),
        _call(aten.embedding_dense_backward.default, torch.randn(2, 3, 5), idx, 7, -1, False),
        _call(aten._unsafe_view.default, x, [4, -1]),
        _call(aten.t.default, torch.randn(2, 5)),
        _call(aten.transpose.int, x, 0, -1),
        _call(aten.tril.default, x, 1),
        _call(aten.roll.default, x, [1, 2], [0, 2]),
        _call(aten.copy.default, x, torch.randn(3, 1)),
        _call(aten.copy_.default, torch.randn(2, 3, 4), torch.randn(3, 1)),
        _call(aten.index_put_.default, torch.randn(2, 3, 4), [None, torch.tensor([2, 0])], torch.randn(2, 2, 4)),
        _call(aten.sort.stable, x, stable=True, dim=1),
        _call(aten.argsort.stable, x, stable=True, dim=0, descending=True),
        _call(aten.std.correction, x, [1], correction=0, keepdim=True),
        _call(aten.std.dim, x, [0, 2], True, False),
        _call(aten.var.dim, x, None, False, True),
        _call(aten.any.all_out, x, expected=aten.any.default(x)),
        _call(aten.max.default, x),
        _call(aten.min.default, x),
        _call(aten.native_dropout.default, x, 0.5, True),
        _call(aten.zeros.default, [2, 0, 3]),
        _call(aten.ones.default, [4]),
        _call(aten.randperm.default, 6),
        _call(aten.arange.default, 7),
        _call(aten.arange.start_step, 0.5, 5.2, 1.5, dtype=torch.int64),
        _call(aten.arange.start_step, 0.5, 5.2, 1.5),
        _call(aten.arange.start_step, 10, -3, -4),
        _call(aten.pow.Scalar, 2.0, x),
        _call(aten.remainder.Scalar_Tensor, 3, ints.abs() + 1),
        _call(aten.rsub.Scalar, x, 2.0),
        _call(aten.div.Scalar_mode, x, 2.0, rounding_mode="floor"),
        _call(aten.floor_divide.default, x, torch.randn(4)),
        _call(aten.floor_divide.Scalar, x, 2.0),
        _call(aten.fmod.Scalar, x, 2.0),
        _call(aten.gt.Scalar, x, 0.0),
        _call(aten.masked_fill.Scalar, torch.randn(3), torch.ones(2, 3, dtype=torch.bool), 1.0),
        _call(aten.masked_scatter.default, torch.randn(3), torch.ones(2, 3, dtype=torch.bool), torch.randn(7)),
        _call(aten.round.decimals, x, decimals=2),
        *(
            _call(op, x)
            for op in (
                aten.erfinv.default,
                aten.exp2.default,
                aten.hardsigmoid.default,
                aten.hardswish.default,
                aten.silu.default,
                aten.logit.default,
            )
        ),
        *(_call(op, ints, 3) for op in (aten.bitwise_and.Scalar, aten.bitwise_or.Scalar, aten.bitwise_xor.Scalar)),
        _call(aten.scatter.reduce, ints, 0, idx, ints, reduce="add"),
        _call(aten.scatter.value, x[0], 0, idx, 1.0),
        _call(aten.scatter.value_reduce, x[0], 1, idx, 2.0, reduce="multiply"),
        _call(aten.reflection_pad2d.default, x, [1, 2, 0, 2]),
        _call(aten.reflection_pad3d.default, x5, [1, 1, 2, 0, 1, 2]),
        _call(aten.replication_pad1d.default, x, [3, -1]),
        _call(aten.replication_pad3d.default, x5, [1, 1, 2, 0, 1, 2]),
        _call(aten._upsample_nearest_exact2d.default, x4, [5, 9]),
        _call(aten.upsample_nearest1d.default, x, [7]),
        _call(aten.upsample_nearest2d.default, x4, [12, 3]),
        _call(aten.upsample_nearest3d.default, x5, [2, 3, 4]),
        _call(aten.upsample_linear1d.default, x, [9], True),
        _call(aten.upsample_bilinear2d.default, x4, [7, 8], False),
        _call(aten.upsample_trilinear3d.default, x5, [5, 5, 5], False),
        _call(aten.upsample_bicubic2d.default, x4, [3, 11], True),
        _call(aten.upsample_nearest2d.vec, x4, None, [1.5, 2.3]),
        _call(aten.upsample_bilinear2d.vec, x4, None, False, [0.5, 1.7]),
        _call(aten.upsample_bilinear2d.vec, x4, [4, 4], True, None),
        _call(aten.index.Tensor, x, [torch.tensor([True, False]), None, torch.tensor([[0], [3]])]),
        _call(aten.cat.default, [torch.ones(0), torch.randn(2, 3), torch.randn(4, 3)]),
        _call(aten.slice.Tensor, x, 2, -10, 100, 3),
        *_quantized_calls(x),
        *_fused_calls(),
    ]
    for op in (aten._embedding_bag.default, aten._embedding_bag_forward_only.default):
        for dtype, mode, include_last_offset, padding_idx in _BAGS:
            calls.append(
                _call(
                    op,
                    weights.to(dtype),
                    bag_indices,
                    offsets,
                    False,
                    mode,
                    False,
                    None,
                    include_last_offset,
                    padding_idx,
                )
            )
    return calls + _scalar_overload_calls() + _random_calls()


_POLYNOMIALS = [
    f"special_{shifted}{family}_polynomial_{kind}"
    for shifted, family, kinds in [("", "chebyshev", "tuvw"), ("shifted_", "chebyshev", "tuvw")]
    for kind in kinds
] + [
    "special_hermite_polynomial_h",
    "special_hermite_polynomial_he",
    "special_laguerre_polynomial_l",
    "special_legendre_polynomial_p",
]


def _scalar_overload_calls() -> list:
    """The Scalar overloads of operators whose OpInfo samples only pass tensors."""
    x, n, ints = torch.rand(2, 3), torch.tensor([[0.0, 1.0, 4.0]]), torch.tensor([[1, 2, 3], [4, 5, 6]])
    calls = [_call(getattr(aten, name).x_scalar, 0.5, n) for name in _POLYNOMIALS]
    calls += [_call(getattr(aten, name).n_scalar, x, 3) for name in _POLYNOMIALS]
    for name in ("bitwise_left_shift", "bitwise_right_shift"):
        calls += [_call(getattr(aten, name).Scalar_Tensor, 5, ints), _call(getattr(aten, name).Tensor_Scalar, ints, 2)]
    for name in ("__lshift__", "__rshift__"):
        calls += [_call(getattr(aten, name).Scalar, ints, 2), _call(getattr(aten, name).Tensor, ints, ints[:1])]
    boundaries = torch.tensor([0.1, 0.5, 0.9])
    return calls + [
        _call(aten.bucketize.Scalar, 0.3, boundaries),
        _call(aten.searchsorted.Scalar, boundaries, 0.3),
        _call(aten.copysign.Scalar, x, -1.0),
        _call(aten.special_zeta.other_scalar, x + 1, 2.0),
        _call(aten.special_zeta.self_scalar, 2.0, x + 1),
        _call(aten.linalg_pinv.atol_rtol_float, torch.randn(3, 4), atol=0.0, rtol=1e-5),
        _call(aten._upsample_bicubic2d_aa.default, torch.randn(1, 2, 8, 8), [4, 5], False),
        _call(aten.empty_permuted.default, [2, 3, 4], [0, 2, 1]),
    ]


def _fused_calls() -> list:
    from torchedge.exir.passes.fused_operators import fused_ops

    fused = fused_ops()
    q, k, v, mask = torch.randn(2, 3, 5, 4), torch.randn(2, 3, 7, 4), torch.randn(2, 3, 7, 6), torch.zeros(5, 7)
    x, w = torch.randn(1, 4, 10, 9), torch.randn(6, 2, 3, 3)
    stats = [torch.rand(6) + 0.5 for _ in range(4)]
    h, wh = torch.randn(2, 3), torch.randn(3, 12)
    return [
        _call(fused["attention"], q, k, v, mask, 0.5),
        _call(fused["attention_exact"], q, k, v, mask, 0.5, 0.25),
        _call(fused["attention_exact"], q, k, v, None, 1.0, 1.0),
        _call(fused["attention_interleaved"], *(t.transpose(1, 2) for t in (q, k, v)), mask, 0.5),
        _call(fused["conv_bn_act"], x, w, None, [2, 1], [0, 1], [1, 2], [1, 1], 2, *stats, 1e-5, "relu", 0.0, 0.0),
        _call(fused["linear_act"], torch.randn(5, 7), torch.randn(7, 3), torch.randn(3), "gelu"),
        _call(fused["lstm_cell"], torch.randn(2, 1, 12), torch.randn(2, 12), torch.randn(2, 3), None, None, -1),
        _call(fused["lstm_cell"], torch.randn(5, 2, 12), torch.randn(12), torch.randn(2, 3), h, wh, 4),
        _call(fused["gru_cell"], torch.randn(1, 9), torch.randn(2, 1, 9), torch.randn(1, 3), None, -1),
        _call(fused["gru_cell"], torch.randn(4, 2, 9), torch.randn(9), torch.randn(2, 3), torch.randn(3, 9), 0),
    ]


def _quantized_calls(x) -> list:
    import torch.ao.quantization.fx._decomposed  # noqa: F401  (defines the quantized_decomposed operators)

    qd, q8 = torch.ops.quantized_decomposed, torch.randint(-128, 128, (2, 3, 4), dtype=torch.int8)
    scales, zero_points = torch.rand(3) + 0.1, torch.randint(-3, 3, (3,))
    return [
        _call(qd.quantize_per_tensor.default, x, 0.1, 3, -128, 127, torch.int8),
        _call(qd.quantize_per_tensor.tensor, x, torch.tensor(0.1), torch.tensor(3), -128, 127, torch.int8),
        _call(qd.dequantize_per_tensor.default, q8, 0.1, 3, -128, 127, torch.int8),
        _call(qd.dequantize_per_tensor.tensor, q8, torch.tensor(0.1), torch.tensor(3), -128, 127, torch.int8),
        _call(qd.quantize_per_channel.default, x, scales, zero_points, 1, -128, 127, torch.int8),
        _call(qd.dequantize_per_channel.default, q8, scales, zero_points, 1, -128, 127, torch.int8),
        _call(qd.choose_qparams.tensor, x, -128, 127, 1e-5, torch.int8),
    ]


# embedding_bag's index and size outs depend on the weights' dtype, the mode, include_last_offset and
# padding_idx: (dtype, mode, include_last_offset, padding_idx)
_BAGS = [
    (torch.float32, 0, False, -1),
    (torch.float64, 0, True, -1),
    (torch.float32, 0, True, 2),
    (torch.float32, 1, True, -1),
    (torch.float16, 2, False, -1),
]


# kernels no eager call reaches (their torch operators live in ExecuTorch): checked in CASES below
def _random_calls() -> list:
    """Operators that draw random numbers (only the shapes can match) and ``resize``."""
    x, ints = torch.rand(2, 3) + 0.5, torch.tensor([[1, 2, 3], [4, 5, 6]])
    return [
        _call(aten.uniform.default, x, 0.0, 1.0),
        _call(aten.cauchy.default, x, 0.0, 1.0),
        _call(aten.exponential.default, x, 1.0),
        _call(aten.geometric.default, x, 0.5),
        _call(aten.log_normal.default, x, 1.0, 2.0),
        _call(aten.normal.float_Tensor, 0.0, x),
        _call(aten.normal_functional.default, x, 0.0, 1.0),
        _call(aten.poisson.default, x),
        _call(aten.rand_like.default, x),
        _call(aten.randint_like.Tensor, ints, torch.tensor(9)),
        _call(aten.random.default, x),
        _call(aten.random.to, x, 10),
        _call(getattr(aten.random, "from"), x, 0, 10),
        _call(aten.bernoulli.p, x, 0.5),
        _call(aten.resize.default, x, [6]),
        _call(aten.multinomial.default, x, 2),
        _call(aten.new_empty_strided.default, x, [3, 2], [2, 1]),
        _call(aten.normal.Tensor_Tensor, x, x),
        _call(aten.normal.Tensor_float, x, 1.0),
        _call(aten.normal.float_float, 0.0, 1.0, [2, 3]),
        _call(aten.randint.default, 9, [2, 3]),
        _call(aten.randint.low, 2, 9, [2, 3]),
        _call(aten.randint_like.default, ints, 9),
        _call(aten.randint_like.low_dtype, ints, 2, 9),
        _call(aten.randn_like.default, x),
        _call(aten.rrelu_with_noise.default, x - 1, torch.zeros(2, 3)),
    ]


_NO_EAGER_CALL = {
    "dim_order_ops::_to_dim_order_copy.out",
    "dim_order_ops::_clone_dim_order.out",
    "executorch_prim::et_copy_index.tensor",  # an ExecuTorch primitive: tests/e2e/test_control_flow.py
    # no eager operator: the backend dialect's add + relu, against eager's chain in test_backend_dialect_quant.py
    "quantized_decomposed::add_relu.out",
    # load-time fusions, against the portable chains they replace in tests/kernels/test_fused_vs_portable.py
    "torchedge_fused::inverted_residual.out",
    "torchedge_fused::max_pool_values.out",
    "torchedge_fused::strided_copy.out",
    # against eager's where(all(scores == -inf), 0, probs) in tests/backends/test_xnnpack_interp_attention.py
    "torchedge_fused::safe_softmax_rows.out",
}


def _one_dtype(calls) -> list:
    """The calls of one dtype (float32 where there are such): enough to check shapes."""
    by_dtype = {}
    for dtype, call in calls:
        by_dtype.setdefault(dtype, []).append(call)
    return by_dtype.get(torch.float32) or next(iter(by_dtype.values()))


def _calls_by_kernel() -> dict[str, list]:
    found = {}
    for (_, dtype), calls in opinfo_calls().items():
        for call in calls:
            found.setdefault(op_name(kernel_op(call.op)), []).append((dtype, call))
    chosen = {name: _one_dtype(calls) for name, calls in found.items()}
    for call in [*_extra_calls(), *executorch_calls()]:
        chosen.setdefault(op_name(kernel_op(call.op)), []).append(call)
    return {name: calls for name, calls in sorted(chosen.items()) if has_shape_function(name)}


CALLS = _calls_by_kernel()


def test_every_shape_function_is_checked_against_eager():
    unchecked = sorted(set(shape_operators()) - set(CALLS) - _NO_EAGER_CALL)
    if not executorch_calls_available:  # torch knows ExecuTorch's own operators only through its packages
        unchecked = [name for name in unchecked if not name.startswith(EXECUTORCH_NAMESPACES)]
    assert not unchecked, f"shape functions that no eager call checks (add one to _extra_calls): {unchecked}"


def _wrong_shape(array):
    return None if array is None else np.empty((0, 1, 7), array.dtype)


def _with_stale_outs(values: list, outs: list) -> list:
    """``values`` with every out array replaced by one of a wrong shape (an in-place op has none)."""
    outs = outs or []
    stale = {id(out): _wrong_shape(out) for out in outs if out is not None}
    if any(value is outs for value in values):  # a Tensor[] out
        return [[_wrong_shape(o) for o in outs] if value is outs else value for value in values]
    return [stale.get(id(value), value) if isinstance(value, np.ndarray) else value for value in values]


@pytest.mark.parametrize("name", list(CALLS))
def test_shapes_match_eager(name):
    checked = 0
    for op, args, kwargs, expected in CALLS[name]:
        try:
            values, outs, wants = kernel_arguments(op, args, kwargs, expected)
        except Unsupported:
            continue
        want = [(0,) if w is None else tuple(w.shape) for w in wants]  # an output the mask turns off is empty
        got = output_shapes(name, _with_stale_outs(values, outs))
        assert got == want, f"{name} on {op}: got {got}, eager gives {want}"
        checked += 1
    if not checked:
        pytest.skip("no call the harness can replay")


# -- edge cases, computed by hand ----------------------------------------------------------


def t(*shape, dtype=np.float32):
    return np.zeros(shape, dtype)


STALE = t(0, 1, 7)

CASES = [  # (operator, kernel arguments, expected shapes)
    ("aten::add.out", [t(2, 1, 3), t(4, 1), 1, STALE], [(2, 4, 3)]),
    ("aten::add.out", [t(0, 1), t(1, 5), 1, STALE], [(0, 5)]),
    ("aten::mul.out", [t(3, 0), t(1), STALE], [(3, 0)]),
    ("aten::add.Scalar_out", [t(), 2.0, 1, STALE], [()]),
    ("aten::pow.Scalar_out", [2.0, t(2, 3), STALE], [(2, 3)]),
    ("aten::where.self_out", [t(2, 1, 1, dtype=bool), t(3, 1), t(4), STALE], [(2, 3, 4)]),
    ("aten::clamp.Tensor_out", [t(3, 1), None, t(1, 0), STALE], [(3, 0)]),
    ("aten::clamp.out", [t(2, 2), -1.0, None, STALE], [(2, 2)]),
    ("aten::slice_copy.Tensor_out", [t(10, 4), 0, -3, None, 1, STALE], [(3, 4)]),
    ("aten::slice_copy.Tensor_out", [t(10, 4), 0, None, -20, 1, STALE], [(0, 4)]),
    ("aten::slice_copy.Tensor_out", [t(10, 4), 0, 20, 30, 1, STALE], [(0, 4)]),
    ("aten::slice_copy.Tensor_out", [t(10, 4), -2, 1, 2**63 - 1, 2, STALE], [(5, 4)]),
    ("aten::slice_copy.Tensor_out", [t(10, 4), 0, 7, 3, 1, STALE], [(0, 4)]),
    ("aten::slice_copy.Tensor_out", [t(10, 4), 0, 1, 10, 4, STALE], [(3, 4)]),
    ("aten::view_copy.out", [t(2, 3, 4), (-1, 6), STALE], [(4, 6)]),
    ("aten::view_copy.out", [t(2, 0, 4), (4, 0, -1), STALE], None),  # -1 could be anything
    ("aten::view_copy.out", [t(2, 0, 4), (0, 3), STALE], [(0, 3)]),
    ("aten::view_copy.out", [t(), (1, -1), STALE], [(1, 1)]),
    ("aten::squeeze_copy.dims_out", [t(1, 3, 1, 2), (0, 1, -2), STALE], [(3, 2)]),
    ("aten::squeeze_copy.dim_out", [t(2, 3), 1, STALE], [(2, 3)]),
    ("aten::squeeze_copy.dim_out", [t(), 0, STALE], [()]),
    ("aten::unsqueeze_copy.out", [t(2, 3), -1, STALE], [(2, 3, 1)]),
    ("aten::unsqueeze_copy.out", [t(2, 3), 0, STALE], [(1, 2, 3)]),
    ("aten::expand_copy.out", [t(3, 1), (2, -1, 4), False, STALE], [(2, 3, 4)]),
    ("aten::permute_copy.out", [t(2, 3, 4), (2, 0, -2), STALE], [(4, 2, 3)]),
    ("aten::diagonal_copy.out", [t(2, 3, 5), 2, 1, 2, STALE], [(2, 3)]),
    ("aten::diagonal_copy.out", [t(2, 3, 5), -4, 1, 2, STALE], [(2, 0)]),
    ("aten::repeat.out", [t(2, 3), (2, 1, 2), STALE], [(2, 2, 6)]),
    ("aten::cat.out", [[t(0), t(2, 3), t(0), t(1, 3)], 0, STALE], [(3, 3)]),
    ("aten::cat.out", [[t(0), t(0)], 0, STALE], [(0,)]),
    ("aten::cat.out", [[t(2, 0), t(2, 3)], -1, STALE], [(2, 3)]),
    ("aten::split_with_sizes_copy.out", [t(5, 2), (2, 0, 3), 0, [STALE, STALE, STALE]], [(2, 2), (0, 2), (3, 2)]),
    ("aten::select_copy.int_out", [t(2, 3, 4), 1, -3, STALE], [(2, 4)]),
    ("aten::constant_pad_nd.out", [t(2, 3), (1, 2, -1, 0), 0.0, STALE], [(1, 6)]),
    ("aten::index.Tensor_out", [t(5, 6, 7), [None, t(2, 3, dtype=np.int64)], STALE], [(5, 2, 3, 7)]),
    ("aten::index.Tensor_out", [t(5, 6, 7), [t(2, dtype=np.int64), None, t(3, 1, dtype=np.int64)], STALE], [(3, 2, 6)]),
    ("aten::index.Tensor_out", [t(5, 6, 7), [None, np.array([1, 0, 1, 1, 0, 0], bool)], STALE], [(5, 3, 7)]),
    (
        "aten::convolution.out",
        [t(1, 4, 10, 9), t(6, 2, 3, 3), None, (2, 1), (1,), (2,), False, (0,), 2, STALE],
        [(1, 6, 4, 7)],
    ),
    ("aten::convolution.out", [t(4, 7), t(8, 4, 3), None, (3,), (1,), (1,), False, (0,), 1, STALE], [(8, 3)]),
    (
        "aten::convolution.out",
        [t(1, 4, 5, 5), t(4, 3, 3, 3), None, (2,), (1,), (1,), True, (1,), 2, STALE],
        [(1, 6, 10, 10)],
    ),
    (
        "aten::max_pool2d_with_indices.out",
        [t(1, 1, 5, 5), (2, 2), (2, 2), (0, 0), (1, 1), True, STALE, STALE],
        [(1, 1, 3, 3)] * 2,
    ),
    (
        "aten::max_pool2d_with_indices.out",
        [t(1, 1, 5, 5), (2, 2), (2, 2), (0, 0), (1, 1), False, STALE, STALE],
        [(1, 1, 2, 2)] * 2,
    ),
    ("aten::avg_pool2d.out", [t(3, 6, 6), (3,), (), (1,), True, True, None, STALE], [(3, 3, 3)]),
    ("aten::avg_pool2d.out", [t(3, 6, 6), (3,), (), (1,), False, True, None, STALE], [(3, 2, 2)]),
    ("aten::avg_pool2d.out", [t(3, 5, 5), (2,), (2,), (1,), True, True, None, STALE], [(3, 3, 3)]),
    ("aten::arange.start_out", [0, 10, 3, t(9, dtype=np.int64)], [(4,)]),
    ("aten::arange.start_out", [0.5, 5.2, 1.5, t(9, dtype=np.int64)], [(5,)]),
    ("aten::arange.start_out", [0.5, 5.2, 1.5, t(9, dtype=np.float32)], [(4,)]),
    ("aten::arange.start_out", [10, -3, -4, t(9, dtype=np.int64)], [(4,)]),
    ("aten::arange.start_out", [3, 3, 1, t(9, dtype=np.int64)], [(0,)]),
    ("aten::arange.out", [2.5, t(9, dtype=np.float64)], [(3,)]),
    ("aten::sum.IntList_out", [t(2, 3, 4), (0, -1), True, None, STALE], [(1, 3, 1)]),
    ("aten::sum.IntList_out", [t(2, 3, 4), (), False, None, STALE], [()]),
    ("aten::any.dims_out", [t(2, 3, 4), (), False, STALE], [(2, 3, 4)]),
    ("aten::argmax.out", [t(2, 3), None, True, STALE], [(1, 1)]),
    ("aten::max.dim_max", [t(2, 3), 1, False, STALE, STALE], [(2,), (2,)]),
    ("aten::topk.values", [t(2, 5), 3, -1, True, True, STALE, STALE], [(2, 3), (2, 3)]),
    (
        "aten::native_layer_norm.out",
        [t(2, 3, 4), (3, 4), None, None, 1e-5, STALE, STALE, STALE],
        [(2, 3, 4), (2, 1, 1), (2, 1, 1)],
    ),
    ("aten::full.out", [(2, 0, 3), 1.0, STALE], [(2, 0, 3)]),
    ("aten::scalar_tensor.out", [1.0, STALE], [()]),
    ("dim_order_ops::_to_dim_order_copy.out", [t(2, 3, 4, 5), False, (0, 2, 3, 1), STALE], [(2, 3, 4, 5)]),
    ("dim_order_ops::_clone_dim_order.out", [t(2, 3), False, None, STALE], [(2, 3)]),
]


@pytest.mark.parametrize("name,args,expected", CASES, ids=[f"{c[0].split('::')[1]}-{i}" for i, c in enumerate(CASES)])
def test_edge_cases(name, args, expected):
    if expected is None:
        with pytest.raises(KernelError, match=name):
            output_shapes(name, args)
    else:
        assert output_shapes(name, args) == expected


ERRORS = [  # (operator, kernel arguments, part of the message)
    ("aten::add.out", [t(2, 3), t(4), 1, STALE], "cannot be broadcast"),
    ("aten::where.self_out", [t(2, dtype=bool), t(3), t(1), STALE], "cannot be broadcast"),
    ("aten::view_copy.out", [t(2, 3), (4, -1), STALE], "invalid for an input of 6 elements"),
    ("aten::view_copy.out", [t(2, 3), (-1, -1), STALE], "at most one -1"),
    ("aten::expand_copy.out", [t(3, 2), (3, 4), False, STALE], "cannot expand"),
    ("aten::cat.out", [[t(2, 3), t(2, 4)], 0, STALE], "must match except in dimension 0"),
    ("aten::mm.out", [t(2, 3), t(4, 5), STALE], "cannot be multiplied"),
    ("aten::split_with_sizes_copy.out", [t(5), (2, 2), 0, [STALE, STALE]], "sum to 5"),
    ("aten::slice_copy.Tensor_out", [t(4), 0, 0, 4, 0, STALE], "step must be positive"),
    ("aten::select_copy.int_out", [t(4, 2), 0, 4, STALE], "out of range"),
    ("aten::arange.start_out", [0, 5, -1, t(1, dtype=np.int64)], "inconsistent with step sign"),
    ("aten::arange.start_out", [0, 5, 0.5, t(1, dtype=np.int64)], "step must be nonzero"),
    (
        "aten::convolution.out",
        [t(1, 3, 2, 2), t(4, 3, 3, 3), None, (1,), (0,), (1,), False, (0,), 1, STALE],
        "too small",
    ),
    (
        "aten::max_pool2d_with_indices.out",
        [t(1, 1, 2, 2), (3, 3), (1, 1), (0, 0), (1, 1), False, STALE, STALE],
        "too small",
    ),
    ("aten::topk.values", [t(2, 5), 6, -1, True, True, STALE, STALE], "out of range"),
    ("aten::index.Tensor_out", [t(2, 3), [np.ones((2, 2), bool)], STALE], "does not match"),
]


@pytest.mark.parametrize("name,args,message", ERRORS, ids=[f"{e[0].split('::')[1]}-{i}" for i, e in enumerate(ERRORS)])
def test_impossible_shapes_raise_kernel_error_naming_the_operator(name, args, message):
    with pytest.raises(KernelError, match=message) as error:
        output_shapes(name, args)
    assert name in str(error.value)


def test_an_operator_without_shape_function_is_reported():
    with pytest.raises(OperatorMissingError, match="aten::nonzero.out.*dynamic shapes need"):
        output_shapes("aten::nonzero.out", [t(3), STALE])
    assert not has_shape_function("aten::nonzero.out")


def test_users_can_register_a_shape_function(monkeypatch):
    for table in ("_KERNELS", "_TRAITS", "_MODULES", "_LIBRARY_OF", "_LIBRARY_KERNELS"):  # forgotten after the test
        monkeypatch.setattr(registry, table, dict(getattr(registry, table)))

    def twice_shape(op, self, out):
        return [(2 * self.shape[0],)]

    @register_kernel("my_ns::twice.out", shape=twice_shape)
    def twice(self, out):
        out[...] = np.concatenate([self, self])

    assert has_shape_function("my_ns::twice.out")
    assert output_shapes("my_ns::twice.out", [t(3), STALE]) == [(6,)]
