"""Data loaders, zero-copy constants and planned memory, checked against eager results."""

import io

import numpy as np
import pytest

from tests.conftest import assert_matches, torch_outputs
from torchedge.runtime import Runtime
from torchedge.runtime.data_loader import BufferDataLoader, FileDataLoader, MmapDataLoader


@pytest.mark.parametrize("how", ["bytes", "path", "path-no-mmap", "file", "file-loader", "mmap-loader"])
def test_every_loader_runs_the_program(add_relu, tmp_path, how):
    model, inputs, pte = add_relu
    path = tmp_path / "m.pte"
    path.write_bytes(pte)
    source = {
        "bytes": lambda: pte,
        "path": lambda: path,
        "path-no-mmap": lambda: path,
        "file": lambda: io.BytesIO(pte),
        "file-loader": lambda: FileDataLoader(path),
        "mmap-loader": lambda: MmapDataLoader(path),
    }[how]()
    program = Runtime.get().load_program(source, mmap=how != "path-no-mmap")
    outputs = program.load_method("forward").execute([inputs[0].numpy()])
    assert_matches(outputs, torch_outputs(model, inputs))


def test_constants_are_zero_copy_views(add_relu):
    _, _, pte = add_relu
    loader = BufferDataLoader(pte)
    method = Runtime.get().load_program(loader).load_method("forward")
    file_bytes = np.frombuffer(loader.data, dtype=np.uint8)
    constants = [v for v in method._values.values if isinstance(v, np.ndarray) and not v.flags.writeable]
    assert constants, "the program should have a constant (the bias)"
    for c in constants:
        assert np.shares_memory(c, file_bytes)
    np.testing.assert_array_equal(constants[0], np.arange(6, dtype=np.float32).reshape(2, 3))


def test_planned_tensors_are_views_into_exactly_sized_arenas(add_relu):
    _, _, pte = add_relu
    program = Runtime.get().load_program(pte)
    method = program.load_method("forward")
    meta = program.metadata("forward")
    assert [a.nbytes for a in method.memory.arenas] == list(meta.planned_buffer_sizes)
    planned = [v for v in method._values.values if isinstance(v, np.ndarray) and v.flags.writeable]
    assert planned
    for v in planned:
        assert any(np.shares_memory(v, arena) for arena in method.memory.arenas)


def test_metadata_describes_signature(add_relu):
    _, _, pte = add_relu
    meta = Runtime.get().load_program(pte).metadata("forward")
    assert meta.inputs[0].shape == (2, 3) and meta.inputs[0].dtype == np.float32
    assert meta.outputs[0].shape == (2, 3)
    assert "aten::add.out" in meta.operators and "aten::relu.out" in meta.operators


def test_outputs_survive_the_next_execute(add_relu):
    model, inputs, pte = add_relu
    method = Runtime.get().load_program(pte).load_method("forward")
    first = method.execute([np.ones((2, 3), np.float32)])[0]
    method.execute([np.full((2, 3), -100, np.float32)])
    np.testing.assert_array_equal(first, np.arange(6, dtype=np.float32).reshape(2, 3) + 1)


def test_torch_tensor_inputs_are_accepted(add_relu):
    model, inputs, pte = add_relu
    method = Runtime.get().load_program(pte).load_method("forward")
    assert_matches(method.execute(list(inputs)), torch_outputs(model, inputs))
