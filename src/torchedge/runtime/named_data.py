"""`NamedDataMap`: the blobs delegates and external tensors find by key.

A program may store data under string keys instead of inside a delegate's payload: in its own
segments (`program.named_data`, as ExecuTorch's XNNPACK backend stores weights) or in `.ptd`
files loaded beside it. One map holds them all; a key stored twice is an error, since which
blob a delegate would read would then depend on the order the files were given in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from torchedge.errors import InvalidProgramError

__all__ = ["NamedDataMap"]


class NamedDataMap:
    """``sources``: (where, keys, read) per source, ``read(key)`` giving the key's bytes."""

    def __init__(self, sources: Iterable[tuple[str, Iterable[str], Callable[[str], memoryview]]] = ()):
        self._where: dict[str, tuple[str, Callable[[str], memoryview]]] = {}
        for where, keys, read in sources:
            for key in keys:
                if key in self._where:
                    raise InvalidProgramError(
                        f"named data '{key}' is stored twice: in {self._where[key][0]} and in {where}"
                    )
                self._where[key] = (where, read)

    def __contains__(self, key: str) -> bool:
        return key in self._where

    def __len__(self) -> int:
        return len(self._where)

    def keys(self) -> list[str]:
        return list(self._where)

    def get(self, key: str) -> memoryview:
        """The bytes stored under ``key``; an `InvalidProgramError` naming the key if none."""
        found = self._where.get(key)
        if found is None:
            raise InvalidProgramError(
                f"no named data '{key}' in the program or the data files loaded with it "
                f"({len(self._where)} keys known); pass the .ptd file that holds it as data_path"
            )
        return found[1](key)
