"""The engine's primitives for whole buckets of many keys: compiled loops (numba) and sorts.

Each has the exact semantics of the numpy or pandas expression named in its docstring; it exists
because that expression costs several passes, a pandas group-by, a lexsort or cache misses on
arrays larger than the CPU caches (profiled on benchmarks/compare.py's scenario 2: README,
Benchmarks). Loops are compiled when first called in a process and cached on disk next to this
file (numba falls back to the user's cache directory when that is not writable), so Spark's
Python workers load them rather than compile them again. Below `COMPILED_MIN_ROWS` elements the
numpy or pandas expression runs instead: it is as fast there, and a process that only ever sees
small inputs (tests, interactive queries, most micro-batches) never imports numba, which costs a
fresh Python worker ~0.45 s (importing it, loading the cached loops).

>>> a = np.array([10, 20, 20, 40], np.int64)
>>> index = SortedIndex(a)
>>> index.search(np.array([5, 20, 21, 40, 41], np.int64)).tolist()
[0, 1, 3, 3, 4]
>>> index.search(np.array([5, 20, 21, 40, 41], np.int64), right=True).tolist()
[0, 3, 3, 4, 4]
>>> segment_cummax(np.array([3, 1, 4, 1, 5]), np.array([True, False, True, False, False])).tolist()
[3, 3, 4, 4, 5]
>>> segment_cummin(np.array([3, 1, 4, 1, 5]), np.array([True, False, True, False, False])).tolist()
[3, 1, 4, 1, 1]
"""
from __future__ import annotations

import functools

import numpy as np
import pandas as pd

_I64 = np.int64
#: inputs from this many elements on take the compiled loops (tests set it to 0 to run them always)
COMPILED_MIN_ROWS = 1 << 14
#: values from +-2^62 on (the infinities, or nearly) are searched without the coarse index, so that
#: differences of indexed values never overflow
_SAFE = 1 << 62


def _compiled(fn):
    """`fn` compiled by numba when first called (numba is imported then, not with this module)."""
    jitted = None

    @functools.wraps(fn)
    def call(*args):
        nonlocal jitted
        if jitted is None:
            import numba

            jitted = numba.njit(cache=True, nogil=True)(fn)
        return jitted(*args)

    return call


@_compiled
def _bucket_bounds(a, lo, hi, shift):
    """bounds[b] = first i in [lo, hi) with (a[i] - a[lo]) >> shift >= b, for b = 0 .. nb."""
    a0 = a[lo]
    nb = ((a[hi - 1] - a0) >> shift) + 1
    bounds = np.empty(nb + 1, np.int64)
    i = lo
    for b in range(nb + 1):
        while i < hi and ((a[i] - a0) >> shift) < b:
            i += 1
        bounds[b] = i
    return bounds


@_compiled
def _search(a, bounds, lo, hi, shift, q, right):
    """np.searchsorted(a, q, side='right' if right else 'left') for a sorted `a`: values in
    [a[lo], a[hi - 1]] are narrowed to one bucket of `bounds` first (about one element each)."""
    n = len(a)
    out = np.empty(len(q), np.int64)
    indexed = hi > lo
    a0 = a[lo] if indexed else 0
    top = a[hi - 1] if indexed else 0
    for j in range(len(q)):
        x = q[j]
        if indexed and a0 <= x <= top:
            b = (x - a0) >> shift
            first, stop = bounds[b], bounds[b + 1]
        else:
            first, stop = 0, n
        if right:
            while first < stop:
                m = (first + stop) >> 1
                if a[m] <= x:
                    first = m + 1
                else:
                    stop = m
        else:
            while first < stop:
                m = (first + stop) >> 1
                if a[m] < x:
                    first = m + 1
                else:
                    stop = m
        out[j] = first
    return out


