"""Decoded fields of exporter-written files, checked against independent facts."""

import enum
import hashlib
import struct
import time
from dataclasses import fields, is_dataclass

import pytest

from tests.serialize.conftest import WIDE_ALIGNMENT, add_program
from torchedge.schema import Buffer, DataLocation, DataSegment, Program, ScalarType, Tensor
from torchedge.serialize import deserialize_pte, is_pte, serialize_pte
from torchedge.serialize.extended_header import ExtendedHeader


def assert_same(ours, theirs, path="program"):
    """Recursively compares our dataclasses with executorch's exir.schema ones."""
    if is_dataclass(ours):
        for f in fields(ours):
            assert_same(getattr(ours, f.name), getattr(theirs, f.name), f"{path}.{f.name}")
    elif isinstance(ours, list):
        assert len(ours) == len(theirs), path
        for index, (a, b) in enumerate(zip(ours, theirs)):
            assert_same(a, b, f"{path}[{index}]")
    elif isinstance(ours, memoryview):
        assert bytes(ours) == bytes(theirs), path
    elif isinstance(ours, enum.Enum):
        assert int(ours) == int(theirs), path
    elif isinstance(ours, float):
        assert ours == float(theirs), path  # exir spells infinities as strings
    else:
        assert ours == theirs, path


def reference_decode(data):
    """executorch's own deserializer: segments moved back inline."""
    from executorch.exir._serialize._program import deserialize_pte_binary

    return deserialize_pte_binary(data)


FILES = ["linear_pte", "dict_pte", "no_constants_pte", "xnnpack_pte", "inline_delegate_pte"]


@pytest.mark.parametrize("fixture", FILES)
def test_matches_executorch_deserializer(request, fixture):
    data = request.getfixturevalue(fixture)
    reference = reference_decode(data)
    contents = deserialize_pte(data).unpack()
    assert_same(contents.program.execution_plan, reference.program.execution_plan)
    # Without segment data (no header) executorch leaves the constant segment
    # in place; the only constant is then the empty index-0 placeholder.
    expected_constants = reference.program.constant_buffer or [Buffer(b"")]
    assert_same(contents.program.constant_buffer, expected_constants)
    assert_same(contents.program.backend_delegate_data, reference.program.backend_delegate_data)
    named = reference.named_data
    expected = (
        {}
        if named is None
        else {key: bytes(named.buffers[entry.buffer_index]) for key, entry in named.pte_data.items()}
    )
    assert {key: bytes(blob) for key, blob in contents.named_data.items()} == expected


def test_linear_layout(linear_pte, linear_model):
    assert is_pte(linear_pte)
    pte = deserialize_pte(linear_pte)
    header = pte.header
    assert linear_pte[8:12] == b"eh00"
    assert header.segment_base_offset % 128 == 0
    assert header.program_size <= header.segment_base_offset == pte.segment_base_offset
    assert len(linear_pte) == header.segment_base_offset + header.segment_data_size

    plan = pte.program.execution_plan[0]
    assert plan.name == "forward"
    assert [(op.name, op.overload) for op in plan.operators] == [
        ("aten::permute_copy", "out"),
        ("aten::addmm", "out"),
        ("aten::relu", "out"),
    ]
    assert plan.non_const_buffer_sizes[0] == 0 and len(plan.non_const_buffer_sizes) == 2
    assert pte.program.constant_buffer == []
    assert pte.program.constant_segment.segment_index == 0

    tensors = [v.val for v in plan.values if isinstance(v.val, Tensor)]
    constants = {tuple(t.sizes): t for t in tensors if t.data_buffer_idx > 0}
    weight = linear_model.linear.weight.detach().numpy().tobytes()
    bias = linear_model.linear.bias.detach().numpy().tobytes()
    for sizes, expected in [((3, 4), weight), ((3,), bias)]:
        tensor = constants[sizes]
        assert tensor.scalar_type == ScalarType.FLOAT and tensor.allocation_info is None
        data = pte.constant_data(tensor.data_buffer_idx)
        assert bytes(data[: len(expected)]) == expected
        assert data.obj is linear_pte  # zero-copy


