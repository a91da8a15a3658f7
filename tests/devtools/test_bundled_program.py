"""Bundled programs (.bpte): torchedge's files on the real ExecuTorch 1.5.1 and ExecuTorch's files on torchedge.

The models have integer-valued weights and inputs, so every output is exact in float32 and every
passing case passes at any tolerance (the tests also run them with rtol = atol = 0); a changed
expected output is off by 0.5, far outside any tolerance.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch

from torchedge.cli.main import main
from torchedge.devtools.bundled_program import (
    BundledProgram,
    MethodTestCase,
    MethodTestSuite,
    deserialize_from_flatbuffer_to_bundled_program,
    serialize_from_bundled_program_to_flatbuffer,
)
from torchedge.errors import InputError, InvalidProgramError, MethodMissingError
from torchedge.exir import to_edge
from torchedge.runtime.bundled_compare import compare_output
from torchedge.runtime.bundled_program import OutputMismatchError, load_bundled_program
from torchedge.schema import bundled_program as bp
from torchedge.serialize.bundled_program import deserialize_bundled_program, serialize_bundled_program
from torchedge.serialize.bundled_values import array_from_tensor, tensor_from_array

WRONG_CASE = 1  # the test case whose expected output is changed


class Scale(torch.nn.Module):
    def forward(self, x):
        return x * 3 + 1


def integer_mlp() -> torch.nn.Module:
    """A 2-layer MLP with small integer weights: its float32 outputs are exact."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randint(-3, 4, p.shape, dtype=torch.float32))
    return model


@pytest.fixture(scope="module")
def mlp():
    model = integer_mlp()
    generator = torch.Generator().manual_seed(1)
    samples = [torch.randint(-4, 5, (2, 4), generator=generator).float() for _ in range(3)]
    with torch.no_grad():
        expected = [model(x) for x in samples]
    return model, samples, expected


def mlp_cases(mlp, wrong: int | None = None, case_type=MethodTestCase):
    _, samples, expected = mlp
    cases = []
    for i, (x, y) in enumerate(zip(samples, expected)):
        if i == wrong:
            y = y.clone()
            y[0, 1] += 0.5
        cases.append(case_type(inputs=(x,), expected_outputs=(y,)))
    return cases


@pytest.fixture(scope="module")
def torchedge_mlp(mlp):
    model, samples, _ = mlp
    return to_edge(torch.export.export(model, (samples[0],))).to_executorch()


@pytest.fixture(scope="module")
def torchedge_two_methods(mlp):
    """forward (the MLP), scale (int64) and a constant method n_layers (an Int output)."""
    model, samples, _ = mlp
    programs = {
        "forward": torch.export.export(model, (samples[0],)),
        "scale": torch.export.export(Scale(), (torch.arange(6).reshape(2, 3),)),
    }
    return to_edge(programs, constant_methods={"n_layers": 2}).to_executorch()


@pytest.fixture(scope="module")
def torchedge_bpte(mlp, torchedge_mlp) -> bytes:
    bundle = BundledProgram(torchedge_mlp, [MethodTestSuite("forward", mlp_cases(mlp))])
    return serialize_from_bundled_program_to_flatbuffer(bundle)


@pytest.fixture(scope="module")
def two_methods_bpte(mlp, torchedge_two_methods) -> bytes:
    ints = [torch.arange(6).reshape(2, 3), torch.tensor([[-5, 0, 7], [1, 2, 3]])]
    suites = [  # deliberately not in name order: stored sorted, as ExecuTorch does
        MethodTestSuite("scale", [MethodTestCase((x,), (x * 3 + 1,)) for x in ints]),
        MethodTestSuite("forward", mlp_cases(mlp)[:2]),
    ]
    return serialize_from_bundled_program_to_flatbuffer(BundledProgram(torchedge_two_methods, suites))


@pytest.fixture(scope="module")
def executorch_bpte(mlp):
    """ExecuTorch-made bundles of the MLP: (all correct, case WRONG_CASE changed)."""
    pytest.importorskip("executorch")
    from executorch.devtools.bundled_program import config, core
    from executorch.devtools.bundled_program.serialize import serialize_from_bundled_program_to_flatbuffer as et_ser
    from executorch.exir import to_edge as et_to_edge

    model, samples, _ = mlp
    program = et_to_edge(torch.export.export(model, (samples[0],))).to_executorch()

    def bundle(wrong):
        suite = config.MethodTestSuite("forward", mlp_cases(mlp, wrong, config.MethodTestCase))
        return et_ser(core.BundledProgram(program, [suite]))

    return bundle(None), bundle(WRONG_CASE)


