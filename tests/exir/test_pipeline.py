"""The pipeline is one declared list per stage of compilation: docs/architecture.md shows exactly
those lists, the runner names the stage that breaks the IR, and TORCHEDGE_DEBUG=1 logs every stage."""

import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from torchedge.exir import pipeline, to_edge
from torchedge.exir.pipeline import EDGE_STAGES, EXECUTORCH_STAGES, MethodState, Stage, describe, run_stages
from torchedge.exir.verification import IRVerificationError, verify_edge

ARCHITECTURE = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"
_SECTION = re.compile(r"<!-- pipeline:(\w+) -->\n(.*?)<!-- /pipeline -->", re.S)


def test_architecture_page_lists_the_declared_stages():
    sections = {name: body.strip() for name, body in _SECTION.findall(ARCHITECTURE.read_text())}
    assert sections == {"EDGE_STAGES": describe(EDGE_STAGES), "EXECUTORCH_STAGES": describe(EXECUTORCH_STAGES)}


def test_stage_names_are_unique():
    for stages in (EDGE_STAGES, EXECUTORCH_STAGES):
        names = [s.name for s in stages]
        assert len(names) == len(set(names))


class Small(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) + 1


def _breaks_the_ir(state: MethodState) -> None:
    for node in state.graph.graph.nodes:  # in-place operators are not Edge operators
        if node.op == "call_function" and node.target is torch.ops.aten.relu.default:
            node.target = torch.ops.aten.relu_.default


def test_runner_names_the_stage_that_breaks_the_ir():
    edge = to_edge(torch.export.export(Small(), (torch.randn(3),)))
    state = MethodState("forward", edge.compile_config, program=edge.exported_program())
    broken = Stage("Breaker", "breaks the IR", _breaks_the_ir, verify_edge)
    with pytest.raises(IRVerificationError, match="method 'forward', after Breaker: "):
        run_stages([broken], state)


def test_debug_logging_reports_every_stage(caplog):
    with caplog.at_level(logging.DEBUG, logger=pipeline.logger.name):
        to_edge(torch.export.export(Small(), (torch.randn(3),))).to_executorch()
    logged = [r.getMessage() for r in caplog.records]
    for stage in (*EDGE_STAGES, *EXECUTORCH_STAGES):
        assert any(f"method forward: {stage.name} (" in m for m in logged), stage.name


def test_torchedge_debug_prints_stages_to_stderr():
    code = (
        "import torch; from torchedge.exir import to_edge\n"
        "class M(torch.nn.Module):\n    def forward(self, x): return x * 2\n"
        "to_edge(torch.export.export(M(), (torch.randn(2),))).to_executorch()"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "TORCHEDGE_DEBUG": "1"},
    )
    assert result.returncode == 0, result.stderr
    assert "method forward: fold_constants (" in result.stderr
    assert "method forward: MemoryPlanningPass (" in result.stderr
