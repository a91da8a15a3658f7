"""Identity copies whose source nothing else reads (`torchedge.runtime.fusion.copy_elision`): the
step that wrote the source writes the copy's destination, with the bits of the program's own run
(``fuse=False``), and only where the method's dataflow proves nothing else sees a difference."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from tests.conftest import assert_matches, executorch_compile, torch_outputs
from torchedge.runtime import Runtime

ELIDED = "aten::expand_copy.out (written by instruction 0)"


class ScaledCopy(nn.Module):
    """``x * 0.5``, copied by an ``expand`` to the shape it has, then a product; ``read_again``:
    the scaled tensor is read by a second step too; ``reuse``: the input dies at the product, so
    memory planning may place the copy over it."""

    def __init__(self, read_again=False, reuse=False):
        super().__init__()
        self.read_again, self.reuse = read_again, reuse

    def forward(self, x, z):
        s = x * 0.5
        y = torch.mm(s.expand(4, 3), z)
        return y if self.reuse else y + (s if self.read_again else x)[:, :1]


def _labels_and_check(model) -> list[str]:
    """Labels of the default load of ``model``'s ExecuTorch program, after checking its outputs
    against the program run as written and against eager, three runs on different inputs."""
    example = (torch.randn(4, 3), torch.randn(3, 5))
    program = Runtime.get().load_program(executorch_compile(model, example))
    elided, plain = program.load_method("forward"), program.load_method("forward", fuse=False)
    for run in range(3):
        generator = torch.Generator().manual_seed(run)
        inputs = (torch.randn(4, 3, generator=generator), torch.randn(3, 5, generator=generator))
        arrays = [t.numpy() for t in inputs]
        got = elided.execute(arrays)
        for a, b in zip(got, plain.execute(arrays)):
            np.testing.assert_array_equal(a, b)
        assert_matches(got, torch_outputs(model, inputs), 1e-5)
    return [step.label for step in elided._steps]


def test_the_producer_writes_the_copys_destination():
    assert ELIDED in _labels_and_check(ScaledCopy())


def test_a_source_read_by_another_step_keeps_its_copy():
    assert "aten::expand_copy.out" in _labels_and_check(ScaledCopy(read_again=True))


def test_a_destination_over_the_producers_input_keeps_its_copy():
    labels = _labels_and_check(ScaledCopy(reuse=True))
    assert ELIDED not in labels and "aten::expand_copy.out" in labels


def test_copies_executorchs_xnnpack_lowerings_leave_between_delegates(xnnpack_lowering):
    import torchedge.backends.xnnpack.runtime  # noqa: F401  (registers XnnpackBackend)

    buffer, inputs = xnnpack_lowering
    program = Runtime.get().load_program(buffer)
    elided, plain = program.load_method("forward"), program.load_method("forward", fuse=False)
    assert any(step.label.startswith("aten::expand_copy.out (written by instruction") for step in elided._steps)
    arrays = [t.numpy() for t in inputs]
    for _ in range(3):
        for a, b in zip(elided.execute(arrays), plain.execute(arrays)):
            np.testing.assert_array_equal(a, b)
