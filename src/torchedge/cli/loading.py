"""Loading the program a command names: a path that is a directory or a missing file said plainly,
and the .ptd data files (``--data-path``) loaded with it."""

from __future__ import annotations

import os
from collections.abc import Sequence

from torchedge.errors import TorchEdgeError

__all__ = ["check_program_path", "check_data_paths", "load_program"]


def check_program_path(path: str) -> None:
    """A directory is not a program (a missing file: the runtime's loader says so)."""
    if os.path.isdir(path):
        raise TorchEdgeError(f"'{path}' is a directory, not a .pte file")


def check_data_paths(paths: Sequence[str], option: str = "--data-path") -> list[str]:
    """Each ``--data-path`` is a file; a missing one or a directory is named with its option."""
    for path in paths:
        if os.path.isdir(path):
            raise TorchEdgeError(f"{option}: '{path}' is a directory, not a .ptd file")
        if not os.path.isfile(path):
            raise TorchEdgeError(f"{option}: no such .ptd file: '{path}'")
    return list(paths)


def load_program(path: str, data_paths: Sequence[str] = (), option: str = "--data-path", **kwargs):
    """The runtime's `Program` of ``path`` with its data files; ``kwargs`` go to `Runtime.load_program`."""
    from torchedge.runtime import Runtime

    check_program_path(path)
    data = check_data_paths(list(data_paths), option)
    program = Runtime.get().load_program(path, data_path=data or None, **kwargs)
    _check_external_constants(program, path, data, option)
    return program


def _check_external_constants(program, path: str, data: list[str], option: str) -> None:
    """Every constant the program keeps outside itself is in a data file given: else say which option."""
    from torchedge.devtools.describe import external_constant_keys
    from torchedge.runtime.data_loader import loader_for
    from torchedge.serialize.ptd import read_ptd

    keys = external_constant_keys(program.pte.program)
    if not keys:
        return
    held = {key for d in data for key in read_ptd(loader_for(d).data, f"'{d}'").data}
    missing = [k for k in keys if k not in held]
    if not missing:
        return
    shown = ", ".join(missing[:5]) + (", ..." if len(missing) > 5 else "")
    if not data:
        raise TorchEdgeError(
            f"'{path}' keeps {len(keys)} constant(s) outside itself, by key, in a .ptd file ({shown}): "
            f"pass that file with {option} FILE.ptd"
        )
    raise TorchEdgeError(
        f"'{path}' keeps {len(keys)} constant(s) outside itself, by key; the .ptd file(s) given "
        f"({', '.join(data)}) lack {len(missing)} of them ({shown}): pass the .ptd that holds them with {option}"
    )