def et_bundled_module(data: bytes):
    portable_lib = pytest.importorskip("executorch.extension.pybindings.portable_lib")
    return portable_lib._load_bundled_program_from_buffer(data)


# -- torchedge's .bpte on ExecuTorch ---------------------------------------------------------


@pytest.mark.parametrize("which", ["torchedge_bpte", "two_methods_bpte"])
def test_executorch_decodes_torchedge_bpte(request, which):
    pytest.importorskip("executorch")
    from executorch.devtools.bundled_program.serialize import deserialize_from_flatbuffer_to_bundled_program as et_de

    data = request.getfixturevalue(which)
    ours, theirs = deserialize_bundled_program(data), et_de(data)
    assert theirs.version == ours.version == 2
    assert bytes(theirs.program) == bytes(ours.program)
    assert [s.method_name for s in theirs.method_test_suites] == [s.method_name for s in ours.method_test_suites]
    for suite, et_suite in zip(ours.method_test_suites, theirs.method_test_suites):
        assert len(suite.test_cases) == len(et_suite.test_cases)
        for case, et_case in zip(suite.test_cases, et_suite.test_cases):
            for values, et_values in ((case.inputs, et_case.inputs), (case.expected_outputs, et_case.expected_outputs)):
                assert len(values) == len(et_values)
                for value, et_value in zip(values, et_values):
                    t, et = value.val, et_value.val
                    assert (int(t.scalar_type), t.sizes, list(t.dim_order)) == (
                        int(et.scalar_type),
                        list(et.sizes),
                        list(et.dim_order),
                    )
                    assert bytes(t.data) == bytes(et.data)


def test_torchedge_bpte_program_is_the_pte(torchedge_bpte, torchedge_mlp):
    decoded = deserialize_from_flatbuffer_to_bundled_program(torchedge_bpte)
    assert bytes(decoded.program) == torchedge_mlp.buffer


def test_executorch_runtime_verifies_torchedge_bpte(mlp, torchedge_bpte, two_methods_bpte):
    _, _, expected = mlp
    module = et_bundled_module(torchedge_bpte)
    for i, want in enumerate(expected):
        outputs = module.verify_result_with_bundled_expected_output("forward", i, rtol=0.0, atol=0.0)
        np.testing.assert_array_equal(outputs[0].numpy(), want.numpy())
    module = et_bundled_module(two_methods_bpte)
    for name, count in (("forward", 2), ("scale", 2)):
        for i in range(count):
            module.verify_result_with_bundled_expected_output(name, i)


def test_executorch_runtime_rejects_torchedge_bpte_with_a_wrong_case(mlp, torchedge_mlp):
    bundle = BundledProgram(torchedge_mlp, [MethodTestSuite("forward", mlp_cases(mlp, WRONG_CASE))])
    module = et_bundled_module(serialize_from_bundled_program_to_flatbuffer(bundle))
    for i in range(3):
        if i == WRONG_CASE:
            with pytest.raises(RuntimeError):
                module.verify_result_with_bundled_expected_output("forward", i)
        else:
            module.verify_result_with_bundled_expected_output("forward", i)


# -- ExecuTorch's .bpte on torchedge ---------------------------------------------------------


def test_torchedge_verifies_executorch_bpte(executorch_bpte):
    bundle = load_bundled_program(executorch_bpte[0])
    for rtol, atol in ((1e-5, 1e-8), (0.0, 0.0)):
        results = bundle.verify(rtol=rtol, atol=atol)
        assert [(r.method_name, r.index, r.passed, r.max_abs_error) for r in results] == [
            ("forward", i, True, 0.0) for i in range(3)
        ]


def test_wrong_expected_output_is_exactly_the_failing_case(executorch_bpte):
    bundle = load_bundled_program(executorch_bpte[1])
    results = bundle.verify()
    assert [r.passed for r in results] == [i != WRONG_CASE for i in range(3)]
    failed = results[WRONG_CASE]
    assert failed.max_abs_error == 0.5
    assert failed.message.startswith("output 0: 1 of 6 elements differ")
    with pytest.raises(OutputMismatchError, match=f"test case {WRONG_CASE}.*max abs error 0.5"):
        bundle.verify_result_with_bundled_expected_output("forward", WRONG_CASE)
    module = et_bundled_module(executorch_bpte[1])  # the oracle agrees
    with pytest.raises(RuntimeError):
        module.verify_result_with_bundled_expected_output("forward", WRONG_CASE)


