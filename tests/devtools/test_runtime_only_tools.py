"""The runtime-side tools in an install without torch, and `bench`'s memory figures.

`run`, `bench`, `profile`, `inspect` and the `Inspector` read and run `.pte` files and ETDumps:
device-side jobs that need NumPy only. The child process here refuses every import of torch.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from torchedge.cli.main import main
from torchedge.runtime import Runtime

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
GOLDEN_MLP = GOLDEN / "mlp.pte"

WITHOUT_TORCH = textwrap.dedent(
    """
    import sys

    class NoTorch:
        '''An install without torch: importing it (or torchao) fails as a missing package does.'''

        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("torch", "torchao"):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, NoTorch())

    from torchedge.cli.main import main
    from torchedge.devtools import Inspector

    pte, etdump = sys.argv[1:]
    for command in (["run", pte], ["bench", pte, "--repeat", "2"], ["profile", pte, "--repeat", "2"], ["inspect", pte]):
        status = main(command)
        assert status == 0, f"torchedge {command[0]} exited with {status}"
    inspector = Inspector(etdump_path=etdump)
    assert [s.operator for s in inspector.operator_stats()], "no operator in the dump"
    inspector.print_data_tabular()
    assert "torch" not in sys.modules
    print("ALL RAN")
    """
)


def test_runtime_side_commands_and_the_inspector_need_no_torch(tmp_path):
    etdump = tmp_path / "run.etdp"
    program = Runtime.get().load_program(GOLDEN_MLP, enable_etdump=True)
    with np.load(GOLDEN / "mlp.npz") as recorded:
        program.load_method().execute([recorded["forward/0/in0"]])
    program.write_etdump_result_to_file(etdump)

    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_TORCH, str(GOLDEN_MLP), str(etdump)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert result.stdout.rstrip().endswith("ALL RAN")
    assert "this command needs PyTorch" not in result.stderr


@pytest.fixture(scope="module")
def onnxruntime_pte(tmp_path_factory) -> str:
    """A program whose work all happens inside ONNX Runtime (planned memory: its inputs and outputs)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from torchedge.backends.onnxruntime import OnnxRuntimePartitioner
    from torchedge.exir import to_edge_transform_and_lower

    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 16)).eval()
    exported = torch.export.export(model, (torch.randn(64, 256),))
    program = to_edge_transform_and_lower(exported, partitioner=[OnnxRuntimePartitioner()]).to_executorch()
    path = tmp_path_factory.mktemp("ort") / "ort.pte"
    path.write_bytes(program.buffer)
    return str(path)


def test_bench_reports_the_process_peak_of_a_delegated_program(onnxruntime_pte, capsys):
    capsys.readouterr()
    assert main(["bench", onnxruntime_pte, "--repeat", "2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    own, process = report["memory_bytes"], report["process_rss"]
    assert own["peak"] == own["planned"] + own["runtime"]
    assert process["peak_of"] in ("runs", "process lifetime")
    if sys.platform == "win32":
        return  # no RSS figures there
    assert isinstance(process["peak_bytes"], int) and process["peak_bytes"] >= own["peak"]
    if process["peak_of"] == "runs" and process["loaded_bytes"] is not None:
        assert process["peak_bytes"] >= process["loaded_bytes"] > 0 and process["before_load_bytes"] > 0

    assert main(["bench", onnxruntime_pte, "--repeat", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    (process_line,) = [line for line in lines if line.startswith("peak memory (process")]
    assert process_line.count(" MB") >= 1
    if process["peak_of"] == "runs":
        for part in ("before loading the .pte", "loading it", "running it"):
            assert part in process_line
    assert any(line.startswith("torchedge's own: ") and "planned arenas" in line for line in lines)
