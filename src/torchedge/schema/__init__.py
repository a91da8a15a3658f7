"""The `.pte` program schema as plain Python data (no torch, no flatbuffers)."""

from torchedge.schema.program import *  # noqa: F401,F403
from torchedge.schema.program import __all__ as _program_all
from torchedge.schema.scalar_type import ScalarType

__all__ = [*_program_all, "ScalarType"]
