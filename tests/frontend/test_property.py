"""Properties of the frontend on generated queries.

- A random valid combination of clauses, written with random surface variations (keyword case,
  INTERVAL or `30m` durations, comments, line breaks), parses to the AST it was written from, and
  parse(to_sql(s)) == s.
- A random mutation of a valid query (tokens deleted, duplicated or swapped, characters inserted,
  truncation) either parses or raises a SqlflowError: never any other exception.
"""
from __future__ import annotations

import re

from hypothesis import example, given, settings
from hypothesis import strategies as st

from sqlflow import ast
from sqlflow.errors import SqlflowError
from sqlflow.frontend import parse, parse_script, to_sql, validate
from sqlflow.frontend.scan import scan
from sqlflow.time import DAY, HOUR, MILLISECOND, MINUTE, SECOND
from tests.conftest import examples

SETTINGS = settings(max_examples=examples(150))

# --------------------------------------------------------------------------- ASTs

UNIT = st.sampled_from([MILLISECOND, SECOND, MINUTE, HOUR, DAY])


@st.composite
def durations(draw, low: int = 1, high: int = 90):
    return ast.Duration(draw(st.integers(low, high)) * draw(UNIT))


@st.composite
def offsets_below(draw, bound: ast.Duration):
    if draw(st.booleans()):
        return ast.Duration(0)
    step = bound.micros // 4 or 1
    return ast.Duration(draw(st.integers(0, 3)) * step)


@st.composite
def fixed(draw):
    size = draw(durations())
    return ast.Fixed(size, draw(offsets_below(size)))


@st.composite
def sliding(draw):
    period = draw(durations())
    size = ast.Duration(period.micros * draw(st.integers(1, 6)))
    return ast.Sliding(size, period, draw(offsets_below(period)))


@st.composite
def cumulate(draw):
    step = draw(durations())
    size = ast.Duration(step.micros * draw(st.integers(1, 6)))
    return ast.Cumulate(step, size, draw(offsets_below(size)))


GAP_EXPRESSIONS = ["CASE WHEN k = 'a' THEN INTERVAL '5' MINUTES ELSE INTERVAL '1' MINUTE END",
                   "gap_minutes * INTERVAL '1' MINUTE", "MAKE_DT_INTERVAL(0, 0, gap_minutes, 0)"]

sessions = st.builds(ast.Sessions, st.one_of(durations(), st.sampled_from(GAP_EXPRESSIONS).map(ast.SqlExpr)))

LITERALS = st.one_of(
    st.integers(-10**6, 10**6), st.sampled_from([0.5, -2.25, 1e20, 3.0]),
    st.text(st.characters(blacklist_categories=["Cs", "Cc"]), max_size=8),
    st.booleans(), st.none(), durations(),
)
custom = st.builds(ast.CustomWindow, st.from_regex(r"my_[a-z0-9_]{0,8}", fullmatch=True),
                   st.lists(LITERALS, max_size=4).map(tuple))

window_fns = st.one_of(st.just(ast.Global()), fixed(), sliding(), sessions, cumulate(), custom)

# embedded Spark SQL is written in its canonical form (what sqlglot prints), so ASTs compare equal
PREDICATES = ["kind = 'flush'", "x > 10 AND NOT y IS NULL", "is_last", "note LIKE '%EMIT%'",
              "COALESCE(flag, FALSE) OR kind IN ('a', 'b')"]

primitives = st.one_of(
    st.just(ast.Watermark()),
    durations().flatmap(lambda d: st.builds(ast.Period, st.just(d), offsets_below(d))),
    st.builds(ast.Delay, durations()),
    st.builds(ast.Count, st.integers(1, 1000)),
    st.builds(ast.WatermarkPercentile, st.sampled_from([50.0, 90.0, 99.5, 100.0])),
    st.builds(ast.When, st.sampled_from(PREDICATES).map(ast.SqlExpr)),
)


