"""`serialize_pte`: a `Program` to the bytes of a `.pte` file.

Follows the exporter (`exir/_serialize/_program.py`) step for step so that the
output is byte-identical: constants to segment 0, then the mutable-data
segment, delegate blobs and named data; the flatbuffer; the `eh00` header when
there is segment data; padding; the segments.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from torchedge.errors import InvalidProgramError
from torchedge.schema.program import (
    BackendDelegateDataReference,
    BackendDelegateInlineData,
    DataLocation,
    NamedData,
    Program,
    SubsegmentOffsets,
)
from torchedge.serialize import flatbuffer
from torchedge.serialize.extended_header import HEADER_LENGTH, ExtendedHeader, insert_header
from torchedge.serialize.program_tables import FILE_IDENTIFIER, PROGRAM, VECTOR_ALIGNMENT
from torchedge.serialize.segments import SegmentWriter, align_up, check_alignment, pack_subsegments

__all__ = ["serialize_pte"]


def _byte_view(data) -> memoryview:
    return memoryview(data).cast("B")


def serialize_pte(
    program: Program,
    *,
    segment_alignment: int = 128,
    constant_tensor_alignment: int = 16,
    extract_delegate_segments: bool = True,
    mutable_data: Sequence | None = None,
    named_data: Mapping[str, object] | None = None,
) -> bytes:
    """Encodes `program` as a `.pte`; `program` itself is not modified.

    Input convention: `program.constant_buffer` lists every constant including
    the index-0 placeholder `Buffer(b"")`; they move into segment 0 (each but
    the last padded to `constant_tensor_alignment`) described by
    `constant_segment`, and `constant_buffer` is written empty.
    `program.segments` must be empty: this function lays segments out.
    With `extract_delegate_segments`, non-empty `backend_delegate_data` blobs
    move to their own segments (identical blobs shared) and the delegates
    refer to them as SEGMENT/segment_index.
    `mutable_data`: initial state of mutable buffers (`mutable_data_segments`,
    packed without padding). `named_data`: key -> blob, one segment per
    distinct blob, listed in `program.named_data`.
    """
    check_alignment("segment_alignment", segment_alignment)
    check_alignment("constant_tensor_alignment", constant_tensor_alignment)
    if program.segments:
        raise InvalidProgramError(
            f"program.segments must be empty (found {len(program.segments)}): "
            "serialize_pte lays out the segments itself"
        )
    program = dataclasses.replace(program, segments=[])
    writer = SegmentWriter(segment_alignment)
    if program.constant_buffer:
        blobs = [_byte_view(buffer.storage) for buffer in program.constant_buffer]
        pieces, offsets = pack_subsegments(blobs, constant_tensor_alignment)
        program.constant_segment = SubsegmentOffsets(writer.add(pieces), offsets)
        program.constant_buffer = []
    mutable = [_byte_view(blob) for blob in mutable_data or ()]
    if any(len(blob) for blob in mutable):  # all empty: no segment, as the exporter
        pieces, offsets = pack_subsegments(mutable, 1)
        program.mutable_data_segments = [SubsegmentOffsets(writer.add(pieces), offsets)]
    if extract_delegate_segments:
        _extract_delegate_segments(program, writer)
    if named_data:
        _add_named_data(program, writer, named_data)
    program.segments = writer.segments

    flat = flatbuffer.encode(program, PROGRAM, FILE_IDENTIFIER)
    if writer.size == 0:
        return flat
    # The header block must keep every force_align of the flatbuffer intact.
    padded_length = align_up(HEADER_LENGTH, max(VECTOR_ALIGNMENT, constant_tensor_alignment))
    program_size = len(flat) + padded_length
    base = align_up(program_size, segment_alignment)
    header = ExtendedHeader(program_size, base, writer.size)
    head = insert_header(flat, header, padded_length)
    return b"".join([head, b"\0" * (base - program_size), *writer.pieces])


def _extract_delegate_segments(program: Program, writer: SegmentWriter) -> None:
    """Moves non-empty inline delegate blobs into segments (copying the plans)."""
    inline = program.backend_delegate_data
    remaining: list[BackendDelegateInlineData] = []
    seen: set[int] = set()
    segment_of: dict[bytes, int] = {}
    plans = []
    for plan in program.execution_plan:
        delegates = []
        for delegate in plan.delegates:
            ref = delegate.processed
            where = f"execution plan {plan.name!r} delegate {delegate.id!r}"
            if ref is None or ref.location != DataLocation.INLINE:
                raise InvalidProgramError(f"{where}: expected INLINE delegate data, found {ref}")
            if ref.index >= len(inline):
                raise InvalidProgramError(
                    f"{where}: processed.index {ref.index} is out of range for "
                    f"{len(inline)} backend_delegate_data entries"
                )
            seen.add(ref.index)
            entry = inline[ref.index]
            blob = _byte_view(entry.data)
            if len(blob):
                ref = BackendDelegateDataReference(DataLocation.SEGMENT, _add_deduplicated(writer, segment_of, blob))
            else:
                ref = BackendDelegateDataReference(DataLocation.INLINE, len(remaining))
                remaining.append(entry)
            delegates.append(dataclasses.replace(delegate, processed=ref))
        plans.append(dataclasses.replace(plan, delegates=delegates))
    unused = sorted(set(range(len(inline))) - seen)
    if unused:
        raise InvalidProgramError(f"backend_delegate_data entries {unused} are not used by any delegate")
    program.execution_plan = plans
    program.backend_delegate_data = remaining


def _add_deduplicated(writer: SegmentWriter, segment_of: dict, blob: memoryview) -> int:
    """Index of the segment holding `blob`, adding one unless identical bytes have one."""
    key = blob.tobytes()
    if key not in segment_of:
        segment_of[key] = writer.add([blob])
    return segment_of[key]


def _add_named_data(program: Program, writer: SegmentWriter, named_data: Mapping) -> None:
    if program.named_data:
        raise InvalidProgramError(
            f"program.named_data must be empty (found {len(program.named_data)}) when named_data blobs are given"
        )
    segment_of: dict[bytes, int] = {}
    program.named_data = [
        NamedData(key, _add_deduplicated(writer, segment_of, _byte_view(blob))) for key, blob in named_data.items()
    ]
