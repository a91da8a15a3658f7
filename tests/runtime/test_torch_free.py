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


LAZY = """
import sys
import numpy as np
import torchedge.runtime
assert "ml_dtypes" not in sys.modules, "import torchedge.runtime loaded ml_dtypes"
from torchedge.runtime import Runtime
from torchedge.schema.scalar_type import ScalarType, numpy_dtype, scalar_type_of
bfloat16 = numpy_dtype(ScalarType.BFLOAT16)  # loads ml_dtypes on first use
assert bfloat16.name == "bfloat16" and scalar_type_of(bfloat16) == ScalarType.BFLOAT16
print("ok")
"""


def test_optional_dtypes_load_when_first_needed():
    """ml_dtypes (about half a second to import) loads with the first bfloat16, not with the runtime."""
    result = subprocess.run([sys.executable, "-c", LAZY], capture_output=True, text=True)
    assert result.stdout.strip() == "ok", result.stderr
