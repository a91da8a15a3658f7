"""Load-time checks of a method's instructions and signature against its value table.

Every index in range, each argument of a kernel of the kind its operator's schema
takes (`torchedge.kernels.argument_kinds`, a table generated from torch's schemas),
the value a kernel writes is a writable tensor (or tensor list, or the scalar slot
of an operator that returns a value), the method's inputs are tensors or scalars
that a caller may set (never a constant), jump targets inside the chain. Each
failure is an `InvalidProgramError` saying what was expected, what was found and
where, so that a malformed `.pte` never reaches a kernel.
"""

from __future__ import annotations

from torchedge.errors import InvalidProgramError
from torchedge.kernels.argument_kinds import argument_kinds
from torchedge.kernels.registry import Kernel, OpTraits
from torchedge.runtime.values import ValueTable
from torchedge.schema.program import (
    Bool,
    DelegateCall,
    Double,
    FreeCall,
    Int,
    IntList,
    KernelCall,
    MoveCall,
    Null,
    OptionalTensorList,
    String,
    Tensor,
    TensorList,
)

__all__ = ["check_signature", "check_kernel_call", "check_jump", "check_static_shapes", "kind_of", "values_set_at_run"]

_INPUT_KINDS = (Tensor, Int, Double, Bool, String, Null)
_RETURNED_KINDS = (Int, Double, Bool, Null)


def kind_of(values: ValueTable, index: int) -> str:
    """The kind of a value, as messages name it ("Tensor", "Int", "constant Tensor"...)."""
    val = values.schema[index]
    name = "Null" if val is None else type(val).__name__
    return f"constant {name}" if index in values.constants else name


def check_signature(method_name: str, inputs, outputs, values: ValueTable) -> None:
    """Inputs and outputs are value indices; inputs are tensors or scalars the caller may write."""
    size = len(values.schema)
    for what, indices in (("input", inputs), ("output", outputs)):
        for position, index in enumerate(indices):
            if not 0 <= index < size:
                raise InvalidProgramError(
                    f"method '{method_name}', {what} {position}: expected a value index below {size}, found {index}"
                )
    for position, index in enumerate(inputs):
        val = values.schema[index]
        if index in values.constants or not isinstance(val, _INPUT_KINDS) and val is not None:
            raise InvalidProgramError(
                f"method '{method_name}', input {position}: expected a non-constant Tensor or a scalar, "
                f"found value {index}, a {kind_of(values, index)}"
            )


def _check_writable_tensor(values: ValueTable, index: int, where: str, role: str) -> None:
    val = values.schema[index]
    if isinstance(val, TensorList):
        for item in val.items:
            _check_writable_tensor(values, item, where, f"item of {role} (value {index})")
        return
    if not isinstance(val, Tensor) or index in values.constants:
        raise InvalidProgramError(
            f"{where}: expected its {role} to be a non-constant Tensor or Tensor list, "
            f"found value {index}, a {kind_of(values, index)}"
        )


def check_kernel_call(
    where: str, name: str, kernel: Kernel, traits: OpTraits, indices: list[int], values: ValueTable
) -> int:
    """Check one kernel instruction's arguments; returns the value index it writes."""
    written = _check_indices_and_outs(where, name, kernel, traits, indices, values)
    _check_argument_kinds(where, name, indices, values)
    return written


def _check_argument_kinds(where: str, name: str, indices: list[int], values: ValueTable) -> None:
    """Each argument the operator's schema covers holds a value of a kind it takes."""
    arguments = argument_kinds(name)
    if arguments is None:
        return  # an operator without a schema in the table
    schema = values.schema
    for position, (argument, index) in enumerate(zip(arguments, indices)):
        if argument.accepts is not None and not isinstance(schema[index], argument.accepts):
            raise InvalidProgramError(
                f"{where}: argument {position} ('{argument.name}') expects {_a(argument.kinds)}, "
                f"found value {index}, {_a(kind_of(values, index))}"
            )


def _a(kind: str) -> str:
    return f"{'an' if kind[0] in 'AEIOU' else 'a'} {kind}"


