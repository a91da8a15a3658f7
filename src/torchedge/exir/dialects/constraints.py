"""Dtype-constraint checks over `OpSpec` data, and the grouping that writes them.

`satisfies` decides whether one node's dtypes meet an operator's spec; `check_node_dtypes`
is the Edge verifier's entry point and explains a failure; `spec_from_combinations` turns
the exact set of admissible dtype combinations into aliases and constraints.

>>> check_node_dtypes(torch.ops.aten.sigmoid.default, {"self": torch.int32}, [torch.float32]) is None
True
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

import torch

from torchedge.exir.dialects.edge_op import EdgeOpOverload
from torchedge.exir.dialects.spec import DTYPE_NAMES, OpSpec, is_tensor_like, op_spec, tensor_io_names

__all__ = ["satisfies", "check_node_dtypes", "spec_from_combinations"]

_ORDER = {dtype: (name, i) for i, (name, dtype) in enumerate(sorted(DTYPE_NAMES.items()))}
_SHOWN_ALTERNATIVES = 6


def _matches(spec: OpSpec, constraint: Mapping[str, str], dtypes: Mapping[str, torch.dtype | None]) -> bool:
    bound: dict[str, torch.dtype] = {}
    for name, dtype in dtypes.items():
        if dtype is None:  # an absent optional tensor, an empty list: nothing to check
            continue
        alias = constraint.get(name)
        if alias is None or dtype not in spec.type_alias[alias] or bound.setdefault(alias, dtype) != dtype:
            return False
    return True


def satisfies(spec: OpSpec, dtypes: Mapping[str, torch.dtype | None]) -> bool:
    """Whether some constraint of ``spec`` admits ``dtypes`` (tensor name -> dtype, None if absent)."""
    return any(_matches(spec, c, dtypes) for c in spec.type_constraint)


def _name(dtype) -> str:
    return _ORDER[dtype][0] if dtype in _ORDER else str(dtype)


def _describe(spec: OpSpec, constraint: Mapping[str, str]) -> str:
    by_alias = defaultdict(list)
    for name, alias in constraint.items():
        by_alias[alias].append(name)
    return (
        "("
        + "; ".join(
            f"{'='.join(names)} in [{', '.join(map(_name, spec.type_alias[alias]))}]"
            for alias, names in by_alias.items()
        )
        + ")"
    )


def _list_dtype(name: str, value) -> torch.dtype | None:
    """The one dtype of a tensor list's elements (None when it has none)."""
    found = {d for d in value if d is not None}
    if len(found) > 1:
        raise ValueError(f"the tensors of list '{name}' have different dtypes {sorted(map(_name, found))}")
    return found.pop() if found else None


def check_node_dtypes(op, arg_dtypes: Mapping[str, torch.dtype | Sequence | None], ret_dtypes: Sequence) -> str | None:
    """None if the Edge spec admits these dtypes for ``op``, else a message saying why not.

    ``op`` is an `EdgeOpOverload` or an ATen ``OpOverload``; ``arg_dtypes`` maps tensor
    argument names to a dtype (a sequence of dtypes for a tensor list, None if absent);
    ``ret_dtypes`` gives one entry per schema return (None for a non-tensor return).
    """
    aten = op._op if isinstance(op, EdgeOpOverload) else op
    spec, schema = op_spec(aten), aten._schema
    arg_names, ret_names = tensor_io_names(schema)
    unknown = sorted(set(arg_dtypes) - set(arg_names))
    if unknown:
        return f"{spec.func}: {unknown} are not tensor arguments of {schema}"
    if len(ret_dtypes) != len(schema.returns):
        return f"{spec.func}: {len(ret_dtypes)} return dtypes given for the {len(schema.returns)} returns of {schema}"
    tensor_rets = [d for d, r in zip(ret_dtypes, schema.returns) if is_tensor_like(r.type)]
    found: dict[str, torch.dtype | None] = {}
    try:
        for name, value in [*arg_dtypes.items(), *zip(ret_names, tensor_rets)]:
            found[name] = _list_dtype(name, value) if isinstance(value, (list, tuple)) else value
    except ValueError as e:
        return f"{spec.func}: {e}"
    if satisfies(spec, found):
        return None
    shown = ", ".join(f"{n}={_name(d)}" for n, d in found.items() if d is not None)
    if not spec.type_constraint:
        return f"{spec.func}: found {shown}, but the portable kernels support no dtype combination of it"
    alternatives = [_describe(spec, c) for c in spec.type_constraint]
    more = len(alternatives) - _SHOWN_ALTERNATIVES
    listed = " or ".join(alternatives[:_SHOWN_ALTERNATIVES]) + (f" or {more} more (see edge.yaml)" if more > 0 else "")
    return f"{spec.func}: dtypes {shown} match no type constraint; allowed: {listed}"


def _pattern(combo: tuple) -> tuple:
    """For each position: None if absent, else the first position holding the same dtype."""
    return tuple(None if d is None else combo.index(d) for d in combo)


def _rectangles(tuples: list[tuple]) -> list[tuple[frozenset, ...]]:
    """An exact cover of ``tuples`` by disjoint products of sets (grouping on the last position)."""
    if not tuples[0]:
        return [()]
    lasts = defaultdict(set)
    for t in tuples:
        lasts[t[:-1]].add(t[-1])
    prefixes_by_lasts = defaultdict(list)
    for prefix, values in lasts.items():
        prefixes_by_lasts[frozenset(values)].append(prefix)
    return [rect + (values,) for values, prefixes in prefixes_by_lasts.items() for rect in _rectangles(prefixes)]


def _sort_key(dtypes: Iterable[torch.dtype]) -> tuple:
    return tuple(sorted(_ORDER[d][1] for d in dtypes))


def spec_from_combinations(func: str, names: Sequence[str], combos: Iterable[tuple]) -> OpSpec:
    """The `OpSpec` that admits exactly ``combos`` (tuples of dtypes or None, in ``names`` order).

    Combinations are grouped by which names share a dtype; each group becomes products of
    alias lists, names that must agree sharing one alias.
    """
    by_pattern = defaultdict(list)
    for combo in set(combos):
        pattern = _pattern(combo)
        by_pattern[pattern].append(tuple(d for i, d in enumerate(combo) if pattern[i] == i))
    items = []  # (name -> alias key) per constraint; an alias key is (dtypes, occurrence)
    for pattern, tuples in by_pattern.items():
        leaders = [i for i, p in enumerate(pattern) if p == i]
        for rect in _rectangles(tuples):
            seen: dict[frozenset, int] = defaultdict(int)
            keys = {}
            for leader, dtypes in zip(leaders, rect):
                keys[leader] = (_sort_key(dtypes), seen[dtypes] if len(dtypes) > 1 else 0)
                seen[dtypes] += 1
            items.append({names[i]: keys[p] for i, p in enumerate(pattern) if p is not None})
    alias_keys = sorted({key for item in items for key in item.values()})
    alias_of = {key: f"T{i}" for i, key in enumerate(alias_keys)}
    by_index = {i: d for d, (_, i) in _ORDER.items()}
    aliases = {alias_of[key]: tuple(by_index[i] for i in key[0]) for key in alias_keys}
    constraints = sorted(
        ({n: alias_of[k] for n, k in item.items()} for item in items),
        key=lambda c: [(n, int(a[1:])) for n, a in c.items()],
    )
    return OpSpec(func, aliases, tuple(constraints))
