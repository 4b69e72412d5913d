"""Triggers that cannot fire on a windowed SELECT's input, said before the panes are computed.

A trigger that never fires is not an error: every window still emits one pane, its last, when it
expires (docs/semantics.md, 6): on a replay as the watermark passes its end plus the allowed
lateness, on bounded data without ARRIVAL at the end of the input. But it is almost always a
mistake, so `explain` lists what it knows without running anything, and `sqlflow.sql` warns
(`SqlflowTriggerWarning`), saying what is emitted instead: that one pane per window, or, when only
a part of a composite trigger never fires, the parts that still do.

- `PERIOD d` and `DELAY d` on bounded data (no ARRIVAL): there is no processing time;
- `COUNT n` above the number of input rows, where that number is known without a job: a replay
  counts its rows to build the timeline, and Spark knows the row count of some relations (local
  data, analysed tables);
- `WHEN(p)` on a replay when `p` is true for no input row (one aggregation over the input, which
  the replay reads anyway);
- `EMIT ... ON TIME ALWAYS` with a trigger that never fires as the watermark passes a window's
  end (no WATERMARK in it): the option adds nothing.

Streams get none of these: their processing time and rows are still to come.

One more note holds on every input, streams included (`finish_notes`): a trigger that can
**finish** while its window still accepts data (docs/semantics.md 3.2: a finished trigger closes
the window, and its later elements are dropped as `closed window`). A window accepts data until
the end of bounded input, or until the watermark passes its end plus the allowed lateness.

>>> from sqlflow.frontend import parse
>>> from sqlflow.plan.windowed_select import describe
>>> s = parse("SELECT k, COUNT(*) FROM t GROUP BY k WINDOW FIXED(SIZE 1h) ON ts TRIGGER REPEAT(PERIOD 1m)")
>>> print(*bounded_notes(describe(s, *s.windowed_selects()[0]), rows=None), sep="\\n")
PERIOD 1m never fires on bounded data: there is no processing time without ARRIVAL; each window emits one pane, at the end of the input
>>> s = parse("SELECT k, COUNT(*) FROM t GROUP BY k WINDOW GLOBAL ON ts TRIGGER REPEAT(COUNT 100000)")
>>> print(*bounded_notes(describe(s, *s.windowed_selects()[0]), rows=2000), sep="\\n")
COUNT 100000 never fires: the input has 2,000 rows; each window emits one pane, at the end of the input
>>> s = parse("SELECT k, COUNT(*) FROM t GROUP BY k WINDOW GLOBAL ON ts TRIGGER REPEAT(COUNT 5) EMIT DISCARDING ON TIME ALWAYS")
>>> print(*option_notes(describe(s, *s.windowed_selects()[0])))
ON TIME ALWAYS adds no pane: the trigger never fires when the watermark passes a window's end (it has no WATERMARK)
>>> s = parse("SELECT k, COUNT(*) FROM t GROUP BY k WINDOW FIXED(SIZE 1h) ON ts TRIGGER COUNT 2")
>>> print(*finish_notes(describe(s, *s.windowed_selects()[0]), bounded=True))
TRIGGER COUNT 2 can finish before the watermark passes the window's end: the window is then closed, and its later elements are dropped (counted as 'closed window', listed by sqlflow.dropped); REPEAT(...) or WATERMARK ... LATE keeps it firing
"""
from __future__ import annotations

from .. import ast
from ..columns import when_column
from ..engine import collapsible, when_predicates
from ..frontend import printer
from ..time import POS_INF, format_duration
from ..plan import user_warnings
from ..plan.windowed_select import WindowedSelect


class SqlflowTriggerWarning(UserWarning):
    """A trigger of a windowed SELECT can never fire on its input (the windows still emit at the
    end of the input)."""


def _primitives(ws: WindowedSelect) -> list[ast.Trigger]:
    out: list[ast.Trigger] = []
    for t in ast.walk_triggers(ast.desugar(ws.windowing.effective_trigger)):
        if t not in out:
            out.append(t)
    return out


_COMPOSITES = (ast.Repeat, ast.RepeatUntil, ast.Sequence, ast.FirstOf, ast.AllOf)


