"""`serialize_pte`: a `Program` to the bytes of a `.pte` file; `serialize_pte_parts`: the same
file as the list of buffers it is the concatenation of (the constants' own memory, no copies), to
write one after another.

Follows the exporter (`exir/_serialize/_program.py`) step for step so that the
output is byte-identical: constants to segment 0, then the mutable-data
segment, delegate blobs and named data; the flatbuffer; the `eh00` header when
there is segment data; padding; the segments. One departure: a named blob whose bytes a
constant already holds (at least `ALIAS_BYTES`) gets a segment over those bytes instead of a copy
(segments may overlap: readers load each by offset and size).
"""

from __future__ import annotations

import dataclasses
import hashlib
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

__all__ = ["ALIAS_BYTES", "serialize_pte", "serialize_pte_parts"]

ALIAS_BYTES = 1024  # a named blob this large shares a constant's identical bytes


def _byte_view(data) -> memoryview:
    return memoryview(data).cast("B")


def serialize_pte(program: Program, **options) -> bytes:
    """Encodes `program` as a `.pte` (`serialize_pte_parts`' options); `program` itself is not modified."""
    return b"".join(serialize_pte_parts(program, **options))


def serialize_pte_parts(
    program: Program,
    *,
    segment_alignment: int = 128,
    constant_tensor_alignment: int = 16,
    extract_delegate_segments: bool = True,
    mutable_data: Sequence | None = None,
    named_data: Mapping[str, object] | None = None,
) -> list:
    """The `.pte` of `program` as buffers to concatenate; `program` itself is not modified.

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
    constants = _ConstantBytes()
    if program.constant_buffer:
        blobs = [_byte_view(buffer.storage) for buffer in program.constant_buffer]
        pieces, offsets = pack_subsegments(blobs, constant_tensor_alignment)
        program.constant_segment = SubsegmentOffsets(writer.add(pieces), offsets)
        constants = _ConstantBytes(program.constant_segment.segment_index, blobs, offsets)
        program.constant_buffer = []
    mutable = [_byte_view(blob) for blob in mutable_data or ()]
    if any(len(blob) for blob in mutable):  # all empty: no segment, as the exporter
        pieces, offsets = pack_subsegments(mutable, 1)
        program.mutable_data_segments = [SubsegmentOffsets(writer.add(pieces), offsets)]
    if extract_delegate_segments:
        _extract_delegate_segments(program, writer)
    if named_data:
        _add_named_data(program, writer, named_data, constants)
    program.segments = writer.segments

    flat = flatbuffer.encode(program, PROGRAM, FILE_IDENTIFIER)
    if writer.size == 0:
        return [flat]
    # The header block must keep every force_align of the flatbuffer intact.
    padded_length = align_up(HEADER_LENGTH, max(VECTOR_ALIGNMENT, constant_tensor_alignment))
    program_size = len(flat) + padded_length
    base = align_up(program_size, segment_alignment)
    header = ExtendedHeader(program_size, base, writer.size)
    head = insert_header(flat, header, padded_length)
    return [head, b"\0" * (base - program_size), *writer.pieces]


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
    key = _digest(blob)
    if key not in segment_of:
        segment_of[key] = writer.add([blob])
    return segment_of[key]


def _digest(blob: memoryview) -> tuple[int, bytes]:
    return len(blob), hashlib.sha256(blob).digest()


class _ConstantBytes:
    """Where each constant's bytes lie in the constant segment, by content."""

    def __init__(self, segment: int = -1, blobs: Sequence = (), offsets: Sequence[int] = ()):
        self.segment = segment
        self.offset_of = {_digest(blob): offset for blob, offset in zip(blobs, offsets) if len(blob) >= ALIAS_BYTES}

    def alias(self, writer: SegmentWriter, blob: memoryview) -> int | None:
        """A segment over the constant segment's copy of `blob`'s bytes, or None if it has none."""
        offset = self.offset_of.get(_digest(blob)) if len(blob) >= ALIAS_BYTES else None
        return None if offset is None else writer.alias(self.segment, offset, len(blob))


def _add_named_data(program: Program, writer: SegmentWriter, named_data: Mapping, constants: _ConstantBytes) -> None:
    """One segment per distinct blob; a blob a constant holds too (a tied embedding a delegate reads
    as its LM head) gets a segment over the constant's bytes instead of a copy."""
    if program.named_data:
        raise InvalidProgramError(
            f"program.named_data must be empty (found {len(program.named_data)}) when named_data blobs are given"
        )
    segment_of: dict = {}
    entries = []
    for key, data in named_data.items():
        blob = _byte_view(data)
        digest = _digest(blob)
        if digest not in segment_of:
            aliased = constants.alias(writer, blob)
            segment_of[digest] = aliased if aliased is not None else writer.add([blob])
        entries.append(NamedData(key, segment_of[digest]))
    program.named_data = entries
