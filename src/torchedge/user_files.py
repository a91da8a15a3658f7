"""Telling the user's source files from the libraries' (torch, torchedge, the standard library):
error messages and the numeric debugger name the innermost frame in the user's own code."""

from __future__ import annotations

import os
import sysconfig
from functools import cache

import torchedge

__all__ = ["is_user_file"]


@cache
def _library_dirs() -> tuple[str, ...]:
    dirs = [os.path.dirname(torchedge.__file__)]
    try:
        import torch

        dirs.append(os.path.dirname(torch.__file__))
    except ImportError:
        pass
    dirs += [sysconfig.get_path(name) for name in ("stdlib", "platstdlib")]
    return tuple(os.path.join(os.path.realpath(d), "") for d in dirs if d)


def is_user_file(filename: str) -> bool:
    """Whether ``filename`` is a real file (not ``<string>`` or generated code) outside the libraries."""
    return not filename.startswith("<") and not os.path.realpath(filename).startswith(_library_dirs())
