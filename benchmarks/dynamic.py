"""Dynamic shapes: one program exported with a `Dim` range, run at several sizes.

For each size: torchedge's dynamic program vs torchedge compiled statically for that size
(the cost of resizing), vs the real ExecuTorch (portable) running its own dynamic export of
the same model, vs PyTorch eager; all at one thread, sides timed in alternating rounds.
Also prints planned bytes of both dynamic programs (both plan for the upper bound).

Usage: python benchmarks/dynamic.py [llama|cnn ...] [--repeat ROUNDS]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402  (sets the thread environment first)
import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.export import Dim  # noqa: E402

from torchedge.devtools.dynamic_inputs import resize_along  # noqa: E402
from torchedge.exir import to_edge  # noqa: E402
from torchedge.models import load_model  # noqa: E402
from torchedge.runtime import Runtime  # noqa: E402

# model -> (dynamic dim of input 0, Dim, sizes to run at)
CASES = {"llama": (1, Dim("seq", min=2, max=128), [8, 32, 128]), "cnn": (0, Dim("batch", min=1, max=16), [1, 4, 16])}


def _load(buffer):
    return Runtime.get().load_program(buffer).load_method("forward")


def bench(name: str, rounds: int) -> list[list]:
    from executorch.exir import to_edge as et_to_edge
    from executorch.runtime import Runtime as ETRuntime

    dim, bound, sizes = CASES[name]
    model, inputs = load_model(name)
    dims = ({dim: bound},)
    ours = to_edge(torch.export.export(model, inputs, dynamic_shapes=dims)).to_executorch()
    theirs = et_to_edge(torch.export.export(model, inputs, dynamic_shapes=dims)).to_executorch()
    dynamic, et_program = _load(ours.buffer), ETRuntime.get().load_program(theirs.buffer)
    et_method = et_program.load_method("forward")
    rows = []
    for size in sizes:
        x = (resize_along(inputs[0], dim, size),)
        static = _load(to_edge(torch.export.export(model, x)).to_executorch().buffer)
        np_x = [t.numpy() for t in x]
        with torch.no_grad():
            ref = model(*x).numpy()
        err = float(np.max(np.abs(dynamic.execute(np_x)[0] - ref)) / np.max(np.abs(ref)))
        t = _common.interleaved_seconds(
            {
                "dynamic": lambda np_x=np_x: dynamic.execute(np_x),
                "static": lambda static=static, np_x=np_x: static.execute(np_x),
                "et": lambda x=x: et_method.execute(list(x)),
                "eager": torch.no_grad()(lambda x=x: model(*x)),
            },
            rounds,
        )
        rows.append(
            [
                name,
                size,
                f"{t['dynamic'] * 1e3:.2f}",
                f"{t['static'] * 1e3:.2f}",
                f"{t['et'] * 1e3:.2f}",
                f"{t['eager'] * 1e3:.2f}",
                f"{t['dynamic'] / t['static']:.2f}",
                f"{t['dynamic'] / t['et']:.3f}",
                f"{t['dynamic'] / t['eager']:.2f}",
                f"{err:.1e}",
            ]
        )
    ours_mem = sum(ours.program.execution_plan[0].non_const_buffer_sizes)
    et_mem = sum(theirs.executorch_program.execution_plan[0].non_const_buffer_sizes)
    print(f"{name}: planned bytes torchedge {ours_mem:,} vs ExecuTorch {et_mem:,} ({ours_mem / et_mem:.2f})")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=list(CASES))
    parser.add_argument("--repeat", type=int, default=10)
    _common.add_json_option(parser)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = [row for name in args.models for row in bench(name, args.repeat)]
    _common.report(
        [
            "model",
            "size",
            "te dynamic ms",
            "te static ms",
            "ET dynamic ms",
            "eager ms",
            "dynamic/static",
            "te/ET",
            "te/eager",
            "rel err",
        ],
        rows,
        args.json,
    )


if __name__ == "__main__":
    main()
