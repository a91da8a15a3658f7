"""`deserialize_pte`: the bytes of a `.pte` file to a `PteFile`.

Nothing is copied: byte vectors of the program and all segment accessors are
`memoryview` slices of the input (`bytes`, `bytearray`, `memoryview` or an
`mmap`; an mmap cannot be closed, nor a bytearray resized, while such views
are alive). Every inconsistency raises `InvalidProgramError` saying what was
expected, what was found and where.
"""

from __future__ import annotations

import dataclasses
import struct
from dataclasses import dataclass

from torchedge.errors import InvalidProgramError
from torchedge.schema.program import (
    BackendDelegate,
    BackendDelegateDataReference,
    BackendDelegateInlineData,
    Buffer,
    DataLocation,
    Program,
    SubsegmentOffsets,
)
from torchedge.serialize import flatbuffer
from torchedge.serialize.extended_header import ExtendedHeader, parse_header
from torchedge.serialize.program_tables import FILE_IDENTIFIER, PROGRAM

__all__ = ["PteFile", "PteContents", "deserialize_pte", "is_pte"]

_IDENTIFIER_OFFSET = 4
_MIN_SIZE = 8  # root offset + identifier


def is_pte(data) -> bool:
    """True if `data` carries the `.pte` file identifier `ET12`."""
    view = memoryview(data).cast("B")
    return len(view) >= _MIN_SIZE and bytes(view[4:8]) == FILE_IDENTIFIER


def deserialize_pte(data) -> PteFile:
    """Decodes a `.pte` held in `bytes`, `bytearray`, `memoryview` or `mmap`.

    Checks the identifier, the extended header, the whole flatbuffer, that
    every segment lies inside the file and that every reference to a segment
    or inline blob is in range; tensor-level indices are checked on access.
    """
    view = memoryview(data).cast("B")
    if len(view) < _MIN_SIZE:
        raise InvalidProgramError(
            f"not a .pte file: {len(view)} bytes, expected at least {_MIN_SIZE} (root offset and file identifier)"
        )
    identifier = bytes(view[_IDENTIFIER_OFFSET:_MIN_SIZE])
    if identifier != FILE_IDENTIFIER and identifier[:2] == b"ET" and identifier[2:].isdigit():
        raise InvalidProgramError(
            f"the file is an ExecuTorch program of format version {identifier.decode()}, which torchedge does not read "
            f"(it reads {FILE_IDENTIFIER.decode()})"
        )
    if identifier == b"BP08":
        raise InvalidProgramError(
            "this is a bundled program (.bpte, identifier b'BP08'), not a .pte: load it with "
            "torchedge.runtime.bundled_program.load_bundled_program(path) (its .program is the wrapped "
            "program) or verify it with `torchedge run <file>`"
        )
    if identifier != FILE_IDENTIFIER:
        raise InvalidProgramError(
            f"not a .pte file: expected identifier {FILE_IDENTIFIER!r} at offset "
            f"{_IDENTIFIER_OFFSET}, found {identifier!r}"
        )
    header = parse_header(view)
    program_size = header.program_size if header else len(view)
    root = struct.unpack_from("<I", view)[0]
    if not _MIN_SIZE <= root < program_size:
        raise InvalidProgramError(
            f"root table offset {root} at offset 0 is outside the program "
            f"(expected {_MIN_SIZE} <= offset < {program_size})"
        )
    program = flatbuffer.decode(view[:program_size], PROGRAM)
    pte = PteFile(program, header, view)
    pte._check_references()
    return pte


@dataclass
class PteContents:
    """A decoded `.pte` in `serialize_pte`'s input convention.

    `serialize_pte(c.program, named_data=c.named_data, mutable_data=c.mutable_data)`
    (with the file's alignments) reproduces the file.
    """

    program: Program
    named_data: dict[str, memoryview]
    mutable_data: list[memoryview] | None


