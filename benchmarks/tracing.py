"""What the event tracer costs: a method run untraced, traced (timings) and traced with every
intermediate output logged, in alternating rounds at one thread.

``--before SRC`` also times the untraced run with the torchedge found in SRC (for example a git
worktree of the commit before tracing existed: ``git worktree add /tmp/before <commit>`` then
``--before /tmp/before/src``) against this one, each in its own subprocess on the same `.pte`,
alternating three times (medians), so the untraced path is compared with the code it replaced.
Usage: python benchmarks/tracing.py [model ...] [--repeat ROUNDS] [--before SRC]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402  (sets the thread environment first)
import torch  # noqa: E402

from torchedge.exir import to_edge  # noqa: E402
from torchedge.models import load_model  # noqa: E402
from torchedge.runtime import Runtime  # noqa: E402

_BEFORE = """
import sys, numpy as np
sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[4])
import _common
from torchedge.runtime import Runtime
method = Runtime.get().load_program(sys.argv[2]).load_method("forward")
inputs = list(np.load(sys.argv[3]).values())
print(_common.interleaved_seconds({"before": lambda: method.execute(inputs)}, int(sys.argv[5]))["before"])
"""


def bench(name: str, repeat: int, before: str | None) -> list:
    model, inputs = load_model(name)
    program = to_edge(torch.export.export(model, inputs)).to_executorch()
    np_inputs = [t.numpy() for t in inputs]
    runtime = Runtime.get(num_threads=1)
    off = runtime.load_program(program.buffer).load_method("forward")
    timings = runtime.load_program(program.buffer, enable_etdump=True).load_method("forward")
    logged = runtime.load_program(program.buffer, enable_etdump=True, debug_buffer_size=1 << 30)
    intermediates = logged.load_method("forward")
    t = _common.interleaved_seconds(
        {
            "off": lambda: off.execute(np_inputs),
            "timings": lambda: timings.execute(np_inputs),
            "intermediates": lambda: intermediates.execute(np_inputs),
        },
        repeat,
    )
    row = [name, f"{t['off'] * 1e3:.2f}"]
    if before is not None:
        here = str(Path(__file__).resolve().parents[1] / "src")
        pairs = [[_before(src, program.buffer, np_inputs, repeat) for src in (before, here)] for _ in range(3)]
        t_before, t_now = (sorted(side)[1] for side in zip(*pairs))
        row += [f"{t_before * 1e3:.2f}", f"{t_now * 1e3:.2f}", f"{t_now / t_before:.3f}"]
    row += [f"{t['timings'] * 1e3:.2f}", f"{t['timings'] / t['off']:.2f}"]
    row += [f"{t['intermediates'] * 1e3:.2f}", f"{t['intermediates'] / t['off']:.2f}"]
    return row


def _before(src: str, pte: bytes, inputs: list, repeat: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        pte_path, inputs_path = os.path.join(tmp, "m.pte"), os.path.join(tmp, "inputs.npz")
        Path(pte_path).write_bytes(pte)
        import numpy as np

        np.savez(inputs_path, *inputs)
        here = str(Path(__file__).resolve().parent)
        command = [sys.executable, "-c", _BEFORE, src, pte_path, inputs_path, here, str(repeat)]
        return float(subprocess.run(command, check=True, capture_output=True, text=True).stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["mobilenet_v2", "llama"])
    parser.add_argument("--repeat", type=int, default=30, help="rounds of each side (default: 30)")
    parser.add_argument("--before", help="src folder of another torchedge: time its untraced run too")
    _common.add_json_option(parser)
    args = parser.parse_args()
    headers = ["model", "off ms"]
    if args.before:
        headers += ["before ms", "now ms", "now/before"]
    headers += ["timings ms", "timings/off", "intermediates ms", "intermediates/off"]
    _common.report(headers, [bench(name, args.repeat, args.before) for name in args.models], args.json)


if __name__ == "__main__":
    main()
