"""Write-backs of state values that compute alike copy one value (`MutableStatePass`).

A transformers static cache gives each decoder layer a position counter overwritten with the
same ``start + tokens``; the program computes that value once and copies it into each counter.
Every step is compared with eager (the counters' old values feed the output), on torchedge's
runtime and on the real ExecuTorch's.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from torchedge.exir import ExecutorchBackendConfig, to_edge
from torchedge.runtime import Runtime

LAYERS = 3


class LayerCounters(torch.nn.Module):
    def __init__(self):
        super().__init__()
        for i in range(LAYERS):  # distinct initial values: the buffers stay apart, only the value is shared
            self.register_buffer(f"seen{i}", torch.tensor([10 * i], dtype=torch.int64))
        self.register_buffer("steps", torch.tensor([3], dtype=torch.int64))

    def forward(self, position, x):
        weights = sum((i + 1) * getattr(self, f"seen{i}") for i in range(LAYERS))
        out = x * (weights + self.steps)
        start = position[:1]
        for i in range(LAYERS):
            getattr(self, f"seen{i}").copy_(start + x.shape[0])
        self.steps.add_(1)  # reads its own old value: a write of its own
        return out


STEPS = [(torch.tensor([p, p + 1]), torch.full((2,), float(p + 1))) for p in (0, 2, 7)]


def _eager():
    model = LayerCounters()
    with torch.no_grad():
        return [model(*step).numpy() for step in STEPS]


def _program(reinplace: bool):
    exported = torch.export.export(copy.deepcopy(LayerCounters()), STEPS[0])
    return to_edge(exported).to_executorch(ExecutorchBackendConfig(run_reinplace_pass=reinplace))


@pytest.mark.parametrize("reinplace", [True, False], ids=["in_place", "write_back"])
def test_the_counters_share_one_value_and_keep_their_state(reinplace):
    program = _program(reinplace)
    graph = program.graph_module().graph
    copies = [n for n in graph.nodes if n.target is torch.ops.aten.copy_.default]
    counters = [c for c in copies if c.args[0].name.startswith("b_seen")]
    assert len(counters) == LAYERS and len(copies) == LAYERS + (0 if reinplace else 1)
    assert len({c.args[1] for c in counters}) == 1  # one value, computed once
    method = Runtime.get().load_program(program.buffer).load_method("forward")
    for step, ((position, x), want) in enumerate(zip(STEPS, _eager())):
        got = method.execute([position.numpy(), x.numpy()])[0]
        np.testing.assert_array_equal(got, want, err_msg=f"step {step}")


def test_executorch_runs_the_program_with_the_shared_value():
    from executorch.runtime import Runtime as ETRuntime

    method = ETRuntime.get().load_program(_program(True).buffer).load_method("forward")
    for step, ((position, x), want) in enumerate(zip(STEPS, _eager())):
        got = method.execute([position.clone(), x.clone()])[0].numpy()
        np.testing.assert_array_equal(got, want, err_msg=f"step {step}")