def _combinators(children):
    many = st.lists(children, min_size=1, max_size=3).map(tuple)
    not_sugar = children.filter(lambda t: not isinstance(t, ast.WatermarkEarlyLate))
    return st.one_of(
        st.builds(ast.Repeat, children),
        st.builds(ast.RepeatUntil, children, children),
        st.builds(ast.Sequence, many),
        st.builds(ast.FirstOf, many),
        st.builds(ast.AllOf, many),
        st.builds(ast.WatermarkEarlyLate, not_sugar, st.none() | children),
        st.builds(ast.WatermarkEarlyLate, st.none(), children),
    )


triggers = st.recursive(primitives, _combinators, max_leaves=6)


def _late(trigger) -> bool:
    return trigger is not None and any(isinstance(t, ast.WatermarkEarlyLate) and t.late is not None
                                       for t in ast.walk_triggers(trigger))


@st.composite
def windowings(draw):
    fn = draw(window_fns)
    trigger = draw(st.none() | triggers)
    lateness = draw(st.none() | st.builds(ast.AllowedLateness, durations(low=0) | st.just(ast.Unbounded())))
    # processing and ingestion time have no late rows: no ALLOWED LATENESS, no LATE (validation)
    domain = draw(st.sampled_from(list(ast.TimeDomain))) if lateness is None and not _late(trigger) \
        else ast.TimeDomain.EVENT_TIME
    on = draw(st.sampled_from([None, "ts", "e.ts", "`event time`"])) if domain is ast.TimeDomain.EVENT_TIME else None
    return ast.Windowing(
        ast.WindowClause(fn, on, domain=domain),
        trigger,
        lateness,
        draw(st.none() | st.builds(ast.Emit, st.sampled_from(list(ast.AccumulationMode)), st.booleans(),
                                   st.booleans())),
        output=draw(st.none() | st.builds(ast.OutputTimestamp, st.sampled_from(
            [p for p in ast.OutputTime if p.of_elements or not isinstance(fn, ast.Global)]))),
    )


COLUMNS = st.sampled_from(["ts", "e.ts", "`event time`", "arrived_at"])


@st.composite
def source_watermarks(draw):
    model = draw(st.one_of(st.builds(ast.BoundedDelay, durations(low=0)), st.just(ast.Perfect()),
                           st.builds(ast.Timeline, st.sampled_from(["steps", "db.steps", "`wm steps`"]))))
    needs_arrival = not isinstance(model, ast.BoundedDelay)
    arrival = draw(COLUMNS if needs_arrival else st.none() | COLUMNS)
    return ast.SourceWatermark(draw(COLUMNS), model, arrival)


# --------------------------------------------------------------------------- writing them, with variations


