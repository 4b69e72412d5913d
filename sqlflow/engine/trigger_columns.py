"""The trigger algebra of `triggers.py`, evaluated for many windows at once.

`triggers.py` defines each trigger as a small state machine over one window's state (nested
lists). Here the same machines run over a table of windows: every part of the state is a column
(int64 or bool, one row per window) and each protocol call takes the rows it applies to, so one
call advances every window of a bucket that sees the same instant. The tree is fixed per query, so
the Python work is per tree node, never per window. The per-window machines stay the definition:
tests/engine/test_stream_step.py checks that both give the same panes.

A PERIOD or DELAY timer that is not armed is +inf here (None in `triggers.py`): a timer armed at
+inf never fires, and re-arming it gives +inf again, so the two cannot be told apart.

The composites (REPEAT, SEQUENCE, ...) and `columns_of`, which builds the tree of a compiled
trigger, are in `trigger_composites.py`.
"""
from __future__ import annotations

import numpy as np

from ..time import POS_INF, saturating_add

_I64 = np.int64
#: a timer that is not armed
NO_TIMER = POS_INF


class Context:
    """What triggers may look at: scalars, or arrays over the whole window table (indexed by row).

    `n` is how many elements each window received at this instant, `when[:, i]` whether one of
    them made WHEN predicate i true, `arrived` how many the window holds, `expected` how many it
    will hold (0 on a stream: percentile triggers other than 100 never fire there)."""

    __slots__ = ("now", "watermark", "end", "arrived", "expected", "n", "when")

    def __init__(self, now, watermark, end, arrived=0, expected=0, n=0, when=None):
        self.now, self.watermark, self.end = now, watermark, end
        self.arrived, self.expected, self.n, self.when = arrived, expected, n, when

    def get(self, name: str, rows: np.ndarray):
        v = getattr(self, name)
        return v[rows] if isinstance(v, np.ndarray) else v


def group_all(v, grp, inc, n):
    """Per group: every included source is true (true for a group without one)."""
    return np.bincount(grp[inc & ~v], minlength=n) == 0


def group_any(v, grp, inc, n):
    return np.bincount(grp[inc & v], minlength=n) > 0


def group_min(v, grp, inc, n):
    out = np.full(n, POS_INF, _I64)
    np.minimum.at(out, grp[inc], v[inc])
    return out


def group_sum(v, grp, inc, n):
    out = np.zeros(n, _I64)
    np.add.at(out, grp[inc], v[inc])
    return out


