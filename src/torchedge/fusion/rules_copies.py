"""The copy rule: a chain of consecutive copies (``permute_copy`` and plain copies), each reading
only what the one before wrote, in any reshape of it, as one copy of a strided view of the
chain's input (``torchedge_fused::strided_copy``): attention's heads go back to their place
through four copies. A chain of any length is not a pattern: `chain_copies` is the rule's
matcher. At load only: ahead of time, `torchedge.exir.passes.collapse_copies` composes such
chains into one ``permute_copy`` that the real ExecuTorch runs too."""

from __future__ import annotations

import math

from torchedge.fusion.pattern import MISSING, Graph, Match
from torchedge.fusion.rule import Rule, steps_label

__all__ = ["COPY_RULES", "chain_copies", "reshaped_strides"]

_PERMUTE = "aten::permute_copy"
_PLAIN = ("aten::expand_copy", "dim_order_ops::_clone_dim_order", "aten::clone")


def _copy(graph: Graph, node):
    """(the reference ``node`` copies, its permutation or None) when ``node`` is a copy, else None."""
    if graph.operator(node) == _PERMUTE:
        dims = graph.constant(graph.argument(node, "dims"))
        return None if dims is MISSING else (graph.argument(node, "self"), tuple(dims))
    source = graph.copied(node)
    return None if source is None else (source, None)


def _next(graph: Graph, node):
    """The copy that alone reads ``node``'s result, all of it, when one does."""
    readers = graph.readers(node)
    reader = readers[0] if len(readers) == 1 else None
    copy = None if reader is None else _copy(graph, reader)
    return reader if copy is not None and graph.producer(copy[0]) == node else None


def reshaped_strides(shape: tuple, strides: tuple, new: tuple) -> tuple | None:
    """The strides (in elements) that view elements laid out by (``shape``, ``strides``) as
    ``new`` in C order without copying them, None where no strides do (NumPy's rule)."""
    if math.prod(new) == 0:
        return tuple(math.prod(new[i + 1 :]) for i in range(len(new)))
    old = [(n, s) for n, s in zip(shape, strides) if n != 1]
    result = [0] * len(new)
    oi, oj, ni, nj = 0, 1, 0, 1
    while ni < len(new) and oi < len(old):
        size_new, size_old = new[ni], old[oi][0]
        while size_new != size_old:
            if size_new < size_old:
                size_new, nj = size_new * new[nj], nj + 1
            else:
                size_old, oj = size_old * old[oj][0], oj + 1
        if any(old[k][1] != old[k + 1][0] * old[k + 1][1] for k in range(oi, oj - 1)):
            return None
        result[nj - 1] = old[oj - 1][1]
        for k in range(nj - 1, ni, -1):
            result[k - 1] = result[k] * new[k]
        ni, nj, oi, oj = nj, nj + 1, oj, oj + 1
    last = result[ni - 1] if ni >= 1 else 1
    return tuple(result[:ni]) + (last,) * (len(new) - ni)


def _view(graph: Graph, run: list):
    """The (size, strides) of the view of the run's input that each copy's input shape and
    permutation give, None where a reshape of it would need a copy."""
    first = _copy(graph, run[0])[0]  # (every node of a run is a copy)
    shape = tuple(graph.shape(first) or ())
    strides = tuple(math.prod(shape[i + 1 :]) for i in range(len(shape)))
    for node in run:
        source, permutation = _copy(graph, node)
        new = tuple(graph.shape(source) or ())
        found = reshaped_strides(shape, strides, new)
        if found is None:
            return None
        shape, strides = new, found
        if permutation is not None:
            shape, strides = tuple(shape[d] for d in permutation), tuple(strides[d] for d in permutation)
    return shape, strides


def chain_copies(graph: Graph, node) -> Match | None:
    """The run of copies ending at ``node``: the chain through it (each copy read by the next
    alone) cut, from its first copy on, into the longest runs whose reshapes a strided view
    expresses; None unless a run of two or more ends at ``node``."""
    if _copy(graph, node) is None:
        return None
    chain = [node]
    while (later := _next(graph, chain[-1])) is not None:
        chain.append(later)
    while True:
        producer = graph.producer(_copy(graph, chain[0])[0])
        if producer is None or _copy(graph, producer) is None or graph.readers(producer) != (chain[0],):
            break  # a copy something else reads too ends its own chain
        chain.insert(0, producer)
    start = 0
    while start < len(chain) - 1:
        end = start + 1
        while end < len(chain) and _view(graph, chain[start : end + 1]) is not None:
            end += 1
        if chain[end - 1] == node:
            return _match(graph, chain[start:end]) if end - start > 1 else None
        start = end
    return None


def _match(graph: Graph, run: list) -> Match:
    size, stride = _view(graph, run)
    source = _copy(graph, run[0])[0]
    found = Match(graph, root=run[-1], refs={"input": source}, group=list(run))
    found.constants.update(size=list(size), stride=list(stride))
    return found


COPY_RULES = (
    Rule(
        "copy_chain",
        "exact",
        """Consecutive copies (``permute_copy``, plain copies) as one copy of a strided view of the
        first one's input (``torchedge_fused::strided_copy``): the same elements, copied once.""",
        "torchedge_fused::strided_copy",
        arguments=lambda found: {"self": found["input"], "size": found["size"], "stride": found["stride"]},
        label=steps_label,
        matcher=chain_copies,
        roots=(_PERMUTE, *_PLAIN),
        stages=("load",),
    ),
)