class PteFile:
    """A decoded `.pte`: the program plus zero-copy access to its segments.

    `program` is the fully decoded `Program` as stored (constants in the
    constant segment, delegate blobs usually in segments); `header` is the
    `ExtendedHeader` or None (no segment data); `segment_base_offset` is the
    file offset that `DataSegment.offset` values are relative to (0 without
    a header).
    """

    def __init__(self, program: Program, header: ExtendedHeader | None, data: memoryview):
        self.program = program
        self.header = header
        self.segment_base_offset = header.segment_base_offset if header else 0
        self._data = data

    def segment_data(self, index: int) -> memoryview:
        """The bytes of `program.segments[index]`."""
        segments = self.program.segments
        if not 0 <= index < len(segments):
            raise InvalidProgramError(
                f"segment index {index} is out of range: the program has {len(segments)} segments"
            )
        segment = segments[index]
        if segment.size == 0:
            return self._data[0:0]
        start = self.segment_base_offset + segment.offset
        end = start + segment.size
        if self.header is None or self.segment_base_offset == 0 or end > len(self._data):
            raise InvalidProgramError(
                f"segment {index} (offset {segment.offset}, size {segment.size}) ends at "
                f"file offset {end}, beyond the segment data of this {len(self._data)}-"
                f"byte file (segment_base_offset {self.segment_base_offset})"
            )
        return self._data[start:end]

    def constant_data(self, buffer_idx: int) -> memoryview:
        """Bytes of constant `buffer_idx`, up to the end of the constant segment.

        Falls back to the legacy inline `constant_buffer` when the program has
        no constant segment, as the runtime does.
        """
        segment = self.program.constant_segment
        if segment is not None and segment.offsets:
            return self._subsegment_data(segment, buffer_idx, "constant_segment")
        buffers = self.program.constant_buffer
        if not 0 <= buffer_idx < len(buffers):
            raise InvalidProgramError(
                f"constant buffer index {buffer_idx} is out of range: the program has "
                f"no constant segment and {len(buffers)} inline constant buffers"
            )
        return memoryview(buffers[buffer_idx].storage).cast("B")

    def mutable_data(self, buffer_idx: int, segment_idx: int = 0) -> memoryview:
        """Initial bytes of mutable buffer `buffer_idx`, to the end of its segment."""
        segments = self.program.mutable_data_segments or []
        if not 0 <= segment_idx < len(segments):
            raise InvalidProgramError(
                f"mutable data segment {segment_idx} is out of range: the program has {len(segments)}"
            )
        return self._subsegment_data(segments[segment_idx], buffer_idx, f"mutable_data_segments[{segment_idx}]")

    def delegate_data(self, delegate: BackendDelegate) -> memoryview:
        """The processed blob of `delegate`, inline or in a segment."""
        ref = delegate.processed
        if ref is None:
            raise InvalidProgramError(f"delegate {delegate.id!r} has no processed data")
        if ref.location == DataLocation.SEGMENT:
            return self.segment_data(ref.index)
        inline = self.program.backend_delegate_data
        if not 0 <= ref.index < len(inline):
            raise InvalidProgramError(
                f"delegate {delegate.id!r} refers to inline data {ref.index}, but the "
                f"program has {len(inline)} backend_delegate_data entries"
            )
        return memoryview(inline[ref.index].data).cast("B")

    def named_data(self, key: str) -> memoryview:
        """The blob stored under `key` in `program.named_data`; KeyError if none."""
        for entry in self.program.named_data or []:
            if entry.key == key:
                return self.segment_data(entry.segment_index)
        raise KeyError(key)

    def unpack(self) -> PteContents:
        """Moves segment data back inline: the inverse of `serialize_pte`."""
        program = dataclasses.replace(self.program, segments=[])
        if program.constant_segment is not None and program.constant_segment.offsets:
            storages = self._split(program.constant_segment)
            program.constant_buffer = [Buffer(storage) for storage in storages]
            program.constant_segment = None
        mutable = None
        if program.mutable_data_segments:
            if len(program.mutable_data_segments) > 1:
                raise InvalidProgramError(
                    f"found {len(program.mutable_data_segments)} mutable data segments; "
                    "serialize_pte writes at most one"
                )
            mutable = self._split(program.mutable_data_segments[0])
            program.mutable_data_segments = None
        named = {entry.key: self.named_data(entry.key) for entry in program.named_data or []}
        if program.named_data:
            program.named_data = []
        self._inline_delegates(program)
        return PteContents(program, named, mutable)

    def _check_references(self) -> None:
        """Checks that every segment and every reference to one is in range."""
        program = self.program
        for index in range(len(program.segments)):
            self.segment_data(index)
        subsegments = [program.constant_segment, *(program.mutable_data_segments or [])]
        indices = [sub.segment_index for sub in subsegments if sub is not None]
        indices += [entry.segment_index for entry in program.named_data or []]
        for index in indices:
            self.segment_data(index)
        for plan in program.execution_plan:
            for delegate in plan.delegates:
                self.delegate_data(delegate)

    def _subsegment_data(self, sub: SubsegmentOffsets, index: int, what: str) -> memoryview:
        if not 0 <= index < len(sub.offsets):
            raise InvalidProgramError(f"{what} has {len(sub.offsets)} entries; index {index} is out of range")
        data = self.segment_data(sub.segment_index)
        offset = sub.offsets[index]
        if offset > len(data):
            raise InvalidProgramError(f"{what}.offsets[{index}] is {offset}, beyond the {len(data)}-byte segment")
        return data[offset:]

    def _split(self, sub: SubsegmentOffsets) -> list[memoryview]:
        """Each entry of a packed segment, from its offset to the next one's."""
        data = self.segment_data(sub.segment_index)
        ends = [*sub.offsets[1:], len(data)]
        for index, (start, end) in enumerate(zip(sub.offsets, ends)):
            if not start <= end <= len(data):
                raise InvalidProgramError(
                    f"entry {index} of segment {sub.segment_index} spans offsets "
                    f"{start}..{end}; expected increasing offsets within its "
                    f"{len(data)} bytes"
                )
        return [data[start:end] for start, end in zip(sub.offsets, ends)]

    def _inline_delegates(self, program: Program) -> None:
        """Appends segment-stored delegate blobs to backend_delegate_data."""
        inline = list(program.backend_delegate_data)
        plans = []
        for plan in program.execution_plan:
            delegates = []
            for delegate in plan.delegates:
                processed = delegate.processed
                if processed is not None and processed.location == DataLocation.SEGMENT:
                    blob = self.segment_data(processed.index)
                    ref = BackendDelegateDataReference(DataLocation.INLINE, len(inline))
                    inline.append(BackendDelegateInlineData(blob))
                    delegate = dataclasses.replace(delegate, processed=ref)
                delegates.append(delegate)
            plans.append(dataclasses.replace(plan, delegates=delegates))
        program.execution_plan = plans
        program.backend_delegate_data = inline
