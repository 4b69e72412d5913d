"""Checks that a parsed statement means something (docs/semantics.md), before any data is read.

`parse` runs `validate(statement, streaming=False)`; the Spark layer runs it again with
`streaming=True` for a live stream, where the watermark never reaches the end of time.

>>> from sqlflow.frontend import parse
>>> s = parse("SELECT count(*) FROM t GROUP BY k WINDOW GLOBAL ON ts")
>>> validate(s, streaming=True)
Traceback (most recent call last):
...
sqlflow.errors.SqlflowSemanticError: sqlflow: TRIGGER: on a stream the GLOBAL window never ends, so the default trigger REPEAT(WATERMARK) never fires (line 1, column 35)
  SELECT count(*) FROM t GROUP BY k WINDOW GLOBAL ON ts
                                    ^
add a trigger that fires on its own, e.g. TRIGGER REPEAT(PERIOD 1m)
"""
from __future__ import annotations

import math
import sys
from typing import NoReturn

from sqlglot import exp

from .. import ast
from ..columns import ALL_PANE_COLUMNS, OUTPUT_TIME
from ..errors import SqlflowSemanticError, SqlflowUnsupportedError
from . import limits, ordering, printer, sqlexpr
from .scan import scan
from .grouping import ancestors, is_aggregate, ungrouped_item
from .statement import Statement, watermarks_feeding, windowed_feeding

#: SLIDING and CUMULATE copy each element into SIZE / PERIOD (or STEP) windows: beyond this the
#: copies alone exhaust memory on any realistic input
MAX_WINDOWS_PER_ELEMENT = 100_000




def validate(statement: Statement, *, streaming: bool, grouping: bool = True) -> None:
    """Raise SqlflowSemanticError for the first clause that cannot mean anything.

    `streaming`: the query runs on a live stream (not recorded or bounded data). `grouping`
    False leaves the check that every item is grouped or aggregated (`grouping.ungrouped_item`)
    to the caller: the Spark layer runs it once Spark has resolved the names, so that a misspelt
    column gets Spark's message and suggestion rather than "neither in GROUP BY ...".
    """
    if statement.is_plain:
        return
    check = _Checker(statement, streaming, grouping)
    for _, watermark in statement.source_watermarks():
        check.source_watermark(watermark)
    for order in ordering.event_time_orders(statement):
        if order.replay:
            ordering.check(statement, order)
    for select, windowing in statement.windowed_selects():
        check.windowing(windowing)
        check.select(select, windowing)
        check.event_time(select, windowing)
        check.time_domain(select, windowing)
        check.upstream_output_time(select, windowing)
        if streaming:
            check.stream(windowing)


