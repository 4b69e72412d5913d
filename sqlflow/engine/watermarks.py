"""Watermarks as step functions of processing time (docs/semantics.md, 1.2).

A `Timeline` holds steps `(proc_time, watermark)`: from each step's processing time on, the
watermark is that value, until the next step. Before the first step it is -inf. Steps are strictly
increasing in processing time and non-decreasing in watermark.

>>> tl = Timeline.from_steps([10, 20, 30], [5, 5, 12])
>>> tl.before(20), tl.at(20), tl.at(25), tl.before(10)
(5, 5, 5, -9223372036854775808)
>>> tl.first_reaching(12), tl.first_reaching(13) == POS_INF
(30, True)
>>> bounded_delay(arrival=[1, 2, 2, 7], event=[100, 90, 130, 120], delay=10).steps()
[(1, 90), (2, 120)]
>>> perfect(arrival=[1, 2, 3], event=[50, 40, 60]).steps()
[(1, 40), (2, 60), (3, 9223372036854775807)]
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field

import numpy as np

from ..errors import SqlflowExecutionError
from ..time import NEG_INF, POS_INF
from .kernels import SortedIndex

_I64 = np.int64


@dataclass(frozen=True)
class Timeline:
    """The watermark over processing time: W(p) = values[last i with times[i] <= p], else -inf."""

    times: np.ndarray  # int64, strictly increasing processing times of the steps
    values: np.ndarray  # int64, non-decreasing watermark after each step
    #: the processing time of the last row it was made from, a step or not: where the input ends
    end: int = NEG_INF
    # the same as Python lists, built when first asked for: the per-key loop asks one instant at a
    # time, and bisect on a list costs a fraction of a numpy call
    _lists: tuple | None = field(default=None, init=False, repr=False, compare=False)
    # coarse indexes for searching many instants at once (kernels.SortedIndex), built when first asked for
    _index: dict | None = field(default=None, init=False, repr=False, compare=False)

    def _both(self) -> tuple:
        lists = self._lists
        if lists is None:
            lists = (self.times.tolist(), self.values.tolist())
            object.__setattr__(self, "_lists", lists)
        return lists

    def __getstate__(self):  # the arrays travel (to the executors), not the lists
        return {"times": self.times, "values": self.values, "end": self.end}

    def __setstate__(self, state):
        for name, value in state.items():
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_lists", None)
        object.__setattr__(self, "_index", None)

    def _search(self, column: str, x, right: bool = False) -> np.ndarray:
        """np.searchsorted(getattr(self, column), x, side), through a kernels.SortedIndex kept per column."""
        indexes = self._index
        if indexes is None:
            indexes = {}
            object.__setattr__(self, "_index", indexes)
        index = indexes.get(column)
        if index is None:
            index = indexes[column] = SortedIndex(getattr(self, column))
        return index.search(x, right=right)

    @staticmethod
    def from_steps(times, values, *, what: str = "watermark timeline") -> "Timeline":
        """Validate and normalise rows (proc_time, watermark): sorted by time; rows with equal times
        are one step with their largest watermark (whatever their order); rows that do not raise
        the watermark are no step, but the last row's time is still where the timeline ends
        (`last_time`). A watermark that moves backwards is an error.

        >>> tl = Timeline.from_steps([30, 10, 10, 20], [12, 7, 5, 7])
        >>> tl.steps(), tl.last_time
        ([(10, 7), (30, 12)], 30)
        >>> Timeline.from_steps([10, 20], [5, 5]).last_time
        20
        """
        t = np.asarray(times, dtype=_I64)
        v = np.asarray(values, dtype=_I64)
        if t.shape != v.shape:
            raise ValueError("times and values differ in length")
        if t.size == 0:
            return EMPTY_TIMELINE
        order = np.lexsort((v, t))
        t, v = t[order], v[order]
        back = np.flatnonzero(v[1:] < v[:-1])  # only between different times: ties are sorted by value
        if back.size:
            i = int(back[0]) + 1
            raise SqlflowExecutionError(
                f"{what} moves backwards at processing time {_fmt(t[i])}: "
                f"{_fmt(v[i - 1])} then {_fmt(v[i])}; a watermark never decreases",
                clause="WATERMARK",
            )
        # keep the last (largest) step of equal processing times, then only the steps that raise W
        last_of_time = np.r_[t[1:] != t[:-1], True]
        end = int(t[-1])
        t, v = t[last_of_time], v[last_of_time]
        rises = np.r_[v[0] > NEG_INF, v[1:] > v[:-1]]
        return Timeline(t[rises], v[rises], end)

    def steps(self) -> list[tuple[int, int]]:
        return list(zip(self.times.tolist(), self.values.tolist()))

    def at(self, p: int) -> int:
        """W after the step at p (if any)."""
        t, v = self._lists or self._both()
        i = bisect.bisect_right(t, p) - 1
        return v[i] if i >= 0 else NEG_INF

    def before(self, p: int) -> int:
        """W just before instant p, i.e. not counting a step at p."""
        t, v = self._lists or self._both()
        i = bisect.bisect_left(t, p) - 1
        return v[i] if i >= 0 else NEG_INF

    def at_many(self, p: np.ndarray) -> np.ndarray:
        i = self._search("times", p, right=True) - 1
        out = np.full(len(i), NEG_INF, dtype=_I64)
        ok = i >= 0
        out[ok] = self.values[i[ok]]
        return out

    def before_many(self, p: np.ndarray) -> np.ndarray:
        i = self._search("times", p) - 1
        out = np.full(len(i), NEG_INF, dtype=_I64)
        ok = i >= 0
        out[ok] = self.values[i[ok]]
        return out

    def first_reaching(self, x: int) -> int:
        """Processing time of the first step with W >= x (POS_INF if none; x = -inf is reached at once)."""
        if x == NEG_INF:
            return NEG_INF
        t, v = self._lists or self._both()
        i = bisect.bisect_left(v, x)
        return t[i] if i < len(t) else POS_INF

    def first_reaching_many(self, x: np.ndarray) -> np.ndarray:
        i = self._search("values", x)
        out = np.full(len(i), POS_INF, dtype=_I64)
        ok = i < len(self.times)
        out[ok] = self.times[i[ok]]
        out[np.asarray(x) == NEG_INF] = NEG_INF
        return out

    @property
    def last_time(self) -> int:
        """The processing time of its last row (a step or not), -inf for no rows."""
        return max(int(self.times[-1]) if len(self.times) else NEG_INF, self.end)


EMPTY_TIMELINE = Timeline(np.empty(0, dtype=_I64), np.empty(0, dtype=_I64))


class ProcessingClock(Timeline):
    """The watermark of a window ON PROCESSING TIME: processing time itself, W(p) = p at every
    instant (docs/semantics.md, 10). The operator's clock passes a window's end exactly at that
    end, so the engine, which asks `first_reaching(end)` when to fire it, fires it there, an
    instant of its own, as it fires a processing-time timer; nothing arriving at p (time p) is
    ever behind W just before p (p - 1us).

    >>> c = ProcessingClock.over(10, 50)
    >>> c.at(20), c.before(20), c.first_reaching(35), c.last_time
    (20, 19, 35, 50)
    >>> c.at_many(np.array([5, 7])).tolist(), c.first_reaching_many(np.array([60, POS_INF])).tolist() == [60, POS_INF]
    ([5, 7], True)
    """

    @staticmethod
    def over(first: int, last: int) -> "ProcessingClock":
        """The clock of an input whose arrivals span [first, last] (its one step marks where time starts)."""
        start = np.array([first], dtype=_I64)
        return ProcessingClock(start, start.copy(), last)

    def at(self, p: int) -> int:
        return int(p)

    def before(self, p: int) -> int:
        return int(p) - 1 if NEG_INF < p < POS_INF else int(p)

    def at_many(self, p: np.ndarray) -> np.ndarray:
        return np.array(p, dtype=_I64)

    def before_many(self, p: np.ndarray) -> np.ndarray:
        p = np.asarray(p, dtype=_I64)
        return np.where((p > NEG_INF) & (p < POS_INF), p - 1, p)

    def first_reaching(self, x: int) -> int:
        return int(x)

    def first_reaching_many(self, x: np.ndarray) -> np.ndarray:
        return np.array(x, dtype=_I64)

    def steps(self) -> list[tuple[int, int]]:
        return [(int(self.times[0]), int(self.values[0])), (self.end, self.end)]


def _fmt(t) -> str:
    from ..time import format_time

    return format_time(int(t))


def _by_arrival(arrival, event) -> tuple[np.ndarray, np.ndarray]:
    """Arrival and event times as int64 arrays, sorted by arrival (then event) time."""
    a = np.asarray(arrival, dtype=_I64)
    e = np.asarray(event, dtype=_I64)
    order = np.lexsort((e, a))
    return a[order], e[order]


def bounded_delay(arrival, event, delay: int) -> Timeline:
    """W(p) = max event time arrived by p, minus delay (advancing at each arrival instant)."""
    a, e = _by_arrival(arrival, event)
    if a.size == 0:
        return EMPTY_TIMELINE
    w = np.maximum.accumulate(e)
    w = np.where(w == NEG_INF, NEG_INF, w - delay)
    return Timeline.from_steps(a, w)


def perfect(arrival, event) -> Timeline:
    """W(p) = min event time of rows arriving after p; +inf once all have arrived."""
    a, e = _by_arrival(arrival, event)
    if a.size == 0:
        return EMPTY_TIMELINE
    # pending after the instant at a[i]: rows with arrival > a[i]; suffix minimum over later rows
    suffix_min = np.minimum.accumulate(e[::-1])[::-1]
    after = np.r_[suffix_min[1:], POS_INF].astype(_I64)
    last_of_time = np.r_[a[1:] != a[:-1], True]
    return Timeline.from_steps(a[last_of_time], after[last_of_time])


def minimum(*timelines: Timeline) -> Timeline:
    """The watermark of several inputs: the minimum of theirs, at every processing time."""
    if not timelines:
        return EMPTY_TIMELINE
    if len(timelines) == 1:
        return timelines[0]
    times = np.unique(np.concatenate([t.times for t in timelines]))
    values = np.min(np.vstack([t.at_many(times) for t in timelines]), axis=0)
    steps = Timeline.from_steps(times, values)
    return Timeline(steps.times, steps.values, max(t.last_time for t in timelines))
