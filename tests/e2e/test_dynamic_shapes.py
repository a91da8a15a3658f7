"""Bounded dynamic shapes: a program exported with `torch.export.Dim` runs at every size in
range, on torchedge's runtime and on the real ExecuTorch, in both directions."""

import functools

import numpy as np
import pytest
import torch
from torch.export import Dim

from tests.conftest import assert_matches, executorch_run, torch_outputs
from torchedge.errors import ExportError, InputError
from torchedge.exir import to_edge
from torchedge.runtime import Runtime
from torchedge.schema.program import TensorShapeDynamism
from torchedge.serialize import deserialize_pte


class SliceReshape(torch.nn.Module):
    """Linear, reduction, slicing and a reshape whose size is computed from the batch."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 4)

    def forward(self, x):
        y = torch.relu(self.linear(x)).sum(dim=-1, keepdim=True)
        return y * x[:, :1].reshape(-1, 1), torch.cat([x, x * 2], dim=0).flatten()


def _small():
    torch.manual_seed(0)
    return SliceReshape().eval(), (torch.randn(3, 8),), ({0: Dim("batch", min=1, max=16)},)


def _cnn():
    from torchedge.models import load_model

    model, inputs = load_model("cnn")
    return model, inputs, ({0: Dim("batch", min=1, max=8)},)


def _llama():
    from torchedge.models import load_model

    model, inputs = load_model("llama")
    return model, inputs, ({1: Dim("seq", min=2, max=128)},)


def _bert():
    from torchedge.models import load_model

    model, inputs = load_model("bert")
    return model, inputs, ({1: Dim("seq", min=2, max=128)},)


CASES = {
    "small": (_small, [(1, 8), (3, 8), (16, 8)]),
    "cnn": (_cnn, [(1, 3, 32, 32), (5, 3, 32, 32), (8, 3, 32, 32)]),
    "llama": (_llama, [(1, 2), (1, 17), (1, 128)]),
    "bert": (_bert, [(1, 3), (1, 50), (1, 128)]),
}


@functools.cache
def _exported(name):
    factory, _ = CASES[name]
    model, inputs, dims = factory()
    return model, torch.export.export(model, inputs, dynamic_shapes=dims)


@functools.cache
def _torchedge_program(name):
    return to_edge(_exported(name)[1]).to_executorch()


def _inputs(name, shape, seed):
    g = torch.Generator().manual_seed(seed)
    if name in ("llama", "bert"):
        return (torch.randint(0, 4096, shape, generator=g),)
    return (torch.randn(shape, generator=g),)


@pytest.mark.parametrize("name", CASES)
def test_torchedge_program_runs_every_size_on_both_runtimes(name, has_executorch):
    model, _ = _exported(name)
    buffer = _torchedge_program(name).buffer
    method = Runtime.get().load_program(buffer).load_method()
    shapes = CASES[name][1]
    for seed, shape in enumerate(shapes + shapes[::-1]):  # grow and shrink within one loaded method
        inputs = _inputs(name, shape, seed)
        expected = torch_outputs(model, inputs)
        got = method.execute([t.numpy() for t in inputs])
        assert [g.shape for g in got] == [e.shape for e in expected]
        assert_matches(got, expected)
        if has_executorch:
            assert_matches(executorch_run(buffer, [t.numpy() for t in inputs]), expected)


@pytest.mark.parametrize("name", CASES)
def test_executorch_program_runs_every_size_on_torchedge(name, has_executorch):
    if not has_executorch:
        pytest.skip("ExecuTorch is not installed")
    from executorch.exir import to_edge as et_to_edge

    model, exported = _exported(name)
    buffer = et_to_edge(exported).to_executorch().buffer
    method = Runtime.get().load_program(buffer).load_method()
    for seed, shape in enumerate(CASES[name][1]):
        inputs = _inputs(name, shape, seed)
        assert_matches(method.execute([t.numpy() for t in inputs]), torch_outputs(model, inputs))


def test_memory_is_planned_for_the_upper_bound():
    program = _torchedge_program("small")
    plan = deserialize_pte(program.buffer).program.execution_plan[0]
    x = plan.values[plan.inputs[0]].val
    assert x.sizes == [16, 8] and x.shape_dynamism == TensorShapeDynamism.DYNAMIC_BOUND
    (cat_out,) = [plan.values[i].val for i in plan.outputs[1:]]
    assert cat_out.sizes == [2 * 16 * 8] and cat_out.shape_dynamism == TensorShapeDynamism.DYNAMIC_BOUND
    meta = Runtime.get().load_program(program.buffer).metadata("forward")
    assert meta.inputs[0].shape == (16, 8) and meta.inputs[0].dynamic
    # the largest run touches every planned byte, so the planned buffer must hold it
    assert plan.non_const_buffer_sizes[1] >= 4 * (16 * 8 + 16 * 4 + 2 * 16 * 8)


def test_sizes_outside_the_exported_range_are_input_errors():
    method = Runtime.get().load_program(_torchedge_program("small").buffer).load_method()
    with pytest.raises(InputError, match=r"at most \[16, 8\]"):
        method.execute([np.zeros((17, 8), np.float32)])
    with pytest.raises(InputError, match=r"at most \[16, 8\]"):
        method.execute([np.zeros((4, 9), np.float32)])
    with pytest.raises(InputError, match="rank 2"):
        method.execute([np.zeros((4, 8, 1), np.float32)])
    out, _ = method.execute([np.ones((2, 8), np.float32)])  # still usable after the errors
    assert out.shape == (2, 1)


class TwoInputs(torch.nn.Module):
    def forward(self, x, y):
        return x.sum() + y.sum(), y.reshape(-1)[: x.shape[0]]


def _two_inputs_program(has_executorch):
    batch = Dim("batch", min=2, max=8)
    dims = ({0: batch}, {0: 2 * batch})
    example = (torch.randn(3, 4), torch.randn(6, 4))
    exported = torch.export.export(TwoInputs(), example, dynamic_shapes=dims)
    return to_edge(exported).to_executorch().buffer


def test_sizes_below_the_exported_minimum_are_input_errors(has_executorch):
    buffer = _two_inputs_program(has_executorch)
    program = Runtime.get().load_program(buffer)
    meta = program.metadata("forward")
    assert meta.inputs[0].lower_bound == (2, 4) and meta.inputs[1].lower_bound == (4, 4)  # 2 * batch >= 4
    method = program.load_method()
    for too_small in [(np.zeros((1, 4), np.float32), np.zeros((2, 4), np.float32)), (np.zeros((0, 4), np.float32),)]:
        x, y = too_small[0], too_small[-1]
        with pytest.raises(InputError, match=r"input 0: shape \[[01], 4\] is outside .* at least \[2, 4\]"):
            method.execute([x, np.zeros((4, 4), np.float32)])
        with pytest.raises(InputError, match=r"input 1: shape \[[02], 4\] is outside .* at least \[4, 4\]"):
            method.execute([np.zeros((2, 4), np.float32), y])
    with pytest.raises(InputError, match=r"input 0: shape \[2, 3\] is outside"):  # a static dimension is exact
        method.execute([np.zeros((2, 3), np.float32), np.zeros((4, 4), np.float32)])
    for batch in (2, 8):  # both ends of the range run, here and on ExecuTorch (which ignores the record)
        inputs = (torch.randn(batch, 4), torch.randn(2 * batch, 4))
        expected = torch_outputs(TwoInputs(), inputs)
        assert_matches(method.execute([t.numpy() for t in inputs]), expected)
        if has_executorch:
            assert_matches(executorch_run(buffer, [t.numpy() for t in inputs]), expected)


def test_ranges_starting_at_zero_admit_empty_and_single_rows():
    exported = torch.export.export(
        TwoInputs(), (torch.randn(3, 4), torch.randn(5, 4)), dynamic_shapes=({0: Dim("a", max=8)}, {0: Dim("b", max=8)})
    )
    buffer = to_edge(exported).to_executorch().buffer
    method = Runtime.get().load_program(buffer).load_method()
    assert [m.lower_bound for m in method.meta.inputs] == [(0, 4), (0, 4)]
    inputs = (torch.randn(0, 4), torch.randn(1, 4))
    assert_matches(method.execute([t.numpy() for t in inputs]), torch_outputs(TwoInputs(), inputs))


def test_malformed_lower_bounds_are_invalid_programs():
    from torchedge.errors import InvalidProgramError
    from torchedge.runtime.method_meta import input_minimums_key
    from torchedge.serialize import serialize_pte

    contents = deserialize_pte(_two_inputs_program(False)).unpack()
    for blob in (b"not json", b"[[0, 0, -1]]", b"[[0, 7, 2]]", b"[[0, 0, 99]]"):
        named = dict(contents.named_data, **{input_minimums_key("forward"): blob})
        buffer = serialize_pte(contents.program, mutable_data=contents.mutable_data, named_data=named)
        with pytest.raises(InvalidProgramError, match="input"):
            Runtime.get().load_program(buffer).load_method()


def test_unbounded_dimension_is_an_export_error():
    model, inputs, _ = _small()
    exported = torch.export.export(model, inputs, dynamic_shapes=({0: Dim("batch")},))
    with pytest.raises(ExportError, match=r"Dim\('n', max="):
        to_edge(exported).to_executorch()


def test_onnxruntime_partitioner_leaves_dynamic_operators_portable():
    pytest.importorskip("onnxruntime")
    from torchedge.backends.onnxruntime import OnnxRuntimePartitioner
    from torchedge.exir import to_edge_transform_and_lower

    model, exported = _exported("small")
    program = to_edge_transform_and_lower(exported, partitioner=[OnnxRuntimePartitioner(1)]).to_executorch()
    method = Runtime.get().load_program(program.buffer).load_method()
    for seed, shape in enumerate(CASES["small"][1]):
        inputs = _inputs("small", shape, seed)
        assert_matches(method.execute([t.numpy() for t in inputs]), torch_outputs(model, inputs))


def test_inspect_shows_upper_bounds():
    from torchedge.devtools.describe import describe_program

    assert "float32[<=16, <=8]" in describe_program(_torchedge_program("small").buffer)


def test_repeated_shapes_reuse_sizes_and_new_shapes_resize():
    """A run at the last run's shapes skips the shape functions; any other shape resizes again."""
    model, _ = _exported("small")
    method = Runtime.get().load_program(_torchedge_program("small").buffer).load_method()
    for seed, batch in enumerate([4, 4, 4, 9, 9, 2, 4]):
        inputs = _inputs("small", (batch, 8), seed)
        assert_matches(method.execute([inputs[0].numpy()]), torch_outputs(model, inputs))
        assert method._shapes_current  # the small model's sizes follow its input shapes


