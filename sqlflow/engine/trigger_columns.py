"""The trigger algebra of `triggers.py`, evaluated for many windows at once.

`triggers.py` defines each trigger as a small state machine over one window's state (nested
lists). Here the same machines run over a table of windows: every part of the state is a column
(int64 or bool, one row per window) and each protocol call takes the rows it applies to, so one
call advances every window of a bucket that sees the same instant. The tree is fixed per query, so
the Python work is per tree node, never per window. The per-window machines stay the definition:
tests/engine/test_stream_step.py checks that both give the same panes.

A PERIOD or DELAY timer that is not armed is +inf here (None in `triggers.py`): a timer armed at
+inf never fires, and re-arming it gives +inf again, so the two cannot be told apart.

>>> from sqlflow import ast
>>> from sqlflow.engine.triggers import compile_trigger
>>> t = columns_of(compile_trigger(ast.Repeat(ast.Count(2))))
>>> T = t.table(3)
>>> ctx = Context(now=0, watermark=0, end=np.full(3, 10), n=np.array([1, 2, 0]))
>>> rows = np.arange(3)
>>> t.on_elements(T, rows, ctx)
>>> t.step(T, rows, ctx).tolist(), T["0.0c"].tolist()   # the window with 2 fired and restarted
([False, True, False], [1, 0, 0])
"""
from __future__ import annotations

import numpy as np

from ..time import POS_INF, saturating_add
from . import triggers as tr

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


def _group_all(v, grp, inc, n):
    """Per group: every included source is true (true for a group without one)."""
    return np.bincount(grp[inc & ~v], minlength=n) == 0


def _group_any(v, grp, inc, n):
    return np.bincount(grp[inc & v], minlength=n) > 0


def _group_min(v, grp, inc, n):
    out = np.full(n, POS_INF, _I64)
    np.minimum.at(out, grp[inc], v[inc])
    return out


def _group_sum(v, grp, inc, n):
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
        T[self.name][dst] = _group_all(T[self.name][src], grp, inc, len(dst))


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
        T[self.t][dst] = _group_min(T[self.t][src], grp, inc, n)
        T[self.f][dst] = _group_all(T[self.f][src], grp, inc, n)

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
        T[self.f][dst] = _group_all(T[self.f][src], grp, inc, n)


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
        return _group_sum(count, grp, inc, n)


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
        return _group_any(seen, grp, inc, n)


# ---------------------------------------------------------------------- composites


class Composite(Node):
    def __init__(self, name, children):
        super().__init__(name)
        self.children = tuple(children)

    def _own(self) -> dict:
        return {}

    def columns(self):
        out = dict(self._own())
        for c in self.children:
            out.update(c.columns())
        return out


class _Finishing(Composite):
    """A composite that fires and then finishes (own column: finished): its children see elements,
    and their timers count, until then; a merged window has finished when all its sources had."""

    def _own(self):
        return {self.name: False}

    def on_elements(self, T, rows, ctx):
        live = rows[~T[self.name][rows]]
        for c in self.children:
            c.on_elements(T, live, ctx)

    def finished(self, T, rows):
        return T[self.name][rows].copy()

    def merge(self, T, dst, src, grp, inc):
        for c in self.children:
            c.merge(T, dst, src, grp, inc)
        T[self.name][dst] = _group_all(T[self.name][src], grp, inc, len(dst))

    def timer(self, T, rows):
        t = np.full(len(rows), NO_TIMER, _I64)
        for i, c in enumerate(self.children):
            t = np.minimum(t, self._timer(i, c, T, rows))
        return np.where(T[self.name][rows], NO_TIMER, t)

    def _timer(self, i: int, child, T, rows):
        return child.timer(T, rows)


class Repeat(Composite):
    """Fires whenever the child fires; restarts the child after each firing."""

    def on_elements(self, T, rows, ctx):
        self.children[0].on_elements(T, rows, ctx)

    def step(self, T, rows, ctx):
        child = self.children[0]
        fired = child.step(T, rows, ctx)
        child.new(T, rows[child.finished(T, rows)])
        return fired

    def finished(self, T, rows):
        return np.zeros(len(rows), bool)

    def merge(self, T, dst, src, grp, inc):
        self.children[0].merge(T, dst, src, grp, inc)

    def timer(self, T, rows):
        return self.children[0].timer(T, rows)


class RepeatUntil(_Finishing):
    """REPEAT(child) while `until` runs alongside; when `until` fires, fires and finishes.
    Own column: finished."""

    def step(self, T, rows, ctx):
        child, until = self.children
        out = np.zeros(len(rows), bool)
        act = np.flatnonzero(~T[self.name][rows])
        live = rows[act]
        u = until.step(T, live, ctx)
        T[self.name][live[u]] = True
        rest = live[~u]
        fired = child.step(T, rest, ctx)
        child.new(T, rest[child.finished(T, rest)])
        out[act[u]] = True
        out[act[~u]] = fired
        return out


