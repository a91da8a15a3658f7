"""Backend operators bound to patterns with `bind_pattern_to_op`: the replacement pass, the
operator's NumPy kernel on torchedge's runtime, the name ExecuTorch's runtime reports when it has
no kernel for it, and the backend dialect's verifier."""

import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from torchedge.errors import ExportError
from torchedge.exir import to_edge
from torchedge.exir.backend_dialect import (
    BackendOpReplacement,
    QuantFusion,
    bind_pattern_to_op,
    to_backend_dialect,
    verify_backend,
)
from torchedge.exir.verification import IRVerificationError
from torchedge.kernels import registry
from torchedge.runtime import Runtime

LIBRARY = torch.library.Library("torchedge_test_backend", "DEF")
LIBRARY.define("unbound(Tensor x) -> Tensor")
LIBRARY.impl("unbound", lambda x: x * 2, "CompositeExplicitAutograd")
aten = torch.ops.aten


def add_relu_kernel(x, y, out):
    """The NumPy kernel of ``torchedge_test_backend::add_relu.out`` (the registry's contract)."""
    np.add(x, y, out=out)
    np.maximum(out, 0, out=out)


@bind_pattern_to_op(LIBRARY, "add_relu(Tensor x, Tensor y) -> Tensor")
def add_relu(x, y):
    return aten.relu.default(aten.add.Tensor(x, y))


def _forgetting_kernels(patch) -> None:
    """Kernels registered from here on are forgotten when ``patch`` undoes its changes."""
    registry.registered_operators()  # the libraries register into the tables before they are copied
    for name, table in vars(registry).items():
        if name.startswith("_") and not name.startswith("__") and isinstance(table, dict):
            patch.setattr(registry, name, dict(table))


@pytest.fixture(scope="module", autouse=True)
def add_relu_kernel_registered():
    with pytest.MonkeyPatch.context() as patch:
        _forgetting_kernels(patch)
        registry.register_kernel("torchedge_test_backend::add_relu.out")(add_relu_kernel)
        yield


def test_bind_registers_the_kernel_it_is_given(monkeypatch):
    _forgetting_kernels(monkeypatch)

    def kernel(x, out):
        np.negative(x, out=out)

    @bind_pattern_to_op(LIBRARY, "negate(Tensor x) -> Tensor", kernel=kernel)
    def negate(x):
        return aten.neg.default(x)

    assert registry.get_kernel("torchedge_test_backend::negate.out").fn is kernel
    out_variant = torch.ops.torchedge_test_backend.negate.out
    assert [a.name for a in out_variant._schema.arguments] == ["x", "out"]


class AddRelu(torch.nn.Module):
    def forward(self, x, y, z):
        return torch.relu(x + y) * z, torch.relu(z + y)


INPUTS = tuple(torch.randn(3, 4, generator=torch.Generator().manual_seed(i)) for i in range(3))


def _backend_program():
    return to_backend_dialect(to_edge(torch.export.export(AddRelu(), INPUTS)), LIBRARY)


def _targets(edge) -> list:
    return [str(n.target) for n in edge.exported_program().graph.nodes if n.op == "call_function"]


def test_matches_become_the_backend_operator_and_run_its_kernel():
    backend = _backend_program()
    assert _targets(backend).count("torchedge_test_backend.add_relu.default") == 2
    assert not any("aten.relu" in t for t in _targets(backend))
    buffer = backend.to_executorch().buffer
    got = Runtime.get().load_program(buffer).load_method("forward").execute([i.numpy() for i in INPUTS])
    for g, want in zip(got, AddRelu()(*INPUTS)):
        np.testing.assert_array_equal(g, want.numpy())


def test_the_operator_runs_its_pattern_in_eager_and_decomposes_on_export():
    x, y = INPUTS[:2]
    torch.testing.assert_close(torch.ops.torchedge_test_backend.add_relu(x, y), torch.relu(x + y), rtol=0, atol=0)

    class Calls(torch.nn.Module):
        def forward(self, x, y):
            return torch.ops.torchedge_test_backend.add_relu(x, y)

    edge = to_edge(torch.export.export(Calls(), (x, y)))
    assert sorted(_targets(edge)) == ["aten.add.Tensor", "aten.relu.default"]


def test_executorch_reports_the_operators_it_lacks_by_name(tmp_path):
    """ExecuTorch's runtime refuses the method and logs each operator it has no kernel for: the
    backend operator, and the quantized add_relu (its quantized library has add, not add_relu)."""
    pytest.importorskip("executorch.runtime")
    from tests.exir.test_backend_dialect_quant import QuantizedAdd, _programs, _uint8

    user = tmp_path / "user.pte"
    user.write_bytes(_backend_program().to_executorch().buffer)
    _, fused = _programs(QuantizedAdd(relu=True), (_uint8(2, 3), _uint8(2, 3)))
    quantized = tmp_path / "quantized.pte"
    quantized.write_bytes(fused.to_executorch().buffer)
    script = textwrap.dedent(
        """
        import sys
        import executorch.kernels.quantized
        from executorch.runtime import Runtime
        for path in sys.argv[1:]:
            try:
                Runtime.get().load_program(path).load_method("forward")
            except RuntimeError:
                print("refused", path, flush=True)
        """
    )
    done = subprocess.run([sys.executable, "-c", script, str(user), str(quantized)], capture_output=True, text=True)
    assert done.stdout.count("refused") == 2, done.stdout + done.stderr
    for name in ("torchedge_test_backend::add_relu.out", "quantized_decomposed::add_relu.out"):
        assert re.search(rf"Missing operator: \[\d+\] {name}\n", done.stderr), done.stderr


