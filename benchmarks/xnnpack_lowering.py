"""torchedge's XNNPACK lowering vs ExecuTorch's, both run on ExecuTorch's runtime, one thread.

For each model: the program torchedge's `XnnpackPartitioner` lowers and the one ExecuTorch's
`XnnpackPartitioner` lowers, each compiled in a process of its own (export excluded:
`to_edge_transform_and_lower` + `to_executorch`), which reports its compile seconds and its peak
resident memory during the compile (Linux's ``VmHWM``, reset before it) and how much that is
above the resident memory before it. Then,
in this process: the operators each program leaves outside delegates (kernel calls) and its
delegate count; milliseconds per run on ExecuTorch's runtime (XNNPACK itself at one thread;
medians of alternating rounds) and their ratio; the largest error (relative to the reference's
largest magnitude) of torchedge's program against eager and against ExecuTorch's program on
ExecuTorch's runtime; and the other direction, torchedge's runtime (its NumPy interpreter of
XNNPACK payloads) running torchedge's program and ExecuTorch's, against eager, with its
milliseconds per run of torchedge's program.

Models: the built-in ones (`torchedge.models`) and ``causal_lm``, a transformers Llama built
from a tiny config with random weights (logits of a 32-token prompt, no cache).
``--quantize`` names the recipes, one row per model and recipe (eager is then the quantized
model): ``fp32`` (the default), ``int8`` (PT2E, `XNNPACKQuantizer`, static per-channel),
``int8_per_tensor``, ``dynamic_int8`` (dynamic activations, per-channel weights), ``8da4w``
(torchao's int8 dynamic activations with int4 weights in groups of ``--group-size``). Without
model names, each recipe runs on the models it applies to (`DEFAULT_MODELS`). Where the model's
output is quantized (static int8: a dequantize makes the output), ``steps`` gives the largest
difference between the two programs on ExecuTorch's runtime in output quantization steps.
Usage: python benchmarks/xnnpack_lowering.py [model ...] [--quantize RECIPE ...] [--group-size N]
       [--repeat ROUNDS] [--json PATH]
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402  (sets the thread environment first)
import numpy as np  # noqa: E402
import torch  # noqa: E402

import torchedge.backends.xnnpack.runtime  # noqa: E402,F401  (registers XnnpackBackend)
from torchedge.models import load_model  # noqa: E402
from torchedge.runtime import Runtime  # noqa: E402
from torchedge.schema.program import DelegateCall, KernelCall  # noqa: E402
from torchedge.serialize import deserialize_pte  # noqa: E402

MODELS = ("mlp", "cnn", "mobilenet_v2", "resnet18", "vit", "bert", "llama", "causal_lm")
RECIPES = ("fp32", "int8", "int8_per_tensor", "dynamic_int8", "8da4w")
# PT2E quantizes llama's and causal_lm's index arithmetic (eager then fails); llama's 688 features do
# not split in groups of 32.
_STATIC = ("mlp", "cnn", "mobilenet_v2", "resnet18", "vit", "bert")
_DYNAMIC = ("mlp", "vit", "bert")
DEFAULT_MODELS = {
    "fp32": MODELS,
    "int8": _STATIC,
    "int8_per_tensor": _STATIC,
    "dynamic_int8": _DYNAMIC,
    "8da4w": ("mlp", "vit", "bert", "causal_lm"),
}
COMPILERS = ("torchedge", "executorch")


class _Logits(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids, use_cache=False).logits


def load(name: str):
    """``(model, inputs)``: a built-in model, or ``causal_lm`` (see the module's docstring)."""
    if name != "causal_lm":
        return load_model(name)
    from torchedge.models.causal_lm import tiny_causal_lm

    model = _Logits(tiny_causal_lm("llama")).eval()
    return model, (torch.randint(0, 512, (1, 32), generator=torch.Generator().manual_seed(0)),)


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


def prepared_model(name: str, recipe: str, group_size: int):
    model, inputs = load(name)
    model.eval()
    return quantize(model, inputs, recipe, group_size), inputs


def _lower(compiler: str, exported) -> bytes:
    if compiler == "torchedge":
        from torchedge.backends.xnnpack.aot import XnnpackPartitioner
        from torchedge.exir import to_edge_transform_and_lower
    else:
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
        from executorch.exir import to_edge_transform_and_lower
    return to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()]).to_executorch().buffer


def _status_mib(field: str) -> float:
    """A ``/proc/self/status`` memory field (``VmRSS``, ``VmHWM``) in MiB. ``ru_maxrss`` would not
    do: a child process inherits its parent's."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024  # kB
    raise RuntimeError(f"/proc/self/status has no {field}")


def compile_only(compiler: str, name: str, recipe: str, group_size: int, out: Path) -> None:
    """Runs in a process of its own: lowers the model, writes the program to ``out`` and prints
    ``{"seconds", "peak_mib", "added_mib"}``."""
    model, inputs = prepared_model(name, recipe, group_size)
    exported = torch.export.export(model, tuple(inputs))
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM back to the resident size now
    before = _status_mib("VmRSS")
    start = time.perf_counter()
    buffer = _lower(compiler, exported)
    seconds = time.perf_counter() - start
    peak = _status_mib("VmHWM")
    out.write_bytes(buffer)
    print(json.dumps({"seconds": seconds, "peak_mib": peak, "added_mib": peak - before}))


def compile_in_subprocess(compiler: str, name: str, recipe: str, group_size: int) -> tuple[bytes, dict]:
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / f"{compiler}.pte"
        command = [sys.executable, __file__, "--compile-only", compiler, name]
        command += ["--quantize", recipe, "--group-size", str(group_size), "--out", str(out)]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{compiler} failed to lower {name}:\n{done.stderr[-3000:]}")
        return out.read_bytes(), json.loads(done.stdout.strip().splitlines()[-1])


def _calls(buffer: bytes) -> tuple[int, int]:
    plan = deserialize_pte(buffer).program.execution_plan[0]
    kinds = [type(i.instr_args) for chain in plan.chains for i in chain.instructions]
    return kinds.count(KernelCall), kinds.count(DelegateCall)


def output_step(model) -> float | None:
    """The quantization step of a PT2E model's (first) output, where a dequantize makes it."""
    graph = getattr(model, "graph", None)
    if graph is None:
        return None
    result = graph.output_node().args[0]
    node = (result if isinstance(result, (tuple, list)) else (result,))[0]
    if not isinstance(node, torch.fx.Node) or "dequantize_per_tensor" not in str(node.target):
        return None
    scale = node.args[1]
    if isinstance(scale, torch.fx.Node):  # a scale held as an attribute
        scale = getattr(model, str(scale.target))
    return float(scale)


