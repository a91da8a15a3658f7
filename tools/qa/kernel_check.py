"""Differential kernel checks: a portable kernel against PyTorch eager on one recorded ATen call.

`check_call` replays a call (see `aten_calls.record_aten_calls`) on the kernel the runtime
would run for it (`kernel_op`: the out variant, through the copy twin for views) and
compares with eager's result, or, as a support check, tells a kernel that does not return
eager's dtypes and shapes from one whose values are off (`support_tolerance`). Where eager's
values are undefined in C, converting NaN, infinities or out-of-range floats to integers,
the kernel is judged by torchedge's own conversion (`defined_expectation`). The operators
and calls to check come from `torchedge.exir.core_operators` and `opinfo_sampling`;
`kernel_op` (the operator the runtime calls) is re-exported from the former.

>>> from tools.qa.aten_calls import record_aten_calls
>>> calls = record_aten_calls(torch.add, torch.ones(2), torch.ones(2))
>>> [op_name(c.op) for c in calls]
['aten::add.Tensor']
>>> check_call(*calls[0]).status
<Status.PASS: 1>
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch.utils._pytree import tree_map_only

from tools.qa.aten_calls import leaves
from tools.qa.support_tolerance import layout_problem, values_problem
from torchedge.devtools.output_compare import Unsupported, compare_outputs, numpy_dtype_of, to_numpy
from torchedge.errors import OperatorMissingError
from torchedge.exir.core_operators import kernel_op
from torchedge.exir.dtypes import LAYOUT_CODES, MEMORY_FORMAT_CODES, scalar_type, to_torch
from torchedge.exir.ir import bind_arguments, op_name
from torchedge.exir.op_schema import out_argument_names
from torchedge.kernels.dtypes import conversion_undefined, convert
from torchedge.kernels.registry import Kernel, get_kernel

__all__ = [
    "DTYPES",
    "Status",
    "CheckResult",
    "kernel_op",
    "kernel_arguments",
    "conversion_target",
    "defined_expectation",
    "check_call",
    "check_calls",
    "worst",
]

# The dtypes the checks cover (OpInfo samples, edge-spec probing).
DTYPES = (
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
)


class Status(enum.Enum):
    """A check's outcome; `worst` picks the highest value (a failure over a missing kernel over
    an inaccurate result over a pass)."""

    UNSUPPORTED = 0  # the call cannot be expressed to a kernel (e.g. channels_last memory format)
    PASS = 1
    INACCURATE = 2  # a support check only: eager's dtypes and shapes, values beyond tolerance
    MISSING = 3
    MISMATCH = 4
    RAISED = 5

    @property
    def supported(self) -> bool:
        """Whether the kernel ran the call and returned eager's output dtypes and shapes."""
        return self in (Status.PASS, Status.INACCURATE)


@dataclass(frozen=True)
class CheckResult:
    status: Status
    kernel: str
    call: str
    detail: str = ""
    max_error: float = 0.0

    def __str__(self) -> str:
        return f"{self.status.name} {self.kernel} on {self.call}" + (f": {self.detail}" if self.detail else "")


def _kernel_value(value):
    """A recorded argument as the kernel contract wants it."""
    if isinstance(value, torch.Tensor):
        return to_numpy(value)
    if isinstance(value, (list, tuple)):
        items = [_kernel_value(v) for v in value]
        return items if any(isinstance(v, torch.Tensor) for v in value) else tuple(items)
    if isinstance(value, torch.dtype):
        return int(scalar_type(value))
    if isinstance(value, (torch.memory_format, torch.layout)):
        codes = MEMORY_FORMAT_CODES if isinstance(value, torch.memory_format) else LAYOUT_CODES
        if value not in codes:
            raise Unsupported(f"{value} has no .pte code")
        return codes[value]
    if isinstance(value, torch.device):
        return str(value)
    return value


def _empty(tensor: torch.Tensor | None):
    return None if tensor is None else np.empty(tuple(tensor.shape), numpy_dtype_of(tensor.dtype))


