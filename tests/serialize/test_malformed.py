"""Bad input bytes raise InvalidProgramError (and nothing else), quickly."""

import random
import struct

import flatbuffers
import pytest

from tests.serialize.conftest import add_program, delegate_program
from torchedge.errors import InvalidProgramError
from torchedge.schema import BackendDelegateDataReference, DataLocation, Int, Null, Tensor
from torchedge.serialize import deserialize_pte, is_pte, serialize_pte


def decode_error(data) -> str:
    with pytest.raises(InvalidProgramError) as info:
        deserialize_pte(data)
    return str(info.value)


def decode_or_reject(data) -> None:
    """Decodes `data` and uses every accessor, or gets InvalidProgramError."""
    try:
        pte = deserialize_pte(data)
        program = pte.program
        for plan in program.execution_plan:
            for value in plan.values:
                if isinstance(value.val, Tensor) and value.val.data_buffer_idx:
                    pte.constant_data(value.val.data_buffer_idx)
            for delegate in plan.delegates:
                pte.delegate_data(delegate)
        for entry in program.named_data or []:
            pte.named_data(entry.key)
        contents = pte.unpack()
        serialize_pte(contents.program, named_data=contents.named_data, mutable_data=contents.mutable_data)
    except InvalidProgramError:
        pass


def test_empty_and_short():
    assert "0 bytes, expected at least 8" in decode_error(b"")
    assert "3 bytes" in decode_error(b"ET1")
    assert not is_pte(b"") and not is_pte(b"\0\0\0\0ET1")


def test_wrong_identifier_shows_the_bytes_found():
    message = decode_error(b"\x1c\0\0\0PK\x03\x04" + bytes(64))
    assert "expected identifier b'ET12' at offset 4, found b'PK\\x03\\x04'" in message


def test_random_bytes():
    rng = random.Random(0)
    for _ in range(200):
        data = bytearray(rng.randbytes(rng.randrange(0, 600)))
        if rng.random() < 0.8 and len(data) >= 8:
            data[4:8] = b"ET12"  # get past the identifier check
        if rng.random() < 0.3 and len(data) >= 12:
            data[8:12] = b"eh00"
        decode_or_reject(bytes(data))


@pytest.mark.parametrize("fixture", ["linear_pte", "no_constants_pte"])
def test_every_truncation(request, fixture):
    data = request.getfixturevalue(fixture)
    has_header = data[8:12] == b"eh00"
    for size in range(len(data)):
        if has_header:
            decode_error(data[:size])
        else:
            decode_or_reject(data[:size])


@pytest.mark.parametrize("fixture", ["linear_pte", "no_constants_pte", "xnnpack_pte"])
def test_seeded_byte_mutations(request, fixture):
    data = request.getfixturevalue(fixture)
    rng = random.Random(fixture)
    for _ in range(300):
        mutated = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            mutated[rng.randrange(len(data))] = rng.randrange(256)
        decode_or_reject(bytes(mutated))


def _patched(data: bytes, offset: int, fmt: str, value: int) -> bytes:
    patched = bytearray(data)
    struct.pack_into(fmt, patched, offset, value)
    return bytes(patched)


def test_header_inconsistencies(linear_pte):
    message = decode_error(_patched(linear_pte, 32, "<Q", 10**6))
    assert f"but the file has only {len(linear_pte)} bytes" in message
    assert "segment_data_size 1000000" in message
    assert "program_size is 99999" in decode_error(_patched(linear_pte, 16, "<Q", 99999))
    assert "expected at least 24" in decode_error(_patched(linear_pte, 12, "<I", 16))
    assert "root table offset 99999" in decode_error(_patched(linear_pte, 0, "<I", 99999))


def _offset_vector(b, offsets) -> int:
    b.StartVector(4, len(offsets), 4)
    for offset in reversed(offsets):
        b.PrependUOffsetTRelative(offset)
    return b.EndVector()


def _evalue(b, tag: int, member: int) -> int:
    b.StartObject(2)
    b.PrependUint8Slot(0, tag, 0)
    b.PrependUOffsetTRelativeSlot(1, member, 0)
    return b.EndObject()


def _program(b, values: list) -> bytes:
    """Finishes a Program whose only ExecutionPlan has the given EValue tables."""
    values_vector = _offset_vector(b, values)
    b.StartObject(10)
    b.PrependUOffsetTRelativeSlot(2, values_vector, 0)
    plans = _offset_vector(b, [b.EndObject()])
    b.StartObject(8)
    b.PrependUOffsetTRelativeSlot(1, plans, 0)
    b.Finish(b.EndObject(), file_identifier=b"ET12")
    return bytes(b.Output())


def _program_with_value(tag: int, make_member) -> bytes:
    """A Program with one EValue(val_type=tag, val=make_member(builder))."""
    b = flatbuffers.Builder(256)
    return _program(b, [_evalue(b, tag, make_member(b))])


def _empty_table(b) -> int:
    b.StartObject(0)
    return b.EndObject()


def test_union_tags():
    def first_value(data):
        return deserialize_pte(data).program.execution_plan[0].values[0].val

    assert first_value(_program_with_value(1, _empty_table)) == Null()
    assert first_value(_program_with_value(2, _empty_table)) == Int(0)  # int_val absent
    message = decode_error(_program_with_value(99, _empty_table))
    assert message.startswith("Program.execution_plan[0].values[0].val: union tag 99")


def test_vector_length_beyond_the_data():
    sentinel = struct.pack("<q", 0x5A5A5A5A5A5A5A5A)

    def int_list(b):
        b.StartVector(8, 1, 8)
        b.PrependInt64(0x5A5A5A5A5A5A5A5A)
        items = b.EndVector()
        b.StartObject(1)
        b.PrependUOffsetTRelativeSlot(0, items, 0)
        return b.EndObject()

    data = bytearray(_program_with_value(7, int_list))
    assert deserialize_pte(bytes(data)).program.execution_plan[0].values[0].val.items == [0x5A5A5A5A5A5A5A5A]
    struct.pack_into("<I", data, data.index(sentinel) - 4, 2**31)
    message = decode_error(bytes(data))
    assert "values[0].val.items: vector at offset" in message
    assert "claims 2147483648 elements of 8 bytes" in message


def test_shared_objects_do_not_explode():
    """Many vector entries pointing at one large table must not hang."""
    b = flatbuffers.Builder(1024)
    b.StartVector(4, 20000, 4)
    for _ in range(20000):
        b.PrependInt32(1)
    sizes = b.EndVector()
    b.StartObject(10)
    b.PrependUOffsetTRelativeSlot(2, sizes, 0)
    tensor = _evalue(b, 5, b.EndObject())
    data = _program(b, [tensor] * 20000)
    assert "objects are shared or overlap" in decode_error(data)


def test_references_out_of_range():
    program = delegate_program()
    program.execution_plan[0].delegates[0].processed = BackendDelegateDataReference(DataLocation.SEGMENT, 5)
    data = serialize_pte(program, extract_delegate_segments=False)
    assert "segment index 5 is out of range: the program has 1 segments" in decode_error(data)

    pte = deserialize_pte(serialize_pte(add_program(b"\1\2")))
    with pytest.raises(InvalidProgramError, match="index 9 is out of range"):
        pte.constant_data(9)
    with pytest.raises(InvalidProgramError, match="segment index 3 is out of range"):
        pte.segment_data(3)
    with pytest.raises(InvalidProgramError, match="mutable data segment 0 is out of range"):
        pte.mutable_data(0)
