"""The numeric debugger: intermediate outputs against eager, and the first operator that goes wrong."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch

from torchedge.cli.main import main
from torchedge.devtools.inspector import Inspector
from torchedge.errors import InputError
from torchedge.exir import to_edge
from torchedge.kernels import registry
from torchedge.runtime import Runtime


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 16)

    def forward(self, x):
        return torch.relu(self.linear(x))


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x):
        return torch.tanh(self.head(self.block(x))) * 2.0


RELU_LINE = next(
    i
    for i, line in enumerate(inspect.getsourcelines(Block.forward)[0], inspect.getsourcelines(Block.forward)[1])
    if "torch.relu" in line
)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    torch.manual_seed(0)
    model, x = Model().eval(), torch.randn(3, 8)
    program = to_edge(torch.export.export(model, (x,)), generate_etrecord=True).to_executorch()
    etrecord = program.get_etrecord()
    etrecord.update_representative_inputs([x])
    folder = tmp_path_factory.mktemp("debug")
    (folder / "model.pte").write_bytes(program.buffer)
    etrecord.save(folder / "etrecord.bin")
    return model, x, program, folder


def _traced_run(folder, x) -> Inspector:
    program = Runtime.get().load_program(folder / "model.pte", enable_etdump=True, debug_buffer_size=1 << 20)
    program.load_method().execute([x.numpy()])
    program.write_etdump_result_to_file(folder / "run.etdp", folder / "run.bin")
    return Inspector(
        etdump_path=folder / "run.etdp", etrecord=folder / "etrecord.bin", debug_buffer_path=folder / "run.bin"
    )


@pytest.fixture
def perturbed_relu(monkeypatch):
    """A registered override of relu that is wrong by 1e-3 wherever it is positive."""
    for table in (registry._KERNELS, registry._MODULES):  # restored after the test
        monkeypatch.setitem(table, "aten::relu.out", table["aten::relu.out"])

    @registry.register_kernel("aten::relu.out")
    def wrong_relu(self, out):
        np.maximum(self, 0, out=out)
        out[out > 0] += np.float32(1e-3)


def _eager_intermediates(model, x) -> dict:
    with torch.no_grad():
        hidden = model.block.linear(x)
        relu = torch.relu(hidden)
        head = model.head(relu)
        return {"hidden": hidden, "relu": relu, "head": head, "tanh": torch.tanh(head), "out": torch.tanh(head) * 2.0}


def test_numeric_gap_pairs_each_instruction_with_its_eager_node(compiled):
    model, x, _, folder = compiled
    inspector = _traced_run(folder, x)
    rows = inspector.numeric_gap_rows("L1")
    eager = _eager_intermediates(model, x)
    by_value = {name: value.numpy() for name, value in eager.items()}
    assert len(rows) == len(eager)
    for row in rows:
        assert row.gap < 1e-4  # float32 kernels against float32 eager on a few dozen elements
        matches = [n for n, v in by_value.items() if v.shape == np.shape(row.aot_intermediate_output)]
        # the same float32 math in another order (up to a few ulps: 1.2e-7 measured on AMD EPYC)
        tolerance = 1e-5 * max(1.0, float(np.abs(row.aot_intermediate_output).max()))
        assert any(np.allclose(by_value[n], row.aot_intermediate_output, rtol=0, atol=tolerance) for n in matches)
    relu_rows = [r for r in rows if "relu" in r.aot_ops[0]]
    assert relu_rows and relu_rows[0].source and f"line {RELU_LINE}," in relu_rows[0].source
    assert inspector.first_divergence() is None
    relu_event = next(e for b in inspector.event_blocks for e in b.events if e.operator == "relu.out")
    assert relu_event.module_hierarchy[-1] == "block" and f"line {RELU_LINE}," in relu_event.source
    frame = inspector.calculate_numeric_gap("MSE")
    assert list(frame.columns)[:6] == [
        "instruction_id",
        "aot_ops",
        "runtime_ops",
        "aot_intermediate_output",
        "runtime_intermediate_output",
        "gap",
    ]


def test_perturbed_kernel_is_named_with_its_source_line(compiled, perturbed_relu):
    _, x, _, folder = compiled
    inspector = _traced_run(folder, x)
    divergence = inspector.first_divergence()
    assert divergence is not None
    assert divergence.operator == "aten.relu.default"
    assert divergence.source is not None and __file__ in divergence.source and f"line {RELU_LINE}," in divergence.source
    gaps = {r.aot_ops[0]: r.gap for r in inspector.numeric_gap_rows("MSE")}
    relu = next(name for name in gaps if "relu" in name)
    assert gaps[relu] > 1e-8  # the error shows in relu's own output, and flows on


def test_executorch_inspector_computes_the_same_gaps(compiled):
    pytest.importorskip("pandas")
    from executorch.devtools import Inspector as ExecutorchInspector

    _, x, _, folder = compiled
    ours = _traced_run(folder, x).numeric_gap_rows("MSE")
    theirs = ExecutorchInspector(
        etdump_path=str(folder / "run.etdp"),
        etrecord=str(folder / "etrecord.bin"),
        debug_buffer_path=str(folder / "run.bin"),
    ).calculate_numeric_gap("MSE")
    their_gaps = {
        tuple(row.aot_ops): float(row.gap[0] if isinstance(row.gap, list) else row.gap) for row in theirs.itertuples()
    }
    for row in ours:
        assert tuple(row.aot_ops) in their_gaps
        assert row.gap == pytest.approx(their_gaps[tuple(row.aot_ops)], rel=1e-3, abs=1e-12)


def test_cli_debug_names_the_first_divergence(compiled, perturbed_relu, capsys):
    _, _, _, folder = compiled
    status = main(["debug", str(folder / "model.pte"), "--etrecord", str(folder / "etrecord.bin")])
    out = capsys.readouterr().out
    assert status == 1
    last = out.strip().splitlines()[-1]
    assert last.startswith("first divergence: instruction ") and "aten.relu.default" in last
    assert f"line {RELU_LINE}," in last


def test_comparisons_need_an_etrecord_and_logged_outputs(compiled):
    _, x, _, folder = compiled
    program = Runtime.get().load_program(folder / "model.pte", enable_etdump=True)
    program.load_method().execute([x.numpy()])
    program.write_etdump_result_to_file(folder / "timings.etdp")
    with pytest.raises(InputError, match="ETRecord"):
        Inspector(etdump_path=folder / "timings.etdp").first_divergence()
    with pytest.raises(InputError, match="no intermediate outputs"):
        Inspector(etdump_path=folder / "timings.etdp", etrecord=folder / "etrecord.bin").first_divergence()
