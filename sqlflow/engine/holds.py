"""Watermark holds and a stage's output watermark (docs/semantics.md, 1.3; the low-watermark article).

A later windowed stage reads a stage's panes as its input: each pane row arrives at its
`emit_time` and carries its `output_time` as event time. Its watermark is the stage's **output
watermark** (the low-watermark article: OutputLowWatermark = min(InputLowWatermark, OldestWork)), where the
stage's unfinished work is what it holds:

- each row the stage emits is **held** at its `output_time` over an interval of processing time:
  a pane from the arrival of the first of its *timely new elements* (those it emits first that
  arrived not behind the input watermark, `output_time.py`) until its emission (`pane_holds`);
  a retraction from the arrival of the element that joined the retracted pane's window to the
  pending pane until its emission, or until the watermark passes the end of the window it is
  pending in (`retraction_holds`): from what the stage knows at each instant;
- the output watermark at processing time p is the largest value, over instants q <= p, of
  min(input watermark at q, every hold active at q): a hold behind the output watermark
  already reached cannot move it back (Beam's watermarks never recede), `output_watermark`.

A pane without timely new elements (a LATE pane, a pane that only re-emits) holds nothing: its
input was behind the watermark already.

>>> iwm = Timeline.from_steps([1, 5, 9], [10, 50, 90])
>>> output_watermark(iwm, since=[2], until=[7], value=[30]).steps()
[(1, 10), (5, 30), (7, 50), (9, 90)]
"""
from __future__ import annotations

import numpy as np

from ..time import POS_INF
from .watermarks import Timeline

_I64 = np.int64

#: "not held": a pane without timely new elements
NOT_HELD = POS_INF


def pane_holds(n_panes: int, *, first_pane: np.ndarray, arrival: np.ndarray, timely: np.ndarray) -> np.ndarray:
    """Per pane: when its hold starts, the earliest arrival of the timely assignments it emits
    first (`first_pane[a]`, -1 for none); NOT_HELD for a pane without any.

    >>> pane_holds(3, first_pane=np.array([0, 0, 2, -1]), arrival=np.array([7, 4, 9, 1]),
    ...            timely=np.array([True, True, False, True])).tolist() == [4, NOT_HELD, NOT_HELD]
    True
    """
    out = np.full(n_panes, NOT_HELD, _I64)
    sel = (np.asarray(first_pane) >= 0) & np.asarray(timely, bool)
    np.minimum.at(out, np.asarray(first_pane)[sel], np.asarray(arrival, _I64)[sel])
    return out


def retraction_holds(panes: dict, *, first_pane: np.ndarray, arrival: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per pane, the hold of its retraction (if a later pane retracts it): (since, release).

    since: when its window first took new input after it, as the per-key loop recorded it
    (`PaneTable.hold_retraction`); where it did not (the vectorised paths, whose windows never
    merge two emitted windows), the earliest arrival of the new elements of the pane that
    retracts it. release: when the watermark passed the end of the window the retraction was
    pending in (NOT_HELD: never, before its emission).

    >>> panes = {"rsince": np.array([NOT_HELD, 3, NOT_HELD]), "rrelease": np.array([NOT_HELD] * 3),
    ...          "indptr": np.array([0, 0, 1, 2]), "indices": np.array([0, 1])}
    >>> since, _ = retraction_holds(panes, first_pane=np.array([0, 1, 1, 2]), arrival=np.array([1, 6, 4, 9]))
    >>> since.tolist() == [4, 3, NOT_HELD]  # pane 0's from pane 1's new input (at 6 and 4); pane 1's recorded
    True
    """
    n = len(panes["rsince"])
    first_new = np.full(n, NOT_HELD, _I64)
    sel = np.asarray(first_pane) >= 0
    np.minimum.at(first_new, np.asarray(first_pane)[sel], np.asarray(arrival, _I64)[sel])
    since = panes["rsince"].copy()
    who = np.repeat(np.arange(n), np.diff(panes["indptr"]))
    old = panes["indices"]
    unset = since[old] == NOT_HELD
    since[old[unset]] = first_new[who[unset]]
    return since, panes["rrelease"]


def output_watermark(input_watermark: Timeline, *, since, until, value, end: int | None = None) -> Timeline:
    """The output watermark of a stage: at each processing time p, the running maximum over
    instants q <= p of min(input watermark at q, every `value[i]` with since[i] <= q < until[i]).

    Vectorised: the minimum of the holds active at each breakpoint is a range-minimum update
    over a sparse table (each hold writes two power-of-two blocks covering its range, then the
    levels are pushed down), O((holds + breakpoints) log breakpoints), no loop per hold.
    `end`: where the stage's output ends (default: its last emission or input step).

    >>> iwm = Timeline.from_steps([1, 4], [10, 100])
    >>> output_watermark(iwm, since=[2, 3], until=[6, 8], value=[40, 20]).steps()
    [(1, 10), (4, 20), (8, 100)]
    >>> output_watermark(iwm, since=[2], until=[3], value=[5]).steps()  # never below what was reached
    [(1, 10), (4, 100)]
    >>> output_watermark(iwm, since=[], until=[], value=[]).steps() == iwm.steps()
    True
    """
    since, until, value = (np.asarray(x, _I64) for x in (since, until, value))
    held = since < until
    since, until, value = since[held], until[held], value[held]
    last = max(input_watermark.last_time, int(until.max()) if len(until) else input_watermark.last_time)
    end = last if end is None else max(end, last)
    # a hold not below the input watermark anywhere in [since, until) changes nothing; W only
    # rises, so its largest value there is W just before `until`: such holds (most of them: a
    # pane is usually emitted before the watermark passes its output time) are dropped, exactly
    binding = value < input_watermark.before_many(until)
    since, until, value = since[binding], until[binding], value[binding]
    if not len(since):
        return Timeline(input_watermark.times, input_watermark.values, end)
    points = np.unique(np.concatenate([input_watermark.times, since, until]))
    lo = np.searchsorted(points, since)
    hi = np.searchsorted(points, until)  # exclusive: released at its emission instant
    held_min = _range_min(len(points), lo, hi, value)
    marks = np.maximum.accumulate(np.minimum(input_watermark.at_many(points), held_min))
    steps = Timeline.from_steps(points, marks, what="output watermark")
    return Timeline(steps.times, steps.values, end)


def _range_min(n: int, lo: np.ndarray, hi: np.ndarray, value: np.ndarray) -> np.ndarray:
    """out[i] = min(value[j] for every j with lo[j] <= i < hi[j]), POS_INF where none (lo < hi).

    >>> _range_min(6, np.array([0, 2]), np.array([3, 6]), np.array([5, 2])).tolist()[:5]
    [5, 5, 2, 2, 2]
    """
    length = hi - lo
    level = np.floor(np.log2(length)).astype(_I64)
    top = int(level.max())
    table = np.full((top + 1, n), POS_INF, _I64)
    np.minimum.at(table, (level, lo), value)
    np.minimum.at(table, (level, hi - (1 << level)), value)
    for k in range(top, 0, -1):  # a block of 2^k is two blocks of 2^(k-1)
        half = 1 << (k - 1)
        block = table[k, : n - 2 * half + 1]
        np.minimum(table[k - 1, : len(block)], block, out=table[k - 1, : len(block)])
        np.minimum(table[k - 1, half: half + len(block)], block, out=table[k - 1, half: half + len(block)])
    return table[0]
