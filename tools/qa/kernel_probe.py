"""Which dtype combinations a portable kernel supports, and how accurately it computes them.

A template (see `probe_templates`) builds one call of an operator from a `Draw`;
every tensor, tensor list, dtype and scalar it draws is a slot with a dtype. `probe_calls`
draws, for each primary dtype, the call whose free slots have that dtype, then every call
that gives one slot another dtype. `probe_operator` runs each call in eager, without
oneDNN (a call eager rejects is no combination of the operator at all), and on the
portable kernel as a support check (`kernel_check.check_call`), and reports the worst
outcome per dtype signature: the dtypes of the operator's tensor arguments and returns,
in `spec.tensor_io_names` order. `kernel_spec` turns the signatures the kernel supports
(it runs the call and returns eager's dtypes and shapes, whatever its values) into the
operator's `OpSpec`, so that no floating-point result, and so no CPU, decides the spec.
Values are judged apart, for the tests (`Status.INACCURATE`).

>>> results = probe_operator(torch.ops.aten.sigmoid.default, [lambda d: ((d.tensor(3, 4),), {})])
>>> results[torch.int32, torch.float32].status
<Status.PASS: 1>
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch
from torch.testing import make_tensor
from torch.utils._pytree import tree_map_only

from tools.qa.kernel_check import DTYPES, CheckResult, Status, check_call, worst
from torchedge.exir.dialects.constraints import spec_from_combinations
from torchedge.exir.dialects.spec import DTYPE_NAMES, OpSpec, is_tensor_like, tensor_io_names
from torchedge.exir.ir import bind_arguments, op_name
from torchedge.kernels.registry import Kernel, get_kernel

__all__ = ["Draw", "Template", "Wrong", "probe_calls", "dtype_signature", "probe_operator", "kernel_spec"]

# Every dtype a slot may take: the checked dtypes and the complex ones (ExecuTorch names them too).
PROBE_DTYPES = (*DTYPES, torch.complex64, torch.complex128)
_SCALARS = {torch.bool: bool, torch.int64: int, torch.float64: float}
_SCALAR_DTYPE = {python_type: dtype for dtype, python_type in _SCALARS.items()}


@dataclass(frozen=True)
class _Slot:
    value: torch.dtype | None
    domain: tuple


class Draw:
    """Hands a template its values, one slot each; ``changes`` overrides slots' dtypes by index.

    Free slots (a tensor without ``dtype``, a required dtype) take the ``primary`` dtype.
    """

    def __init__(self, primary: torch.dtype, changes: dict[int, torch.dtype | None] | None = None):
        self.primary = primary
        self.changes = changes or {}
        self.slots: list[_Slot] = []

    def _slot(self, base, domain: tuple):
        value = self.changes.get(len(self.slots), base)
        self.slots.append(_Slot(value, domain))
        return value

    @staticmethod
    def _make(dtype, shape, data, low, high, exclude_zero) -> torch.Tensor:
        if data is not None:
            return torch.tensor(data).to(dtype)
        return make_tensor(shape, dtype=dtype, device="cpu", low=low, high=high, exclude_zero=exclude_zero)

    def tensor(self, *shape: int, dtype=None, data=None, low=None, high=None, exclude_zero=True) -> torch.Tensor:
        """A tensor: ``data`` converted to the slot's dtype, or random values in [low, high)."""
        return self._make(self._slot(dtype or self.primary, PROBE_DTYPES), shape, data, low, high, exclude_zero)

    def tensors(self, count: int, *shape: int, low=None, high=None) -> list[torch.Tensor]:
        """``count`` tensors sharing one slot (a ``Tensor[]`` argument)."""
        dtype = self._slot(self.primary, PROBE_DTYPES)
        return [self._make(dtype, shape, None, low, high, True) for _ in range(count)]

    def dtype(self, optional: bool = False) -> torch.dtype | None:
        """A ``ScalarType`` argument: the primary dtype, or None if ``optional``."""
        return self._slot(None if optional else self.primary, PROBE_DTYPES + (None,))

    def scalar(self, value: bool | int | float) -> bool | int | float:
        """A ``Scalar`` argument: ``value``, or it converted to bool, int or float."""
        return _SCALARS[self._slot(_SCALAR_DTYPE[type(value)], tuple(_SCALARS))](value)


Template = Callable[[Draw], tuple[tuple, dict]]