def test_a_pattern_must_be_written_with_aten_overloads():
    with pytest.raises(ExportError, match=r"calls <built-in method relu.*torch.ops.aten.add.Tensor"):

        @bind_pattern_to_op(LIBRARY, "relu_python(Tensor x) -> Tensor")
        def relu_python(x):
            return torch.relu(x)


def test_pattern_parameters_are_operator_arguments():
    with pytest.raises(ExportError, match=r"parameter\(s\) \['a'\] that operator 'torchedge_test_backend::twice'"):

        @bind_pattern_to_op(LIBRARY, "twice(Tensor x) -> Tensor")
        def twice(a):
            return aten.add.Tensor(a, a)


def test_an_undefined_operator_is_named():
    with pytest.raises(ExportError, match="library 'torchedge_test_backend' defines no operator 'nothing'"):
        bind_pattern_to_op(LIBRARY, "nothing")(add_relu)


def test_the_verifier_admits_backend_and_quantized_operators():
    from tests.exir.test_backend_dialect_quant import QuantizedAdd, _programs, _uint8

    verify_backend(_backend_program().exported_program().graph_module)
    _, fused = _programs(QuantizedAdd(relu=False), (_uint8(2, 3), _uint8(2, 3)))
    verify_backend(fused.exported_program().graph_module)


def test_the_verifier_rejects_other_operators_of_a_backend_library():
    class CallsUnbound(torch.nn.Module):
        def forward(self, x):
            return torch.ops.torchedge_test_backend.unbound(x)

    edge = to_edge(torch.export.export(CallsUnbound(), INPUTS[:1]))
    with pytest.raises(
        IRVerificationError, match=r"no pattern is bound.*'torchedge_test_backend::unbound' \(node 'unbound'"
    ):
        to_backend_dialect(edge, LIBRARY)


def test_replacement_is_limited_to_the_libraries_named():
    QuantFusion()  # binds the quantized patterns too
    edge = to_edge(torch.export.export(AddRelu(), INPUTS))
    untouched = edge.transform([BackendOpReplacement("torchedge_quantized")])
    assert _targets(untouched) == _targets(edge)


def test_matches_inside_control_flow_are_replaced():
    class Branches(torch.nn.Module):
        def forward(self, x, y):
            return torch.cond(x.sum() > 0, lambda a, b: torch.relu(a + b), lambda a, b: a - b, (x, y))

    edge = to_backend_dialect(to_edge(torch.export.export(Branches(), INPUTS[:2])), LIBRARY)
    graph_module = edge.exported_program().graph_module
    branch_targets = {str(n.target) for m in graph_module.modules() for n in m.graph.nodes if n.op == "call_function"}
    assert "torchedge_test_backend.add_relu.default" in branch_targets
    buffer = edge.to_executorch().buffer
    method = Runtime.get().load_program(buffer).load_method("forward")
    for sign in (1, -1):
        x, y = sign * INPUTS[0].abs(), INPUTS[1]
        np.testing.assert_array_equal(method.execute([x.numpy(), y.numpy()])[0], Branches()(x, y).numpy())


def test_an_operator_with_several_results_needs_its_own_out_variant():
    with pytest.raises(ExportError, match="'torchedge_test_backend::split_halves' has no out variant; define one"):

        @bind_pattern_to_op(LIBRARY, "split_halves(Tensor x) -> (Tensor, Tensor)")
        def split_halves(x):
            return aten.relu.default(x), aten.neg.default(x)


def test_the_verifier_rejects_quantized_operators_that_cannot_be_emitted():
    import torch.ao.quantization.fx._decomposed  # noqa: F401  (quantized_decomposed)

    class GroupDequantize(torch.nn.Module):
        def forward(self, q, scales):
            qd = torch.ops.quantized_decomposed
            return qd.dequantize_per_channel_group(q, scales, None, -128, 127, torch.int8, 4, torch.float32)

    inputs = (torch.randint(-128, 128, (2, 8), dtype=torch.int8), torch.rand(2, 2))
    edge = to_edge(torch.export.export(GroupDequantize(), inputs))
    expected = r"without an out variant.*'quantized_decomposed::dequantize_per_channel_group' \(node"
    with pytest.raises(IRVerificationError, match=expected):
        verify_backend(edge.exported_program().graph_module)
