"""Choose fused kernels ahead of time: chains of core ATen operators become one torchedge operator.

Opt-in, for programs that run on torchedge's own runtime: the fused operators live in the
private ``torchedge_fused`` namespace, which the real ExecuTorch does not have, so a program
that uses them fails to load there naming the missing operator (and `to_executorch` refuses
it up front when ``ExecutorchBackendConfig(kernel_set=...)`` names an ExecuTorch build)::

    config = ExecutorchBackendConfig(passes=[FuseKernelsPass()])
    program = to_edge(exported).to_executorch(config)

Three fusions (float32 and float64 only); the first two are on by default, where they pay:

* **attention**: the math decomposition of ``scaled_dot_product_attention`` (scale q and kᵀ,
  expand, bmm, add the mask, softmax, the safe-softmax masking of fully masked rows, expand,
  bmm: about 17 instructions and as many intermediate tensors) becomes
  ``torchedge_fused::attention(q, k, v, mask, scale)``.
* **conv_bn_act**: ``constant_pad_nd`` (zeros) before, an inference batch norm and a ``relu``
  or ``hardtanh`` after a convolution fold into ``torchedge_fused::conv_bn_act``: the batch
  norm into the weights and bias (computed once per constant weight), the padding into the
  convolution's own (any amount per side), the activation into a pass over its output.
* **linear_act**: ``addmm`` / ``mm`` followed (through a reshape) by ``relu``, ``gelu``
  (exact) or ``silu`` (also as ``x * sigmoid(x)``, core ATen's form) becomes
  ``torchedge_fused::linear_act``: the activation runs in place on the product. Off by
  default (``FuseKernelsPass(linear=True)``): it measured no faster than the two kernels.

Each fused operator has an out variant, so `OutVariantPass`, memory planning and the emitter
treat it like any other operator; the kernels are in `torchedge.kernels.portable.fused`.
"""

from __future__ import annotations

import math
import operator

import torch

from torchedge.exir.pass_base import PassBase, PassResult
from torchedge.exir.passes.debug_handles import inherit_debug_info

__all__ = ["FuseKernelsPass", "NAMESPACE", "define_fused_ops", "fused_ops"]

NAMESPACE = "torchedge_fused"
_aten = torch.ops.aten
_FLOATS = (torch.float32, torch.float64)

_SCHEMAS = {
    "attention": "(Tensor query, Tensor key, Tensor value, Tensor? mask, float scale)",
    "conv_bn_act": "(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] padding, int[] padding_after, "
    "int[] dilation, int groups, Tensor? bn_weight, Tensor? bn_bias, Tensor? bn_mean, "
    "Tensor? bn_var, float eps, str activation, float low, float high)",
    "linear_act": "(Tensor input, Tensor weight, Tensor? bias, str activation)",
}
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


_IMPLEMENTATIONS = {"attention": _attention, "conv_bn_act": _conv_bn_act, "linear_act": _linear_act}


def _out_implementation(fn):
    def run(*args, out):
        out.copy_(fn(*args))
        return out

    return run


def define_fused_ops() -> None:
    """Define the ``torchedge_fused`` operators (functional and ``.out``) once per process."""
    global _LIBRARY
    if _LIBRARY is not None:
        return
    library = torch.library.Library(NAMESPACE, "DEF")
    for name, arguments in _SCHEMAS.items():
        library.define(f"{name}{arguments} -> Tensor")
        library.define(f"{name}.out{arguments[:-1]}, *, Tensor(a!) out) -> Tensor(a!)")
        library.impl(name, _IMPLEMENTATIONS[name], "CompositeExplicitAutograd")
        library.impl(f"{name}.out", _out_implementation(_IMPLEMENTATIONS[name]), "CompositeExplicitAutograd")
    _LIBRARY = library


def fused_ops() -> dict:
    """name -> functional ``OpOverload`` of each fused operator."""
    define_fused_ops()
    return {name: getattr(getattr(torch.ops, NAMESPACE), name).default for name in _SCHEMAS}


# -- graph helpers -------------------------------------------------------------------------------


def _val(node):
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def _is(node, *targets) -> bool:
    return isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target in targets


def _only_user(node: torch.fx.Node):
    users = list(node.users)
    return users[0] if len(users) == 1 else None


