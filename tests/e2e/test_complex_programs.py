"""Programs with complex tensors (ExecuTorch's COMPLEX64/COMPLEX128) compiled and run against eager:
spectral filtering with a complex constant, complex inputs and outputs, eigenvalues."""

from __future__ import annotations

import numpy as np
import torch

from torchedge.exir import to_edge
from torchedge.runtime import Runtime


class SpectralFilter(torch.nn.Module):
    """Filters a signal in the frequency domain: rfft, times a learned complex response, irfft."""

    def __init__(self, n: int = 16):
        super().__init__()
        response = torch.polar(torch.linspace(1.0, 0.1, n // 2 + 1), torch.linspace(0.0, 3.0, n // 2 + 1))
        self.register_buffer("response", response)

    def forward(self, x):
        spectrum = torch.fft.rfft(x, dim=-1) * self.response
        return torch.fft.irfft(spectrum, n=x.shape[-1], dim=-1), spectrum.abs()


class ComplexInOut(torch.nn.Module):
    def forward(self, z, w):
        product = z * w.conj() + torch.exp(1j * z.real)
        return product, torch.view_as_real(product).sum(-1), torch.fft.fft2(product, norm="ortho")


class Eigenvalues(torch.nn.Module):
    def forward(self, a):
        return torch.linalg.eigvals(a @ a.mT - a)


def _run(module: torch.nn.Module, *inputs: torch.Tensor) -> list[np.ndarray]:
    program = to_edge(torch.export.export(module, inputs)).to_executorch()
    method = Runtime.get().load_program(program.buffer).load_method("forward")
    return method.execute([t.numpy() for t in inputs])


def _assert_matches_eager(module, *inputs, rtol=1e-5, atol=1e-5):
    expected = module(*inputs)
    got = _run(module, *inputs)
    assert len(got) == len(expected)
    for g, want in zip(got, expected):
        assert g.dtype == want.numpy().dtype and g.shape == tuple(want.shape)
        np.testing.assert_allclose(g, want.numpy(), rtol=rtol, atol=atol)


def test_spectral_filter_with_a_complex_constant_matches_eager():
    torch.manual_seed(0)
    _assert_matches_eager(SpectralFilter(), torch.randn(3, 16))


def test_complex_inputs_and_outputs_match_eager():
    torch.manual_seed(0)
    z, w = torch.randn(4, 6, dtype=torch.complex64), torch.randn(4, 6, dtype=torch.complex64)
    _assert_matches_eager(ComplexInOut(), z, w)


def test_complex128_program_matches_eager():
    torch.manual_seed(0)
    z, w = torch.randn(3, 5, dtype=torch.complex128), torch.randn(5, dtype=torch.complex128)
    _assert_matches_eager(ComplexInOut(), z, w, rtol=1e-12, atol=1e-12)


def test_eigenvalues_of_a_real_matrix_match_eager():
    a = torch.tensor([[2.0, -1.0, 0.0], [1.0, 2.0, 0.5], [0.0, 0.3, 5.0]])
    expected = np.sort_complex(torch.linalg.eigvals(a @ a.mT - a).numpy())
    (got,) = _run(Eigenvalues(), a)
    assert got.dtype == np.complex64
    np.testing.assert_allclose(np.sort_complex(got), expected, rtol=1e-5, atol=1e-5)