def _describe(op, args, kwargs) -> str:
    def show(v):
        if isinstance(v, torch.Tensor):
            return f"{str(v.dtype).removeprefix('torch.')}{list(v.shape)}"
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(show(x) for x in v) + "]"
        return repr(v)

    shown = [show(a) for a in args] + [f"{k}={show(v)}" for k, v in kwargs.items()]
    return f"{op_name(op)}({', '.join(shown)})"


def _outputs(expected, listed: bool) -> list:
    """Eager's outputs one by one: a tuple or list result's items for an operator with out
    arguments (``listed``), else the result itself."""
    return list(expected) if listed and isinstance(expected, (tuple, list)) else [expected]


def kernel_arguments(op, args, kwargs, expected) -> tuple[list, list | None, list]:
    """How the runtime would call ``kernel_op(op)`` for the call ``op(*args, **kwargs)``: (the
    kernel's arguments in schema order, the out arrays they include, preallocated like eager's
    ``expected`` result, or None for an operator that returns a value; eager's output per out)."""
    target = kernel_op(op)
    outs = out_argument_names(target)
    bound = bind_arguments(op, args, kwargs)
    schema_args = target._schema.arguments
    list_out = len(outs) == 1 and isinstance(next(a for a in schema_args if a.name == outs[0]).type, torch.ListType)
    wants = _outputs(expected, bool(outs))
    got_outs = [_empty(w) for w in wants] if outs else None
    out_values = {outs[0]: got_outs} if list_out else dict(zip(outs, got_outs or ()))
    values = []
    for arg in schema_args:
        if arg.name in out_values:
            values.append(out_values[arg.name])
            continue
        if arg.name in bound:
            value = bound[arg.name]
        elif arg.has_default_value():
            value = arg.default_value
        else:
            raise Unsupported(f"argument '{arg.name}' is neither given nor defaulted")
        if isinstance(arg.type, torch.TensorType) and isinstance(value, (bool, int, float)):
            value = torch.tensor(value)  # a wrapped number, as the scalar-to-tensor pass makes it
        value = _kernel_value(value)
        if value is not None and arg.alias_info is not None and arg.alias_info.is_write:
            value = value.copy()  # an argument the operator updates (batch norm's running stats)
        values.append(value)
    return values, got_outs, wants


_INTEGERS = frozenset({torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64})


def _is_float(value) -> bool:
    return isinstance(value, torch.Tensor) and (value.is_floating_point() or value.is_complex())


def conversion_target(args, kwargs, result) -> torch.dtype | None:
    """The integer dtype a call converts float tensors to where C leaves the result undefined,
    or None: the dtype of every (non-empty) tensor the call returns, when a dtype argument or
    an integer tensor argument names it (as for copy, _to_copy or sum with a dtype; not for
    argmax's indices) and a float tensor argument holds NaN, an infinity or a value that
    truncates out of its range."""
    returned = {t.dtype for t in leaves(result) if isinstance(t, torch.Tensor) and t.numel()}
    target = returned.pop() if len(returned) == 1 else None
    inputs = list(leaves((args, kwargs)))
    if target not in _INTEGERS or not any(v is target or getattr(v, "dtype", None) is target for v in inputs):
        return None
    return target if any(_is_float(v) and _undefined(v, target).any() for v in inputs) else None


def _undefined(tensor: torch.Tensor, target: torch.dtype) -> np.ndarray:
    """Where the float ``tensor`` holds values whose conversion to ``target`` C leaves
    undefined (read in float64, which holds every float dtype's values)."""
    real = (tensor.real if tensor.is_complex() else tensor).detach().double()
    return np.asarray(conversion_undefined(real.numpy(), numpy_dtype_of(target)))


def _with_floats(fn, args, kwargs) -> tuple[tuple, dict]:
    """``(args, kwargs)`` with ``fn`` applied to every float tensor."""
    return tree_map_only(torch.Tensor, lambda t: fn(t) if _is_float(t) else t, (args, kwargs))


def _run(op, call: tuple[tuple, dict]):
    return op(*call[0], **call[1])


def _same(a, b) -> bool:
    """Whether two results hold equal tensors and values."""
    return all(torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y for x, y in zip(leaves(a), leaves(b)))


