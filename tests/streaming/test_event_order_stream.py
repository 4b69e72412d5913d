"""ORDER BY the event-time column on a live stream (docs/semantics.md, 11; docs/streaming.md, 5.5).

The stream reads one file per micro-batch (a backlog, so no batch without data runs between
them); every value below is derived by hand from Spark's rule for the watermark of batch N (the
largest event time of the batches before N, minus the delay) and the ordering's rules: a row of
batch N below W(N-1) is late, a buffered row is released in the first batch whose W passes it.
The batches' processing times are the wall clock's: the tests read them from the operator's
counters (`watermark_log`, `batch_time`).
"""
from __future__ import annotations

import datetime as dt
import os
import re
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sqlflow
from sqlflow.errors import SqlflowError
from sqlflow.spark import streaming as S

DAY = dt.datetime(2024, 1, 1)


def T(seconds: float) -> dt.datetime:
    return DAY + dt.timedelta(seconds=seconds)


#: the readings of docs/semantics.md 11, one file (micro-batch) each: (id, event time in seconds)
READINGS = [[("r1", 100)], [("r2", 95)], [("r3", 112)], [("r4", 104)], [("r5", 99)], [("r6", 125)]]


def _docs_sql(n: int = 0) -> str:
    """The n-th SQL example of docs/streaming.md, 5.5 (0: over readings, 1: per device)."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "streaming.md").read_text(encoding="utf-8")
    section = text[text.index("### 5.5 Ordering a stream by event time"):text.index("## 6. The changelog")]
    sql = re.findall(r"```sql\n(.*?)```", section, re.S)[n]
    assert ("FROM readings" if n == 0 else "FROM devices") in sql
    return sql.strip()


@pytest.fixture(autouse=True)
def _finishable(rocksdb, finish_conf):
    """Every stream here runs the stateful operator and can be finished."""


_mtime = [int(time.time()) - 50_000]


def write_files(folder: Path, batches, column: str = "id") -> None:
    """One parquet file per batch of (`column`, second) rows, each file newer than the last."""
    folder.mkdir(parents=True, exist_ok=True)
    for rows in batches:
        _mtime[0] += 1
        tmp = folder.parent / f".part-{_mtime[0]}.parquet"
        pd.DataFrame({column: [i for i, _ in rows], "ts": [T(s) for _, s in rows]}) \
            .astype({"ts": "datetime64[us]"}).to_parquet(tmp, index=False)
        os.utime(tmp, (_mtime[0], _mtime[0]))
        os.replace(tmp, folder / f"part-{_mtime[0]}.parquet")


def readings(spark, folder: Path, name: str = "readings") -> None:
    spark.readStream.schema("id string, ts timestamp").option("maxFilesPerTrigger", 1).parquet(str(folder)) \
        .createOrReplaceTempView(name)


def batch_times(query) -> list[tuple[int, int | None, int]]:
    """(batch time, watermark, finished) of each batch the operator ran, in order (engine us)."""
    out = []
    for p in query.recentProgress:
        m = (p.get("observedMetrics") or {}).get("sqlflow")
        if m and m["batch_time"] is not None:
            out.append((int(m["batch_time"]), m["watermark"], int(m["finished"])))
    return out


def micros(t: dt.datetime) -> int:
    return int((t - dt.datetime(1970, 1, 1)).total_seconds() * 1_000_000)


def test_out_of_order_rows_come_out_in_event_time_order_as_the_watermark_passes(spark, tmp_path):
    write_files(tmp_path / "in", READINGS)
    readings(spark, tmp_path / "in")
    df = sqlflow.sql(spark, _docs_sql())
    assert df.isStreaming and df.columns == ["id", "ts", "emit_time"]
    query = S.start(df, format="memory", query_name="ordered_out", available_now=True, finish=True)
    out = [(r.id, r.ts, r.emit_time) for r in spark.table("ordered_out").collect()]
    log = batch_times(query)
    # six data batches, then the batch without data that moves W to 115 s, then the finish marker's
    p = [t for t, _, _ in log]
    wm = [w for _, w, _ in log]
    assert wm[1:7] == [micros(T(s)) for s in (90, 90, 102, 102, 102, 115)] and wm[7] is None
    at = [dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=t) for t in p]
    # W(3) = 102 s releases r2 (95) and r1 (100); r5 (99) arrives in batch 4 behind W(3): late;
    # W(6) = 115 s (no data) releases r4 (104) and r3 (112); the finish releases r6 (125)
    assert out == [("r2", T(95), at[3]), ("r1", T(100), at[3]), ("r4", T(104), at[6]), ("r3", T(112), at[6]),
                   ("r6", T(125), at[7])]
    metrics = S.query_metrics(query)
    assert (metrics["input_rows"], metrics["ordered_rows"], metrics["dropped_too_late"]) == (6, 5, 1)
    # the replay of the same arrivals under the stream's own watermark steps gives the same rows
    arrivals = [(i, T(s), at[b]) for b, batch in enumerate(READINGS) for i, s in batch]
    spark.createDataFrame(arrivals, "id string, ts timestamp, at timestamp").createOrReplaceTempView("recorded")
    steps = [(at[b], None if w is None else dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=w))
             for b, (_, w, _) in enumerate(log) if b > 0]
    spark.createDataFrame(steps, "proc_time timestamp, watermark timestamp").createOrReplaceTempView("steps")
    replay = sqlflow.sql(spark, "SELECT id, ts FROM recorded WATERMARK ts TIMELINE steps ARRIVAL at ORDER BY ts, id")
    assert [(r.id, r.ts, r.emit_time) for r in replay.collect()] == out
    assert [(r.id, r.reason) for r in sqlflow.dropped(replay).collect()] == [("r5", "too late")]


def test_misuse_gets_a_located_error(spark, tmp_path):
    (tmp_path / "empty").mkdir()
    readings(spark, tmp_path / "empty")
    cases = [
        ("SELECT id, ts FROM readings WATERMARK ts DELAY OF 10s ORDER BY id", "ORDER BY", 1, 64,
         "ORDER BY over a watermarked stream orders rows by event time, as the watermark passes them: its first "
         "key must be the WATERMARK column ts, not id"),
        ("SELECT id, ts FROM readings WATERMARK ts DELAY OF 10s ORDER BY ts DESC", "ORDER BY", 1, 64,
         "ORDER BY ts DESC over a watermarked stream: rows come out as the watermark passes them, in ascending "
         "event time"),
        ("SELECT r.id, ts FROM readings WATERMARK ts DELAY OF 10s AS r JOIN names n ON r.id = n.id ORDER BY ts",
         "JOIN", 1, 67, "a SELECT ordered by event time over a live stream does not take JOIN yet"),
        ("SELECT id, ts FROM readings WATERMARK ts DELAY OF 10s ORDER BY ts LIMIT 3", "LIMIT", 1, 73,
         "a SELECT ordered by event time over a live stream does not take LIMIT yet"),
    ]
    spark.createDataFrame([("r1", "one")], "id string, name string").createOrReplaceTempView("names")
    for sql, clause, line, column, message in cases:
        with pytest.raises(SqlflowError) as info:
            sqlflow.sql(spark, sql)
        assert (info.value.message, info.value.clause, info.value.line, info.value.column) == (
            message, clause, line, column), sql


def test_a_restart_from_the_checkpoint_loses_and_duplicates_nothing(spark, tmp_path):
    """The first three files, stopped (the batch without data after them moves W to 102 s and
    releases r2 and r1; r3 stays buffered), then the rest from the checkpoint: the same rows as
    one run, the late row in the dropped side output."""
    folder, out, late, checkpoint = tmp_path / "in", tmp_path / "out", tmp_path / "late", tmp_path / "cp"
    write_files(folder, READINGS[:3])
    readings(spark, folder)
    df = sqlflow.sql(spark, "SELECT id, ts FROM readings WATERMARK ts DELAY OF 10s ORDER BY ts, id")
    options = dict(format="parquet", path=str(out), dropped_path=str(late), checkpoint=str(checkpoint))
    first = S.start(df, available_now=True, **options)  # the statement's rows, and the dropped ones
    assert [(r.id, r.ts) for r in spark.read.parquet(str(out)).collect()] == [("r2", T(95)), ("r1", T(100))]
    assert [(w, f) for _, w, f in batch_times(first)][-1] == (micros(T(102)), 0)
    write_files(folder, READINGS[3:])
    second = S.start(df, available_now=True, finish=True, **options)
    written = spark.read.parquet(str(out))
    assert written.columns == ["id", "ts", "emit_time", "batch_id"]  # as start(df) writes them
    rows = written.orderBy("batch_id", "ts", "id").collect()
    assert [(r.id, r.ts) for r in rows] == [("r2", T(95)), ("r1", T(100)), ("r4", T(104)), ("r3", T(112)),
                                           ("r6", T(125))]
    assert rows[0].batch_id == rows[1].batch_id < rows[2].batch_id < rows[4].batch_id
    dropped = spark.read.parquet(str(late)).collect()
    assert [(r.id, r.event_time, r.reason) for r in dropped] == [("r5", T(99), "too late")]
    assert S.query_metrics(second)["dropped_too_late"] == 1


def write_partitioned(folder: Path, batches) -> None:
    write_files(folder, batches, column="device")


def devices(spark, folder: Path, batches) -> None:
    write_partitioned(folder, batches)
    spark.readStream.schema("device string, ts timestamp").option("maxFilesPerTrigger", 1).parquet(str(folder)) \
        .createOrReplaceTempView("devices")


def test_ascending_per_partition_on_a_stream_is_the_replay_of_its_batches(spark, tmp_path):
    """Batches A10 B3 | A8 | B9. The operator computes the watermark itself: min over the devices
    of their latest event time, 3 after batch 0, still 3 after batch 1 (A8 is behind A's 10:
    dropped), 9 after batch 2, which releases B3; the finish releases B9 and A10. The replay of
    the same rows arriving at their batches' times gives the same rows at the same instants, but
    its end of input is its last arrival (the stream's is the finish marker's batch)."""
    batches = [[("A", 10), ("B", 3)], [("A", 8)], [("B", 9)]]
    devices(spark, tmp_path / "in", batches)
    sql = _docs_sql(1).replace(" IDLE TIMEOUT 1ms", "")
    df = sqlflow.sql(spark, sql)
    assert "computed by the operator over each micro-batch" in sqlflow.explain(sql, spark)
    query = S.start(df, format="memory", query_name="per_out", available_now=True, finish=True)
    log = batch_times(query)
    at = [dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=t) for t, _, _ in log]
    assert [w for _, w, _ in log] == [micros(T(3)), micros(T(3)), micros(T(9)), None]
    out = [(r.device, r.ts, r.emit_time) for r in spark.table("per_out").collect()]
    assert out == [("B", T(3), at[2]), ("B", T(9), at[3]), ("A", T(10), at[3])]
    metrics = S.query_metrics(query)
    assert (metrics["input_rows"], metrics["ordered_rows"], metrics["dropped_behind_partition"],
            metrics["dropped_too_late"]) == (4, 3, 1, 0)
    arrivals = [(p, T(s), at[b]) for b, batch in enumerate(batches) for p, s in batch]
    spark.createDataFrame(arrivals, "device string, ts timestamp, at timestamp").createOrReplaceTempView("recorded")
    replay = sqlflow.sql(spark, sql.replace("FROM devices WATERMARK ts ASCENDING PER device",
                                            "FROM recorded WATERMARK ts ASCENDING PER device ARRIVAL at"))
    # the replay's end of input is its last arrival (batch 2), the stream's the finish (batch 3)
    assert [(r.device, r.ts, at[3] if r.emit_time == at[2] and r.ts > T(3) else r.emit_time)
            for r in replay.collect()] == out
    assert [(r.device, r.reason) for r in sqlflow.dropped(replay).collect()] == [("A", "behind its partition")]


def test_an_idle_partition_stops_holding_the_watermark_back(spark, tmp_path):
    """IDLE TIMEOUT 1ms: a device without a row in the batch is idle (batches are further apart).
    Batches A1 B0 | A12 | A25 | B2: W = 0, then 12 (B idle: releases B0, A1), then 25 (releases
    A12); B2 comes back behind W = 25: too late (not behind its partition: B's latest is 0). The
    finish releases A25. Without the timeout B holds W at 0 until B2 moves it to 2."""
    batches = [[("A", 1), ("B", 0)], [("A", 12)], [("A", 25)], [("B", 2)]]
    devices(spark, tmp_path / "in", batches)
    df = sqlflow.sql(spark, _docs_sql(1))
    query = S.start(df, format="memory", query_name="idle_out", available_now=True, finish=True)
    log = batch_times(query)
    at = [dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=t) for t, _, _ in log]
    assert [w for _, w, _ in log] == [micros(T(0)), micros(T(12)), micros(T(25)), micros(T(25)), None]
    assert [(r.device, r.ts, r.emit_time) for r in spark.table("idle_out").collect()] == [
        ("B", T(0), at[1]), ("A", T(1), at[1]), ("A", T(12), at[2]), ("A", T(25), at[4])]
    metrics = S.query_metrics(query)
    assert (metrics["dropped_too_late"], metrics["dropped_behind_partition"]) == (1, 0)


def test_columns_of_every_carried_type_come_out_exactly(spark, tmp_path):
    """BIGINTs beyond 2^53 and NULL, a NaN apart from NULL, dates, TIMESTAMP_NTZ (one that the
    session's time zone skips included), booleans and
    strings travel through the operator's Arrow bytes unchanged; a NULL event time is dropped and
    counted."""
    folder = tmp_path / "typed"
    folder.mkdir()
    frame = pd.DataFrame({
        "ts": pd.array([T(5), T(1), None], dtype="datetime64[us]"),
        "big": pd.array([2**53 + 1, None, 7], dtype="Int64"),
        "x": [0.0, 0.0, 0.0],
        "day": [dt.date(2024, 2, 29), None, dt.date(1969, 7, 20)],
        "local": pd.array([dt.datetime(2024, 3, 10, 2, 30), None, dt.datetime(1900, 1, 1)], dtype="datetime64[us]"),
        "flag": pd.array([True, None, False], dtype="boolean"),
        "s": ["é", None, ""]})
    table = pa.Table.from_pandas(frame, preserve_index=False)
    # pandas reads a NaN put in a Float64 array as NULL: the column is written with Arrow's NaN
    table = table.set_column(2, "x", pa.array([float("nan"), None, 1.5], pa.float64()))
    pq.write_table(table, folder / "part-0.parquet")
    spark.readStream.schema("ts timestamp, big bigint, x double, day date, local timestamp_ntz, flag boolean, "
                            "s string").parquet(str(folder)).createOrReplaceTempView("typed")
    # a wall-clock time that New York skips (daylight saving) travels without a time zone
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        df = sqlflow.sql(spark, "SELECT * FROM typed WATERMARK ts DELAY OF 1s ORDER BY ts")
        query = S.start(df, format="memory", query_name="typed_out", available_now=True, finish=True)
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)
    assert [f.simpleString() for f in df.schema.fields] == [
        "ts:timestamp", "big:bigint", "x:double", "day:date", "local:timestamp_ntz", "flag:boolean", "s:string",
        "emit_time:timestamp"]
    rows = [tuple(r)[:-1] for r in spark.table("typed_out").collect()]
    assert rows[0] == (T(1), None, None, None, None, None, None)
    assert rows[1][:2] == (T(5), 2**53 + 1) and rows[1][2] != rows[1][2]  # NaN
    assert rows[1][3:] == (dt.date(2024, 2, 29), dt.datetime(2024, 3, 10, 2, 30), True, "é")
    metrics = S.query_metrics(query)
    assert (metrics["input_rows"], metrics["ordered_rows"], metrics["dropped_null_event_time"]) == (3, 2, 1)


def test_a_script_inserts_the_ordered_stream_into_parquet(spark, tmp_path):
    """`INSERT INTO parquet.<path> SELECT ... ORDER BY ts` in a SQL script over a streaming view:
    started, finished and written as a windowed stream is (docs/streaming.md, 1)."""
    from sqlflow.spark.script import run_script

    write_files(tmp_path / "in", READINGS)
    run_script(spark, f"""
        SET spark.sqlflow.checkpointLocation = {tmp_path / 'cp'};
        SET spark.sqlflow.trigger = availableNow;
        SET spark.sqlflow.finish = true;
        CREATE TEMPORARY VIEW readings_script (id STRING, ts TIMESTAMP)
        USING parquet OPTIONS (path '{tmp_path / 'in'}', streaming true, maxFilesPerTrigger 1);
        INSERT INTO parquet.`{tmp_path / 'out'}`
        SELECT upper(id) AS id, ts FROM readings_script WATERMARK ts DELAY OF 10s WHERE id <> 'r4' ORDER BY ts, id;
    """)
    rows = spark.read.parquet(str(tmp_path / "out")).orderBy("emit_time", "ts").collect()
    assert [(r.id, r.ts) for r in rows] == [("R2", T(95)), ("R1", T(100)), ("R3", T(112)), ("R6", T(125))]


def test_the_partitions_survive_a_restart_from_the_checkpoint(spark, tmp_path):
    """ASCENDING PER keeps each device's latest event time in the operator's state: batches
    A10 B3 | A8, stopped (W = 3 releases nothing; A8 is behind A), then B9 from the checkpoint
    moves W to 9 (A's 10 remembered) and releases B3; the finish releases B9 and A10."""
    folder, out, late, checkpoint = tmp_path / "in", tmp_path / "out", tmp_path / "late", tmp_path / "cp"
    devices(spark, folder, [[("A", 10), ("B", 3)], [("A", 8)]])
    df = sqlflow.sql(spark, _docs_sql(1).replace(" IDLE TIMEOUT 1ms", ""))
    stream = S.pane_streams(df)[0]
    options = dict(format="parquet", path=str(out), dropped_path=str(late), checkpoint=str(checkpoint))
    S.start(stream, available_now=True, **options)
    assert spark.read.parquet(str(out)).count() == 0
    write_partitioned(folder, [[("B", 9)]])
    second = S.start(stream, available_now=True, finish=True, **options)
    rows = spark.read.parquet(str(out)).orderBy("emit_time", "ts", "device").collect()
    assert [(r.device, r.ts) for r in rows] == [("B", T(3)), ("B", T(9)), ("A", T(10))]
    assert rows[0].emit_time < rows[1].emit_time == rows[2].emit_time
    assert [(r.device, r.event_time, r.reason) for r in spark.read.parquet(str(late)).collect()] == [
        ("A", T(8), "behind its partition")]
    assert [w for _, w, _ in batch_times(second)] == [micros(T(9)), None]
