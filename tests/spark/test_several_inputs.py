"""Several watermarked inputs feeding one window (docs/semantics.md, 9; the low-watermark article): replayed
sources as branches of a UNION ALL, each with its own ARRIVAL order and watermark model; the
window's watermark is the minimum of theirs at every processing time, and rows are judged late
against that combined watermark. A join with a table without WATERMARK keeps the source's."""
import datetime as dt
import re
from pathlib import Path

import pytest

import sqlflow
from sqlflow.errors import SqlflowUnsupportedError


def T(clock: str) -> dt.datetime:
    return dt.datetime.fromisoformat(f"2024-01-01 {clock}")


# (v, event time, arrival time) per source
A = [(1, "00:00:10", "00:00:15"), (2, "00:01:30", "00:01:35"), (4, "00:02:30", "00:02:35")]  # DELAY OF 10s
B = [(10, "00:00:20", "00:00:25"), (20, "00:01:40", "00:01:50"), (40, "00:03:00", "00:03:05")]  # DELAY OF 30s
C = [(100, "00:00:30", "00:00:35"), (200, "00:02:10", "00:02:15"), (300, "00:00:50", "00:02:50")]  # DELAY OF 1m


def _docs_sql() -> str:
    """The example of docs/semantics.md, section 9 (the docs show what this file tests)."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "semantics.md").read_text(encoding="utf-8")
    return re.search(r"```sql\n(.*?)```", text[text.index("## 9. Several inputs"):], re.S).group(1)


UNION = _docs_sql()


@pytest.fixture
def three_sources(spark):
    for name, rows in (("a", A), ("b", B), ("c", C)):
        spark.createDataFrame([("x", v, T(e), T(p)) for v, e, p in rows],
                              "k string, v int, ts timestamp, at timestamp").createOrReplaceTempView(name)


def panes(df) -> list[tuple]:
    return [(r.total, r.window_start, r.pane_timing, r.emit_time)
            for r in df.orderBy("emit_time", "window_start", "pane_index").collect()]


def test_three_sources_the_watermark_is_their_minimum(spark, three_sources):
    """Each source's watermark (max event time arrived - its delay; -inf before its first row):

        p         a (10s)   b (30s)   c (1m)    minimum
        00:00:15  00:00:00  -inf      -inf      -inf
        00:00:25  00:00:00  -0:00:10  -inf      -inf
        00:00:35  00:00:00  -0:00:10  -0:00:30  -0:00:30
        00:01:35  00:01:20  -0:00:10  -0:00:30  -0:00:30   (a alone would close [0:00, 0:01) here)
        00:01:50  00:01:20  00:01:10  -0:00:30  -0:00:30
        00:02:15  00:01:20  00:01:10  00:01:10  00:01:10   [0:00, 0:01) ON_TIME: 1 + 10 + 100
        00:02:35  00:02:20  00:01:10  00:01:10  00:01:10
        00:02:50  (c's 300 at 0:00:50 arrives behind 00:01:10: LATE, within the 5m lateness)
        00:03:05  00:02:20  00:02:30  00:01:10  00:01:10   then the end of the input: +inf

    [0:00, 0:01): ON_TIME 111 at 00:02:15, LATE 411 at 00:02:50 (accumulating, LATE COUNT 1);
    [1:00, 2:00) = 2 + 20, [2:00, 3:00) = 200 + 4, [3:00, 4:00) = 40: ON_TIME at the end, 00:03:05."""
    df = sqlflow.sql(spark, UNION)
    assert panes(df) == [
        (111, T("00:00:00"), "ON_TIME", T("00:02:15")),
        (411, T("00:00:00"), "LATE", T("00:02:50")),
        (22, T("00:01:00"), "ON_TIME", T("00:03:05")),
        (204, T("00:02:00"), "ON_TIME", T("00:03:05")),
        (40, T("00:03:00"), "ON_TIME", T("00:03:05")),
    ]
    m = sqlflow.metrics(df)
    assert (m["input_rows"], m["dropped_too_late"]) == (9, 0)


def test_one_source_alone_has_its_own_watermark(spark, three_sources):
    """Source a alone: its watermark 00:01:20 at 00:01:35 closes [0:00, 0:01) there (contrast)."""
    df = sqlflow.sql(spark, "SELECT k, SUM(v) AS total, window_start, pane_timing, emit_time "
                            "FROM a WATERMARK ts DELAY OF 10s ARRIVAL at GROUP BY k WINDOW FIXED(SIZE 1m) ON ts")
    assert panes(df) == [(1, T("00:00:00"), "ON_TIME", T("00:01:35")),
                         (2, T("00:01:00"), "ON_TIME", T("00:02:35")),
                         (4, T("00:02:00"), "ON_TIME", T("00:02:35"))]


def test_explain_names_every_source(spark, three_sources):
    text = sqlflow.explain(UNION, spark)
    assert ("  input: replay of ARRIVAL at, watermark the minimum of 3 sources' (UNION ALL): "
            "DELAY OF 10s on ts, DELAY OF 30s on ts, DELAY OF 1m on ts") in text


def test_a_join_with_a_static_table_keeps_the_source_watermark(spark, three_sources):
    """A table without WATERMARK adds columns, not time: the panes are source a's own."""
    spark.createDataFrame([("x", "gold")], "k string, tier string").createOrReplaceTempView("tiers")
    df = sqlflow.sql(spark, "SELECT t.tier, SUM(v) AS total, window_start, pane_timing, emit_time "
                            "FROM a WATERMARK ts DELAY OF 10s ARRIVAL at JOIN tiers t ON a.k = t.k "
                            "GROUP BY t.tier WINDOW FIXED(SIZE 1m) ON ts")
    assert panes(df) == [(1, T("00:00:00"), "ON_TIME", T("00:01:35")),
                         (2, T("00:01:00"), "ON_TIME", T("00:02:35")),
                         (4, T("00:02:00"), "ON_TIME", T("00:02:35"))]


def test_two_replays_joined_to_each_other_are_refused(spark, three_sources):
    with pytest.raises(SqlflowUnsupportedError) as info:
        sqlflow.sql(spark, "SELECT a.k, SUM(a.v) AS total FROM a WATERMARK ts DELAY OF 10s ARRIVAL at "
                           "JOIN b WATERMARK ts DELAY OF 30s ARRIVAL at ON a.k = b.k "
                           "GROUP BY a.k WINDOW FIXED(SIZE 1m) ON a.ts")
    assert str(info.value).splitlines()[0] == (
        "sqlflow: WATERMARK: 2 sources with ARRIVAL feed this window, not as branches of one UNION ALL: "
        "the arrival of rows of two replays joined together is unknown (line 1, column 72)")


def test_arrival_columns_named_differently_are_refused(spark, three_sources):
    spark.table("b").withColumnRenamed("at", "arrived").createOrReplaceTempView("b2")
    with pytest.raises(SqlflowUnsupportedError) as info:
        sqlflow.sql(spark, "SELECT k, SUM(v) AS total FROM (SELECT * FROM a WATERMARK ts DELAY OF 10s ARRIVAL at "
                           "UNION ALL SELECT * FROM b2 WATERMARK ts DELAY OF 30s ARRIVAL arrived) u "
                           "GROUP BY k WINDOW FIXED(SIZE 1m) ON ts")
    assert str(info.value).splitlines()[0].startswith(
        "sqlflow: WATERMARK: the replayed sources of this window name their arrival columns differently "
        "(ARRIVAL at, ARRIVAL arrived)")


def test_late_rows_are_counted_per_source(spark, three_sources):
    """Without ALLOWED LATENESS, c's 300 (event time 00:00:50, arriving at 00:02:50 behind the
    combined watermark 00:01:10) is too late for [0:00, 0:01), which closed at 00:02:15: counted
    for source c, and its dropped row names it. The other sources drop nothing."""
    df = sqlflow.sql(spark, UNION[:UNION.index(" TRIGGER")])
    m = sqlflow.metrics(df)
    assert (m["dropped_too_late"], sqlflow.late_by_source(m)) == (1, {"a": 0, "b": 0, "c": 1})
    assert [(r.source, r.v, r.reason) for r in sqlflow.dropped(df).collect()] == [("c", 300, "too late")]
    assert panes(df)[0] == (111, T("00:00:00"), "ON_TIME", T("00:02:15"))
