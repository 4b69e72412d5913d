"""The native rewrite: a windowed SELECT whose panes collapse to one per window, as plain Spark SQL.

On bounded data without arrival times, with a trigger that cannot fire before the end of input
(`sqlflow.engine.collapsible`, asked by `sqlflow.engine.path_for`), every window emits exactly one ON_TIME pane holding
all its input (docs/semantics.md, 1.2). That is a GROUP BY over Spark's own `window()` /
`session_window()`, with the pane columns as constants. Exact equality with the engine needs:

- sessions: Spark merges rows exactly one gap apart, we do not: `session_window` runs with
  gap - 1us and 1us is added back to the window end (docs/spark-internals.md, 4);
- a per-row gap must be a CalendarInterval for Spark: the gap is turned into microseconds and
  back with `make_interval`;
- GLOBAL: window bounds are NULL, and a SELECT without GROUP BY emits no pane for no input;
- NULL event times are filtered out (and counted by the report, not here).

>>> from sqlflow.frontend import parse
>>> from sqlflow.plan.passes import transpile
>>> s = parse("SELECT k, SUM(v) AS total FROM t GROUP BY k WINDOW SESSIONS(GAP 5m) ON ts")
>>> print(transpile(s))
SELECT k, SUM(v) AS total, SESSION_WINDOW(ts, '299999999 microseconds').start AS window_start, SESSION_WINDOW(ts, '299999999 microseconds').end + INTERVAL '1' MICROSECOND AS window_end, CAST(0 AS BIGINT) AS pane_index, 'ON_TIME' AS pane_timing, TRUE AS is_last, CAST(NULL AS TIMESTAMP) AS emit_time, SESSION_WINDOW(ts, '299999999 microseconds').end AS output_time FROM t WHERE NOT ts IS NULL GROUP BY k, SESSION_WINDOW(ts, '299999999 microseconds')
"""
from __future__ import annotations

from sqlglot import exp

from .. import ast
from ..columns import (ALL_PANE_COLUMNS, EMIT_TIME, IS_LAST, IS_RETRACTION, ON_TIME, OUTPUT_TIME, PANE_INDEX, PANE_TIMING,
                       PANE_TYPES, WINDOW_END, WINDOW_START)
from ..frontend.dialect import WINDOWING_KEY
from ..time import DAY, HOUR, MICROSECOND, MILLISECOND, MINUTE, SECOND
from .windowed_select import WindowedSelect, is_pane_ref

_SPARK_UNITS = ((DAY, "day"), (HOUR, "hour"), (MINUTE, "minute"), (SECOND, "second"),
                (MILLISECOND, "millisecond"), (MICROSECOND, "microsecond"))


def why_not_native(ws: WindowedSelect) -> str | None:
    """Why this windowed SELECT has no native rewrite (None: it has one; the rule is the engine's,
    `path_for(..., operator="spark")`)."""
    path = ws.path("spark")
    return path.why if path.name != "native" else None


def spark_interval(micros: int) -> str:
    """A duration as a Spark interval string in its largest exact unit.

    >>> spark_interval(3600 * 10**6), spark_interval(90 * 10**6), spark_interval(299999999)
    ('1 hour', '90 seconds', '299999999 microseconds')
    """
    for size, unit in _SPARK_UNITS:
        if micros % size == 0:
            n = micros // size
            return f"{n} {unit}" + ("s" if n != 1 else "")
    raise AssertionError("unreachable")


def window_expression(ws: WindowedSelect, ntz: bool = False) -> exp.Expr | None:
    """Spark's `window(...)` / `session_window(...)` call of this window function (None: GLOBAL).

    A TIMESTAMP_NTZ event time is cast to TIMESTAMP first (read in the session time zone), so
    that windows align on UTC microseconds, as the engine's do."""
    fn, et = ws.window, ws.event_time.copy()
    if ntz:
        et = exp.Cast(this=et, to=exp.DataType.build("TIMESTAMP"))
    lit = exp.Literal.string
    if isinstance(fn, ast.Global):
        return None
    if isinstance(fn, ast.Fixed):
        args = [et, lit(spark_interval(fn.size.micros))]
        if fn.offset.micros:
            args += [lit(spark_interval(fn.size.micros)), lit(spark_interval(fn.offset.micros))]
        return exp.Anonymous(this="window", expressions=args)
    if isinstance(fn, ast.Sliding):
        args = [et, lit(spark_interval(fn.size.micros)), lit(spark_interval(fn.period.micros))]
        if fn.offset.micros:
            args.append(lit(spark_interval(fn.offset.micros)))
        return exp.Anonymous(this="window", expressions=args)
    if isinstance(fn, ast.Sessions):
        gap: exp.Expr
        if isinstance(fn.gap, ast.Duration):
            gap = lit(spark_interval(fn.gap.micros - 1))
        else:
            gap = exp.Anonymous(this="make_interval", expressions=[
                *(exp.Literal.number(0) for _ in range(6)),
                exp.Div(this=exp.Cast(this=exp.Paren(this=exp.Sub(this=gap_micros(fn.gap), expression=exp.Literal.number(1))),
                                      to=exp.DataType.build("DECIMAL(18, 0)")),
                        expression=exp.Literal.number(1_000_000))])
        return exp.Anonymous(this="session_window", expressions=[et, gap])
    raise AssertionError(f"no native window for {fn!r}")


def gap_micros(gap: ast.SqlExpr) -> exp.Expr:
    """A per-row gap (an interval expression) in microseconds: unix_micros(timestamp_micros(0) + gap)."""
    from .windowed_select import parse_column  # a full expression parser

    interval = parse_column(gap.sql)
    shifted = exp.Add(this=exp.Anonymous(this="timestamp_micros", expressions=[exp.Literal.number(0)]),
                      expression=exp.Paren(this=interval))
    return exp.Anonymous(this="unix_micros", expressions=[shifted])