def test_load_bundled_input_then_verify(mlp, executorch_bpte):
    _, samples, expected = mlp
    bundle = load_bundled_program(executorch_bpte[0])
    assert bundle.method_names == ["forward"] and bundle.program.method_names == ["forward"]
    method = bundle.program.load_method("forward")
    inputs = bundle.load_bundled_input(method, "forward", 2)
    np.testing.assert_array_equal(inputs[0], samples[2].numpy())
    outputs = method.execute(inputs)
    assert bundle.verify_result_with_bundled_expected_output("forward", 2, outputs=outputs) is outputs
    np.testing.assert_array_equal(bundle.verify_result_with_bundled_expected_output("forward", 0)[0], expected[0])
    with pytest.raises(InputError, match="test case index 3 is out of range"):
        bundle.verify_result_with_bundled_expected_output("forward", 3)
    with pytest.raises(MethodMissingError, match="no test suite for method 'backward'"):
        bundle.load_bundled_input(method, "backward", 0)


# -- scalars, dtypes, layouts ----------------------------------------------------------------


def test_scalar_outputs_compare_exactly_and_cases_without_expected_outputs(torchedge_two_methods):
    suites = [MethodTestSuite("n_layers", [MethodTestCase((), (2,)), MethodTestCase((), (3,)), MethodTestCase(())])]
    data = serialize_from_bundled_program_to_flatbuffer(BundledProgram(torchedge_two_methods, suites))
    bundle = load_bundled_program(data)
    results = bundle.verify()
    assert [(r.passed, r.max_abs_error) for r in results[:2]] == [(True, 0.0), (False, 1.0)]
    assert results[2].passed is None and "no expected outputs" in results[2].message
    with pytest.raises(InputError, match="no expected outputs"):
        bundle.verify_result_with_bundled_expected_output("n_layers", 2)


def test_compare_follows_executorch():
    one = np.ones(3, np.float32)
    assert compare_output(one, one + np.float32(1e-6)).ok  # within atol + rtol * |expected| = 1e-5
    assert not compare_output(one, one + np.float32(1e-3)).ok
    special = np.array([np.nan, np.inf, -np.inf], np.float32)
    assert compare_output(special, special.copy()).ok
    assert not compare_output(special, special[::-1].copy()).ok
    assert not compare_output(one, one.astype(np.float64)).ok  # dtypes must match
    zeros = np.zeros(2, ml_dtypes.bfloat16)
    assert not compare_output(zeros, -zeros).ok  # bfloat16 is compared bit for bit, as ExecuTorch
    assert compare_output(2.5, 2.5).ok and not compare_output(True, 1).ok


def test_tensor_layouts_and_bfloat16_match_torch():
    from torchedge.devtools.bundled_program import _value

    torch.manual_seed(0)
    t = torch.randn(1, 3, 2, 2).to(memory_format=torch.channels_last)
    tensor = _value(t).val
    assert tensor.dim_order == [0, 2, 3, 1]
    assert bytes(tensor.data) == t.permute(0, 2, 3, 1).contiguous().numpy().tobytes()
    np.testing.assert_array_equal(array_from_tensor(tensor, "x"), t.numpy())
    b = torch.randn(5).to(torch.bfloat16)
    tensor = _value(b).val
    assert bytes(tensor.data) == b.view(torch.int16).numpy().tobytes()
    back = array_from_tensor(tensor, "x")
    assert back.dtype == ml_dtypes.bfloat16 and back.view(np.int16).tolist() == b.view(torch.int16).tolist()


# -- the codec ------------------------------------------------------------------------------


def test_reencoding_reproduces_the_bytes(torchedge_bpte, two_methods_bpte, executorch_bpte):
    for data in (torchedge_bpte, two_methods_bpte, *executorch_bpte):
        decoded = deserialize_bundled_program(data)
        assert serialize_bundled_program(decoded) == data
        assert decoded.program.obj is data  # the wrapped program is a view, not a copy


