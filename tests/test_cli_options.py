"""The command line doing the whole job: export's backend, quantization, dtype, ETRecord and external
constants; --data-path, run --output, --repeat 0, compare; inspect's delegates and constants; the
messages for a typo'd option, a directory, a missing ONNX Runtime or tokenizers package.

Every result is checked against a reference the test makes itself: the eager model (quantized or cast
by the test, not by the command), `Method.execute` on the same inputs, the onnx package's reading of a
delegate's payload.
"""

import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest
import torch

from tests.conftest import relative_error
from tests.test_cli_mistakes import fails, usage_error
from torchedge.cli.main import main
from torchedge.models import load_model
from torchedge.runtime import Runtime
from torchedge.serialize import deserialize_pte

MLP_CONSTANT_BYTES = (32 * 64 + 64 + 64 * 64 + 64 + 64 * 10 + 10) * 4


def export(tmp_path, name: str, *options: str, model: str = "mlp") -> str:
    path = str(tmp_path / name)
    assert main(["export", model, "-o", path, *options]) == 0
    return path


def execute(pte: str, inputs: list, data_path=None) -> list:
    return Runtime.get().load_program(pte, data_path=data_path).load_method().execute(inputs)


def eager(model, inputs) -> np.ndarray:
    with torch.no_grad():
        return model(*inputs).float().numpy()


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("options")


@pytest.fixture(scope="module")
def mlp_pte(folder) -> str:
    return export(folder, "mlp.pte")


@pytest.fixture(scope="module")
def external(folder) -> tuple[str, str, str]:
    """The MLP exported with its constants in a .ptd and an ETRecord: (pte, ptd, etrecord)."""
    pte = export(folder, "ext.pte", "--external-constants", "--etrecord", str(folder / "ext.etrecord"))
    return pte, str(folder / "ext.ptd"), str(folder / "ext.etrecord")


@pytest.fixture(scope="module")
def ort_pte(folder) -> str:
    pytest.importorskip("onnx")
    return export(folder, "ort.pte", "--backend", "onnxruntime")


def mlp_example() -> tuple:
    model, inputs = load_model("mlp")
    return model.eval(), inputs


# -- export -----------------------------------------------------------------------------------------------------


def test_default_output_is_the_files_stem_or_the_modules_last_name(tmp_path, monkeypatch, capsys):
    source = textwrap.dedent(
        """
        import torch

        def make():
            return torch.nn.Linear(4, 2), (torch.ones(1, 4),)
        """
    )
    (tmp_path / "mymodel.py").write_text(source)
    package = tmp_path / "zoo"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "tiny.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["export", "mymodel.py:make"]) == 0
    assert main(["export", "zoo.tiny:make"]) == 0
    assert sorted(p.name for p in tmp_path.glob("*.pte")) == ["mymodel.pte", "tiny.pte"]
    out = execute(str(tmp_path / "tiny.pte"), [np.ones((1, 4), np.float32)])[0]
    torch.manual_seed(0)
    linear = torch.nn.Linear(4, 2)  # the factory's model under the seed export uses
    np.testing.assert_allclose(out, eager(linear, (torch.ones(1, 4),)), rtol=1e-6)


def test_onnxruntime_backend_delegates_and_matches_eager(ort_pte):
    program = deserialize_pte(open(ort_pte, "rb").read()).program
    assert [d.id for d in program.execution_plan[0].delegates] == ["OnnxRuntimeBackend"]
    model, inputs = mlp_example()
    out = execute(ort_pte, [inputs[0].numpy()])[0]
    assert relative_error(out, eager(model, inputs)) < 1e-5


