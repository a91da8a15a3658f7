"""The orders PyTorch's CPU sort and topk leave equal values in, reproduced exactly.

Eager's unstable ``sort`` and its ``topk`` run the C++ standard library's introsort,
introselect and heap selection (libstdc++), whose order among ties follows from the
algorithm: median-of-three pivots, Hoare partitions, a final insertion sort, heapsort
when the recursion runs too deep. Here every row's keys are ranks (equal values share
one; ``a`` before ``b`` exactly when ``key[a] < key[b]``) and a permutation moves along.
Partitions run for all pending segments of all rows at once (vectorized); the heap
steps, reached only by adversarial inputs (or by topk of a few of many values, where
only the values that enter the heap cost a step), run per element.
"""

from __future__ import annotations

import numpy as np

__all__ = ["introsort", "introselect", "partial_sort"]

_SORT_THRESHOLD, _SELECT_THRESHOLD = 16, 3


def _depth_limit(n: int) -> int:
    return 2 * (n.bit_length() - 1)


def _swap(k: np.ndarray, p: np.ndarray, row: np.ndarray, i: np.ndarray, j: np.ndarray) -> None:
    k[row, i], k[row, j] = k[row, j], k[row, i]
    p[row, i], p[row, j] = p[row, j], p[row, i]


def _starts(counts: np.ndarray) -> np.ndarray:
    return np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)


def _partition(k, p, row, lo, hi) -> np.ndarray:
    """Median of (lo+1, mid, hi-1) to lo, then the Hoare partition of [lo+1, hi) around it,
    for every segment at once; returns the cuts."""
    a, b, c = lo + 1, lo + (hi - lo) // 2, hi - 1
    ab, bc, ac = k[row, a] < k[row, b], k[row, b] < k[row, c], k[row, a] < k[row, c]
    median = np.where(ab, np.where(bc, b, np.where(ac, c, a)), np.where(ac, a, np.where(bc, c, b)))
    _swap(k, p, row, lo, median)
    pivot = k[row, lo]
    length = hi - lo
    start = _starts(length)
    seg = np.repeat(np.arange(len(lo)), length)
    local = np.arange(len(seg)) - start[seg]
    pos = lo[seg] + local
    values = k[row[seg], pos]
    stop_left = (values >= pivot[seg]) & (local > 0)  # where the left scan stops, in order
    stop_right = values <= pivot[seg]  # where the right scan stops (the pivot ends it)
    ge_before = np.cumsum(stop_left) - stop_left
    rank_left = ge_before - ge_before[start][seg]
    le_upto = np.cumsum(stop_right)
    rank_right = le_upto[start + length - 1][seg] - le_upto
    slots = start + np.arange(len(lo))  # one spare slot per segment for the sentinels
    slot_seg = np.repeat(np.arange(len(lo)), length + 1)
    left = hi[slot_seg].copy()
    right = lo[slot_seg].copy()
    left[slots[seg[stop_left]] + rank_left[stop_left]] = pos[stop_left]
    right[slots[seg[stop_right]] + rank_right[stop_right]] = pos[stop_right]
    swaps = left < right  # round t swaps left[t] and right[t] while they have not crossed
    _swap(k, p, row[slot_seg[swaps]], left[swaps], right[swaps])
    rounds = np.bincount(slot_seg, weights=swaps, minlength=len(lo)).astype(np.int64)
    last_right = np.where(rounds > 0, right[slots + np.maximum(rounds - 1, 0)], hi)
    return np.minimum(left[slots + rounds], last_right)


def _adjust_heap(k: list, p: list, first: int, hole: int, length: int, key, item) -> None:
    top, child = hole, hole
    while child < (length - 1) // 2:
        child = 2 * (child + 1)
        if k[first + child] < k[first + child - 1]:
            child -= 1
        k[first + hole], p[first + hole] = k[first + child], p[first + child]
        hole = child
    if length % 2 == 0 and child == (length - 2) // 2:
        child = 2 * (child + 1)
        k[first + hole], p[first + hole] = k[first + child - 1], p[first + child - 1]
        hole = child - 1
    parent = (hole - 1) // 2
    while hole > top and k[first + parent] < key:
        k[first + hole], p[first + hole] = k[first + parent], p[first + parent]
        hole, parent = parent, (parent - 1) // 2
    k[first + hole], p[first + hole] = key, item


def _pop_heap(k: list, p: list, first: int, last: int, result: int) -> None:
    key, item = k[result], p[result]
    k[result], p[result] = k[first], p[first]
    _adjust_heap(k, p, first, 0, last - first, key, item)


