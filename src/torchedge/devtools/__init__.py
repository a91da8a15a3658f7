"""Developer tools: the Inspector (reads ETDumps with NumPy only), ETRecord, bundled programs, the
numeric debugger, kernel checks and coverage reports. Only the Inspector is imported here: the
other modules need torch (``torchedge.devtools.etrecord``, ``torchedge.devtools.bundled_program``).
"""

from torchedge.devtools.inspector import Inspector

__all__ = ["Inspector"]