class DataDependent(torch.nn.Module):
    """Sizes known only from the data (unbacked symbols) feeding later operators."""

    def __init__(self, executorch_compatible: bool):
        super().__init__()
        # ExecuTorch's to_edge refuses masked_select (not core ATen) and the copy of nonzero's column-major out
        self.executorch_compatible = executorch_compatible

    def forward(self, x):
        outs = [(x[x > 0] * 2).sum(), torch.nonzero(x).sum(0)]
        if self.executorch_compatible:
            return tuple(outs)
        return tuple(outs + [torch.nonzero(x).float().mean(0), torch.masked_select(x, x > 0.5).exp() + 1])


def _assert_all_close(got, expected):
    assert [g.shape for g in got] == [e.shape for e in expected]
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("compiler", ["torchedge", "executorch"])
def test_data_dependent_sizes_feed_later_operators(compiler, has_executorch):
    if compiler == "executorch" and not has_executorch:
        pytest.skip("ExecuTorch is not installed")
    model = DataDependent(executorch_compatible=compiler == "executorch")
    exported = torch.export.export(model, (torch.randn(4, 5),))
    if compiler == "torchedge":
        buffer = to_edge(exported).to_executorch().buffer
    else:
        from executorch.exir import to_edge as et_to_edge

        buffer = et_to_edge(exported).to_executorch().buffer
    method = Runtime.get().load_program(buffer).load_method()
    g = torch.Generator().manual_seed(0)
    # mixed signs, all positive, none positive (empty selections)
    for x in [torch.randn(4, 5, generator=g), torch.rand(4, 5, generator=g) + 3, -torch.rand(4, 5, generator=g)]:
        expected = torch_outputs(model, (x,))
        _assert_all_close(method.execute([x.numpy()]), expected)
        if has_executorch and compiler == "torchedge":
            _assert_all_close(executorch_run(buffer, [x.numpy()]), expected)


