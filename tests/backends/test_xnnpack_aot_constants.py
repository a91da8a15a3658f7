"""ExecuTorch runs torchedge's XNNPACK program loaded from a file: its constants are named data
(`test_xnnpack_aot.test_constants_live_in_the_programs_named_data`), not payload bytes, which
ExecuTorch frees once XNNPACK is set up while XNNPACK keeps pointers to element-wise constant
operands (a program loaded from a file crashed)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from torchedge.backends.xnnpack.aot import XnnpackPartitioner
from torchedge.exir import to_edge_transform_and_lower

pytest.importorskip("executorch.runtime")


class _ScaleThenProject(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.randn(64))
        self.project = torch.nn.Linear(64, 32)

    def forward(self, x):
        return self.project(self.scale * x + 1.0)


def _lowered(model, x) -> bytes:
    ep = torch.export.export(model, (x,))
    return to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch().buffer


def test_executorch_runs_the_program_loaded_from_a_file(tmp_path):
    torch.manual_seed(0)
    model, x = _ScaleThenProject().eval(), torch.randn(2, 5, 64)
    path = tmp_path / "scale.pte"
    path.write_bytes(_lowered(model, x))
    np.save(tmp_path / "x.npy", x.numpy())
    script = textwrap.dedent(
        f"""
        import numpy as np, torch
        from executorch.runtime import Runtime
        method = Runtime.get().load_program({str(path)!r}).load_method("forward")
        x = torch.from_numpy(np.load({str(tmp_path / "x.npy")!r}))
        np.save({str(tmp_path / "out.npy")!r}, method.execute([x])[0].numpy())
        """
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]  # a freed constant crashed it with SIGSEGV
    with torch.no_grad():
        want = model(x).numpy()
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), want, rtol=1e-5, atol=1e-5)
