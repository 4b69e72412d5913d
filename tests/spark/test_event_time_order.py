"""Event-time ordering and ascending per-partition watermarks through `sqlflow.sql` on replays
(docs/semantics.md, 1.2 and 11). The data are tests/engine/test_event_time_order.py's, in seconds
after midnight; every expected row is derived by hand there."""
import datetime as dt
import re
from pathlib import Path

import pytest

import sqlflow
from sqlflow.errors import SqlflowError


def T(seconds: int) -> dt.datetime:
    return dt.datetime(2024, 1, 1) + dt.timedelta(seconds=seconds)


# (id, event time, arrival): out of order, DELAY OF 10s
ROWS = [("r1", 100, 101), ("r2", 95, 102), ("r3", 112, 113), ("r4", 104, 114), ("r5", 99, 115), ("r6", 125, 126)]
# (partition, event time, arrival): B lags behind A
PARTS = [("A", 1, 1), ("A", 12, 2), ("A", 25, 3), ("A", 31, 6),
         ("B", 0, 1), ("B", 2, 4), ("B", 8, 5), ("B", 15, 7), ("B", 33, 8)]


def _docs(kind: str) -> list[str]:
    """The ```sql (or ```text) blocks of docs/semantics.md, section 11 (the docs show what this file tests)."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "semantics.md").read_text(encoding="utf-8")
    return re.findall(rf"```{kind}\n(.*?)```", text[text.index("## 11. Ordering by event time"):], re.S)


@pytest.fixture
def views(spark):
    spark.createDataFrame([(i, T(e), T(a)) for i, e, a in ROWS], "id string, ts timestamp, at timestamp") \
        .createOrReplaceTempView("readings")
    spark.createDataFrame([(p, T(e), T(a), 1) for p, e, a in PARTS],
                          "device string, ts timestamp, at timestamp, v int").createOrReplaceTempView("devices")


def test_a_replay_comes_out_in_event_time_order_as_the_watermark_passes(spark, views):
    df = sqlflow.sql(spark, _docs("sql")[0])
    assert df.columns == ["id", "ts", "emit_time"]
    shown = [line.strip("| ").split(" | ") for line in _docs("text")[0].strip().splitlines()[1:]]
    assert [[r.id, str(r.ts), str(r.emit_time)] for r in df.collect()] == shown
    assert [(r.id, r.emit_time) for r in df.collect()] == [
        ("r2", T(113)), ("r1", T(113)), ("r4", T(126)), ("r3", T(126)), ("r6", T(126))]
    metrics = sqlflow.metrics(df)
    assert (metrics["input_rows"], metrics["ordered_rows"], metrics["dropped_too_late"]) == (6, 5, 1)
    late = sqlflow.dropped(df).collect()
    assert [(r.id, r.event_time, r.arrival_time, r.reason) for r in late] == [("r5", T(99), T(115), "too late")]
    plan = sqlflow.explain("SELECT id, ts FROM readings WATERMARK ts DELAY OF 10s ARRIVAL at ORDER BY ts", spark)
    assert "the SELECT ordered by ts at line 1, column 75:" in plan
    assert "watermark DELAY OF 10s" in plan


def test_per_partition_and_global_rules_on_an_ordering(spark, views):
    per = sqlflow.sql(spark, "SELECT device, ts FROM devices WATERMARK ts ASCENDING PER device ARRIVAL at "
                             "ORDER BY ts")
    assert [(r.ts, r.emit_time) for r in per.collect()] == [
        (T(0), T(4)), (T(1), T(4)), (T(2), T(5)), (T(8), T(7)), (T(12), T(7)),
        (T(15), T(8)), (T(25), T(8)), (T(31), T(8)), (T(33), T(8))]
    glob = sqlflow.sql(spark, "SELECT device, ts FROM devices WATERMARK ts DELAY OF 0s ARRIVAL at ORDER BY ts")
    assert [(r.ts, r.emit_time) for r in glob.collect()] == [
        (T(0), T(1)), (T(1), T(2)), (T(12), T(3)), (T(25), T(6)), (T(31), T(8)), (T(33), T(8))]
    assert sorted(r.event_time for r in sqlflow.dropped(glob).collect()) == [T(2), T(8), T(15)]
    plan = sqlflow.explain("SELECT * FROM devices WATERMARK ts ASCENDING PER device IDLE TIMEOUT 5s ARRIVAL at "
                           "ORDER BY ts", spark)
    assert ("watermark ASCENDING PER device IDLE TIMEOUT 5s (each partition's watermark is its latest event "
            "time; the source's is the minimum over the partitions not idle (no row for 5s)") in plan


def test_per_partition_and_global_rules_on_windows(spark, views):
    query = _docs("sql")[1].replace("ASCENDING PER device", "{}")
    per = sqlflow.sql(spark, query.format("ASCENDING PER device")).orderBy("window_start").collect()
    assert [(r.n, r.window_start, r.emit_time) for r in per] == [
        (4, T(0), T(7)), (2, T(10), T(8)), (1, T(20), T(8)), (2, T(30), T(8))]
    glob = sqlflow.sql(spark, query.format("DELAY OF 0s"))
    assert [(r.n, r.window_start, r.emit_time) for r in glob.orderBy("window_start").collect()] == [
        (2, T(0), T(2)), (1, T(10), T(3)), (1, T(20), T(6)), (2, T(30), T(8))]
    assert sqlflow.metrics(glob)["dropped_too_late"] == 3
    plan = sqlflow.explain(query.format("ASCENDING PER device"), spark)
    assert "watermark ASCENDING PER device (each partition's watermark is its latest event time" in plan


def test_an_idle_partition_releases_the_watermark(spark):
    rows = [("A", 10, 1), ("A", 20, 2), ("A", 30, 3), ("A", 40, 20), ("B", 5, 1)]
    spark.createDataFrame([(p, T(e), T(a)) for p, e, a in rows], "p string, ts timestamp, at timestamp") \
        .createOrReplaceTempView("idle")
    df = sqlflow.sql(spark, "SELECT ts FROM idle WATERMARK ts ASCENDING PER p IDLE TIMEOUT 5s ARRIVAL at ORDER BY ts")
    assert [(r.ts, r.emit_time) for r in df.collect()] == [
        (T(5), T(6)), (T(10), T(6)), (T(20), T(6)), (T(30), T(20)), (T(40), T(20))]
    held = sqlflow.sql(spark, "SELECT ts FROM idle WATERMARK ts ASCENDING PER p ARRIVAL at ORDER BY ts")
    assert {r.emit_time for r in held.collect()} == {T(20)}


def test_a_row_behind_its_partition_is_late(spark):
    rows = [("A", 10, 1), ("A", 8, 2), ("B", 3, 1), ("B", 9, 3)]
    spark.createDataFrame([(p, T(e), T(a)) for p, e, a in rows], "p string, ts timestamp, at timestamp") \
        .createOrReplaceTempView("behind")
    df = sqlflow.sql(spark, "SELECT p, ts FROM behind WATERMARK ts ASCENDING PER p ARRIVAL at ORDER BY ts")
    assert [(r.p, r.ts, r.emit_time) for r in df.collect()] == [("B", T(3), T(3)), ("B", T(9), T(3)),
                                                                ("A", T(10), T(3))]
    assert [(r.p, r.reason) for r in sqlflow.dropped(df).collect()] == [("A", "behind its partition")]
    assert sqlflow.metrics(df)["dropped_behind_partition"] == 1


def test_per_on_a_column_the_source_does_not_have(spark, views):
    with pytest.raises(SqlflowError) as info:
        sqlflow.sql(spark, "SELECT * FROM devices WATERMARK ts ASCENDING PER sensor ARRIVAL at ORDER BY ts").collect()
    assert "sensor" in str(info.value) and info.value.line == 1


def test_windows_never_see_a_row_behind_its_partition(spark):
    rows = [("A", 10, 1), ("A", 8, 2), ("B", 3, 1), ("B", 9, 3)]
    spark.createDataFrame([(p, T(e), T(a)) for p, e, a in rows], "p string, ts timestamp, at timestamp") \
        .createOrReplaceTempView("behind_w")
    # kept: A10 (at 1), B3 (at 1), B9 (at 3); W = min(10, 3) = 3 at 1, min(10, 9) = 9 at 3, the end:
    # [0s, 10s) gets B3, B9 and [10s, 20s) A10, both emitted by the end of input at 3 (A8 is not counted)
    df = sqlflow.sql(spark, "SELECT p, COUNT(*) AS n, window_start, emit_time FROM behind_w "
                            "WATERMARK ts ASCENDING PER p ARRIVAL at AS d GROUP BY d.p WINDOW FIXED(SIZE 10s) ON ts")
    assert sorted((r.p, r.n, r.window_start, r.emit_time) for r in df.collect()) == [
        ("A", 1, T(10), T(3)), ("B", 2, T(0), T(3))]
    assert [(r.stage, r.p, r.event_time, r.reason) for r in sqlflow.dropped(df).collect()] == [
        (2, "A", T(8), "behind its partition")]
    metrics = sqlflow.metrics(df)
    assert (metrics["input_rows"], metrics["dropped_behind_partition"], metrics["dropped_too_late"]) == (3, 1, 0)


def test_on_a_live_stream_ascending_per_runs_windows_and_refuses_the_rest_where_written(spark, tmp_path):
    """A window over ASCENDING PER on a live stream runs (tests/streaming/test_partition_stream.py),
    also over a UNION ALL with another watermarked stream (tests/streaming/test_partition_union.py);
    a plain SELECT (it would have to drop its rows behind their partition) is refused at the
    clause, with a hint naming what runs."""
    spark.readStream.schema("p string, ts timestamp, v long").parquet(str(tmp_path)) \
        .createOrReplaceTempView("live")
    windowed = "SELECT p, COUNT(*) AS n FROM live WATERMARK ts ASCENDING PER p GROUP BY p WINDOW FIXED(SIZE 1m) ON ts"
    assert sqlflow.sql(spark, windowed).isStreaming
    assert "watermark ASCENDING PER p (each partition's watermark" in sqlflow.explain(windowed, spark)
    spark.conf.set("spark.sqlflow.streaming.operator", "native")  # one global watermark: refused
    try:
        with pytest.raises(SqlflowError) as info:
            sqlflow.sql(spark, windowed)
    finally:
        spark.conf.unset("spark.sqlflow.streaming.operator")
    assert info.value.message == ("spark.sqlflow.streaming.operator is native, but Spark's window aggregation keeps "
                                  "one global watermark, which cannot be ASCENDING PER partition")
    assert (info.value.clause, info.value.line, info.value.column) == ("WATERMARK", 1, 48)  # at ASCENDING
    with pytest.raises(SqlflowError) as info:
        sqlflow.sql(spark, "SELECT p, ts, v FROM live WATERMARK ts ASCENDING PER p WHERE v > 0")
    assert info.value.message == ("WATERMARK ... ASCENDING PER without WINDOW or ORDER BY is not yet run on a "
                                  "live stream")
    assert info.value.hint.startswith("window the stream (GROUP BY ... WINDOW ...) or order it by event time "
                                      "(ORDER BY ts)")
    assert (info.value.clause, info.value.line, info.value.column) == ("WATERMARK", 1, 40)  # at ASCENDING
    union = ("SELECT COUNT(*) AS n FROM (SELECT * FROM live WATERMARK ts ASCENDING PER p "
             "UNION ALL SELECT * FROM live WATERMARK ts DELAY OF 1s AS l) u WINDOW FIXED(SIZE 1m) ON ts")
    assert sqlflow.sql(spark, union).isStreaming
    assert ("watermark the minimum of 2 sources' (UNION ALL): ASCENDING PER p (each partition's watermark"
            in sqlflow.explain(union, spark))
    assert "DELAY OF 1s on ts of l, computed over the micro-batches" in sqlflow.explain(union, spark)


def test_the_readme_example(spark, capsys):
    """README.md, "Ordering a replay by event time": its Python runs and prints what the page shows."""
    text = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = text[text.index("### Ordering a replay by event time"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    shown = re.search(r"```text\n(.*?)```", section, re.S).group(1)
    spark.read.csv(sqlflow.__path__[0] + "/data/clickstream.csv", header=True, inferSchema=True) \
        .createOrReplaceTempView("clicks")
    capsys.readouterr()
    exec(code, {"sqlflow": sqlflow, "spark": spark})
    out = capsys.readouterr().out
    assert out == shown
    assert "then `1861 136 3`" in " ".join(section.split())


def test_with_another_source_the_window_takes_the_minimum_of_both(spark):
    """a: ASCENDING PER p (X: 10s at 1s, 20s at 2s; Y: 5s at 1s, 25s at 2s); b: DELAY OF 0s (30s at
    1s, 40s at 3s). a's watermark: min(10, 5) = 5 at 1s, min(20, 25) = 20 at 2s; b's: 30 at 1s, 40 at
    3s; the window's, their minimum: 5 at 1s, 20 at 2s (then the end, at 3s)."""
    spark.createDataFrame([("X", T(10), T(1)), ("X", T(20), T(2)), ("Y", T(5), T(1)), ("Y", T(25), T(2))],
                          "p string, ts timestamp, at timestamp").createOrReplaceTempView("a_parts")
    spark.createDataFrame([("Z", T(30), T(1)), ("Z", T(40), T(3))],
                          "p string, ts timestamp, at timestamp").createOrReplaceTempView("b_delay")
    df = sqlflow.sql(spark, "SELECT COUNT(*) AS n, window_start, emit_time FROM ("
                            "SELECT * FROM a_parts WATERMARK ts ASCENDING PER p ARRIVAL at "
                            "UNION ALL SELECT * FROM b_delay WATERMARK ts DELAY OF 0s ARRIVAL at) u "
                            "WINDOW FIXED(SIZE 10s) ON ts")
    assert sorted((r.window_start, r.n, r.emit_time) for r in df.collect()) == [
        (T(0), 1, T(2)), (T(10), 1, T(2)), (T(20), 2, T(3)), (T(30), 1, T(3)), (T(40), 1, T(3))]


