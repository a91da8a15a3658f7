"""User mistakes on the command line: one line ``torchedge <command>: error: ...``, no traceback, non-zero exit."""

import os
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest

from torchedge.cli.inputs import random_inputs
from torchedge.cli.main import build_parser, main
from torchedge.errors import MethodMissingError
from torchedge.runtime.method_meta import MethodMeta, TensorMeta

USER_MODELS = """
import torch


class Lookup(torch.nn.Module):
    def forward(self, x):
        table = {}
        return table['oops'] + x


def only_module():
    return torch.nn.Linear(2, 2)


def broken_forward():
    return Lookup(), (torch.ones(2, 3),)


def broken_factory():
    raise KeyError("oops")


def embedding():
    return torch.nn.Embedding(10, 4), (torch.zeros(2, 3, dtype=torch.long),)
"""


@pytest.fixture(scope="module")
def mlp_pte(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("mistakes") / "mlp.pte"
    assert main(["export", "mlp", "-o", str(path)]) == 0
    return str(path)


@pytest.fixture(scope="module")
def user_models(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("models") / "user_models.py"
    path.write_text(USER_MODELS)
    return str(path)


def one_error_line(err: str, command: str) -> str:
    """The one error line of stderr (progress lines ``[torchedge] ...`` aside)."""
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if not line.startswith("[torchedge]")]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"torchedge {command}: error: "), err
    return lines[0]


def fails(capsys, argv: list[str]) -> str:
    """Run a command that must fail with a user error; its error line."""
    capsys.readouterr()
    assert main(argv) == 2
    return one_error_line(capsys.readouterr().err, argv[0])


