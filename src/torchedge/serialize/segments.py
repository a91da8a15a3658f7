"""Laying out the data segments that follow the flatbuffer in a `.pte`."""

from __future__ import annotations

import math
from collections.abc import Sequence

from torchedge.schema.program import DataSegment

__all__ = ["align_up", "check_alignment", "pack_subsegments", "SegmentWriter"]


def align_up(offset: int, alignment: int) -> int:
    return -(-offset // alignment) * alignment


def check_alignment(name: str, alignment: int) -> None:
    if alignment <= 0 or alignment & (alignment - 1):
        raise ValueError(f"{name} must be a power of 2, got {alignment}")


def pack_subsegments(blobs: Sequence, alignment: int) -> tuple[list, list[int]]:
    """Concatenates `blobs`, zero-padding each but the last to `alignment`.

    Returns the pieces to join and each blob's start offset.
    """
    pieces: list = []
    offsets: list[int] = []
    end = 0
    for index, blob in enumerate(blobs):
        offsets.append(end)
        pieces.append(blob)
        end += len(blob)
        if index < len(blobs) - 1:
            padding = align_up(end, alignment) - end
            pieces.append(b"\0" * padding)
            end += padding
    return pieces, offsets


class SegmentWriter:
    """Places segments one after another, each at an aligned offset."""

    def __init__(self, segment_alignment: int):
        self.segment_alignment = segment_alignment
        self.segments: list[DataSegment] = []
        self.pieces: list = []
        self.size = 0

    def add(self, pieces: Sequence, alignment: int = 1) -> int:
        """Appends one segment made of `pieces`; returns its index."""
        start = align_up(self.size, math.lcm(self.segment_alignment, alignment))
        length = sum(len(piece) for piece in pieces)
        self.pieces.append(b"\0" * (start - self.size))
        self.pieces.extend(pieces)
        self.segments.append(DataSegment(offset=start, size=length))
        self.size = start + length
        return len(self.segments) - 1

    def alias(self, index: int, offset: int, size: int) -> int:
        """Appends a segment over bytes already placed: ``size`` bytes at ``offset`` inside segment
        ``index`` (no bytes written); returns its index."""
        outer = self.segments[index]
        if offset + size > outer.size:
            raise ValueError(f"{offset}+{size} bytes do not fit in segment {index} of {outer.size}")
        self.segments.append(DataSegment(offset=outer.offset + offset, size=size))
        return len(self.segments) - 1
