"""AssignWindows for every window function, vectorised (docs/semantics.md, section 2).

`assign(event_time, gap)` returns parallel arrays `(row, start, end)`: row i of the input is in
window [start, end) (a row may appear several times, or not at all). Merging window functions
(sessions, custom ones with a `merge`) are merged by the engine as elements arrive.

>>> import numpy as np
>>> from sqlflow import ast
>>> from sqlflow.time import MINUTE
>>> fn = window_fn(ast.Sliding(ast.Duration(2 * MINUTE), ast.Duration(MINUTE)))
>>> row, start, end = fn.assign(np.array([12 * 60 * MINUTE]))   # the paper's figure 3
>>> [(int(s) // MINUTE, int(e) // MINUTE) for s, e in zip(start, end)]
[(719, 721), (720, 722)]
"""
from __future__ import annotations

from typing import Protocol

import numpy as np

from .. import ast
from ..errors import SqlflowExecutionError, SqlflowSemanticError
from ..time import NEG_INF, POS_INF, saturating_add
from .triggers import uses_processing_time

_I64 = np.int64


def _floor_to(t: np.ndarray, size: int, offset: int) -> np.ndarray:
    return ((t - offset) // size) * size + offset


#: Parallel arrays (row, start, end): row i of the input is in window [start, end).
Assigned = tuple[np.ndarray, np.ndarray, np.ndarray]
#: A merging window function's merge: each merged window with the windows merged into it.
Merged = list[tuple[tuple[int, int], list[tuple[int, int]]]]


class WindowAssigner(Protocol):
    """The contract of a window function (the paper's AssignWindows, section 2.2). `merging`
    says whether it also implements `MergingWindowAssigner.merge` (the paper's MergeWindows)."""

    merging: bool

    def assign(self, event_time: np.ndarray, gap: np.ndarray | None = None) -> Assigned:
        """The windows of each element: parallel arrays (row, start, end)."""
        ...


class MergingWindowAssigner(WindowAssigner, Protocol):
    """A window function whose windows merge as elements arrive (sessions, merging custom ones)."""

    def merge(self, windows: list[tuple[int, int]]) -> Merged:
        """Group windows that merge: each merged window with the windows it was made of."""
        ...


class GlobalWindows(WindowAssigner):
    merging = False

    def assign(self, event_time: np.ndarray, gap: np.ndarray | None = None) -> Assigned:
        n = len(event_time)
        return np.arange(n), np.full(n, NEG_INF, _I64), np.full(n, POS_INF, _I64)


class FixedWindows(WindowAssigner):
    merging = False

    def __init__(self, size: int, offset: int = 0):
        self.size, self.offset = size, offset % size

    def assign(self, event_time: np.ndarray, gap: np.ndarray | None = None) -> Assigned:
        start = _floor_to(np.asarray(event_time, _I64), self.size, self.offset)
        return np.arange(len(start)), start, saturating_add(start, self.size)


class SlidingWindows(WindowAssigner):
    merging = False

    def __init__(self, size: int, period: int, offset: int = 0):
        self.size, self.period, self.offset = size, period, offset % period

    def assign(self, event_time: np.ndarray, gap: np.ndarray | None = None) -> Assigned:
        t = np.asarray(event_time, _I64)
        last = _floor_to(t, self.period, self.offset)  # latest window start <= t
        k = -(-self.size // self.period)  # windows per element (at most)
        rows = np.repeat(np.arange(len(t)), k)
        starts = np.repeat(last, k) - np.tile(np.arange(k - 1, -1, -1, dtype=_I64) * self.period, len(t))
        ends = saturating_add(starts, self.size)
        keep = ends > np.repeat(t, k)
        return rows[keep], starts[keep], ends[keep]


class CumulateWindows(WindowAssigner):
    merging = False

    def __init__(self, step: int, size: int, offset: int = 0):
        self.step, self.size, self.offset = step, size, offset % size

    def assign(self, event_time: np.ndarray, gap: np.ndarray | None = None) -> Assigned:
        t = np.asarray(event_time, _I64)
        ws = _floor_to(t, self.size, self.offset)
        k = self.size // self.step
        rows = np.repeat(np.arange(len(t)), k)
        ends = saturating_add(np.repeat(ws, k), np.tile(np.arange(1, k + 1, dtype=_I64) * self.step, len(t)))
        keep = ends > np.repeat(t, k)
        return rows[keep], np.repeat(ws, k)[keep], ends[keep]


class SessionWindows(MergingWindowAssigner):
    """Each element opens [t, t + gap); the engine merges overlapping windows."""

    merging = True

    def __init__(self, gap: int | None):
        self.gap = gap  # None: per-row gaps are given to assign()

    def assign(self, event_time: np.ndarray, gap: np.ndarray | None = None) -> Assigned:
        """[t, t + gap), ending at +inf when t + gap is past it (a gap may be that long)."""
        t = np.asarray(event_time, _I64)
        g = self.gap if self.gap is not None else np.asarray(gap, _I64)
        return np.arange(len(t)), t, saturating_add(t, g)

    def merge(self, windows: list[tuple[int, int]]) -> Merged:
        """Overlapping windows merge transitively; windows that only touch do not."""
        out: Merged = []
        for s, e in sorted(windows):
            if out and s < out[-1][0][1]:
                (ms, me), srcs = out[-1]
                out[-1] = ((ms, max(me, e)), srcs + [(s, e)])
            else:
                out.append(((s, e), [(s, e)]))
        return out


# ---------------------------------------------------------------------- custom window functions

_REGISTRY: dict[str, type] = {}


def register_window_fn(name: str, cls: type) -> type:
    """Register a custom window function class under `name` (usable as `WINDOW name(args)`).

    The class is constructed with the literal arguments of the WINDOW clause and must provide
    `assign(event_time: np.ndarray) -> (row, start, end)` arrays (vectorised over a batch of rows,
    microsecond times). If it also provides `merge(windows: list[(start, end)]) ->
    list[((start, end), [source windows])]`, its windows merge as elements arrive, like sessions.
    """
    if not hasattr(cls, "assign"):
        raise TypeError(f"window function {name!r} must define assign(event_time)")
    _REGISTRY[name.lower()] = cls
    return cls


def registered_window_fn(name: str) -> type | None:
    return _REGISTRY.get(name.lower())


def custom_windows_of(fn: ast.WindowFn) -> dict[str, type]:
    """{name: class} of the registered custom window function `fn` names, for
    `EnginePlan.custom_windows` (it travels with the plan to the executors); empty for the others.

    >>> custom_windows_of(ast.Fixed(ast.Duration(10)))
    {}
    """
    if not isinstance(fn, ast.CustomWindow):
        return {}
    cls = registered_window_fn(fn.name)
    return {} if cls is None else {fn.name.lower(): cls}


def registered_window_fns() -> dict[str, type]:
    """Every registered custom window function class, by its lower-case name (a copy)."""
    return dict(_REGISTRY)


class CustomWindows(MergingWindowAssigner):
    def __init__(self, name: str, impl):
        self.name = name
        self.impl = impl
        self.merging = callable(getattr(impl, "merge", None))

    def assign(self, event_time: np.ndarray, gap: np.ndarray | None = None) -> Assigned:
        try:
            row, start, end = self.impl.assign(np.asarray(event_time, _I64))
        except Exception as e:  # a user's bug: say whose
            raise SqlflowExecutionError(f"window function {self.name}.assign failed: {e}", clause="WINDOW") from e
        row, start, end = (np.asarray(a, _I64) for a in (row, start, end))
        if not (len(row) == len(start) == len(end)):
            raise SqlflowExecutionError(f"window function {self.name}.assign returned arrays of different lengths",
                                        clause="WINDOW")
        if np.any(end <= start):
            raise SqlflowExecutionError(f"window function {self.name}.assign returned an empty window (end <= start)",
                                        clause="WINDOW")
        return row, start, end

    def merge(self, windows: list[tuple[int, int]]) -> Merged:
        try:
            return self.impl.merge(windows)
        except Exception as e:
            raise SqlflowExecutionError(f"window function {self.name}.merge failed: {e}", clause="WINDOW") from e


def spread_blocks(windowing: "ast.Windowing", replay: bool) -> tuple[int, int] | None:
    """(size, offset) of blocks of event time [k*size + offset, (k+1)*size + offset) that every
    window of this windowing lies in (FIXED: its windows; CUMULATE: its `size` periods), or None
    (sliding windows overlap blocks, sessions merge, GLOBAL is one window, custom ones are unknown).
    A window's panes depend only on its own elements (triggers, pane indexes, lateness and holds
    are per key and window; the watermark is global), so the rows of a stage without GROUP BY keys
    can be spread over buckets by block (`sqlflow.spark.engine_path`) instead of one bucket
    holding every row. The end of input is the exception: it comes after the key's last
    processing-time timer (docs/semantics.md, 1.2), a timer of any window of the key, so a replay
    whose trigger has PERIOD or DELAY is not spread (a bucket would end its windows at its own
    last timer, not the key's).

    >>> fixed = ast.Windowing(ast.WindowClause(ast.Fixed(ast.Duration(60), ast.Duration(10))))
    >>> spread_blocks(fixed, replay=True)
    (60, 10)
    >>> late = ast.WatermarkEarlyLate(late=ast.Delay(ast.Duration(5)))
    >>> spread_blocks(ast.Windowing(fixed.window, late), replay=True) is None
    True
    >>> spread_blocks(ast.Windowing(ast.WindowClause(ast.Sliding(ast.Duration(60), ast.Duration(30)))),
    ...               replay=False) is None
    True
    """
    fn = windowing.window.fn
    if replay and uses_processing_time(windowing.effective_trigger):
        return None
    if isinstance(fn, ast.Fixed):
        return fn.size.micros, fn.offset.micros % fn.size.micros
    if isinstance(fn, ast.Cumulate):
        return fn.size.micros, fn.offset.micros % fn.size.micros
    return None


def window_fn(fn: "ast.WindowFn", custom: dict | None = None) -> WindowAssigner:
    """The implementation of an AST window function. `custom` maps names to classes (defaults
    to the registry), so a plan can carry its custom classes to Spark executors."""
    if isinstance(fn, ast.Global):
        return GlobalWindows()
    if isinstance(fn, ast.Fixed):
        return FixedWindows(fn.size.micros, fn.offset.micros)
    if isinstance(fn, ast.Sliding):
        return SlidingWindows(fn.size.micros, fn.period.micros, fn.offset.micros)
    if isinstance(fn, ast.Cumulate):
        return CumulateWindows(fn.step.micros, fn.size.micros, fn.offset.micros)
    if isinstance(fn, ast.Sessions):
        return SessionWindows(fn.gap.micros if isinstance(fn.gap, ast.Duration) else None)
    if isinstance(fn, ast.CustomWindow):
        cls = (custom or {}).get(fn.name.lower()) or registered_window_fn(fn.name)
        if cls is None:
            raise SqlflowSemanticError(
                f"unknown window function {fn.name}; register it with sqlflow.register_window_fn",
                clause="WINDOW",
                line=fn.pos.line if fn.pos else None,
                column=fn.pos.column if fn.pos else None,
            )
        args = [a.micros if isinstance(a, ast.Duration) else a for a in fn.args]
        return CustomWindows(fn.name, cls(*args))
    raise TypeError(f"not a window function: {fn!r}")