class Writer:
    """Writes an AST as query text, drawing surface variations from hypothesis."""

    def __init__(self, draw) -> None:
        self.draw = draw

    def kw(self, words: str) -> str:
        style = self.draw(st.sampled_from(["upper", "lower", "title"]))
        text = getattr(words, style)()
        return self.draw(st.sampled_from([" ", "  ", "\n", " /* c */ "])).join(text.split(" "))

    def sep(self) -> str:
        return self.draw(st.sampled_from([" ", "\n  ", " -- note\n", " /* WINDOW GLOBAL */ "]))

    def duration(self, d: ast.Duration) -> str:
        micros = d.micros
        forms = []
        for unit, short, long in ((DAY, "d", "DAYS"), (HOUR, "h", "HOURS"), (MINUTE, "m", "MINUTES"),
                                  (SECOND, "s", "SECONDS"), (MILLISECOND, "ms", "MILLISECONDS"), (1, "us", None)):
            if micros % unit == 0:
                forms.append(f"{micros // unit}{short}")
                if long:
                    forms.append(f"{self.kw('INTERVAL')} {micros // unit} {self.kw(long)}")
                    forms.append(f"{self.kw('INTERVAL')} '{micros // unit}' {self.kw(long[:-1])}")
        return self.draw(st.sampled_from(forms))

    def window_fn(self, fn) -> str:
        if isinstance(fn, ast.Global):
            return self.kw("GLOBAL")
        if isinstance(fn, ast.Fixed):
            offset = f", {self.kw('OFFSET')} {self.duration(fn.offset)}" if fn.offset.micros else ""
            return f"{self.kw('FIXED')}({self.kw('SIZE')} {self.duration(fn.size)}{offset})"
        if isinstance(fn, ast.Sliding):
            offset = f", {self.kw('OFFSET')} {self.duration(fn.offset)}" if fn.offset.micros else ""
            return (f"{self.kw('SLIDING')}({self.kw('SIZE')} {self.duration(fn.size)}, "
                    f"{self.kw('PERIOD')} {self.duration(fn.period)}{offset})")
        if isinstance(fn, ast.Cumulate):
            offset = f", {self.kw('OFFSET')} {self.duration(fn.offset)}" if fn.offset.micros else ""
            return (f"{self.kw('CUMULATE')}({self.kw('STEP')} {self.duration(fn.step)}, "
                    f"{self.kw('SIZE')} {self.duration(fn.size)}{offset})")
        if isinstance(fn, ast.Sessions):
            gap = fn.gap.sql if isinstance(fn.gap, ast.SqlExpr) else self.duration(fn.gap)
            return f"{self.kw('SESSIONS')}({self.kw('GAP')} {gap})"
        args = ", ".join(self.literal(a) for a in fn.args)
        return f"{fn.name}({args})"

    def literal(self, value) -> str:
        if value is None:
            return self.kw("NULL")
        if isinstance(value, bool):
            return self.kw("TRUE" if value else "FALSE")
        if isinstance(value, ast.Duration):
            return self.duration(value)
        if isinstance(value, str):
            body = value.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n")
            return f"'{body}'"
        return repr(value)

    def trigger(self, t) -> str:
        if isinstance(t, ast.Watermark):
            return self.kw("WATERMARK")
        if isinstance(t, ast.WatermarkPercentile):
            return f"{self.kw('WATERMARK PERCENTILE')} {t.percentile:g}"
        if isinstance(t, ast.Period):
            offset = f" {self.kw('OFFSET')} {self.duration(t.offset)}" if t.offset.micros else ""
            return f"{self.kw('PERIOD')} {self.duration(t.period)}{offset}"
        if isinstance(t, ast.Delay):
            return f"{self.kw('DELAY')} {self.duration(t.delay)}"
        if isinstance(t, ast.Count):
            return f"{self.kw('COUNT')} {t.n}"
        if isinstance(t, ast.When):
            return f"{self.kw('WHEN')}({t.predicate.sql})"
        if isinstance(t, ast.Repeat):
            return f"{self.kw('REPEAT')}({self.trigger(t.trigger)})"
        if isinstance(t, ast.RepeatUntil):
            return f"{self.kw('REPEAT_UNTIL')}({self.trigger(t.trigger)}, {self.trigger(t.until)})"
        if isinstance(t, (ast.Sequence, ast.FirstOf, ast.AllOf)):
            name = {ast.Sequence: "SEQUENCE", ast.FirstOf: "FIRST_OF", ast.AllOf: "ALL_OF"}[type(t)]
            return f"{self.kw(name)}({', '.join(self.trigger(c) for c in t.triggers)})"
        text = self.kw("WATERMARK")
        if t.early is not None:
            text += f" {self.kw('EARLY')} {self.trigger(t.early)}"
        if t.late is not None:
            text += f" {self.kw('LATE')} {self.trigger(t.late)}"
        return text

    def source_watermark(self, w: ast.SourceWatermark) -> str:
        if isinstance(w.model, ast.BoundedDelay):
            model = f"{self.kw('DELAY OF')} {self.duration(w.model.delay)}"
        elif isinstance(w.model, ast.Perfect):
            model = self.kw("PERFECT")
        else:
            model = f"{self.kw('TIMELINE')} {w.model.table}"
        arrival = f" {self.kw('ARRIVAL')} {w.arrival}" if w.arrival is not None else ""
        return f"{self.kw('WATERMARK')} {w.event_time} {model}{arrival}"

    def windowing(self, w: ast.Windowing) -> str:
        text = f"{self.kw('WINDOW')} {self.window_fn(w.window.fn)}"
        if w.window.on is not None:
            text += f" {self.kw('ON')} {w.window.on}"
        elif w.window.domain is not ast.TimeDomain.EVENT_TIME or self.draw(st.booleans()):
            text += f" {self.kw('ON')} {self.kw(w.window.domain.value)}"
        if w.trigger is not None:
            text += f"{self.sep()}{self.kw('TRIGGER')} {self.trigger(w.trigger)}"
        if w.allowed_lateness is not None:
            lateness = w.allowed_lateness.lateness
            lateness = self.kw("UNBOUNDED") if isinstance(lateness, ast.Unbounded) else self.duration(lateness)
            text += f"{self.sep()}{self.kw('ALLOWED LATENESS')} {lateness}"
        if w.emit is not None:
            text += f"{self.sep()}{self.kw('EMIT')} {self.kw(w.emit.mode.value)}"
            if w.emit.on_time_always:
                text += f"{self.sep()}{self.kw('ON TIME ALWAYS')}"
            if w.emit.closing_always:
                text += f"{self.sep()}{self.kw('CLOSING ALWAYS')}"
        if w.output is not None:
            text += f"{self.sep()}{self.kw('OUTPUT TIMESTAMP')} {self.kw(w.output.policy.value)}"
        return text


