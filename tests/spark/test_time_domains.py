"""The three time domains of the Flink time design draft (docs/semantics.md, 10) over one
recorded input: event time, ingestion time and processing time window the same rows into three
different answers, the ones the note predicts.

- event time: windows by the rows' own timestamps, so the out-of-order row 2 counts in its
  event's minute; but the windows wait for the watermark (the note's "very high latencies"), and
  a row behind it is dropped (row 8, counted);
- ingestion time: windows by arrival; the ingestion watermark (the latest arrival: ingestion
  times only grow) fires a window as soon as a row arrives past its end: low latency, no row
  ever late ("a good compromise");
- processing time: windows by arrival at the operator, fired by the operator's own clock exactly
  at their end ("the fastest results"), without any ordering by the rows' timestamps.
"""
import datetime as dt
import re
from pathlib import Path

import pytest

import sqlflow
from sqlflow.errors import SqlflowSemanticError


def T(clock: str) -> dt.datetime:
    return dt.datetime.fromisoformat(f"2024-01-01 {clock}")


# (v, event time, arrival time): one recorded input
ROWS = [(1, "12:00:10", "12:00:20"),
        (2, "12:00:50", "12:01:10"),   # its event's minute is 12:00, it arrives in 12:01
        (4, "12:01:40", "12:01:30"),
        (8, "12:00:40", "12:02:05"),   # behind the event-time watermark when it arrives
        (16, "12:02:30", "12:02:40"),
        (32, "12:03:30", "12:03:35")]