def _float_tensor(node) -> bool:
    val = _val(node)
    return isinstance(val, torch.Tensor) and val.dtype in _FLOATS


def _static(node) -> bool:
    val = _val(node)
    return isinstance(val, torch.Tensor) and all(isinstance(s, int) for s in val.shape)


def _shape(node) -> tuple:
    return tuple(_val(node).shape)


def _identity_expand(node):
    """The input of an ``expand_copy`` to its own shape (a plain copy), else None."""
    if _is(node, _aten.expand_copy.default) and _shape(node) == _shape(node.args[0]) and len(node.users) == 1:
        return node.args[0]
    return None


def _through_view_of_identity_expand(node):
    """``view_copy(expand_copy(x))`` where the expand copies x unchanged: (x, [the two nodes])."""
    if not _is(node, _aten.view_copy.default) or len(node.users) != 1:
        return None, []
    source = _identity_expand(node.args[0])
    return (source, [node, node.args[0]]) if source is not None else (None, [])


def _scaled(node):
    """``mul.Scalar(x, s)`` with one user: (x, s, [node]); anything else: (node, 1.0, [])."""
    if _is(node, _aten.mul.Scalar) and len(node.users) == 1 and isinstance(node.args[1], (int, float)):
        return node.args[0], float(node.args[1]), [node]
    return node, 1.0, []


def _replace(graph: torch.fx.Graph, last: torch.fx.Node, target, args, matched: list) -> torch.fx.Node:
    """Insert ``target(*args)`` before ``last``, give it last's users and meta, erase ``matched``."""
    with graph.inserting_before(last):
        fused = graph.call_function(target, tuple(args))
    fused.meta["val"] = last.meta["val"]
    inherit_debug_info(fused, last)
    last.replace_all_uses_with(fused)
    for node in sorted(set(matched), key=_position(graph), reverse=True):
        if not node.users:
            graph.erase_node(node)
    return fused


def _position(graph: torch.fx.Graph):
    order = {node: i for i, node in enumerate(graph.nodes)}
    return order.__getitem__


# -- attention -------------------------------------------------------------------------------


