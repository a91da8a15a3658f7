"""The ``torchedge_fused`` operators: their schemas, their eager reference implementations and their
definition in a `torch.library`, so that fused graphs still trace, run in eager and get out variants.

The portable kernels that run them are in `torchedge.kernels.optimized.fused`; the pass that puts
them in graphs is `torchedge.exir.passes.kernel_fusion`.
"""

from __future__ import annotations

import torch

__all__ = ["NAMESPACE", "define_fused_ops", "fused_ops"]

NAMESPACE = "torchedge_fused"

_SCHEMAS = {
    "attention": "(Tensor query, Tensor key, Tensor value, Tensor? mask, float scale)",
    "attention_interleaved": "(Tensor query, Tensor key, Tensor value, Tensor? mask, float scale)",
    "attention_exact": "(Tensor query, Tensor key, Tensor value, Tensor? mask, float q_scale, float k_scale)",
    "conv_bn_act": "(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] padding, int[] padding_after, "
    "int[] dilation, int groups, Tensor? bn_weight, Tensor? bn_bias, Tensor? bn_mean, "
    "Tensor? bn_var, float eps, str activation, float low, float high)",
    "linear_act": "(Tensor input, Tensor weight, Tensor? bias, str activation)",
    "lstm_cell": "(Tensor input_gates, Tensor hidden_gates, Tensor cell, Tensor? hidden, Tensor? weight, int step)",
    "gru_cell": "(Tensor input_gates, Tensor hidden_gates, Tensor hidden, Tensor? weight, int step)",
}
_OUTPUTS = {"lstm_cell": 2}  # operators with several results (hidden, cell); the others return one tensor
_LIBRARY = None


def _activate(x: torch.Tensor, activation: str, low: float = 0.0, high: float = 0.0) -> torch.Tensor:
    if activation == "relu":
        return torch.relu(x)
    if activation == "hardtanh":
        return torch.nn.functional.hardtanh(x, low, high)
    if activation == "gelu":
        return torch.nn.functional.gelu(x)
    if activation == "silu":
        return torch.nn.functional.silu(x)
    return x


def _attention(query, key, value, mask, scale):
    scores = query @ key.transpose(-2, -1) * scale
    if mask is not None:
        scores = scores + mask
    weights = torch.softmax(scores, -1)
    weights = torch.where(torch.isneginf(scores).all(-1, keepdim=True), 0.0, weights)
    return weights @ value


def _attention_exact(query, key, value, mask, q_scale, k_scale):
    """`_attention` with q and kᵀ scaled apart, as the decomposition scales them."""
    scores = (query * q_scale) @ (key.transpose(-2, -1) * k_scale)
    if mask is not None:
        scores = scores + mask
    weights = torch.softmax(scores, -1)
    return torch.where(torch.isneginf(scores).all(-1, keepdim=True), 0.0, weights) @ value


def _attention_interleaved(query, key, value, mask, scale):
    """`_attention` on (..., S, H, D) tensors, the heads side by side in each token's features
    (the layout of the projections): the result is (..., Sq, H, Dv); the mask is laid out as
    for `_attention`, (..., H, Sq, Sk)."""
    heads_first = (t.transpose(-3, -2) for t in (query, key, value))
    return _attention(*heads_first, mask, scale).transpose(-3, -2)


def _conv_bn_act(
    input,
    weight,
    bias,
    stride,
    padding,
    padding_after,
    dilation,
    groups,
    bn_weight,
    bn_bias,
    bn_mean,
    bn_var,
    eps,
    activation,
    low,
    high,
):
    pads = [p for before, after in zip(reversed(padding), reversed(padding_after)) for p in (before, after)]
    y = torch.ops.aten.convolution(
        torch.nn.functional.pad(input, pads),
        weight,
        bias,
        stride,
        [0] * len(stride),
        dilation,
        False,
        [0] * len(stride),
        groups,
    )
    if bn_mean is not None:
        y = torch.ops.aten._native_batch_norm_legit_no_training(y, bn_weight, bn_bias, bn_mean, bn_var, 0.0, eps)[0]
    return _activate(y, activation, low, high)