def ceil_to(now, period: int, offset: int = 0):
    """The first boundary k*period + offset at or after `now` (+inf past the largest int64);
    0 <= offset < period.

    >>> ceil_to(np.array([0, 1, 10, 11]), 10).tolist(), ceil_to(np.array([0, 3, 4, 13]), 10, 3).tolist()
    ([0, 10, 10, 20], [3, 3, 13, 13])
    >>> int(ceil_to(np.array([POS_INF - 3]), 10)[0]) == POS_INF, int(ceil_to(np.array([POS_INF - 1]), 10, 5)[0]) == POS_INF
    (True, True)
    """
    q = -((-(np.asarray(now, _I64) - offset)) // period)
    return np.where(q > (POS_INF - offset) // period, POS_INF, q * period + offset)


# ---------------------------------------------------------------------- the protocol


class Node:
    """One trigger over a table of windows (dict of columns). Every call takes `rows`, an int
    array of table rows; `merge` writes rows `dst` (one per group) from rows `src`, where source i
    belongs to group `grp[i]` and takes part when `inc[i]` (the sources of `triggers.py`'s
    merge(states))."""

    def __init__(self, name: str):
        self.name = name

    def columns(self) -> dict:
        """column name -> initial value (its dtype says int64 or bool), this node's and below."""
        raise NotImplementedError

    def table(self, n: int) -> dict:
        """A table of n fresh states."""
        return {c: np.full(n, v, dtype=np.asarray(v).dtype) for c, v in self.columns().items()}

    def new(self, T, rows):
        for c, v in self.columns().items():
            T[c][rows] = v

    def on_elements(self, T, rows, ctx):
        pass

    def step(self, T, rows, ctx) -> np.ndarray:
        raise NotImplementedError

    def finished(self, T, rows) -> np.ndarray:
        raise NotImplementedError

    def merge(self, T, dst, src, grp, inc):
        raise NotImplementedError

    def timer(self, T, rows) -> np.ndarray:
        return np.full(len(rows), NO_TIMER, _I64)


class Watermark(Node):
    """Fires once when W >= window end. Column: fired."""

    def columns(self):
        return {self.name: False}

    def step(self, T, rows, ctx):
        f = T[self.name]
        fire = ~f[rows] & (ctx.get("watermark", rows) >= ctx.get("end", rows))
        f[rows[fire]] = True
        return fire

    def finished(self, T, rows):
        return T[self.name][rows].copy()

    def merge(self, T, dst, src, grp, inc):
        T[self.name][dst] = group_all(T[self.name][src], grp, inc, len(dst))


class Percentile(Watermark):
    """Fires once when the window is `percentile`% complete. Column: fired."""

    def __init__(self, name, percentile: float):
        super().__init__(name)
        self.percentile = percentile

    def step(self, T, rows, ctx):
        f = T[self.name]
        expected = np.broadcast_to(np.asarray(ctx.get("expected", rows)), rows.shape)
        need = np.ceil(self.percentile / 100.0 * expected - 1e-9)
        fire = ~f[rows] & (expected > 0) & (ctx.get("arrived", rows) >= need)
        f[rows[fire]] = True
        return fire


class Period(Node):
    """Fires once at the first boundary k*period + offset at or after its first element.
    Columns: timer, fired."""

    def __init__(self, name, period: int, offset: int = 0):
        super().__init__(name)
        self.period, self.offset = period, offset
        self.t, self.f = name + "t", name + "f"

    def columns(self):
        return {self.t: _I64(NO_TIMER), self.f: False}

    def _arm(self, now):
        return ceil_to(now, self.period, self.offset)

    def on_elements(self, T, rows, ctx):
        arm = (T[self.t][rows] == NO_TIMER) & ~T[self.f][rows]
        if arm.any():
            now = ctx.get("now", rows)
            T[self.t][rows[arm]] = self._arm(now[arm] if isinstance(now, np.ndarray) else np.full(int(arm.sum()), now))

    def step(self, T, rows, ctx):
        t = T[self.t][rows]
        fire = ~T[self.f][rows] & (t != NO_TIMER) & (ctx.get("now", rows) >= t)
        hit = rows[fire]
        T[self.t][hit] = NO_TIMER
        T[self.f][hit] = True
        return fire

    def finished(self, T, rows):
        return T[self.f][rows].copy()

    def merge(self, T, dst, src, grp, inc):
        n = len(dst)
        T[self.t][dst] = group_min(T[self.t][src], grp, inc, n)
        T[self.f][dst] = group_all(T[self.f][src], grp, inc, n)

    def timer(self, T, rows):
        return T[self.t][rows].copy()


class Delay(Period):
    """Fires once `delay` after its first element. Columns: timer, fired."""

    def _arm(self, now):
        return saturating_add(now, self.period)


class _Latch(Node):
    """`triggers._LatchTrigger` over a table: fires once what a window has seen (column `seen`,
    from `start`) is `enough`; a merged window's is its sources' `together`. Columns: seen, fired."""

    def __init__(self, name, seen: str, start):
        super().__init__(name)
        self.s, self.f, self.start = name + seen, name + "f", start

    def columns(self):
        return {self.s: self.start, self.f: False}

    def enough(self, seen) -> np.ndarray:
        raise NotImplementedError

    def together(self, seen, grp, inc, n) -> np.ndarray:
        raise NotImplementedError

    def step(self, T, rows, ctx):
        fire = ~T[self.f][rows] & self.enough(T[self.s][rows])
        T[self.f][rows[fire]] = True
        return fire

    def finished(self, T, rows):
        return T[self.f][rows].copy()

    def merge(self, T, dst, src, grp, inc):
        n = len(dst)
        T[self.s][dst] = self.together(T[self.s][src], grp, inc, n)
        T[self.f][dst] = group_all(T[self.f][src], grp, inc, n)


class Count(_Latch):
    """Fires once `n` elements have arrived since it started. Columns: count, fired."""

    def __init__(self, name, n: int):
        super().__init__(name, "c", _I64(0))
        self.n = n

    def on_elements(self, T, rows, ctx):
        live = rows[~T[self.f][rows]]
        T[self.s][live] += np.broadcast_to(np.asarray(ctx.get("n", live), _I64), live.shape)

    def enough(self, count):
        return count >= self.n

    def together(self, count, grp, inc, n):
        return group_sum(count, grp, inc, n)


class When(_Latch):
    """Fires once an element arrives whose predicate `index` is true. Columns: seen, fired."""

    def __init__(self, name, index: int):
        super().__init__(name, "s", False)
        self.index = index

    def on_elements(self, T, rows, ctx):
        seen = ~T[self.f][rows] & ctx.when[rows, self.index]
        T[self.s][rows[seen]] = True

    def enough(self, seen):
        return seen

    def together(self, seen, grp, inc, n):
        return group_any(seen, grp, inc, n)
