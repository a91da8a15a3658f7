"""Programs built with the schema dataclasses: they run on the real ExecuTorch
runtime, and `serialize_pte` writes the same bytes as executorch's serializer."""

import copy
from dataclasses import fields, is_dataclass

import pytest
import torch

from tests.serialize.conftest import add_program, delegate_program, float_bytes, reserialize, run_forward
from torchedge.errors import InvalidProgramError
from torchedge.schema import BackendDelegateDataReference, CompileSpec, DataLocation, DataSegment, EValue, Tensor
from torchedge.serialize import deserialize_pte, serialize_pte

WIDE = {"constant_tensor_alignment": 64, "segment_alignment": 256}


def test_add_runs_on_executorch():
    data = serialize_pte(add_program(float_bytes(10, 20)))
    (out,) = run_forward(data, torch.tensor([1.0, 2.0]))
    assert out.tolist() == [11.0, 22.0]


def test_wide_alignment_runs_on_executorch():
    program = add_program(float_bytes(10, 20), extra_constants=(b"\1" * 5, b"\2" * 70))
    data = serialize_pte(program, **WIDE)
    (out,) = run_forward(data, torch.tensor([1.0, 2.0]))
    assert out.tolist() == [11.0, 22.0]

    pte = deserialize_pte(data)
    assert pte.program.constant_segment.offsets == [0, 0, 64, 128]
    assert pte.segment_base_offset % 256 == 0
    assert bytes(pte.constant_data(3)) == b"\2" * 70  # the last entry is not padded
    assert reserialize(data, **WIDE) == data


def test_delegate_blobs_move_to_shared_segments():
    pte = deserialize_pte(serialize_pte(delegate_program()))
    delegates = pte.program.execution_plan[0].delegates
    assert [d.processed for d in delegates] == [
        BackendDelegateDataReference(DataLocation.SEGMENT, 1),
        BackendDelegateDataReference(DataLocation.SEGMENT, 1),
        BackendDelegateDataReference(DataLocation.INLINE, 0),
    ]
    assert [bytes(pte.delegate_data(d)) for d in delegates] == [b"blob" * 9] * 2 + [b""]
    assert pte.program.segments[1] == DataSegment(offset=128, size=36)


def to_exir(value):
    """Our dataclasses as executorch's exir.schema ones (same names, same fields)."""
    from executorch.exir import schema
    from executorch.exir.backend.compile_spec_schema import CompileSpec as ExirCompileSpec

    if is_dataclass(value):
        name = type(value).__name__
        cls = ExirCompileSpec if isinstance(value, CompileSpec) else getattr(schema, name)
        return cls(**{f.name: to_exir(getattr(value, f.name)) for f in fields(value)})
    if isinstance(value, list):
        return [to_exir(item) for item in value]
    if isinstance(value, (memoryview, bytearray)):
        return bytes(value)
    return value


def executorch_serialize(program, *, mutable_data=None, named_data=None, **options):
    from executorch.exir._serialize._named_data_store import NamedDataStore
    from executorch.exir._serialize._program import PTEFile, serialize_pte_binary
    from executorch.exir.schema import Buffer as ExirBuffer

    store = None
    if named_data:
        store = NamedDataStore()
        for key, blob in named_data.items():
            store.add_named_data(key, blob)
        store = store.get_named_data_store_output()
    pte = PTEFile(
        program=to_exir(program),
        mutable_data=None if mutable_data is None else [ExirBuffer(b) for b in mutable_data],
        named_data=store,
    )
    options.setdefault("extract_delegate_segments", True)
    return bytes(serialize_pte_binary(pte, **options))


