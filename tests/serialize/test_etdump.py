"""The ETDump codec and debug buffer against ExecuTorch's own reader and runtime."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from torchedge.errors import InvalidProgramError
from torchedge.schema import etdump as ed
from torchedge.schema.scalar_type import ScalarType
from torchedge.serialize.debug_buffer import DebugBufferWriter, read_tensor, tensor_entry
from torchedge.serialize.etdump import deserialize_etdump, serialize_etdump

GOLDEN_MLP = Path(__file__).resolve().parents[1] / "golden" / "mlp.pte"


def _sample() -> tuple[ed.ETDump, bytes, list[np.ndarray]]:
    writer = DebugBufferWriter(1 << 12)
    arrays = [np.arange(6, dtype=np.float32).reshape(2, 3), np.array([[-1, 7]], dtype=np.int64)]
    tensors = [tensor_entry(a, writer.append(a)) for a in arrays]
    values = [
        ed.Value(val=ed.ValueType.TENSOR, tensor=tensors[0]),
        ed.Value(val=ed.ValueType.TENSOR_LIST, tensor_list=ed.TensorList(tensors=tensors)),
        ed.Value(val=ed.ValueType.INT, int_value=ed.Int(int_val=-5)),
        ed.Value(val=ed.ValueType.DOUBLE, double_value=ed.Double(double_val=0.25)),
        ed.Value(val=ed.ValueType.BOOL, bool_value=ed.Bool(bool_val=True), output=ed.Bool(bool_val=True)),
    ]
    events = [
        ed.Event(debug_event=ed.DebugEvent(chain_index=0, instruction_id=i, debug_entry=v))
        for i, v in enumerate(values)
    ]
    events += [
        ed.Event(
            profile_event=ed.ProfileEvent(
                name="native_call_add.out", chain_index=0, instruction_id=0, start_time=10, end_time=25
            )
        ),
        ed.Event(allocation_event=ed.AllocationEvent(allocator_id=0, allocation_size=4096)),
    ]
    run = ed.RunData(name="Execute", allocators=[ed.Allocator(name="planned memory 1")], events=events)
    return ed.ETDump(version=0, run_data=[run]), writer.data, arrays


def test_round_trip_and_debug_buffer():
    etdump, buffer, arrays = _sample()
    data = serialize_etdump(etdump)
    decoded = deserialize_etdump(data)
    assert decoded == etdump
    assert serialize_etdump(decoded) == data
    tensors = [e.debug_event.debug_entry.tensor for e in decoded.run_data[0].events[:1]]
    np.testing.assert_array_equal(read_tensor(buffer, tensors[0]), arrays[0])
    listed = decoded.run_data[0].events[1].debug_event.debug_entry.tensor_list.tensors
    for tensor, array in zip(listed, arrays):
        assert tensor.offset % 64 == 0
        np.testing.assert_array_equal(read_tensor(buffer, tensor), array)


def test_executorch_reads_what_torchedge_writes():
    serialize = pytest.importorskip("executorch.devtools.etdump.serialize")
    etdump, _, _ = _sample()
    theirs = serialize.deserialize_from_etdump_flatcc(serialize_etdump(etdump))
    (run,) = theirs.run_data
    assert run.name == "Execute" and run.allocators[0].name == "planned memory 1"
    profile = run.events[5].profile_event
    assert (profile.name, profile.instruction_id, profile.start_time, profile.end_time) == (
        "native_call_add.out",
        0,
        10,
        25,
    )
    first = run.events[0].debug_event.debug_entry.tensor
    assert (int(first.scalar_type), first.sizes, first.strides, first.offset) == (
        int(ScalarType.FLOAT),
        [2, 3],
        [3, 1],
        0,
    )
    assert run.events[2].debug_event.debug_entry.int_value.int_val == -5
    assert run.events[4].debug_event.debug_entry.output.bool_val is True
    assert run.events[6].allocation_event.allocation_size == 4096


def test_torchedge_reads_what_executorch_writes(tmp_path):
    runtime = pytest.importorskip("executorch.runtime")
    serialize = pytest.importorskip("executorch.devtools.etdump.serialize")
    import torch

    program = runtime.Runtime.get().load_program(
        str(GOLDEN_MLP), verification=runtime.Verification.Minimal, enable_etdump=True, debug_buffer_size=1 << 16
    )
    method = program.load_method("forward")
    method.execute([torch.ones(method.metadata.input_tensor_meta(0).sizes())])
    program.write_etdump_result_to_file(str(tmp_path / "x.etdp"), str(tmp_path / "x.bin"))
    data = (tmp_path / "x.etdp").read_bytes()
    ours, theirs = deserialize_etdump(data), serialize.deserialize_from_etdump_flatcc(data)
    assert [r.name for r in ours.run_data] == [r.name for r in theirs.run_data]
    for mine, reference in zip(ours.run_data, theirs.run_data):
        for a, b in zip(mine.events, reference.events):
            if b.profile_event is not None:
                p, q = a.profile_event, b.profile_event
                assert (p.name, p.instruction_id, p.start_time, p.end_time) == (
                    q.name,
                    q.instruction_id,
                    q.start_time,
                    q.end_time,
                )
            if b.debug_event is not None:
                t, u = a.debug_event.debug_entry.tensor, b.debug_event.debug_entry.tensor
                assert (t.sizes, t.strides, t.offset) == (u.sizes, u.strides, u.offset)
    again = deserialize_etdump(serialize_etdump(ours))
    assert again == ours


def test_malformed_dumps_raise_typed_errors():
    data = serialize_etdump(_sample()[0])
    rng = random.Random(0)
    cases = [data[:n] for n in (0, 3, 8, 11, len(data) // 2, len(data) - 1)]
    for _ in range(200):
        mutated = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        cases.append(bytes(mutated))
    cases.append(b"\x00" * 4 + b"\x08\x00\x00\x00ET12" + data[12:])
    for case in cases:
        try:
            deserialize_etdump(case)
        except InvalidProgramError:
            pass
    with pytest.raises(InvalidProgramError, match="not an ETDump"):
        deserialize_etdump(b"\x10\x00\x00\x00" + b"\x0c\x00\x00\x00ET12" + bytes(16))
    with pytest.raises(InvalidProgramError, match="outside"):
        read_tensor(bytes(8), ed.Tensor(scalar_type=ScalarType.FLOAT, sizes=[4], strides=[1], offset=0))


def test_a_full_debug_buffer_keeps_what_fits():
    writer = DebugBufferWriter(100)
    assert writer.append(np.zeros(16, np.float32)) == 0
    assert writer.append(np.zeros(16, np.float32)) is None  # 64 + 64 bytes do not fit in 100
    assert writer.append(np.zeros(2, np.float32)) == 64
    assert len(writer.data) == 72
