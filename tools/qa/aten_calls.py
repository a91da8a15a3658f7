"""Recording the ATen calls a function makes, with its tensors copied when each call happened.

>>> calls = record_aten_calls(torch.add, torch.ones(2), torch.ones(2))
>>> [str(c.op) for c in calls]
['aten.add.Tensor']
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["AtenCall", "AtenCallRecorder", "record_aten_calls", "leaves"]


class AtenCall(NamedTuple):
    """One recorded ATen call, with tensors copied when it happened."""

    op: torch._ops.OpOverload
    args: tuple
    kwargs: dict
    result: object


def _snapshot(value):
    """``value`` with every tensor copied (tuples, lists and dicts rebuilt, other values shared)."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (list, tuple)):
        return type(value)(map(_snapshot, value)) if type(value) in (list, tuple) else tuple(map(_snapshot, value))
    if isinstance(value, dict):
        return {k: _snapshot(v) for k, v in value.items()}
    return value


def leaves(value):
    """The values nested in ``value``'s lists, tuples and dicts, depth first."""
    if isinstance(value, (list, tuple)):
        for item in value:
            yield from leaves(item)
    elif isinstance(value, dict):
        yield from leaves(list(value.values()))
    else:
        yield value


class AtenCallRecorder(TorchDispatchMode):
    """Records the calls ``keep(func, args)`` accepts (all when ``keep`` is None)."""

    def __init__(self, keep: Callable | None = None):
        super().__init__()
        self.keep = keep
        self.calls: list[AtenCall] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.keep is not None and not self.keep(func, args):
            return func(*args, **kwargs)
        args_copy, kwargs_copy = _snapshot((args, kwargs))
        result = func(*args, **kwargs)
        self.calls.append(AtenCall(func, args_copy, kwargs_copy, _snapshot(result)))
        return result


def record_aten_calls(fn, *args, **kwargs) -> list[AtenCall]:
    """Run ``fn(*args, **kwargs)`` and return every ATen call it made, in order."""
    recorder = AtenCallRecorder()
    with recorder:
        fn(*args, **kwargs)
    return recorder.calls
