"""The portable kernels must load without torch (the runtime's NumPy-only promise)."""

import subprocess
import sys

CHECK = """
import sys
import torchedge.kernels.portable
from torchedge.kernels.registry import registered_operators
assert len(registered_operators()) > 100
print(",".join(sorted(m for m in sys.modules if m == "torch" or m.startswith(("torch.", "torchedge.exir")))))
"""


def test_portable_kernels_import_without_torch():
    result = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "", f"importing the portable kernels imported: {result.stdout.strip()}"
