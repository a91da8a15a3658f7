"""Delegated latency: torchedge + ONNX Runtime delegate vs ExecuTorch + XNNPACK vs ONNX Runtime
(torch.onnx export, when it works here) vs PyTorch eager, all at one thread, in one run.

Usage: python benchmarks/delegation.py [model ...] [--repeat ROUNDS]

Sides are timed in alternating rounds (see `_common.interleaved_seconds`), so
machine drift hits all of them alike.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from torchedge.backends.onnxruntime import OnnxRuntimePartitioner  # noqa: E402
from torchedge.exir import to_edge_transform_and_lower  # noqa: E402
from torchedge.models import load_model  # noqa: E402
from torchedge.runtime import Runtime  # noqa: E402

MODELS = ["mlp", "cnn", "mobilenet_v2", "llama", "resnet18", "vit", "bert"]


def _executorch_xnnpack(model, inputs):
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower as et_lower
    from executorch.extension.pybindings import portable_lib
    from executorch.runtime import Runtime as ETRuntime

    portable_lib._unsafe_reset_threadpool(1)
    try:
        buffer = et_lower(torch.export.export(model, inputs), partitioner=[XnnpackPartitioner()]).to_executorch().buffer
        program = ETRuntime.get().load_program(buffer)
        method = program.load_method("forward")
        method.execute(list(inputs))
    except Exception as e:  # report the baseline's failure instead of stopping the whole run
        print(f"  ExecuTorch + XNNPACK failed on this model: {type(e).__name__}: {str(e)[:80]}")
        return None
    keep_alive = (buffer, program)  # ExecuTorch reads the program's bytes in place
    return lambda: keep_alive and method.execute(list(inputs))


def _torch_onnx(model, inputs):
    """ONNX Runtime on torch.onnx's export, or None when that exporter cannot run here."""
    try:
        import onnxruntime as ort

        f = io.BytesIO()
        torch.onnx.export(model, inputs, f, dynamo=False)
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        session = ort.InferenceSession(f.getvalue(), options, providers=["CPUExecutionProvider"])
        feed = {i.name: t.numpy() for i, t in zip(session.get_inputs(), inputs)}
        return lambda: session.run(None, feed)
    except Exception as e:  # the exporter needs packages that may be missing
        print(f"  torch.onnx export unavailable for this model: {type(e).__name__}: {str(e)[:80]}")
        return None


def bench(name: str, repeat: int) -> list:
    model, inputs = load_model(name)
    program = to_edge_transform_and_lower(
        torch.export.export(model, inputs), partitioner=[OnnxRuntimePartitioner(intra_op_threads=1)]
    ).to_executorch()
    method = Runtime.get().load_program(program.buffer).load_method("forward")
    np_inputs = [t.numpy() for t in inputs]
    with torch.no_grad():
        reference = model(*inputs).numpy()
    error = float(np.max(np.abs(method.execute(np_inputs)[0] - reference)) / np.max(np.abs(reference)))
    sides = {"te": lambda: method.execute(np_inputs), "eager": torch.no_grad()(lambda: model(*inputs))}
    for side, run in (("xnn", _executorch_xnnpack(model, inputs)), ("ort", _torch_onnx(model, inputs))):
        if run is not None:
            sides[side] = run
    t = _common.interleaved_seconds(sides, repeat)
    t_xnn, t_ort = t.get("xnn", float("nan")), t.get("ort", float("nan"))
    delegated = sum(1 for p in program.program.execution_plan for _ in p.delegates)
    return [
        name,
        delegated,
        f"{t['te'] * 1e3:.3f}",
        f"{t_xnn * 1e3:.3f}",
        f"{t_ort * 1e3:.3f}",
        f"{t['eager'] * 1e3:.3f}",
        f"{t['te'] / t_xnn:.2f}",
        f"{t['te'] / t['eager']:.2f}",
        f"{error:.1e}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=MODELS)
    parser.add_argument("--repeat", type=int, default=20)
    _common.add_json_option(parser)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = [bench(name, args.repeat) for name in args.models]
    _common.report(
        [
            "model",
            "delegates",
            "te+ORT ms",
            "ET+XNNPACK ms",
            "ORT(torch.onnx) ms",
            "eager ms",
            "te+ORT/XNNPACK",
            "te+ORT/eager",
            "rel err",
        ],
        rows,
        args.json,
    )


if __name__ == "__main__":
    main()
