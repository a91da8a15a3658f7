"""The memory report read back from a .pte agrees with the compiler's plan; the picture is a valid PNG."""

import struct
import zlib

import numpy as np

from tests.conftest import torchedge_compile
from torchedge.cli.main import main
from torchedge.runtime.memory_report import memory_report
from torchedge.serialize import deserialize_pte


def _compiled(name="cnn"):
    from torchedge.models import load_model

    model, inputs = load_model(name)
    return torchedge_compile(model, inputs)


def test_report_matches_compiler_plan():
    program = _compiled()
    (usage,) = memory_report(deserialize_pte(program.buffer).program.execution_plan[0])
    summary = program.memory_plans["forward"]
    assert usage.size == summary.planned_buffer_sizes[0]
    assert usage.lower_bound == summary.lower_bound
    assert 0 < usage.utilisation <= 1
    for t in usage.tensors:
        assert 0 <= t.offset and t.offset + t.nbytes <= usage.size


def test_inspect_memory_writes_png(tmp_path, capsys):
    pte, png = tmp_path / "cnn.pte", tmp_path / "plan.png"
    _compiled().save(pte)
    assert main(["inspect", str(pte), "--memory", "--png", str(png)]) == 0
    out = capsys.readouterr().out
    assert "lower bound" in out and "utilisation" in out
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    idat_len = struct.unpack(">I", data[33:37])[0]
    raw = zlib.decompress(data[41 : 41 + idat_len])
    assert len(raw) == height * (1 + 3 * width)
    pixels = np.frombuffer(raw, np.uint8).reshape(height, 1 + 3 * width)[:, 1:]
    assert (pixels != 255).any(), "the picture should show some tensors"
