"""Where a graph node came from, for error messages."""

from __future__ import annotations

import torch

__all__ = ["describe_node", "user_frame"]


def user_frame(node: torch.fx.Node) -> str | None:
    """The innermost ``File ..., line N`` line of the node's stack trace, if any."""
    trace = node.meta.get("stack_trace")
    if not trace:
        return None
    lines = [line.strip() for line in trace.strip().splitlines() if line.strip().startswith("File ")]
    return lines[-1] if lines else None


def describe_node(node: torch.fx.Node) -> str:
    """``(node 'relu_1', from File "model.py", line 12, in forward)``"""
    frame = user_frame(node)
    where = f", from {frame}" if frame else ""
    return f"(node '{node.name}'{where})"
