"""Every clause form of the language: the AST it parses to and its canonical SQL.

Each case checks three things: the exact AST, the exact text `to_sql` prints, and that the
printed text parses back to the same statement (parse(print(x)) == x, also pretty-printed).
"""
from __future__ import annotations

import pytest
from sqlglot import exp

from sqlflow import ast
from sqlflow.frontend import Statement, parse, parse_script, to_sql
from sqlflow.time import parse_duration


# --------------------------------------------------------------------------- AST shorthands


def d(text: str) -> ast.Duration:
    return ast.Duration(parse_duration(text))


def W(fn, on="ts", trigger=None, lateness=None, emit=None, output=None) -> ast.Windowing:
    return ast.Windowing(
        ast.WindowClause(fn, on),
        trigger,
        ast.AllowedLateness(d(lateness)) if lateness else None,
        ast.Emit(ast.AccumulationMode[emit]) if emit else None,
        output=ast.OutputTimestamp(ast.OutputTime[output]) if output else None,
    )


WM = ast.Watermark()
A = ast.AccumulationMode


def check(sql: str, canonical: str, windowings, watermarks=()) -> Statement:
    statement = parse(sql)
    assert not statement.is_plain
    assert [w for _, w in statement.windowed_selects()] == list(windowings)
    assert [w for _, w in statement.source_watermarks()] == list(watermarks)
    assert to_sql(statement) == canonical
    again = parse(canonical)
    assert again == statement
    assert to_sql(again) == canonical
    assert parse(to_sql(statement, pretty=True)) == statement
    return statement


# --------------------------------------------------------------------------- clause forms
# (clauses as written, their AST, their canonical text) inside
# SELECT k, count(*) AS n FROM t GROUP BY k <clauses>