def test_malformed_files_raise_typed_errors(torchedge_bpte, torchedge_mlp):
    # Every cut loses needed bytes but the last one (the method name's terminating NUL, which is not read).
    for cut in [*range(0, len(torchedge_bpte) - 1, 7), len(torchedge_bpte) - 2]:
        with pytest.raises(InvalidProgramError):
            load_bundled_program(torchedge_bpte[:cut]).verify()
    with pytest.raises(InvalidProgramError, match="found the .pte identifier b'ET12'"):
        load_bundled_program(torchedge_mlp.buffer)
    corrupt = bytearray(torchedge_bpte)
    corrupt[0:4] = (len(corrupt) + 8).to_bytes(4, "little")
    with pytest.raises(InvalidProgramError, match="^BundledProgram: offset at 0 points to"):
        deserialize_bundled_program(bytes(corrupt))
    short = bp.Tensor(tensor_from_array(np.zeros((2, 4), np.float32)).scalar_type, [2, 4], b"\0" * 16, [0, 1])
    bad = bp.BundledProgram(
        2, [bp.BundledMethodTestSuite("forward", [bp.BundledMethodTestCase([bp.Value(short)])])], torchedge_mlp.buffer
    )
    with pytest.raises(InvalidProgramError, match="test case 0, input 0: a Float\\[2, 4\\] tensor needs 32 bytes"):
        load_bundled_program(serialize_bundled_program(bad)).verify()
    bad.method_test_suites[0].method_name = "backward"
    with pytest.raises(InvalidProgramError, match="tests method 'backward'"):
        load_bundled_program(serialize_bundled_program(bad))


def test_bundling_checks_the_signature(mlp, torchedge_mlp):
    _, samples, expected = mlp
    x, y = samples[0], expected[0]

    def bundle(*cases, method="forward"):
        return BundledProgram(torchedge_mlp, [MethodTestSuite(method, list(cases))])

    with pytest.raises(MethodMissingError, match="method 'backward'"):
        bundle(MethodTestCase((x,)), method="backward")
    with pytest.raises(InputError, match="input 0: expected dtype torch.float32, got torch.float64"):
        bundle(MethodTestCase((x.double(),)))
    with pytest.raises(InputError, match="input 0: expected shape \\[2, 4\\], got \\[3, 4\\]"):
        bundle(MethodTestCase((torch.zeros(3, 4),)))
    with pytest.raises(InputError, match="the method has 1 inputs, got 2"):
        bundle(MethodTestCase((x, x)))
    with pytest.raises(InputError, match="expected output 0: expected Tensor, got int"):
        bundle(MethodTestCase((x,), (3,)))
    with pytest.raises(InputError, match="expected a tensor, int, float or bool, got str"):
        MethodTestCase((x, "x"))
    assert bundle(MethodTestCase([x])).method_test_suites[0].test_cases[0].expected_outputs == []  # optional
    bundle(MethodTestCase({"x": x}, [y]))  # containers are flattened


# -- the CLI ---------------------------------------------------------------------------------


def test_cli_run_verifies_a_bpte(tmp_path, capsys, torchedge_bpte, executorch_bpte):
    good, bad = tmp_path / "good.bpte", tmp_path / "bad.bin"  # recognised by identifier, not suffix
    good.write_bytes(torchedge_bpte)
    bad.write_bytes(executorch_bpte[1])
    assert main(["run", str(good)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == [f"forward test case {i}: pass, max abs error 0" for i in range(3)]
    assert lines[3] == "3 test cases of 1 method(s): 3 passed, 0 failed"
    assert main(["run", str(bad)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[1].split(",")[0].strip() for line in lines[:3]] == ["pass", "FAIL", "pass"]
    assert lines[WRONG_CASE].startswith(f"forward test case {WRONG_CASE}: FAIL, max abs error 0.5: output 0: ")


def test_cli_run_bpte_mistakes(tmp_path, capsys, torchedge_bpte):
    truncated = tmp_path / "truncated.bpte"
    truncated.write_bytes(torchedge_bpte[: len(torchedge_bpte) // 2])
    for argv, error in (
        (["run", str(truncated)], "torchedge run: error: BundledProgram"),
        (["run", str(truncated), "--inputs", "x.npz"], "torchedge run: error: " + str(truncated) + " is a bundled"),
    ):
        capsys.readouterr()
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1
        assert err.startswith(error), err
