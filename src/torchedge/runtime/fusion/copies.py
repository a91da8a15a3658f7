"""Load-time fusion of chains of copies: consecutive ``permute_copy`` and plain copies become one
copy of a strided view."""

from __future__ import annotations

import functools
from typing import cast

import numpy as np

from torchedge.runtime.fusion.dataflow import Dataflow
from torchedge.runtime.fusion.matching import PLAIN_COPIES, Match, overlaps, plain_copy, replaceable, value_of
from torchedge.runtime.steps import KERNEL, Step

__all__ = ["PERMUTE", "copy_chain"]

PERMUTE = "aten::permute_copy.out"


def copy_chain(flow: Dataflow, pc: int):
    """The last of several consecutive copies (``permute_copy``, plain copies), each reading what
    the one before wrote, in any reshape of it: each longest run of them whose reshapes the
    strides of a view can express becomes one copy of a strided view of the run's input
    (attention's heads go back to their place through four copies)."""
    match = Match(flow)
    if not _is_copy(match, pc) or _extends_chain(flow, match, pc):
        return []
    chain = [pc]
    while True:
        producer = flow.producer(chain[0], flow.steps[chain[0]].args[0])
        if (
            producer is None
            or not _is_copy(match, producer)
            or flow.readers(producer, flow.steps[producer].args[-1]) != {chain[0]}
        ):
            break  # a copy something else reads too ends its own chain
        chain.insert(0, producer)
    found, start = [], 0
    while start < len(chain) - 1:
        end = start + 1
        while end < len(chain) and _run_moves(flow, match, chain[start : end + 1]) is not None:
            end += 1
        run = chain[start:end]
        if len(run) > 1:
            found += _fused_copies(flow, match, run)
        start = end
    return found


def _run_moves(flow: Dataflow, match: Match, run: list[int]):
    """Each copy's input shape and permutation (None: a plain copy), when a strided view of the
    run's input can express them all (None otherwise)."""
    moves = tuple(
        (match.args(c)[0].shape, tuple(match.args(c)[1]) if flow.steps[c].label == PERMUTE else None) for c in run
    )
    return moves if _strided(value_of(flow, flow.steps[run[0]].args[0]), moves) is not None else None


def _fused_copies(flow: Dataflow, match: Match, run: list[int]):
    source, out = flow.steps[run[0]].args[0], flow.steps[run[-1]].args[-1]
    group = set(run)
    if not replaceable(flow, group, [(run[-1], out)], [(run[0], source)]):
        return []
    result = value_of(flow, out)
    scratch = np.empty(result.shape, result.dtype) if overlaps(flow, out, [source]) else None
    labels = " + ".join(flow.steps[c].label.split("::")[1] for c in run)
    fn = functools.partial(_copy_view, _run_moves(flow, match, run), scratch)
    return [(group, Step(KERNEL, fn, (source, out), out, f"{labels} (fused at load)"))]


def _is_copy(match: Match, pc: int) -> bool:
    step = match.flow.steps[pc]
    return step.kind == KERNEL and (step.label == PERMUTE or (step.label in PLAIN_COPIES and plain_copy(match, pc)))


def _extends_chain(flow: Dataflow, match: Match, pc: int) -> bool:
    """Whether the one reader of ``pc``'s result is a copy of it (then the chain ends later)."""
    readers = flow.readers(pc, flow.steps[pc].args[-1])
    if len(readers) != 1:
        return False
    (reader,) = readers
    return reader >= 0 and _is_copy(match, reader) and flow.producer(reader, flow.steps[reader].args[0]) == pc


def _strided(source: np.ndarray, moves) -> np.ndarray | None:
    """``source`` seen through each copy's input shape and permutation, without copying (None
    where a reshape of the strided view would need a copy)."""
    view = source
    for shape, permutation in moves:
        reshaped = view.view()
        try:
            reshaped.shape = shape
        except AttributeError:
            return None
        view = reshaped if permutation is None else reshaped.transpose(permutation)
    return view


def _copy_view(moves, scratch, source, out) -> None:
    """One copy of the run's strided view; two (through ``scratch``) when ``out`` overlaps ``source``."""
    view = cast(np.ndarray, _strided(source, moves))  # a view: `_run_moves` checked it at load
    if scratch is None:
        np.copyto(out.reshape(view.shape), view)
    else:
        np.copyto(scratch.reshape(view.shape), view)
        np.copyto(out, scratch)
