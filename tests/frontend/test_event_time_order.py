"""The frontend of event-time ordering and of per-partition ascending watermarks: what parses,
how it prints back, and the located errors for misuse (docs/semantics.md, 1.2 and 11)."""
from __future__ import annotations

import pytest

from sqlflow import ast
from sqlflow.errors import SqlflowSemanticError, SqlflowSyntaxError
from sqlflow.frontend import parse, to_sql
from sqlflow.frontend.ordering import event_time_orders

from .test_errors import expect


@pytest.mark.parametrize("sql, partition, idle", [
    ("SELECT * FROM t WATERMARK ts ASCENDING PER device ARRIVAL at", "device", None),
    ("SELECT * FROM t WATERMARK ts ascending per d.`dev ice` IDLE TIMEOUT 5m ARRIVAL at", "d.`dev ice`",
     300_000_000),
    ("SELECT * FROM t WATERMARK ts ASCENDING PER p IDLE TIMEOUT INTERVAL 90 SECONDS AS a", "p", 90_000_000),
])
def test_ascending_per_parses_and_prints_back(sql, partition, idle):
    statement = parse(sql)
    (_, w), = statement.source_watermarks()
    assert isinstance(w.model, ast.AscendingPer)
    assert w.model.partition == partition
    assert (w.model.idle_timeout.micros if w.model.idle_timeout else None) == idle
    assert parse(to_sql(statement)) == statement


def test_the_partition_column_is_located():
    (_, w), = parse("SELECT * FROM t WATERMARK ts ASCENDING PER device ARRIVAL at").source_watermarks()
    assert (w.model.partition_pos.line, w.model.partition_pos.column) == (1, 44)


def test_an_idle_timeout_that_is_not_a_duration():
    expect("SELECT * FROM t WATERMARK ts ASCENDING PER device IDLE TIMEOUT 5 ARRIVAL at", SqlflowSyntaxError, """
        sqlflow: WATERMARK: expected a duration (like 30m or INTERVAL 5 MINUTES), got '5' (line 1, column 64)
          SELECT * FROM t WATERMARK ts ASCENDING PER device IDLE TIMEOUT 5 ARRIVAL at
                                                                         ^
        """)


def test_an_idle_timeout_that_is_not_positive():
    expect("SELECT * FROM t WATERMARK ts ASCENDING PER device IDLE TIMEOUT 0s ARRIVAL at", SqlflowSemanticError, """
        sqlflow: WATERMARK: the idle timeout must be positive, not 0s: a partition is idle after that much processing time without a row (line 1, column 64)
          SELECT * FROM t WATERMARK ts ASCENDING PER device IDLE TIMEOUT 0s ARRIVAL at
                                                                         ^
        e.g. IDLE TIMEOUT 5m
        """)


def test_ascending_without_per():
    expect("SELECT * FROM t WATERMARK ts ASCENDING device ARRIVAL at", SqlflowSyntaxError, """
        sqlflow: WATERMARK: expected PER, got 'device' (line 1, column 40)
          SELECT * FROM t WATERMARK ts ASCENDING device ARRIVAL at
                                                 ^
        """)


def test_order_by_the_event_time_of_a_replay_is_an_ordering():
    statement = parse("SELECT id, ts AS t FROM s WATERMARK ts DELAY OF 1m ARRIVAL at ORDER BY t, id DESC")
    (order,) = event_time_orders(statement)
    assert order.replay and order.watermark.event_time == "ts"
    assert [k.sql() for k in order.tie_breakers] == ["id DESC"]


@pytest.mark.parametrize("sql", [
    "SELECT * FROM s WATERMARK ts DELAY OF 1m ARRIVAL at",                               # no ORDER BY
    "SELECT k, COUNT(*) FROM s WATERMARK ts DELAY OF 1m ARRIVAL at GROUP BY k ORDER BY k",  # aggregating
    "SELECT COUNT(*) AS n FROM s WATERMARK ts DELAY OF 1m ARRIVAL at ORDER BY n",
    "SELECT * FROM (SELECT * FROM s WATERMARK ts DELAY OF 1m ARRIVAL at) ORDER BY v",    # not directly
])
def test_what_is_not_an_ordering(sql):
    assert event_time_orders(parse(sql)) == []


def test_order_by_another_column_of_a_replay():
    expect("SELECT * FROM s WATERMARK ts DELAY OF 1m ARRIVAL at ORDER BY v, ts", SqlflowSemanticError, """
        sqlflow: ORDER BY: ORDER BY over a replay orders rows by event time, as the watermark passes them: its first key must be the WATERMARK column ts, not v (line 1, column 62)
          SELECT * FROM s WATERMARK ts DELAY OF 1m ARRIVAL at ORDER BY v, ts
                                                                       ^
        write ORDER BY ts, <tie-breakers>; to sort the recorded rows as a table, drop ARRIVAL (bounded data keeps Spark's ORDER BY)
        """)


def test_order_by_event_time_descending():
    expect("SELECT * FROM s WATERMARK ts ASCENDING PER d ARRIVAL at ORDER BY ts DESC", SqlflowSemanticError, """
        sqlflow: ORDER BY: ORDER BY ts DESC over a replay: rows come out as the watermark passes them, in ascending event time (line 1, column 66)
          SELECT * FROM s WATERMARK ts ASCENDING PER d ARRIVAL at ORDER BY ts DESC
                                                                           ^
        write ORDER BY ts (ascending), or sort the result afterwards
        """)


def test_bounded_data_keeps_any_order_by():
    """Without ARRIVAL the ORDER BY is no replay's and not by event time: Spark's plain sort."""
    for text in ("SELECT * FROM s WATERMARK ts DELAY OF 1m ORDER BY v",
                 "SELECT * FROM s WATERMARK ts ASCENDING PER d ORDER BY v DESC"):
        assert [o.replay for o in event_time_orders(parse(text))] == [False]


def test_spark_own_watermark_ordered_by_its_column_is_sqlflow_s():
    """Spark's own `DELAY OF INTERVAL ...` alone leaves a statement plain Spark SQL, unless an
    ORDER BY starts with its column: an ordering by event time, which sqlflow runs on a stream
    (Spark refuses to sort one) and hands to Spark's sort on bounded data."""
    from sqlflow.frontend.statement import parse_statement

    spark_form = "SELECT * FROM s WATERMARK ts DELAY OF INTERVAL 10 SECONDS"
    assert parse_statement(spark_form).is_plain
    assert parse_statement(spark_form + " ORDER BY v, ts").is_plain
    for text in (spark_form + " ORDER BY ts, v", spark_form + " AS r ORDER BY r.ts",
                 "SELECT * FROM s WATERMARK `ts` DELAY OF INTERVAL 1 MINUTE ORDER BY `TS`"):
        statement = parse_statement(text)
        assert not statement.is_plain and len(event_time_orders(statement)) == 1, text