def usage_error(capsys, argv: list[str]) -> str:
    """Run a command line that argparse must refuse; its error line."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    return one_error_line(capsys.readouterr().err, argv[0])


def run_cli(*args: str, prelude: str = "", **kwargs) -> subprocess.CompletedProcess:
    """``torchedge ARGS`` in a fresh interpreter, after ``prelude``."""
    code = f"{prelude}\nimport sys\nfrom torchedge.cli.main import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, **kwargs)


# -- inputs -----------------------------------------------------------------------------------------------------


def test_inputs_from_npy_and_numpy_names(mlp_pte, tmp_path, capsys):
    x = np.ones((4, 32), np.float32)
    np.save(tmp_path / "x.npy", x)
    np.savez(tmp_path / "positional.npz", x)  # named arr_0
    np.savez(tmp_path / "named.npz", features=x)
    for name in ("x.npy", "positional.npz", "named.npz"):
        assert main(["run", mlp_pte, "--inputs", str(tmp_path / name), "--repeat", "1"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("output 0: float32 [4, 10]")


def test_inputs_with_other_names_are_taken_in_stored_order(tmp_path):
    from torchedge.cli.inputs import _read

    np.savez(tmp_path / "two.npz", b=np.zeros(2), a=np.ones(3))
    arrays = _read(str(tmp_path / "two.npz"))
    assert [a.shape for a in arrays] == [(2,), (3,)]
    np.savez(tmp_path / "numbered.npz", input_1=np.zeros(2), input_0=np.ones(3), input_10=np.ones(1))
    with pytest.raises(Exception, match="expected input_0 to input_2"):
        _read(str(tmp_path / "numbered.npz"))


def test_inputs_mistakes(mlp_pte, tmp_path, capsys):
    np.savez(tmp_path / "two.npz", b=np.zeros(2), a=np.ones(3))
    line = fails(capsys, ["run", mlp_pte, "--inputs", str(tmp_path / "two.npz")])
    assert "holds 2 array(s), method 'forward' takes 1 input(s)" in line
    assert "no such file" in fails(capsys, ["run", mlp_pte, "--inputs", str(tmp_path / "none.npz")])
    (tmp_path / "text.npz").write_text("not numpy")
    assert "cannot read" in fails(capsys, ["run", mlp_pte, "--inputs", str(tmp_path / "text.npz")])


def test_random_inputs_fit_the_signature():
    def meta(*inputs):
        return MethodMeta("forward", inputs, (), (), 0, ())

    def tensor(dtype, shape=(64,)):
        return TensorMeta(shape, np.dtype(dtype), tuple(range(len(shape))))

    ints, flags, floats, halves = random_inputs(
        meta(tensor(np.int64), tensor(np.bool_), tensor(np.float32), tensor(ml_dtypes.bfloat16)), seed=0
    )
    assert ints.dtype == np.int64 and set(np.unique(ints)) <= {0, 1}  # a valid index of any dimension
    assert flags.dtype == np.bool_ and floats.dtype == np.float32
    assert halves.dtype == ml_dtypes.bfloat16 and np.any(halves.astype(np.float32) % 1 != 0)  # not integers
    assert floats.std() > 0.5
    with pytest.raises(Exception, match="input 0 of method 'forward' is a int scalar.*--inputs"):
        random_inputs(meta(int), seed=0)


def test_run_an_embedding_on_random_inputs(user_models, tmp_path, capsys):
    pte = tmp_path / "embedding.pte"
    assert main(["export", f"{user_models}:embedding", "-o", str(pte)]) == 0
    assert main(["run", str(pte), "--repeat", "1"]) == 0
    assert "output 0: float32 [2, 3, 4]" in capsys.readouterr().out


# -- options ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["run", "PTE", "--repeat", "-1"], "--repeat: expected a whole number >= 0, got '-1'"),
        (["profile", "PTE", "--repeat", "0"], "--repeat: expected a whole number >= 1, got '0'"),
        (["bench", "PTE", "--warmup", "-1"], "--warmup: expected a whole number >= 0, got '-1'"),
        (["check", "mlp", "--tolerance", "nan"], "--tolerance: expected a number >= 0, got 'nan'"),
        (["export", "mlp", "--dynamic", "0:1"], "is not INPUT:DIM:MIN:MAX"),
        (["run"], "the following arguments are required: pte"),
    ],
)
def test_bad_option_values_are_one_line_usage_errors(mlp_pte, capsys, argv, expected):
    argv = [mlp_pte if a == "PTE" else a for a in argv]
    assert expected in usage_error(capsys, argv)


def test_every_option_and_command_has_help():
    def actions(parser):
        for action in parser._actions:
            if hasattr(action, "choices") and isinstance(action.choices, dict):  # the commands
                yield from action._choices_actions
                for command in action.choices.values():
                    yield from actions(command)
            else:
                yield action

    missing = [a.dest for a in actions(build_parser()) if not a.help]
    assert missing == []


def test_version(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"torchedge {version('torchedge')}"


def test_debug_shows_the_traceback(mlp_pte, capsys):
    assert "no method 'nope'" in fails(capsys, ["run", mlp_pte, "--method", "nope"])
    for argv in (["--debug", "run", mlp_pte, "--method", "nope"], ["run", mlp_pte, "--method", "nope", "--debug"]):
        with pytest.raises(MethodMissingError):
            main(argv)


# -- programs ---------------------------------------------------------------------------------------------------


def test_newer_format_version(mlp_pte, tmp_path, capsys):
    data = bytearray(open(mlp_pte, "rb").read())
    data[4:8] = b"ET13"
    newer = tmp_path / "newer.pte"
    newer.write_bytes(data)
    for command in ("run", "inspect"):
        line = fails(capsys, [command, str(newer)])
        assert "an ExecuTorch program of format version ET13, which torchedge does not read (it reads ET12)" in line


def test_closed_pipe_is_quiet(mlp_pte):
    for args in (["inspect", mlp_pte], ["kernels"]):
        code = "import sys\nfrom torchedge.cli.main import main\nsys.exit(main(sys.argv[1:]))"
        process = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        process.stdout.close()  # the reader goes away before the first line
        err = process.stderr.read().decode()
        assert process.wait(timeout=60) in (0, 141)
        assert err == ""


# -- models -----------------------------------------------------------------------------------------------------


def test_factory_mistakes(user_models, capsys):
    line = fails(capsys, ["export", f"{user_models}:missing"])
    assert "has no factory 'missing' (its functions: broken_factory, broken_forward, embedding, only_module)" in line
    line = fails(capsys, ["check", f"{user_models}:only_module"])
    assert "factory 'only_module' returned only the model (Linear); a factory returns (model, example_inputs)" in line
    line = fails(capsys, ["export", "no/such/file.py:factory"])
    assert "no such file: 'no/such/file.py'" in line
    assert "neither a file nor an importable module" in fails(capsys, ["export", "no_such_module:factory"])


def test_exception_in_the_users_model(user_models, capsys):
    line = fails(capsys, ["export", f"{user_models}:broken_forward"])
    assert "the model raised KeyError: 'oops' (at " in line
    line_of_lookup = USER_MODELS.splitlines().index("        return table['oops'] + x") + 1
    assert f"{user_models}:{line_of_lookup}, in forward)" in line
    line = fails(capsys, ["check", f"{user_models}:broken_factory"])
    assert "factory 'broken_factory' raised KeyError: 'oops' (at " in line and ", in broken_factory)" in line


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("0:5:1:8", "--dynamic 0:5:1:8: input 0 has 2 dimension(s) (shape [4, 32]), no dimension 5"),
        ("3:0:1:8", "--dynamic 3:0:1:8: no input 3, the model takes 1 input(s)"),
    ],
)
def test_dynamic_dimension_the_input_lacks(capsys, spec, expected):
    assert expected in fails(capsys, ["export", "mlp", "--dynamic", spec])


def test_aot_commands_without_torch(mlp_pte):
    block_torch = textwrap.dedent(
        """
        import sys

        class BlockTorch:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "torch":
                    raise ModuleNotFoundError(f"No module named '{name}'", name=name)

        sys.meta_path.insert(0, BlockTorch())
        """
    )
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    result = run_cli("export", "mlp", prelude=block_torch, env=env)
    assert result.returncode == 2
    line = one_error_line(result.stderr, "export")
    assert line.endswith("this command needs PyTorch (torch), which is not installed: pip install 'torchedge[aot]'")
    result = run_cli("run", mlp_pte, "--repeat", "1", prelude=block_torch, env=env)  # the runtime needs no torch
    assert result.returncode == 0 and result.stdout.startswith("output 0: float32 [4, 10]")


def test_missing_files(mlp_pte, tmp_path, capsys):
    assert "no such .pte file" in fails(capsys, ["run", str(tmp_path / "none.pte")])
    assert "is a directory, not a .pte file" in fails(capsys, ["inspect", str(tmp_path)])
    line = fails(capsys, ["generate", mlp_pte, "--tokenizer", str(tmp_path / "none.json"), "--prompt", "hi"])
    assert "none.json" in line


def test_a_bug_is_one_line_too(mlp_pte, monkeypatch, capsys):
    def broken(pte, png=None):
        raise RuntimeError("an invariant broke\nsecond line")

    monkeypatch.setattr("torchedge.devtools.describe.describe_memory", broken)
    assert main(["inspect", mlp_pte, "--memory"]) == 1
    line = one_error_line(capsys.readouterr().err, "inspect")
    assert "internal error: RuntimeError: an invariant broke [...] (a bug in torchedge; --debug shows" in line
