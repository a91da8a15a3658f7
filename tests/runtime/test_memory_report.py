"""The memory report read back from a .pte agrees with the compiler's plan; the picture is a valid PNG."""

import sys

import pytest
import torch

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
    image = pytest.importorskip("matplotlib.image")
    pte, png = tmp_path / "cnn.pte", tmp_path / "plan.png"
    _compiled().save(pte)
    assert main(["inspect", str(pte), "--memory", "--png", str(png)]) == 0
    out = capsys.readouterr().out
    assert "lower bound" in out and "utilisation" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = image.imread(png)
    assert pixels.shape[:2] == (500, 1000)  # 10 x 5 inches at 100 dpi
    assert (pixels[..., :3] < 0.99).any(), "the picture should show some tensors"


class _Stateful(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.zeros(4))

    def forward(self, x):
        hidden = torch.relu(x) * 2
        self.total.add_(hidden.sum(0))
        return hidden + 1


def test_picture_has_axes_labels_a_legend_and_one_bar_per_tensor():
    pytest.importorskip("matplotlib")
    from matplotlib.patches import Rectangle

    from torchedge.devtools.memory_picture import LIFETIME_CLASSES, draw_plan, lifetime_class

    program = torchedge_compile(_Stateful(), (torch.randn(3, 4),))
    plan = deserialize_pte(program.buffer).program.execution_plan[0]
    (usage,) = memory_report(plan)
    axes = draw_plan(plan, usage).axes[0]
    instructions = len(plan.chains[0].instructions)
    classes = {lifetime_class(t, plan, instructions) for t in usage.tensors}
    assert {"input", "output", "mutable state", "intermediate"} <= classes
    bars = [p for p in axes.patches if isinstance(p, Rectangle)]
    assert len(bars) == len(usage.tensors)
    colors = {tuple(bar.get_facecolor()[:3]) for bar in bars}
    assert len(colors) == len(classes)  # one colour per lifetime class
    legend = [text.get_text() for text in axes.get_legend().get_texts()]
    assert legend == [k for k in LIFETIME_CLASSES if k in classes] + ["lower bound (most bytes live at once)"]
    assert axes.get_xlabel().startswith("instruction") and "offset in memory id 1" in axes.get_ylabel()
    assert f"{usage.size:,} bytes planned" in axes.get_title() and "method 'forward'" in axes.get_title()


def test_picture_without_matplotlib_says_what_to_install(tmp_path, capsys, monkeypatch):
    pte = tmp_path / "cnn.pte"
    _compiled().save(pte)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ModuleNotFoundError
    monkeypatch.delitem(sys.modules, "matplotlib.figure", raising=False)
    assert main(["inspect", str(pte), "--memory", "--png", str(tmp_path / "plan.png")]) == 2
    assert "pip install 'torchedge[plot]'" in capsys.readouterr().err
