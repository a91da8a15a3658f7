"""A laid-out XNNPACK graph as the backend runs it (`Plan`): the delegate call's arguments in,
the steps, the outputs out; the plans of other input shapes (dynamic dims), and the plan laid
out in the call's own arrays (no copy in or out). `graph` builds plans."""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import is_

import numpy as np

from torchedge.errors import InvalidProgramError, KernelError
from torchedge.runtime.threads import ThreadLimit

__all__ = ["Plan", "same_memory"]


@dataclass
class Plan:
    """What a run does: copy ``inputs`` in, run ``steps``, copy ``outputs`` out.

    ``resize``, when set, lays out the same graph for other input shapes (a dynamic payload);
    such plans are kept in ``variants`` by input shapes, the most recent `MAX_VARIANTS`.
    """

    inputs: list[np.ndarray]  # buffers of the external inputs, in delegate argument order
    outputs: list[np.ndarray]  # buffers of the external outputs, in delegate argument order
    steps: list[tuple[int, str, Callable]] = field(default_factory=list)  # (node index, kind, step)
    resize: Callable[..., Plan] | None = None  # (input shapes, workspace=...) -> the plan for them
    variants: OrderedDict = field(default_factory=OrderedDict)
    bind: Callable[..., Plan] | None = None  # the graph laid out in a call's arrays
    bound: tuple[list, Plan | None] | None = None  # the arguments last laid out in, and that plan
    binds: int = 0
    copies: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)  # a bound plan's outputs to copy
    threads: ThreadLimit | None = None  # the native pools' size during a call (`XnnpackBackend.init`)
    scratch_bytes: int = 0  # the bytes of its intermediate values' buffers (`BufferReuse.nbytes`)
    workspace: np.ndarray | None = None  # where plans laid out later put them (`XnnpackBackend.init_method`)

    MAX_VARIANTS = 8
    MAX_BINDS = 4  # arguments that change more often than this are copied in and out instead

    def run(self, args) -> dict[int, np.ndarray]:
        """Runs the graph on ``args`` (inputs, then the outputs to write). Returns the outputs
        whose shape differs from their argument's (inputs of dynamic dims), by argument position,
        for the caller to resize the argument to and copy; empty when all were written in place."""
        held = self.bound  # the arrays of the last call again: no shape to check (a resize makes new views)
        if held is not None and held[1] is not None and len(args) == len(held[0]) and all(map(is_, args, held[0])):
            return held[1]._run_in_place()
        n = len(self.inputs)
        if len(args) != n + len(self.outputs):
            raise KernelError(
                f"XnnpackBackend: expected {n} inputs and {len(self.outputs)} outputs, got {len(args)} values"
            )
        plan = self._plan_for(args[:n])
        bound = self._bound_to(args) if plan is self and self.bind is not None else None
        if bound is not None:
            return bound._run_in_place()
        plan._run_steps(args[:n])
        resized = {}
        for k, (buffer, out) in enumerate(zip(plan.outputs, args[n:])):
            if _same_shape(np.shape(out), buffer.shape):
                np.copyto(out, buffer.reshape(np.shape(out)), casting="unsafe")
            else:
                resized[n + k] = buffer.copy()
        return resized

    def _plan_for(self, inputs) -> Plan:
        """This plan when the inputs have its shapes (a 0-d value is [1] in XNNPACK), else the one
        laid out for their shapes."""
        if all(_same_shape(np.shape(a), b.shape) for a, b in zip(inputs, self.inputs)):
            return self
        # Inputs of the payload's elements keep its dims (a 0-d value is [1] in XNNPACK).
        shapes = tuple(
            b.shape if _same_shape(tuple(np.shape(a)), b.shape) else tuple(np.shape(a))
            for a, b in zip(inputs, self.inputs)
        )
        plan = self.variants.get(shapes)
        if plan is not None:
            self.variants.move_to_end(shapes)
            return plan
        for shape, buffer in zip(shapes, self.inputs):
            if shape != buffer.shape and (self.resize is None or len(shape) != buffer.ndim):
                raise KernelError(
                    f"XnnpackBackend: input has shape {list(shape)}, the delegate was compiled for "
                    f"{list(buffer.shape)}"
                    + (" (XNNPACK payloads have static shapes)" if self.resize is None else " (another rank)")
                )
        if self.resize is None:  # every input has its compiled shape: checked above
            return self
        try:
            plan = self.resize(shapes, workspace=self.workspace)
        except InvalidProgramError as error:
            raise KernelError(f"XnnpackBackend: inputs of shapes {[list(x) for x in shapes]}: {error}") from error
        self.variants[shapes] = plan
        if len(self.variants) > self.MAX_VARIANTS:
            self.variants.popitem(last=False)
        return plan

    def _bound_to(self, args) -> Plan | None:
        """The plan laid out in ``args`` (the array objects the last call passed), None where they
        do not fit one or keep changing."""
        held = self.bound
        if held is not None and len(held[0]) == len(args) and all(a is b for a, b in zip(held[0], args)):
            return held[1]
        if self.binds >= self.MAX_BINDS or self.bind is None:
            return None
        self.binds += 1
        views = _fitting_views(args, self.inputs + self.outputs, len(self.inputs))
        self.bound = (list(args), None if views is None else self.bind(arrays=views, workspace=self.workspace))
        return self.bound[1]

    def _run_in_place(self) -> dict:
        self._run_steps(())
        for buffer, out in self.copies:
            np.copyto(out, buffer)
        return {}

    def _run_steps(self, inputs) -> None:
        for buffer, arg in zip(self.inputs, inputs):
            if np.shape(arg) != buffer.shape:
                arg = np.reshape(arg, buffer.shape)
            np.copyto(buffer, arg, casting="unsafe")
        for index, kind, step in self.steps:
            try:
                step()
            except (ArithmeticError, ValueError, TypeError, IndexError) as error:
                raise KernelError(f"XnnpackBackend: node {index} ({kind}) failed: {error}") from error


def _fitting_views(args, buffers: list[np.ndarray], inputs: int) -> list[np.ndarray] | None:
    """``args`` as views of the shapes of ``buffers`` (the plan's ``inputs`` inputs, then its
    outputs), or None where one does not fit: another dtype or size, not contiguous, or an output
    that is read-only or shares memory with another argument."""
    views = []
    for arg, buffer in zip(args, buffers):
        if not isinstance(arg, np.ndarray) or arg.dtype != buffer.dtype or arg.size != buffer.size:
            return None
        if not arg.flags.c_contiguous:
            return None
        views.append(arg.reshape(buffer.shape))
    for k in range(inputs, len(views)):
        out = views[k]
        if not out.flags.writeable or any(np.may_share_memory(out, v) for j, v in enumerate(views) if j != k):
            return None
    return views


def _same_shape(given: tuple[int, ...], compiled: tuple[int, ...]) -> bool:
    """Equal shapes, or the same elements in another rank (a 0-d value is [1] in XNNPACK)."""
    return given == compiled or (len(given) != len(compiled) and math.prod(given) == math.prod(compiled))


def same_memory(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a`` and ``b`` are the same contiguous bytes."""
    same_start = a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
    return same_start and a.nbytes == b.nbytes and a.flags.c_contiguous and b.flags.c_contiguous
