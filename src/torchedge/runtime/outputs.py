"""What `Method.execute` hands back: planned outputs copied out of the method's memory (the next
run reuses it), or written into arrays the caller passed for them."""

from __future__ import annotations

import numpy as np

from torchedge.errors import InputError

__all__ = ["planned_output_buffers", "delivered"]


def planned_output_buffers(
    method: str, outputs, planned: tuple[bool, ...]
) -> tuple[list | None, dict[int, np.ndarray]]:
    """Split ``execute``'s ``outputs``: the entries for outputs without planned memory (bound
    before the run; None when none was given) and the caller's arrays for planned outputs, by
    position (filled after the run)."""
    if outputs is None:
        return None, {}
    outputs = list(outputs)
    if len(outputs) != len(planned):
        raise InputError(f"method '{method}' has {len(planned)} output(s), got {len(outputs)} buffers")
    into = {}
    for position, (buffer, is_planned) in enumerate(zip(outputs, planned)):
        if is_planned and buffer is not None:
            if not isinstance(buffer, np.ndarray) or not buffer.flags.writeable:
                raise InputError(f"method '{method}', output buffer {position}: expected a writable NumPy array")
            into[position] = buffer
    unplanned = [None if is_planned else buffer for buffer, is_planned in zip(outputs, planned)]
    return unplanned, into


def delivered(method: str, values: list, planned: tuple[bool, ...], into: dict[int, np.ndarray]) -> list:
    """The run's outputs as the caller keeps them: planned ones copied (into the caller's array where
    one was given), the others (the caller's own memory) as they are."""
    results = []
    for position, (value, is_planned) in enumerate(zip(values, planned)):
        if position in into:
            results.append(_written(method, position, value, into[position]))
        else:
            results.append(_detached(value) if is_planned else value)
    return results


def _written(method: str, position: int, value, buffer: np.ndarray) -> np.ndarray:
    if not isinstance(value, np.ndarray) or value.shape != buffer.shape or value.dtype != buffer.dtype:
        found = f"{value.dtype}{list(value.shape)}" if isinstance(value, np.ndarray) else type(value).__name__
        raise InputError(
            f"method '{method}', output buffer {position}: the output is {found}, "
            f"the buffer {buffer.dtype}{list(buffer.shape)}"
        )
    np.copyto(buffer, value)
    return buffer


def _detached(value):
    """Arrays (also in a tensor list) copied out of the method's memory."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, list):
        return [_detached(v) for v in value]
    return value
