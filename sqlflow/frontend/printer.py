"""Canonical text of sqlflow's clauses: what `to_sql` writes, and what parses back to the same AST.

Durations are written with `format_duration` (`30m`); the source WATERMARK clause keeps Spark's
own `DELAY OF INTERVAL ...` form so that part stays Spark SQL.

>>> from sqlflow import ast
>>> w = ast.Windowing(ast.WindowClause(ast.Sliding(ast.Duration(3_600_000_000), ast.Duration(600_000_000))),
...                   trigger=ast.WatermarkEarlyLate(early=ast.Period(ast.Duration(60_000_000))),
...                   emit=ast.Emit(ast.AccumulationMode.ACCUMULATING_AND_RETRACTING))
>>> print(" ".join(windowing_clauses(w)))
WINDOW SLIDING(SIZE 1h, PERIOD 10m) TRIGGER WATERMARK EARLY PERIOD 1m EMIT ACCUMULATING AND RETRACTING
>>> source_watermark(ast.SourceWatermark("ts", ast.BoundedDelay(ast.Duration(90_000_000))))
'WATERMARK ts DELAY OF INTERVAL 90 SECONDS'
"""
from __future__ import annotations

from .. import ast
from ..time import UNITS, format_duration


def windowing_clauses(w: ast.Windowing) -> list[str]:
    """One string per clause, in the language's order."""
    clauses = [window_clause(w.window)]
    if w.trigger is not None:
        clauses.append(f"TRIGGER {trigger(w.trigger)}")
    if w.allowed_lateness is not None:
        clauses.append(f"ALLOWED LATENESS {lateness(w.allowed_lateness)}")
    if w.emit is not None:
        clauses.append(f"EMIT {emit_text(w.emit)}")
    if w.output is not None:
        clauses.append(f"OUTPUT TIMESTAMP {w.output.policy.value}")
    return clauses


def lateness(a: ast.AllowedLateness) -> str:
    """What follows ALLOWED LATENESS.

    >>> lateness(ast.AllowedLateness(ast.Unbounded()))
    'UNBOUNDED'
    """
    return "UNBOUNDED" if isinstance(a.lateness, ast.Unbounded) else duration(a.lateness)


def emit_text(e: ast.Emit) -> str:
    """What follows EMIT.

    >>> emit_text(ast.Emit(ast.AccumulationMode.DISCARDING, on_time_always=True, closing_always=True))
    'DISCARDING ON TIME ALWAYS CLOSING ALWAYS'
    """
    return (e.mode.value + (" ON TIME ALWAYS" if e.on_time_always else "")
            + (" CLOSING ALWAYS" if e.closing_always else "") + (" REOPEN ON MERGE" if e.reopen_on_merge else ""))


def window_clause(clause: ast.WindowClause) -> str:
    """`WINDOW <fn> [ON ...]` (event time, the default, is written without ON).

    >>> window_clause(ast.WindowClause(ast.Global(), domain=ast.TimeDomain.INGESTION_TIME))
    'WINDOW GLOBAL ON INGESTION TIME'
    """
    on = f" ON {clause.on}" if clause.on is not None else ""
    if clause.domain is not ast.TimeDomain.EVENT_TIME:
        on = f" ON {clause.domain.value}"
    return f"WINDOW {window_fn(clause.fn)}{on}"


def window_fn(fn: ast.WindowFn) -> str:
    if isinstance(fn, ast.Global):
        return "GLOBAL"
    if isinstance(fn, ast.Fixed):
        return f"FIXED(SIZE {duration(fn.size)}{_offset(fn.offset)})"
    if isinstance(fn, ast.Sliding):
        return f"SLIDING(SIZE {duration(fn.size)}, PERIOD {duration(fn.period)}{_offset(fn.offset)})"
    if isinstance(fn, ast.Sessions):
        gap = fn.gap.sql if isinstance(fn.gap, ast.SqlExpr) else duration(fn.gap)
        return f"SESSIONS(GAP {gap})"
    if isinstance(fn, ast.Cumulate):
        return f"CUMULATE(STEP {duration(fn.step)}, SIZE {duration(fn.size)}{_offset(fn.offset)})"
    if isinstance(fn, ast.CustomWindow):
        return f"{fn.name}({', '.join(literal(a) for a in fn.args)})"
    raise TypeError(f"not a window function: {fn!r}")


