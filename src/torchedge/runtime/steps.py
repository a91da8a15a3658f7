"""Instructions compiled at load time into steps the dispatch loop runs without lookups.

Each `Step` holds the resolved kernel or delegate call, the value indices it
reads and the one it writes. Views of fixed memory are bound here, once, and
leave a no-op step behind so jump targets keep their positions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from torchedge.errors import InvalidProgramError, OperatorMissingError
from torchedge.kernels.registry import op_traits
from torchedge.runtime.validation import (
    check_jump,
    check_kernel_call,
    check_static_shapes,
    check_tensors_have_memory,
    values_set_at_run,
)
from torchedge.runtime.values import ValueTable
from torchedge.schema.program import DelegateCall, FreeCall, JumpFalseCall, KernelCall, MoveCall, Tensor, TensorList
from torchedge.schema.scalar_type import ScalarType

__all__ = ["Step", "StepCompiler", "KERNEL", "DELEGATE", "JUMP", "MOVE", "FREE", "NOP", "RESIZING_KERNEL", "truthy"]

KERNEL, DELEGATE, JUMP, MOVE, FREE, NOP, RESIZING_KERNEL = range(7)
_MASK_TYPES = (ScalarType.BOOL, ScalarType.BYTE)


@dataclass(slots=True)
class Step:
    """One compiled instruction: what to call, on which value indices, where the result goes."""

    kind: int
    fn: Any = None  # the kernel or delegate call
    args: tuple = ()
    ret: int = -1
    label: str = ""
    outs: tuple = ()  # RESIZING_KERNEL: the dynamic out tensors, resized to what `shapes` computes
    shapes: Any = None
    delegate: Any = None  # DELEGATE: (backend, handle), for the event tracer


class StepCompiler:
    """Compiles the instructions of one method, checking every index they hold."""

    def __init__(
        self,
        method_name: str,
        plan,
        values: ValueTable,
        delegates: list,
        kernel_lookup: Callable,
        num_instructions: int = 0,
    ):
        self.method_name = method_name
        self.num_instructions = num_instructions  # jump destinations lie in 0..num_instructions
        instructions = plan.chains[0].instructions if plan.chains else []
        self._set_at_run = values_set_at_run(plan, instructions, values, op_traits)
        check_tensors_have_memory(method_name, plan, instructions, values, op_traits)
        self.plan = plan
        self.values = values
        self.delegates = delegates
        self.kernel_lookup = kernel_lookup

    def check_value_index(self, index: int, what: str) -> None:
        if not 0 <= index < len(self.values.values):
            raise InvalidProgramError(
                f"method '{self.method_name}': {what} index {index} is outside the "
                f"value table of {len(self.values.values)} entries"
            )

    def compile(self, pc: int, instruction) -> Step:
        args = instruction.instr_args
        where = f"method '{self.method_name}', instruction {pc}"
        if isinstance(args, KernelCall):
            return self._compile_kernel(args, where)
        if isinstance(args, DelegateCall):
            if not 0 <= args.delegate_index < len(self.delegates):
                raise InvalidProgramError(f"{where}: delegate index {args.delegate_index} out of range")
            for i in args.args:
                self.check_value_index(i, where + " argument")
            backend, handle = self.delegates[args.delegate_index]
            return Step(
                DELEGATE,
                partial(backend.execute, handle),
                tuple(args.args),
                label=f"delegate {self.plan.delegates[args.delegate_index].id}",
                delegate=(backend, handle),
            )
        if isinstance(args, JumpFalseCall):
            self.check_value_index(args.cond_value_index, where + " condition")
            check_jump(where, args.destination_instruction, self.num_instructions)
            return Step(JUMP, None, (args.cond_value_index,), args.destination_instruction, "jump_false")
        if isinstance(args, MoveCall):
            self.check_value_index(args.move_from, where)
            self.check_value_index(args.move_to, where)
            return Step(MOVE, None, (args.move_from,), args.move_to, "move")
        if isinstance(args, FreeCall):
            self.check_value_index(args.value_index, where)
            return Step(FREE, None, (args.value_index,), label="free")
        raise InvalidProgramError(f"{where}: unknown instruction {type(args).__name__}")

    def _compile_kernel(self, call: KernelCall, where: str) -> Step:
        operators = self.plan.operators or []
        if not 0 <= call.op_index < len(operators):
            raise InvalidProgramError(
                f"{where}: operator index {call.op_index} out of range (the method has {len(operators)} operators)"
            )
        op = operators[call.op_index]
        name = f"{op.name}.{op.overload}" if op.overload else op.name
        try:
            kernel = self.kernel_lookup(name)
        except OperatorMissingError:
            raise OperatorMissingError(
                f"{where}: no kernel registered for operator '{name}'; "
                "register one with torchedge.runtime.register_kernel"
            ) from None
        indices = list(call.args)
        where = f"{where} ({name})"
        traits = op_traits(name)
        written = check_kernel_call(where, name, kernel, traits, indices, self.values)
        step = Step(KERNEL, kernel.fn, tuple(indices[: kernel.num_args]), written, name)
        if traits.view:
            if self._bind_static_view(step):
                return Step(NOP, label=f"{name} (bound at load)")  # kept so jump targets stay valid
            return step
        outs = self._out_tensors(step.ret)
        if any(self.values.is_dynamic(i) for i in outs) and not traits.data_dependent:
            if traits.shape is None:
                raise OperatorMissingError(
                    f"{where}: operator '{name}' writes a dynamic-shape tensor, and "
                    "torchedge has no shape function for it"
                )
            step.kind, step.outs, step.shapes = RESIZING_KERNEL, outs, traits.shape
        elif not traits.data_dependent:
            check_static_shapes(where, traits, step.args, outs, self.values, self._set_at_run)
        return step

    def sizes_depend_on_data(self, step: Step) -> bool:
        """Whether this step can make later sizes depend on tensor values, not only on input shapes."""
        if step.kind in (JUMP, MOVE, FREE):
            return True
        traits = op_traits(step.label)
        if traits.data_dependent or traits.value_from_data:
            return True
        if traits.mask_index_arg is None:
            return False
        indices = self.values.schema[step.args[traits.mask_index_arg]]  # a boolean mask index sizes the output
        return any(self.values.schema[i].scalar_type in _MASK_TYPES for i in indices.items if i >= 0)

    def _out_tensors(self, ret: int) -> tuple:
        """The tensors a kernel writes: its return slot, or the items of a returned tensor list."""
        schema = self.values.schema[ret]
        if isinstance(schema, TensorList):
            return tuple(schema.items)
        return (ret,) if isinstance(schema, Tensor) else ()

    def _bind_static_view(self, step: Step) -> bool:
        """Bind a view of a tensor with fixed memory once, at load, instead of every run."""
        base = step.args[0]
        if self.values[base] is None or self.values.is_dynamic(base) or self.values.is_dynamic(step.ret):
            return False
        self.values.set(step.ret, step.fn(*[self.values[i] for i in step.args]))
        return True


def truthy(value) -> bool:
    """The condition of a ``JumpFalseCall``: a bool, or a bool tensor (true when all its elements are)."""
    if isinstance(value, np.ndarray):
        if value.dtype != np.bool_:
            raise InvalidProgramError(f"jump condition must be a bool or bool tensor, got {value.dtype}")
        return bool(value.all())
    if isinstance(value, bool):
        return value
    raise InvalidProgramError(f"jump condition must be a bool or bool tensor, got {type(value).__name__}")