def _heap_select(k: list, p: list, first: int, middle: int, last: int, keys: np.ndarray | None = None) -> None:
    """The heap of [first, middle) ends holding the smallest keys of [first, last)."""
    length = middle - first
    for parent in range((length - 2) // 2, -1, -1):
        _adjust_heap(k, p, first, parent, length, k[first + parent], p[first + parent])
    scan = np.asarray(k[middle:last]) if keys is None else keys[middle:last]
    chunk = 4096
    for begin in range(0, last - middle, chunk):  # only a key below the heap's top enters it
        for i in np.flatnonzero(scan[begin : begin + chunk] < k[first]) + middle + begin:
            if k[i] < k[first]:
                _pop_heap(k, p, first, middle, int(i))


def _sort_heap(k: list, p: list, first: int, last: int) -> None:
    while last - first > 1:
        last -= 1
        _pop_heap(k, p, first, last, last)


def _on_row(k: np.ndarray, p: np.ndarray, r: int, run) -> None:
    kr, pr = k[r].tolist(), p[r].tolist()
    run(kr, pr)
    k[r], p[r] = kr, pr


def _heapsort(k, p, r: int, lo: int, hi: int) -> None:
    def run(kr, pr):
        _heap_select(kr, pr, lo, hi, hi)
        _sort_heap(kr, pr, lo, hi)

    _on_row(k, p, r, run)


def introsort(k: np.ndarray, p: np.ndarray) -> None:
    """``std::sort`` of every row of ``k`` (2-D integer keys), carrying ``p``, in place."""
    rows, n = k.shape
    if n < 2 or rows == 0:
        return
    row, lo = np.arange(rows), np.zeros(rows, np.int64)
    hi, depth = np.full(rows, n, np.int64), np.full(rows, _depth_limit(n), np.int64)
    while True:
        keep = hi - lo > _SORT_THRESHOLD
        row, lo, hi, depth = row[keep], lo[keep], hi[keep], depth[keep]
        for r, a, b in zip(row[depth == 0], lo[depth == 0], hi[depth == 0]):
            _heapsort(k, p, int(r), int(a), int(b))
        keep = depth > 0
        row, lo, hi, depth = row[keep], lo[keep], hi[keep], depth[keep] - 1
        if not len(row):
            break
        cut = _partition(k, p, row, lo, hi)
        row, lo, hi, depth = (np.concatenate(pair) for pair in ((row, row), (cut, lo), (hi, cut), (depth, depth)))
    order = np.argsort(k, axis=-1, kind="stable")  # the final insertion sort: stable
    k[...] = np.take_along_axis(k, order, axis=-1)
    p[...] = np.take_along_axis(p, order, axis=-1)


def _small_sort(k, p, row, lo, hi) -> None:
    """Insertion sort (stable) of segments of at most three entries."""
    cols = lo[:, None] + np.arange(_SELECT_THRESHOLD)
    valid = cols < hi[:, None]
    cols = np.where(valid, cols, lo[:, None])
    rows = row[:, None]
    keys = np.where(valid, k[rows, cols], np.iinfo(np.int64).max)
    order = np.argsort(keys, axis=-1, kind="stable")
    moved = np.take_along_axis(cols, order, axis=-1)
    new_k, new_p = k[rows, moved], p[rows, moved]
    rr = np.broadcast_to(rows, cols.shape)[valid]
    k[rr, cols[valid]] = new_k[valid]
    p[rr, cols[valid]] = new_p[valid]


def introselect(k: np.ndarray, p: np.ndarray, nth: int) -> None:
    """``std::nth_element`` at ``nth`` of every row of ``k``, carrying ``p``, in place."""
    rows, n = k.shape
    if n < 2 or rows == 0:
        return
    row, lo = np.arange(rows), np.zeros(rows, np.int64)
    hi, depth = np.full(rows, n, np.int64), np.full(rows, _depth_limit(n), np.int64)
    while len(row):
        done = hi - lo <= _SELECT_THRESHOLD
        if done.any():
            _small_sort(k, p, row[done], lo[done], hi[done])
        heap = ~done & (depth == 0)
        for r, a, b in zip(row[heap], lo[heap], hi[heap]):

            def run(kr, pr, a=int(a), b=int(b)):
                _heap_select(kr, pr, a, nth + 1, b)
                kr[a], kr[nth], pr[a], pr[nth] = kr[nth], kr[a], pr[nth], pr[a]

            _on_row(k, p, int(r), run)
        keep = ~done & ~heap
        row, lo, hi, depth = row[keep], lo[keep], hi[keep], depth[keep] - 1
        if not len(row):
            break
        cut = _partition(k, p, row, lo, hi)
        right = cut <= nth
        lo, hi = np.where(right, cut, lo), np.where(right, hi, cut)


def partial_sort(k: np.ndarray, p: np.ndarray, middle: int) -> None:
    """``std::partial_sort(first, first + middle, last)`` of every row, carrying ``p``, in place."""
    for r in range(k.shape[0]):
        keys = k[r].copy()

        def run(kr, pr, keys=keys):
            _heap_select(kr, pr, 0, middle, len(kr), keys)
            _sort_heap(kr, pr, 0, middle)

        _on_row(k, p, r, run)