CLAUSES = [
    # ---- window functions
    ("WINDOW GLOBAL ON ts", W(ast.Global()), "WINDOW GLOBAL ON ts"),
    ("WINDOW FIXED(SIZE 5m) ON ts", W(ast.Fixed(d("5m"))), "WINDOW FIXED(SIZE 5m) ON ts"),
    ("WINDOW FIXED(SIZE 1h, OFFSET 15m) ON ts", W(ast.Fixed(d("1h"), d("15m"))),
     "WINDOW FIXED(SIZE 1h, OFFSET 15m) ON ts"),
    ("WINDOW FIXED(SIZE 1h, OFFSET 0s) ON ts", W(ast.Fixed(d("1h"))), "WINDOW FIXED(SIZE 1h) ON ts"),
    ("WINDOW SLIDING(SIZE 1h, PERIOD 10m) ON ts", W(ast.Sliding(d("1h"), d("10m"))),
     "WINDOW SLIDING(SIZE 1h, PERIOD 10m) ON ts"),
    ("WINDOW SLIDING(SIZE 1h, PERIOD 10m, OFFSET 5m) ON ts",
     W(ast.Sliding(d("1h"), d("10m"), d("5m"))), "WINDOW SLIDING(SIZE 1h, PERIOD 10m, OFFSET 5m) ON ts"),
    ("WINDOW SLIDING(SIZE 10m, PERIOD 10m) ON ts", W(ast.Sliding(d("10m"), d("10m"))),
     "WINDOW SLIDING(SIZE 10m, PERIOD 10m) ON ts"),
    ("WINDOW SESSIONS(GAP 30m) ON ts", W(ast.Sessions(d("30m"))), "WINDOW SESSIONS(GAP 30m) ON ts"),
    ("WINDOW SESSIONS(GAP INTERVAL 30 MINUTES) ON ts", W(ast.Sessions(d("30m"))),
     "WINDOW SESSIONS(GAP 30m) ON ts"),
    ("WINDOW SESSIONS(GAP CASE WHEN k = 'vip' THEN INTERVAL 1 HOUR ELSE INTERVAL 10 MINUTES END) ON ts",
     W(ast.Sessions(ast.SqlExpr("CASE WHEN k = 'vip' THEN INTERVAL '1' HOUR ELSE INTERVAL '10' MINUTES END"))),
     "WINDOW SESSIONS(GAP CASE WHEN k = 'vip' THEN INTERVAL '1' HOUR ELSE INTERVAL '10' MINUTES END) ON ts"),
    ("WINDOW SESSIONS(GAP gap_minutes * INTERVAL 1 MINUTE) ON ts",
     W(ast.Sessions(ast.SqlExpr("gap_minutes * INTERVAL '1' MINUTE"))),
     "WINDOW SESSIONS(GAP gap_minutes * INTERVAL '1' MINUTE) ON ts"),
    ("WINDOW CUMULATE(STEP 1m, SIZE 1h) ON ts", W(ast.Cumulate(d("1m"), d("1h"))),
     "WINDOW CUMULATE(STEP 1m, SIZE 1h) ON ts"),
    ("WINDOW CUMULATE(STEP 1m, SIZE 1h, OFFSET 30m) ON ts",
     W(ast.Cumulate(d("1m"), d("1h"), d("30m"))), "WINDOW CUMULATE(STEP 1m, SIZE 1h, OFFSET 30m) ON ts"),
    ("WINDOW my_fn() ON ts", W(ast.CustomWindow("my_fn")), "WINDOW my_fn() ON ts"),
    ("WINDOW my_fn(3, -1.5, 'it\\'s', \"x\", TRUE, FALSE, NULL, 10s, INTERVAL 2 HOURS) ON ts",
     W(ast.CustomWindow("my_fn", (3, -1.5, "it's", "x", True, False, None, d("10s"), d("2h")))),
     "WINDOW my_fn(3, -1.5, 'it\\'s', 'x', TRUE, FALSE, NULL, 10s, 2h) ON ts"),
    ("WINDOW Calendar_Days(1e2, 'Europe/Paris') ON ts",
     W(ast.CustomWindow("Calendar_Days", (100.0, "Europe/Paris"))),
     "WINDOW Calendar_Days(100.0, 'Europe/Paris') ON ts"),
    # ---- ON <column>
    ("WINDOW FIXED(SIZE 5m) ON e.ts", W(ast.Fixed(d("5m")), on="e.ts"), "WINDOW FIXED(SIZE 5m) ON e.ts"),
    ("WINDOW FIXED(SIZE 5m) ON `event time`", W(ast.Fixed(d("5m")), on="`event time`"),
     "WINDOW FIXED(SIZE 5m) ON `event time`"),
    ("WINDOW FIXED(SIZE 5m) ON `ts`", W(ast.Fixed(d("5m"))), "WINDOW FIXED(SIZE 5m) ON ts"),
    ("WINDOW FIXED(SIZE 5m) ON `order`", W(ast.Fixed(d("5m")), on="`order`"),
     "WINDOW FIXED(SIZE 5m) ON `order`"),
    # ---- trigger primitives
    ("WINDOW FIXED(SIZE 5m) ON ts TRIGGER WATERMARK", W(ast.Fixed(d("5m")), trigger=WM),
     "WINDOW FIXED(SIZE 5m) ON ts TRIGGER WATERMARK"),
    ("WINDOW FIXED(SIZE 5m) ON ts TRIGGER PERIOD 1m", W(ast.Fixed(d("5m")), trigger=ast.Period(d("1m"))),
     "WINDOW FIXED(SIZE 5m) ON ts TRIGGER PERIOD 1m"),
    ("WINDOW FIXED(SIZE 5m) ON ts TRIGGER DELAY 30s", W(ast.Fixed(d("5m")), trigger=ast.Delay(d("30s"))),
     "WINDOW FIXED(SIZE 5m) ON ts TRIGGER DELAY 30s"),
    ("WINDOW FIXED(SIZE 5m) ON ts TRIGGER COUNT 100", W(ast.Fixed(d("5m")), trigger=ast.Count(100)),
     "WINDOW FIXED(SIZE 5m) ON ts TRIGGER COUNT 100"),
    ("WINDOW FIXED(SIZE 5m) ON ts TRIGGER WATERMARK PERCENTILE 95",
     W(ast.Fixed(d("5m")), trigger=ast.WatermarkPercentile(95.0)),
     "WINDOW FIXED(SIZE 5m) ON ts TRIGGER WATERMARK PERCENTILE 95"),
    ("WINDOW FIXED(SIZE 5m) ON ts TRIGGER WATERMARK PERCENTILE 99.5",
     W(ast.Fixed(d("5m")), trigger=ast.WatermarkPercentile(99.5)),
     "WINDOW FIXED(SIZE 5m) ON ts TRIGGER WATERMARK PERCENTILE 99.5"),
    ("WINDOW FIXED(SIZE 5m) ON ts TRIGGER WHEN(kind='flush'  AND  seq>=10)",
     W(ast.Fixed(d("5m")), trigger=ast.When(ast.SqlExpr("kind = 'flush' AND seq >= 10"))),
     "WINDOW FIXED(SIZE 5m) ON ts TRIGGER WHEN(kind = 'flush' AND seq >= 10)"),
    ("WINDOW FIXED(SIZE 5m) ON ts TRIGGER WHEN(is_last_event)",
     W(ast.Fixed(d("5m")), trigger=ast.When(ast.SqlExpr("is_last_event"))),
     "WINDOW FIXED(SIZE 5m) ON ts TRIGGER WHEN(is_last_event)"),
    ("WINDOW FIXED(SIZE 5m) ON ts TRIGGER WHEN(kind IN ('a', 'b') AND (x > 1 OR y IS NULL))",
     W(ast.Fixed(d("5m")), trigger=ast.When(ast.SqlExpr("kind IN ('a', 'b') AND (x > 1 OR y IS NULL)"))),
     "WINDOW FIXED(SIZE 5m) ON ts TRIGGER WHEN(kind IN ('a', 'b') AND (x > 1 OR y IS NULL))"),
    # ---- combinators
    ("WINDOW FIXED(SIZE 5m) ON ts TRIGGER REPEAT(COUNT 2)",
     W(ast.Fixed(d("5m")), trigger=ast.Repeat(ast.Count(2))), "WINDOW FIXED(SIZE 5m) ON ts TRIGGER REPEAT(COUNT 2)"),
    ("WINDOW FIXED(SIZE 5m) ON ts TRIGGER REPEAT_UNTIL(COUNT 2, WATERMARK)",
     W(ast.Fixed(d("5m")), trigger=ast.RepeatUntil(ast.Count(2), WM)),
     "WINDOW FIXED(SIZE 5m) ON ts TRIGGER REPEAT_UNTIL(COUNT 2, WATERMARK)"),
    ("WINDOW FIXED(SIZE 5m) ON ts TRIGGER SEQUENCE(COUNT 1, DELAY 1m, WATERMARK)",
     W(ast.Fixed(d("5m")), trigger=ast.Sequence((ast.Count(1), ast.Delay(d("1m")), WM))),
     "WINDOW FIXED(SIZE 5m) ON ts TRIGGER SEQUENCE(COUNT 1, DELAY 1m, WATERMARK)"),
    ("WINDOW FIXED(SIZE 5m) ON ts TRIGGER FIRST_OF(PERIOD 1m, COUNT 10)",
     W(ast.Fixed(d("5m")), trigger=ast.FirstOf((ast.Period(d("1m")), ast.Count(10)))),
     "WINDOW FIXED(SIZE 5m) ON ts TRIGGER FIRST_OF(PERIOD 1m, COUNT 10)"),
    ("WINDOW FIXED(SIZE 5m) ON ts TRIGGER ALL_OF(COUNT 10, DELAY 1m)",
     W(ast.Fixed(d("5m")), trigger=ast.AllOf((ast.Count(10), ast.Delay(d("1m"))))),
     "WINDOW FIXED(SIZE 5m) ON ts TRIGGER ALL_OF(COUNT 10, DELAY 1m)"),
    ("WINDOW FIXED(SIZE 5m) ON ts TRIGGER SEQUENCE(REPEAT_UNTIL(ALL_OF(COUNT 10, PERIOD 1m), WATERMARK),"
     " REPEAT(FIRST_OF(WHEN(x > 1), DELAY 10s)))",
     W(ast.Fixed(d("5m")), trigger=ast.Sequence((
         ast.RepeatUntil(ast.AllOf((ast.Count(10), ast.Period(d("1m")))), WM),
         ast.Repeat(ast.FirstOf((ast.When(ast.SqlExpr("x > 1")), ast.Delay(d("10s")))))))),
     "WINDOW FIXED(SIZE 5m) ON ts TRIGGER SEQUENCE(REPEAT_UNTIL(ALL_OF(COUNT 10, PERIOD 1m), WATERMARK),"
     " REPEAT(FIRST_OF(WHEN(x > 1), DELAY 10s)))"),
    # ---- WATERMARK EARLY ... LATE ... sugar
    ("WINDOW FIXED(SIZE 5m) ON ts TRIGGER WATERMARK EARLY PERIOD 1m",
     W(ast.Fixed(d("5m")), trigger=ast.WatermarkEarlyLate(early=ast.Period(d("1m")))),
     "WINDOW FIXED(SIZE 5m) ON ts TRIGGER WATERMARK EARLY PERIOD 1m"),
    ("WINDOW FIXED(SIZE 5m) ON ts TRIGGER WATERMARK LATE COUNT 1",
     W(ast.Fixed(d("5m")), trigger=ast.WatermarkEarlyLate(late=ast.Count(1))),
     "WINDOW FIXED(SIZE 5m) ON ts TRIGGER WATERMARK LATE COUNT 1"),
    ("WINDOW FIXED(SIZE 5m) ON ts TRIGGER WATERMARK EARLY PERIOD 1m LATE COUNT 1",
     W(ast.Fixed(d("5m")), trigger=ast.WatermarkEarlyLate(ast.Period(d("1m")), ast.Count(1))),
     "WINDOW FIXED(SIZE 5m) ON ts TRIGGER WATERMARK EARLY PERIOD 1m LATE COUNT 1"),
    ("WINDOW FIXED(SIZE 5m) ON ts TRIGGER WATERMARK EARLY WATERMARK PERCENTILE 50 LATE WATERMARK",
     W(ast.Fixed(d("5m")), trigger=ast.WatermarkEarlyLate(ast.WatermarkPercentile(50.0), WM)),
     "WINDOW FIXED(SIZE 5m) ON ts TRIGGER WATERMARK EARLY WATERMARK PERCENTILE 50 LATE WATERMARK"),
    ("WINDOW FIXED(SIZE 5m) ON ts TRIGGER WATERMARK EARLY COUNT 1 LATE WATERMARK EARLY COUNT 2 LATE COUNT 3",
     W(ast.Fixed(d("5m")), trigger=ast.WatermarkEarlyLate(
         ast.Count(1), ast.WatermarkEarlyLate(ast.Count(2), ast.Count(3)))),
     "WINDOW FIXED(SIZE 5m) ON ts TRIGGER WATERMARK EARLY COUNT 1 LATE WATERMARK EARLY COUNT 2 LATE COUNT 3"),
    ("WINDOW FIXED(SIZE 5m) ON ts TRIGGER REPEAT(WATERMARK EARLY DELAY 1m)",
     W(ast.Fixed(d("5m")), trigger=ast.Repeat(ast.WatermarkEarlyLate(early=ast.Delay(d("1m"))))),
     "WINDOW FIXED(SIZE 5m) ON ts TRIGGER REPEAT(WATERMARK EARLY DELAY 1m)"),
    ("WINDOW FIXED(SIZE 5m) ON ts TRIGGER PERIOD 1m OFFSET 15s",
     W(ast.Fixed(d("5m")), trigger=ast.Period(d("1m"), d("15s"))), "WINDOW FIXED(SIZE 5m) ON ts TRIGGER PERIOD 1m OFFSET 15s"),
    ("WINDOW FIXED(SIZE 5m) ON ts TRIGGER PERIOD INTERVAL 1 MINUTE OFFSET INTERVAL '15' SECONDS",
     W(ast.Fixed(d("5m")), trigger=ast.Period(d("1m"), d("15s"))), "WINDOW FIXED(SIZE 5m) ON ts TRIGGER PERIOD 1m OFFSET 15s"),
    ("WINDOW FIXED(SIZE 5m) ON ts TRIGGER PERIOD 1m OFFSET 0s",
     W(ast.Fixed(d("5m")), trigger=ast.Period(d("1m"))), "WINDOW FIXED(SIZE 5m) ON ts TRIGGER PERIOD 1m"),
    ("WINDOW FIXED(SIZE 5m) ON ts TRIGGER WATERMARK EARLY PERIOD 1m OFFSET 30s",
     W(ast.Fixed(d("5m")), trigger=ast.WatermarkEarlyLate(early=ast.Period(d("1m"), d("30s")))),
     "WINDOW FIXED(SIZE 5m) ON ts TRIGGER WATERMARK EARLY PERIOD 1m OFFSET 30s"),
    # ---- ALLOWED LATENESS and EMIT
    ("WINDOW FIXED(SIZE 5m) ON ts ALLOWED LATENESS unbounded",
     ast.Windowing(ast.WindowClause(ast.Fixed(d("5m")), "ts"), allowed_lateness=ast.AllowedLateness(ast.Unbounded())),
     "WINDOW FIXED(SIZE 5m) ON ts ALLOWED LATENESS UNBOUNDED"),
    ("WINDOW FIXED(SIZE 5m) ON ts EMIT ACCUMULATING ON TIME ALWAYS",
     ast.Windowing(ast.WindowClause(ast.Fixed(d("5m")), "ts"), emit=ast.Emit(A.ACCUMULATING, on_time_always=True)),
     "WINDOW FIXED(SIZE 5m) ON ts EMIT ACCUMULATING ON TIME ALWAYS"),
    ("WINDOW FIXED(SIZE 5m) ON ts EMIT discarding closing always",
     ast.Windowing(ast.WindowClause(ast.Fixed(d("5m")), "ts"), emit=ast.Emit(A.DISCARDING, closing_always=True)),
     "WINDOW FIXED(SIZE 5m) ON ts EMIT DISCARDING CLOSING ALWAYS"),
    ("WINDOW FIXED(SIZE 5m) ON time TRIGGER WATERMARK EARLY PERIOD 1m ALLOWED LATENESS UNBOUNDED "
     "EMIT ACCUMULATING AND RETRACTING ON TIME ALWAYS CLOSING ALWAYS",
     ast.Windowing(ast.WindowClause(ast.Fixed(d("5m")), "time"), ast.WatermarkEarlyLate(early=ast.Period(d("1m"))),
                   ast.AllowedLateness(ast.Unbounded()),
                   ast.Emit(A.ACCUMULATING_AND_RETRACTING, on_time_always=True, closing_always=True)),
     "WINDOW FIXED(SIZE 5m) ON time TRIGGER WATERMARK EARLY PERIOD 1m ALLOWED LATENESS UNBOUNDED "
     "EMIT ACCUMULATING AND RETRACTING ON TIME ALWAYS CLOSING ALWAYS"),
    ("WINDOW FIXED(SIZE 5m) ON ts ALLOWED LATENESS 1h", W(ast.Fixed(d("5m")), lateness="1h"),
     "WINDOW FIXED(SIZE 5m) ON ts ALLOWED LATENESS 1h"),
    ("WINDOW FIXED(SIZE 5m) ON ts ALLOWED LATENESS 0s", W(ast.Fixed(d("5m")), lateness="0s"),
     "WINDOW FIXED(SIZE 5m) ON ts ALLOWED LATENESS 0s"),
    ("WINDOW FIXED(SIZE 5m) ON ts EMIT DISCARDING", W(ast.Fixed(d("5m")), emit="DISCARDING"),
     "WINDOW FIXED(SIZE 5m) ON ts EMIT DISCARDING"),
    ("WINDOW FIXED(SIZE 5m) ON ts EMIT ACCUMULATING", W(ast.Fixed(d("5m")), emit="ACCUMULATING"),
     "WINDOW FIXED(SIZE 5m) ON ts EMIT ACCUMULATING"),
    ("WINDOW FIXED(SIZE 5m) ON ts EMIT ACCUMULATING AND RETRACTING",
     W(ast.Fixed(d("5m")), emit="ACCUMULATING_AND_RETRACTING"),
     "WINDOW FIXED(SIZE 5m) ON ts EMIT ACCUMULATING AND RETRACTING"),
    ("WINDOW SESSIONS(GAP 10m) ON ts TRIGGER REPEAT(COUNT 5) ALLOWED LATENESS 1d EMIT DISCARDING",
     W(ast.Sessions(d("10m")), trigger=ast.Repeat(ast.Count(5)), lateness="1d", emit="DISCARDING"),
     "WINDOW SESSIONS(GAP 10m) ON ts TRIGGER REPEAT(COUNT 5) ALLOWED LATENESS 1d EMIT DISCARDING"),
    # ---- OUTPUT TIMESTAMP (after EMIT)
    ("WINDOW FIXED(SIZE 5m) ON ts OUTPUT TIMESTAMP END OF WINDOW", W(ast.Fixed(d("5m")), output="END_OF_WINDOW"),
     "WINDOW FIXED(SIZE 5m) ON ts OUTPUT TIMESTAMP END OF WINDOW"),
    ("WINDOW FIXED(SIZE 5m) ON ts output timestamp start of window",
     W(ast.Fixed(d("5m")), output="START_OF_WINDOW"), "WINDOW FIXED(SIZE 5m) ON ts OUTPUT TIMESTAMP START OF WINDOW"),
    ("WINDOW SESSIONS(GAP 10m) ON ts TRIGGER REPEAT(COUNT 5) EMIT DISCARDING OUTPUT TIMESTAMP EARLIEST",
     W(ast.Sessions(d("10m")), trigger=ast.Repeat(ast.Count(5)), emit="DISCARDING", output="EARLIEST"),
     "WINDOW SESSIONS(GAP 10m) ON ts TRIGGER REPEAT(COUNT 5) EMIT DISCARDING OUTPUT TIMESTAMP EARLIEST"),
    ("WINDOW GLOBAL ON ts TRIGGER REPEAT(COUNT 5) ALLOWED LATENESS 1m OUTPUT TIMESTAMP LATEST",
     W(ast.Global(), trigger=ast.Repeat(ast.Count(5)), lateness="1m", output="LATEST"),
     "WINDOW GLOBAL ON ts TRIGGER REPEAT(COUNT 5) ALLOWED LATENESS 1m OUTPUT TIMESTAMP LATEST"),
    # ---- time domains (ON PROCESSING TIME, ON INGESTION TIME; ON EVENT TIME is the default)
    ("WINDOW FIXED(SIZE 1h) ON PROCESSING TIME",
     ast.Windowing(ast.WindowClause(ast.Fixed(d("1h")), domain=ast.TimeDomain.PROCESSING_TIME)),
     "WINDOW FIXED(SIZE 1h) ON PROCESSING TIME"),
    ("WINDOW SESSIONS(GAP 10m) on ingestion time TRIGGER WATERMARK EARLY COUNT 2 EMIT DISCARDING",
     ast.Windowing(ast.WindowClause(ast.Sessions(d("10m")), domain=ast.TimeDomain.INGESTION_TIME),
                   ast.WatermarkEarlyLate(early=ast.Count(2)), emit=ast.Emit(A.DISCARDING)),
     "WINDOW SESSIONS(GAP 10m) ON INGESTION TIME TRIGGER WATERMARK EARLY COUNT 2 EMIT DISCARDING"),
    # the three words still name columns: only the phrase with TIME is a time domain
    ("WINDOW FIXED(SIZE 5m) ON processing EMIT DISCARDING", W(ast.Fixed(d("5m")), on="`processing`", emit="DISCARDING"),
     "WINDOW FIXED(SIZE 5m) ON `processing` EMIT DISCARDING"),
    ("WINDOW FIXED(SIZE 5m) ON event.ingestion", W(ast.Fixed(d("5m")), on="`event`.`ingestion`"),
     "WINDOW FIXED(SIZE 5m) ON `event`.`ingestion`"),
    # ---- lowercase and mixed-case keywords
    ("window sliding(size 1h, period 10m) on ts trigger watermark early period 1m late count 1 "
     "allowed lateness 5m emit accumulating and retracting",
     W(ast.Sliding(d("1h"), d("10m")), trigger=ast.WatermarkEarlyLate(ast.Period(d("1m")), ast.Count(1)),
       lateness="5m", emit="ACCUMULATING_AND_RETRACTING"),
     "WINDOW SLIDING(SIZE 1h, PERIOD 10m) ON ts TRIGGER WATERMARK EARLY PERIOD 1m LATE COUNT 1 "
     "ALLOWED LATENESS 5m EMIT ACCUMULATING AND RETRACTING"),
    ("Window Fixed(Size 5m) On ts Trigger Repeat_Until(Count 2, Watermark) Emit Discarding",
     W(ast.Fixed(d("5m")), trigger=ast.RepeatUntil(ast.Count(2), WM), emit="DISCARDING"),
     "WINDOW FIXED(SIZE 5m) ON ts TRIGGER REPEAT_UNTIL(COUNT 2, WATERMARK) EMIT DISCARDING"),
    # ---- comments inside the clauses
    ("WINDOW /* every 5 minutes */ FIXED(SIZE 5m) -- tumbling\n ON ts TRIGGER /* a /* nested */ one */ COUNT 1",
     W(ast.Fixed(d("5m")), trigger=ast.Count(1)), "WINDOW FIXED(SIZE 5m) ON ts TRIGGER COUNT 1"),
    ("WINDOW FIXED(SIZE 5m) ON ts TRIGGER WHEN(note = 'TRIGGER EMIT -- /*' /* ) */)",
     W(ast.Fixed(d("5m")), trigger=ast.When(ast.SqlExpr("note = 'TRIGGER EMIT -- /*'"))),
     "WINDOW FIXED(SIZE 5m) ON ts TRIGGER WHEN(note = 'TRIGGER EMIT -- /*')"),
]