class _Checker:
    def __init__(self, statement: Statement, streaming: bool, grouping: bool = True) -> None:
        self.statement = statement
        self.streaming = streaming
        self.grouping = grouping

    def fail(self, message: str, pos: ast.Position | None, clause: str, hint: str | None = None) -> NoReturn:
        raise self.statement.source.error_at(SqlflowSemanticError, message, pos, clause=clause,
                                             hint=hint)

    # ---------------------------------------------------------------- durations

    def positive(self, d: ast.Duration, what: str, clause: str) -> None:
        if d.micros <= 0:
            self.fail(f"{what} must be positive, got {printer.duration(d)}", d.pos, clause)
        self.not_too_long(d, what, clause)

    def not_negative(self, d: ast.Duration, what: str, clause: str) -> None:
        if d.micros < 0:
            self.fail(f"{what} cannot be negative, got {printer.duration(d)}", d.pos, clause)
        self.not_too_long(d, what, clause)

    def not_too_long(self, d: ast.Duration, what: str, clause: str) -> None:
        """Every duration: event times plus durations must stay within int64 microseconds."""
        if abs(d.micros) > limits.MAX_DURATION:
            self.fail(limits.too_long(f"{what} {printer.duration(d)}"), d.pos, clause)

    def offset(self, offset: ast.Duration, bound: ast.Duration, bound_name: str, clause: str = "WINDOW") -> None:
        self.not_negative(offset, "OFFSET", clause)
        if offset.micros >= bound.micros:
            self.fail(f"OFFSET {printer.duration(offset)} must be less than {bound_name} "
                      f"{printer.duration(bound)}", offset.pos, clause)

    # ---------------------------------------------------------------- clauses

    def windowing(self, w: ast.Windowing) -> None:
        self.window_fn(w.window.fn)
        if w.reopen_on_merge and isinstance(w.window.fn, (ast.Global, ast.Fixed, ast.Sliding, ast.Cumulate)):
            self.fail(f"REOPEN ON MERGE: {type(w.window.fn).__name__.upper()} windows never merge", w.emit.pos if
                      w.emit else w.pos, "EMIT", hint="drop REOPEN ON MERGE (it is for SESSIONS and merging custom "
                                                      "window functions)")
        if w.trigger is not None:
            for t in ast.walk_triggers(w.trigger):
                self.trigger(t)
        if w.allowed_lateness is not None and isinstance(w.allowed_lateness.lateness, ast.Duration):
            self.not_negative(w.allowed_lateness.lateness, "the lateness", "ALLOWED LATENESS")
        if w.output is not None and not w.output.policy.of_elements and isinstance(w.window.fn, ast.Global):
            self.fail(f"OUTPUT TIMESTAMP {w.output.policy.value}: the GLOBAL window has no start or end",
                      w.output.pos, "OUTPUT TIMESTAMP",
                      hint="use OUTPUT TIMESTAMP EARLIEST or LATEST (the event times of each pane's elements), "
                           "or a window function with bounds")

    def windows_per_element(self, n: int, pos, ratio: str) -> None:
        if n > MAX_WINDOWS_PER_ELEMENT:
            self.fail(f"each element would be in {n:,} windows ({ratio}); at most "
                      f"{MAX_WINDOWS_PER_ELEMENT:,} are allowed", pos, "WINDOW",
                      hint="use a longer period (or step), or aggregate in two stages")

    def window_fn(self, fn: ast.WindowFn) -> None:
        if isinstance(fn, ast.Fixed):
            self.positive(fn.size, "SIZE", "WINDOW")
            self.offset(fn.offset, fn.size, "SIZE")
        elif isinstance(fn, ast.Sliding):
            self.positive(fn.size, "SIZE", "WINDOW")
            self.positive(fn.period, "PERIOD", "WINDOW")
            if fn.period.micros > fn.size.micros:
                self.fail(f"PERIOD {printer.duration(fn.period)} is longer than SIZE "
                          f"{printer.duration(fn.size)}, so some elements would be in no window",
                          fn.period.pos, "WINDOW", hint="use FIXED for windows that do not overlap")
            self.offset(fn.offset, fn.period, "PERIOD")
            self.windows_per_element(-(-fn.size.micros // fn.period.micros), fn.period.pos, "SIZE / PERIOD")
        elif isinstance(fn, ast.Cumulate):
            self.positive(fn.step, "STEP", "WINDOW")
            self.positive(fn.size, "SIZE", "WINDOW")
            if fn.size.micros % fn.step.micros:
                self.fail(f"SIZE {printer.duration(fn.size)} is not a multiple of STEP "
                          f"{printer.duration(fn.step)}", fn.size.pos, "WINDOW")
            self.offset(fn.offset, fn.size, "SIZE")
            self.windows_per_element(fn.size.micros // fn.step.micros, fn.step.pos, "SIZE / STEP")
        elif isinstance(fn, ast.Sessions):
            if isinstance(fn.gap, ast.Duration):
                self.positive(fn.gap, "GAP", "WINDOW")
            else:
                self.gap_expression(fn.gap)
        elif isinstance(fn, ast.CustomWindow):
            self.custom_arguments(fn)

    def custom_arguments(self, fn: ast.CustomWindow) -> None:
        """Literal arguments the engine and Spark can hold: int64, finite floats, durations."""
        for i, arg in enumerate(fn.args, 1):
            what = f"argument {i} of {fn.name}"
            if isinstance(arg, ast.Duration) and abs(arg.micros) > limits.MAX_DURATION:
                self.fail(limits.too_long(f"{what}, {printer.duration(arg)},"), arg.pos, "WINDOW")
            elif isinstance(arg, int) and not isinstance(arg, bool) \
                    and not limits.MIN_INT64 <= arg <= limits.MAX_INT64:
                self.fail(f"{what} is too large: a whole number is at most {limits.MAX_INT64} in "
                          f"magnitude, got {arg}", fn.pos, "WINDOW")
            elif isinstance(arg, float) and not math.isfinite(arg):
                self.fail(f"{what} is too large: a number is at most {sys.float_info.max!r}", fn.pos,
                          "WINDOW")

    def trigger(self, t: ast.Trigger) -> None:
        if isinstance(t, ast.Period):
            self.positive(t.period, "PERIOD", "TRIGGER")
            self.offset(t.offset, t.period, "PERIOD", "TRIGGER")
        elif isinstance(t, ast.Delay):
            self.positive(t.delay, "DELAY", "TRIGGER")
        elif isinstance(t, ast.Count) and t.n < 1:
            self.fail(f"COUNT must be at least 1, got {t.n}", t.pos, "TRIGGER")
        elif isinstance(t, ast.Count) and t.n > limits.MAX_INT64:
            self.fail(limits.count_too_large(str(t.n)), t.pos, "TRIGGER")
        elif isinstance(t, ast.WatermarkPercentile):
            if not 0 < t.percentile <= 100:
                self.fail(f"WATERMARK PERCENTILE must be in (0, 100], got {printer.number(t.percentile)}",
                          t.pos, "TRIGGER")
        elif isinstance(t, ast.When):
            self.predicate(t.predicate)

    # ---------------------------------------------------------------- embedded SQL

    def embedded(self, sql: ast.SqlExpr, clause: str, what: str) -> exp.Expr:
        """The tree of an embedded expression (the parser checked it reads back)."""
        try:
            return _unparen(sqlexpr.parse_expression(sql.sql))
        except sqlexpr.SqlExprError as error:
            self.fail(f"cannot read {what}: {error}", sql.pos, clause)

    def predicate(self, predicate: ast.SqlExpr) -> None:
        tree = self.embedded(predicate, "TRIGGER", "the WHEN predicate")
        self.per_row(tree, predicate, "WHEN")
        kind = _not_boolean(tree)
        if kind:
            self.fail(f"WHEN needs a boolean predicate, got {kind}: {predicate.sql}", predicate.pos,
                      "TRIGGER", hint="compare it, e.g. WHEN(x > 0)")

    def gap_expression(self, gap: ast.SqlExpr) -> None:
        tree = self.embedded(gap, "WINDOW", "the GAP expression")
        self.per_row(tree, gap, "GAP")
        kind = _not_duration(tree)
        if kind:
            self.fail(f"GAP needs a duration, got {kind}: {gap.sql}", gap.pos, "WINDOW",
                      hint="write a duration (30m, INTERVAL 30 MINUTES) or an expression giving an interval")

    def per_row(self, tree: exp.Expr, sql: ast.SqlExpr, what: str) -> None:
        clause = "TRIGGER" if what == "WHEN" else "WINDOW"
        for node in tree.walk():
            if is_aggregate(node) or isinstance(node, exp.Window):
                self.fail(f"{what} is computed for each element, so it cannot use "
                          f"{node.sql(dialect='spark')}", sql.pos, clause)

    # ---------------------------------------------------------------- the SELECT

    def select(self, select: exp.Select, w: ast.Windowing) -> None:
        group = select.args.get("group")
        for node in group.expressions if group is not None else []:
            if isinstance(node, (exp.GroupingSets, exp.Rollup, exp.Cube)):
                words = {exp.GroupingSets: "GROUPING SETS", exp.Rollup: "ROLLUP", exp.Cube: "CUBE"}[type(node)]
                source, pos = self.statement.source, self.statement.position(node) or w.pos
                if pos is not None:  # the node's position is its first argument's: point at its word
                    at = source.offset(pos.line, pos.column)
                    words_before = [t for t in scan(source.code, 0, at) if t.upper in ("GROUPING", "ROLLUP", "CUBE")]
                    pos = source.position(words_before[-1].start) if words_before else pos
                raise source.error_at(
                    SqlflowUnsupportedError, f"GROUP BY {words} in a windowed SELECT: a window's panes have one "
                    "grouping", pos, clause="GROUP BY", hint="run one windowed SELECT per grouping and UNION ALL them")
        if select.args.get("group") is None and not _has_aggregate(select):
            self.fail("a windowed SELECT needs GROUP BY or an aggregate", w.pos, "WINDOW",
                      hint="without GROUP BY the aggregates are computed per window over all rows")
        self.pane_aliases(select)
        if self.grouping:
            problem = ungrouped_item(self.statement, select, w)
            if problem is not None:
                raise problem[1]

    def pane_aliases(self, select: exp.Select) -> None:
        """An item named like a pane column would take that column's place in the result (an
        input column of that name is refused as ambiguous, by Spark's analysis); only the pane
        column itself may carry its name (`window_start AS window_start`)."""
        for item in select.expressions:
            if not isinstance(item, exp.Alias) or item.alias.lower() not in ALL_PANE_COLUMNS:
                continue
            name = item.alias.lower()
            value = item.this
            if (isinstance(value, exp.Column) and not value.table and isinstance(value.this, exp.Identifier)
                    and value.name.lower() == name):
                continue
            alias = item.args["alias"]
            self.fail(f"the alias {item.alias} names a pane column: the result of a windowed SELECT has a "
                      f"column {name} of its own, and this item would take its place",
                      self.statement.position(alias) or self.statement.position(item), "SELECT",
                      hint=f"choose another name for {value.sql(dialect='spark')}; the pane columns are "
                           + ", ".join(ALL_PANE_COLUMNS))

    def event_time(self, select: exp.Select, w: ast.Windowing) -> None:
        if w.window.on is not None or w.domain is not ast.TimeDomain.EVENT_TIME:
            return  # ON PROCESSING / INGESTION TIME reads the arrival (the Spark layer checks it)
        sources = [w for _, w, _ in watermarks_feeding(select)]
        if not sources:
            self.fail("no event-time column for this window", w.window.pos, "WINDOW",
                      hint="name it with ON <column>, or add WATERMARK <column> DELAY OF ... "
                           "to the table in FROM")
        if len(sources) > 1:
            self.fail(f"{len(sources)} WATERMARK clauses feed this window, so its event time is "
                      "ambiguous", w.window.pos, "WINDOW", hint="name the event-time column with ON <column>")

    def time_domain(self, select: exp.Select, w: ast.Windowing) -> None:
        """docs/semantics.md, 10: a pipeline has one time domain (Flink's time design draft), and on processing
        or ingestion time no row is ever late, so what only late rows do is refused."""
        domain = w.domain
        where = w.window.on_pos or w.window.pos
        for _, upstream in windowed_feeding(select):
            other = upstream.domain
            pos = upstream.window.on_pos or upstream.window.pos
            at = f" at line {pos.line}, column {pos.column}" if pos else ""
            if other is not ast.TimeDomain.EVENT_TIME:  # docs/semantics.md, 10: not on any domain
                self.fail(f"this window reads the panes of a window on {other.value} (WINDOW "
                          f"{type(upstream.window.fn).__name__.upper()}{at}): only the panes of a window on EVENT "
                          "TIME can be windowed again, on any time domain",
                          where, "WINDOW", hint="aggregate its panes without WINDOW (a plain GROUP BY over the pane "
                                                "rows), or put every stage on event time (ON output_time here)")
            if other is domain:
                continue
            self.fail(f"this window is on {domain.value} but reads the panes of a window on {other.value} "
                      f"(WINDOW {type(upstream.window.fn).__name__.upper()}{at}): {_mixing(domain, other)}",
                      where, "WINDOW", hint="a pipeline has one time domain (Flink's time design draft): window the panes of an "
                                            "event-time stage on event time (ON output_time)")
        if domain is ast.TimeDomain.EVENT_TIME:
            return
        why = (f"on {domain.value} no row is ever late ("
               + ("the operator's clock is its own watermark)" if domain is ast.TimeDomain.PROCESSING_TIME
                  else "ingestion times only grow, under their perfect watermark)"))
        if w.allowed_lateness is not None:
            self.fail(f"ALLOWED LATENESS has nothing to allow: {why}", w.allowed_lateness.pos, "ALLOWED LATENESS",
                      hint="drop ALLOWED LATENESS")
        for t in ast.walk_triggers(w.trigger) if w.trigger is not None else ():
            if isinstance(t, ast.WatermarkEarlyLate) and t.late is not None:
                self.fail(f"LATE {printer.trigger(t.late)} would never fire: {why}", t.late.pos or t.pos,
                          "TRIGGER", hint="drop the LATE part")

    def upstream_output_time(self, select: exp.Select, w: ast.Windowing) -> None:
        """A window ON output_time over a GLOBAL stage without OUTPUT TIMESTAMP: that stage's
        output_time is NULL in every pane (docs/semantics.md, 8), so the window would get no
        element at all, and return nothing."""
        if w.window.on is None:
            return
        try:
            on = sqlexpr.parse_expression(w.window.on)
        except Exception:  # noqa: BLE001  (the Spark layer locates a column it cannot read)
            return
        if not isinstance(on, exp.Column) or on.name.lower() != OUTPUT_TIME:
            return
        upstream = windowed_feeding(select)
        unbounded = [u for _, u in upstream if isinstance(u.window.fn, ast.Global) and u.output is None]
        if not unbounded or (on.table and len(unbounded) < len(upstream)):
            return  # a qualified column of several stages: one of them has output times
        stage = unbounded[0]
        pos = stage.window.pos
        at = f" at line {pos.line}, column {pos.column}" if pos else ""
        self.fail(f"this window is ON {w.window.on}, the output_time of the panes of the SELECT with WINDOW "
                  f"GLOBAL{at}, which is NULL in every pane: a GLOBAL window has no end, and without "
                  "OUTPUT TIMESTAMP its panes have no output time (docs/semantics.md, 8), so this window "
                  "would get no element and return no row", w.window.on_pos or w.window.pos, "WINDOW",
                  hint="add OUTPUT TIMESTAMP EARLIEST or LATEST to the GLOBAL window (its panes then carry "
                       "the event time of their first or last element), or window its panes ON another column")

    # ---------------------------------------------------------------- sources and streams

    def source_watermark(self, w: ast.SourceWatermark) -> None:
        model = w.model
        if isinstance(model, ast.BoundedDelay):
            self.not_negative(model.delay, "the delay", "WATERMARK")
        elif isinstance(model, ast.AscendingPer):
            if model.idle_timeout is not None and model.idle_timeout.micros <= 0:
                self.fail(f"the idle timeout must be positive, not {printer.duration(model.idle_timeout)}: "
                          "a partition is idle after that much processing time without a row",
                          model.idle_timeout.pos or model.idle_pos or model.pos, "WATERMARK",
                          hint="e.g. IDLE TIMEOUT 5m")
            if model.idle_timeout is not None:
                self.not_too_long(model.idle_timeout, "the idle timeout", "WATERMARK")
        elif w.arrival is None:
            name = "PERFECT" if isinstance(model, ast.Perfect) else "TIMELINE"
            why = ("the perfect watermark is the earliest event time not yet arrived"
                   if name == "PERFECT" else "the timeline's steps are placed among the rows by arrival time")
            self.fail(f"{name} needs ARRIVAL <column>: {why}", model.pos, "WATERMARK")
        if self.streaming and isinstance(model, ast.Perfect):
            self.fail("PERFECT needs recorded data: on a live stream the rows to come are unknown",
                      model.pos, "WATERMARK")
        if self.streaming and w.arrival is not None:
            self.fail("ARRIVAL replays recorded data: on a live stream each row arrives at its "
                      "micro-batch's processing time", w.pos, "WATERMARK",
                      hint="drop ARRIVAL (and TIMELINE) to run on the stream as it comes")

    def stream(self, w: ast.Windowing) -> None:
        trigger = w.trigger if w.trigger is not None else ast.default_trigger()
        for t in ast.walk_triggers(trigger):
            if isinstance(t, ast.WatermarkPercentile) and t.percentile != 100:
                self.fail(f"WATERMARK PERCENTILE {printer.number(t.percentile)} needs recorded data: "
                          "on a live stream a window's final size is unknown", t.pos, "TRIGGER")
        if isinstance(w.window.fn, ast.Global) and not can_fire_before_end_of_time(trigger):
            what = (f"TRIGGER {printer.trigger(w.trigger)}" if w.trigger is not None
                    else "the default trigger REPEAT(WATERMARK)")
            pos = w.trigger.pos if w.trigger is not None else w.window.pos
            self.fail(f"on a stream the GLOBAL window never ends, so {what} never fires", pos,
                      "TRIGGER", hint="add a trigger that fires on its own, e.g. TRIGGER REPEAT(PERIOD 1m)")


def _mixing(a: ast.TimeDomain, b: ast.TimeDomain) -> str:
    """Why two time domains cannot meet in one pipeline (Flink's time design draft)."""
    if ast.TimeDomain.PROCESSING_TIME in (a, b):
        return ("mixing operator time with timestamp time gives arbitrary, ill-defined results: operator "
                "time is each stage's own clock, so timestamps and watermarks of the other stage mean nothing to it")
    return ("event times and ingestion times are different clocks: the watermark of one says nothing about "
            "the timestamps of the other")


# --------------------------------------------------------------------------- triggers


def can_fire_before_end_of_time(t: ast.Trigger) -> bool:
    """Whether the trigger can fire while the watermark stays below +inf (a GLOBAL window's end).

    >>> can_fire_before_end_of_time(ast.Sequence((ast.Watermark(), ast.Repeat(ast.Count(1)))))
    False
    >>> can_fire_before_end_of_time(ast.WatermarkEarlyLate(early=ast.Count(1)))
    True
    """
    t = ast.desugar(t)
    if isinstance(t, (ast.Watermark, ast.WatermarkPercentile)):
        return False
    if isinstance(t, (ast.Period, ast.Delay, ast.Count, ast.When)):
        return True
    if isinstance(t, ast.Repeat):
        return can_fire_before_end_of_time(t.trigger)
    if isinstance(t, ast.RepeatUntil):
        return can_fire_before_end_of_time(t.trigger) or can_fire_before_end_of_time(t.until)
    if isinstance(t, ast.FirstOf):
        return any(can_fire_before_end_of_time(c) for c in t.triggers)
    if isinstance(t, ast.AllOf):
        return all(can_fire_before_end_of_time(c) for c in t.triggers)
    if isinstance(t, ast.Sequence):
        for child in t.triggers:  # a child runs once all earlier ones have finished
            if can_fire_before_end_of_time(child):
                return True
            if not _can_finish_before_end_of_time(child):
                return False
        return False
    return True


def _can_finish_before_end_of_time(t: ast.Trigger) -> bool:
    if isinstance(t, ast.Repeat):
        return False
    if isinstance(t, ast.RepeatUntil):
        return can_fire_before_end_of_time(t.until)
    if isinstance(t, ast.Sequence):
        return all(_can_finish_before_end_of_time(c) for c in t.triggers)
    return can_fire_before_end_of_time(t)


# --------------------------------------------------------------------------- SQL shapes

_ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv, exp.Mod, exp.Neg, exp.DPipe,
               exp.BitwiseAnd, exp.BitwiseOr, exp.BitwiseXor, exp.BitwiseNot,
               exp.BitwiseLeftShift, exp.BitwiseRightShift)
_BOOLEAN = (exp.Predicate, exp.Connector, exp.Not, exp.Boolean)


def _unparen(tree: exp.Expr) -> exp.Expr:
    while isinstance(tree, exp.Paren):
        tree = tree.this
    return tree


def _not_boolean(tree: exp.Expr) -> str | None:
    """What the expression clearly is when it is clearly not a boolean (a column may be one)."""
    if isinstance(tree, exp.Literal):
        return "a string" if tree.is_string else "a number"
    if isinstance(tree, exp.Null):
        return "NULL"
    if isinstance(tree, _ARITHMETIC):
        return "an arithmetic expression"
    if isinstance(tree, exp.Interval):
        return "an interval"
    if isinstance(tree, (exp.Array, exp.Struct, exp.Map, exp.Star)):
        return "a " + type(tree).__name__.lower()
    if isinstance(tree, exp.Cast) and not tree.to.is_type(exp.DataType.Type.BOOLEAN):
        return f"a value of type {tree.to.sql(dialect='spark')}"
    return None


def _not_duration(tree: exp.Expr) -> str | None:
    if isinstance(tree, _BOOLEAN):
        return "a boolean"
    if isinstance(tree, exp.Literal):
        return "a string" if tree.is_string else "a number"
    if isinstance(tree, exp.Null):
        return "NULL"
    return None


def _has_aggregate(select: exp.Select) -> bool:
    scopes = list(select.expressions) + [select.args.get("having")]
    return any(is_aggregate(node) and not _in_window_function(node, select)
               for scope in scopes if scope is not None for node in scope.walk()
               if not _in_subquery(node, select))


def _in_window_function(node: exp.Expr, top: exp.Expr) -> bool:
    return any(isinstance(a, exp.Window) for a in ancestors(node, top))


def _in_subquery(node: exp.Expr, top: exp.Expr) -> bool:
    return any(isinstance(a, (exp.Query, exp.Subquery)) for a in ancestors(node, top))