BLOBS = {
    "mutable_data": [b"", b"abc", b"defgh"],
    "named_data": {"w": b"\7" * 200, "alias": b"\7" * 200, "b": b"\1" * 3},
}
# name: (program factory, layout options, extra blobs)
SCENARIOS = {
    "add": (lambda: add_program(float_bytes(10, 20)), {}, {}),
    "wide": (lambda: add_program(b"\1" * 5, extra_constants=(b"\2" * 70,)), WIDE, {}),
    "delegates": (delegate_program, {}, {}),
    "inline_delegates": (delegate_program, {"extract_delegate_segments": False}, {}),
    "mutable_and_named": (lambda: add_program(float_bytes(10, 20)), WIDE, BLOBS),
    "empty_mutable": (lambda: add_program(b""), {}, {"mutable_data": [b"", b""]}),
}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_writer_matches_executorch_serializer(scenario):
    make_program, options, blobs = SCENARIOS[scenario]
    program = make_program()
    before = copy.deepcopy(program)
    ours = serialize_pte(program, **options, **blobs)
    assert program == before, "serialize_pte must not modify its input"
    assert ours == executorch_serialize(make_program(), **options, **blobs)
    assert reserialize(ours, **options) == ours


def test_mutable_and_named_data_read_back():
    pte = deserialize_pte(serialize_pte(add_program(float_bytes(10, 20)), **BLOBS))
    assert bytes(pte.mutable_data(2)) == b"defgh"
    assert bytes(pte.mutable_data(1)) == b"abcdefgh"  # to the end of the segment
    assert pte.program.named_data[0].segment_index == pte.program.named_data[1].segment_index
    assert bytes(pte.named_data("alias")) == b"\7" * 200


def _encode_error(program, **options) -> str:
    with pytest.raises(InvalidProgramError) as info:
        serialize_pte(program, **options)
    return str(info.value)


def test_encode_errors_name_the_field():
    program = add_program(b"")
    program.execution_plan[0].values[0].val.sizes = ["two"]
    message = _encode_error(program)
    assert message.startswith("Program.execution_plan[0].values[0].val.sizes: cannot encode")

    program = add_program(b"")
    program.execution_plan[0].values[1] = EValue(3)
    assert "values[1].val: int is not one of Null, Int" in _encode_error(program)

    program = add_program(b"")
    program.execution_plan[0].values[2].val.int_val = 2**64
    assert "values[2].val.int_val: cannot encode" in _encode_error(program)

    program = add_program(b"")
    program.execution_plan[0].values[3] = Tensor()
    assert "values[3]: expected a EValue, found Tensor" in _encode_error(program)


def test_serializer_rejects_inconsistent_programs():
    program = add_program(b"")
    program.segments = [DataSegment(0, 4)]
    assert "program.segments must be empty" in _encode_error(program)

    program = delegate_program()
    program.execution_plan[0].delegates[0].processed.index = 7
    assert "processed.index 7 is out of range" in _encode_error(program)

    program = delegate_program()
    program.execution_plan[0].delegates[0].processed.location = DataLocation.SEGMENT
    assert "expected INLINE delegate data" in _encode_error(program)

    program = delegate_program()
    program.execution_plan[0].delegates.pop()
    assert "entries [2] are not used" in _encode_error(program)

    with pytest.raises(ValueError, match="power of 2"):
        serialize_pte(add_program(b""), segment_alignment=100)


def test_a_named_blob_equal_to_a_constant_shares_its_bytes():
    """A delegate's weight that a portable constant holds too (a tied LM head): the named data's
    segment lies over the constant's bytes; ExecuTorch's runtime still loads and runs the file."""
    shared = bytes(range(256)) * 8  # 2 KiB, at least ALIAS_BYTES
    program = add_program(float_bytes(10, 20), extra_constants=(shared,))
    alone = serialize_pte(program)
    data = serialize_pte(program, named_data={"head.weight": shared, "small": b"\5" * 16})
    assert len(data) - len(alone) < len(shared)
    pte = deserialize_pte(data)
    segment = pte.program.segments[pte.program.named_data[0].segment_index]
    constants = pte.program.segments[pte.program.constant_segment.segment_index]
    assert constants.offset <= segment.offset and segment.offset + segment.size <= constants.offset + constants.size
    assert bytes(pte.named_data("head.weight")) == shared == bytes(pte.constant_data(2))
    assert bytes(pte.named_data("small")) == b"\5" * 16
    assert reserialize(data) == data
    (out,) = run_forward(data, torch.tensor([1.0, 2.0]))
    assert out.tolist() == [11.0, 22.0]
