"""Ordering a stream by event time (docs/semantics.md, 11).

Flink's time design draft, "Ordering Elements in a Stream": "The ordering operator has to buffer
all elements it receives. Then, when it receives a watermark it can sort all elements that have a
timestamp that is lower than the watermark and emit them in the sorted order." In sqlflow's
instants (section 1.1):

- a row arriving at `p` whose event time `t` is below the watermark before `p` (`t < W(p-)`) is
  **late**: it is not emitted (counted and retrievable, reason `too late`); so is a row behind
  its own partition under `ASCENDING PER` (`behind its partition`);
- every other row is buffered and **emitted at the first instant `q >= p` whose watermark passes
  it**, `W(q) > t` (a watermark `w` says no row below `w` is to come, as a window is complete
  when `W >= end`); at the end of input the watermark moves to +inf and every buffered row is
  emitted there;
- rows are emitted in `(emit instant, event time, tie-breakers)` order. As the watermark never
  decreases, rows emitted later have event times no smaller: the output is in event-time order.

>>> from sqlflow.engine.watermarks import Timeline
>>> tl = Timeline.from_steps([1, 3, 5], [0, 25, 40])
>>> emit, late = emit_times(tl, event=[30, 10, 20, 5], arrival=[1, 2, 3, 4], p_end=6)
>>> emit.tolist(), late.tolist()
([5, 3, 3, 4], [False, False, False, True])
>>> order, emit = ordered(tl, event=[30, 10, 20, 5], arrival=[1, 2, 3, 4], p_end=6)
>>> order.tolist(), emit[order].tolist()
([1, 2, 0], [3, 3, 5])
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..time import POS_INF
from .watermarks import Timeline

_I64 = np.int64


def emit_times(timeline: Timeline, event, arrival, p_end: int,
               behind: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each row's emit instant, and whether it is late (then its emit instant is meaningless).
    `behind`: rows behind their partition (`partitions.behind_partition`), late as well."""
    t = np.asarray(event, dtype=_I64)
    a = np.asarray(arrival, dtype=_I64)
    late = t < timeline.before_many(a)
    if behind is not None:
        late |= np.asarray(behind, dtype=bool)
    above = np.where(t == POS_INF, POS_INF, t + 1)  # the first watermark that passes t
    passes = timeline.first_reaching_many(above)
    emit = np.maximum(a, np.where(passes == POS_INF, max(int(p_end), int(a.max()) if a.size else p_end), passes))
    return emit, late


def ordered(timeline: Timeline, event, arrival, p_end: int, ties: Sequence = (),
            behind: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The rows that are not late, as indexes in emission order (emit instant, event time, then
    each of `ties`, arrays of the rows' tie-breaking values), and every row's emit instant."""
    emit, late = emit_times(timeline, event, arrival, p_end, behind)
    keep = np.flatnonzero(~late)
    keys = [np.asarray(tie)[keep] for tie in reversed(list(ties))]
    order = np.lexsort(tuple(keys) + (np.asarray(event, dtype=_I64)[keep], emit[keep]))
    return keep[order], emit
