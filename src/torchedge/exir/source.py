"""Where a graph node came from, for error messages."""

from __future__ import annotations

import re

import torch

__all__ = ["describe_node", "user_frame", "frames"]

_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<name>.+)')


def user_frame(node: torch.fx.Node) -> str | None:
    """The innermost ``File ..., line N`` line of the node's stack trace that names a real file
    (code torch generates while tracing, such as ``<eval_with_key>.5``, is not the user's)."""
    trace = node.meta.get("stack_trace")
    if not trace:
        return None
    lines = [line.strip() for line in trace.strip().splitlines() if line.strip().startswith("File ")]
    real = [line for line in lines if not line.startswith('File "<')]
    return (real or lines)[-1] if lines else None


def describe_node(node: torch.fx.Node) -> str:
    """``(node 'relu_1', from File "model.py", line 12, in forward)``"""
    frame = user_frame(node)
    where = f", from {frame}" if frame else ""
    return f"(node '{node.name}'{where})"


def frames(node: torch.fx.Node) -> list[tuple[str, int, str, str]]:
    """``(filename, lineno, function, source line)`` for each frame of the node's stack trace."""
    lines = (node.meta.get("stack_trace") or "").splitlines()
    result = []
    for i, line in enumerate(lines):
        match = _FRAME.match(line.strip())
        if match:
            context = lines[i + 1].strip() if i + 1 < len(lines) and not _FRAME.match(lines[i + 1].strip()) else ""
            result.append((match["file"], int(match["line"]), match["name"], context))
    return result
