"""Runtime half of the ONNX Runtime backend: one `InferenceSession` per delegate.

NumPy and onnxruntime only (no torch). Importing this module registers the
backend under its id; the runtime does that on first use of the id (the
``torchedge.backends`` entry point in pyproject.toml names this module).

Threads: a handle's IO binding is rebound in place, so it runs one call at a time, which the lock
of the method holding it ensures; each loaded method opens a session (and intra-op pool) of its own.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import platform
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from operator import is_

import numpy as np

from torchedge.backends.onnxruntime.compile_specs import BACKEND_ID, session_threads
from torchedge.backends.onnxruntime.payload import payload_weights, read_payload
from torchedge.errors import InvalidProgramError, KernelError
from torchedge.runtime.backend import RUNTIME_PROFILING, BackendInterface, register_backend

__all__ = ["OnnxRuntimeDelegate"]


# ONNX Runtime's tensor type names -> NumPy dtype names (what the delegate's arguments must hold).
_ORT_DTYPES = {
    "tensor(float)": "float32",
    "tensor(double)": "float64",
    "tensor(float16)": "float16",
    "tensor(bfloat16)": "bfloat16",
    "tensor(int64)": "int64",
    "tensor(int32)": "int32",
    "tensor(int16)": "int16",
    "tensor(int8)": "int8",
    "tensor(uint8)": "uint8",
    "tensor(bool)": "bool",
}


def _signature(args) -> list[tuple[str, str | None, list]]:
    """(name, dtype name or None, sizes: an int, or a symbolic dimension's name) of a session's inputs or outputs."""
    return [(a.name, _ORT_DTYPES.get(a.type), [d if isinstance(d, int) else str(d) for d in a.shape]) for a in args]


def _check_arguments(signature, args, role: str) -> None:
    """The delegate call's arrays are what the ONNX model declares (a corrupt program can say otherwise)."""
    for (name, dtype, sizes), array in zip(signature, args):
        where = f"{BACKEND_ID}: {role} '{name}'"
        if not isinstance(array, np.ndarray):
            raise KernelError(f"{where}: expected a tensor, found {type(array).__name__}")
        if dtype is not None and array.dtype.name != dtype:
            raise KernelError(f"{where}: expected dtype {dtype}, found {array.dtype}")
        if len(sizes) != array.ndim or any(isinstance(s, int) and s != n for s, n in zip(sizes, array.shape)):
            expected = [s if isinstance(s, int) else "?" for s in sizes]
            raise KernelError(f"{where}: expected shape {expected}, found {list(array.shape)}")


@dataclass
class _Session:
    session: object
    inputs: list[str]
    outputs: list[str]
    binding: object
    bound_to: tuple = ()  # the arrays the binding currently points at (kept alive, compared by identity)
    bound_layout: tuple | None = None  # their memory (address, shape, strides, dtype), for new views of it
    sized_for: tuple | None = None  # the arguments' shapes when no output needed a new array
    signature: tuple = ()  # (inputs, outputs) as `_signature` describes them
    profiling: bool = False  # ONNX Runtime's profiler is on (the program is traced)
    symbolic_outputs: bool = False  # some output size is a symbolic dimension (set from the inputs' sizes)
    weights: list = field(default_factory=list)  # OrtValues over the program's bytes (ONNX Runtime does not own them)
    run: object = field(init=False)  # runs the session on the binding

    def __post_init__(self):
        # Calling the C++ session under ONNX Runtime's Python wrapper saves a Python frame per run
        # (noticeable on a tiny model's run); the public method is the fallback.
        inner, binding = getattr(self.session, "_sess", None), getattr(self.binding, "_iobinding", None)
        if inner is not None and binding is not None and hasattr(inner, "run_with_iobinding"):
            self.run = partial(inner.run_with_iobinding, binding, None)
        else:
            self.run = partial(self.session.run_with_iobinding, self.binding)


def int8_products_are_exact(machine: str | None = None, cpu_flags: set[str] | frozenset[str] | None = None) -> bool:
    """Whether ONNX Runtime's fused int8 kernels sum exactly on this CPU (or on ``machine`` with
    ``cpu_flags``, as /proc/cpuinfo lists them).

    On x86-64 without VNNI, its u8 x s8 kernels multiply-add pairs into int16 with saturation
    (``vpmaddubsw``), which gives wrong results for large enough weights and activations; there
    the delegate keeps each QuantizeLinear / DequantizeLinear pair apart (ONNX Runtime's
    ``session.disable_quant_qdq``), so quantized graphs run their float arithmetic between exact
    quantize and dequantize steps. VNNI (``vpdpbusd``) and ARM64's dot products accumulate in int32.
    """
    machine = (machine or platform.machine()).lower()
    if machine not in ("x86_64", "amd64", "i386", "i686"):
        return True
    flags = _cpu_flags() if cpu_flags is None else cpu_flags
    return flags is not None and ("avx512_vnni" in flags or "avx_vnni" in flags)


@functools.cache
def _cpu_flags() -> frozenset[str] | None:
    """This CPU's flags as /proc/cpuinfo lists them (read once per process), None when unreadable."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            return frozenset(next((line for line in cpuinfo if line.startswith("flags")), "").split())
    except OSError:
        return None


class OnnxRuntimeDelegate(BackendInterface):
    install_hint = "it needs ONNX Runtime, which is not installed: pip install 'torchedge[onnxruntime]'"

    def is_available(self) -> bool:
        try:
            import onnxruntime  # noqa: F401
        except ImportError:
            return False
        return True

    def init(self, processed, compile_specs, named_data) -> _Session:
        """One session, with the intra-op threads `session_threads` picks: the runtime's explicit
        ``num_threads`` wins over the export-time ``intra_op_threads``; neither means one."""
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.intra_op_num_threads = session_threads(compile_specs)
        if not int8_products_are_exact():
            options.add_session_config_entry("session.disable_quant_qdq", "1")
        profiling = RUNTIME_PROFILING in compile_specs
        if profiling:
            options.enable_profiling = True
            # ONNX Runtime adds only a millisecond time stamp: sessions made in the same millisecond need their own
            session_name = f"torchedge_ort_{os.getpid()}_{next(_PROFILED_SESSIONS)}"
            options.profile_file_prefix = os.path.join(tempfile.gettempdir(), session_name)
        try:
            model, arrays = read_payload(processed, None if named_data is None else named_data.get)
            weights = [ort.OrtValue.ortvalue_from_numpy(array) for _, array in arrays]
            if weights:  # arrays over the (mapped) program's named data: no copy of the weights
                options.add_external_initializers([name for name, _ in arrays], weights)
            session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
            return _Session(
                session,
                [i.name for i in session.get_inputs()],
                [o.name for o in session.get_outputs()],
                session.io_binding(),
                signature=(_signature(session.get_inputs()), _signature(session.get_outputs())),
                profiling=profiling,
                symbolic_outputs=any(not isinstance(d, int) for o in _signature(session.get_outputs()) for d in o[2]),
                weights=weights,
            )
        except InvalidProgramError:
            raise
        except Exception as e:  # ONNX Runtime's own types (InvalidProtobuf, Fail...) and decoding errors
            raise InvalidProgramError(
                f"{BACKEND_ID}: expected a valid ONNX model in the delegate's {len(processed)} bytes, "
                f"ONNX Runtime refused it: {type(e).__name__}: {e}"
            ) from e

    def execute(self, handle: _Session, args) -> dict[int, np.ndarray] | None:
        """Run on our arrays in place: ONNX Runtime reads the inputs and writes the planned outputs.

        Planned buffers keep their addresses from run to run, so the binding is
        made once and reused until an argument moves. An output with a symbolic size whose
        argument has another shape this run is written to a new array, returned by position.
        """
        n = len(handle.inputs)
        if len(args) != n + len(handle.outputs):
            raise KernelError(
                f"{BACKEND_ID}: expected {n} inputs and {len(handle.outputs)} outputs, got {len(args)} values"
            )
        resized = _resized_outputs(handle, args, n) if handle.symbolic_outputs else None
        if resized:
            args = [resized.get(i, a) for i, a in enumerate(args)]
        elif _still_bound(handle, args):
            handle.run()
            return None
        self._bind_and_run(handle, args, n)
        # Only arrays bound in place can be reused; a staged (non-contiguous) output needs its copy-back.
        reusable = not resized and all(a.flags.c_contiguous for a in args)
        handle.bound_to = tuple(args) if reusable else ()
        handle.bound_layout = _layout(args) if reusable else None
        return resized

    def profile(self, handle: _Session) -> list[list[tuple[str, int, int]]]:
        """Each run's node timings from ONNX Runtime's profiler (which this stops): per ``model_run``
        event, the ``<node>_kernel_time`` events inside it, offsets from the run's start."""
        if not handle.profiling:
            return []
        handle.profiling = False
        path = handle.session.end_profiling()
        try:
            with open(path) as f:
                events = json.load(f)
        finally:
            os.remove(path)
        runs = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e.get("name") == "model_run")
        nodes = [e for e in events if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time")]
        result: list[list[tuple[str, int, int]]] = [[] for _ in runs]
        for node in sorted(nodes, key=lambda e: e["ts"]):
            for i, (start, end) in enumerate(runs):
                if start <= node["ts"] <= end:
                    name = node["name"].removesuffix("_kernel_time")
                    result[i].append((name, (node["ts"] - start) * 1000, node["dur"] * 1000))
                    break
        return result

    def describe(self, processed) -> list[str]:
        """Nodes by operator type, inputs, outputs and weights of the payload's ONNX graph (read
        from its protobuf encoding: no onnx package, no session); subgraphs of If/Loop not counted."""
        model, weights = payload_weights(processed)
        graph = _onnx_graph(memoryview(model))
        kinds = Counter(graph.op_types)
        named = [nbytes for _, nbytes, key in weights if key is not None]
        inline = sum(nbytes for _, nbytes, key in weights if key is None)
        lines = [
            f"ONNX graph: {len(graph.op_types)} nodes, {graph.inputs} input(s), {graph.outputs} output(s)",
            f"weights: {graph.initializers} initializer(s), {len(weights)} mapped at load: {len(named)} by key in"
            f" named data ({sum(named):,} bytes), {graph.initializer_bytes + inline:,} bytes in the payload",
        ]
        return lines + [f"{count:5d} x {kind}" for kind, count in kinds.most_common()]

    @staticmethod
    def _bind_and_run(handle: _Session, args, n: int) -> None:
        if handle.signature:
            _check_arguments(handle.signature[0], args[:n], "input")
            _check_arguments(handle.signature[1], args[n:], "output")
        binding = handle.binding
        binding.clear_binding_inputs()
        binding.clear_binding_outputs()
        for name, array in zip(handle.inputs, args[:n]):
            binding.bind_cpu_input(name, np.ascontiguousarray(array))
        staged = []
        for name, out in zip(handle.outputs, args[n:]):
            target = out if out.flags.c_contiguous else np.empty(out.shape, out.dtype)
            binding.bind_output(name, "cpu", 0, target.dtype, list(target.shape), target.ctypes.data)
            if target is not out:
                staged.append((out, target))
        handle.run()
        for out, target in staged:
            np.copyto(out, target)


def _layout(args) -> tuple | None:
    """Where and how each array lies in memory (None if some argument is not an array)."""
    if not all(isinstance(a, np.ndarray) for a in args):
        return None
    return tuple((a.__array_interface__["data"][0], a.shape, a.strides, a.dtype) for a in args)


def _still_bound(handle: _Session, args) -> bool:
    """The binding points at these arrays' memory: the same arrays, or new views (a dynamic
    shape's value is viewed again each run) of the same bytes at the same shape."""
    bound = handle.bound_to
    if len(bound) != len(args):
        return False
    if all(map(is_, args, bound)):
        return True
    if handle.bound_layout is None or _layout(args) != handle.bound_layout:
        return False
    handle.bound_to = tuple(args)
    return True


def _resized_outputs(handle: _Session, args, n: int) -> dict[int, np.ndarray]:
    """New arrays for the outputs whose shape this run (symbolic sizes taken from the inputs')
    differs from their argument's, by argument position; none while the arguments' shapes are
    those of a run that needed none."""
    shapes = tuple(getattr(a, "shape", None) for a in args)
    if shapes == handle.sized_for:
        return {}
    resized = _new_outputs(handle, args, n)
    handle.sized_for = None if resized else shapes
    return resized


def _new_outputs(handle: _Session, args, n: int) -> dict[int, np.ndarray]:
    inputs, outputs = handle.signature
    sizes: dict[str, int] = {}
    for (_, _, dims), array in zip(inputs, args[:n]):
        if len(dims) == getattr(array, "ndim", -1):
            sizes.update((d, s) for d, s in zip(dims, array.shape) if not isinstance(d, int))
    resized = {}
    for position, ((name, dtype, dims), out) in enumerate(zip(outputs, args[n:]), start=n):
        if any(not isinstance(d, int) and d not in sizes for d in dims):
            raise KernelError(f"{BACKEND_ID}: output '{name}' has a size no input of the delegate sets")
        shape = tuple(sizes[d] if isinstance(d, str) else d for d in dims)
        if tuple(out.shape) != shape:
            resized[position] = np.empty(shape, dtype or out.dtype)
    return resized


@dataclass
class _OnnxGraph:
    op_types: list[str] = field(default_factory=list)
    inputs: int = 0
    outputs: int = 0
    initializers: int = 0
    initializer_bytes: int = 0


def _varint(data: memoryview, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data):
            raise InvalidProgramError(f"{BACKEND_ID}: the ONNX model's protobuf ends inside a number")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if byte < 0x80:
            return value, at


def _fields(data: memoryview):
    """(field number, bytes) of each length-delimited field of a protobuf message; others skipped."""
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        kind = key & 7
        if kind == 0:
            _, at = _varint(data, at)
        elif kind in (1, 5):
            at += 8 if kind == 1 else 4
        elif kind == 2:
            size, at = _varint(data, at)
            if at + size > len(data):
                raise InvalidProgramError(f"{BACKEND_ID}: a field of the ONNX model runs past its end")
            yield key >> 3, data[at : at + size]
            at += size
        else:
            raise InvalidProgramError(f"{BACKEND_ID}: not an ONNX model (protobuf wire type {kind})")


def _onnx_graph(model: memoryview) -> _OnnxGraph:
    """ModelProto.graph (7): GraphProto node (1), initializer (5), input (11), output (12);
    NodeProto.op_type (4)."""
    graph = _OnnxGraph()
    for number, body in _fields(model):
        if number != 7:
            continue
        for part, value in _fields(body):
            if part == 1:
                graph.op_types += [bytes(v).decode("utf-8", "replace") for n, v in _fields(value) if n == 4]
            elif part == 5:
                graph.initializers += 1
                graph.initializer_bytes += len(value)
            elif part == 11:
                graph.inputs += 1
            elif part == 12:
                graph.outputs += 1
    return graph


_PROFILED_SESSIONS = itertools.count()

register_backend(BACKEND_ID, OnnxRuntimeDelegate())