def defined_expectation(op, args, kwargs, expected) -> tuple[tuple, dict, object] | None:
    """The call and result to judge a kernel's values by: ``(args, kwargs, expected)`` itself,
    but for a call whose eager values C leaves undefined (`conversion_target`), the call on its
    float tensors converted as torchedge defines it (`torchedge.kernels.dtypes.convert`) and
    eager's result of that; None (values not compared) unless the call converts its floats
    first, as eager shows where they are defined (not so a search, or a view of their bits)."""
    target = conversion_target(args, kwargs, expected)
    if target is None:
        return args, kwargs, expected
    integer = numpy_dtype_of(target)

    def converted(tensor: torch.Tensor) -> torch.Tensor:
        return to_torch(convert(to_numpy(tensor), integer))

    def zeroed(tensor: torch.Tensor) -> torch.Tensor:
        return tensor.masked_fill(torch.as_tensor(_undefined(tensor, target)), 0)

    try:
        defined = _with_floats(zeroed, args, kwargs)
        if not _same(_run(op, defined), _run(op, _with_floats(converted, *defined))):
            return None  # the call does not convert its floats first
        reference = _with_floats(converted, args, kwargs)
        return (*reference, _run(op, reference))
    except Exception:  # eager refuses a converted call: nothing defined to compare with
        return None


def check_call(
    op, args, kwargs, expected, kernels: Callable[[str], Kernel] = get_kernel, support: bool = False
) -> CheckResult:
    """Run the kernel for one recorded ATen call and compare with eager's ``expected`` result
    (`defined_expectation`'s where C leaves eager's values undefined).

    ``kernels`` maps an operator name to a `Kernel` (the portable registry by default;
    `torchedge.kernels.aten_mode.get_aten_kernel` checks the harness itself). A ``support``
    check is a MISMATCH only for outputs of other dtypes or shapes than eager's, and
    INACCURATE for values beyond `support_tolerance.values_problem`'s tolerances.
    """
    name, call = op_name(kernel_op(op)), _describe(op, args, kwargs)
    try:
        kernel = kernels(name)
    except OperatorMissingError:
        return CheckResult(Status.MISSING, name, call, "no kernel registered")
    try:
        values, outs, wants = kernel_arguments(op, args, kwargs, expected)
    except Unsupported as e:
        return CheckResult(Status.UNSUPPORTED, name, call, str(e))
    listed = outs is not None
    try:
        returned = kernel.fn(*values)
    except Exception as e:  # any exception is a failure: eager computed this call
        return CheckResult(Status.RAISED, name, call, f"{type(e).__name__}: {e}")
    if outs is None or returned is not None:  # a value, or data-dependent outputs the kernel allocated
        outs = list(returned) if isinstance(returned, (tuple, list)) else [returned]
    reference = defined_expectation(op, args, kwargs, expected)
    if reference is None:
        problem = layout_problem(outs, wants)
        detail = problem or "float-to-integer conversions C leaves undefined: dtypes and shapes compared only"
        return CheckResult(Status.MISMATCH if problem else Status.PASS, name, call, detail)
    args, kwargs, expected = reference
    wants = _outputs(expected, listed)
    if not support:
        problem, max_error = compare_outputs(op, args, kwargs, outs, wants)
        return CheckResult(Status.MISMATCH if problem else Status.PASS, name, call, problem, max_error)
    problem = layout_problem(outs, wants)
    if problem:
        return CheckResult(Status.MISMATCH, name, call, problem)
    problem, max_error = values_problem(op, args, kwargs, outs, wants)
    return CheckResult(Status.INACCURATE if problem else Status.PASS, name, call, problem, max_error)


def check_calls(calls, kernels: Callable[[str], Kernel] = get_kernel) -> list[CheckResult]:
    """`check_call` of each recorded ``(op, args, kwargs, expected)``."""
    return [check_call(op, args, kwargs, expected, kernels=kernels) for op, args, kwargs, expected in calls]


def worst(results: list[CheckResult]) -> CheckResult:
    """The most severe result (a failure before a missing kernel before a pass)."""
    return max(results, key=lambda r: r.status.value)
