"""Out-variant and view-copy look-ups against the schemas torch itself declares."""

import pytest
import torch

from torchedge.errors import ExportError
from torchedge.exir.ir import op_name
from torchedge.exir.op_schema import out_argument_names, out_variant, view_copy_variant

aten = torch.ops.aten


@pytest.mark.parametrize(
    "functional, expected",
    [
        (aten.add.Tensor, aten.add.out),
        (aten.add.Scalar, aten.add.Scalar_out),
        (aten.any.dim, aten.any.out),
        (aten.arange.start_step, aten.arange.start_out),
        (aten._to_copy.default, aten._to_copy.out),
        (aten.max_pool2d_with_indices.default, aten.max_pool2d_with_indices.out),
        (aten._native_batch_norm_legit_no_training.default, aten._native_batch_norm_legit_no_training.out),
        (aten.full.default, aten.full.out),
    ],
)
def test_out_variant(functional, expected):
    assert out_variant(functional) is expected


def test_out_argument_names():
    assert out_argument_names(aten.topk.values) == ["values", "indices"]
    assert op_name(aten.add.out) == "aten::add.out"
    assert op_name(aten.relu.default) == "aten::relu"


def test_view_copy_variant():
    assert view_copy_variant(aten.view.default) is aten.view_copy.default
    assert view_copy_variant(aten.slice.Tensor) is aten.slice_copy.Tensor
    assert view_copy_variant(aten.add.Tensor) is None


def test_missing_out_variant_is_a_clear_error():
    with pytest.raises(ExportError, match="no out variant"):
        out_variant(aten._local_scalar_dense.default)
