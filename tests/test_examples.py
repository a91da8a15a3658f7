"""The scripts in examples/ run as documented (each checks its own results against PyTorch)."""

import runpy
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.py"))


@pytest.mark.parametrize("script", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs(script, tmp_path, monkeypatch, capsys):
    optional = {"delegate_onnxruntime": "onnxruntime", "quantize_pt2e": "torchao"}
    if script.stem in optional:
        pytest.importorskip(optional[script.stem])
    monkeypatch.chdir(tmp_path)  # examples may write .pte files
    runpy.run_path(str(script), run_name="__main__")
    assert "max |torchedge" in capsys.readouterr().out