SHAPES = [
    "SELECT k, count(*) AS n FROM t {wm} GROUP BY k {w}",
    "SELECT k, sum(x) FROM t e WHERE x > 0 GROUP BY k HAVING sum(x) > 1 {w} ORDER BY k LIMIT 5",
    "WITH c AS (SELECT k, max(x) AS m FROM t GROUP BY k {w}) SELECT * FROM c",
    "SELECT * FROM (SELECT k, count(*) AS n FROM STREAM s GROUP BY k {w}) AS x WHERE n > 1",
]


#: relations of FROM with a WATERMARK clause, and no windowed SELECT
SOURCE_SHAPES = [
    "SELECT * FROM t {wm}",
    "SELECT * FROM t {wm} AS e WHERE x > 1",
    "SELECT a.k FROM STREAM s {wm} a JOIN u ON a.k = u.k",
    "SELECT * FROM (SELECT * FROM t) {wm} AS s",
]


@st.composite
def queries(draw):
    """(query text, the Windowing it was written from)."""
    windowing = draw(windowings())
    writer = Writer(draw)
    if windowing.window.on is None:
        shape = SHAPES[0]  # the event time comes from the WATERMARK clause
    else:
        shape = draw(st.sampled_from(SHAPES))
    source = ast.SourceWatermark("ts", ast.BoundedDelay(ast.Duration(MINUTE)))
    if shape == SHAPES[0] and draw(st.booleans()):
        source = draw(source_watermarks())
    return shape.format(w=writer.windowing(windowing), wm=writer.source_watermark(source)), windowing


@st.composite
def source_queries(draw):
    """(query text without a windowed SELECT, the SourceWatermark it was written from)."""
    source = draw(source_watermarks())
    return draw(st.sampled_from(SOURCE_SHAPES)).format(wm=Writer(draw).source_watermark(source)), source


# --------------------------------------------------------------------------- properties


def assert_round_trips(statement) -> str:
    """print -> parse gives the statement back, in both layouts; returns the printed text."""
    printed = to_sql(statement)
    assert parse(printed) == statement
    assert to_sql(parse(printed)) == printed
    assert parse(to_sql(statement, pretty=True)) == statement
    return printed