def _linear_act(input, weight, bias, activation):
    y = input @ weight if bias is None else torch.addmm(bias, input, weight)
    return _activate(y, activation)


def _step_gates(input_gates, hidden_gates, hidden, weight, step):
    """A recurrent step's gate pre-activations: ``input_gates[step]`` (all of it when step < 0),
    and ``hidden @ weight + hidden_gates`` (its bias) when a weight is given, else hidden_gates."""
    if step >= 0:
        input_gates = input_gates[step]
    if weight is not None:
        projected = torch.addmm(hidden_gates, hidden.reshape(-1, hidden.shape[-1]), weight)
        hidden_gates = projected.reshape(*hidden.shape[:-1], weight.shape[-1])
    return input_gates, hidden_gates


def _lstm_cell(input_gates, hidden_gates, cell, hidden, weight, step):
    """One LSTM step from its gate pre-activations (input and hidden projections, biases included)."""
    input_gates, hidden_gates = _step_gates(input_gates, hidden_gates, hidden, weight, step)
    i, f, g, o = (hidden_gates + input_gates).chunk(4, -1)
    cell = torch.sigmoid(f) * cell + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(cell), cell


def _gru_cell(input_gates, hidden_gates, hidden, weight, step):
    """One GRU step from its gate pre-activations (input and hidden projections, biases included)."""
    input_gates, hidden_gates = _step_gates(input_gates, hidden_gates, hidden, weight, step)
    x_r, x_z, x_n = input_gates.chunk(3, -1)
    h_r, h_z, h_n = hidden_gates.chunk(3, -1)
    r, z = torch.sigmoid(h_r + x_r), torch.sigmoid(h_z + x_z)
    n = torch.tanh(x_n + h_n * r)
    return (hidden - n) * z + n


_IMPLEMENTATIONS = {
    "attention": _attention,
    "attention_interleaved": _attention_interleaved,
    "attention_exact": _attention_exact,
    "conv_bn_act": _conv_bn_act,
    "linear_act": _linear_act,
    "lstm_cell": _lstm_cell,
    "gru_cell": _gru_cell,
}


def _out_implementation(fn, outputs: int):
    if outputs > 1:

        def run_several(*args, **outs):
            results = tuple(outs[f"out{i}"] for i in range(outputs))
            for out, value in zip(results, fn(*args)):
                out.copy_(value)
            return results

        return run_several

    def run(*args, out):
        out.copy_(fn(*args))
        return out

    return run


def _declarations(name: str, arguments: str) -> tuple[str, str]:
    """The functional and ``.out`` schemas of one fused operator."""
    outputs = _OUTPUTS.get(name, 1)
    if outputs == 1:
        return f"{name}{arguments} -> Tensor", f"{name}.out{arguments[:-1]}, *, Tensor(a!) out) -> Tensor(a!)"
    aliases = [chr(ord("a") + i) for i in range(outputs)]
    outs = ", ".join(f"Tensor({a}!) out{i}" for i, a in enumerate(aliases))
    returns = ", ".join(f"Tensor({a}!)" for a in aliases)
    functional = f"{name}{arguments} -> ({', '.join(['Tensor'] * outputs)})"
    return functional, f"{name}.out{arguments[:-1]}, *, {outs}) -> ({returns})"


def define_fused_ops() -> None:
    """Define the ``torchedge_fused`` operators (functional and ``.out``) once per process."""
    global _LIBRARY
    if _LIBRARY is not None:
        return
    library = torch.library.Library(NAMESPACE, "DEF")
    for name, arguments in _SCHEMAS.items():
        for declaration in _declarations(name, arguments):
            library.define(declaration)
        library.impl(name, _IMPLEMENTATIONS[name], "CompositeExplicitAutograd")
        outputs = _OUTPUTS.get(name, 1)
        library.impl(f"{name}.out", _out_implementation(_IMPLEMENTATIONS[name], outputs), "CompositeExplicitAutograd")
    _LIBRARY = library


def fused_ops() -> dict:
    """name -> functional ``OpOverload`` of each fused operator."""
    define_fused_ops()
    return {name: getattr(getattr(torch.ops, NAMESPACE), name).default for name in _SCHEMAS}
