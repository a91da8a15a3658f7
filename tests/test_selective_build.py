"""Selective build: `torchedge kernels --oplist` writes ExecuTorch's selected-operators YAML, which
restricts a runtime (`Runtime.get(kernels=...)`) and checks programs at compile time (``kernel_set``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from tests.conftest import torchedge_compile
from torchedge.cli.main import main
from torchedge.cli.oplist import program_operators, selected_operators_yaml
from torchedge.errors import ExportError, OperatorMissingError
from torchedge.exir import ExecutorchBackendConfig
from torchedge.kernels.registry import KernelList, read_selected_operators
from torchedge.runtime import Runtime
from torchedge.serialize import deserialize_pte

GOLDEN = Path(__file__).resolve().parent / "golden"
PROGRAMS = ["mlp", "multi_method", "cnn", "scan"]


def _plan_operators(path: Path) -> set[str]:
    pte = deserialize_pte(path.read_bytes())
    return {
        f"{o.name}.{o.overload}" if o.overload else o.name
        for plan in pte.program.execution_plan
        for o in plan.operators or []
    }


def _oplist(tmp_path: Path, *names: str) -> Path:
    out = tmp_path / "selected_operators.yaml"
    assert main(["kernels", "--oplist", *(str(GOLDEN / f"{n}.pte") for n in names), "-o", str(out)]) == 0
    return out


@pytest.mark.parametrize("name", PROGRAMS)
def test_the_yaml_lists_exactly_the_plans_operators(tmp_path, name):
    path = _oplist(tmp_path, name)
    document = yaml.safe_load(path.read_text())
    expected = _plan_operators(GOLDEN / f"{name}.pte")
    assert set(document["operators"]) == expected
    assert read_selected_operators(path) == sorted(expected)
    assert document["include_all_operators"] is False
    for entry in document["operators"].values():
        assert entry == {
            "debug_info": [str(GOLDEN / f"{name}.pte")],
            "include_all_overloads": False,
            "is_root_operator": True,
            "is_used_for_training": True,
        }
    # The dtypes: one kernel key per distinct call signature, "v1/<dtype>;<dim order>|..."
    assert set(document["et_kernel_metadata"]) <= expected
    if name == "mlp":  # relu on a float 2-D tensor: self, out, and the out again as the returned value
        assert document["et_kernel_metadata"]["aten::relu.out"] == ["v1/6;0,1|6;0,1|6;0,1"]


def test_the_yaml_is_executorchs_own(tmp_path):
    """Byte for byte what ExecuTorch's gen_oplist writes for the same program."""
    gen_oplist = pytest.importorskip("executorch.codegen.tools.gen_oplist")
    for name in ("mlp", "scan"):
        ours = _oplist(tmp_path, name).read_text()
        theirs = tmp_path / f"{name}.oracle.yaml"
        gen_oplist.gen_oplist(theirs, model_file_path=str(GOLDEN / f"{name}.pte"))
        assert ours == theirs.read_text()


def test_several_programs_merge(tmp_path):
    path = _oplist(tmp_path, "mlp", "multi_method")
    document = yaml.safe_load(path.read_text())
    assert set(document["operators"]) == _plan_operators(GOLDEN / "mlp.pte") | _plan_operators(
        GOLDEN / "multi_method.pte"
    )
    assert len(document["operators"]["aten::addmm.out"]["debug_info"]) == 2


def test_the_yaml_reads_without_pyyaml(tmp_path, monkeypatch):
    import builtins

    path = _oplist(tmp_path, "cnn")
    real_import = builtins.__import__

    def no_yaml(name, *args, **kwargs):
        if name == "yaml":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_yaml)
    assert read_selected_operators(path) == sorted(_plan_operators(GOLDEN / "cnn.pte"))


def test_include_all_operators_allows_everything(tmp_path):
    path = tmp_path / "all.yaml"
    path.write_text("include_all_operators: true\noperators: {}\n")
    assert read_selected_operators(path) is None
    assert KernelList(path).allows("aten::anything.out")


def test_oplist_to_stdout_quotes_odd_names(capsys):
    odd = ["my model: v2.pte", "1.5", ".inf", "-x", "#y"]
    text = selected_operators_yaml([(n, {"aten::add.out": {"v1/6;0|6;0"}, "true": set()}) for n in odd])
    document = yaml.safe_load(text)
    assert document["operators"]["aten::add.out"]["debug_info"] == sorted(odd)
    assert "true" in document["operators"] and "true" not in document["et_kernel_metadata"]
    assert main(["kernels", "--oplist", str(GOLDEN / "mlp.pte")]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["operators"].keys() == _plan_operators(GOLDEN / "mlp.pte")


def test_a_restricted_runtime_loads_what_the_list_covers_and_names_what_it_lacks(tmp_path):
    path = _oplist(tmp_path, "mlp")
    data = np.load(GOLDEN / "mlp.npz")
    method = Runtime.get(kernels=path).load_program(GOLDEN / "mlp.pte").load_method()
    np.testing.assert_allclose(method.execute([data["forward/0/in0"]])[0], data["forward/0/out0"], rtol=1e-5)
    assert Runtime.get(kernels=str(path)) is Runtime.get(kernels=path)
    program = Runtime.get(kernels=path).load_program(GOLDEN / "cnn.pte")
    with pytest.raises(OperatorMissingError, match=r"needs .*'aten::convolution.out'.*selected_operators"):
        program.load_method()
    listed = sorted(_plan_operators(GOLDEN / "mlp.pte"))[:-1]
    with pytest.raises(OperatorMissingError, match="aten::relu.out"):
        Runtime.get(kernels=listed).load_program(GOLDEN / "mlp.pte").load_method()
    with pytest.raises(ValueError, match="unknown kernel set"):
        Runtime.get(kernels="nonsense")


class _AddRelu(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x + 1)


class _AddSigmoid(torch.nn.Module):
    def forward(self, x):
        return torch.sigmoid(x + 1)


def test_the_list_round_trips_as_a_compile_time_kernel_set(tmp_path):
    x = (torch.randn(2, 3),)
    pte = tmp_path / "add_relu.pte"
    pte.write_bytes(torchedge_compile(_AddRelu(), x).buffer)
    out = tmp_path / "ops.yaml"
    assert main(["kernels", "--oplist", str(pte), "-o", str(out)]) == 0
    kernel_set = read_selected_operators(out)
    assert kernel_set == sorted(program_operators(pte))
    # The program compiles against its own list; one needing sigmoid does not.
    torchedge_compile(_AddRelu(), x, ExecutorchBackendConfig(kernel_set=kernel_set))
    with pytest.raises(ExportError, match="sigmoid"):
        torchedge_compile(_AddSigmoid(), x, ExecutorchBackendConfig(kernel_set=kernel_set))
