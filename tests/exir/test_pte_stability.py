"""Emitted `.pte` programs of the built-in models are pinned, so a refactor cannot change them.

The pin is the SHA-256 of the program flatbuffer (everything before the segments:
instructions, operators, shapes, memory plan) plus the byte size of each segment.
Constant bytes are left out: they come from random weights whose values differ
between CPUs (``torch.randn`` is vectorized), while the program's structure does not.

After a change that means to alter emitted programs, rewrite the pins with
``python -m tests.exir.test_pte_stability --write`` and say why in the commit.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest
import torch

from torchedge.exir import ExecutorchBackendConfig, to_edge
from torchedge.models import MODEL_NAMES, load_model
from torchedge.serialize.extended_header import parse_header
from torchedge.serialize.pte_reader import deserialize_pte

PINS = Path(__file__).parent.parent / "golden" / "pte_structure.json"
VARIANTS = {"default": False, "fused": True}


def structure_of(buffer: bytes) -> dict:
    """Hash of the program flatbuffer and the segment sizes of one `.pte`."""
    view = memoryview(buffer)
    header = parse_header(view)
    assert header is not None, "torchedge always writes the extended header"
    segments = deserialize_pte(buffer).program.segments
    return {
        "program_sha256": hashlib.sha256(view[: header.program_size]).hexdigest(),
        "segment_sizes": [segment.size for segment in segments],
    }


def emitted_structures(name: str) -> dict:
    model, inputs = load_model(name)
    edge = to_edge(torch.export.export(model, inputs))
    return {
        variant: structure_of(edge.to_executorch(ExecutorchBackendConfig(fuse_kernels=fuse)).buffer)
        for variant, fuse in VARIANTS.items()
    }


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_emitted_program_is_unchanged(name):
    pinned = json.loads(PINS.read_text())
    assert name in pinned, f"no pin for {name}: run python -m tests.exir.test_pte_stability --write"
    assert emitted_structures(name) == pinned[name]


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    PINS.write_text(json.dumps({name: emitted_structures(name) for name in MODEL_NAMES}, indent=1) + "\n")