@SETTINGS
@given(queries())
def test_generated_queries_parse_to_their_ast_and_round_trip(query):
    sql, windowing = query
    statement = parse(sql)
    (_, parsed), = statement.windowed_selects()
    assert parsed == windowing
    assert_round_trips(statement)


@SETTINGS
@given(source_queries())
def test_source_watermarks_parse_to_their_ast_and_round_trip(query):
    # `WATERMARK ts DELAY OF 1m` prints as Spark's own clause, so the printed statement is plain
    # Spark SQL: it still parses to the same tree and clauses
    sql, watermark = query
    statement = parse(sql)
    (_, parsed), = statement.source_watermarks()
    assert parsed == watermark
    printed = assert_round_trips(statement)
    assert [w for _, w in parse(printed).source_watermarks()] == [watermark]


@SETTINGS
@given(st.lists(queries(), min_size=1, max_size=3))
def test_generated_scripts_keep_each_statements_clauses(items):
    script = ";\n".join(sql for sql, _ in items) + ";"
    statements = parse_script(script)
    assert [w for s in statements for _, w in s.windowed_selects()] == [w for _, w in items]


JUNK = st.lists(st.sampled_from(list("()',;\"`-*/ \n@x9é") + ["--", "/*", "*/", "WINDOW", "EMIT"]),
                min_size=1, max_size=6).map("".join)


@st.composite
def mutations(draw):
    sql, _ = draw(queries())
    tokens = scan(sql)
    kind = draw(st.sampled_from(["delete", "duplicate", "swap", "insert", "truncate", "replace"]))
    i = draw(st.integers(0, len(tokens) - 1))
    tok = tokens[i]
    if kind == "delete":
        return sql[:tok.start] + sql[tok.end:]
    if kind == "duplicate":
        return sql[:tok.end] + " " + tok.text + sql[tok.end:]
    if kind == "swap" and i + 1 < len(tokens):
        nxt = tokens[i + 1]
        return sql[:tok.start] + nxt.text + sql[tok.end:nxt.start] + tok.text + sql[nxt.end:]
    if kind == "insert":
        at = draw(st.integers(0, len(sql)))
        return sql[:at] + draw(JUNK) + sql[at:]
    if kind == "truncate":
        return sql[:draw(st.integers(0, len(sql)))]
    at = draw(st.integers(0, len(sql) - 1))
    return sql[:at] + draw(JUNK) + sql[at + 1:]


@settings(max_examples=examples(400))
@given(mutations())
# sqlglot reads `@t` as a parameter and prints it `${t}`: the WATERMARK after it must still be ours
@example(sql="SELECT k, count(*) AS n FROM@ t WATERMARK ts DELAY OF 1m GROUP BY k WINDOW GLOBAL")
def test_mutated_queries_parse_or_raise_a_sqlflow_error(sql):
    try:
        statement = parse(sql)
    except SqlflowError as error:
        assert error.message and "Traceback" not in str(error)
        if error.line is not None:
            assert error.sql is not None and 1 <= error.line <= max(1, len(error.sql.splitlines()))
        return
    try:
        validate(statement, streaming=True)
    except SqlflowError:
        pass
    if not statement.is_plain:
        assert parse(to_sql(statement)) == statement


@SETTINGS
@given(st.text(max_size=60))
def test_arbitrary_text_parses_or_raises_a_sqlflow_error(text):
    try:
        parse_script(text)
    except SqlflowError:
        pass


def test_writer_variations_are_really_exercised():
    # guard against a Writer that silently stopped varying the surface syntax
    sql = "SELECT k, count(*) FROM t GROUP BY k window fixed( size interval '5' minute ) on ts"
    assert re.search(r"interval", sql) and parse(sql).windowed_selects()
