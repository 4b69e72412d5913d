"""Spark's `window()` and `session_window()` as sqlflow's native rewrite relies on them
(docs/spark-internals.md, 4; sqlflow/plan/native_rewrite.py). A PySpark upgrade that changes one of
these changes what the native path returns, so it must fail here first."""
import datetime as dt

import pytest
from pyspark.errors import AnalysisException
from pyspark.sql import functions as F

T = dt.datetime


def rows(spark, sql: str) -> list[tuple]:
    return [tuple(r) for r in spark.sql(sql).collect()]


@pytest.fixture(scope="module")
def views(spark):
    spark.sql("""CREATE OR REPLACE TEMP VIEW up_gaps AS SELECT * FROM VALUES
      ('exact',  TIMESTAMP'2024-01-01 00:00:00'), ('exact',  TIMESTAMP'2024-01-01 00:05:00'),
      ('minus1', TIMESTAMP'2024-01-01 00:00:00'), ('minus1', TIMESTAMP'2024-01-01 00:04:59.999999')
      AS t(k, ts)""")
    spark.sql("""CREATE OR REPLACE TEMP VIEW up_dynamic AS SELECT * FROM VALUES
      ('ok',   TIMESTAMP'2024-01-01 00:00:00', '5 minutes'),
      ('zero', TIMESTAMP'2024-01-01 00:00:00', '0 seconds'),
      ('neg',  TIMESTAMP'2024-01-01 00:00:00', '-5 minutes'),
      ('null', TIMESTAMP'2024-01-01 00:00:00', CAST(NULL AS STRING)),
      ('ok2',  TIMESTAMP'2024-01-01 00:00:00', '1 minute'),
      ('ok2',  TIMESTAMP'2024-01-01 00:00:30', '10 minutes')
      AS t(k, ts, gap)""")
    spark.sql("""CREATE OR REPLACE TEMP VIEW up_points AS SELECT * FROM VALUES
      (TIMESTAMP'2024-01-01 00:02:00'), (TIMESTAMP'2024-01-01 00:07:00'),
      (TIMESTAMP'2024-01-01 00:06:59.999999'), (TIMESTAMP'1969-12-31 23:58:00'),
      (TIMESTAMP'1960-01-01 00:01:00') AS t(ts)""")


def test_session_window_merges_rows_exactly_one_gap_apart(spark, views):
    """Spark merges when `next <= session end` (closed); sqlflow's sessions do not merge there."""
    assert rows(spark, "SELECT k, session_window.start, session_window.end, count(*) FROM up_gaps "
                       "GROUP BY k, session_window(ts, '5 minutes') ORDER BY k") == [
        ("exact", T(2024, 1, 1, 0, 0), T(2024, 1, 1, 0, 10), 2),
        ("minus1", T(2024, 1, 1, 0, 0), T(2024, 1, 1, 0, 9, 59, 999999), 2)]


def test_gap_minus_one_microsecond_gives_sqlflows_rule(spark, views):
    """The native rewrite's form: gap - 1 us, then 1 us added back to the end."""
    assert rows(spark, "SELECT k, session_window.start, session_window.end + INTERVAL 1 MICROSECOND, count(*) "
                       "FROM up_gaps GROUP BY k, session_window(ts, '299999999 microseconds') "
                       "ORDER BY k, session_window.start") == [
        ("exact", T(2024, 1, 1, 0, 0), T(2024, 1, 1, 0, 5), 1),
        ("exact", T(2024, 1, 1, 0, 5), T(2024, 1, 1, 0, 10), 1),
        ("minus1", T(2024, 1, 1, 0, 0), T(2024, 1, 1, 0, 9, 59, 999999), 2)]


def test_window_structs_and_names(spark, views):
    for call in ("session_window(ts, '5 minutes')", "window(ts, '10 minutes')"):
        df = spark.sql(f"SELECT {call} AS w FROM up_gaps")
        assert df.schema["w"].dataType.simpleString() == "struct<start:timestamp,end:timestamp>"
    grouped = spark.table("up_gaps").groupBy(F.session_window("ts", "5 minutes")).count()
    assert grouped.columns == ["session_window", "count"]
    assert rows(spark, "SELECT window_time(window(TIMESTAMP'2024-01-01 00:02:00', '10 minutes'))") == [
        (T(2024, 1, 1, 0, 9, 59, 999999),)]


def test_per_row_gaps_drop_zero_negative_and_null_gaps(spark, views):
    assert rows(spark, "SELECT k, session_window.start, session_window.end, count(*) FROM up_dynamic "
                       "GROUP BY k, session_window(ts, gap) ORDER BY k") == [
        ("ok", T(2024, 1, 1, 0, 0), T(2024, 1, 1, 0, 5), 1),
        ("ok2", T(2024, 1, 1, 0, 0), T(2024, 1, 1, 0, 10, 30), 2)]


