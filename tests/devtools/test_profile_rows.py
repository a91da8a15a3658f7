"""What `profile` and `debug` name: a row per delegate, and the user's own line and module.

A program with several delegates (a non-delegated operator splits the graph) shows each
delegate call as a row of its own, with its backend and instruction, in `torchedge profile`
and in the Inspector's tables. `torchedge debug` names a diverging operator by the line of the
user's model that called it and the module path it ran in, not by a line inside torch.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torchedge.cli.main import main  # noqa: E402
from torchedge.devtools.inspector import Inspector, delegate_backends  # noqa: E402
from torchedge.kernels import registry  # noqa: E402
from torchedge.runtime import Runtime  # noqa: E402
from torchedge.serialize import deserialize_pte  # noqa: E402


class SplitByAtan(torch.nn.Module):
    """Three linears with atan between them: atan stays portable, so each linear is a delegate."""

    def __init__(self):
        super().__init__()
        self.first = torch.nn.Linear(8, 16)
        self.second = torch.nn.Linear(16, 16)
        self.third = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.third(torch.atan(self.second(torch.atan(self.first(x)))))


def _delegate_calls(buffer: bytes, backend: str) -> dict[int, str]:
    plan = deserialize_pte(buffer).program.execution_plan[0]
    calls = delegate_backends(plan)
    assert len(calls) >= 2 and set(calls.values()) == {backend}
    return calls


@pytest.fixture(scope="module")
def xnnpack_pte(tmp_path_factory):
    pytest.importorskip("executorch.backends.xnnpack.partition.xnnpack_partitioner")
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    torch.manual_seed(0)
    exported = torch.export.export(SplitByAtan().eval(), (torch.randn(2, 8),))
    lowered = to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()], generate_etrecord=True)
    program = lowered.to_executorch()
    folder = tmp_path_factory.mktemp("xnnpack")
    (folder / "split.pte").write_bytes(program.buffer)
    program.get_etrecord().save(str(folder / "etrecord.bin"))  # ExecuTorch's own ETRecord
    return folder / "split.pte", _delegate_calls(program.buffer, "XnnpackBackend")


def _table_rows(out: str, title: str) -> list[str]:
    """The first column of the table that starts with ``title`` (a name may hold spaces: the
    columns after it are the five numbers)."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title + " "))
    rows = []
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        rows.append(line.rsplit(maxsplit=5)[0].strip())
    return rows


def test_profile_has_a_row_per_delegate(xnnpack_pte, capsys):
    path, calls = xnnpack_pte
    capsys.readouterr()
    assert main(["profile", str(path), "--repeat", "2"]) == 0
    rows = _table_rows(capsys.readouterr().out, "operator")
    delegate_rows = sorted(r for r in rows if r.startswith("DELEGATE_CALL"))
    assert delegate_rows == sorted(f"DELEGATE_CALL XnnpackBackend (instruction {pc})" for pc in calls)
    assert "atan.out" in rows


def _traced_dump(path, runs: int = 2) -> bytes:
    from torchedge.serialize.etdump import serialize_etdump

    program = Runtime.get().load_program(path, enable_etdump=True)
    method = program.load_method()
    for _ in range(runs):
        method.execute([np.ones((2, 8), np.float32)])
    return serialize_etdump(program.event_tracer.etdump())


def test_inspector_tables_have_a_row_per_delegate(xnnpack_pte, capsys):
    path, calls = xnnpack_pte
    dump = _traced_dump(path)

    alone = Inspector(etdump_data=dump)  # a dump alone: no backend names, still one row per call
    stats = [s.operator for s in alone.operator_stats() if s.operator.startswith("DELEGATE_CALL")]
    assert sorted(stats) == sorted(f"DELEGATE_CALL (instruction {pc})" for pc in calls)
    assert all(s.calls == 2 for s in alone.operator_stats() if s.operator in stats)

    named = Inspector(etdump_data=dump, delegate_backends=calls)
    named.print_data_tabular()
    table = capsys.readouterr().out
    for pc in calls:
        assert f"DELEGATE_CALL XnnpackBackend (instruction {pc})" in table
    events = [e for b in named.event_blocks if b.name == "Execute" for e in b.events if e.name == "DELEGATE_CALL"]
    assert {e.delegate_backend_name for e in events} == {"XnnpackBackend"}
    assert {e.label for e in events} == {f"DELEGATE_CALL XnnpackBackend (instruction {pc})" for pc in calls}