@pytest.mark.parametrize("clauses, windowing, canonical", CLAUSES, ids=[c[0][:70] for c in CLAUSES])
def test_clause_forms(clauses, windowing, canonical):
    check(f"SELECT k, count(*) AS n FROM t GROUP BY k {clauses}",
          f"SELECT k, COUNT(*) AS n FROM t GROUP BY k {canonical}", [windowing])


def test_on_event_time_is_the_default():
    """`ON EVENT TIME` names the default: the source's WATERMARK column; it prints without ON."""
    check("SELECT k, count(*) AS n FROM t WATERMARK ts DELAY OF 1m GROUP BY k WINDOW FIXED(SIZE 5m) ON Event Time",
          "SELECT k, COUNT(*) AS n FROM t WATERMARK ts DELAY OF INTERVAL 1 MINUTE GROUP BY k WINDOW FIXED(SIZE 5m)",
          [ast.Windowing(ast.WindowClause(ast.Fixed(d("5m"))))],
          [ast.SourceWatermark("ts", ast.BoundedDelay(d("1m")))])


# --------------------------------------------------------------------------- durations

DURATIONS = [
    ("250us", 250, "250us"),
    ("500ms", 500_000, "500ms"),
    ("10s", 10_000_000, "10s"),
    ("30m", 1_800_000_000, "30m"),
    ("2h", 7_200_000_000, "2h"),
    ("1d", 86_400_000_000, "1d"),
    ("90s", 90_000_000, "90s"),
    ("1.5h", 5_400_000_000, "90m"),
    ("1500ms", 1_500_000, "1500ms"),
    ("10S", 10_000_000, "10s"),
    ("INTERVAL 5 MINUTES", 300_000_000, "5m"),
    ("INTERVAL 1 MINUTE", 60_000_000, "1m"),
    ("INTERVAL '5' MINUTE", 300_000_000, "5m"),
    ("interval 2 hours", 7_200_000_000, "2h"),
    ("INTERVAL 1 DAY 2 HOURS", 93_600_000_000, "26h"),
    ("INTERVAL '1 day 2 hours'", 93_600_000_000, "26h"),
    ("INTERVAL '1:30' HOUR TO MINUTE", 5_400_000_000, "90m"),
    ("INTERVAL '1 02:03:04.5' DAY TO SECOND", 93_784_500_000, "93784500ms"),
    ("INTERVAL '2:30' MINUTE TO SECOND", 150_000_000, "150s"),
    ("INTERVAL 1 WEEK", 604_800_000_000, "7d"),
    ("INTERVAL 500 MILLISECONDS", 500_000, "500ms"),
    ("INTERVAL 250 MICROSECONDS", 250, "250us"),
    ("INTERVAL 1.5 SECONDS", 1_500_000, "1500ms"),
]