def test_xnnpack_backend_writes_one_delegate_that_matches_eager(tmp_path, capsys):
    path = export(tmp_path, "x.pte", "--backend", "xnnpack", model="cnn")
    plan = deserialize_pte(open(path, "rb").read()).program.execution_plan[0]
    assert [d.id for d in plan.delegates] == ["XnnpackBackend"]
    model, inputs = load_model("cnn")
    got = Runtime.get().load_program(path).load_method().execute([t.numpy() for t in inputs])
    np.testing.assert_allclose(got[0], model(*inputs).detach().numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("recipe", ["int8-dynamic", "8da4w"])
def test_quantize_recipes_match_the_model_quantized_in_eager(tmp_path, recipe):
    quant_api = pytest.importorskip("torchao.quantization.quant_api")
    from torchao.quantization.granularity import PerAxis, PerGroup

    pte = export(tmp_path, "q.pte", "--quantize", recipe, "--group-size", "16")
    weight = (torch.int8, PerAxis(0)) if recipe == "int8-dynamic" else (torch.int4, PerGroup(16))
    model, inputs = mlp_example()
    reference = eager(model, inputs)
    quant_api.quantize_(
        model, quant_api.Int8DynamicActivationIntxWeightConfig(weight_dtype=weight[0], weight_granularity=weight[1])
    )
    quantized = eager(model, inputs)
    out = execute(pte, [inputs[0].numpy()])[0]
    assert relative_error(out, quantized) < 1e-5  # the quantized model's arithmetic
    assert relative_error(out, reference) > 1e-6  # and quantized it is


def test_quantize_mistakes(capsys):
    pytest.importorskip("torchao")
    line = fails(capsys, ["export", "mlp", "--quantize", "8da4w", "--group-size", "5"])
    assert "layer 'net.0' has 32 input features, which groups of --group-size 5 do not divide" in line
    assert "invalid choice: 'int3'" in usage_error(capsys, ["export", "mlp", "--quantize", "int3"])
    line = fails(capsys, ["export", "llama-kv", "--quantize", "8da4w"])
    assert "--quantize 8da4w: not available for the KV-cache model 'llama-kv' yet" in line


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_dtype_casts_the_model_and_its_inputs(tmp_path, capsys, dtype):
    pte = export(tmp_path, "cast.pte", "--dtype", dtype)
    assert main(["inspect", pte]) == 0
    assert f"inputs:  {dtype}[4, 32]" in capsys.readouterr().out
    model, inputs = mlp_example()
    target = getattr(torch, dtype)
    expected = eager(model.to(target), (inputs[0].to(target),))
    x = inputs[0].to(target).float().numpy().astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float16)
    out = execute(pte, [x])[0]
    assert out.dtype.name == dtype
    np.testing.assert_array_equal(out.astype(np.float32), expected)


def test_etrecord_records_the_example_and_debug_replays_it(external, capsys):
    from torchedge.devtools.etrecord import parse_etrecord

    pte, ptd, path = external
    etrecord = parse_etrecord(path)
    model, inputs = mlp_example()
    assert torch.equal(etrecord._representative_inputs[0], inputs[0])
    np.testing.assert_allclose(etrecord._reference_outputs["forward"][0][0].numpy(), eager(model, inputs), rtol=1e-6)
    capsys.readouterr()
    assert main(["debug", pte, "--etrecord", path, "--data-path", ptd]) == 0
    assert "first divergence: none" in capsys.readouterr().out


def test_external_constants_go_to_a_ptd_beside_the_pte(external, mlp_pte):
    pte, ptd, _ = external
    inside = len(open(mlp_pte, "rb").read())
    assert len(open(pte, "rb").read()) < inside - MLP_CONSTANT_BYTES // 2
    _, inputs = mlp_example()
    x = [inputs[0].numpy()]
    np.testing.assert_array_equal(execute(pte, x, data_path=ptd)[0], execute(mlp_pte, x)[0])


# -- --data-path, run --output, --repeat 0 ----------------------------------------------------------------------


def test_data_path_on_run_bench_profile(external, tmp_path, capsys):
    pte, ptd, _ = external
    model, inputs = mlp_example()
    np.save(tmp_path / "x.npy", inputs[0].numpy())
    out = tmp_path / "out.npz"
    assert main(["run", pte, "--data-path", ptd, "--inputs", str(tmp_path / "x.npy"), "--output", str(out)]) == 0
    assert relative_error(np.load(out)["output_0"], eager(model, inputs)) < 1e-5
    assert main(["bench", pte, "--data-path", ptd, "--repeat", "1", "--warmup", "0"]) == 0
    assert main(["profile", pte, "--data-path", ptd, "--repeat", "1"]) == 0
    assert "addmm" in capsys.readouterr().out


def test_missing_data_path_is_named(external, tmp_path, capsys):
    pte, _, _ = external
    line = fails(capsys, ["run", pte])
    assert "keeps 6 constant(s) outside itself, by key, in a .ptd file" in line and "--data-path FILE.ptd" in line
    assert "--data-path: no such .ptd file" in fails(capsys, ["run", pte, "--data-path", str(tmp_path / "no.ptd")])
    assert "--data-path: '" in fails(capsys, ["bench", pte, "--data-path", str(tmp_path)])


def test_run_output_saves_what_execute_returns(mlp_pte, tmp_path, capsys):
    x = np.random.default_rng(1).standard_normal((4, 32)).astype(np.float32)
    np.savez(tmp_path / "x.npz", input_0=x)
    out = tmp_path / "y.npz"
    assert main(["run", mlp_pte, "--inputs", str(tmp_path / "x.npz"), "--output", str(out), "--repeat", "0"]) == 0
    text = capsys.readouterr().out
    assert f"wrote {out} (1 output(s): output_0)" in text and "latency" not in text
    saved = np.load(out)
    assert saved.files == ["output_0"]
    np.testing.assert_array_equal(saved["output_0"], execute(mlp_pte, [x])[0])


