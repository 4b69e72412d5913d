"""Triggers as a small algebra of state machines (docs/semantics.md, section 3).

Every trigger implements one protocol over a per-window state (a small list, so it pickles
compactly for streaming state):

- `new()`                          fresh state
- `on_elements(st, ctx, n, when)`  n elements arrived at this instant (`when[i]`: some arriving
                                   element made WHEN predicate i true)
- `step(st, ctx) -> bool`          evaluate once; True means the trigger fired (state updated)
- `finished(st)`                   the trigger can never fire again
- `merge(states) -> st`            state of a merged window from its sources' states
- `timer(st)`                      earliest armed processing-time timer, or None

Primitives fire once and finish; composites repeat and sequence them. `compile_trigger` turns an
AST trigger into this algebra.

>>> from sqlflow import ast
>>> t = compile_trigger(ast.Repeat(ast.Count(2)))
>>> st, ctx = t.new(), Context(now=0, watermark=0, end=10)
>>> t.on_elements(st, ctx, 1, ()); t.step(st, ctx)
False
>>> t.on_elements(st, ctx, 1, ()); t.step(st, ctx)
True
>>> t.finished(st)
False
"""
from __future__ import annotations

import math
from typing import Protocol, Sequence

from .. import ast
from ..time import POS_INF, saturating_add


class Context:
    """What a trigger may look at when it is evaluated for one window."""

    __slots__ = ("now", "watermark", "end", "arrived", "expected")

    def __init__(self, now, watermark, end, arrived=0, expected=0):
        self.now = now  # processing time, or None when there is none (bounded data)
        self.watermark = watermark
        self.end = end  # window end
        self.arrived = arrived  # elements the window holds (for percentile completeness)
        self.expected = expected  # elements it will eventually hold


class TriggerMachine(Protocol):
    """The contract every trigger implements (this module's docstring): one state machine per
    window, over a state of nested lists of plain values. `compile_trigger` builds them."""

    def new(self) -> list:
        """A fresh state."""
        ...

    def on_elements(self, st: list, ctx: Context, n: int, when: Sequence[bool]) -> None:
        """`n` elements arrived at this instant; `when[i]`: one of them made WHEN predicate i true."""
        ...

    def step(self, st: list, ctx: Context) -> bool:
        """Evaluate once; True: the trigger fired (the state is updated)."""
        ...

    def finished(self, st: list) -> bool:
        """The trigger can never fire again."""
        ...

    def merge(self, states: Sequence[list]) -> list:
        """The state of a merged window from its sources' states."""
        ...

    def timer(self, st: list) -> int | None:
        """The earliest armed processing-time timer, or None."""
        ...


def copy_state(st: list) -> list:
    """A copy of a trigger state that shares no list with it (states are nested lists of plain
    values), so running a trigger on the copy leaves the original as it was.

    >>> st = [[0, False], [None, True]]
    >>> cp = copy_state(st); cp[0][0] = 5
    >>> st
    [[0, False], [None, True]]
    """
    return [copy_state(x) if isinstance(x, list) else x for x in st]


def _min_timer(*timers):
    armed = [t for t in timers if t is not None]
    return min(armed) if armed else None


# ---------------------------------------------------------------------- primitives


class WatermarkTrigger(TriggerMachine):
    """Fires once when W >= window end. State: [fired]."""

    def new(self) -> list:
        return [False]

    def on_elements(self, st: list, ctx: Context, n: int, when: Sequence[bool]) -> None:
        pass

    def step(self, st: list, ctx: Context) -> bool:
        if not st[0] and ctx.watermark >= ctx.end:
            st[0] = True
            return True
        return False

    def finished(self, st: list) -> bool:
        return st[0]

    def merge(self, states: Sequence[list]) -> list:
        return [all(s[0] for s in states)]

    def timer(self, st: list) -> int | None:
        return None


class PercentileTrigger(WatermarkTrigger):
    """Fires once when the window is `q`% complete (recorded data). State: [fired]."""

    def __init__(self, percentile: float):
        self.percentile = percentile

    def step(self, st: list, ctx: Context) -> bool:
        if st[0]:
            return False
        need = math.ceil(self.percentile / 100.0 * ctx.expected - 1e-9)
        if ctx.expected > 0 and ctx.arrived >= need:
            st[0] = True
            return True
        return False


