"""torchedge's NumPy interpreter of XNNPACK delegates vs torchedge's portable path vs the real
ExecuTorch running the same XNNPACK program, one thread.

For each model: the program ExecuTorch's `XnnpackPartitioner` lowers, run by torchedge (the
``XnnpackBackend`` interpreter) and by ExecuTorch (XNNPACK itself, its thread pool at one
thread); and torchedge's own portable program (`to_edge(...).to_executorch()`) run by torchedge,
also compiled without `narrow_rows` ("all rows": ExecuTorch's lowering computes a classifier's
last block for every token, torchedge's program for the one its head reads), so that the
``interp/all rows`` ratio compares the same arithmetic; and the program torchedge's own
`XnnpackPartitioner` lowers (``te XNNPACK``: the same model, compiled by torchedge, `narrow_rows`
included), run by the same interpreter. Prints milliseconds per run (medians of alternating
rounds), the ratios and the interpreter's relative error against ExecuTorch. ``--no-fold`` loads
torchedge's methods with ``fold=False`` (steps reading only constants then run at every run).
Usage: python benchmarks/xnnpack.py [model ...] [--repeat ROUNDS] [--no-fold]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402  (sets the thread environment first)
import numpy as np  # noqa: E402
import torch  # noqa: E402

import torchedge.backends.xnnpack.runtime  # noqa: E402,F401  (registers XnnpackBackend)
from torchedge.exir import EdgeCompileConfig, to_edge  # noqa: E402
from torchedge.models import load_model  # noqa: E402
from torchedge.runtime import Runtime  # noqa: E402


def bench(name: str, repeat: int, fold: bool = True) -> list:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from executorch.runtime import Runtime as ETRuntime

    from torchedge.backends.xnnpack.aot import XnnpackPartitioner as TorchedgePartitioner
    from torchedge.exir import to_edge_transform_and_lower as te_lower

    model, inputs = load_model(name)
    lowered = to_edge_transform_and_lower(
        torch.export.export(model, inputs), partitioner=[XnnpackPartitioner()]
    ).to_executorch()
    portable = to_edge(torch.export.export(model, inputs)).to_executorch()
    ours_lowered = te_lower(torch.export.export(model, inputs), partitioner=[TorchedgePartitioner()])
    all_rows = to_edge(torch.export.export(model, inputs), compile_config=EdgeCompileConfig(narrow_rows=False))

    runtime = Runtime.get(num_threads=1)
    interpreter = runtime.load_program(lowered.buffer).load_method("forward", fold=fold)
    ours = runtime.load_program(portable.buffer).load_method("forward", fold=fold)
    ours_all_rows = runtime.load_program(all_rows.to_executorch().buffer).load_method("forward", fold=fold)
    ours_xnnpack = runtime.load_program(ours_lowered.to_executorch().buffer).load_method("forward", fold=fold)
    et_method = ETRuntime.get().load_program(lowered.buffer).load_method("forward")
    np_inputs = [t.numpy() for t in inputs]

    t = _common.interleaved_seconds(
        {
            "interpreter": lambda: interpreter.execute(np_inputs),
            "portable": lambda: ours.execute(np_inputs),
            "all rows": lambda: ours_all_rows.execute(np_inputs),
            "te xnnpack": lambda: ours_xnnpack.execute(np_inputs),
            "et": lambda: et_method.execute(list(inputs)),
        },
        repeat,
    )
    got, want = interpreter.execute(np_inputs)[0], et_method.execute(list(inputs))[0].numpy()
    err = float(np.max(np.abs(got - want)) / max(float(np.max(np.abs(want))), 1e-12))
    return [
        name,
        f"{t['interpreter'] * 1e3:.2f}",
        f"{t['portable'] * 1e3:.2f}",
        f"{t['et'] * 1e3:.2f}",
        f"{t['interpreter'] / t['portable']:.2f}",
        f"{t['interpreter'] / t['et']:.1f}",
        f"{t['all rows'] * 1e3:.2f}",
        f"{t['interpreter'] / t['all rows']:.2f}",
        f"{t['te xnnpack'] * 1e3:.2f}",
        f"{t['te xnnpack'] / t['portable']:.2f}",
        f"{err:.1e}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["mlp", "cnn", "mobilenet_v2"])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--no-fold", action="store_true", help="run steps reading only constants at every run")
    _common.add_json_option(parser)
    args = parser.parse_args()
    _common.one_thread_everywhere()
    rows = [bench(name, args.repeat, not args.no_fold) for name in args.models]
    _common.report(
        [
            "model",
            "interpreter ms",
            "portable ms",
            "ET+XNNPACK ms",
            "interp/portable",
            "interp/ET",
            "portable all rows ms",
            "interp/all rows",
            "te XNNPACK ms",
            "te XNNPACK/portable",
            "rel err",
        ],
        rows,
        args.json,
    )


if __name__ == "__main__":
    main()