@pytest.mark.parametrize("text, micros, canonical", DURATIONS, ids=[c[0] for c in DURATIONS])
def test_durations(text, micros, canonical):
    check(f"SELECT count(*) AS n FROM t GROUP BY k WINDOW GLOBAL ON ts ALLOWED LATENESS {text}",
          f"SELECT COUNT(*) AS n FROM t GROUP BY k WINDOW GLOBAL ON ts ALLOWED LATENESS {canonical}",
          [ast.Windowing(ast.WindowClause(ast.Global(), "ts"), allowed_lateness=ast.AllowedLateness(ast.Duration(micros)))])


# --------------------------------------------------------------------------- statements

CARD = """SELECT user_id, SUM(amount) AS total
FROM events WATERMARK event_time DELAY OF INTERVAL 5 MINUTES
GROUP BY user_id
WINDOW SESSIONS(GAP 30m)
TRIGGER SEQUENCE(REPEAT_UNTIL(PERIOD 1m, WATERMARK), REPEAT(WATERMARK))
EMIT ACCUMULATING AND RETRACTING"""


def test_the_design_cards_example():
    statement = check(
        CARD,
        "SELECT user_id, SUM(amount) AS total FROM events WATERMARK event_time DELAY OF INTERVAL 5 MINUTES "
        "GROUP BY user_id WINDOW SESSIONS(GAP 30m) TRIGGER SEQUENCE(REPEAT_UNTIL(PERIOD 1m, WATERMARK), "
        "REPEAT(WATERMARK)) EMIT ACCUMULATING AND RETRACTING",
        [ast.Windowing(ast.WindowClause(ast.Sessions(d("30m"))),
                       ast.Sequence((ast.RepeatUntil(ast.Period(d("1m")), WM), ast.Repeat(WM))),
                       emit=ast.Emit(A.ACCUMULATING_AND_RETRACTING))],
        [ast.SourceWatermark("event_time", ast.BoundedDelay(d("5m")))],
    )
    (select, windowing), = statement.windowed_selects()
    assert isinstance(select, exp.Select) and "sqlflow" in select.meta
    (relation, _), = statement.source_watermarks()
    assert isinstance(relation, exp.Table) and relation.name == "events"
    # positions point into the query text (1-based)
    assert windowing.pos == ast.Position(4, 1)
    assert windowing.window.fn.gap.pos == ast.Position(4, 21)
    assert windowing.trigger.pos == ast.Position(5, 9)
    assert windowing.trigger.triggers[0].trigger.period.pos == ast.Position(5, 38)
    assert windowing.emit.pos == ast.Position(6, 1)
    assert statement.source_watermarks()[0][1].pos == ast.Position(2, 13)
    # the sqlglot tree holds no trace of our clauses
    assert statement.tree.sql(dialect="spark") == "SELECT user_id, SUM(amount) AS total FROM events GROUP BY user_id"