class Sequence(Composite):
    """Runs each child until it finishes, then the next. Own column: the current child's index
    (the columns of the other children are not read until the sequence moves to them)."""

    def _own(self):
        return {self.name: _I64(0)}

    def _stages(self, T, rows):
        cur = T[self.name][rows]
        for i, child in enumerate(self.children):
            at = np.flatnonzero(cur == i)
            if len(at):
                yield i, child, at

    def on_elements(self, T, rows, ctx):
        for _, child, at in self._stages(T, rows):
            child.on_elements(T, rows[at], ctx)

    def step(self, T, rows, ctx):
        out = np.zeros(len(rows), bool)
        for i, child, at in list(self._stages(T, rows)):  # stages as they were before this step
            sel = rows[at]
            out[at] = child.step(T, sel, ctx)
            done = sel[child.finished(T, sel)]
            T[self.name][done] = i + 1
            if i + 1 < len(self.children):
                self.children[i + 1].new(T, done)
        return out

    def finished(self, T, rows):
        return T[self.name][rows] >= len(self.children)

    def merge(self, T, dst, src, grp, inc):
        # the patent: resume at the lowest stage among the sources; merge that stage's child
        stage = T[self.name][src]
        low = _group_min(stage, grp, inc, len(dst))
        T[self.name][dst] = low
        at_low = inc & (stage == low[grp])
        for i, child in enumerate(self.children):
            child.merge(T, dst, src, grp, at_low & (low[grp] == i))

    def timer(self, T, rows):
        out = np.full(len(rows), NO_TIMER, _I64)
        for _, child, at in self._stages(T, rows):
            out[at] = child.timer(T, rows[at])
        return out


class FirstOf(_Finishing):
    """Fires when any child fires, then finishes. Own column: finished."""

    def step(self, T, rows, ctx):
        out = np.zeros(len(rows), bool)
        act = np.flatnonzero(~T[self.name][rows])
        live = rows[act]
        fired = np.zeros(len(live), bool)
        for c in self.children:  # every child steps, as in triggers.py
            fired |= c.step(T, live, ctx)
        T[self.name][live[fired]] = True
        out[act] = fired
        return out


class AllOf(_Finishing):
    """Fires when every child has fired (children that fired wait), then finishes. Own columns:
    finished, and one done flag per child."""

    def _done(self, i):
        return f"{self.name}d{i}"

    def _own(self):
        return {self.name: False, **{self._done(i): False for i in range(len(self.children))}}

    def on_elements(self, T, rows, ctx):
        live = rows[~T[self.name][rows]]
        for i, c in enumerate(self.children):
            c.on_elements(T, live[~T[self._done(i)][live]], ctx)

    def step(self, T, rows, ctx):
        out = np.zeros(len(rows), bool)
        act = np.flatnonzero(~T[self.name][rows])
        live = rows[act]
        every = np.ones(len(live), bool)
        for i, c in enumerate(self.children):
            done = T[self._done(i)]
            sel = live[~done[live]]
            done[sel[c.step(T, sel, ctx)]] = True
            every &= done[live]
        T[self.name][live[every]] = True
        out[act] = every
        return out

    def merge(self, T, dst, src, grp, inc):
        super().merge(T, dst, src, grp, inc)
        for i in range(len(self.children)):
            T[self._done(i)][dst] = _group_all(T[self._done(i)][src], grp, inc, len(dst))

    def _timer(self, i: int, child, T, rows):  # a child that fired waits: its timer does not count
        return np.where(T[self._done(i)][rows], NO_TIMER, child.timer(T, rows))


# ---------------------------------------------------------------------- from triggers.py


def columns_of(trigger, name: str = "0") -> Node:
    """The column form of a compiled trigger (`triggers.compile_trigger`); columns are named by
    the node's path in the tree ("0", "0.1", ...) and a letter for the part of its state."""
    kids = lambda cs: [columns_of(c, f"{name}.{i}") for i, c in enumerate(cs)]  # noqa: E731
    if isinstance(trigger, tr.PercentileTrigger):
        return Percentile(name, trigger.percentile)
    if isinstance(trigger, tr.WatermarkTrigger):
        return Watermark(name)
    if isinstance(trigger, tr.DelayTrigger):
        return Delay(name, trigger.delay)
    if isinstance(trigger, tr.PeriodTrigger):
        return Period(name, trigger.period, trigger.offset)
    if isinstance(trigger, tr.CountTrigger):
        return Count(name, trigger.n)
    if isinstance(trigger, tr.WhenTrigger):
        return When(name, trigger.index)
    if isinstance(trigger, tr.RepeatTrigger):
        return Repeat(name, kids([trigger.child]))
    if isinstance(trigger, tr.RepeatUntilTrigger):
        return RepeatUntil(name, kids([trigger.child, trigger.until]))
    if isinstance(trigger, tr.SequenceTrigger):
        return Sequence(name, kids(trigger.children))
    if isinstance(trigger, tr.FirstOfTrigger):
        return FirstOf(name, kids(trigger.children))
    if isinstance(trigger, tr.AllOfTrigger):
        return AllOf(name, kids(trigger.children))
    raise TypeError(f"not a trigger: {trigger!r}")
