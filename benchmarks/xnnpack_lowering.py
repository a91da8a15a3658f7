"""torchedge's XNNPACK lowering vs ExecuTorch's, both run on ExecuTorch's runtime, one thread.

For each model: the program torchedge's `XnnpackPartitioner` lowers and the one ExecuTorch's
`XnnpackPartitioner` lowers; the operators each leaves outside delegates (kernel calls) and its
delegate count, compile seconds (export excluded: `to_edge_transform_and_lower` +
`to_executorch`), milliseconds per run on ExecuTorch's runtime (XNNPACK itself, its thread pool at
one thread; medians of alternating rounds), and the largest error of torchedge's program against
eager (relative to the output's largest magnitude) on ExecuTorch's runtime and on torchedge's.

``--quantize`` lowers a quantized model instead (eager is then the quantized model): ``int8``
(PT2E, `XNNPACKQuantizer`, static per-channel), ``int8_per_tensor``, ``dynamic_int8`` (dynamic
activations, per-channel weights), ``8da4w`` (torchao's int8 dynamic activations with int4
weights in groups of ``--group-size``).
Usage: python benchmarks/xnnpack_lowering.py [model ...] [--quantize RECIPE] [--group-size N]
       [--repeat ROUNDS] [--json PATH]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402  (sets the thread environment first)
import numpy as np  # noqa: E402
import torch  # noqa: E402

import torchedge.backends.xnnpack.runtime  # noqa: E402,F401  (registers XnnpackBackend)
from torchedge.backends.xnnpack.aot import XnnpackPartitioner  # noqa: E402
from torchedge.exir import to_edge_transform_and_lower  # noqa: E402
from torchedge.models import load_model  # noqa: E402
from torchedge.runtime import Runtime  # noqa: E402
from torchedge.schema.program import DelegateCall, KernelCall  # noqa: E402
from torchedge.serialize import deserialize_pte  # noqa: E402


def _calls(buffer: bytes) -> tuple[int, int]:
    plan = deserialize_pte(buffer).program.execution_plan[0]
    kinds = [type(i.instr_args) for chain in plan.chains for i in chain.instructions]
    return kinds.count(KernelCall), kinds.count(DelegateCall)


def _error(got, want) -> float:
    scale = max(float(np.max(np.abs(want))), 1e-30)
    return float(np.max(np.abs(np.asarray(got, np.float64) - want))) / scale


RECIPES = ("fp32", "int8", "int8_per_tensor", "dynamic_int8", "8da4w")


def quantize(model, inputs, recipe: str, group_size: int = 32):
    """``model`` quantized as ExecuTorch users do for ``recipe`` (see the module's docstring)."""
    if recipe == "fp32":
        return model
    if recipe == "8da4w":
        from torchao.quantization import quant_api
        from torchao.quantization.granularity import PerGroup

        config = quant_api.Int8DynamicActivationIntxWeightConfig(
            weight_dtype=torch.int4, weight_granularity=PerGroup(group_size)
        )
        quant_api.quantize_(model, config)
        return model
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    config = get_symmetric_quantization_config(
        is_per_channel=recipe != "int8_per_tensor", is_dynamic=recipe == "dynamic_int8"
    )
    prepared = prepare_pt2e(torch.export.export(model, tuple(inputs)).module(), XNNPACKQuantizer().set_global(config))
    prepared(*inputs)
    return convert_pt2e(prepared)


def bench(name: str, repeat: int, recipe: str = "fp32", group_size: int = 32) -> list:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner as ETX
    from executorch.exir import to_edge_transform_and_lower as et_lower
    from executorch.runtime import Runtime as ETRuntime

    model, inputs = load_model(name)
    model.eval()
    model = quantize(model, inputs, recipe, group_size)
    exported = torch.export.export(model, tuple(inputs))
    start = time.perf_counter()
    ours = to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()]).to_executorch().buffer
    ours_compile = time.perf_counter() - start
    exported = torch.export.export(model, tuple(inputs))
    start = time.perf_counter()
    theirs = et_lower(exported, partitioner=[ETX()]).to_executorch().buffer
    theirs_compile = time.perf_counter() - start

    with torch.no_grad():
        want = model(*inputs)
    want = (want if isinstance(want, (tuple, list)) else (want,))[0].numpy().astype(np.float64)
    methods = {
        "torchedge": ETRuntime.get().load_program(ours).load_method("forward"),
        "executorch": ETRuntime.get().load_program(theirs).load_method("forward"),
    }
    et_error = _error(methods["torchedge"].execute(list(inputs))[0].numpy(), want)
    te_method = Runtime.get(num_threads=1).load_program(ours).load_method("forward")
    te_error = _error(te_method.execute([i.numpy() for i in inputs])[0], want)
    times = _common.interleaved_seconds({k: (lambda m=m: m.execute(list(inputs))) for k, m in methods.items()}, repeat)
    (ours_kernels, ours_delegates), (theirs_kernels, theirs_delegates) = _calls(ours), _calls(theirs)
    label = name if recipe == "fp32" else f"{name} ({recipe}{group_size if recipe == '8da4w' else ''})"
    return [
        label,
        f"{ours_kernels} / {ours_delegates}",
        f"{theirs_kernels} / {theirs_delegates}",
        f"{times['torchedge'] * 1e3:.3f}",
        f"{times['executorch'] * 1e3:.3f}",
        f"{times['torchedge'] / times['executorch']:.2f}",
        f"{et_error:.1e}",
        f"{te_error:.1e}",
        f"{ours_compile:.2f}",
        f"{theirs_compile:.2f}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["mlp", "cnn"])
    parser.add_argument("--quantize", choices=RECIPES, default="fp32")
    parser.add_argument("--group-size", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=20)
    _common.add_json_option(parser)
    args = parser.parse_args()
    _common.one_thread_everywhere()
    rows = [bench(name, args.repeat, args.quantize, args.group_size) for name in args.models]
    _common.report(
        [
            "model",
            "outside/delegates (torchedge)",
            "outside/delegates (ExecuTorch)",
            "ET runtime ms (torchedge .pte)",
            "ET runtime ms (ExecuTorch .pte)",
            "ratio",
            "err vs eager (ET runtime)",
            "err vs eager (torchedge runtime)",
            "compile s (torchedge)",
            "compile s (ExecuTorch)",
        ],
        rows,
        args.json,
    )


if __name__ == "__main__":
    main()