SOURCE = "SELECT k, COUNT(*) AS n FROM {} GROUP BY k WINDOW FIXED(SIZE 5m)"
FIXED_5M = ast.Windowing(ast.WindowClause(ast.Fixed(d("5m"))))

SOURCES = [
    # (relation as written, canonical, source watermark, alias of the relation node)
    ("events WATERMARK ts DELAY OF INTERVAL 1 MINUTE", "events WATERMARK ts DELAY OF INTERVAL 1 MINUTE",
     ast.SourceWatermark("ts", ast.BoundedDelay(d("1m"))), None),
    ("events WATERMARK ts DELAY OF INTERVAL '90' SECOND AS e", "events WATERMARK ts DELAY OF INTERVAL 90 SECONDS AS e",
     ast.SourceWatermark("ts", ast.BoundedDelay(d("90s"))), "e"),
    ("events WATERMARK ts DELAY OF INTERVAL 1 MINUTE e", "events WATERMARK ts DELAY OF INTERVAL 1 MINUTE AS e",
     ast.SourceWatermark("ts", ast.BoundedDelay(d("1m"))), "e"),
    ("events WATERMARK e.ts DELAY OF 30s", "events WATERMARK e.ts DELAY OF INTERVAL 30 SECONDS",
     ast.SourceWatermark("e.ts", ast.BoundedDelay(d("30s"))), None),
    ("events WATERMARK ts DELAY OF INTERVAL 0 SECONDS", "events WATERMARK ts DELAY OF INTERVAL 0 SECONDS",
     ast.SourceWatermark("ts", ast.BoundedDelay(ast.Duration(0))), None),
    ("events WATERMARK ts DELAY OF INTERVAL 1 MINUTE ARRIVAL arrived_at AS e",
     "events WATERMARK ts DELAY OF INTERVAL 1 MINUTE ARRIVAL arrived_at AS e",
     ast.SourceWatermark("ts", ast.BoundedDelay(d("1m")), "arrived_at"), "e"),
    ("events WATERMARK ts PERFECT ARRIVAL proc_time", "events WATERMARK ts PERFECT ARRIVAL proc_time",
     ast.SourceWatermark("ts", ast.Perfect(), "proc_time"), None),
    ("db.events WATERMARK `event time` PERFECT ARRIVAL `proc time` AS e",
     "db.events WATERMARK `event time` PERFECT ARRIVAL `proc time` AS e",
     ast.SourceWatermark("`event time`", ast.Perfect(), "`proc time`"), "e"),
    ("events WATERMARK ts TIMELINE wm_steps ARRIVAL proc_time", "events WATERMARK ts TIMELINE wm_steps ARRIVAL proc_time",
     ast.SourceWatermark("ts", ast.Timeline("wm_steps"), "proc_time"), None),
    ("events WATERMARK ts TIMELINE db.wm_steps ARRIVAL proc_time e",
     "events WATERMARK ts TIMELINE db.wm_steps ARRIVAL proc_time AS e",
     ast.SourceWatermark("ts", ast.Timeline("db.wm_steps"), "proc_time"), "e"),
    ("(SELECT * FROM raw) WATERMARK ts DELAY OF INTERVAL 1 MINUTE AS s",
     "(SELECT * FROM raw) WATERMARK ts DELAY OF INTERVAL 1 MINUTE AS s",
     ast.SourceWatermark("ts", ast.BoundedDelay(d("1m"))), "s"),
    ("STREAM(events) WATERMARK ts DELAY OF INTERVAL 1 MINUTE", "STREAM events WATERMARK ts DELAY OF INTERVAL 1 MINUTE",
     ast.SourceWatermark("ts", ast.BoundedDelay(d("1m"))), None),
    ("STREAM events WATERMARK ts DELAY OF INTERVAL 1 MINUTE AS e",
     "STREAM events WATERMARK ts DELAY OF INTERVAL 1 MINUTE AS e",
     ast.SourceWatermark("ts", ast.BoundedDelay(d("1m"))), "e"),
    ("events watermark ts perfect arrival at e", "events WATERMARK ts PERFECT ARRIVAL at AS e",
     ast.SourceWatermark("ts", ast.Perfect(), "at"), "e"),
    ("range(100) WATERMARK id DELAY OF 1m AS r(x)", "RANGE(100) WATERMARK id DELAY OF INTERVAL 1 MINUTE AS r(x)",
     ast.SourceWatermark("id", ast.BoundedDelay(d("1m"))), "r"),
    ("events TABLESAMPLE (50 PERCENT) WATERMARK ts DELAY OF 1m AS e",
     "events TABLESAMPLE (50 PERCENT) WATERMARK ts DELAY OF INTERVAL 1 MINUTE AS e",
     ast.SourceWatermark("ts", ast.BoundedDelay(d("1m"))), "e"),
]


