"""Load-time fusion of attention: the math decomposition of ``scaled_dot_product_attention`` runs
as the fused attention kernel."""

from __future__ import annotations

import functools
import math

import numpy as np

from torchedge.kernels.portable.fused import FLOATS, attention
from torchedge.runtime.fusion.dataflow import Dataflow
from torchedge.runtime.fusion.matching import Match, behind_copies, overlaps, replaceable, value_of
from torchedge.runtime.steps import KERNEL, Step

__all__ = ["fused_attention"]


def _copied(match: Match, pc: int | None, position: int, label: str) -> int | None:
    """The ``label`` step whose result reaches argument ``position`` of ``pc`` through plain copies."""
    start = behind_copies(match, pc, position)
    return None if start is None else match.step(start[0], start[1], label)


def _scale_of(match: Match, pc: int | None) -> float | None:
    """The factor of a ``mul`` by a Python number or by a constant 0-d float tensor."""
    if pc is None:
        return None
    step = match.flow.steps[pc]
    _, scale, _ = match.args(pc)
    if step.label == "aten::mul.out":
        constant = step.args[1] in match.flow.values.constants
        return float(scale) if constant and scale.ndim == 0 and scale.dtype.kind == "f" else None
    return float(scale) if isinstance(scale, (int, float)) and not isinstance(scale, bool) else None


def _scaled(match: Match, pc: int | None, position: int) -> int | None:
    """The ``mul`` by a scale (of either overload) feeding argument ``position`` through plain copies."""
    start = behind_copies(match, pc, position)
    if start is None:
        return None
    producer = match.flow.producer(start[0], match.flow.steps[start[0]].args[start[1]])
    if producer is None or match.flow.steps[producer].label not in ("aten::mul.Scalar_out", "aten::mul.out"):
        return None
    match.group.add(producer)
    return producer


def fused_attention(flow: Dataflow, pc: int):
    """``bmm(copy(where(...softmax...)), copy(v))`` back to ``bmm(copy(q * s), copy(kᵀ * s))``, each
    copy one or more plain copies (an identity ``expand_copy``, then a ``_clone_dim_order`` when
    the batch has more than one sample)."""
    match = Match(flow)
    match.group.add(pc)
    where = _copied(match, pc, 0, "aten::where.self_out")
    values = behind_copies(match, pc, 1)
    if where is None or values is None:
        return []
    keep = match.step(where, 0, "aten::logical_not.out")
    zeros = match.step(where, 1, "aten::full_like.out")
    softmax = match.step(where, 2, "aten::_softmax.out")
    rows = match.step(keep, 0, "aten::any.out")
    unmasked = match.step(rows, 0, "aten::logical_not.out")
    masked = match.step(unmasked, 0, "aten::eq.Scalar_out")
    if zeros is None or softmax is None or masked is None:
        return []
    scores_pc = flow.producer(softmax, flow.steps[softmax].args[0])
    if scores_pc is None or flow.producer(masked, flow.steps[masked].args[0]) != scores_pc:
        return []
    mask = None
    if flow.steps[scores_pc].label == "aten::add.out":
        match.group.add(scores_pc)
        mask = flow.steps[scores_pc].args[1]
        scores = match.step(scores_pc, 0, "aten::bmm.out")
    else:
        scores = match.step(softmax, 0, "aten::bmm.out")
    queries = _scaled(match, scores, 0)
    keys_scaled = _scaled(match, scores, 1)
    keys = match.step(keys_scaled, 0, "aten::permute_copy.out")
    q_scale, k_scale = _scale_of(match, queries), _scale_of(match, keys_scaled)
    if queries is None or keys is None or q_scale is None or k_scale is None:
        return []
    if not _attention_arguments(match, where, zeros, softmax, rows, masked, scores_pc, keys, mask):
        return []
    q = flow.steps[queries].args[0]
    k = flow.steps[keys].args[0]
    v = flow.steps[values[0]].args[values[1]]
    out = flow.steps[pc].args[-1]
    inputs = [q, k, v] if mask is None else [q, k, v, mask]
    reads = [(queries, q), (keys, k), (values[0], v)] + ([] if mask is None else [(scores_pc, mask)])
    if not _attention_shapes(flow, q, k, v, mask, out) or not replaceable(flow, match.group, [(pc, out)], reads):
        return []
    shape = value_of(flow, q).shape[:-1] + value_of(flow, v).shape[-1:]
    scratch = np.empty(shape, value_of(flow, q).dtype) if overlaps(flow, out, inputs) else None
    fn = functools.partial(_attend, q_scale * k_scale, shape, scratch)
    args = (q, k, v, out) if mask is None else (q, k, v, out, mask)
    return [(match.group, Step(KERNEL, fn, args, out, "torchedge_fused::attention.out (fused at load)"))]


def _attend(scale: float, shape: tuple, scratch, query, key, value, out, mask=None) -> None:
    """The fused attention kernel on the group's tensors, ``out`` seen as (B, H, S, Dv); through
    ``scratch`` when ``out`` overlaps an operand."""
    if scratch is None:
        attention(query, key, value, mask, scale, out.reshape(shape))
    else:
        attention(query, key, value, mask, scale, scratch)
        np.copyto(out.reshape(shape), scratch)


def _attention_arguments(match: Match, where, zeros, softmax, rows, masked, scores_pc, keys, mask) -> bool:
    """The scalar arguments of the group are exactly those of the decomposition the kernel computes."""
    _, zero, _, _ = match.args(zeros)  # full_like(p, 0, dtype=...) with p the softmax
    _, dim, half_to_float, _ = match.args(softmax)
    _, any_dim, keepdim, _ = match.args(rows)
    _, masked_value, _ = match.args(masked)
    _, permutation, _ = match.args(keys)
    flow = match.flow
    ok = (
        zero == 0
        and dim in (-1, 3)
        and half_to_float is False
        and any_dim in (-1, 3)
        and keepdim is True
        and masked_value == -math.inf
        and tuple(permutation) == (0, 1, 3, 2)
        and flow.producer(zeros, flow.steps[zeros].args[0]) == softmax
    )
    if mask is not None:
        _, _, alpha, _ = match.args(scores_pc)
        ok = ok and alpha == 1
    return ok


def _attention_shapes(flow: Dataflow, q: int, k: int, v: int, mask: int | None, out: int) -> bool:
    """4-d float (B, H, S, D) operands of one dtype, a float mask of it that broadcasts to the scores."""
    query, key, value, result = (value_of(flow, i) for i in (q, k, v, out))
    arrays = [query, key, value, result]
    if any(not isinstance(a, np.ndarray) or a.ndim != 4 for a in arrays[:3]):
        return False
    if {a.dtype for a in arrays} != {query.dtype} or query.dtype not in FLOATS:
        return False
    batch, heads, sq, d = query.shape
    if key.shape != (batch, heads, key.shape[2], d) or value.shape[:3] != key.shape[:3]:
        return False
    if result.size != batch * heads * sq * value.shape[3]:
        return False
    if mask is None:
        return True
    weights = value_of(flow, mask)
    if not isinstance(weights, np.ndarray) or weights.dtype != query.dtype:
        return False
    scores = (batch, heads, sq, key.shape[2])
    try:
        return weights.ndim <= 4 and np.broadcast_shapes(weights.shape, scores) == scores
    except ValueError:
        return False


# (anchor operators, rule) in the order they claim steps.