def fires(trigger: ast.Trigger, never: list[ast.Trigger]) -> tuple[bool, bool]:
    """(can fire, can finish) of a desugared trigger whose primitives in `never` never fire
    (docs/semantics.md, 3.2: a primitive finishes as it fires, REPEAT never finishes,
    REPEAT_UNTIL fires and finishes as its `u` fires, SEQUENCE moves on as a child finishes).

    >>> fires(ast.Repeat(ast.AllOf((ast.Watermark(), ast.Count(9)))), [ast.Count(9)])
    (False, False)
    >>> fires(ast.Sequence((ast.RepeatUntil(ast.Count(9), ast.Watermark()), ast.Repeat(ast.Count(1)))), [ast.Count(9)])
    (True, False)
    """
    if isinstance(trigger, ast.Repeat):
        return fires(trigger.trigger, never)[0], False
    if isinstance(trigger, ast.RepeatUntil):
        until = fires(trigger.until, never)[0]
        return fires(trigger.trigger, never)[0] or until, until
    if isinstance(trigger, ast.Sequence):
        fired, reached = False, True
        for child in trigger.triggers:
            child_fires, child_finishes = fires(child, never)
            fired = fired or (reached and child_fires)
            reached = reached and child_finishes
        return fired, reached
    if isinstance(trigger, ast.FirstOf):
        fired = any(fires(t, never)[0] for t in trigger.triggers)
        return fired, fired
    if isinstance(trigger, ast.AllOf):
        fired = all(fires(t, never)[0] for t in trigger.triggers)
        return fired, fired
    fired = trigger not in never
    return fired, fired


def _instead(ws: WindowedSelect, never: list[ast.Trigger], *, bounded: bool) -> str:
    """What the windows emit, given the primitives that never fire: the note's ending."""
    trigger = ws.windowing.effective_trigger
    if fires(trigger, never)[0] and not (bounded and collapsible(trigger)):
        others = [printer.trigger(t) for t in _primitives(ws)
                  if not isinstance(t, _COMPOSITES) and t not in never]
        return f"{' and '.join(others)} still {'fire' if len(others) > 1 else 'fires'}"
    lateness = ws.windowing.lateness_micros
    if bounded or lateness >= POS_INF:  # the watermark passes every end at the end of the input
        return "each window emits one pane, at the end of the input"
    plus = f" + {format_duration(lateness)}" if lateness else ""
    return f"each window emits one pane, when it expires: when the watermark passes its end{plus}, " \
           "or at the end of the input"


def _notes(ws: WindowedSelect, never, *, bounded: bool) -> list[str]:
    """'<primitive> never fires: <why>; <what is emitted instead>' for each (primitive, why) of
    `never` (a why of None: said already, for the same WHEN written twice)."""
    if not never:
        return []
    ending = _instead(ws, [t for t, _ in never], bounded=bounded)
    return [f"{why}; {ending}" for _, why in never if why is not None]


def bounded_notes(ws: WindowedSelect, rows: int | None) -> list[str]:
    """Bounded data without ARRIVAL: processing-time triggers, and COUNT above `rows` (if known)."""
    timed = [(t, f"{printer.trigger(t)} never fires on bounded data: there is no processing time without ARRIVAL")
             for t in _primitives(ws) if isinstance(t, (ast.Period, ast.Delay))]
    return _notes(ws, timed + _counts(ws, rows), bounded=True) + option_notes(ws)


def option_notes(ws: WindowedSelect) -> list[str]:
    """EMIT ... ON TIME ALWAYS with a trigger that has no WATERMARK: only a watermark trigger fires
    as the watermark passes a window's end (docs/semantics.md 5.1)."""
    if ws.windowing.on_time_always and not any(isinstance(t, (ast.Watermark, ast.WatermarkPercentile))
                                               for t in _primitives(ws)):
        return ["ON TIME ALWAYS adds no pane: the trigger never fires when the watermark passes a window's end "
                "(it has no WATERMARK)"]
    return []


def _counts(ws: WindowedSelect, rows: int | None) -> list[tuple[ast.Trigger, str]]:
    """COUNT n with fewer than n input rows (an upper bound of any window's elements)."""
    if rows is None:
        return []
    return [(t, f"COUNT {t.n} never fires: the input has {rows:,} rows") for t in _primitives(ws)
            if isinstance(t, ast.Count) and t.n > rows]


def replay_notes(ws: WindowedSelect, raw, rows: int) -> list[str]:
    """A replay: COUNT above its rows, and WHEN predicates true for no input row (one job, only
    when the trigger has a WHEN)."""
    from pyspark.sql import functions as F

    predicates = when_predicates(ws.windowing.effective_trigger)
    if not predicates:
        return _notes(ws, _counts(ws, rows), bounded=False) + option_notes(ws)
    counts = raw.agg(F.count(F.lit(1)).alias("rows"),
                     *[F.count_if(F.col(when_column(i))).alias(f"when{i}") for i in range(len(predicates))]).first()
    rows = min(rows, int(counts["rows"]))
    never: list[tuple[ast.Trigger, str | None]] = list(_counts(ws, rows))
    whens = [t for t in ast.walk_triggers(ws.windowing.effective_trigger) if isinstance(t, ast.When)]
    seen = set()
    for i, (when, predicate) in enumerate(zip(whens, predicates)):
        if not counts[f"when{i}"]:
            never.append((when, None if predicate.sql in seen else
                          f"WHEN({predicate.sql}) never fires: it is true for none of the {rows:,} input rows"))
            seen.add(predicate.sql)
    return _notes(ws, never, bounded=False) + option_notes(ws)