def pane_expressions(ws: WindowedSelect, window: exp.Expr | None) -> dict[str, exp.Expr]:
    """The value of each pane column in the native rewrite."""
    timestamp = exp.DataType.build(PANE_TYPES[WINDOW_START])

    def bound(field: str) -> exp.Expr:
        if window is None:
            return exp.Cast(this=exp.Null(), to=timestamp)
        value: exp.Expr = exp.Dot(this=window.copy(), expression=exp.to_identifier(field))
        if field == "end" and isinstance(ws.window, ast.Sessions):
            value = exp.Add(this=value, expression=exp.Interval(this=exp.Literal.string("1"),
                                                                unit=exp.var("MICROSECOND")))
        return value

    values = {
        WINDOW_START: bound("start"),
        WINDOW_END: bound("end"),
        PANE_INDEX: exp.Cast(this=exp.Literal.number(0), to=exp.DataType.build(PANE_TYPES[PANE_INDEX])),
        PANE_TIMING: exp.Literal.string(ON_TIME),
        IS_LAST: exp.Boolean(this=True),
        EMIT_TIME: exp.Cast(this=exp.Null(), to=timestamp),
        OUTPUT_TIME: _output_time(ws, window, bound),
    }
    if ws.windowing.mode.retracting:
        values[IS_RETRACTION] = exp.Boolean(this=False)
    return values


def _output_time(ws: WindowedSelect, window: exp.Expr | None, bound) -> exp.Expr:
    """The one pane's output timestamp: every element of a window is in it and none is late."""
    policy = ws.windowing.output_time
    if policy is ast.OutputTime.EARLIEST or policy is ast.OutputTime.LATEST:
        fn = exp.Min if policy is ast.OutputTime.EARLIEST else exp.Max
        return fn(this=exp.Cast(this=ws.event_time.copy(), to=exp.DataType.build("TIMESTAMP")))
    if window is None:  # GLOBAL has no bounds (START / END OF WINDOW on it is refused earlier)
        return exp.Cast(this=exp.Null(), to=exp.DataType.build("TIMESTAMP"))
    if policy is ast.OutputTime.START_OF_WINDOW:
        return bound("start")
    if isinstance(ws.window, ast.Sessions):  # Spark's session end is already the last instant
        return exp.Dot(this=window.copy(), expression=exp.to_identifier("end"))
    return exp.Sub(this=bound("end"), expression=exp.Interval(this=exp.Literal.string("1"),
                                                             unit=exp.var("MICROSECOND")))


def rewrite_native(ws: WindowedSelect, *, names: dict[int, str] | None = None, ntz: bool = False) -> exp.Expr | None:
    """Rewrite the windowed SELECT in place into plain Spark SQL. Returns the condition it added
    to HAVING so that no input means no pane (GLOBAL without keys), or None.

    `names[i]` is the output name of item i when it must be given explicitly (an item that
    mentions a pane column inside an expression: Spark would name it after the rewritten text).
    """
    select = ws.select
    window = window_expression(ws, ntz)
    panes = pane_expressions(ws, window)

    def replace_panes(node: exp.Expr) -> exp.Expr:
        return panes[node.name.lower()].copy() if is_pane_ref(node) and node.name.lower() in panes else node

    items: list[exp.Expr] = []
    for i, item in enumerate(select.expressions):
        if isinstance(item, exp.Alias):
            item.set("this", item.this.transform(replace_panes))
            items.append(item)
        elif is_pane_ref(item) and item.name.lower() in panes:
            items.append(exp.alias_(panes[item.name.lower()].copy(), item.name.lower()))
        elif any(is_pane_ref(n) for n in item.walk()):
            name = (names or {}).get(i) or item.sql(dialect="spark")
            items.append(exp.alias_(item.transform(replace_panes), name, quoted=True))
        else:
            items.append(item)
    present = {output_name(item) for item in items}
    for column in ALL_PANE_COLUMNS:
        if column in panes and column not in present:
            items.append(exp.alias_(panes[column].copy(), column))
    select.set("expressions", items)
    if select.args.get("qualify") is not None:
        select.args["qualify"].transform(replace_panes, copy=False)

    not_null = exp.Not(this=exp.Is(this=ws.event_time.copy(), expression=exp.Null()))
    where = select.args.get("where")
    condition = not_null if where is None else exp.And(this=exp.Paren(this=where.this), expression=not_null)
    select.set("where", exp.Where(this=condition))

    group = select.args.get("group")
    nonempty = None
    if window is not None:
        keys = [k.copy() for k in ws.keys] if group is None or group.args.get("all") else list(group.expressions)
        select.set("group", exp.Group(expressions=keys + [window]))
    elif group is None or not group.expressions and not group.args.get("all"):
        # no keys and no window: one pane when there is input, none without (Spark would emit a row)
        having = select.args.get("having")
        nonempty = exp.GT(this=exp.Count(this=exp.Star(), big_int=True), expression=exp.Literal.number(0))
        select.set("having", exp.Having(this=nonempty.copy() if having is None
                                        else exp.And(this=exp.Paren(this=having.this), expression=nonempty.copy())))
    select.meta.pop(WINDOWING_KEY, None)
    return nonempty


def output_name(item: exp.Expr) -> str:
    """The output column name of a SELECT item, lower-cased, when it is evident from the text."""
    if isinstance(item, exp.Alias):
        return item.alias.lower()
    if isinstance(item, exp.Column):
        return item.name.lower()
    return ""