def _fuse_attention(graph: torch.fx.Graph, where: torch.fx.Node, ops: dict) -> bool:
    """Match, from the safe-softmax ``where``, the SDPA math decomposition:

    ``where(logical_not(any(logical_not(eq(S, -inf)), -1)), full_like(P, 0), P)`` with
    ``P = _softmax(S, -1)``, ``S = view(bmm(A, B)) [+ mask]``, ``A = view(expand(q [* s]))``,
    ``B = view(expand(permute(k, [.., -1, -2]) [* s]))``; its result feeds
    ``view(bmm(view(expand(where)), view(expand(v))))``.
    """
    if len(where.args) != 3:
        return False
    cond, zeros, probs = where.args
    if not (
        _is(probs, _aten._softmax.default)
        and _is(zeros, _aten.full_like.default)
        and zeros.args[0] is probs
        and zeros.args[1] == 0
        and len(zeros.users) == 1
        and set(probs.users) == {zeros, where}
    ):
        return False
    scores = probs.args[0]
    rank = len(_shape(scores))
    if rank < 3 or probs.args[1] not in (-1, rank - 1) or probs.args[2]:
        return False
    # the condition: no score of the row is finite
    chain = [cond]
    if not (_is(cond, _aten.logical_not.default) and len(cond.users) == 1):
        return False
    anything = cond.args[0]
    if not (
        _is(anything, _aten.any.dim)
        and len(anything.users) == 1
        and anything.args[1] in (-1, rank - 1)
        and (anything.args[2] if len(anything.args) > 2 else anything.kwargs.get("keepdim", False))
    ):
        return False
    finite = anything.args[0]
    if not (_is(finite, _aten.logical_not.default) and len(finite.users) == 1):
        return False
    infinite = finite.args[0]
    if not (
        _is(infinite, _aten.eq.Scalar)
        and len(infinite.users) == 1
        and infinite.args[0] is scores
        and infinite.args[1] == -math.inf
    ):
        return False
    chain += [anything, finite, infinite]
    if set(scores.users) != {probs, infinite}:
        return False
    # the scores: view(bmm(A, B)) [+ mask]
    mask, matched = None, [where, zeros, probs, *chain]
    product = scores
    if _is(scores, _aten.add.Tensor) and len(scores.args) == 2 and not scores.kwargs:
        product, mask = scores.args
        if not (_float_tensor(mask) and _val(mask).dtype == _val(scores).dtype):
            return False
        matched.append(scores)
    if not (_is(product, _aten.view_copy.default) and (product is scores or len(product.users) == 1)):
        return False
    bmm = product.args[0]
    if not (_is(bmm, _aten.bmm.default) and len(bmm.users) == 1):
        return False
    matched += [product, bmm]
    q_scaled, a_nodes = _through_view_of_identity_expand(bmm.args[0])
    kt_scaled, b_nodes = _through_view_of_identity_expand(bmm.args[1])
    if q_scaled is None or kt_scaled is None:
        return False
    query, q_scale, q_nodes = _scaled(q_scaled)
    transposed, k_scale, k_nodes = _scaled(kt_scaled)
    if not (_is(transposed, _aten.permute_copy.default) and len(transposed.users) == 1):
        return False
    dims = list(transposed.args[1])
    n = len(dims)
    if dims != list(range(n - 2)) + [n - 1, n - 2] or n != rank:
        return False
    key = transposed.args[0]
    matched += [*a_nodes, *b_nodes, *q_nodes, *k_nodes, transposed]
    # the weighted sum of the values: view(bmm(view(expand(where)), view(expand(v))))
    user = _only_user(where)
    if user is None or _identity_expand(user) is None:
        return False
    flat = _only_user(user)
    if not _is(flat, _aten.view_copy.default):
        return False
    second = _only_user(flat)
    if not (_is(second, _aten.bmm.default) and second.args[0] is flat):
        return False
    value, v_nodes = _through_view_of_identity_expand(second.args[1])
    result = _only_user(second)
    if value is None or not _is(result, _aten.view_copy.default):
        return False
    shapes = [_shape(x) for x in (query, key, value, result)]
    if not all(len(s) == rank for s in shapes) or shapes[0][:-2] != shapes[1][:-2] or shapes[3][:-1] != shapes[0][:-1]:
        return False
    if not all(_float_tensor(x) and _static(x) and _val(x).dtype == _val(query).dtype for x in (query, key, value)):
        return False
    matched += [user, flat, second, *v_nodes, result]
    _replace(graph, result, ops["attention"], (query, key, value, mask, q_scale * k_scale), matched)
    return True


# -- convolution + batch norm + activation -------------------------------------------------------

_ACTIVATIONS = {_aten.relu.default: "relu", _aten.hardtanh.default: "hardtanh"}