def test_run_output_widens_bfloat16_exactly(tmp_path):
    from torchedge.cli.inputs import random_inputs

    pte = export(tmp_path, "bf16.pte", "--dtype", "bfloat16")
    method = Runtime.get().load_program(pte).load_method()
    expected = method.execute(random_inputs(method.meta, seed=5))[0]
    assert expected.dtype == ml_dtypes.bfloat16
    out = tmp_path / "y.npz"
    assert main(["run", pte, "--seed", "5", "--output", str(out), "--repeat", "0"]) == 0
    saved = np.load(out)["output_0"]  # no ml_dtypes needed to read it
    assert saved.dtype == np.float32
    np.testing.assert_array_equal(saved, expected.astype(np.float32))


def test_repeat_zero_runs_once_untimed(mlp_pte, capsys, monkeypatch):
    import json

    import torchedge.cli.run as run_module

    timed = []
    monkeypatch.setattr(run_module, "time_calls", lambda *a, **k: timed.append(1))
    capsys.readouterr()
    assert main(["run", mlp_pte, "--repeat", "0"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("output 0: float32 [4, 10]") and "latency" not in out
    assert main(["bench", mlp_pte, "--repeat", "0", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["latency_ms"] == {} and report["repeat"] == 0 and report["memory_bytes"]["planned"] > 0
    assert main(["bench", mlp_pte, "--repeat", "0"]) == 0
    assert "latency: not timed (--repeat 0: one untimed run)" in capsys.readouterr().out
    assert not timed
    assert "--repeat: expected a whole number >= 0, got '-1'" in usage_error(capsys, ["run", mlp_pte, "--repeat", "-1"])


# -- compare ----------------------------------------------------------------------------------------------------


def test_compare_a_program_with_itself_and_with_float16(mlp_pte, tmp_path, capsys):
    assert main(["compare", mlp_pte, mlp_pte]) == 0
    out = capsys.readouterr().out
    assert "max abs error 0, relative to max |A| 0: ok" in out and "PASS" in out
    half = export(tmp_path, "half.pte", "--dtype", "float16")
    x = np.random.default_rng(3).standard_normal((4, 32)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    a, b = execute(mlp_pte, [x])[0], execute(half, [x.astype(np.float16)])[0].astype(np.float32)
    gap = float(np.abs(a - b).max())
    capsys.readouterr()
    assert main(["compare", mlp_pte, half, "--inputs", str(tmp_path / "x.npy"), "--tolerance", "0.05"]) == 0
    assert f"max abs error {gap:.3g}, relative to max |A| {gap / np.abs(a).max():.3g}: ok" in capsys.readouterr().out
    assert main(["compare", mlp_pte, half, "--inputs", str(tmp_path / "x.npy"), "--tolerance", "0"]) == 1
    assert "ABOVE TOLERANCE" in capsys.readouterr().out


def test_compare_external_constants_and_a_signature_mismatch(mlp_pte, external, tmp_path, capsys):
    pte, ptd, _ = external
    assert main(["compare", mlp_pte, pte, "--data-path-b", ptd, "--seed", "4"]) == 0
    assert "PASS" in capsys.readouterr().out
    cnn = export(tmp_path, "cnn.pte", model="cnn")
    line = fails(capsys, ["compare", mlp_pte, cnn])
    assert "method 'forward' has different inputs: " in line and "float32[4, 32]" in line


# -- inspect ----------------------------------------------------------------------------------------------------


def test_inspect_says_where_the_constants_are(mlp_pte, external, capsys):
    pte, ptd, _ = external
    assert main(["inspect", mlp_pte]) == 0
    assert f"constants: 6 tensors, {MLP_CONSTANT_BYTES:,} bytes in the program's constant segment" in (
        capsys.readouterr().out
    )
    assert main(["inspect", pte]) == 0
    out = capsys.readouterr().out
    assert f"constants: 6 tensors, {MLP_CONSTANT_BYTES:,} bytes outside the program, by key in an external .ptd" in out
    assert "6 key(s) in no data file given (pass the .ptd with --data-path): net.0.bias" in out
    assert main(["inspect", pte, "--data-path", ptd]) == 0
    out = capsys.readouterr().out
    assert "    6 key(s) in ext.ptd" in out and f"data file {ptd}: 6 key(s), {MLP_CONSTANT_BYTES:,} bytes" in out


def test_inspect_shows_the_onnx_nodes_of_a_delegate(ort_pte, capsys):
    import onnx

    from torchedge.backends.onnxruntime.payload import read_payload

    pte = deserialize_pte(open(ort_pte, "rb").read())
    (delegate,) = pte.program.execution_plan[0].delegates
    model, _ = read_payload(pte.delegate_data(delegate), pte.named_data)  # the ONNX model, its large weights by key
    graph = onnx.load_model_from_string(model).graph
    kinds: dict[str, int] = {}
    for node in graph.node:
        kinds[node.op_type] = kinds.get(node.op_type, 0) + 1
    assert main(["inspect", ort_pte]) == 0
    out = capsys.readouterr().out
    assert "delegates: OnnxRuntimeBackend\n" in out
    assert f"ONNX graph: {len(graph.node)} nodes, {len(graph.input)} input(s), {len(graph.output)} output(s)" in out
    assert f"weights: {len(graph.initializer)} initializer(s)" in out
    for kind, count in kinds.items():
        assert f"{count:5d} x {kind}\n" in out
    assert "constants: 0 tensors, 0 bytes (the delegates carry their weights: see below)" in out


def test_inspect_groups_delegates_of_one_backend(tmp_path, capsys):
    pytest.importorskip("onnx")
    pytest.importorskip("torchao")
    pte = export(tmp_path, "many.pte", "--backend", "onnxruntime", "--dtype", "float16", "--quantize", "8da4w")
    delegates = [d.id for d in deserialize_pte(open(pte, "rb").read()).program.execution_plan[0].delegates]
    assert len(delegates) > 1 and set(delegates) == {"OnnxRuntimeBackend"}
    capsys.readouterr()
    assert main(["inspect", pte]) == 0
    assert f"  delegates: OnnxRuntimeBackend x{len(delegates)}\n" in capsys.readouterr().out


def test_memory_picture_names_blocks_and_fits_its_title(mlp_pte):
    pytest.importorskip("matplotlib")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.patches import Rectangle

    from torchedge.devtools.memory_picture import block_label, draw_plan
    from torchedge.runtime.memory_report import memory_report

    plan = deserialize_pte(open(mlp_pte, "rb").read()).program.execution_plan[0]
    (usage,) = memory_report(plan)
    figure = draw_plan(plan, usage)
    axes = figure.axes[0]
    labels = [t.get_text() for t in axes.texts]
    assert len(labels) == len([p for p in axes.patches if isinstance(p, Rectangle)]) == len(usage.tensors)
    assert labels == [block_label(t, plan) for t in usage.tensors]
    assert "input 0" in labels and any(label.endswith(" addmm") for label in labels)
    renderer = FigureCanvasAgg(figure).get_renderer()
    figure.draw(renderer)
    title = axes.title.get_window_extent(renderer)
    assert 0 <= title.x0 and title.x1 <= figure.bbox.x1


# -- messages ---------------------------------------------------------------------------------------------------


def test_a_typod_option_names_the_closest_and_the_commands_help(mlp_pte, capsys):
    line = usage_error(capsys, ["run", mlp_pte, "--repeet", "3"])
    assert "unrecognized arguments: --repeet 3; did you mean --repeat?" in line
    assert line.endswith("(see 'torchedge run --help')")
    line = usage_error(capsys, ["export", "mlp", "--quantise=8da4w", "--dtipe", "float16"])
    assert "did you mean --quantize or --dtype?" in line and "(see 'torchedge export --help')" in line
    line = usage_error(capsys, ["inspect", mlp_pte, "--zzzzzz"])
    assert "unrecognized arguments: --zzzzzz (see 'torchedge inspect --help')" in line


def test_a_directory_is_not_a_pte(tmp_path, capsys):
    for command in ("run", "bench", "inspect"):
        assert f"'{tmp_path}' is a directory, not a .pte file" in fails(capsys, [command, str(tmp_path)])


def test_missing_onnxruntime_says_what_to_install(ort_pte, capsys, monkeypatch):
    from torchedge.backends.onnxruntime.runtime import OnnxRuntimeDelegate

    monkeypatch.setattr(OnnxRuntimeDelegate, "is_available", lambda self: False)
    line = fails(capsys, ["run", ort_pte, "--repeat", "0"])
    assert "needs ONNX Runtime, which is not installed: pip install 'torchedge[onnxruntime]'" in line


def test_missing_tokenizers_is_not_a_bad_file(mlp_pte, tmp_path, capsys, monkeypatch):
    tokenizer = tmp_path / "tokenizer.json"
    tokenizer.write_text("{}")
    monkeypatch.setitem(sys.modules, "tokenizers", None)  # import tokenizers -> ImportError
    line = fails(capsys, ["generate", mlp_pte, "--tokenizer", str(tokenizer), "--prompt", "hi"])
    assert "needs the 'tokenizers' package, which is not installed: pip install 'torchedge[generation]'" in line
    assert "is not a tokenizer.json" not in line


def test_export_shows_no_third_party_notices(tmp_path):
    """torch's deprecation notices and torchao's library loading lines stay off the command line."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "torchedge.cli", "export", "mlp", "-o", str(tmp_path / "m.pte")],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    noise = [line for line in done.stderr.splitlines() if not line.startswith("[torchedge]")]
    assert noise == []