def test_a_per_row_gap_must_be_a_calendar_interval(spark, views):
    """Why the rewrite turns a per-row gap into `make_interval(...)`."""
    ansi = "CASE WHEN k = 'ok' THEN INTERVAL 5 MINUTES ELSE INTERVAL 0 SECONDS END"
    with pytest.raises(AnalysisException, match="must be CalendarIntervalType, but got DayTimeIntervalType"):
        spark.sql(f"SELECT k, session_window(ts, {ansi}) AS w FROM up_dynamic GROUP BY k, w").collect()
    # a string of an ANSI interval does not parse as a gap: every row is dropped, silently
    assert rows(spark, f"SELECT k, count(*) FROM up_dynamic GROUP BY k, session_window(ts, CAST({ansi} AS STRING))") == []
    calendar = "make_interval(0, 0, 0, 0, 0, CASE WHEN k = 'ok' THEN 5 ELSE 0 END, 0)"
    assert rows(spark, f"SELECT k, session_window.start, session_window.end FROM up_dynamic "
                       f"GROUP BY k, session_window(ts, {calendar})") == [
        ("ok", T(2024, 1, 1, 0, 0), T(2024, 1, 1, 0, 5))]


def test_window_boundaries_offsets_and_times_before_1970(spark, views):
    """Half-open windows whose starts are `offset (mod slide)`, flooring correctly before 1970."""
    got = rows(spark, "SELECT ts, w.start, w.end FROM (SELECT ts, window(ts, '10 minutes', '5 minutes', "
                      "'2 minutes') AS w FROM up_points) ORDER BY ts, w.start")
    assert got == [
        (T(1960, 1, 1, 0, 1), T(1959, 12, 31, 23, 52), T(1960, 1, 1, 0, 2)),
        (T(1960, 1, 1, 0, 1), T(1959, 12, 31, 23, 57), T(1960, 1, 1, 0, 7)),
        (T(1969, 12, 31, 23, 58), T(1969, 12, 31, 23, 52), T(1970, 1, 1, 0, 2)),
        (T(1969, 12, 31, 23, 58), T(1969, 12, 31, 23, 57), T(1970, 1, 1, 0, 7)),
        (T(2024, 1, 1, 0, 2), T(2023, 12, 31, 23, 57), T(2024, 1, 1, 0, 7)),
        (T(2024, 1, 1, 0, 2), T(2024, 1, 1, 0, 2), T(2024, 1, 1, 0, 12)),
        (T(2024, 1, 1, 0, 6, 59, 999999), T(2023, 12, 31, 23, 57), T(2024, 1, 1, 0, 7)),
        (T(2024, 1, 1, 0, 6, 59, 999999), T(2024, 1, 1, 0, 2), T(2024, 1, 1, 0, 12)),
        (T(2024, 1, 1, 0, 7), T(2024, 1, 1, 0, 2), T(2024, 1, 1, 0, 12)),
        (T(2024, 1, 1, 0, 7), T(2024, 1, 1, 0, 7), T(2024, 1, 1, 0, 17))]
    # a negative start time is allowed while abs(start) < slide
    assert rows(spark, "SELECT w.start FROM (SELECT window(ts, '10 minutes', '10 minutes', '-3 minutes') AS w "
                       "FROM up_points) ORDER BY w.start") == [
        (T(1959, 12, 31, 23, 57),), (T(1969, 12, 31, 23, 57),), (T(2023, 12, 31, 23, 57),),
        (T(2023, 12, 31, 23, 57),), (T(2024, 1, 1, 0, 7),)]


@pytest.mark.parametrize("call", ["window(ts, '10 minutes', '5 minutes', '12 minutes')",  # start >= slide
                                  "window(ts, '5 minutes', '10 minutes')"])  # slide > size
def test_window_parameters_out_of_range_are_analysis_errors(spark, views, call):
    with pytest.raises(AnalysisException) as info:
        spark.sql(f"SELECT {call} FROM up_points").collect()
    assert info.value.getCondition() == "DATATYPE_MISMATCH.PARAMETER_CONSTRAINT_VIOLATION"


def test_a_null_event_time_is_in_no_window(spark):
    assert rows(spark, "SELECT window(CAST(NULL AS TIMESTAMP), '10 minutes')") == []
    assert rows(spark, "SELECT k, count(*) FROM VALUES ('n', CAST(NULL AS TIMESTAMP)) AS t(k, ts) "
                       "GROUP BY k, session_window(ts, '5 minutes')") == []
