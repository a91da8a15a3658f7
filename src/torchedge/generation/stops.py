"""`StopText`: generated text cut at the first stop string, released only once it cannot start one."""

from __future__ import annotations

from collections.abc import Sequence

from torchedge.errors import InputError

__all__ = ["StopText"]


class StopText:
    """Text as it arrives, cut before the first stop string; `push` returns what is safe to show.

    Text that may be the start of a stop string is held back until what follows shows whether
    it is one; `flush` releases it at the end when no stop string completed.
    """

    def __init__(self, stop: Sequence[str]):
        if isinstance(stop, str) or not all(isinstance(s, str) and s for s in stop):
            raise InputError(f"stop strings must be a list of non-empty strings, got {stop!r}")
        self.stop = tuple(stop)
        self.text = ""
        self.stopped = False
        self._sent = 0

    def push(self, piece: str) -> str:
        """Add ``piece``; the text that is now safe to show ('' while it may begin a stop string)."""
        if self.stopped:
            return ""
        self.text += piece
        # a stop string cannot end inside what was shown already, so the search starts just before it
        found = [self.text.find(s, max(0, self._sent - len(s) + 1)) for s in self.stop]
        cut = min((i for i in found if i >= 0), default=-1)
        if cut >= 0:
            self.text, self.stopped = self.text[:cut], True
            return self._release(cut)
        return self._release(len(self.text) - max((_prefix_at_end(self.text, s) for s in self.stop), default=0))

    def flush(self) -> str:
        """What is still held back (nothing once a stop string was found: the text ends before it)."""
        return self._release(len(self.text))

    def _release(self, end: int) -> str:
        end = max(end, self._sent)
        piece, self._sent = self.text[self._sent : end], end
        return piece


def _prefix_at_end(text: str, stop: str) -> int:
    """The length of the longest proper prefix of ``stop`` that ends ``text``."""
    for n in range(min(len(stop) - 1, len(text)), 0, -1):
        if text.endswith(stop[:n]):
            return n
    return 0
