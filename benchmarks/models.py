"""Spine models: torchedge vs PyTorch eager vs the real ExecuTorch (portable), in one run.

Prints latency (medians; sides timed in alternating rounds, each ratio the median of the
rounds' ratios; one thread unless --threads: torchedge's kernels and eager get that many,
ExecuTorch's portable kernels run on one) of the default program (runs on ExecuTorch too; loaded
as users load it, fused at load, and with ``fuse=False``, every instruction as written) and of
the one with torchedge's fused kernels (``fuse_kernels=True``), ratios, planned memory bytes and
`.pte` sizes. ``--load N`` keeps N other processes busy meanwhile (a machine someone else
is using).
Usage: python benchmarks/models.py [model ...] [--repeat ROUNDS] [--threads N] [--load N]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402  (sets the thread environment first)
import numpy as np  # noqa: E402
import torch  # noqa: E402

from torchedge.exir import ExecutorchBackendConfig, to_edge  # noqa: E402
from torchedge.models import MODEL_NAMES, load_model  # noqa: E402
from torchedge.runtime import Runtime  # noqa: E402


def bench(name: str, repeat: int, threads: int) -> list:
    from executorch.exir import to_edge as et_to_edge
    from executorch.runtime import Runtime as ETRuntime

    model, inputs = load_model(name)
    exported = torch.export.export(model, inputs)
    edge = to_edge(exported)  # to_executorch lowers a copy of each method: one edge program serves both
    ours = edge.to_executorch()
    fused = edge.to_executorch(ExecutorchBackendConfig(fuse_kernels=True))
    theirs = et_to_edge(torch.export.export(model, inputs)).to_executorch()

    runtime = Runtime.get(num_threads=threads)
    method = runtime.load_program(ours.buffer).load_method("forward")
    unfused_method = runtime.load_program(ours.buffer).load_method("forward", fuse=False)
    fused_method = runtime.load_program(fused.buffer).load_method("forward")
    np_inputs = [t.numpy() for t in inputs]
    et_method = ETRuntime.get().load_program(theirs.buffer).load_method("forward")

    timings = _common.time_calls(
        {
            "ours": lambda: method.execute(np_inputs),
            "unfused": lambda: unfused_method.execute(np_inputs),
            "fused": lambda: fused_method.execute(np_inputs),
            "eager": torch.no_grad()(lambda: model(*inputs)),
            "et": lambda: et_method.execute(list(inputs)),
        },
        repeat,
        batch_seconds=0.005,
    )
    t_ours, t_fused, t_eager, t_et = (timings[side].p50 for side in ("ours", "fused", "eager", "et"))
    ratio = _common.paired_ratio

    ours_mem = sum(ours.program.execution_plan[0].non_const_buffer_sizes)
    et_mem = sum(theirs.executorch_program.execution_plan[0].non_const_buffer_sizes)
    with torch.no_grad():
        ref = model(*inputs).numpy()
    err = max(
        float(np.max(np.abs(m.execute(np_inputs)[0] - ref)) / np.max(np.abs(ref))) for m in (method, fused_method)
    )
    return [
        name,
        f"{t_ours * 1e3:.2f}",
        f"{t_fused * 1e3:.2f}",
        f"{t_eager * 1e3:.2f}",
        f"{t_et * 1e3:.2f}",
        f"{ratio(timings['ours'], timings['eager']):.2f}",
        f"{ratio(timings['unfused'], timings['eager']):.2f}",
        f"{ratio(timings['fused'], timings['eager']):.2f}",
        f"{ratio(timings['ours'], timings['et']):.3f}",
        f"{ours_mem:,}",
        f"{et_mem:,}",
        f"{ours_mem / et_mem:.2f}",
        f"{len(ours.buffer):,}",
        f"{len(theirs.buffer):,}",
        f"{err:.1e}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=list(MODEL_NAMES))
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1, help="threads of torchedge's kernels and of eager")
    parser.add_argument("--load", type=int, default=0, help="other busy processes while timing")
    _common.add_json_option(parser)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with _common.background_load(args.load):
        rows = [bench(name, args.repeat, args.threads) for name in args.models]
    _common.report(
        [
            "model",
            "torchedge ms",
            "te fused ms",
            "eager ms",
            "ExecuTorch ms",
            "te/eager",
            "unfused/eager",
            "fused/eager",
            "te/ET",
            "te planned B",
            "ET planned B",
            "te/ET mem",
            "te .pte B",
            "ET .pte B",
            "rel err",
        ],
        rows,
        args.json,
    )


if __name__ == "__main__":
    main()