def next_boundary(now: int, period: int, offset: int = 0) -> int:
    """The first processing-time boundary k*period + offset at or after `now` (a boundary itself
    stays; +inf past the largest int64).

    >>> next_boundary(10, 10), next_boundary(11, 10), next_boundary(11, 10, 3), next_boundary(13, 10, 3)
    (10, 20, 13, 13)
    """
    return min(-((-(now - offset)) // period) * period + offset, POS_INF)


class PeriodTrigger(TriggerMachine):
    """Fires once at the first boundary k*period + offset at or after its first element.
    State: [timer, fired]."""

    def __init__(self, period: int, offset: int = 0):
        self.period, self.offset = period, offset

    def new(self) -> list:
        return [None, False]

    def on_elements(self, st: list, ctx: Context, n: int, when: Sequence[bool]) -> None:
        if st[0] is None and not st[1] and ctx.now is not None:
            st[0] = next_boundary(ctx.now, self.period, self.offset)

    def step(self, st: list, ctx: Context) -> bool:
        if not st[1] and st[0] is not None and ctx.now is not None and ctx.now >= st[0]:
            st[0], st[1] = None, True
            return True
        return False

    def finished(self, st: list) -> bool:
        return st[1]

    def merge(self, states: Sequence[list]) -> list:
        return [_min_timer(*(s[0] for s in states)), all(s[1] for s in states)]

    def timer(self, st: list) -> int | None:
        return st[0]


class DelayTrigger(PeriodTrigger):
    """Fires once `delay` after its first element. State: [timer, fired]."""

    def __init__(self, delay: int):
        self.delay = delay

    def on_elements(self, st: list, ctx: Context, n: int, when: Sequence[bool]) -> None:
        if st[0] is None and not st[1] and ctx.now is not None:
            st[0] = saturating_add(ctx.now, self.delay)  # +inf: never, in int64 microseconds


class _LatchTrigger(TriggerMachine):
    """Fires once what it has seen since it started (`st[0]`, from `start`) is `enough`.
    State: [seen, fired]; a merged window has seen what its sources saw together (`together`)."""

    start: object = 0

    def enough(self, seen) -> bool:
        raise NotImplementedError

    def together(self, seen):
        raise NotImplementedError

    def new(self) -> list:
        return [self.start, False]

    def step(self, st: list, ctx: Context) -> bool:
        if not st[1] and self.enough(st[0]):
            st[1] = True
            return True
        return False

    def finished(self, st: list) -> bool:
        return st[1]

    def merge(self, states: Sequence[list]) -> list:
        return [self.together(s[0] for s in states), all(s[1] for s in states)]

    def timer(self, st: list) -> int | None:
        return None


class CountTrigger(_LatchTrigger):
    """Fires once `n` elements have arrived since it started. State: [count, fired]."""

    start = 0

    def __init__(self, n: int):
        self.n = n

    def on_elements(self, st: list, ctx: Context, n: int, when: Sequence[bool]) -> None:
        if not st[1]:
            st[0] += n

    def enough(self, count) -> bool:
        return count >= self.n

    def together(self, counts):
        return sum(counts)


class WhenTrigger(_LatchTrigger):
    """Fires once an element arrives whose predicate (column `index`) is true. State: [seen, fired]."""

    start = False

    def __init__(self, index: int):
        self.index = index

    def on_elements(self, st: list, ctx: Context, n: int, when: Sequence[bool]) -> None:
        if not st[1] and when[self.index]:
            st[0] = True

    def enough(self, seen) -> bool:
        return bool(seen)

    def together(self, seen):
        return any(seen)


# ---------------------------------------------------------------------- composites


class RepeatTrigger(TriggerMachine):
    """Fires whenever the child fires; restarts the child after each firing. State: [child]."""

    def __init__(self, child: TriggerMachine) -> None:
        self.child = child

    def new(self) -> list:
        return [self.child.new()]

    def on_elements(self, st: list, ctx: Context, n: int, when: Sequence[bool]) -> None:
        self.child.on_elements(st[0], ctx, n, when)

    def step(self, st: list, ctx: Context) -> bool:
        fired = self.child.step(st[0], ctx)
        if self.child.finished(st[0]):
            st[0] = self.child.new()
        return fired

    def finished(self, st: list) -> bool:
        return False

    def merge(self, states: Sequence[list]) -> list:
        return [self.child.merge([s[0] for s in states])]

    def timer(self, st: list) -> int | None:
        return self.child.timer(st[0])


class RepeatUntilTrigger(TriggerMachine):
    """REPEAT(t) while `until` runs alongside; when `until` fires, fires and finishes.
    State: [t, until, finished]."""

    def __init__(self, child: TriggerMachine, until: TriggerMachine) -> None:
        self.child, self.until = child, until

    def new(self) -> list:
        return [self.child.new(), self.until.new(), False]

    def on_elements(self, st: list, ctx: Context, n: int, when: Sequence[bool]) -> None:
        if not st[2]:
            self.child.on_elements(st[0], ctx, n, when)
            self.until.on_elements(st[1], ctx, n, when)

    def step(self, st: list, ctx: Context) -> bool:
        if st[2]:
            return False
        if self.until.step(st[1], ctx):
            st[2] = True
            return True
        fired = self.child.step(st[0], ctx)
        if self.child.finished(st[0]):
            st[0] = self.child.new()
        return fired

    def finished(self, st: list) -> bool:
        return st[2]

    def merge(self, states: Sequence[list]) -> list:
        return [
            self.child.merge([s[0] for s in states]),
            self.until.merge([s[1] for s in states]),
            all(s[2] for s in states),
        ]

    def timer(self, st: list) -> int | None:
        return None if st[2] else _min_timer(self.child.timer(st[0]), self.until.timer(st[1]))


class SequenceTrigger(TriggerMachine):
    """Runs each child until it finishes, then the next. State: [index, child state]."""

    def __init__(self, children: Sequence[TriggerMachine]) -> None:
        self.children = tuple(children)

    def new(self) -> list:
        return [0, self.children[0].new()]

    def on_elements(self, st: list, ctx: Context, n: int, when: Sequence[bool]) -> None:
        if st[0] < len(self.children):
            self.children[st[0]].on_elements(st[1], ctx, n, when)

    def step(self, st: list, ctx: Context) -> bool:
        i = st[0]
        if i >= len(self.children):
            return False
        child = self.children[i]
        fired = child.step(st[1], ctx)
        if child.finished(st[1]):
            st[0] = i + 1
            st[1] = self.children[i + 1].new() if i + 1 < len(self.children) else None
        return fired

    def finished(self, st: list) -> bool:
        return st[0] >= len(self.children)

    def merge(self, states: Sequence[list]) -> list:
        # the patent: resume at the lowest stage among the sources; merge that stage's child
        low = min(s[0] for s in states)
        if low >= len(self.children):
            return [low, None]
        return [low, self.children[low].merge([s[1] for s in states if s[0] == low])]

    def timer(self, st: list) -> int | None:
        return None if st[0] >= len(self.children) else self.children[st[0]].timer(st[1])


class FirstOfTrigger(TriggerMachine):
    """Fires when any child fires, then finishes. State: [child states, finished]."""

    def __init__(self, children: Sequence[TriggerMachine]) -> None:
        self.children = tuple(children)

    def new(self) -> list:
        return [[c.new() for c in self.children], False]

    def on_elements(self, st: list, ctx: Context, n: int, when: Sequence[bool]) -> None:
        if not st[1]:
            for c, s in zip(self.children, st[0]):
                c.on_elements(s, ctx, n, when)

    def step(self, st: list, ctx: Context) -> bool:
        if st[1]:
            return False
        fired = False
        for c, s in zip(self.children, st[0]):
            fired = c.step(s, ctx) or fired
        if fired:
            st[1] = True
        return fired

    def finished(self, st: list) -> bool:
        return st[1]

    def merge(self, states: Sequence[list]) -> list:
        return [
            [c.merge([s[0][i] for s in states]) for i, c in enumerate(self.children)],
            all(s[1] for s in states),
        ]

    def timer(self, st: list) -> int | None:
        return None if st[1] else _min_timer(*(c.timer(s) for c, s in zip(self.children, st[0])))


class AllOfTrigger(TriggerMachine):
    """Fires when every child has fired, then finishes. State: [child states, done flags, finished]."""

    def __init__(self, children: Sequence[TriggerMachine]) -> None:
        self.children = tuple(children)

    def new(self) -> list:
        return [[c.new() for c in self.children], [False] * len(self.children), False]

    def on_elements(self, st: list, ctx: Context, n: int, when: Sequence[bool]) -> None:
        if not st[2]:
            for c, s, done in zip(self.children, st[0], st[1]):
                if not done:
                    c.on_elements(s, ctx, n, when)

    def step(self, st: list, ctx: Context) -> bool:
        if st[2]:
            return False
        for i, (c, s) in enumerate(zip(self.children, st[0])):
            if not st[1][i] and c.step(s, ctx):
                st[1][i] = True
        if all(st[1]):
            st[2] = True
            return True
        return False

    def finished(self, st: list) -> bool:
        return st[2]

    def merge(self, states: Sequence[list]) -> list:
        return [
            [c.merge([s[0][i] for s in states]) for i, c in enumerate(self.children)],
            [all(s[1][i] for s in states) for i in range(len(self.children))],
            all(s[2] for s in states),
        ]

    def timer(self, st: list) -> int | None:
        if st[2]:
            return None
        return _min_timer(*(c.timer(s) for c, s, d in zip(self.children, st[0], st[1]) if not d))


# ---------------------------------------------------------------------- compilation


def compile_trigger(trigger: "ast.Trigger") -> TriggerMachine:
    """AST trigger (sugar allowed) -> state machine. WHEN nodes are numbered in pre-order."""
    counter = iter(range(1_000_000))
    return _compile(ast.desugar(trigger), counter)


def _compile(t, counter):
    if isinstance(t, ast.Watermark):
        return WatermarkTrigger()
    if isinstance(t, ast.WatermarkPercentile):
        return WatermarkTrigger() if t.percentile >= 100 else PercentileTrigger(t.percentile)
    if isinstance(t, ast.Period):
        return PeriodTrigger(t.period.micros, t.offset.micros)
    if isinstance(t, ast.Delay):
        return DelayTrigger(t.delay.micros)
    if isinstance(t, ast.Count):
        return CountTrigger(t.n)
    if isinstance(t, ast.When):
        return WhenTrigger(next(counter))
    if isinstance(t, ast.Repeat):
        return RepeatTrigger(_compile(t.trigger, counter))
    if isinstance(t, ast.RepeatUntil):
        child = _compile(t.trigger, counter)
        return RepeatUntilTrigger(child, _compile(t.until, counter))
    if isinstance(t, ast.Sequence):
        return SequenceTrigger([_compile(c, counter) for c in t.triggers])
    if isinstance(t, ast.FirstOf):
        return FirstOfTrigger([_compile(c, counter) for c in t.triggers])
    if isinstance(t, ast.AllOf):
        return AllOfTrigger([_compile(c, counter) for c in t.triggers])
    raise TypeError(f"not a trigger: {t!r}")


def when_predicates(trigger: "ast.Trigger") -> list["ast.SqlExpr"]:
    """The WHEN predicates of a trigger, in the order their columns are numbered."""
    return [t.predicate for t in ast.walk_triggers(ast.desugar(trigger)) if isinstance(t, ast.When)]


def uses_processing_time(trigger: "ast.Trigger") -> bool:
    return any(isinstance(t, (ast.Period, ast.Delay)) for t in ast.walk_triggers(ast.desugar(trigger)))


def uses_percentile(trigger: "ast.Trigger") -> bool:
    return any(isinstance(t, ast.WatermarkPercentile) and t.percentile < 100
               for t in ast.walk_triggers(ast.desugar(trigger)))
