"""Training-mode batch norm that also returns a ``reserve`` buffer: ``aten::_batch_norm_with_update.out``.

It normalises with the batch statistics of every channel (dim 1), saves them (mean and
1 / sqrt(biased var + eps)) and moves the running stats in place toward them, exactly as
``aten::_native_batch_norm_legit.out`` does in training; ``reserve`` is empty on CPU (as in
ATen), so nothing is written to it.

The functional forms that torch.export leaves (``_native_batch_norm_legit_functional``,
``_batch_norm_with_update_functional``) have no out variant in ATen: they reach these
kernels only through a compiler rewrite onto the mutating ops' out variants.
"""

from __future__ import annotations

from torchedge.kernels.portable.common import check
from torchedge.kernels.portable.normalization import _batch_norm_training
from torchedge.kernels.registry import register_kernel

__all__ = ["batch_norm_with_update"]


def _batch_norm_with_update_shape(
    op: str, input, weight, bias, running_mean, running_var, momentum, eps, out, save_mean, save_invstd, reserve
) -> list[tuple]:
    check(input.ndim >= 2, op, f"expected an input with a channel dim, got shape {list(input.shape)}")
    return [input.shape, (input.shape[1],), (input.shape[1],), (0,)]


@register_kernel("aten::_batch_norm_with_update.out", shape=_batch_norm_with_update_shape)
def batch_norm_with_update(
    input, weight, bias, running_mean, running_var, momentum, eps, out, save_mean, save_invstd, reserve
):
    _batch_norm_training(
        "aten::_batch_norm_with_update.out",
        input,
        weight,
        bias,
        running_mean,
        running_var,
        momentum,
        eps,
        out,
        save_mean,
        save_invstd,
    )
