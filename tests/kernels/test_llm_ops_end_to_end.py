"""A program that ExecuTorch's own compiler builds with its LLM custom operators (a KV cache
updated with ``llama::update_cache`` and read by ``llama::custom_sdpa``, or both at once with
``llama::sdpa_with_kv_cache``) runs on torchedge as on ExecuTorch, step after step."""

import numpy as np
import pytest
import torch

pytest.importorskip("executorch.runtime")

import executorch.extension.llm.custom_ops.custom_ops  # noqa: E402, F401
from executorch.exir import EdgeCompileConfig  # noqa: E402
from executorch.exir import to_edge as executorch_to_edge  # noqa: E402
from executorch.runtime import Runtime as ExecuTorchRuntime  # noqa: E402

from tests.conftest import executorch_run  # noqa: E402
from torchedge.runtime import Runtime  # noqa: E402

CACHE = (1, 8, 2, 4)  # [batch, max_seq, kv_heads, head_dim]
SHAPES = [(1, 2, 4, 4), (1, 2, 2, 4), (1, 2, 2, 4)]  # q (4 heads: grouped-query attention), k, v


def _start(pos: torch.Tensor) -> int:
    start = pos.item()
    torch._check(start >= 0)
    torch._check(start < CACHE[1] - 1)
    return start


class UpdateThenAttend(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("k_cache", torch.zeros(CACHE))
        self.register_buffer("v_cache", torch.zeros(CACHE))

    def forward(self, q, k, v, pos):
        start = _start(pos)
        torch.ops.llama.update_cache(k, self.k_cache, start)
        torch.ops.llama.update_cache(v, self.v_cache, start)
        return torch.ops.llama.custom_sdpa(q, self.k_cache, self.v_cache, start, None, 0.0, True)


class SdpaWithKvCache(UpdateThenAttend):
    def forward(self, q, k, v, pos):
        start = _start(pos)
        return torch.ops.llama.sdpa_with_kv_cache(
            q, k, v, self.k_cache, self.v_cache, start, q.shape[1], None, 0.0, True
        )


def _build(model: torch.nn.Module) -> bytes:
    q, k, v = (torch.randn(shape) for shape in SHAPES)  # distinct tensors: export must not alias k and v
    exported = torch.export.export(model.eval(), (q, k, v, torch.tensor([0])))
    edge = executorch_to_edge(exported, compile_config=EdgeCompileConfig(_check_ir_validity=False))
    return edge.to_executorch().buffer


@pytest.mark.parametrize("model", [UpdateThenAttend, SdpaWithKvCache])
def test_executorch_built_kv_cache_program_runs_on_torchedge(model):
    buffer = _build(model())
    generator = torch.Generator().manual_seed(0)
    steps = [[*(torch.randn(shape, generator=generator) for shape in SHAPES), torch.tensor([p])] for p in (0, 2, 4)]
    reference = model().eval()
    executorch_method = ExecuTorchRuntime.get().load_program(buffer).load_method("forward")
    torchedge_method = Runtime.get().load_program(buffer).load_method("forward")
    for step in steps:  # the caches carry over from step to step
        want = executorch_method.execute(step)[0].numpy()
        got = torchedge_method.execute([t.numpy() for t in step])[0]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got, reference(*step).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_one_step_matches_conftest_runner():
    buffer = _build(UpdateThenAttend())
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal(shape).astype(np.float32) for shape in SHAPES] + [np.array([0])]
    want = executorch_run(buffer, inputs)
    got = Runtime.get().load_program(buffer).load_method("forward").execute(inputs)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
