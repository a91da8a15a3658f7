"""torchedge against PyTorch eager over every OpInfo of PyTorch's operator database.

A *case* is one OpInfo of ``op_db``, one dtype and one of its first sample inputs. The
call ``info.op(sample.input, *sample.args, **sample.kwargs)`` becomes a small module (the
sample's tensors are its inputs, everything else constants, its tensor outputs flattened),
which runs in eager, is exported with ``torch.export.export(strict=False)``, lowered with
``to_edge(ep).to_executorch()`` and run by the NumPy runtime. Every case ends in one
`OUTCOMES` entry; ``eager_error`` and ``export_error`` are PyTorch's limits (excluded from
torchedge's pass rate), the others are torchedge's result.

This module runs cases in the calling process (`run_samples`); `op_db_pool` runs them in
worker processes with a timeout per case.
"""

from __future__ import annotations

import functools
import itertools
import re
import signal
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch.export.graph_signature import OutputKind
from torch.utils import _pytree as pytree

__all__ = [
    "DTYPES",
    "EXCLUDED",
    "FAILURES",
    "OUTCOMES",
    "CaseResult",
    "CaseTimeout",
    "family_of",
    "op_db_entries",
    "find_entry",
    "full_name",
    "run_samples",
    "units",
]

# The dtypes swept, by name; a case uses those the OpInfo supports on CPU.
DTYPES = {"float32": torch.float32, "int64": torch.int64, "int32": torch.int32, "bool": torch.bool}
OUTCOMES = (
    "pass",
    "compile_error",
    "runtime_error",
    "wrong_result",
    "wrong_dtype_shape",
    "timeout",
    "crash",
    "eager_error",
    "export_error",
)
EXCLUDED = ("eager_error", "export_error")  # PyTorch's limits, not counted against torchedge
FAILURES = tuple(o for o in OUTCOMES if o not in EXCLUDED and o != "pass")
_FAMILIES = ("nn.functional", "special", "linalg", "fft", "signal", "sparse", "masked", "_refs")
_OPERATOR = re.compile(r"aten::[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)?")


class CaseTimeout(Exception):
    """A case ran past its time limit."""


@dataclass
class CaseResult:
    """The outcome of one case; ``operator`` is the ATen operator an error names, if any."""

    op: str
    family: str
    dtype: str
    sample: int
    outcome: str
    operator: str = ""
    message: str = ""
    note: str = ""
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


@functools.cache
def op_db_entries() -> tuple:
    from torch.testing._internal.common_methods_invocations import op_db

    return tuple(op_db)


def full_name(info) -> str:
    """The OpInfo's name, with its variant after a dot (``max.reduction_with_dim``)."""
    return f"{info.name}.{info.variant_test_name}" if info.variant_test_name else info.name


@functools.cache
def _by_full_name() -> dict:
    return {full_name(info): info for info in op_db_entries()}


def find_entry(name: str):
    return _by_full_name()[name]


def family_of(name: str) -> str:
    """``special``, ``linalg``, ``nn.functional``... from the name's prefix; ``torch`` for plain names."""
    for family in _FAMILIES:
        if name.startswith(family + "."):
            return family
    return name.split(".")[0] if "." in name and not name.startswith("_") else "torch"


def units(ops: list[str] | None = None, dtypes: list[str] | None = None) -> list[tuple[str, str]]:
    """(OpInfo full name, dtype name) for every OpInfo whose name contains one of ``ops``
    (all when None), at every dtype of ``dtypes`` (default: all of `DTYPES`) it supports on CPU."""
    chosen = [d for d in DTYPES if dtypes is None or d in dtypes]
    result = []
    for info in op_db_entries():
        name = full_name(info)
        if ops and not any(o in name for o in ops):
            continue
        supported = info.supported_dtypes("cpu")
        result += [(name, d) for d in chosen if DTYPES[d] in supported]
    return result


