"""Event tracing: torchedge's ETDumps against ExecuTorch's runtime and Inspector, both directions."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from tests.conftest import executorch_etdump, torchedge_compile
from torchedge.cli.main import main
from torchedge.devtools.chrome_trace import chrome_trace
from torchedge.devtools.inspector import Inspector
from torchedge.errors import InputError
from torchedge.runtime import Runtime
from torchedge.serialize.etdump import deserialize_etdump, serialize_etdump


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.first = torch.nn.Linear(8, 16)
        self.second = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.second(torch.relu(self.first(x))).softmax(-1)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    torch.manual_seed(0)
    model = MLP().eval()
    x = torch.randn(2, 8)
    program = torchedge_compile(model, (x,))
    path = tmp_path_factory.mktemp("trace") / "mlp.pte"
    path.write_bytes(program.buffer)
    return model, x, program, path


def _operator_names(program) -> list[str]:
    plan = program.program.execution_plan[0]
    names = []
    for instruction in plan.chains[0].instructions:
        op = plan.operators[instruction.instr_args.op_index]
        names.append(f"{op.name}.{op.overload}")
    return names


def _profiles(run) -> list[tuple[str, int]]:
    return [(e.profile_event.name, e.profile_event.instruction_id) for e in run.events if e.profile_event]


def test_untraced_methods_run_the_kernels_themselves(compiled):
    _, _, _, path = compiled
    method = Runtime.get().load_program(path).load_method()
    kernels = [step.fn for step in method._steps]
    traced = Runtime.get().load_program(path, enable_etdump=True).load_method()
    assert all(getattr(fn, "__name__", "") != "call" for fn in kernels)  # no wrapper on the untraced path
    assert all(step.fn.__name__ == "call" for step in traced._steps if step.fn is not None)  # None: fused away


def test_events_are_the_ones_executorch_records(compiled, tmp_path):
    _, x, program, path = compiled
    ours = Runtime.get().load_program(path, enable_etdump=True)
    method = ours.load_method(fuse=False)  # every instruction as written, as ExecuTorch runs them
    for _ in range(2):
        method.execute([x.numpy()])
    ours.write_etdump_result_to_file(tmp_path / "ours.etdp")

    executorch_etdump(path, [x], tmp_path, runs=2)

    mine = deserialize_etdump((tmp_path / "ours.etdp").read_bytes())
    reference = deserialize_etdump((tmp_path / "theirs.etdp").read_bytes())
    assert [r.name for r in mine.run_data] == [r.name for r in reference.run_data] == ["Default", "Execute", "Execute"]
    for run, their_run in zip(mine.run_data[1:], reference.run_data[1:]):
        assert _profiles(run) == _profiles(their_run)
        assert [name for name, _ in _profiles(run)][:2] == [
            "native_call_" + _operator_names(program)[0].removeprefix("aten::"),
            "OPERATOR_CALL",
        ]
    assert {name for name, _ in _profiles(mine.run_data[0])} == {"Program::load_method", "Method::init"}


def test_intermediate_outputs_equal_executorch_logged_ones(compiled, tmp_path):
    pytest.importorskip("pandas")
    from executorch.devtools import Inspector as ExecutorchInspector

    _, x, program, path = compiled
    ours = Runtime.get().load_program(path, enable_etdump=True, debug_buffer_size=1 << 20)
    outputs = ours.load_method().execute([x.numpy()])
    ours.write_etdump_result_to_file(tmp_path / "ours.etdp", tmp_path / "ours.bin")

    executorch_etdump(path, [x], tmp_path, debug_buffer_size=1 << 20)

    mine = Inspector(etdump_path=tmp_path / "ours.etdp", debug_buffer_path=tmp_path / "ours.bin")
    reference = Inspector(etdump_path=tmp_path / "theirs.etdp", debug_buffer_path=tmp_path / "theirs.bin")
    their_reading = ExecutorchInspector(
        etdump_path=str(tmp_path / "ours.etdp"), debug_buffer_path=str(tmp_path / "ours.bin")
    )
    ours_by_id = {e.instruction_id: e.debug_data[-1] for e in mine.event_blocks[-1].events if e.debug_data}
    theirs_by_id = {e.instruction_id: e.debug_data[-1] for e in reference.event_blocks[-1].events if e.debug_data}
    assert sorted(ours_by_id) == sorted(theirs_by_id) == list(range(len(_operator_names(program))))
    for pc, value in ours_by_id.items():
        np.testing.assert_allclose(value, theirs_by_id[pc], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(ours_by_id[max(ours_by_id)], outputs[0])  # the last instruction writes the output
    # The method's outputs are logged after the run, marked as outputs, by both runtimes.
    np.testing.assert_array_equal(mine.event_blocks[-1].run_output[0], outputs[0])
    np.testing.assert_allclose(reference.event_blocks[-1].run_output[0], outputs[0], rtol=1e-5, atol=1e-6)
    # ExecuTorch's Inspector reads torchedge's dump and debug buffer: the same tensors, the same operators.
    their_events = [e for b in their_reading.event_blocks if b.name == "Execute" for e in b.events]
    logged = {e._instruction_id: e.debug_data for e in their_events if e.debug_data}
    for pc, value in ours_by_id.items():
        np.testing.assert_array_equal(np.asarray(logged[pc][0]), value)
    names = [e.name for e in their_events if e.name.startswith("native_call_")]
    assert names == ["native_call_" + n.removeprefix("aten::") for n in _operator_names(program)]


def test_inspector_reads_executorch_dumps(compiled, tmp_path):
    _, x, program, path = compiled
    executorch_etdump(path, [x], tmp_path, runs=3)
    inspector = Inspector(etdump_path=tmp_path / "theirs.etdp", target_time_scale="us")
    execute = [b for b in inspector.event_blocks if b.name == "Execute"]
    assert len(execute) == 1 and execute[0].runs == 3  # three identical runs: one block, three timings per event
    operators = [e.operator for e in execute[0].events if e.operator]
    assert operators == [n.removeprefix("aten::") for n in _operator_names(program)]
    stats = {s.operator: s for s in inspector.operator_stats()}
    assert stats["addmm.out"].calls == 2 * 3


def test_debug_levels_and_buffer_limits(compiled):
    _, x, _, path = compiled
    program = Runtime.get().load_program(path, enable_etdump=True, debug_buffer_size=1 << 16, debug_level="outputs")
    outputs = program.load_method().execute([x.numpy()])
    events = [e.debug_event for e in program.event_tracer.etdump().run_data[-1].events if e.debug_event]
    assert len(events) == 1 and events[0].debug_entry.output.bool_val
    assert list(events[0].debug_entry.tensor.sizes) == list(outputs[0].shape)

    tiny = Runtime.get().load_program(path, enable_etdump=True, debug_buffer_size=64)
    tiny.load_method().execute([x.numpy()])
    assert tiny.event_tracer.dropped_values > 0  # what does not fit is counted, the run goes on

    with pytest.raises(InputError, match="debug_buffer_size"):
        Runtime.get().load_program(path, enable_etdump=True, debug_level="intermediates")
    with pytest.raises(InputError, match="enable_etdump"):
        Runtime.get().load_program(path).write_etdump_result_to_file("unused.etdp")


def test_chrome_trace_nests_instructions_in_their_run(compiled):
    _, x, program, path = compiled
    traced = Runtime.get().load_program(path, enable_etdump=True)
    method = traced.load_method(fuse=False)  # every instruction its own event
    for _ in range(2):
        method.execute([x.numpy()])
    trace = json.loads(json.dumps(chrome_trace(traced.event_tracer.etdump())))
    complete = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    n = len(_operator_names(program))
    for tid in (1, 2):
        run = [e for e in complete if e["tid"] == tid]
        (span,) = [e for e in run if e["name"] == "Method::execute"]
        operators = [e for e in run if e["cat"] == "operator"]
        assert [e["args"]["instruction_id"] for e in operators] == list(range(n))
        assert all(span["ts"] <= e["ts"] and e["ts"] + e["dur"] <= span["ts"] + span["dur"] for e in operators)


def test_cli_profile_prints_operators_and_writes_files(compiled, tmp_path, capsys):
    _, _, program, path = compiled
    trace, etdump = tmp_path / "trace.json", tmp_path / "run.etdp"
    assert main(["profile", str(path), "--repeat", "3", "--trace", str(trace), "--etdump", str(etdump)]) == 0
    out = capsys.readouterr().out
    names = {n.removeprefix("aten::") for n in _operator_names(program)}
    table = [line.split()[0] for line in out.splitlines()[2:]]
    fused = {name for name in table if name.startswith("fused_")}  # the run that ships: fused steps, by rule
    assert fused and set(table) - fused <= names
    assert json.loads(trace.read_text())["traceEvents"]
    runs = [r for r in deserialize_etdump(etdump.read_bytes()).run_data if r.name == "Execute"]
    assert len(runs) == 4  # one warm-up and three timed runs


def test_onnxruntime_delegate_reports_its_own_nodes(compiled, tmp_path):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from torchedge.backends.onnxruntime import OnnxRuntimePartitioner
    from torchedge.exir import to_edge_transform_and_lower

    model, x, _, _ = compiled
    program = to_edge_transform_and_lower(
        torch.export.export(model, (x,)), partitioner=[OnnxRuntimePartitioner()]
    ).to_executorch()
    traced = Runtime.get().load_program(program.buffer, enable_etdump=True)
    method = traced.load_method()
    for _ in range(2):
        method.execute([x.numpy()])
    traced.write_etdump_result_to_file(tmp_path / "ort.etdp")
    runs = [r for r in deserialize_etdump((tmp_path / "ort.etdp").read_bytes()).run_data if r.name == "Execute"]
    for run in runs:
        profiles = [e.profile_event for e in run.events if e.profile_event]
        (call,) = [p for p in profiles if p.name == "DELEGATE_CALL"]
        nodes = [p for p in profiles if p.delegate_debug_id_str]
        assert len(nodes) >= 2  # ONNX Runtime's nodes after its own fusions (gemm + relu, gemm, softmax)
        assert all(call.start_time <= p.start_time and p.end_time <= call.end_time for p in nodes)
        assert all(p.instruction_id == call.instruction_id for p in nodes)
    inspector = Inspector(etdump_path=tmp_path / "ort.etdp")
    assert inspector.operator_stats(inside_delegates=True)


def test_memory_tracking_and_tables(compiled, capsys):
    _, x, program, path = compiled
    traced = Runtime.get().load_program(path, enable_etdump=True, etdump_memory=True)
    method = traced.load_method()
    method.execute([x.numpy()])
    inspector = Inspector(etdump_data=serialize_etdump(traced.event_tracer.etdump()))
    planned = {f"planned memory {i}": a.nbytes for i, a in enumerate(method.memory.arenas, start=1)}
    assert inspector.event_blocks[0].allocations == planned
    assert sum(planned.values()) == sum(program.program.execution_plan[0].non_const_buffer_sizes)
    inspector.print_data_tabular()
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:3] == ["event_block_name", "event_name", "p10"]
    assert [line.split()[1] for line in table[1:]] == [e.name for b in inspector.event_blocks for e in b.events]
    frame = inspector.to_dataframe()
    assert list(frame["event_name"]) == [e.name for b in inspector.event_blocks for e in b.events]
