"""A method run computes IEEE results (inf, nan) silently and leaves NumPy's error state as it was."""

import warnings

import numpy as np
import torch

from torchedge.exir import to_edge
from torchedge.kernels.portable import common
from torchedge.runtime import Runtime


class InfAndNan(torch.nn.Module):
    def forward(self, x):
        return x / torch.zeros_like(x), torch.log(x - 10)


def test_run_is_quiet_and_restores_error_state():
    x = torch.rand(3, 4)
    method = Runtime.get().load_program(to_edge(torch.export.export(InfAndNan(), (x,))).to_executorch().buffer)
    method = method.load_method()
    before = np.geterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any NumPy RuntimeWarning fails the test
        inf, nan = method.execute([x.numpy()])
    assert np.isinf(inf).all() and np.isnan(nan).all()
    assert np.geterr() == before and not getattr(common._RUN, "quiet", False)
    with warnings.catch_warnings():  # a kernel called outside a run still quiets itself
        warnings.simplefilter("error")
        with common.quiet():
            assert np.isinf(np.float32(1) / np.zeros(2, np.float32)).all()
