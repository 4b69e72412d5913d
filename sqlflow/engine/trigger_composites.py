"""The composite triggers of `triggers.py` (REPEAT, REPEAT_UNTIL, SEQUENCE, FIRST_OF, ALL_OF) over
a table of windows, and `columns_of`, the column form of a compiled trigger: the leaves and the
protocol every node follows are in `trigger_columns.py`.

>>> from sqlflow import ast
>>> from sqlflow.engine.triggers import compile_trigger
>>> from sqlflow.engine.trigger_columns import Context
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

from . import triggers as tr
from .trigger_columns import NO_TIMER, Count, Delay, Node, Percentile, Period, Watermark, When, group_all, group_min

_I64 = np.int64


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
        T[self.name][dst] = group_all(T[self.name][src], grp, inc, len(dst))

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
        low = group_min(stage, grp, inc, len(dst))
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
            T[self._done(i)][dst] = group_all(T[self._done(i)][src], grp, inc, len(dst))

    def _timer(self, i: int, child, T, rows):  # a child that fired waits: its timer does not count
        return np.where(T[self._done(i)][rows], NO_TIMER, child.timer(T, rows))


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
