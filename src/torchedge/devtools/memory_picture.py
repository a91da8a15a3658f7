"""Draw a memory plan as a PNG: instructions left to right, byte offsets bottom to top.

NumPy only: the PNG is encoded here with zlib, so the picture needs no
plotting library.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

from torchedge.runtime.memory_report import MemoryUsage

__all__ = ["render_plan", "write_png"]

_BACKGROUND = (255, 255, 255)
_MARGIN = 4


def _color(index: int) -> np.ndarray:
    rng = np.random.default_rng(index)
    return rng.integers(60, 220, 3).astype(np.uint8)


def render_plan(usage: MemoryUsage, num_instructions: int, width: int = 1200, height: int = 600) -> np.ndarray:
    """An RGB image (height, width, 3) with one rectangle per planned tensor."""
    image = np.full((height, width, 3), _BACKGROUND, dtype=np.uint8)
    steps = num_instructions + 2  # the input step before the first instruction, the output step after the last
    size = max(usage.size, 1)
    inner_w, inner_h = width - 2 * _MARGIN, height - 2 * _MARGIN
    for t in usage.tensors:
        x0 = _MARGIN + (t.start + 1) * inner_w // steps
        x1 = max(_MARGIN + (t.end + 2) * inner_w // steps, x0 + 1)
        y1 = height - _MARGIN - t.offset * inner_h // size
        y0 = min(height - _MARGIN - (t.offset + t.nbytes) * inner_h // size, y1 - 1)
        image[y0:y1, x0:x1] = _color(t.value_index)
        image[y0:y1, x0] = image[y0, x0:x1] = 0  # outline
    lower_bound_row = height - _MARGIN - usage.lower_bound * inner_h // size
    image[max(lower_bound_row, 0), ::4] = (200, 0, 0)  # dashed line at the lower bound
    return image


def write_png(path, image: np.ndarray) -> None:
    """Write an RGB uint8 image as a PNG file."""
    height, width, _ = image.shape
    raw = b"".join(b"\x00" + image[row].tobytes() for row in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    with open(path, "wb") as f:
        f.write(
            b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b"")
        )
