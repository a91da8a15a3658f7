"""The command line: export, inspect, run and check on the built-in MLP."""

import numpy as np
import pytest

from torchedge.cli.main import main


def test_export_inspect_run(tmp_path, capsys):
    pte = tmp_path / "mlp.pte"
    assert main(["export", "mlp", "-o", str(pte)]) == 0
    assert pte.stat().st_size > 0

    assert main(["inspect", str(pte)]) == 0
    text = capsys.readouterr().out
    assert "method 'forward'" in text
    assert "inputs:  float32[4, 32]" in text and "outputs: float32[4, 10]" in text
    assert "aten::addmm.out" in text and "planned memory" in text
    # 3 weights + 3 biases of 32x64, 64x64, 64x10 float32
    assert f"constants: 6 tensors, {(32 * 64 + 64 + 64 * 64 + 64 + 64 * 10 + 10) * 4:,} bytes" in text

    inputs = tmp_path / "x.npz"
    np.savez(inputs, input_0=np.ones((4, 32), np.float32))
    assert main(["run", str(pte), "--inputs", str(inputs), "--repeat", "2"]) == 0
    text = capsys.readouterr().out
    assert "output 0: float32 [4, 10]" in text and "latency" in text


def test_check_passes_against_eager(capsys):
    assert main(["check", "mlp", "--repeat", "2"]) == 0
    assert "PASS" in capsys.readouterr().out


_DICT_MODEL = """
import torch

class Heads(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x):
        y = self.linear(x)
        return {"logits": y, "extra": [y.relu(), y > 0]}

def make():
    torch.manual_seed(0)
    return Heads(), (torch.randn(2, 4),)
"""


def test_check_compares_dict_and_nested_outputs_leaf_by_leaf(tmp_path, capsys):
    source = tmp_path / "heads.py"
    source.write_text(_DICT_MODEL)
    assert main(["check", f"{source}:make", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "output 0: float32 [2, 3]" in out and "output 2: bool [2, 3]" in out and "PASS" in out


def test_errors_are_reported_not_raised(tmp_path, capsys):
    bad = tmp_path / "bad.pte"
    bad.write_bytes(b"not a program at all")
    assert main(["inspect", str(bad)]) == 2
    assert "error" in capsys.readouterr().err
    assert main(["export", "no_such_model"]) == 2


def test_dynamic_export_and_check_at_every_bound(tmp_path, capsys):
    assert main(["check", "mlp", "--repeat", "1", "--dynamic", "0:0:1:16"]) == 0
    out = capsys.readouterr().out
    for shape in ("[4, 32]", "[1, 32]", "[16, 32]"):  # the example, MIN and MAX
        assert f"inputs: torch.float32{shape}" in out
    assert out.count("max abs error") == 3 and out.rstrip().endswith("PASS")
    pte = tmp_path / "mlp.pte"
    assert main(["export", "mlp", "-o", str(pte), "--dynamic", "0:0:1:16"]) == 0
    assert main(["inspect", str(pte)]) == 0
    assert "float32[<=16, <=32]" in capsys.readouterr().out


def test_bad_dynamic_spec_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["export", "mlp", "--dynamic", "0:1"])
    assert exit_info.value.code == 2
    assert "INPUT:DIM:MIN:MAX" in capsys.readouterr().err


def test_no_fuse_runs_every_instruction_as_written(tmp_path, capsys, monkeypatch):
    import torchedge.runtime.method as method_module

    fused = []
    original = method_module.fuse_steps
    monkeypatch.setattr(method_module, "fuse_steps", lambda flow, *rest: fused.append(1) or original(flow, *rest))
    pte = tmp_path / "mlp.pte"
    assert main(["export", "mlp", "-o", str(pte)]) == 0
    assert main(["run", str(pte), "--repeat", "1", "--no-fuse"]) == 0
    assert main(["bench", str(pte), "--repeat", "1", "--no-fuse"]) == 0
    assert not fused
    assert main(["run", str(pte), "--repeat", "1"]) == 0
    assert fused
    assert "output 0: float32 [4, 10]" in capsys.readouterr().out