@pytest.mark.parametrize("relation, canonical, watermark, alias", SOURCES, ids=[s[0][:60] for s in SOURCES])
def test_source_watermarks(relation, canonical, watermark, alias):
    statement = check(SOURCE.format(relation), SOURCE.format(canonical), [FIXED_5M], [watermark])
    (node, _), = statement.source_watermarks()
    assert node.alias == (alias or "")


def test_watermarks_on_joined_relations():
    check("SELECT a.k, COUNT(*) FROM clicks WATERMARK ts DELAY OF INTERVAL 1 MINUTE a "
          "JOIN views WATERMARK ts PERFECT ARRIVAL arr b ON a.k = b.k "
          "GROUP BY a.k WINDOW FIXED(SIZE 5m) ON a.ts",
          "SELECT a.k, COUNT(*) FROM clicks WATERMARK ts DELAY OF INTERVAL 1 MINUTE AS a "
          "JOIN views WATERMARK ts PERFECT ARRIVAL arr AS b ON a.k = b.k "
          "GROUP BY a.k WINDOW FIXED(SIZE 5m) ON a.ts",
          [ast.Windowing(ast.WindowClause(ast.Fixed(d("5m")), "a.ts"))],
          [ast.SourceWatermark("ts", ast.BoundedDelay(d("1m"))), ast.SourceWatermark("ts", ast.Perfect(), "arr")])


def test_windowed_select_in_a_cte_and_in_a_subquery():
    statement = check(
        "WITH per_min AS (SELECT k, count(*) AS c FROM t WATERMARK ts DELAY OF 1m GROUP BY k "
        "WINDOW FIXED(SIZE 1m) EMIT DISCARDING) "
        "SELECT k, s FROM (SELECT k, sum(c) AS s FROM per_min GROUP BY k WINDOW GLOBAL TRIGGER REPEAT(COUNT 10)) AS x "
        "WHERE s > 0",
        "WITH per_min AS (SELECT k, COUNT(*) AS c FROM t WATERMARK ts DELAY OF INTERVAL 1 MINUTE GROUP BY k "
        "WINDOW FIXED(SIZE 1m) EMIT DISCARDING) "
        "SELECT k, s FROM (SELECT k, SUM(c) AS s FROM per_min GROUP BY k WINDOW GLOBAL TRIGGER REPEAT(COUNT 10)) AS x "
        "WHERE s > 0",
        [ast.Windowing(ast.WindowClause(ast.Fixed(d("1m"))), emit=ast.Emit(A.DISCARDING)),
         ast.Windowing(ast.WindowClause(ast.Global()), ast.Repeat(ast.Count(10)))],
        [ast.SourceWatermark("ts", ast.BoundedDelay(d("1m")))],
    )
    (inner, _), (outer, _) = statement.windowed_selects()
    assert inner.find_ancestor(exp.CTE) is not None
    assert outer.find_ancestor(exp.Subquery) is not None
    assert "sqlflow" not in statement.tree.meta  # the outermost SELECT is not windowed


def test_two_windowed_selects_in_a_union():
    check("SELECT k, count(*) FROM t GROUP BY k WINDOW FIXED(SIZE 1m) ON ts "
          "UNION ALL SELECT k, count(*) FROM u GROUP BY k WINDOW SESSIONS(GAP 5m) ON ts EMIT DISCARDING",
          "SELECT k, COUNT(*) FROM t GROUP BY k WINDOW FIXED(SIZE 1m) ON ts "
          "UNION ALL SELECT k, COUNT(*) FROM u GROUP BY k WINDOW SESSIONS(GAP 5m) ON ts EMIT DISCARDING",
          [W(ast.Fixed(d("1m"))), W(ast.Sessions(d("5m")), emit="DISCARDING")])


def test_windowed_select_in_a_where_subquery():
    check("SELECT * FROM users WHERE id IN (SELECT k FROM t GROUP BY k WINDOW GLOBAL ON ts TRIGGER COUNT 1)",
          "SELECT * FROM users WHERE id IN (SELECT k FROM t GROUP BY k WINDOW GLOBAL ON ts TRIGGER COUNT 1)",
          [W(ast.Global(), trigger=ast.Count(1))])


def test_having_order_by_limit_around_the_clauses():
    check("SELECT k, count(*) AS n FROM t GROUP BY k HAVING count(*) > 2 "
          "WINDOW FIXED(SIZE 5m) ON ts TRIGGER COUNT 3 ORDER BY n DESC LIMIT 10",
          "SELECT k, COUNT(*) AS n FROM t GROUP BY k HAVING COUNT(*) > 2 "
          "WINDOW FIXED(SIZE 5m) ON ts TRIGGER COUNT 3 ORDER BY n DESC LIMIT 10",
          [W(ast.Fixed(d("5m")), trigger=ast.Count(3))])


@pytest.mark.parametrize("after", ["ORDER BY k", "LIMIT 5", "SORT BY k", "ORDER BY k LIMIT 5 OFFSET 2"])
def test_order_by_and_limit_end_a_trigger_that_ends_in_a_period(after):
    """A PERIOD's duration right before ORDER BY / LIMIT: only OFFSET may continue the PERIOD."""
    check(f"SELECT k, count(*) AS n FROM t GROUP BY k WINDOW GLOBAL ON ts TRIGGER WATERMARK LATE PERIOD 1ms {after}",
          f"SELECT k, COUNT(*) AS n FROM t GROUP BY k WINDOW GLOBAL ON ts TRIGGER WATERMARK LATE PERIOD 1ms {after}",
          [W(ast.Global(), trigger=ast.WatermarkEarlyLate(None, ast.Period(d("1ms"))))])


def test_sort_cluster_distribute_by_end_the_clauses():
    check("SELECT k, count(*) AS n FROM t GROUP BY k WINDOW GLOBAL ON ts EMIT DISCARDING SORT BY k",
          "SELECT k, COUNT(*) AS n FROM t GROUP BY k WINDOW GLOBAL ON ts EMIT DISCARDING SORT BY k",
          [W(ast.Global(), emit="DISCARDING")])


def test_window_without_group_by_over_one_global_key():
    check("SELECT count(*) AS n, max(x) FROM t WINDOW FIXED(SIZE 5m) ON ts",
          "SELECT COUNT(*) AS n, MAX(x) FROM t WINDOW FIXED(SIZE 5m) ON ts",
          [W(ast.Fixed(d("5m")))])



@pytest.mark.parametrize("relation, alias", [
    ("t WATERMARK ts DELAY OF INTERVAL 1 MINUTE", ""),
    ("t WATERMARK ts PERFECT ARRIVAL at", ""),
    ("t WATERMARK ts PERFECT ARRIVAL at AS a", "a"),
])
def test_window_without_group_by_right_after_a_source_watermark(relation, alias):
    """The clause tail is not the relation's alias (it was: 'WINDOW can only end a SELECT')."""
    statement = check(f"SELECT COUNT(*) AS n FROM {relation} WINDOW FIXED(SIZE 5m)",
                      f"SELECT COUNT(*) AS n FROM {relation} WINDOW FIXED(SIZE 5m)", [W(ast.Fixed(d("5m")), on=None)],
                      [w for _, w in parse(f"SELECT COUNT(*) AS n FROM {relation} GROUP BY () WINDOW FIXED(SIZE 5m)")
                       .source_watermarks()])
    (node, _), = statement.source_watermarks()
    assert node.alias == alias


