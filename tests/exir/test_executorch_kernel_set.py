"""A compile target naming ExecuTorch's kernel set gets programs ExecuTorch's runtime loads.

torchedge's own runtime has a ``linalg_vector_norm`` kernel and complex ``_to_copy``; ExecuTorch's
portable set has neither. `ExecutorchBackendConfig(kernel_set=...)` with ExecuTorch's names
decomposes the norm into abs/pow/sum/amax/amin/sqrt and writes complex copies as
``dim_order_ops::_to_dim_order_copy``, as ExecuTorch's own compiler does; the default target keeps
the direct kernel. Each program runs on ExecuTorch's runtime and on torchedge's, equal to eager.
"""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tests.conftest import executorch_run
from torchedge.exir import ExecutorchBackendConfig, to_edge
from torchedge.runtime import Runtime

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "executorch_kernel_names.json"
EXECUTORCH_KERNELS = json.loads(GOLDEN.read_text())["names"]


class Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def _x(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(sum(shape)))


CASES = {
    "norm_default": (lambda x: torch.linalg.vector_norm(x), (_x(3, 5),)),
    "norm_ord1_dim": (lambda x: torch.linalg.vector_norm(x, 1, dim=1), (_x(3, 5),)),
    "norm_inf_keepdim": (lambda x: torch.linalg.vector_norm(x, float("inf"), dim=0, keepdim=True), (_x(3, 5),)),
    "norm_neg_inf": (lambda x: torch.linalg.vector_norm(x, float("-inf"), dim=(0, 2)), (_x(2, 3, 4),)),
    "norm_ord0": (lambda x: torch.linalg.vector_norm(torch.relu(x), 0, dim=-1), (_x(4, 6),)),
    "norm_ord3": (lambda x: torch.linalg.vector_norm(x, 3.0, dim=1), (_x(3, 5),)),
    "norm_ord_half_dtype": (lambda x: torch.linalg.vector_norm(x, 0.5, dim=1, dtype=torch.float64), (_x(3, 5),)),
    "tensor_norm": (lambda x: x.norm(dim=-1, keepdim=True), (_x(2, 7),)),
    "normalize": (lambda x: F.normalize(x, dim=-1), (_x(4, 8),)),
    "normalize_p1": (lambda x: F.normalize(x, p=1.0, dim=0), (_x(4, 8),)),
    "cosine_similarity": (lambda x, y: F.cosine_similarity(x, y, dim=1), (_x(4, 8), _x(4, 9)[:, :8].contiguous())),
    "pairwise_distance": (lambda x, y: F.pairwise_distance(x, y), (_x(4, 8), _x(5, 8)[:4].contiguous())),
    "triplet_margin_loss": (
        lambda a, p, n: F.triplet_margin_loss(a, p, n),
        (_x(3, 6), _x(4, 6)[:3].contiguous(), _x(5, 6)[:3].contiguous()),
    ),
    "irfft": (lambda x: torch.fft.irfft(x), (_x(4, 5),)),
    "irfft_n": (lambda x: torch.fft.irfft(x, n=6, dim=0), (_x(4, 5),)),
    "irfft2": (lambda x: torch.fft.irfft2(x), (_x(3, 4, 5),)),
    "irfftn": (lambda x: torch.fft.irfftn(x), (_x(2, 3, 4),)),
}


def _compile(fn, args, kernel_set):
    exported = torch.export.export(Fn(fn).eval(), args)
    return to_edge(exported).to_executorch(ExecutorchBackendConfig(kernel_set=kernel_set)).buffer


def _close(outs, expected):
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert len(outs) == len(expected)
    for out, want in zip(outs, expected):
        np.testing.assert_allclose(np.asarray(out), want.numpy(), rtol=1e-5, atol=1e-5)
        assert np.asarray(out).dtype == want.numpy().dtype


@pytest.mark.parametrize("name", sorted(CASES))
def test_executorch_kernel_set_program_runs_on_executorch(name, has_executorch):
    if not has_executorch:
        pytest.skip("needs ExecuTorch's runtime")
    fn, args = CASES[name]
    buffer = _compile(fn, args, EXECUTORCH_KERNELS)
    assert b"linalg_vector_norm" not in buffer
    inputs = [a.numpy() for a in args]
    expected = fn(*args)
    _close(executorch_run(buffer, inputs), expected)
    _close(Runtime.get().load_program(buffer).load_method("forward").execute(inputs), expected)


def test_complex_copy_is_a_dim_order_copy_for_executorch():
    fn, args = CASES["irfft"]
    assert b"_to_dim_order_copy" in _compile(fn, args, EXECUTORCH_KERNELS)


def test_default_target_keeps_the_direct_kernels():
    fn, args = CASES["normalize"]
    buffer = _compile(fn, args, None)
    assert b"linalg_vector_norm" in buffer
    _close(Runtime.get().load_program(buffer).load_method("forward").execute([a.numpy() for a in args]), fn(*args))


def test_a_kernel_set_with_the_norm_keeps_it():
    fn, args = CASES["norm_ord3"]
    buffer = _compile(fn, args, [*EXECUTORCH_KERNELS, "aten::linalg_vector_norm.out"])
    assert b"linalg_vector_norm" in buffer
