"""One .pte with several methods and constant methods, on both runtimes, both directions."""

import numpy as np
import torch

from tests.conftest import assert_matches, executorch_run, torchedge_run
from torchedge.exir import to_edge


class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 4)

    def forward(self, x):
        return torch.tanh(self.proj(x))


class Scaler(torch.nn.Module):
    def forward(self, x, y):
        return x * 3.0 + y, x.sum()


CONSTANTS = {"get_vocab_size": 4096, "get_scale": 0.5, "uses_cache": False}


def _programs():
    encoder, scaler = Encoder().eval(), Scaler().eval()
    enc_in = (torch.randn(2, 8),)
    sc_in = (torch.randn(3), torch.randn(3))
    eps = {"encode": torch.export.export(encoder, enc_in), "forward": torch.export.export(scaler, sc_in)}
    with torch.no_grad():
        expected = {"encode": [encoder(*enc_in).numpy()], "forward": [t.numpy() for t in scaler(*sc_in)]}
    return eps, {"encode": enc_in, "forward": sc_in}, expected


def test_torchedge_multi_method_on_both_runtimes():
    eps, inputs, expected = _programs()
    program = to_edge(eps, constant_methods=CONSTANTS).to_executorch()
    assert program.methods == {"encode", "forward", *CONSTANTS}
    for run in (torchedge_run, executorch_run):
        for name in ("encode", "forward"):
            assert_matches(run(program.buffer, inputs[name], name), expected[name])
        for name, value in CONSTANTS.items():
            assert run(program.buffer, [], name) == [value]


def test_executorch_multi_method_on_torchedge():
    from executorch.exir import to_edge as et_to_edge

    eps, inputs, expected = _programs()
    buffer = et_to_edge(eps, constant_methods=CONSTANTS).to_executorch().buffer
    from torchedge.runtime import Runtime

    assert set(Runtime.get().load_program(buffer).method_names) == {"encode", "forward", *CONSTANTS}
    for name in ("encode", "forward"):
        assert_matches(torchedge_run(buffer, inputs[name], name), expected[name])
    for name, value in CONSTANTS.items():
        got = torchedge_run(buffer, [], name)
        assert got == [value] and type(got[0]) is type(value)
    assert np.isfinite(expected["encode"][0]).all()