def _offset(offset: ast.Duration) -> str:
    return f", OFFSET {duration(offset)}" if offset.micros != 0 else ""


def trigger(t: ast.Trigger) -> str:
    if isinstance(t, ast.Watermark):
        return "WATERMARK"
    if isinstance(t, ast.WatermarkPercentile):
        return f"WATERMARK PERCENTILE {number(t.percentile)}"
    if isinstance(t, ast.Period):
        offset = f" OFFSET {duration(t.offset)}" if t.offset.micros != 0 else ""
        return f"PERIOD {duration(t.period)}{offset}"
    if isinstance(t, ast.Delay):
        return f"DELAY {duration(t.delay)}"
    if isinstance(t, ast.Count):
        return f"COUNT {t.n}"
    if isinstance(t, ast.When):
        return f"WHEN({t.predicate.sql})"
    if isinstance(t, ast.Repeat):
        return f"REPEAT({trigger(t.trigger)})"
    if isinstance(t, ast.RepeatUntil):
        return f"REPEAT_UNTIL({trigger(t.trigger)}, {trigger(t.until)})"
    if isinstance(t, (ast.Sequence, ast.FirstOf, ast.AllOf)):
        name = {ast.Sequence: "SEQUENCE", ast.FirstOf: "FIRST_OF", ast.AllOf: "ALL_OF"}[type(t)]
        return f"{name}({', '.join(trigger(c) for c in t.triggers)})"
    if isinstance(t, ast.WatermarkEarlyLate):
        text = "WATERMARK"
        if t.early is not None:
            # LATE binds to the nearest WATERMARK, so sugar as an EARLY trigger is written expanded
            early = ast.desugar(t.early) if isinstance(t.early, ast.WatermarkEarlyLate) else t.early
            text += f" EARLY {trigger(early)}"
        if t.late is not None:
            text += f" LATE {trigger(t.late)}"
        return text if text != "WATERMARK" else trigger(t.desugar())
    raise TypeError(f"not a trigger: {t!r}")


def duration(d: ast.Duration) -> str:
    return format_duration(d.micros)


_INTERVAL_UNITS = {"d": "DAY", "h": "HOUR", "m": "MINUTE", "s": "SECOND", "ms": "MILLISECOND",
                   "us": "MICROSECOND"}


def interval(d: ast.Duration) -> str:
    """A Spark INTERVAL literal of the duration, in its largest exact unit.

    >>> interval(ast.Duration(60_000_000)), interval(ast.Duration(1_500_000))
    ('INTERVAL 1 MINUTE', 'INTERVAL 1500 MILLISECONDS')
    """
    if d.micros == 0:
        return "INTERVAL 0 SECONDS"
    for suffix, size in UNITS:
        if d.micros % size == 0:
            count = d.micros // size
            unit = _INTERVAL_UNITS[suffix] + ("" if abs(count) == 1 else "S")
            return f"INTERVAL {count} {unit}"
    raise AssertionError("unreachable: microseconds divide everything")


def source_watermark(w: ast.SourceWatermark) -> str:
    model = w.model
    if isinstance(model, ast.BoundedDelay):
        text = f"DELAY OF {interval(model.delay)}"
    elif isinstance(model, ast.Perfect):
        text = "PERFECT"
    elif isinstance(model, ast.Timeline):
        text = f"TIMELINE {model.table}"
    elif isinstance(model, ast.AscendingPer):
        text = f"ASCENDING PER {model.partition}"
        if model.idle_timeout is not None:
            text += f" IDLE TIMEOUT {interval(model.idle_timeout)}"
    else:
        raise TypeError(f"not a watermark model: {model!r}")
    arrival = f" ARRIVAL {w.arrival}" if w.arrival is not None else ""
    return f"WATERMARK {w.event_time} {text}{arrival}"


def number(value: int | float) -> str:
    """Numbers as the grammar reads them back (95.0 prints as 95).

    >>> number(95.0), number(99.5), number(3)
    ('95', '99.5', '3')
    """
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def literal(value: ast.Literal) -> str:
    """A custom window function argument."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, ast.Duration):
        return duration(value)
    if isinstance(value, str):
        return string(value)
    return repr(value)  # ints, and floats with their "." or exponent (read back as floats)


def string(value: str) -> str:
    """A Spark string literal.

    >>> print(string("it's \\\\ ok"))
    'it\\'s \\\\ ok'
    """
    escaped = value.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n")
    return f"'{escaped}'"
