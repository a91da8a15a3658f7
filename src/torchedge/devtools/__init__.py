"""The user's developer tools, with ExecuTorch's names (``executorch.devtools``), so scripts port.

* `Inspector`: what an ETDump says about a run (timings per operator, logged outputs). It
  reads ETDumps with NumPy only, so ``from torchedge.devtools import Inspector`` needs no torch.
* `ETRecord`, `generate_etrecord`, `parse_etrecord`: what the compiler knew, saved with a
  program so that a run's events can be named and checked later.
* `BundledProgram`, `MethodTestSuite`, `MethodTestCase`,
  `serialize_from_bundled_program_to_flatbuffer`, `deserialize_from_flatbuffer_to_bundled_program`:
  a program bundled with its test cases (a ``.bpte``).
* `numeric_gaps`, `first_divergence`, `GapRow`, `Divergence`: a run's intermediate outputs
  against eager (`Inspector.calculate_numeric_gap`, `Inspector.first_divergence`).

Every name but `Inspector` needs torch and is imported on first use. The modules beside these
(`describe`, `timing`, `chrome_trace`, `kernel_coverage`, ...) serve the ``torchedge`` commands.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from torchedge.devtools.inspector import Inspector

if TYPE_CHECKING:
    from torchedge.devtools.bundled_program import (
        BundledProgram,
        MethodTestCase,
        MethodTestSuite,
        deserialize_from_flatbuffer_to_bundled_program,
        serialize_from_bundled_program_to_flatbuffer,
    )
    from torchedge.devtools.etrecord import ETRecord, generate_etrecord, parse_etrecord
    from torchedge.devtools.numeric_gap import Divergence, GapRow, first_divergence, numeric_gaps

__all__ = [
    "Inspector",
    "ETRecord",
    "generate_etrecord",
    "parse_etrecord",
    "BundledProgram",
    "MethodTestSuite",
    "MethodTestCase",
    "serialize_from_bundled_program_to_flatbuffer",
    "deserialize_from_flatbuffer_to_bundled_program",
    "numeric_gaps",
    "first_divergence",
    "GapRow",
    "Divergence",
]

# The names that need torch -> the module that defines them, imported on first use (PEP 562).
_LAZY = {
    "ETRecord": "torchedge.devtools.etrecord",
    "generate_etrecord": "torchedge.devtools.etrecord",
    "parse_etrecord": "torchedge.devtools.etrecord",
    "BundledProgram": "torchedge.devtools.bundled_program",
    "MethodTestSuite": "torchedge.devtools.bundled_program",
    "MethodTestCase": "torchedge.devtools.bundled_program",
    "serialize_from_bundled_program_to_flatbuffer": "torchedge.devtools.bundled_program",
    "deserialize_from_flatbuffer_to_bundled_program": "torchedge.devtools.bundled_program",
    "numeric_gaps": "torchedge.devtools.numeric_gap",
    "first_divergence": "torchedge.devtools.numeric_gap",
    "GapRow": "torchedge.devtools.numeric_gap",
    "Divergence": "torchedge.devtools.numeric_gap",
}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