def _check_indices_and_outs(
    where: str, name: str, kernel: Kernel, traits: OpTraits, indices: list[int], values: ValueTable
) -> int:
    size = len(values.schema)
    for position, index in enumerate(indices):
        if not 0 <= index < size:
            raise InvalidProgramError(
                f"{where}: argument {position} is value {index}, expected a value index below {size}"
            )
    if len(indices) < kernel.num_args:
        raise InvalidProgramError(
            f"{where}: expected {kernel.num_args} arguments (the kernel's), the instruction passes {len(indices)}"
        )
    if traits.written_arg is not None and not 0 <= traits.written_arg < len(indices):
        raise InvalidProgramError(f"{where}: expected a written argument {traits.written_arg}, found {len(indices)}")
    written = indices[-1] if traits.written_arg is None else indices[traits.written_arg]
    if traits.returns_value:
        if not isinstance(values.schema[written], _RETURNED_KINDS) and values.schema[written] is not None:
            raise InvalidProgramError(
                f"{where}: expected its return slot to be a scalar (Int, Double, Bool or Null), "
                f"found value {written}, a {kind_of(values, written)}"
            )
        return written
    if traits.view:
        for role, index in (("viewed argument", indices[0]), ("result", written)):
            if not isinstance(values.schema[index], Tensor):
                raise InvalidProgramError(
                    f"{where}: expected its {role} to be a Tensor, found value {index}, a {kind_of(values, index)}"
                )
        return written
    if traits.checks_only or kernel.num_args == 0:
        return written
    if traits.written_arg is not None:
        _check_writable_tensor(values, written, where, f"written argument {traits.written_arg}")
        return written
    # An out variant: its last kernel argument is an out (an in-place op's first argument is its out),
    # and so is the slot of its return, when the instruction gives one.
    out = 0 if writes_self(name) else kernel.num_args - 1
    _check_writable_tensor(values, indices[out], where, f"argument {out} (an out)")
    if len(indices) > kernel.num_args:
        _check_writable_tensor(values, written, where, "return value")
        _check_return_is_out(where, indices[: kernel.num_args], out, written, values)
    return written


def writes_self(name: str) -> bool:
    """Whether ``name`` is an in-place operator (``add_``: it writes its first argument, which it also reads)."""
    base = name.split("::")[-1].split(".")[0]
    return base.endswith("_") and not base.endswith("__")  # __rshift__ is an operator name


def _check_return_is_out(where: str, args: list[int], out: int, ret: int, values: ValueTable) -> None:
    """The return slot of an out variant holds its outs themselves: the out argument, or (a tuple or
    Tensor[] return, a TensorList) the tensors of the last arguments, so the shapes checked are those written."""
    returned = values.schema[ret]
    if isinstance(returned, TensorList):
        found = list(returned.items)
        outs: list[int] = []
        for index in reversed(args):
            if len(outs) >= len(found) or not isinstance(values.schema[index], (Tensor, TensorList)):
                break
            item = values.schema[index]
            outs[:0] = item.items if isinstance(item, TensorList) else [index]
        expected = outs[len(outs) - len(found) :]
    else:
        found, expected = [ret], [args[out]]
    if found != expected:
        raise InvalidProgramError(
            f"{where}: expected its return value (value {ret}) to be its out tensors {expected}, found {found}"
        )


def check_jump(where: str, destination: int, num_instructions: int) -> None:
    if not 0 <= destination <= num_instructions:
        raise InvalidProgramError(
            f"{where}: expected a jump destination between 0 and {num_instructions} (the method's end), "
            f"found {destination}"
        )


