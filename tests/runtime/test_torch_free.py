"""The runtime half must never import torch or the AOT compiler."""

import subprocess
import sys

CHECK = """
import sys
import torchedge.runtime, torchedge.kernels.portable, torchedge.serialize, torchedge.schema
from torchedge.devtools.describe import describe_program
import torchedge.cli.main
bad = sorted(m for m in sys.modules if m == "torch" or m.startswith("torch.") or m.startswith("torchedge.exir")
             or m.startswith("executorch"))
print(",".join(bad))
"""


def test_runtime_imports_no_torch():
    result = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "", f"runtime imported: {result.stdout.strip()}"
