"""The main job (`python -m sqlflow.demo`) and the window-assignment SQL functions of
`sqlflow.register(spark)`."""
import datetime as dt

import numpy as np
import pandas as pd
import pytest

import sqlflow
from sqlflow import demo


def test_bundled_clickstream_is_the_generated_one():
    bundled = pd.read_csv(demo.clickstream_path())
    assert len(bundled) == 2000 and bundled["user_id"].nunique() == 60
    pd.testing.assert_frame_equal(bundled, demo.generate_clickstream().reset_index(drop=True), check_dtype=False)


def test_demo_reports(spark):
    lines = []
    report = demo.sessions_report(spark, out=lines.append)
    text = "\n".join(lines)
    assert "path: engine (no native rewrite: its input is replayed (ARRIVAL arrival_time)" in text
    assert "retract" in text
    m = report["metrics"]
    assert m["input_rows"] == 2000 and m["retractions"] > 0 and m["dropped_too_late"] > 0
    # retractions applied downstream: every click that was not too late is in exactly one final session
    assert sum(r["clicks"] for r in report["by_length"]) == 2000 - m["dropped_too_late"]
    result = demo.paper_figure_14(spark, out=lines.append)
    assert result == {"values": [5, 7, 10, -7, -10, 25, 3, -5, -25, 39, -3, 12], "matches_paper": True}


def T(text):
    return dt.datetime.fromisoformat(f"2024-01-01 {text}")


class Halves:
    """A custom window function: two overlapping windows per element (of `minutes`)."""

    def __init__(self, minutes):
        self.size = minutes * 60_000_000

    def assign(self, t):
        start = (t // self.size) * self.size
        rows = np.repeat(np.arange(len(t)), 2)
        starts = np.repeat(start, 2) - np.tile([0, self.size // 2], len(t))
        return rows, starts, starts + self.size


def test_register_window_functions(spark):
    sqlflow.register_window_fn("halves", Halves)
    assert sqlflow.register(spark) == ["sqlflow_fixed", "sqlflow_sliding", "sqlflow_cumulate", "sqlflow_window"]
    row = spark.sql("""
        SELECT sqlflow_fixed(ts, '5m') AS fixed, sqlflow_fixed(ts, INTERVAL 10 MINUTES, '2 minutes') AS offset,
               sqlflow_sliding(ts, '10m', '5m') AS sliding, sqlflow_cumulate(ts, '1m', '3m') AS cumulate,
               sqlflow_window('halves', ts, 4) AS custom, sqlflow_fixed(CAST(NULL AS TIMESTAMP), '5m') AS none
        FROM VALUES (TIMESTAMP'2024-01-01 00:07:00') AS t(ts)""").first()

    def spans(windows):
        return [(w["start"], w["end"]) for w in windows]

    assert spans(row["fixed"]) == [(T("00:05:00"), T("00:10:00"))]
    assert spans(row["offset"]) == [(T("00:02:00"), T("00:12:00"))]
    assert spans(row["sliding"]) == [(T("00:00:00"), T("00:10:00")), (T("00:05:00"), T("00:15:00"))]
    assert spans(row["cumulate"]) == [(T("00:06:00"), T("00:08:00")), (T("00:06:00"), T("00:09:00"))]
    assert spans(row["custom"]) == [(T("00:04:00"), T("00:08:00")), (T("00:02:00"), T("00:06:00"))]
    assert row["none"] is None


def test_window_functions_agree_with_the_windowed_select(spark):
    sqlflow.register(spark)
    spark.sql("""CREATE OR REPLACE TEMP VIEW pings AS SELECT * FROM VALUES
        ('a', TIMESTAMP'2024-01-01 00:00:10'), ('a', TIMESTAMP'2024-01-01 00:04:59'),
        ('b', TIMESTAMP'2024-01-01 00:05:00'), ('b', TIMESTAMP'1969-12-31 23:58:00') AS t(k, ts)""")
    plain = spark.sql("""SELECT k, w.start AS window_start, w.end AS window_end, COUNT(*) AS n
        FROM pings LATERAL VIEW explode(sqlflow_sliding(ts, '6m', '4m')) AS w GROUP BY k, w.start, w.end""")
    windowed = sqlflow.sql(spark, "SELECT k, COUNT(*) AS n FROM pings GROUP BY k WINDOW SLIDING(SIZE 6m, PERIOD 4m) ON ts")
    cols = ["k", "window_start", "window_end", "n"]
    assert sorted(plain.select(*cols).collect()) == sorted(windowed.select(*cols).collect())


def test_unknown_custom_window_function(spark):
    sqlflow.register(spark)
    with pytest.raises(Exception, match="unknown window function nope"):
        spark.sql("SELECT sqlflow_window('nope', TIMESTAMP'2024-01-01 00:00:00')").collect()


class Span:
    """A custom window function taking a duration: tumbling windows of `size` microseconds."""

    def __init__(self, size):
        self.size = size

    def assign(self, t):
        start = (t // self.size) * self.size
        return np.arange(len(t)), start, start + self.size


def test_an_interval_argument_reaches_a_custom_window_function_as_in_the_clause(spark):
    sqlflow.register_window_fn("span", Span)
    sqlflow.register(spark)
    row = spark.sql("SELECT sqlflow_window('span', TIMESTAMP'2024-01-01 00:07:00', INTERVAL 4 MINUTES) AS w").first()
    assert [(w["start"], w["end"]) for w in row["w"]] == [(T("00:04:00"), T("00:08:00"))]
    windowed = sqlflow.sql(spark, "SELECT COUNT(*) AS n FROM VALUES (TIMESTAMP'2024-01-01 00:07:00') AS t(ts) "
                                  "WINDOW span(4m) ON ts")
    assert [(r.window_start, r.window_end, r.n) for r in windowed.collect()] == [(T("00:04:00"), T("00:08:00"), 1)]