@dataclass(frozen=True)
class Wrong:
    """Combinations a kernel supports but is known to compute wrongly, left out of the spec
    until it is fixed: those whose dtypes (tensor name -> dtype, None if absent) it ``picks``."""

    picks: Callable[[dict], bool]
    reason: str


def _draw(template: Template, primary: torch.dtype, changes: dict) -> tuple[Draw, tuple, dict]:
    draw = Draw(primary, changes)
    generator = torch.default_generator  # seeded directly: `torch.manual_seed` also seeds every accelerator
    state = generator.get_state()
    generator.manual_seed(0)
    try:
        args, kwargs = template(draw)
    finally:
        generator.set_state(state)
    return draw, args, kwargs


def probe_calls(template: Template) -> Iterator[tuple[tuple, dict]]:
    """Each primary dtype's call, and the calls that change one of its slots; each once."""
    seen = set()
    for primary in PROBE_DTYPES:
        base, args, kwargs = _draw(template, primary, {})
        values = [slot.value for slot in base.slots]
        changes: list[dict[int, object]] = [{}] + [
            {i: v} for i, slot in enumerate(base.slots) for v in slot.domain if v != slot.value
        ]
        for change in changes:
            key = tuple(change.get(i, v) for i, v in enumerate(values))
            if key not in seen:
                seen.add(key)
                yield (args, kwargs) if not change else _draw(template, primary, change)[1:]


def _dtype_of(value) -> torch.dtype | None:
    if isinstance(value, torch.Tensor):
        return value.dtype
    if isinstance(value, (list, tuple)):
        found = [d for d in map(_dtype_of, value) if d is not None]
        return found[0] if found else None
    return None


def dtype_signature(op: torch._ops.OpOverload, args: tuple, kwargs: dict, result) -> tuple:
    """The dtypes of ``op``'s tensor arguments and returns in one call (None where absent)."""
    schema = op._schema
    arg_names, _ = tensor_io_names(schema)
    bound = bind_arguments(op, args, kwargs)
    results = result if len(schema.returns) > 1 else (result,)
    returns = [value for value, ret in zip(results, schema.returns) if is_tensor_like(ret.type)]
    return tuple(map(_dtype_of, [*(bound.get(name) for name in arg_names), *returns]))


def probe_operator(
    op: torch._ops.OpOverload, templates: Sequence[Template], kernels: Callable[[str], Kernel] = get_kernel
) -> dict[tuple, CheckResult]:
    """Per dtype signature eager computes, the worst support check of the calls with it
    (``kernels`` as in `check_call`)."""
    results: dict[tuple, CheckResult] = {}
    calls = (call for template in templates for call in probe_calls(template))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # Eager without oneDNN, which takes more dtype combinations than ATen's own kernels on
        # CPUs with bfloat16 or float16 instructions: the combinations must not depend on the CPU.
        with torch.backends.mkldnn.flags(enabled=False):
            for args, kwargs in calls:
                inputs: tuple[tuple, dict] = tree_map_only(torch.Tensor, torch.Tensor.clone, (args, kwargs))
                try:
                    expected = op(*args, **kwargs)
                except Exception:  # eager rejects these dtypes: not a combination of the operator
                    continue
                result = check_call(op, *inputs, expected, kernels, support=True)
                if result.status is not Status.UNSUPPORTED:
                    signature = dtype_signature(op, *inputs, expected)
                    results[signature] = worst([results[signature], result]) if signature in results else result
    return results


def kernel_spec(
    op: torch._ops.OpOverload,
    templates: Sequence[Template],
    wrong: Wrong | None = None,
    kernels: Callable[[str], Kernel] = get_kernel,
) -> tuple[OpSpec, dict[tuple, CheckResult]]:
    """The spec admitting exactly the probed combinations the kernel supports (and the DSL
    can name) but those ``wrong`` picks, and the probe results it comes from."""
    results = probe_operator(op, templates, kernels)
    arg_names, ret_names = tensor_io_names(op._schema)
    names, nameable = arg_names + ret_names, set(DTYPE_NAMES.values()) | {None}
    admitted = [
        signature
        for signature, result in results.items()
        if result.status.supported
        and nameable.issuperset(signature)
        and not (wrong and wrong.picks(dict(zip(names, signature))))
    ]
    return spec_from_combinations(op_name(op), names, admitted), results