def test_an_ordering_keeps_its_where_join_and_limit(spark, views):
    spark.createDataFrame([("r1", "one"), ("r3", "three"), ("r4", "four"), ("r6", "six")],
                          "id string, name string").createOrReplaceTempView("names")
    df = sqlflow.sql(spark, "SELECT r.id, n.name FROM readings WATERMARK ts DELAY OF 10s ARRIVAL at AS r "
                            "JOIN names n ON r.id = n.id WHERE n.name <> 'six' ORDER BY r.ts LIMIT 2")
    assert [(x.id, x.name, x.emit_time) for x in df.collect()] == [("r1", "one", T(113)), ("r4", "four", T(126))]
    assert sqlflow.metrics(df)["dropped_too_late"] == 1  # r5, judged on the source's rows


def test_explain_without_a_session_names_the_ordering():
    plan = sqlflow.explain("SELECT * FROM s WATERMARK ts ASCENDING PER d ARRIVAL at ORDER BY ts")
    assert plan.splitlines()[:3] == [
        "the SELECT ordered by ts at line 1, column 66:",
        "  path: engine (rows are buffered and emitted, in event-time order, once the watermark passes them "
        "(Flink's time design draft, 'Ordering Elements in a Stream'))",
        "  input: replay of ARRIVAL at, watermark ASCENDING PER d (each partition's watermark is its latest "
        "event time; the source's is the minimum over the partitions not idle, never moving back; a row older "
        "than its partition's latest is late (behind its partition)) (the timeline is computed when the query runs)",
    ]
