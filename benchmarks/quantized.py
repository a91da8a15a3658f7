"""PT2E int8 models: torchedge (portable kernels, and ONNX Runtime delegate) vs ExecuTorch +
XNNPACK on the same quantized model, with the float model in eager and in torchedge + ONNX
Runtime for scale; all at one thread, sides timed in alternating rounds. Also the .pte sizes.

Usage: python benchmarks/quantized.py [mlp|cnn|mobilenet_v2 ...] [--repeat ROUNDS]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402  (sets the thread environment first)
import numpy as np  # noqa: E402
import torch  # noqa: E402

from torchedge.backends.onnxruntime import OnnxRuntimePartitioner  # noqa: E402
from torchedge.exir import to_edge, to_edge_transform_and_lower  # noqa: E402
from torchedge.models import load_model  # noqa: E402
from torchedge.runtime import Runtime  # noqa: E402


def _quantize(model, inputs):
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
    prepared = prepare_pt2e(torch.export.export(model, inputs).module(), quantizer)
    prepared(*inputs)
    return convert_pt2e(prepared)


def _executorch_xnnpack(exported):
    import executorch.kernels.quantized  # noqa: F401
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower as et_lower
    from executorch.extension.pybindings import portable_lib
    from executorch.runtime import Runtime as ETRuntime

    portable_lib._unsafe_reset_threadpool(1)
    buffer = et_lower(exported, partitioner=[XnnpackPartitioner()]).to_executorch().buffer
    program = ETRuntime.get().load_program(buffer)
    return buffer, program, program.load_method("forward")


def _load(buffer):
    return Runtime.get().load_program(buffer).load_method("forward")


def bench(name: str, rounds: int) -> list:
    model, inputs = load_model(name)
    quantized = _quantize(model, inputs)
    exported = torch.export.export(quantized, inputs)
    portable = to_edge(exported).to_executorch()
    delegated = to_edge_transform_and_lower(exported, partitioner=[OnnxRuntimePartitioner(1)]).to_executorch()
    float_ort = to_edge_transform_and_lower(
        torch.export.export(model, inputs), partitioner=[OnnxRuntimePartitioner(1)]
    ).to_executorch()
    xnn_buffer, xnn_program, xnn = _executorch_xnnpack(exported)
    x = [t.numpy() for t in inputs]
    te, te_ort, te_float = _load(portable.buffer), _load(delegated.buffer), _load(float_ort.buffer)
    with torch.no_grad():
        reference = quantized(*inputs).numpy()
    error = float(np.max(np.abs(te_ort.execute(x)[0] - reference)) / np.max(np.abs(reference)))
    t = _common.interleaved_seconds(
        {
            "te": lambda: te.execute(x),
            "te_ort": lambda: te_ort.execute(x),
            "xnn": lambda: xnn.execute(list(inputs)),
            "float_ort": lambda: te_float.execute(x),
            "eager": torch.no_grad()(lambda: model(*inputs)),
        },
        rounds,
    )
    del xnn_program, xnn_buffer  # kept alive while timing: ExecuTorch reads the program's bytes in place
    ms = {k: f"{v * 1e3:.3f}" for k, v in t.items()}
    return [
        name,
        ms["te"],
        ms["te_ort"],
        ms["xnn"],
        ms["float_ort"],
        ms["eager"],
        f"{t['te_ort'] / t['xnn']:.2f}",
        f"{len(delegated.buffer):,}",
        f"{len(float_ort.buffer):,}",
        f"{error:.1e}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["mlp", "cnn", "mobilenet_v2"])
    parser.add_argument("--repeat", type=int, default=10)
    _common.add_json_option(parser)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = [bench(name, args.repeat) for name in args.models]
    _common.report(
        [
            "model",
            "te int8 portable ms",
            "te int8 + ORT ms",
            "ET int8 + XNNPACK ms",
            "te float + ORT ms",
            "eager float ms",
            "te+ORT / XNNPACK",
            "int8 .pte B",
            "float .pte B",
            "rel err vs PyTorch int8",
        ],
        rows,
        args.json,
    )


if __name__ == "__main__":
    main()