def values_set_at_run(plan, instructions, values: ValueTable, kernel_traits) -> set[int]:
    """The value indices whose content or shape a run may change beyond their load-time state:
    scalars and tensors the caller passes, slots of operators that return a value or allocate
    their result, views, move and free targets, dynamic tensors, and the lists holding any of them."""
    changed = {i for i in plan.inputs or [] if not isinstance(values.schema[i], Tensor) or values[i] is None}
    changed.update(i for i in range(len(values.schema)) if values.is_dynamic(i))
    operators = plan.operators or []
    for instruction in instructions:
        args = instruction.instr_args
        if isinstance(args, KernelCall) and 0 <= args.op_index < len(operators) and args.args:
            op = operators[args.op_index]
            traits = kernel_traits(f"{op.name}.{op.overload}" if op.overload else op.name)
            if traits.returns_value or traits.data_dependent or traits.view:
                written = args.args[-1] if traits.written_arg is None else None
                changed.update(args.args if written is None else [written])
        elif isinstance(args, MoveCall):
            changed.add(args.move_to)
        elif isinstance(args, FreeCall):
            changed.add(args.value_index)
    for i, val in enumerate(values.schema):  # lists of lists do not exist: one pass suffices
        if isinstance(val, (IntList, TensorList, OptionalTensorList)) and any(item in changed for item in val.items):
            changed.add(i)
    return changed


def check_static_shapes(where: str, traits: OpTraits, args: tuple, outs: tuple, values: ValueTable, changed) -> None:
    """Run the operator's shape function at load when every argument is known then (static shapes,
    scalars from the file): arguments of the wrong kind or shape, and outs of the wrong shape,
    are refused before any kernel sees them."""
    if traits.shape is None or traits.mask_index_arg is not None or not outs:
        return
    if any(i in changed or values[i] is None for i in args) or any(i in changed for i in outs):
        return
    arrays = [values[i] for i in args]
    try:
        shapes = traits.shape(*arrays)
    except Exception as e:  # a shape function's KernelError, or a TypeError on a value of the wrong kind
        raise InvalidProgramError(
            f"{where}: its arguments [{', '.join(f'value {i} ({kind_of(values, i)})' for i in args)}] do not fit "
            f"the operator: {type(e).__name__}: {e}"
        ) from None
    found = [tuple(values[i].shape) if values[i] is not None else None for i in outs]
    if len(shapes) != len(outs) or any(f is not None and tuple(s) != f for s, f in zip(shapes, found)):
        raise InvalidProgramError(
            f"{where}: expected outs of shapes {[list(s) for s in shapes]} (from the inputs' shapes), "
            f"found values {list(outs)} of shapes {[None if f is None else list(f) for f in found]}"
        )


def check_tensors_have_memory(method_name: str, plan, instructions, values: ValueTable, kernel_traits) -> None:
    """A tensor an instruction reads or writes has memory at load (planned, constant), or gets it at
    run: the caller's input or output, an unbounded dynamic tensor, or one bound by an operator
    that allocates or views (or by a move)."""
    bound = set(plan.inputs or []) | set(plan.outputs or []) | set(values.unbounded)
    referenced: set[int] = set()
    operators = plan.operators or []
    size = len(values.schema)
    for instruction in instructions:
        args = instruction.instr_args
        if isinstance(args, (KernelCall, DelegateCall)):
            referenced.update(args.args)
            if isinstance(args, KernelCall) and 0 <= args.op_index < len(operators) and args.args:
                op = operators[args.op_index]
                traits = kernel_traits(f"{op.name}.{op.overload}" if op.overload else op.name)
                if traits.view or traits.data_dependent or traits.returns_value:
                    written = args.args[-1] if traits.written_arg is None else args.args[traits.written_arg]
                    bound.add(written)
                    if 0 <= written < size and isinstance(values.schema[written], TensorList):
                        bound.update(values.schema[written].items)
        elif isinstance(args, MoveCall):
            referenced.add(args.move_from)
            bound.add(args.move_to)
    for index in sorted(referenced):
        if not 0 <= index < size:
            continue  # the instruction's own check names it
        val = values.schema[index]
        items = val.items if isinstance(val, (TensorList, OptionalTensorList)) else [index]
        for item in items:
            if item >= 0 and isinstance(values.schema[item], Tensor) and values[item] is None and item not in bound:
                raise InvalidProgramError(
                    f"method '{method_name}', value {item}: expected a tensor with memory (planned, constant, "
                    "or the method's input or output), found one with none that instructions use"
                )