class SortedIndex:
    """np.searchsorted over one sorted int64 array, many times, 5-6x faster on arrays larger than
    the CPU caches: a bucket per about one element (by value) narrows each binary search to a few
    neighbours (measured on a 457,772-step watermark timeline: 92 ms for 500,000 random queries
    with numpy, 15-19 ms here)."""

    def __init__(self, a: np.ndarray):
        self.a = np.ascontiguousarray(a, dtype=_I64)
        self.bounds: np.ndarray | None = None  # built for the first large search

    def _index(self):
        a = self.a
        self.lo = int(np.searchsorted(a, -_SAFE, side="right"))  # indexed: -2^62 < a[i] < 2^62
        self.hi = int(np.searchsorted(a, _SAFE, side="left"))
        if self.hi > self.lo:
            spread = int(a[self.hi - 1]) - int(a[self.lo])
            self.shift = max(0, (spread // (self.hi - self.lo)).bit_length() - 1)
            self.bounds = _bucket_bounds(a, self.lo, self.hi, self.shift)
        else:
            self.shift, self.bounds = 0, np.zeros(1, _I64)

    def search(self, q: np.ndarray, right: bool = False) -> np.ndarray:
        q = np.ascontiguousarray(q, dtype=_I64)
        if min(len(self.a), len(q)) < COMPILED_MIN_ROWS:
            return np.searchsorted(self.a, q, side="right" if right else "left")
        if self.bounds is None:
            self._index()
        return _search(self.a, self.bounds, self.lo, self.hi, self.shift, q, right)


@_compiled
def _segment_scan(values, seg_start, take_max):
    out = np.empty_like(values)
    acc = values[0] if len(values) else values.dtype.type(0)
    for i in range(len(values)):
        v = values[i]
        if seg_start[i]:
            acc = v
        elif take_max:
            if v > acc:
                acc = v
        elif v < acc:
            acc = v
        out[i] = acc
    return out


def segment_cummax(values: np.ndarray, seg_start: np.ndarray) -> np.ndarray:
    """The running maximum within segments (`seg_start` marks each segment's first element; the
    first element always starts one): pandas' groupby(segment).cummax()."""
    return _segment_cum(values, seg_start, True)


def segment_cummin(values: np.ndarray, seg_start: np.ndarray) -> np.ndarray:
    """The running minimum within segments (see `segment_cummax`)."""
    return _segment_cum(values, seg_start, False)


def _segment_cum(values, seg_start, take_max: bool) -> np.ndarray:
    if len(values) < COMPILED_MIN_ROWS:
        groups = pd.Series(values).groupby(np.cumsum(seg_start))
        return (groups.cummax() if take_max else groups.cummin()).to_numpy()
    return _segment_scan(np.ascontiguousarray(values), np.ascontiguousarray(seg_start, dtype=np.bool_), take_max)


#: how `lineage_fold` merges a field: ufunc codes
FOLD_ADD, FOLD_FMIN, FOLD_MAX = 0, 1, 2


@_compiled
def _fold(values, indptr, indices, op):
    for p in range(len(indptr) - 1):
        acc = values[p]
        for j in range(indptr[p], indptr[p + 1]):
            b = values[indices[j]]
            if op == FOLD_ADD:
                acc = acc + b
            elif op == FOLD_FMIN:
                if acc != acc or (b == b and b < acc):  # np.fmin: NaN only if both are NaN
                    acc = b
            elif acc == acc and (b != b or b > acc):  # np.maximum: NaN if either is NaN
                acc = b
        values[p] = acc
    return values


def lineage_fold(values: np.ndarray, indptr: np.ndarray, indices: np.ndarray, op: int) -> np.ndarray:
    """total[p] = values[p] merged, in order, with total[q] for each q in p's lineage
    (indices[indptr[p]:indptr[p + 1]]): one pass in pane order, as every pane's lineage holds
    only earlier panes (the caller checks). `op`: FOLD_ADD (np.add), FOLD_FMIN (np.fmin), FOLD_MAX
    (np.maximum).
    Always compiled: the caller takes it for COMPILED_MIN_ROWS panes or more.

    >>> lineage_fold(np.array([1, 2, 4, 8]), np.array([0, 0, 1, 1, 3]), np.array([0, 1, 2]), FOLD_ADD).tolist()
    [1, 3, 4, 15]
    """
    return _fold(np.array(values, copy=True), np.ascontiguousarray(indptr, dtype=_I64),
                 np.ascontiguousarray(indices, dtype=_I64), op)


@_compiled
def _scatter_add(group, values, out):
    for i in range(len(group)):
        out[group[i]] += values[i]
    return out


def scatter_add(group: np.ndarray, values: np.ndarray, out: np.ndarray) -> np.ndarray:
    """out[group[i]] += values[i] for every i, in row order (np.add.at, one compiled pass).

    >>> scatter_add(np.array([2, 0, 2]), np.array([5, 7, 1]), np.zeros(3, np.int64)).tolist()
    [7, 0, 6]
    """
    return _scatter_add(np.ascontiguousarray(group, dtype=_I64), np.ascontiguousarray(values), out)


def order_by(*columns) -> np.ndarray:
    """Indices sorting by `columns` (major first) with ties in any order: one quicksort of a packed
    key when the value ranges fit in 62 bits (several times faster than np.lexsort), else lexsort."""
    packed, room = np.zeros(len(columns[0]), np.int64), 1
    for c in columns:
        lo, hi = (int(c.min()), int(c.max())) if len(c) else (0, 0)
        width = hi - lo + 1
        room *= width
        if room >= 1 << 62:
            return np.lexsort(columns[::-1])
        packed = packed * width + (c - lo)
    return np.argsort(packed)


def lex_order(major: np.ndarray, minor: np.ndarray) -> np.ndarray:
    """The stable order by (major, minor), as np.lexsort((minor, major)), but one stable sort of
    `major` (a merge when it comes in a few sorted runs) and a lexsort of only the elements whose
    `major` ties another's. 10x faster than lexsort on a 560,000-row bucket in arrival order.

    >>> lex_order(np.array([5, 3, 5, 5, 1]), np.array([9, 0, 7, 9, 4])).tolist()
    [4, 1, 2, 0, 3]
    """
    order = np.argsort(major, kind="stable")
    if major is minor:
        return order
    a = major[order]
    same = a[1:] == a[:-1]
    if same.any():
        tied = np.zeros(len(a), bool)
        tied[:-1] |= same
        tied[1:] |= same
        pos = np.flatnonzero(tied)
        run = np.cumsum(np.r_[True, (a[pos][1:] != a[pos][:-1]) | (np.diff(pos) != 1)])
        sub = order[pos]
        order[pos] = sub[np.lexsort((minor[sub], run))]
    return order


def warm_up() -> None:
    """Import numba and load the compiled loops for their usual argument types (int64 times and
    counts, float64 sums), as a fresh process's first large input would: done before a stream's
    first micro-batch by `sqlflow.spark.streaming.session_conf.check_python_workers`, in the
    Spark workers it runs on (reused), so that batch does not pay it (a fresh worker took
    ~0.45 s, more under load).

    >>> warm_up()
    """
    i = np.arange(4, dtype=_I64)
    _bucket_bounds(i, 0, 4, 0)
    _search(i, np.arange(5, dtype=_I64), 0, 4, 0, i, False)
    for values in (i, i.astype(np.float64)):
        _segment_scan(values.copy(), np.array([True, False, True, False]), True)
        _fold(values.copy(), np.array([0, 0, 1, 1, 1], _I64), np.array([0], _I64), FOLD_ADD)
        _scatter_add(np.zeros(4, _I64), values, np.zeros(1, values.dtype))
