"""Bounded sessions whose aggregates combine are combined per key and gap-aligned slice before the
shuffle (sqlflow/spark/engine_path.py, lifted_rows): the same panes, dropped rows and metrics as
the engine over the single rows."""
import datetime as dt
import decimal

import pytest

import sqlflow
from sqlflow.spark import engine_path

EPOCH = dt.datetime(1970, 1, 1)
BIG = 2**62 + 1  # beyond float64's exact integers


def _ts(seconds):
    return None if seconds is None else EPOCH + dt.timedelta(seconds=seconds)


ROWS = [
    # k, v (bigint), d (decimal), s (string), ts (seconds; pre-1970 too)
    ("a", 1, "1.10", "x", -7),
    ("a", BIG, "2.25", "y", -1),      # same slice as -7 (gap 10 s: slice [-10, 0))
    ("a", None, None, None, 2),       # next slice, 3 s later: the same session
    ("a", 5, "0.01", "b", 30),        # a new session
    ("a", 7, None, "c", None),        # no event time: dropped, reported with its values
    ("b", None, None, None, 0),       # a session of NULLs only
    (None, 3, "9.99", "z", 5),        # NULL key
    (None, 4, "0.01", "a", 9),
    (None, 6, None, None, None),      # NULL key and no event time
    ("c", 2, "1.00", "m", 19),        # slice [10, 20) ...
    ("c", 2, "1.00", "n", 20),        # ... and [20, 30): one session across the slice border
]

QUERY = ("SELECT k, COUNT(*) AS n, COUNT(v) AS nv, SUM(v) AS sv, SUM(d) AS sd, MIN(s) AS lo, MAX(v) AS hi "
         "FROM combined GROUP BY k WINDOW SESSIONS(GAP 10s) ON ts")


@pytest.fixture(scope="module")
def combined(spark):
    frame = spark.createDataFrame(
        [(k, v, None if d is None else decimal.Decimal(d), s, _ts(t)) for k, v, d, s, t in ROWS],
        "k string, v bigint, d decimal(10,2), s string, ts timestamp")
    frame.createOrReplaceTempView("combined")
    return frame


def _run(spark, monkeypatch, combine: bool):
    if not combine:
        monkeypatch.setattr(engine_path, "liftable", lambda *a: False)
    df = sqlflow.sql(spark, QUERY, path="engine")
    rows = sorted(map(tuple, df.drop("pane_index", "pane_timing", "is_last", "emit_time", "output_time").collect()),
                  key=lambda r: (r[0] is None, r[0] or "", r[7]))
    dropped = sorted(map(tuple, sqlflow.dropped(df).select("k", "v", "d", "s", "reason").collect()),
                     key=lambda r: (r[0] is None, r[0] or ""))
    return df, rows, dropped, sqlflow.metrics(df)


def test_combining_is_used_and_explained(spark, combined):
    text = sqlflow.explain(QUERY, spark)
    assert "engine" in text
    assert "rows combined per key and gap-aligned slice" in text


def test_combined_rows_give_the_panes_of_single_rows(spark, combined, monkeypatch):
    df, rows, dropped, metrics = _run(spark, monkeypatch, combine=True)
    assert df.dtypes == [("k", "string"), ("n", "bigint"), ("nv", "bigint"), ("sv", "bigint"),
                         ("sd", "decimal(20,2)"), ("lo", "string"), ("hi", "bigint"),
                         ("window_start", "timestamp"), ("window_end", "timestamp"), ("pane_index", "bigint"),
                         ("pane_timing", "string"), ("is_last", "boolean"), ("emit_time", "timestamp"),
                         ("output_time", "timestamp")]
    D = decimal.Decimal
    assert rows == [
        ("a", 3, 2, 1 + BIG, D("3.35"), "x", BIG, _ts(-7), _ts(12)),
        ("a", 1, 1, 5, D("0.01"), "b", 5, _ts(30), _ts(40)),
        ("b", 1, 0, None, None, None, None, _ts(0), _ts(10)),
        ("c", 2, 2, 4, D("2.00"), "m", 2, _ts(19), _ts(30)),
        (None, 2, 2, 7, D("10.00"), "a", 4, _ts(5), _ts(19)),
    ]
    assert dropped == [("a", 7, None, "c", "null event time"), (None, 6, None, None, "null event time")]
    assert (metrics["input_rows"], metrics["panes"], metrics["dropped_null_event_time"]) == (11, 5, 2)

    _, single_rows, single_dropped, single_metrics = _run(spark, monkeypatch, combine=False)
    assert (rows, dropped) == (single_rows, single_dropped)
    assert {k: metrics[k] for k in ("input_rows", "panes", "dropped_null_event_time")} == \
        {k: single_metrics[k] for k in ("input_rows", "panes", "dropped_null_event_time")}


@pytest.mark.parametrize("query", [
    "SELECT k, AVG(v) AS a FROM combined GROUP BY k WINDOW SESSIONS(GAP 10s) ON ts",
    "SELECT k, COUNT(DISTINCT v) AS a FROM combined GROUP BY k WINDOW SESSIONS(GAP 10s) ON ts",
    "SELECT k, SUM(CAST(v AS DOUBLE)) AS a FROM combined GROUP BY k WINDOW SESSIONS(GAP 10s) ON ts",
    "SELECT k, COUNT(*) AS a FROM combined GROUP BY k WINDOW SESSIONS(GAP 10s) ON ts TRIGGER REPEAT(COUNT 2)",
    "SELECT k, COUNT(*) AS a FROM combined GROUP BY k WINDOW SESSIONS(GAP CASE WHEN v > 2 THEN INTERVAL 5 SECONDS "
    "ELSE INTERVAL 10 SECONDS END) ON ts",
])
def test_not_combined_where_it_would_change_the_result(spark, combined, query):
    text = sqlflow.explain(query, spark)
    assert "engine" in text and "rows combined" not in text