def _error(got, want) -> float:
    want = np.asarray(want, np.float64)
    scale = max(float(np.max(np.abs(want))), 1e-30)
    return float(np.max(np.abs(np.asarray(got, np.float64) - want))) / scale


def bench(name: str, repeat: int, recipe: str = "fp32", group_size: int = 32) -> list:
    import executorch.kernels.quantized  # noqa: F401  (quantize / dequantize steps left outside delegates)
    from executorch.runtime import Runtime as ETRuntime

    ours, ours_stats = compile_in_subprocess("torchedge", name, recipe, group_size)
    theirs, theirs_stats = compile_in_subprocess("executorch", name, recipe, group_size)
    model, inputs = prepared_model(name, recipe, group_size)
    with torch.no_grad():
        want = model(*inputs)
    want = (want if isinstance(want, (tuple, list)) else (want,))[0].numpy()

    programs = {"torchedge": ETRuntime.get().load_program(ours), "executorch": ETRuntime.get().load_program(theirs)}
    methods = {k: p.load_method("forward") for k, p in programs.items()}
    on_et = {k: m.execute(list(inputs))[0].numpy() for k, m in methods.items()}
    arrays = [i.numpy() for i in inputs]
    te_methods = {
        "torchedge": Runtime.get(num_threads=1).load_program(ours).load_method("forward"),
        "executorch": Runtime.get(num_threads=1).load_program(theirs).load_method("forward"),
    }
    on_te = {k: m.execute(arrays)[0] for k, m in te_methods.items()}
    times = _common.interleaved_seconds({k: (lambda m=m: m.execute(list(inputs))) for k, m in methods.items()}, repeat)
    te_seconds = _common.median_seconds(lambda: te_methods["torchedge"].execute(arrays), max(3, repeat // 4))
    (ours_kernels, ours_delegates), (theirs_kernels, theirs_delegates) = _calls(ours), _calls(theirs)
    label = name if recipe == "fp32" else f"{name} ({recipe}{group_size if recipe == '8da4w' else ''})"
    step = output_step(model)
    steps = "-" if step is None else f"{np.max(np.abs(on_et['torchedge'] - on_et['executorch'])) / step:.2f}"
    return [
        label,
        f"{ours_kernels} / {ours_delegates}",
        f"{theirs_kernels} / {theirs_delegates}",
        f"{times['torchedge'] * 1e3:.3f}",
        f"{times['executorch'] * 1e3:.3f}",
        f"{times['torchedge'] / times['executorch']:.2f}",
        f"{_error(on_et['torchedge'], want):.1e}",
        f"{_error(on_et['torchedge'], on_et['executorch']):.1e}",
        steps,
        f"{_error(on_et['executorch'], want):.1e}",
        f"{_error(on_te['torchedge'], want):.1e}",
        f"{_error(on_te['executorch'], want):.1e}",
        f"{te_seconds * 1e3:.2f}",
        f"{ours_stats['seconds']:.2f}",
        f"{theirs_stats['seconds']:.2f}",
        f"{ours_stats['peak_mib']:.0f} (+{ours_stats['added_mib']:.0f})",
        f"{theirs_stats['peak_mib']:.0f} (+{theirs_stats['added_mib']:.0f})",
    ]


HEADERS = [
    "model",
    "outside/delegates (torchedge)",
    "outside/delegates (ExecuTorch)",
    "ET runtime ms (torchedge .pte)",
    "ET runtime ms (ExecuTorch .pte)",
    "ratio",
    "err vs eager (torchedge .pte, ET runtime)",
    "err vs ExecuTorch .pte (ET runtime)",
    "steps vs ExecuTorch .pte (ET runtime)",
    "err vs eager (ExecuTorch .pte, ET runtime)",
    "err vs eager (torchedge .pte, torchedge runtime)",
    "err vs eager (ExecuTorch .pte, torchedge runtime)",
    "torchedge runtime ms (torchedge .pte)",
    "compile s (torchedge)",
    "compile s (ExecuTorch)",
    "compile peak MiB (torchedge)",
    "compile peak MiB (ExecuTorch)",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*")
    parser.add_argument("--quantize", choices=RECIPES, nargs="+", default=["fp32"])
    parser.add_argument("--group-size", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--compile-only", choices=COMPILERS, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    _common.add_json_option(parser)
    args = parser.parse_args()
    _common.one_thread_everywhere()
    if args.compile_only:
        compile_only(args.compile_only, args.models[0], args.quantize[0], args.group_size, args.out)
        return
    rows = []
    for recipe in args.quantize:
        for name in args.models or DEFAULT_MODELS[recipe]:
            rows.append(bench(name, args.repeat, recipe, args.group_size))
            print(" | ".join(rows[-1]), flush=True)
    _common.report(HEADERS, rows, args.json)


if __name__ == "__main__":
    main()