def _docs_sql() -> str:
    """The example of docs/semantics.md, section 10 (the docs show what this file tests)."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "semantics.md").read_text(encoding="utf-8")
    return re.search(r"```sql\n(.*?)```", text[text.index("## 10. Time domains"):], re.S).group(1)


PROCESSING = _docs_sql()


def query(domain: str) -> str:
    assert "ON PROCESSING TIME" in PROCESSING
    return PROCESSING.replace("ON PROCESSING TIME", domain)


@pytest.fixture
def recorded(spark):
    spark.createDataFrame([("k", v, T(e), T(a)) for v, e, a in ROWS],
                          "k string, v int, ts timestamp, at timestamp").createOrReplaceTempView("recorded")


def panes(df) -> list[tuple]:
    return [(r.total, r.window_start, r.pane_timing, r.emit_time, r.output_time)
            for r in df.orderBy("emit_time", "window_start").collect()]


def end_of(clock: str) -> dt.datetime:
    return T(clock) - dt.timedelta(microseconds=1)


def test_event_time_windows_by_timestamp_and_waits_for_the_watermark(spark, recorded):
    """DELAY OF 30s: W = max event time arrived - 30s, at each arrival:

        arrival   row (ts)        W after     fires
        12:00:20  1 (12:00:10)    11:59:40
        12:01:10  2 (12:00:50)    12:00:20
        12:01:30  4 (12:01:40)    12:01:10    [12:00, 12:01) ON_TIME: 1 + 2
        12:02:05  8 (12:00:40)    12:01:10    8's window ended at 12:01 <= W: too late, dropped
        12:02:40  16 (12:02:30)   12:02:00    [12:01, 12:02) ON_TIME: 4
        12:03:35  32 (12:03:30)   12:03:00    [12:02, 12:03) ON_TIME: 16
        end of input (12:03:35):  +inf        [12:03, 12:04) ON_TIME: 32"""
    df = sqlflow.sql(spark, query(""))
    assert panes(df) == [
        (3, T("12:00:00"), "ON_TIME", T("12:01:30"), end_of("12:01:00")),
        (4, T("12:01:00"), "ON_TIME", T("12:02:40"), end_of("12:02:00")),
        (16, T("12:02:00"), "ON_TIME", T("12:03:35"), end_of("12:03:00")),
        (32, T("12:03:00"), "ON_TIME", T("12:03:35"), end_of("12:04:00")),
    ]
    assert sqlflow.metrics(df)["dropped_too_late"] == 1


def test_ingestion_time_windows_by_arrival_under_the_ingestion_watermark(spark, recorded):
    """Each row's event time is its arrival; W = the latest arrival (bounded delay 0 over
    ingestion times, which only grow: no row is late). A window fires at the first arrival at or
    after its end:

        arrival   row    W after     fires
        12:00:20  1      12:00:20
        12:01:10  2      12:01:10    [12:00, 12:01) ON_TIME: 1
        12:01:30  4      12:01:30
        12:02:05  8      12:02:05    [12:01, 12:02) ON_TIME: 2 + 4
        12:02:40  16     12:02:40
        12:03:35  32     12:03:35    [12:02, 12:03) ON_TIME: 8 + 16
        end of input (12:03:35)      [12:03, 12:04) ON_TIME: 32
    output_time is END OF WINDOW in ingestion time (what a later stage would window)."""
    df = sqlflow.sql(spark, query("ON INGESTION TIME"))
    assert panes(df) == [
        (1, T("12:00:00"), "ON_TIME", T("12:01:10"), end_of("12:01:00")),
        (6, T("12:01:00"), "ON_TIME", T("12:02:05"), end_of("12:02:00")),
        (24, T("12:02:00"), "ON_TIME", T("12:03:35"), end_of("12:03:00")),
        (32, T("12:03:00"), "ON_TIME", T("12:03:35"), end_of("12:04:00")),
    ]
    assert sqlflow.metrics(df)["dropped_too_late"] == 0


def test_processing_time_windows_by_arrival_and_fires_on_the_operators_clock(spark, recorded):
    """The same windows of arrivals as ingestion time, but the operator's clock (W(p) = p) fires
    each exactly at its end, whether a row arrives then or not; after the last arrival the clock
    runs on to the end of the last window (12:04)."""
    df = sqlflow.sql(spark, PROCESSING)
    assert panes(df) == [
        (1, T("12:00:00"), "ON_TIME", T("12:01:00"), end_of("12:01:00")),
        (6, T("12:01:00"), "ON_TIME", T("12:02:00"), end_of("12:02:00")),
        (24, T("12:02:00"), "ON_TIME", T("12:03:00"), end_of("12:03:00")),
        (32, T("12:03:00"), "ON_TIME", T("12:04:00"), end_of("12:04:00")),
    ]
    m = sqlflow.metrics(df)
    assert (m["input_rows"], m["dropped_too_late"]) == (6, 0)


def test_early_firings_follow_the_domain(spark, recorded):
    """EARLY COUNT 2 on processing time: [12:01, 12:02)'s two rows fire it early at 12:01:30 and
    its end fires nothing more (no new row); [12:02, 12:03) likewise at 12:02:40, EARLY."""
    df = sqlflow.sql(spark, PROCESSING.replace("ON PROCESSING TIME", "ON PROCESSING TIME TRIGGER WATERMARK EARLY COUNT 2"))
    assert [(r[0], r[1], r[2], r[3]) for r in panes(df)] == [
        (1, T("12:00:00"), "ON_TIME", T("12:01:00")),
        (6, T("12:01:00"), "EARLY", T("12:01:30")),
        (24, T("12:02:00"), "EARLY", T("12:02:40")),
        (32, T("12:03:00"), "ON_TIME", T("12:04:00")),
    ]


def test_explain_says_what_the_window_reads(spark, recorded):
    text = sqlflow.explain(PROCESSING, spark)
    assert ("replay of ARRIVAL at, on PROCESSING TIME: each row's time is its arrival, and the operator's clock is "
            "the watermark (a window fires when processing time reaches its end); the source's event-time "
            "watermark (DELAY OF 30s on ts) is not used") in text


def test_bounded_data_has_no_processing_time(spark, recorded):
    with pytest.raises(SqlflowSemanticError) as info:
        sqlflow.sql(spark, "SELECT k, SUM(v) AS total FROM recorded GROUP BY k WINDOW FIXED(SIZE 1m) ON INGESTION TIME")
    e = info.value
    assert (e.message, e.clause, e.line, e.column) == (
        "INGESTION TIME needs each row's arrival: bounded data without arrival times has no processing time "
        "(its rows are all there at once)", "WINDOW", 1, 77)


def test_ingestion_time_over_several_replayed_sources_is_the_latest_arrival_of_any(spark):
    """UNION ALL of two replays on ingestion time: a row of either source tells the stage the time
    of ingestion (docs/semantics.md, 10), so [12:00, 12:01) fires at a's 12:01:10 although b's
    last row came at 12:00:50 (an event-time watermark would be the minimum of the two)."""
    for name, rows in (("ingest_a", [(1, "12:00:20"), (2, "12:01:10")]),
                       ("ingest_b", [(10, "12:00:30"), (20, "12:00:50"), (40, "12:02:10")])):
        spark.createDataFrame([("k", v, T(a), T(a)) for v, a in rows],
                              "k string, v int, ts timestamp, at timestamp").createOrReplaceTempView(name)
    df = sqlflow.sql(spark, """
        SELECT k, SUM(v) AS total, window_start, pane_timing, emit_time, output_time FROM (
            SELECT * FROM ingest_a WATERMARK ts DELAY OF 1h ARRIVAL at
            UNION ALL SELECT * FROM ingest_b WATERMARK ts DELAY OF 1h ARRIVAL at) u
        GROUP BY k WINDOW FIXED(SIZE 1m) ON INGESTION TIME""")
    assert panes(df) == [
        (31, T("12:00:00"), "ON_TIME", T("12:01:10"), end_of("12:01:00")),
        (2, T("12:01:00"), "ON_TIME", T("12:02:10"), end_of("12:02:00")),
        (40, T("12:02:00"), "ON_TIME", T("12:02:10"), end_of("12:03:00")),
    ]


@pytest.mark.parametrize("downstream", ["ON PROCESSING TIME", "ON output_time"])
def test_a_window_over_a_processing_time_stage_gets_one_answer(spark, recorded, downstream):
    """Downstream `ON PROCESSING TIME` was refused with "write WINDOW ... ON output_time", and
    `ON output_time` with "write the same ON ... TIME in each": both now say what works."""
    query = ("WITH s AS (SELECT k, SUM(v) AS total FROM recorded WATERMARK ts DELAY OF 30s ARRIVAL at\n"
             "           GROUP BY k WINDOW FIXED(SIZE 1m) ON PROCESSING TIME)\n"
             f"SELECT k, SUM(total) AS total FROM s GROUP BY k WINDOW FIXED(SIZE 1h) {downstream}")
    with pytest.raises(sqlflow.SqlflowSemanticError) as info:
        sqlflow.sql(spark, query)
    e = info.value
    assert (e.clause, e.line, e.column) == ("WINDOW", 3, 74)  # after ON
    assert e.message == ("this window reads the panes of a window on PROCESSING TIME (WINDOW FIXED at line 2, column "
                         "48): only the panes of a window on EVENT TIME can be windowed again, on any time domain")
    plain = sqlflow.sql(spark, query.split("\nSELECT")[0] + "\nSELECT k, SUM(total) AS total FROM s GROUP BY k")
    assert [(r.k, r.total) for r in plain.collect()] == [("k", 63)]  # the hint's way: every pane once
