"""The Edge-operator calls that PyTorch's OpInfo samples make, across dtypes, for differential checks.

`opinfo_calls` runs the first few samples of every OpInfo at every dtype of `DTYPES` it
supports, records the calls they make to core ATen operators and to the other operators the
runtime has kernels for, and keys them by (operator, dtype).
"""

from __future__ import annotations

import functools
import itertools
import warnings

import torch

from tools.qa.aten_calls import AtenCall, AtenCallRecorder, leaves
from tools.qa.kernel_check import DTYPES
from torchedge.exir.core_operators import CoreOperator, core_operator_of, kernel_op
from torchedge.exir.ir import op_name
from torchedge.exir.op_schema import is_inplace

__all__ = ["opinfo_calls", "edge_operator_of"]


@functools.cache
def _kernel_index() -> dict:
    """Each non-core ATen operator the runtime has a kernel for (and its out variant) -> its record."""
    from torchedge.kernels.registry import registered_operators

    index = {}
    for name in registered_operators():
        namespace, _, rest = name.partition("::")
        packet = getattr(torch.ops.aten, rest.partition(".")[0], None) if namespace == "aten" else None
        for overload in packet.overloads() if packet is not None else ():
            op = getattr(packet, overload)
            if _comparable(op) and core_operator_of(op) is None and op_name(kernel_op(op)) == name:
                index[op] = CoreOperator(op, name)
    functional = {record.kernel: record for op, record in index.items() if op_name(op) != record.kernel}
    return {op: functional.get(record.kernel, record) for op, record in index.items()}


def _comparable(op) -> bool:
    """Whether eager's result of ``op`` can be compared with a kernel's: not for operators that
    write their input (``copy_``; they run as part of other programs), leave it uninitialized
    or draw random numbers (their own tests check shapes, dtypes and distributions)."""
    uninitialized = op._schema.name.startswith(("aten::empty", "aten::new_empty"))
    return not is_inplace(op) and not uninitialized and torch.Tag.nondeterministic_seeded not in op.tags


def edge_operator_of(op) -> CoreOperator | None:
    """Like `torchedge.exir.core_operators.core_operator_of`, and also for the non-core operators
    the runtime has kernels for (``torch.special``, ``linalg``, ...), which the Edge dialect admits."""
    return core_operator_of(op) or _kernel_index().get(op)


@functools.cache
def _op_db():
    from torch.testing._internal.common_methods_invocations import op_db

    return op_db


def _tensors(value) -> list[torch.Tensor]:
    return [leaf for leaf in leaves(value) if isinstance(leaf, torch.Tensor)]


def _signature(call: AtenCall) -> tuple:
    call_leaves = leaves((call.args, call.kwargs))
    return (call.op,) + tuple(
        (t.dtype, tuple(t.shape)) if isinstance(t, torch.Tensor) else repr(t) for t in call_leaves
    )


def _replayable(func, args) -> bool:
    """Whether a recorded copy can replay the call: not so for ``as_strided`` of a tensor that
    does not own exactly its storage, since the result reads that storage."""
    if func._schema.name not in ("aten::as_strided", "aten::as_strided_copy"):
        return True
    t = args[0]
    return t.is_contiguous() and t.storage_offset() == 0 and t.untyped_storage().nbytes() == t.nbytes


def _keep(func, args) -> bool:
    return edge_operator_of(func) is not None and _replayable(func, args)


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
        recorder = AtenCallRecorder(keep=_keep)
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
                    operator = edge_operator_of(call.op)
                    assert operator is not None  # `_keep` records Edge operators only
                    bucket = pairs.setdefault((operator.name, _key_dtype(call, dtype)), [])
                    if len(bucket) >= calls_per_pair or any(t.dtype not in DTYPES for t in _tensors(call)):
                        continue
                    signature = _signature(call)
                    if signature not in seen:
                        seen.add(signature)
                        bucket.append(call)
    return {key: calls for key, calls in sorted(pairs.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))) if calls}