def test_pane_columns_may_be_selected():
    check("SELECT k, window_start, window_end, pane_index, pane_timing, is_last, emit_time, is_retraction, "
          "count(*) FROM t GROUP BY k WINDOW FIXED(SIZE 5m) ON ts EMIT ACCUMULATING AND RETRACTING",
          "SELECT k, window_start, window_end, pane_index, pane_timing, is_last, emit_time, is_retraction, "
          "COUNT(*) FROM t GROUP BY k WINDOW FIXED(SIZE 5m) ON ts EMIT ACCUMULATING AND RETRACTING",
          [W(ast.Fixed(d("5m")), emit="ACCUMULATING_AND_RETRACTING")])
    check("SELECT k, window_start, is_last, count(*) FROM t GROUP BY k WINDOW FIXED(SIZE 5m) ON ts",
          "SELECT k, window_start, is_last, COUNT(*) FROM t GROUP BY k WINDOW FIXED(SIZE 5m) ON ts",
          [W(ast.Fixed(d("5m")))])


def test_grouping_by_alias_ordinal_and_expression():
    check("SELECT lower(k) AS lk, k2, x + 1, count(*) FROM t GROUP BY lk, 2, x + 1 WINDOW GLOBAL ON ts",
          "SELECT LOWER(k) AS lk, k2, x + 1, COUNT(*) FROM t GROUP BY lk, 2, x + 1 WINDOW GLOBAL ON ts",
          [W(ast.Global())])


def test_group_by_all_right_before_the_clauses():
    check("SELECT k, SUM(v) s FROM t GROUP BY ALL WINDOW FIXED(SIZE 1m) ON ts",
          "SELECT k, SUM(v) AS s FROM t GROUP BY ALL WINDOW FIXED(SIZE 1m) ON ts",
          [W(ast.Fixed(d("1m")))])
    select, _ = parse("SELECT k, SUM(v) s FROM t GROUP BY ALL\nWINDOW FIXED(SIZE 1m) ON ts").windowed_selects()[0]
    assert select.args["group"].args == {"all": True}


def test_keywords_in_comments_and_strings_are_not_clauses():
    check("SELECT k, 'WINDOW GLOBAL' AS w, count(*) FROM t -- WINDOW FIXED(SIZE 1m)\n"
          "WHERE note <> 'EMIT DISCARDING' /* TRIGGER COUNT 1 */ GROUP BY k WINDOW GLOBAL ON ts EMIT ACCUMULATING",
          "SELECT k, 'WINDOW GLOBAL' AS w, COUNT(*) FROM t /* WINDOW FIXED(SIZE 1m) */ "
          "WHERE note <> 'EMIT DISCARDING' /* TRIGGER COUNT 1 */ GROUP BY k WINDOW GLOBAL ON ts EMIT ACCUMULATING",
          [W(ast.Global(), emit="ACCUMULATING")])


def test_columns_named_like_our_keywords():
    check("SELECT `window`, trigger, emit, count(*) FROM t GROUP BY `window`, trigger, emit "
          "WINDOW FIXED(SIZE 5m) ON `delay` TRIGGER COUNT 1",
          "SELECT `window`, trigger, emit, COUNT(*) FROM t GROUP BY `window`, trigger, emit "
          "WINDOW FIXED(SIZE 5m) ON `delay` TRIGGER COUNT 1",
          [W(ast.Fixed(d("5m")), on="`delay`", trigger=ast.Count(1))])


def test_sparks_named_window_clause_still_works():
    statement = check(
        "SELECT k, x, sum(x) OVER w AS running, count(*) FROM t GROUP BY k, x "
        "WINDOW FIXED(SIZE 5m) ON ts WINDOW w AS (PARTITION BY k ORDER BY x)",
        "SELECT k, x, SUM(x) OVER w AS running, COUNT(*) FROM t GROUP BY k, x "
        "WINDOW FIXED(SIZE 5m) ON ts WINDOW w AS (PARTITION BY k ORDER BY x)",
        [W(ast.Fixed(d("5m")))])
    assert [w.name for w in statement.tree.args["windows"]] == ["w"]


def test_end_of_window_closing_a_subquery_before_its_alias():
    """`END OF WINDOW) AS x` is our clause's last word, not Spark's `WINDOW w AS (...)`."""
    check("SELECT * FROM (SELECT k, count(*) AS n FROM t GROUP BY k WINDOW FIXED(SIZE 5m) ON ts "
          "OUTPUT TIMESTAMP END OF WINDOW) AS x WHERE n > 1",
          "SELECT * FROM (SELECT k, COUNT(*) AS n FROM t GROUP BY k WINDOW FIXED(SIZE 5m) ON ts "
          "OUTPUT TIMESTAMP END OF WINDOW) AS x WHERE n > 1",
          [W(ast.Fixed(d("5m")), output="END_OF_WINDOW")])
    check("SELECT k, x, sum(x) OVER w, count(*) FROM t GROUP BY k, x "
          "WINDOW FIXED(SIZE 5m) ON ts OUTPUT TIMESTAMP START OF WINDOW WINDOW w AS (PARTITION BY k)",
          "SELECT k, x, SUM(x) OVER w, COUNT(*) FROM t GROUP BY k, x "
          "WINDOW FIXED(SIZE 5m) ON ts OUTPUT TIMESTAMP START OF WINDOW WINDOW w AS (PARTITION BY k)",
          [W(ast.Fixed(d("5m")), output="START_OF_WINDOW")])


def test_sparks_named_window_before_ours():
    check("SELECT k, x, sum(x) OVER w, count(*) FROM t GROUP BY k, x WINDOW w AS (PARTITION BY k) "
          "WINDOW GLOBAL ON ts TRIGGER COUNT 5",
          "SELECT k, x, SUM(x) OVER w, COUNT(*) FROM t GROUP BY k, x WINDOW GLOBAL ON ts TRIGGER COUNT 5 "
          "WINDOW w AS (PARTITION BY k)",
          [W(ast.Global(), trigger=ast.Count(5))])


def test_group_by_sparks_window_function_first():
    statement = check(
        "SELECT window.start, k, count(*) FROM t GROUP BY window(ts, '5 minutes'), k WINDOW GLOBAL ON ts",
        "SELECT window.start, k, COUNT(*) FROM t GROUP BY WINDOW(ts, '5 minutes'), k WINDOW GLOBAL ON ts",
        [W(ast.Global())])
    assert statement.tree.args["group"].expressions[0].name.lower() == "window"