#: when a trigger can finish, or fire for the first time: at any instant, only once the watermark
#: has passed the window's end, or never (ordered: the earlier, the lower)
ANYTIME, AT_END, NEVER = 0, 1, 2


def first_firing(t: ast.Trigger) -> int:
    """The earliest a trigger can fire for the first time (`ANYTIME` or `AT_END`).

    >>> first_firing(ast.Repeat(ast.Watermark())), first_firing(ast.FirstOf((ast.Watermark(), ast.Count(3))))
    (1, 0)
    """
    if isinstance(t, ast.Watermark) or (isinstance(t, ast.WatermarkPercentile) and t.percentile >= 100):
        return AT_END
    if isinstance(t, ast.Repeat):
        return first_firing(t.trigger)
    if isinstance(t, ast.RepeatUntil):
        return min(first_firing(t.trigger), first_firing(t.until))
    if isinstance(t, ast.Sequence):
        return first_firing(t.triggers[0])
    if isinstance(t, ast.FirstOf):
        return min(first_firing(c) for c in t.triggers)
    if isinstance(t, ast.AllOf):
        return max(first_firing(c) for c in t.triggers)
    return ANYTIME  # COUNT, WHEN, PERIOD, DELAY, WATERMARK PERCENTILE below 100


def finishing(t: ast.Trigger) -> int:
    """The earliest a (desugared) trigger can finish (docs/semantics.md 3.2): `ANYTIME`, `AT_END`
    or `NEVER`. A primitive finishes as it fires; REPEAT never; REPEAT_UNTIL as its `until` first
    fires; SEQUENCE with its last child, after the others; FIRST_OF / ALL_OF at their firing.

    >>> finishing(ast.Repeat(ast.Count(2))), finishing(ast.desugar(ast.WatermarkEarlyLate(late=ast.Count(1))))
    (2, 2)
    >>> finishing(ast.Watermark()), finishing(ast.RepeatUntil(ast.Period(ast.Duration(60_000_000)), ast.Watermark()))
    (1, 1)
    """
    if isinstance(t, ast.Repeat):
        return NEVER
    if isinstance(t, ast.RepeatUntil):
        return first_firing(t.until)
    if isinstance(t, ast.Sequence):
        return max(finishing(c) for c in t.triggers)
    if isinstance(t, (ast.FirstOf, ast.AllOf)):
        return first_firing(t)
    return first_firing(t)


def finish_notes(ws: WindowedSelect, bounded: bool) -> list[str]:
    """A trigger that can finish while its window still accepts data: before the watermark passes
    the window's end (any input), or at that instant with ALLOWED LATENESS (replays and streams;
    bounded input ends when the watermark passes). Its later elements are dropped as closed window."""
    windowing = ws.windowing
    when = finishing(ast.desugar(windowing.effective_trigger))
    text = printer.trigger(windowing.effective_trigger)
    consequence = ("the window is then closed, and its later elements are dropped (counted as 'closed window', "
                   "listed by sqlflow.dropped); REPEAT(...) or WATERMARK ... LATE keeps it firing")
    if when == ANYTIME:
        return [f"TRIGGER {text} can finish before the watermark passes the window's end: {consequence}"]
    if when == AT_END and windowing.lateness_micros > 0 and not bounded and windowing.allowed_lateness is not None:
        return [f"TRIGGER {text} finishes when the watermark passes the window's end, while ALLOWED LATENESS "
                f"{printer.lateness(windowing.allowed_lateness)} still accepts late elements: {consequence}"]
    return []


def row_count_estimate(df) -> int | None:
    """Spark's row count of a DataFrame when it knows it without a job (local data, analysed
    tables), else None."""
    try:
        count = df._jdf.queryExecution().optimizedPlan().stats().rowCount()
        if count.isEmpty():
            return None
        value = count.get()
        return int(value if isinstance(value, int) else value.toString())
    except Exception:  # noqa: BLE001  (Spark Connect, or no statistics)
        return None


def warn(label: str, notes: list[str]) -> None:
    """Warn about each note, attributed to the user's line that called sqlflow, each time it is
    raised (two cells with the same mistake both warn: sqlflow.plan.user_warnings)."""
    for note in notes:
        user_warnings.warn(f"sqlflow: {label}: {note}", SqlflowTriggerWarning)
