"""Arrays computed from a kernel's constant operands (batch norm folded into weights, a
convolution's transformed kernels), computed once per program instead of once per call.

Owner and lifetime: an entry belongs to its source arrays (a loaded program's constants, which
the program owns) and lives exactly as long as all of them: `weakref.finalize` drops it when any
source is collected, so the results go with the program that loaded the constants. Entries are
keyed by the sources' ``id()`` and hold weak references to them, so a new array that reuses an id
never meets another's result. One table serves every method and thread; results are read-only,
so threads may share them."""

from __future__ import annotations

import weakref

__all__ = ["derived", "cached_keys"]

_CACHE: dict = {}  # (compute, params, ids of the sources) -> (weakrefs of the sources, result)
_LIMIT = 4096


def derived(compute, sources: tuple, *params):
    """``compute(*sources, *params)``, kept while every source array is alive and read-only
    down to the memory it views (a program's constants); from sources that may change between
    calls the result is computed every time. Kept results are made read-only: callers must not write them."""
    if not all(a is None or _constant(a) for a in sources):
        return compute(*sources, *params)
    key = (compute, params) + tuple(id(a) for a in sources)
    hit = _CACHE.get(key)
    if hit is not None and all((r() if r is not None else None) is a for r, a in zip(hit[0], sources)):
        return hit[1]
    result = compute(*sources, *params)
    for array in result if isinstance(result, tuple) else (result,):
        array.flags.writeable = False
    if len(_CACHE) >= _LIMIT:
        _CACHE.clear()
    _CACHE[key] = (tuple(None if a is None else weakref.ref(a) for a in sources), result)
    for array in sources:
        if array is not None:
            weakref.finalize(array, _CACHE.pop, key, None)
    return result


def _constant(array) -> bool:
    """Read-only, and so is every array it views (a read-only view of a writable array can
    still change)."""
    while array is not None and hasattr(array, "flags"):
        if array.flags.writeable:
            return False
        array = array.base
    return True


def cached_keys(compute) -> list[tuple]:
    """The ids of the sources of every result of ``compute`` kept now (for tests)."""
    return [key[2:] for key in _CACHE if key[0] is compute]