def test_an_etrecord_names_the_backends(xnnpack_pte):
    """A dump read with the ETRecord of its program (ExecuTorch's here) names each call's backend."""
    path, calls = xnnpack_pte
    inspector = Inspector(etdump_data=_traced_dump(path), etrecord=path.with_name("etrecord.bin"))
    rows = [s.operator for s in inspector.operator_stats() if s.operator.startswith("DELEGATE_CALL")]
    assert sorted(rows) == sorted(f"DELEGATE_CALL XnnpackBackend (instruction {pc})" for pc in calls)


def test_each_delegates_own_events_are_rows_of_their_own(tmp_path):
    """ONNX Runtime reports its nodes: each delegate's nodes are rows apart from the other's."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from torchedge.backends.onnxruntime import OnnxRuntimePartitioner
    from torchedge.exir import to_edge_transform_and_lower

    torch.manual_seed(0)
    exported = torch.export.export(SplitByAtan().eval(), (torch.randn(2, 8),))
    program = to_edge_transform_and_lower(
        exported, partitioner=[OnnxRuntimePartitioner()], generate_etrecord=True
    ).to_executorch()
    calls = _delegate_calls(program.buffer, "OnnxRuntimeBackend")
    (tmp_path / "split.pte").write_bytes(program.buffer)
    program.get_etrecord().save(tmp_path / "etrecord.bin")

    inspector = Inspector(etdump_data=_traced_dump(tmp_path / "split.pte"), etrecord=tmp_path / "etrecord.bin")
    rows = [s.operator for s in inspector.operator_stats()]
    for pc in calls:
        assert f"DELEGATE_CALL OnnxRuntimeBackend (instruction {pc})" in rows  # torchedge's ETRecord
    inside = [s.operator for s in inspector.operator_stats(inside_delegates=True)]
    assert inside and len(inside) == len(set(inside))
    assert {row.rpartition("instruction ")[2].rstrip(")") for row in inside} == {str(pc) for pc in calls}
    assert all("(OnnxRuntimeBackend, instruction " in row for row in inside)


# -- debug: the user's line and module -------------------------------------------------------


class Attention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)
        self.act = torch.nn.ReLU()  # its forward is in torch/nn/modules/activation.py

    def forward(self, x):
        return self.act(self.proj(x))


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = Attention()

    def forward(self, x):
        return self.attn(x) + 1.0


class Nested(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()

    def forward(self, x):
        return self.block(x) * 2.0


_SOURCE, _FIRST = inspect.getsourcelines(Attention.forward)
ACT_LINE = next(number for number, line in enumerate(_SOURCE, _FIRST) if "self.act(" in line)


@pytest.fixture
def wrong_relu(monkeypatch):
    """An override of relu that is wrong by 1e-3 wherever it is positive (restored after the test)."""
    for table in (registry._KERNELS, registry._MODULES):
        monkeypatch.setitem(table, "aten::relu.out", table["aten::relu.out"])

    @registry.register_kernel("aten::relu.out")
    def relu_off_by_a_little(self, out):
        np.maximum(self, 0, out=out)
        out[out > 0] += np.float32(1e-3)


def test_debug_names_the_users_line_and_module(tmp_path, wrong_relu, capsys):
    from torchedge.exir import to_edge

    torch.manual_seed(0)
    x = torch.randn(3, 8)
    program = to_edge(torch.export.export(Nested().eval(), (x,)), generate_etrecord=True).to_executorch()
    etrecord = program.get_etrecord()
    etrecord.update_representative_inputs([x])
    (tmp_path / "model.pte").write_bytes(program.buffer)
    etrecord.save(tmp_path / "etrecord.bin")

    capsys.readouterr()
    assert main(["debug", str(tmp_path / "model.pte"), "--etrecord", str(tmp_path / "etrecord.bin")]) == 1
    out = capsys.readouterr().out
    last = out.strip().splitlines()[-1]
    assert last.startswith("first divergence: ") and "aten.relu.default" in last
    assert f'File "{__file__}", line {ACT_LINE}, in forward' in last
    assert "in module block.attn.act (ReLU)" in last
    assert "activation.py" not in out  # neither in the message nor in the table's source column
    relu_row = next(line for line in out.splitlines() if line.split()[1:2] == ["relu"])
    assert "block.attn.act (ReLU)" in relu_row and f"line {ACT_LINE}," in relu_row