def test_dynamic_outputs_need_planned_memory_and_inputs_may_be_callers():
    from torchedge.exir import ExecutorchBackendConfig
    from torchedge.exir.memory_planning.planning_pass import MemoryPlanningPass

    model, exported = _exported("small")
    with pytest.raises(ExportError, match="alloc_graph_output=True"):
        to_edge(exported).to_executorch(
            ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(alloc_graph_output=False))
        )
    program = to_edge(exported).to_executorch(
        ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(alloc_graph_input=False))
    )
    method = Runtime.get().load_program(program.buffer).load_method()
    for seed, shape in enumerate([(5, 8), (2, 8)]):
        inputs = _inputs("small", shape, seed)
        assert_matches(method.execute([inputs[0].numpy()]), torch_outputs(model, inputs))


class Combinations(torch.nn.Module):
    """``combinations`` selects with ``masked_select`` under the core decomposition, whose
    size torch leaves unbounded: the compiler bounds it by the broadcast numel."""

    def forward(self, x):
        pairs = torch.combinations(x, r=1, with_replacement=True)
        return pairs * 2, torch.masked_select(x, x > 0).cumsum(0)


def test_masked_select_sizes_are_bounded_for_planning():
    x = torch.tensor([0.5, -1.0])  # of one or two elements, torch gives the selection no bound at all
    program = to_edge(torch.export.export(Combinations(), (x,))).to_executorch()
    method = Runtime.get().load_program(program.buffer).load_method()
    for value in [x, -x, torch.tensor([1.0, 2.0]), torch.tensor([-1.0, -2.0])]:
        _assert_all_close(method.execute([value.numpy()]), torch_outputs(Combinations(), (value,)))


