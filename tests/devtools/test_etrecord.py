"""ETRecord: torchedge writes what ExecuTorch's Inspector reads, and reads what ExecuTorch writes."""

import pytest
import torch

from tests.backends.demo_backend import OpsPartitioner
from torchedge.devtools.etrecord import ETRecord, generate_etrecord, parse_etrecord
from torchedge.errors import ExportError
from torchedge.exir import to_edge, to_edge_transform_and_lower


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.relu(self.linear(x))


class Model(torch.nn.Module):
    """A two-layer MLP whose first layer sits in a submodule (module names and stack traces)."""

    def __init__(self):
        super().__init__()
        self.block = Block()
        self.head = torch.nn.Linear(3, 2)

    def forward(self, x):
        return torch.sigmoid(self.head(self.block(x)))


def _inputs():
    torch.manual_seed(0)
    return Model().eval(), (torch.randn(2, 4),)


def _call_nodes(program):
    return [n for n in program.graph.nodes if n.op == "call_function"]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """torchedge's program, its Edge graph and its saved ETRecord."""
    model, inputs = _inputs()
    edge = to_edge(torch.export.export(model, inputs), generate_etrecord=True)
    program = edge.to_executorch()
    path = tmp_path_factory.mktemp("etrecord") / "model.etrecord"
    program.get_etrecord().save(path)
    return program, edge.exported_program(), str(path), inputs


def test_maps_have_executorch_shape(compiled):
    program, edge_program, _, _ = compiled
    etrecord = program.get_etrecord()
    handles = program.debug_handle_map["forward"]  # torchedge's own: one handle per instruction
    expected = {i: h for i, h in enumerate(handles) if h is not None}
    assert etrecord._debug_handle_map == {"forward": expected}
    assert set(expected.values()) <= {n.meta["debug_handle"] for n in _call_nodes(edge_program)}
    assert etrecord._delegate_map == {"forward": {}}
    assert etrecord._instruction_id_to_num_outs_map == {"forward": {}}


def test_round_trip_through_torchedge(compiled, tmp_path):
    program, edge_program, path, inputs = compiled
    model, _ = _inputs()
    expected = model(*inputs).detach()
    etrecord = program.get_etrecord()
    etrecord.update_representative_inputs(list(inputs))
    etrecord.update_reference_outputs([[expected]])  # one test case of forward, ExecuTorch's layout
    again = tmp_path / "again.etrecord"
    etrecord.save(again)
    parsed = parse_etrecord(again)
    assert parsed._debug_handle_map == {
        "forward": {str(k): v for k, v in etrecord._debug_handle_map["forward"].items()}
    }
    assert torch.equal(parsed._representative_inputs[0], inputs[0])
    assert torch.equal(parsed._reference_outputs["forward"][0][0], expected)
    got, want = _call_nodes(parsed.edge_dialect_program), _call_nodes(edge_program)
    assert [(n.name, n.target, n.meta["debug_handle"]) for n in got] == [
        (n.name, n.target, n.meta["debug_handle"]) for n in want
    ]
    assert [n.meta.get("stack_trace") for n in got] == [n.meta.get("stack_trace") for n in want]
    # The parsed Edge program still runs: the same numbers as the model.
    torch.testing.assert_close(parsed.edge_dialect_program.module()(*inputs), model(*inputs))
    torch.testing.assert_close(parsed.exported_program.module()(*inputs), model(*inputs))


def test_get_etrecord_without_generate_etrecord_is_a_typed_error():
    model, inputs = _inputs()
    edge = to_edge(torch.export.export(model, inputs))
    with pytest.raises(ExportError, match="generate_etrecord=True"):
        edge.get_etrecord()
    with pytest.raises(ExportError, match="generate_etrecord=True"):
        edge.to_executorch().get_etrecord()
    with pytest.raises(ExportError, match="add_executorch_program"):
        ETRecord(edge_dialect_program=edge.exported_program()).save("unused.etrecord")


