"""Planned activation memory: torchedge vs the real ExecuTorch, and each one's distance to its lower bound.

Usage: python benchmarks/memory.py [model ...]   (default: the spine models plus resnet18 and vit)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402
import torch  # noqa: E402

from torchedge.exir import ExecutorchBackendConfig, to_edge  # noqa: E402
from torchedge.exir.memory_planning import ALGORITHMS  # noqa: E402
from torchedge.exir.memory_planning.planning_pass import MemoryPlanningPass  # noqa: E402
from torchedge.models import load_model  # noqa: E402
from torchedge.runtime.memory_report import memory_report  # noqa: E402
from torchedge.serialize import deserialize_pte  # noqa: E402

MODELS = ["mlp", "cnn", "mobilenet_v2", "llama", "resnet18", "vit"]


def _planned(buffer: bytes) -> tuple[int, int]:
    """(planned bytes, lower bound) read back from a .pte."""
    (usage,) = memory_report(deserialize_pte(buffer).program.execution_plan[0])
    return usage.size, usage.lower_bound


def measure(name: str) -> list:
    from executorch.exir import to_edge as et_to_edge

    model, inputs = load_model(name)
    edge = to_edge(torch.export.export(model, inputs))
    ours, ours_lb = _planned(edge.to_executorch().buffer)
    et_greedy, _ = _planned(
        edge.to_executorch(
            ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(ALGORITHMS["executorch_greedy"]))
        ).buffer
    )
    et, et_lb = _planned(et_to_edge(torch.export.export(model, inputs)).to_executorch().buffer)
    return [
        name,
        f"{ours:,}",
        f"{et:,}",
        f"{ours / et:.3f}",
        f"{ours / ours_lb:.3f}",
        f"{et / et_lb:.3f}",
        f"{ours_lb:,}",
        f"{et_lb:,}",
        f"{et_greedy:,}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=MODELS)
    _common.add_json_option(parser)
    args = parser.parse_args()
    rows = [measure(name) for name in args.models]
    _common.report(
        [
            "model",
            "torchedge B",
            "ExecuTorch B",
            "te/ET",
            "te/te-LB",
            "ET/ET-LB",
            "te lower bound",
            "ET lower bound",
            "ET algo on te graph",
        ],
        rows,
        args.json,
    )


if __name__ == "__main__":
    main()
