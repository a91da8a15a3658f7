"""Planned tensors, arenas and kernel scratch memory start on 64-byte boundaries."""

import numpy as np
import pytest
import torch

from tests.conftest import torchedge_compile
from torchedge.kernels.allocator import ALIGNMENT, aligned_bytes
from torchedge.kernels.optimized.scratch import per_call, scratch
from torchedge.runtime import Runtime
from torchedge.runtime.memory_report import memory_report
from torchedge.serialize import deserialize_pte


class OddSizes(torch.nn.Module):
    """Tensors of 7 * 5 and 7 floats (not multiples of 16 bytes) live beside larger ones."""

    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(5)

    def forward(self, x):
        y = self.norm(x) * 2
        return (y + y.mean(-1, keepdim=True)).relu()


def test_the_default_plan_and_the_arenas_are_64_byte_aligned():
    model, x = OddSizes(), torch.randn(1, 7, 5)
    program = torchedge_compile(model, (x,))
    (usage,) = memory_report(deserialize_pte(program.buffer).program.execution_plan[0])
    offsets = [t.offset for t in usage.tensors]
    assert len(offsets) > 3 and all(offset % ALIGNMENT == 0 for offset in offsets)
    assert any(t.nbytes % ALIGNMENT for t in usage.tensors)  # sizes that 16-byte packing would misalign
    method = Runtime.get().load_program(program.buffer).load_method("forward")
    assert all(arena.ctypes.data % ALIGNMENT == 0 for arena in method.memory.arenas)
    (got,) = method.execute([x.numpy()])
    np.testing.assert_allclose(got, model(x).detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("nbytes", [0, 1, 63, 64, 1000, 1 << 20])
def test_aligned_bytes(nbytes):
    for zeroed in (False, True):
        block = aligned_bytes(nbytes, zeroed=zeroed)
        assert block.shape == (nbytes,) and block.dtype == np.uint8
        assert nbytes == 0 or block.ctypes.data % ALIGNMENT == 0  # NumPy may not move an empty view
        if zeroed:
            assert not block.any()


@per_call
def test_scratch_is_aligned_as_it_grows():
    for shape in [(3,), (7, 5), (1000,), (257, 129)]:
        assert scratch(shape, np.float32).ctypes.data % ALIGNMENT == 0