def _fuse_conv(graph: torch.fx.Graph, conv: torch.fx.Node, ops: dict) -> bool:
    args = list(conv.args) + [None] * (9 - len(conv.args))
    x, weight, bias, stride, padding, dilation, transposed, _, groups = args[:9]
    if transposed or conv.kwargs or not (_float_tensor(conv) and _static(conv) and _float_tensor(x)):
        return False
    spatial = len(_shape(weight)) - 2
    if not 1 <= spatial <= 3 or len(_shape(x)) != spatial + 2:
        return False
    stride, padding, dilation = ([v] * spatial if len(v) == 1 else list(v) for v in (stride, padding, dilation))
    before, after = list(padding), list(padding)
    matched, last, fused_something = [conv], conv, False
    # zeros padded before the convolution
    if (
        _is(x, _aten.constant_pad_nd.default)
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
    norm = _only_user(conv)
    if _is(norm, _aten._native_batch_norm_legit_no_training.default):
        getters = list(norm.users)
        if len(getters) == 1 and getters[0].target is operator.getitem and getters[0].args[1] == 0:
            _, gamma, beta, mean, var, _, eps = norm.args[:7]
            same_dtype = all(
                t is None or (_float_tensor(t) and _val(t).dtype == _val(conv).dtype) for t in (gamma, beta, mean, var)
            )
            if same_dtype and mean is not None and var is not None:
                bn = [gamma, beta, mean, var]
                matched += [norm, getters[0]]
                last = getters[0]
                fused_something = True
    # an activation
    activation, low, high = "none", 0.0, 0.0
    act = _only_user(last)
    if act is not None and _is(act, *_ACTIVATIONS) and act.args[0] is last:
        activation = _ACTIVATIONS[act.target]
        if activation == "hardtanh":
            low = float(act.args[1]) if len(act.args) > 1 else -1.0
            high = float(act.args[2]) if len(act.args) > 2 else 1.0
        matched.append(act)
        last = act
        fused_something = True
    if not fused_something:
        return False
    _replace(
        graph,
        last,
        ops["conv_bn_act"],
        (x, weight, bias, stride, before, after, dilation, groups, *bn, float(eps), activation, low, high),
        matched,
    )
    return True


# -- linear + activation -------------------------------------------------------------------------

_LINEAR_ACTIVATIONS = {_aten.relu.default: "relu", _aten.gelu.default: "gelu", _aten.silu.default: "silu"}


def _silu_input(mul: torch.fx.Node):
    """x of ``mul(x, sigmoid(x))`` (silu as core ATen decomposes it), with the sigmoid node."""
    if len(mul.args) != 2 or mul.kwargs:
        return None, None
    for x, gate in (mul.args, reversed(mul.args)):
        if (
            _is(gate, _aten.sigmoid.default)
            and gate.args[0] is x
            and len(gate.users) == 1
            and isinstance(x, torch.fx.Node)
            and set(x.users) == {gate, mul}
        ):
            return x, gate
    return None, None


def _fuse_linear(graph: torch.fx.Graph, act: torch.fx.Node, ops: dict) -> bool:
    extra = []  # nodes of the activation besides act itself
    if act.target is _aten.mul.Tensor:
        source, gate = _silu_input(act)
        if source is None:
            return False
        activation, extra, users = "silu", [gate], 2
    else:
        activation, source, users = _LINEAR_ACTIVATIONS[act.target], act.args[0], 1
        if act.target is _aten.gelu.default and (act.args[1:] or act.kwargs.get("approximate", "none")) not in (
            "none",
            ("none",),
        ):
            return False
    view = None
    if _is(source, _aten.view_copy.default) and len(source.users) == users:
        view, source = source, source.args[0]
    elif isinstance(source, torch.fx.Node) and len(source.users) != users:
        return False
    if _is(source, _aten.addmm.default) and len(source.args) == 3 and not source.kwargs:
        bias, x, weight = source.args
    elif _is(source, _aten.mm.default):
        bias, (x, weight) = None, source.args
    else:
        return False
    if (
        len(source.users) != (1 if view is not None else users)
        or not _static(source)
        or not all(_float_tensor(t) for t in (source, x, weight))
    ):
        return False
    if bias is not None and (not _float_tensor(bias) or len(_shape(bias)) != 1):
        return False
    fused = _replace(graph, source, ops["linear_act"], (x, weight, bias, activation), [source])
    act.replace_all_uses_with(view if view is not None else fused)
    graph.erase_node(act)
    for node in extra:
        graph.erase_node(node)
    return True


class FuseKernelsPass(PassBase):
    """Replace operator chains by torchedge's fused kernels (see the module docstring).

    ``attention``, ``conv`` and ``linear`` switch each fusion on or off. ``linear`` is off by
    default: on the built-in models it did not pay (the activation costs the same passes over
    the product in place as into a buffer of its own, and GEMM time is unchanged).
    """

    def __init__(self, attention: bool = True, conv: bool = True, linear: bool = False):
        super().__init__()
        self.attention, self.conv, self.linear = attention, conv, linear

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        ops = fused_ops()
        graph = graph_module.graph
        modified = False
        for node in list(graph.nodes):
            if node._erased or node.op != "call_function":
                continue  # erased by an earlier fusion
            if self.attention and node.target is _aten.where.self:
                modified |= _fuse_attention(graph, node, ops)
        for node in list(graph.nodes):
            if node._erased or node.op != "call_function":
                continue
            if self.conv and node.target is _aten.convolution.default:
                modified |= _fuse_conv(graph, node, ops)
            elif self.linear and (node.target in _LINEAR_ACTIVATIONS or node.target is _aten.mul.Tensor):
                modified |= _fuse_linear(graph, node, ops)
        if modified:
            graph.lint()
        return PassResult(graph_module, modified)


def fusion_passes(config) -> list:
    """The fusion passes `to_executorch` runs for ``config``: `FuseKernelsPass` when the config
    asks for fused kernels (``fuse_kernels=True``) and targets torchedge's own runtime."""
    if config.fuse_kernels and config.kernel_set is None:
        return [FuseKernelsPass()]
    return []