@contextmanager
def _time_limit(seconds: float | None):
    """Raise `CaseTimeout` in the main thread after ``seconds`` (no limit when None or 0)."""
    if not seconds:
        yield
        return

    def expire(signum, frame):
        raise CaseTimeout(f"ran past {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class _Call(torch.nn.Module):
    """``op(input, *args, **kwargs)`` with the sample's tensors as inputs; returns its tensors."""

    def __init__(self, op, leaves: list, spec, positions: list[int]) -> None:
        super().__init__()
        self.op, self.leaves, self.spec, self.positions = op, leaves, spec, positions

    def forward(self, *tensors):
        leaves = list(self.leaves)
        for position, tensor in zip(self.positions, tensors):
            leaves[position] = tensor
        first, args, kwargs = pytree.tree_unflatten(leaves, self.spec)
        out = self.op(first, *args, **kwargs)
        return tuple(leaf for leaf in pytree.tree_leaves(out) if isinstance(leaf, torch.Tensor))


def _module_of(info, sample) -> tuple[_Call, list[torch.Tensor]]:
    leaves, spec = pytree.tree_flatten((sample.input, tuple(sample.args), dict(sample.kwargs)))
    positions = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
    tensors = [leaves[i].detach() for i in positions]
    constants = [None if isinstance(leaf, torch.Tensor) else leaf for leaf in leaves]
    return _Call(info.op, constants, spec, positions), tensors


def _clones(tensors: list[torch.Tensor]) -> tuple[torch.Tensor, ...]:
    return tuple(t.clone() for t in tensors)


def _short(error: BaseException, limit: int = 300) -> str:
    text = f"{type(error).__name__}: {error}".strip().splitlines()[0] if str(error) else type(error).__name__
    return text[:limit]


def _operator_named(error: BaseException) -> str:
    found = _OPERATOR.findall(str(error))
    return found[0] if found else ""


def _same(got: torch.Tensor, want: torch.Tensor) -> bool:
    try:
        torch.testing.assert_close(got, want, equal_nan=True)
    except AssertionError:
        return False
    return True


def _as_accurate_as_eager(got: torch.Tensor, want: torch.Tensor, exact: torch.Tensor | None) -> bool:
    """Whether a float result beyond tolerance of eager's is at least as close as eager's to
    the float64 result (eager's float32 special functions are sometimes the less accurate)."""
    if exact is None or not want.is_floating_point() or exact.shape != want.shape:
        return False
    exact = exact.double()
    ours, theirs = (got.double() - exact).abs(), (want.double() - exact).abs()
    finite = torch.isfinite(exact)
    return bool(torch.equal(torch.isnan(got), torch.isnan(exact))) and bool(
        (ours[finite] <= 2 * theirs[finite] + 1e-5).all()
    )


def _compare(outputs: list, expected: tuple, values: bool, exact: tuple | None = None) -> tuple[str, str]:
    """(outcome, message) of the runtime's outputs against eager's (``exact``: eager in float64)."""
    from torchedge.exir.dtypes import to_torch

    if len(outputs) != len(expected):
        return "wrong_dtype_shape", f"{len(outputs)} outputs, expected {len(expected)}"
    for index, (out, want) in enumerate(zip(outputs, expected)):
        array = np.array(out, copy=True)
        try:  # bfloat16 comes as ml_dtypes.bfloat16, which torch.from_numpy does not take
            got = torch.from_numpy(array) if array.dtype.name != "bfloat16" else to_torch(array).reshape(array.shape)
        except TypeError as e:  # a dtype torch cannot take from NumPy
            return "wrong_dtype_shape", f"output {index}: {e}"
        if got.dtype != want.dtype or tuple(got.shape) != tuple(want.shape):
            return "wrong_dtype_shape", (
                f"output {index}: got {got.dtype}{list(got.shape)}, expected {want.dtype}{list(want.shape)}"
            )
        if not values:
            continue
        try:
            torch.testing.assert_close(got, want.detach().contiguous(), equal_nan=True)
        except AssertionError as e:
            if _as_accurate_as_eager(got, want.detach(), exact[index] if exact else None):
                continue
            detail = " ".join(str(e).split())
            return "wrong_result", f"output {index}: {detail}"[:300]
    return "pass", ""


# Eigenvectors are unique only up to a phase (a sign, for real ones), which LAPACK builds choose
# differently: these OpInfos are compared as PyTorch's own tests compare them, through their
# samples' ``output_process_fn_grad`` (eigenvalues, and the eigenvectors' magnitudes).
_UP_TO_PHASE = frozenset({"linalg.eig", "linalg.eigh"})


def _tensor(array) -> torch.Tensor:
    return torch.from_numpy(np.array(array, copy=True))


def _in_float64(module, tensors: list) -> tuple | None:
    """Eager's outputs with float32 inputs computed in float64, or None where that fails."""
    if not any(t.dtype == torch.float32 for t in tensors):
        return None
    try:
        with torch.no_grad():
            return module(*[t.double() if t.dtype == torch.float32 else t.clone() for t in tensors])
    except Exception:  # an op without float64 support: no reference
        return None


def _converts_undefined(module, tensors: list) -> bool:
    """Whether eager's run of the case converts floats to integers where C leaves the result
    undefined (`kernel_check.conversion_target` of an ATen call it makes): its values then
    depend on the CPU, and are no reference."""
    from tools.qa.aten_calls import AtenCallRecorder
    from tools.qa.kernel_check import conversion_target

    recorder = AtenCallRecorder()
    try:
        with torch.no_grad(), recorder:
            module(*_clones(tensors))
    except Exception:  # a call recording disturbs: judged as any other
        return False
    return any(conversion_target(c.args, c.kwargs, c.result) is not None for c in recorder.calls)


def _unjudged(random: bool, module, tensors: list) -> str:
    """Why eager's values are no reference for the case ("" when they are)."""
    if random:
        return "random or uninitialised values: dtypes and shapes compared only"
    if _converts_undefined(module, tensors):
        return "float-to-integer conversions C leaves undefined: dtypes and shapes compared only"
    return ""


def _name(node) -> str:
    schema = getattr(node.target, "_schema", None)
    return schema.name if schema is not None else ""


def _seeded(exported) -> bool:
    """Whether the program draws random numbers or returns uninitialised memory (then its
    values cannot match eager's)."""
    seeded = torch.Tag.nondeterministic_seeded
    if any(seeded in getattr(node.target, "tags", ()) for node in exported.graph.nodes):
        return True
    outputs = pytree.tree_leaves(exported.graph.output_node().args)
    return any(_name(n).startswith(("aten::empty", "aten::new_empty")) for n in outputs if hasattr(n, "target"))


def _run_one(info, sample) -> tuple[str, str, str, str]:
    """(outcome, operator, message, note) of one sample."""
    from torchedge.exir import to_edge
    from torchedge.runtime import Runtime

    try:
        module, tensors = _module_of(info, sample)
        with torch.no_grad():
            expected = module(*_clones(tensors))
            again = module(*_clones(tensors))
    except CaseTimeout:
        raise
    except Exception as e:
        return "eager_error", "", _short(e), ""
    if not expected:
        return "eager_error", "", "no tensor output", ""
    random = len(again) != len(expected) or not all(_same(a, b) for a, b in zip(again, expected))
    try:
        exported = torch.export.export(module, _clones(tensors), strict=False)
    except CaseTimeout:
        raise
    except Exception as e:
        return "export_error", _operator_named(e), _short(e), ""
    note = _unjudged(random or _seeded(exported), module, tensors)
    try:
        edge = to_edge(exported)
        buffer = edge.to_executorch().buffer
    except CaseTimeout:
        raise
    except Exception as e:
        return "compile_error", _operator_named(e), _short(e), note
    try:
        from torchedge.exir.dtypes import to_numpy

        method = Runtime.get().load_program(buffer).load_method("forward")
        outputs = method.execute([to_numpy(t) for t in tensors])
    except CaseTimeout:
        raise
    except Exception as e:
        return "runtime_error", _operator_named(e), _short(e), note
    # the program returns the inputs it mutates (x.uniform_()) before the module's own outputs
    kinds = [spec.kind for spec in edge.exported_program().graph_signature.output_specs]
    got = list(outputs)[kinds.count(OutputKind.USER_INPUT_MUTATION) :]
    gauge = sample.output_process_fn_grad if info.name in _UP_TO_PHASE else tuple
    if info.name in _UP_TO_PHASE:
        expected, got = gauge(tuple(expected)), list(gauge(tuple(map(_tensor, got))))
    outcome, message = _compare(got, expected, values=not note)
    if outcome == "wrong_result":
        exact = _in_float64(module, tensors)
        outcome, message = _compare(got, expected, True, exact and gauge(tuple(exact)))
        note = note or ("as close to the float64 result as eager's" if outcome == "pass" else "")
    return outcome, "", message, note


def _samples(info, dtype: torch.dtype, start: int, stop: int) -> list:
    torch.manual_seed(0)
    return list(itertools.islice(info.sample_inputs("cpu", dtype), start, stop))


def run_samples(
    name: str, dtype: str, start: int = 0, stop: int = 3, timeout: float | None = None
) -> Iterator[CaseResult]:
    """The results of samples ``start..stop-1`` of OpInfo ``name`` at ``dtype``, one by one, each
    within ``timeout`` seconds (main thread only; sample generation gets its own ``timeout``)."""
    info = find_entry(name)
    family = family_of(info.name)
    with warnings.catch_warnings(), torch.random.fork_rng(devices=[]):
        warnings.simplefilter("ignore")
        began = time.perf_counter()
        try:
            with _time_limit(timeout):
                samples = _samples(info, DTYPES[dtype], start, stop)
        except Exception as e:  # reported once, with sample 0: a later start fails the same way
            if start == 0:
                outcome = "timeout" if isinstance(e, CaseTimeout) else "eager_error"
                yield CaseResult(name, family, dtype, 0, outcome, message=f"sample generation: {_short(e)}")
            return
        for index, sample in enumerate(samples, start):
            began = time.perf_counter() if index > start else began
            try:
                with _time_limit(timeout):
                    outcome, operator, message, note = _run_one(info, sample)
            except CaseTimeout as e:
                outcome, operator, message, note = "timeout", "", str(e), ""
            seconds = round(time.perf_counter() - began, 3)
            yield CaseResult(name, family, dtype, index, outcome, operator, message, note, seconds)
