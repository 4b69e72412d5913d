"""What the engine keeps between micro-batches of a stream: per key, its live windows.

A window keeps its bounds, trigger state, pane bookkeeping, the accumulator of input it has not
emitted yet, and the panes a later pane builds on (its last pane, or the last panes of the
windows merged into it), each with its total accumulator so it can be retracted or extended.
Accumulators are dicts of one-row arrays; everything pickles compactly.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..time import saturating_add


@dataclass
class PaneRef:
    """An emitted pane that a later pane of the same window supersedes."""

    start: int
    end: int
    index: int
    timing: int
    is_last: bool
    total: tuple  # one accumulator (dict of 1-row arrays) per aggregate
    #: its output_time (microseconds; output_time.NONE of the policy for NULL): a retraction repeats it
    output_time: int = 0


@dataclass
class WindowState:
    start: int
    end: int
    trigger: list
    next_index: int
    had_nonearly: bool
    closed: bool
    count: int
    lineage: list[PaneRef] = field(default_factory=list)
    pending: tuple | None = None  # one accumulator per aggregate, or None when nothing is pending
    #: EARLIEST / LATEST of its timely pending input (output_time.NONE of the policy for none)
    pending_time: int = 0


#: key (tuple of the GROUP BY values) -> its live windows
EngineState = dict


def next_timers(windows: list[WindowState], trigger, lateness: int, watermark: int):
    """(earliest processing-time timer, earliest watermark value that matters) of a key, or None.

    The streaming operator registers these with Spark so the key is visited again in time."""
    proc = [t for t in (trigger.timer(w.trigger) for w in windows) if t is not None]
    marks = []
    for w in windows:
        if w.end > watermark and not w.closed:
            marks.append(w.end)
        marks.append(saturating_add(w.end, lateness))
    return (min(proc) if proc else None), (min(marks) if marks else None)
