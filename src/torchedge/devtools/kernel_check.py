"""Differential kernel checks: portable kernels against PyTorch eager, driven by operator metadata.

`record_aten_calls` captures the ATen calls a function makes; `check_call` replays one
call on the kernel the runtime would run for it (the out variant, through the copy twin
for views) and compares with eager's result, or, as a support check, tells a kernel that
does not return eager's dtypes and shapes from one whose values are off; `opinfo_calls`
samples the core-ATen calls that PyTorch's own OpInfo database makes, across dtypes;
`core_operators` lists the core ATen operator set with the kernel each one needs.

>>> calls = record_aten_calls(torch.add, torch.ones(2), torch.ones(2))
>>> [op_name(c.op) for c in calls]
['aten::add.Tensor']
>>> check_call(*calls[0]).status
<Status.PASS: 1>
"""

from __future__ import annotations

import enum
import functools
import itertools
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

from torchedge.devtools.output_compare import Unsupported, compare_outputs, numpy_dtype_of, to_numpy
from torchedge.errors import ExportError, OperatorMissingError
from torchedge.exir.dtypes import LAYOUT_CODES, MEMORY_FORMAT_CODES, scalar_type
from torchedge.exir.ir import bind_arguments, op_name
from torchedge.exir.op_schema import is_out_variant, out_argument_names, out_variant, view_copy_variant
from torchedge.kernels.registry import Kernel, get_kernel

__all__ = [
    "DTYPES",
    "ULPS",
    "AtenCall",
    "Status",
    "CheckResult",
    "CoreOperator",
    "record_aten_calls",
    "kernel_op",
    "kernel_arguments",
    "check_call",
    "check_calls",
    "worst",
    "core_operators",
    "core_operator_of",
    "opinfo_calls",
]

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

# A support check's float tolerance in units of the call's machine epsilon (see `_values_problem`).
ULPS = 8


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


def _leaves(value):
    if isinstance(value, (list, tuple)):
        for item in value:
            yield from _leaves(item)
    elif isinstance(value, dict):
        yield from _leaves(list(value.values()))
    else:
        yield value


class _Recorder(TorchDispatchMode):
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
    recorder = _Recorder()
    with recorder:
        fn(*args, **kwargs)
    return recorder.calls


@functools.cache
def kernel_op(op: torch._ops.OpOverload) -> torch._ops.OpOverload:
    """The operator the runtime calls for ``op``: its out variant (a view's through its copy
    twin), or ``op`` itself for the primitive operators (``sym_size``, ``_local_scalar_dense``)."""
    if is_out_variant(op):
        return op
    target = view_copy_variant(op) or op
    try:
        return out_variant(target)
    except ExportError:
        return target


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


def kernel_arguments(op, args, kwargs, expected) -> tuple[list, list | None, list]:
    """How the runtime would call ``kernel_op(op)`` for the call ``op(*args, **kwargs)``: (the
    kernel's arguments in schema order, the out arrays they include, preallocated like eager's
    ``expected`` result, or None for an operator that returns a value; eager's output per out)."""
    target = kernel_op(op)
    outs = out_argument_names(target)
    bound = bind_arguments(op, args, kwargs)
    schema_args = target._schema.arguments
    list_out = len(outs) == 1 and isinstance(next(a for a in schema_args if a.name == outs[0]).type, torch.ListType)
    wants = list(expected) if outs and isinstance(expected, (tuple, list)) else [expected]
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


def _is_float(value) -> bool:
    """Whether ``value`` is a floating-point or complex tensor."""
    return isinstance(value, torch.Tensor) and (value.is_floating_point() or value.is_complex())


def _layout_problem(outs: list, wants: list) -> str:
    """How the kernel's outputs differ from eager's in number, dtype or shape ("" if they do not)."""
    if len(outs) != len(wants):
        return f"{len(outs)} outputs, expected {len(wants)}"
    for i, (got, want) in enumerate(zip(outs, wants)):
        if isinstance(want, torch.Tensor):
            expected = (numpy_dtype_of(want.dtype), tuple(want.shape))
            found = (got.dtype, got.shape) if isinstance(got, np.ndarray) else type(got).__name__
            if found != expected:
                return f"output {i}: got {found}, expected {expected}"
        elif want is not None and not np.isscalar(got):
            return f"output {i}: got {type(got).__name__}, expected a scalar"
    return ""


def _epsilon(tensors: list[torch.Tensor]) -> float:
    """The machine epsilon of the least precise of ``tensors``; integers and bool compute in
    float32 (the default dtype), complex numbers in the dtype of their parts."""

    def eps(dtype: torch.dtype) -> float:
        dtype = dtype.to_real() if dtype.is_complex else dtype
        return torch.finfo(dtype if dtype.is_floating_point else torch.float32).eps

    return max(eps(t.dtype) for t in tensors)


