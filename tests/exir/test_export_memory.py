"""What compiling holds in memory: the weights are not copied on the way to the file.

The references are independent of the code under test: the weights' own memory (NumPy's
``shares_memory``, torch's ``data_ptr``), the bytes ``.buffer`` joins, and tracemalloc's count of
Python and NumPy allocations (a ``bytes`` copy of a weight is one).
"""

from __future__ import annotations

import platform
import tracemalloc

import numpy as np
import pytest
import torch

from torchedge.errors import ExportError
from torchedge.exir import to_edge
from torchedge.exir.backend.lowered_module import LoweredBackendModule
from torchedge.exir.emit.constants import tensor_bytes, tensor_view
from torchedge.models.heap import map_large_blocks

WEIGHT_BYTES = 2048 * 512 * 4


class _Linear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(512, 2048)

    def forward(self, x):
        return torch.relu(self.linear(x))


def _edge():
    model = _Linear().eval()
    return model, to_edge(torch.export.export(model, (torch.randn(2, 512),)))


def test_tensor_view_is_the_tensors_memory():
    t = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    view = tensor_view(t)
    assert view.readonly and bytes(view) == t.numpy().tobytes()
    assert np.shares_memory(np.frombuffer(view, np.uint8), t.numpy())
    transposed = t.t()  # not contiguous: the view is of a contiguous copy, in row-major order
    assert bytes(tensor_view(transposed)) == transposed.contiguous().numpy().tobytes()
    assert tensor_bytes(t) == t.numpy().tobytes() and tensor_view(torch.empty(0)).nbytes == 0


def test_to_executorch_and_save_copy_no_weight(tmp_path):
    _, edge = _edge()
    tracemalloc.start()
    try:
        program = edge.to_executorch()
        program.save(tmp_path / "model.pte")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < WEIGHT_BYTES // 2, f"{peak} bytes allocated: the weight ({WEIGHT_BYTES} bytes) was copied"
    assert (tmp_path / "model.pte").read_bytes() == program.buffer  # the parts written are the file


def test_buffer_is_the_file_and_runs_as_eager(tmp_path):
    from torchedge.runtime import Runtime

    model, edge = _edge()
    program = edge.to_executorch()
    buffer = program.buffer
    assert program.buffer is buffer  # joined once
    program.save(tmp_path / "model.pte")
    assert (tmp_path / "model.pte").read_bytes() == buffer
    x = torch.randn(2, 512)
    (out,) = Runtime.get().load_program(buffer).load_method("forward").execute([x.numpy()])
    np.testing.assert_allclose(out, model(x).detach().numpy(), rtol=1e-5, atol=1e-5)


def test_delegation_and_emission_share_the_weights():
    from torchedge.backends.xnnpack.aot import XnnpackPartitioner

    _, edge = _edge()
    ep = edge.exported_program()
    weights = {t.data_ptr() for t in [*ep.state_dict.values(), *ep.constants.values()] if t.numel() > 1 << 16}
    lowered_edge = edge.to_backend([XnnpackPartitioner()])
    (lowered,) = [
        m for m in lowered_edge.exported_program().graph_module.modules() if isinstance(m, LoweredBackendModule)
    ]
    partition = lowered.original_module
    pointers = {t.data_ptr() for t in [*partition.state_dict.values(), *partition.constants.values()]}
    assert weights and weights <= pointers  # the partition reads the Edge program's weight, not a copy
    program = lowered_edge.to_executorch()
    (emitted,) = [m for m in program.graph_module().modules() if isinstance(m, LoweredBackendModule)]
    assert emitted.original_module is lowered.original_module


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt's mmap threshold is glibc's")
def test_map_large_blocks_on_glibc():
    assert map_large_blocks() is True


def test_exported_causal_lm_leaves_no_hold_on_the_weights():
    """Strict export's dynamo capture must not outlive the export: once the model and the
    programs are dropped, so are the weights."""
    pytest.importorskip("transformers")
    import gc
    import weakref

    from torchedge.models.causal_lm import export_causal_lm, tiny_causal_lm

    model = tiny_causal_lm("llama")
    weight = weakref.ref(model.model.layers[0].mlp.up_proj.weight)
    exported = export_causal_lm(model, 16)
    edge = to_edge(exported.programs, constant_methods=exported.constant_methods)
    del model, exported
    gc.collect()
    assert weight() is None
    assert edge.to_executorch().buffer  # the Edge program still compiles without them


def test_a_weight_changed_after_to_executorch_is_not_written(tmp_path):
    model, edge = _edge()
    program = edge.to_executorch()
    with torch.no_grad():
        model.linear.bias.add_(1.0)  # the program's constant is this tensor's memory
    with pytest.raises(ExportError, match="changed in place after to_executorch"):
        program.save(tmp_path / "model.pte")
    with pytest.raises(ExportError, match="changed in place after to_executorch"):
        program.buffer  # noqa: B018


def test_the_buffer_read_before_a_change_keeps_the_compiled_values(tmp_path):
    model, edge = _edge()
    program = edge.to_executorch()
    before = program.buffer
    expected = to_edge(torch.export.export(model, (torch.randn(2, 512),))).to_executorch().buffer
    with torch.no_grad():
        model.linear.bias.add_(1.0)
    program.save(tmp_path / "model.pte")
    assert (tmp_path / "model.pte").read_bytes() == before == expected