def test_lowercase_everything():
    check("select user_id, sum(amount) as total from events watermark event_time delay of interval 5 minutes "
          "group by user_id window sessions(gap 30m) trigger repeat(watermark) emit discarding",
          "SELECT user_id, SUM(amount) AS total FROM events WATERMARK event_time DELAY OF INTERVAL 5 MINUTES "
          "GROUP BY user_id WINDOW SESSIONS(GAP 30m) TRIGGER REPEAT(WATERMARK) EMIT DISCARDING",
          [ast.Windowing(ast.WindowClause(ast.Sessions(d("30m"))), ast.Repeat(WM), emit=ast.Emit(A.DISCARDING))],
          [ast.SourceWatermark("event_time", ast.BoundedDelay(d("5m")))])


def test_insert_and_create_view_around_a_windowed_select():
    check("INSERT INTO totals SELECT k, count(*) FROM t GROUP BY k WINDOW FIXED(SIZE 1m) ON ts",
          "INSERT INTO totals SELECT k, COUNT(*) FROM t GROUP BY k WINDOW FIXED(SIZE 1m) ON ts",
          [W(ast.Fixed(d("1m")))])
    check("CREATE TEMPORARY VIEW v AS SELECT k, count(*) FROM t GROUP BY k WINDOW FIXED(SIZE 1m) ON ts",
          "CREATE TEMPORARY VIEW v AS SELECT k, COUNT(*) FROM t GROUP BY k WINDOW FIXED(SIZE 1m) ON ts",
          [W(ast.Fixed(d("1m")))])


def test_pretty_printing_puts_each_clause_on_its_line():
    statement = parse(CARD)
    assert to_sql(statement, pretty=True).splitlines()[-4:] == [
        "  user_id",
        "WINDOW SESSIONS(GAP 30m)",
        "TRIGGER SEQUENCE(REPEAT_UNTIL(PERIOD 1m, WATERMARK), REPEAT(WATERMARK))",
        "EMIT ACCUMULATING AND RETRACTING",
    ]


# --------------------------------------------------------------------------- plain Spark SQL

PLAIN = [
    "SELECT 1",
    "SELECT * FROM t WHERE x > 1;",
    "SELECT k, count(*) FROM events WATERMARK ts DELAY OF INTERVAL 1 MINUTE GROUP BY window(ts, '5 minutes'), k",
    "SELECT * FROM STREAM(events) WATERMARK ts DELAY OF INTERVAL 10 SECONDS AS e",
    "SELECT * FROM STREAM events",
    "SELECT k, sum(x) OVER w FROM t WINDOW w AS (PARTITION BY k)",
    "SELECT window, trigger, emit, allowed FROM t window WHERE emit > 0",
    "  SELECT 'WINDOW GLOBAL' -- EMIT DISCARDING\n  ;  ",
    "SELECT a FROM t x y z (( that sqlglot cannot read",
    "CREATE TABLE t (window STRING, emit INT) USING parquet",
    # our keywords as Spark identifiers
    "SELECT session_window.start, count(*) FROM t GROUP BY session_window(ts, '5 minutes')",
    "SELECT count(*) AS window FROM t GROUP BY k ORDER BY window",
    "SELECT x FROM t window, u",
    "SELECT trigger.x FROM t AS trigger JOIN u ON trigger.k = u.k WHERE trigger = 'x' AND emit > 0",
    "SELECT * FROM t watermark JOIN u ON watermark.k = u.k",
    "SELECT * FROM t window TABLESAMPLE (10 ROWS)",
    "SELECT * FROM t window PIVOT (sum(x) FOR y IN (1, 2))",
    "SELECT * FROM t emit WHERE emit.discarding = 1",
    "SELECT allowed, lateness, global, fixed, sessions FROM t allowed",
    "INSERT INTO window VALUES (1, 2)",
]


@pytest.mark.parametrize("sql", PLAIN)
def test_plain_spark_sql_passes_through_unchanged(sql):
    statement = parse(sql)
    assert statement.is_plain
    assert statement.sql == sql
    assert to_sql(statement) == sql
    assert statement.windowed_selects() == []
    assert parse(to_sql(statement)) == statement


def test_plain_sparks_watermark_clause_is_still_visible():
    statement = parse("SELECT * FROM events WATERMARK ts DELAY OF INTERVAL 1 MINUTE AS e")
    assert statement.is_plain
    (node, watermark), = statement.source_watermarks()
    assert node.alias == "e" and watermark == ast.SourceWatermark("ts", ast.BoundedDelay(d("1m")))


def test_a_plain_statement_sqlglot_cannot_read_has_no_tree():
    statement = parse("SELECT a FROM t x y z")
    assert statement.is_plain and statement.tree is None


@pytest.mark.parametrize("clause", ["PERFECT ARRIVAL arr", "TIMELINE steps ARRIVAL arr",
                                    "DELAY OF INTERVAL 1 MINUTE ARRIVAL arr", "DELAY OF 1m"])
def test_sqlflows_watermark_forms_make_a_statement_sqlflow(clause):
    assert not parse(f"SELECT * FROM events WATERMARK ts {clause}").is_plain


def test_sparks_watermark_with_a_short_duration_prints_as_sparks_own_and_round_trips():
    statement = parse("SELECT * FROM events WATERMARK ts DELAY OF 1m e")
    printed = to_sql(statement)
    assert printed == "SELECT * FROM events WATERMARK ts DELAY OF INTERVAL 1 MINUTE AS e"
    again = parse(printed)
    assert (statement.is_plain, again.is_plain) == (False, True)  # Spark reads the printed text
    assert again == statement
    assert [w for _, w in again.source_watermarks()] == [ast.SourceWatermark("ts", ast.BoundedDelay(d("1m")))]
    assert parse("SELECT * FROM events WATERMARK ts DELAY OF 2m e") != statement


# --------------------------------------------------------------------------- scripts


def test_scripts_split_on_semicolons_outside_strings_and_comments():
    script = ("SELECT ';' AS semi; -- a comment; with a semicolon\n"
              "SELECT k, count(*) FROM t GROUP BY k WINDOW GLOBAL ON ts /* ; */ TRIGGER COUNT 1;\n"
              ";\n"
              "SELECT \"a;b\"")
    statements = parse_script(script)
    assert [s.sql for s in statements] == [
        "SELECT ';' AS semi",
        "-- a comment; with a semicolon\nSELECT k, count(*) FROM t GROUP BY k WINDOW GLOBAL ON ts /* ; */ TRIGGER COUNT 1",
        'SELECT "a;b"',
    ]
    assert [s.is_plain for s in statements] == [True, False, True]
    (_, windowing), = statements[1].windowed_selects()
    assert windowing.trigger.pos == ast.Position(2, 74)  # positions are in the whole script


def test_sql_scripting_blocks_are_one_statement():
    statements = parse_script("BEGIN SELECT 1; SELECT 2; END; SELECT 3")
    assert [s.sql for s in statements] == ["BEGIN SELECT 1; SELECT 2; END", "SELECT 3"]


def test_an_empty_script_has_no_statements():
    assert parse_script("  -- nothing\n ; ;") == []


# --------------------------------------------------------------------------- the language reference


def test_every_sql_example_in_the_language_reference_parses(repo_root):
    import re

    text = (repo_root / "grammar" / "README.md").read_text(encoding="utf-8")
    examples = re.findall(r"```sql\n(.*?)```", text, flags=re.S)
    assert len(examples) >= 10
    for sql in examples:
        statement = parse(sql)
        assert not statement.is_plain, sql
        assert parse(to_sql(statement)) == statement