def _float64_outputs(op, args, kwargs, magnitudes: bool) -> list:
    """Eager's outputs (NumPy, None if not a float tensor) with every float tensor of the call
    in float64 (complex128), as its magnitudes if ``magnitudes``; [] if eager refuses that."""

    def widen(value):
        return (
            value.to(torch.complex128 if value.is_complex() else torch.float64, copy=True)
            if _is_float(value)
            else value
        )

    def inputs(value):
        return widen(value.abs().to(value.dtype) if magnitudes and _is_float(value) else value)

    try:
        result = op(*tree_map(inputs, args), **tree_map(inputs, kwargs))
    except Exception:  # no float64 kernel, or mixed-dtype rules
        return []
    return [
        widen(r).detach().numpy() if _is_float(r) else None
        for r in (result if isinstance(result, (tuple, list)) else [result])
    ]


def _close(got: np.ndarray, reference, scale, eps: float) -> bool:
    """Whether each element of ``got`` is ``reference``'s (NaN and infinities included) or
    within ``ULPS * eps * (|reference| + scale)`` of it."""
    if reference is None or reference.shape != got.shape:
        return False
    g, r = (a.astype(np.complex128 if a.dtype.kind == "c" else np.float64) for a in (got, reference))
    with np.errstate(invalid="ignore"):
        same = (g == r) | (np.isnan(g) & np.isnan(r))
        near = np.isfinite(g) & np.isfinite(r) & (np.abs(g - r) <= ULPS * eps * (np.abs(r) + scale))
    return bool(np.all(same | near))


def _values_problem(op, args, kwargs, outs: list, wants: list) -> tuple[str, float]:
    """`compare_outputs`, where a float output counts as eager's when each element is within
    ``ULPS`` machine epsilons of the call (`_epsilon`) of eager's value or of the float64
    result, relative to its magnitude plus that of the reduction computing it: the call
    on the magnitudes of its float inputs, in float64 (for a sum of products such as a
    convolution, the sum of the terms' magnitudes, which bounds its rounding errors)."""
    eps = _epsilon([t for t in _leaves((args, kwargs, wants)) if isinstance(t, torch.Tensor)])
    exact, magnitudes = (_float64_outputs(op, args, kwargs, m) or [None] * len(wants) for m in (False, True))
    judged = list(outs)
    for i, want in enumerate(wants):
        if _is_float(want):
            expected, magnitude = to_numpy(want), magnitudes[i]
            scale = (
                0.0
                if magnitude is None or magnitude.shape != expected.shape
                else np.nan_to_num(np.abs(magnitude), nan=0.0, posinf=0.0)
            )
            if _close(outs[i], expected, scale, eps) or _close(outs[i], exact[i], scale, eps):
                judged[i] = expected
    return compare_outputs(op, args, kwargs, judged, wants)