class Histogram(torch.nn.Module):
    """``bincount``'s length is the largest value plus one: no bound, so its memory and that of
    everything computed from it is allocated at run time."""

    def forward(self, x):
        counts = torch.bincount(x)
        return counts, counts.float() * 2 + 1, counts.sum(), counts[1:].view(-1, 1).expand(-1, 2)


def test_unbounded_data_dependent_sizes_are_allocated_at_run_time():
    x = torch.tensor([1, 3, 3, 0, 7])
    program = to_edge(torch.export.export(Histogram(), (x,))).to_executorch()
    tensors = [v.val for v in deserialize_pte(program.buffer).program.execution_plan[0].values]
    unbound = [t for t in tensors if getattr(t, "shape_dynamism", None) == TensorShapeDynamism.DYNAMIC_UNBOUND]
    assert unbound and all(t.allocation_info is None for t in unbound)
    method = Runtime.get().load_program(program.buffer).load_method()
    for value in [
        x,
        torch.tensor([2, 2, 2, 2, 2]),
        torch.tensor([40, 0, 40, 0, 1]),
        torch.zeros(5, dtype=torch.int64),
        x,
    ]:
        got, expected = method.execute([value.numpy()]), torch_outputs(Histogram(), (value,))
        assert [g.shape for g in got] == [e.shape for e in expected]
        for g, e in zip(got, expected):
            np.testing.assert_array_equal(g, e)