def test_dict_model_metadata_and_int64_constant(dict_pte):
    pte = deserialize_pte(dict_pte)
    plan = pte.program.execution_plan[0]
    assert '"builtins.dict"' in plan.container_meta_type.encoded_inp_str
    assert '\\"a\\", \\"b\\"' in plan.container_meta_type.encoded_inp_str
    assert len(plan.inputs) == 2 and len(plan.outputs) == 2
    ops = {f"{op.name}.{op.overload}" for op in plan.operators}
    assert {"aten::add.out", "aten::mul.out"} <= ops
    (scalar,) = [v.val for v in plan.values if isinstance(v.val, Tensor) and v.val.data_buffer_idx > 0]
    assert scalar.scalar_type == ScalarType.LONG
    assert struct.unpack_from("<q", pte.constant_data(scalar.data_buffer_idx)) == (2,)


def test_no_constants_has_no_header(no_constants_pte):
    pte = deserialize_pte(no_constants_pte)
    assert pte.header is None and pte.segment_base_offset == 0
    assert pte.program.segments == [DataSegment(0, 0)]
    assert pte.program.constant_segment.offsets == [0]
    assert len(pte.constant_data(0)) == 0
    assert pte.program.named_data is None and pte.program.mutable_data_segments is None


def test_xnnpack_delegate_and_named_data(xnnpack_pte, linear_model):
    pte = deserialize_pte(xnnpack_pte)
    plan = pte.program.execution_plan[0]
    assert plan.operators == []
    (delegate,) = plan.delegates
    assert delegate.id == "XnnpackBackend"
    assert delegate.processed.location == DataLocation.SEGMENT
    assert bytes(pte.delegate_data(delegate)[4:8]) == b"XH00"
    blobs = {}
    for entry in pte.program.named_data:
        blob = bytes(pte.named_data(entry.key))
        assert hashlib.sha256(blob).hexdigest() == entry.key
        blobs[len(blob)] = blob
    assert blobs[12] == linear_model.linear.bias.detach().numpy().tobytes()
    with pytest.raises(KeyError):
        pte.named_data("missing")


def test_inline_delegate_data(inline_delegate_pte):
    pte = deserialize_pte(inline_delegate_pte)
    (delegate,) = pte.program.execution_plan[0].delegates
    assert delegate.processed.location == DataLocation.INLINE
    data = pte.delegate_data(delegate)
    assert bytes(data[4:8]) == b"XH00"
    # force_align 16 on BackendDelegateInlineData.data, relative to the file start.
    assert data.obj is inline_delegate_pte
    assert inline_delegate_pte.find(bytes(data)) % 16 == 0


def test_wide_alignment_header(wide_alignment_pte):
    pte = deserialize_pte(wide_alignment_pte)
    assert pte.header.length == 32
    root = struct.unpack_from("<I", wide_alignment_pte)[0]
    # The header block is padded to the patched force_align (64): the
    # flatbuffer proper starts at byte 8 + 64.
    assert wide_alignment_pte[8 + 32 : 8 + 64] == bytes(32) and root >= 72
    assert pte.segment_base_offset % WIDE_ALIGNMENT["segment_alignment"] == 0
    offsets = pte.program.constant_segment.offsets
    assert all(o % 64 == 0 for o in offsets)


def test_large_file_decodes_fast_and_zero_copy():
    weights = bytes(range(256)) * (20 * 4096)  # 20 MiB
    data = serialize_pte(add_program(b"\0" * 8, extra_constants=(weights,)))
    start = time.perf_counter()
    pte = deserialize_pte(data)
    view = pte.constant_data(2)
    elapsed = time.perf_counter() - start
    assert elapsed < 0.5
    assert view.obj is data and bytes(view[: len(weights)]) == weights


def test_header_dataclass(linear_pte):
    header = deserialize_pte(linear_pte).header
    expected = ExtendedHeader(*struct.unpack_from("<QQQ", linear_pte, 16))
    assert header == expected


def test_absent_fields_read_as_schema_defaults(no_constants_pte):
    program = deserialize_pte(no_constants_pte).program
    assert isinstance(program, Program) and program.version == 0
    tensors = [v.val for v in program.execution_plan[0].values if isinstance(v.val, Tensor)]
    assert all(t.storage_offset == 0 and t.requires_grad is False for t in tensors)