def check_call(
    op, args, kwargs, expected, kernels: Callable[[str], Kernel] = get_kernel, support: bool = False
) -> CheckResult:
    """Run the kernel for one recorded ATen call and compare with eager's ``expected`` result.

    ``kernels`` maps an operator name to a `Kernel` (the portable registry by default;
    `torchedge.kernels.aten_mode.get_aten_kernel` checks the harness itself). A ``support``
    check is a MISMATCH only for outputs of other dtypes or shapes than eager's, and
    INACCURATE for values beyond `_values_problem`'s tolerances.
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
    try:
        returned = kernel.fn(*values)
    except Exception as e:  # any exception is a failure: eager computed this call
        return CheckResult(Status.RAISED, name, call, f"{type(e).__name__}: {e}")
    if outs is None or returned is not None:  # a value, or data-dependent outputs the kernel allocated
        outs = list(returned) if isinstance(returned, (tuple, list)) else [returned]
    if not support:
        problem, max_error = compare_outputs(op, args, kwargs, outs, wants)
        return CheckResult(Status.MISMATCH if problem else Status.PASS, name, call, problem, max_error)
    problem = _layout_problem(outs, wants)
    if problem:
        return CheckResult(Status.MISMATCH, name, call, problem)
    problem, max_error = _values_problem(op, args, kwargs, outs, wants)
    return CheckResult(Status.INACCURATE if problem else Status.PASS, name, call, problem, max_error)


def check_calls(calls, kernels: Callable[[str], Kernel] = get_kernel) -> list[CheckResult]:
    """`check_call` of each recorded ``(op, args, kwargs, expected)``."""
    return [check_call(op, args, kwargs, expected, kernels=kernels) for op, args, kwargs, expected in calls]


def worst(results: list[CheckResult]) -> CheckResult:
    """The most severe result (a failure before a missing kernel before a pass)."""
    return max(results, key=lambda r: r.status.value)


@dataclass(frozen=True)
class CoreOperator:
    """A core ATen operator and the name of the kernel the runtime calls for it."""

    op: torch._ops.OpOverload
    kernel: str

    @property
    def name(self) -> str:
        return op_name(self.op)


@functools.cache
def core_operators() -> tuple[CoreOperator, ...]:
    """Every ATen overload tagged ``torch.Tag.core``, sorted by name."""
    ops = []
    for name in torch._C._dispatch_get_all_op_names():  # dir(torch.ops.aten) lists only the loaded ones
        namespace, _, rest = name.partition("::")
        packet_name, _, overload = rest.partition(".")
        if namespace == "aten":
            op = getattr(getattr(torch.ops.aten, packet_name), overload or "default")
            if torch.Tag.core in op.tags:
                ops.append(op)
    return tuple(sorted((CoreOperator(op, op_name(kernel_op(op))) for op in ops), key=lambda c: c.name))


@functools.cache
def _core_index() -> dict:
    """Each core operator, its copy twin and its out variant -> the core operator."""
    index = {core.op: core for core in core_operators()}  # a core-tagged out variant stands for itself
    for core in core_operators():
        for op in (view_copy_variant(core.op), kernel_op(core.op)):
            if op is not None:
                index.setdefault(op, core)
    return index


def core_operator_of(op) -> CoreOperator | None:
    """The core operator ``op`` is, or is the copy twin or out variant of."""
    return _core_index().get(op)


@functools.cache
def _op_db():
    from torch.testing._internal.common_methods_invocations import op_db

    return op_db


def _tensors(value) -> list[torch.Tensor]:
    return [leaf for leaf in _leaves(value) if isinstance(leaf, torch.Tensor)]


def _signature(call: AtenCall) -> tuple:
    leaves = _leaves((call.args, call.kwargs))
    return (call.op,) + tuple((t.dtype, tuple(t.shape)) if isinstance(t, torch.Tensor) else repr(t) for t in leaves)


def _replayable(func, args) -> bool:
    """Whether a recorded copy can replay the call: not so for ``as_strided`` of a tensor that
    does not own exactly its storage, since the result reads that storage."""
    if func._schema.name not in ("aten::as_strided", "aten::as_strided_copy"):
        return True
    t = args[0]
    return t.is_contiguous() and t.storage_offset() == 0 and t.untyped_storage().nbytes() == t.nbytes


def _keep(func, args) -> bool:
    return func in _core_index() and _replayable(func, args)


def _key_dtype(call: AtenCall, sampled: torch.dtype) -> torch.dtype:
    """The dtype a call exercises: the sampled one if any tensor has it, else its output's."""
    tensors = _tensors(call.result) + _tensors((call.args, call.kwargs))
    dtypes = [t.dtype for t in tensors]
    return sampled if sampled in dtypes or not dtypes else dtypes[0]


def _sample_calls(info, dtype: torch.dtype, samples: int):
    """The core-ATen calls the first ``samples`` OpInfo samples of ``info`` at ``dtype`` make."""
    torch.default_generator.manual_seed(0)
    try:  # `info.sample_inputs` wraps this generator in test bookkeeping that walks the stack per call
        inputs = list(itertools.islice(info.sample_inputs_func(info, "cpu", dtype, False), samples))
    except Exception:  # a sample generator that fails for this dtype gives nothing to check
        return []
    calls = []
    for sample in inputs:
        recorder = _Recorder(keep=_keep)
        try:
            with recorder:
                info.op(sample.input, *sample.args, **sample.kwargs)
        except Exception:  # the calls made before the failure are still eager's answers
            pass
        calls += recorder.calls
    return calls


@functools.cache
def opinfo_calls(dtypes=DTYPES, samples: int = 3, calls_per_pair: int = 6) -> dict[tuple[str, torch.dtype], list]:
    """Core-ATen calls from OpInfo samples, keyed by (core operator name, dtype).

    At most ``samples`` samples per (OpInfo, dtype) and ``calls_per_pair`` distinct calls
    (by argument shapes, dtypes and values) per key; calls with tensors of other dtypes
    (complex, quantized) are left out. Deterministic (the random state is restored after);
    cached: callers share one sampling, and must not change it.
    """
    pairs: dict[tuple[str, torch.dtype], list[AtenCall]] = {}
    seen = set()
    with warnings.catch_warnings(), torch.random.fork_rng(devices=[]):
        warnings.simplefilter("ignore")
        for info in _op_db():
            supported = info.supported_dtypes("cpu")
            for dtype in (d for d in dtypes if d in supported):
                for call in _sample_calls(info, dtype, samples):
                    bucket = pairs.setdefault((core_operator_of(call.op).name, _key_dtype(call, dtype)), [])
                    if len(bucket) >= calls_per_pair or any(t.dtype not in DTYPES for t in _tensors(call)):
                        continue
                    signature = _signature(call)
                    if signature not in seen:
                        seen.add(signature)
                        bucket.append(call)
    return {key: calls for key, calls in sorted(pairs.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))) if calls}
