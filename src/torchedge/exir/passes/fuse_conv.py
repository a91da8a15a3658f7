"""Kernel fusion of convolutions: zero padding before, an inference batch norm and a ``relu`` or
``hardtanh`` after a convolution become ``torchedge_fused::conv_bn_act``."""

from __future__ import annotations

import operator

import torch

from torchedge.exir.passes.fusion_matching import (
    is_call,
    is_float_tensor,
    is_static,
    meta_val,
    only_user,
    replace_with_fused,
    shape_of,
)

__all__ = ["fuse_conv"]

_aten = torch.ops.aten
_ACTIVATIONS = {_aten.relu.default: "relu", _aten.hardtanh.default: "hardtanh"}


def fuse_conv(graph: torch.fx.Graph, conv: torch.fx.Node, ops: dict) -> bool:
    """Fuse into ``conv_bn_act`` what surrounds ``conv``; False (graph untouched) when nothing does."""
    args = list(conv.args) + [None] * (9 - len(conv.args))
    x, weight, bias, stride, padding, dilation, transposed, _, groups = args[:9]
    if transposed or conv.kwargs or not (is_float_tensor(conv) and is_static(conv) and is_float_tensor(x)):
        return False
    spatial = len(shape_of(weight)) - 2
    if not 1 <= spatial <= 3 or len(shape_of(x)) != spatial + 2:
        return False
    stride, padding, dilation = ([v] * spatial if len(v) == 1 else list(v) for v in (stride, padding, dilation))
    before, after = list(padding), list(padding)
    matched, last, fused_something = [conv], conv, False
    # zeros padded before the convolution
    if (
        is_call(x, _aten.constant_pad_nd.default)
        and len(x.users) == 1
        and len(x.args[1]) == 2 * spatial
        and (x.args[2] if len(x.args) > 2 else 0) == 0
        and min(x.args[1]) >= 0
    ):
        pads = x.args[1]  # (before, after) pairs from the last dim
        for d in range(spatial):
            before[spatial - 1 - d] += pads[2 * d]
            after[spatial - 1 - d] += pads[2 * d + 1]
        matched.append(x)
        x = x.args[0]
        fused_something = True
    # an inference batch norm
    bn = [None] * 4
    eps = 0.0
    norm = only_user(conv)
    if is_call(norm, _aten._native_batch_norm_legit_no_training.default):
        getters = list(norm.users)
        if len(getters) == 1 and getters[0].target is operator.getitem and getters[0].args[1] == 0:
            _, gamma, beta, mean, var, _, eps = norm.args[:7]
            same_dtype = all(
                t is None or (is_float_tensor(t) and meta_val(t).dtype == meta_val(conv).dtype)
                for t in (gamma, beta, mean, var)
            )
            if same_dtype and mean is not None and var is not None:
                bn = [gamma, beta, mean, var]
                matched += [norm, getters[0]]
                last = getters[0]
                fused_something = True
    # an activation
    activation, low, high = "none", 0.0, 0.0
    act = only_user(last)
    if act is not None and is_call(act, *_ACTIVATIONS) and act.args[0] is last:
        activation = _ACTIVATIONS[act.target]
        if activation == "hardtanh":
            low = float(act.args[1]) if len(act.args) > 1 else -1.0
            high = float(act.args[2]) if len(act.args) > 2 else 1.0
        matched.append(act)
        last = act
        fused_something = True
    if not fused_something:
        return False
    replace_with_fused(
        graph,
        last,
        ops["conv_bn_act"],
        (x, weight, bias, stride, before, after, dilation, groups, *bn, float(eps), activation, low, high),
        matched,
    )
    return True