def test_delegate_calls_map_to_the_handles_they_replace(tmp_path):
    model, inputs = _inputs()
    edge = to_edge_transform_and_lower(
        torch.export.export(model, inputs), partitioner=OpsPartitioner({"aten.relu.default"}), generate_etrecord=True
    )
    program = edge.to_executorch()
    etrecord = program.get_etrecord()
    recorded = etrecord.edge_dialect_program  # recorded before lowering: the relu is still there
    (relu,) = [n for n in _call_nodes(recorded) if n.target == torch.ops.aten.relu.default]
    (index,) = etrecord._delegate_map["forward"]
    assert etrecord._delegate_map["forward"][index] == {"name": "NestedPteBackend", "delegate_map": {}}
    assert etrecord._debug_handle_map["forward"][index] == [relu.meta["debug_handle"]]
    assert etrecord._instruction_id_to_num_outs_map["forward"] == {index: 1}
    # generate_etrecord from the stages' outputs records the same maps.
    exported = torch.export.export(model, inputs)
    before = to_edge(exported)
    lowered = before.to_backend(OpsPartitioner({"aten.relu.default"})).to_executorch()
    path = tmp_path / "delegated.etrecord"
    generate_etrecord(path, before, lowered, exported_program=exported)
    parsed = parse_etrecord(path)
    assert parsed._delegate_map == {"forward": {str(index): etrecord._delegate_map["forward"][index]}}
    assert parsed._debug_handle_map["forward"][str(index)] == [relu.meta["debug_handle"]]


def test_executorch_inspector_reads_torchedge_etrecord(compiled, tmp_path):
    pytest.importorskip("pandas")
    runtime = pytest.importorskip("executorch.runtime")
    inspector_module = pytest.importorskip("executorch.devtools")
    program, edge_program, path, inputs = compiled
    et_program = runtime.Runtime.get().load_program(program.buffer, enable_etdump=True, debug_buffer_size=1 << 20)
    et_program.load_method("forward").execute(list(inputs))
    etdump, buffer = tmp_path / "run.etdp", tmp_path / "run.bin"
    et_program.write_etdump_result_to_file(str(etdump), str(buffer))

    inspector = inspector_module.Inspector(etdump_path=str(etdump), etrecord=path)
    nodes = {n.meta["debug_handle"]: n for n in _call_nodes(edge_program)}
    handles = program.debug_handle_map["forward"]
    events = [e for b in inspector.event_blocks if b.name == "Execute" for e in b.events if e.name == "OPERATOR_CALL"]
    assert [e._instruction_id for e in events] == list(range(len(handles)))
    for event in events:
        node = nodes[handles[event._instruction_id]]
        assert event.debug_handles == node.meta["debug_handle"]
        assert event.op_types == [node.target.__name__]
        assert list(event.stack_traces.values()) == [node.meta.get("stack_trace")]
    relu = next(e for e in events if e.op_types == ["relu.default"])
    assert "test_etrecord.py" in next(iter(relu.stack_traces.values()))  # the submodule's own line
    (modules,) = relu.module_hierarchy.values()
    assert [path for path, _ in modules.values()] == ["", "block"]


def test_torchedge_parses_executorch_etrecord(tmp_path):
    exir = pytest.importorskip("executorch.exir")
    et_etrecord = pytest.importorskip("executorch.devtools.etrecord")
    from executorch.exir.dialects.edge._ops import EdgeOpOverload

    xnnpack = pytest.importorskip("executorch.backends.xnnpack.partition.xnnpack_partitioner")
    model, inputs = _inputs()
    edge = exir.to_edge_transform_and_lower(
        torch.export.export(model, inputs), partitioner=[xnnpack.XnnpackPartitioner()], generate_etrecord=True
    )
    path = tmp_path / "executorch.etrecord"
    edge.to_executorch().get_etrecord().save(path)

    theirs, ours = et_etrecord.parse_etrecord(str(path)), parse_etrecord(path)
    assert ours._debug_handle_map == theirs._debug_handle_map
    assert ours._delegate_map == theirs._delegate_map
    assert ours._delegate_map["forward"]["0"]["name"] == "XnnpackBackend"  # a delegate really was recorded
    assert ours._instruction_id_to_num_outs_map == theirs._instruction_id_to_num_outs_map
    assert ours.export_graph_id == theirs.export_graph_id
    for mine, executorch in (
        (ours.edge_dialect_program, theirs.edge_dialect_program),
        (ours.exported_program, theirs.exported_program),
    ):
        got = [(n.name, str(n.target), n.meta.get("debug_handle"), n.meta.get("stack_trace")) for n in mine.graph.nodes]
        # ExecuTorch's Edge operators come back as the ATen overloads they wrap.
        want = [
            (
                n.name,
                str(n.target._op if isinstance(n.target, EdgeOpOverload) else n.target),
                n.meta.get("debug_handle"),
                n.meta.get("stack_trace"),
            )
            for n in executorch.graph.nodes
        ]
        assert got == want
    assert any(n.meta.get("debug_handle") for n in ours.edge_dialect_program.graph.nodes)
    torch.testing.assert_close(ours.edge_dialect_program.module()(*inputs), model(*inputs))
