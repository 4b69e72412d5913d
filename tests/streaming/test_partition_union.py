"""A window over a live UNION ALL of a `WATERMARK ts ASCENDING PER device` stream and a `DELAY OF`
stream (docs/semantics.md 1.2 and 9; docs/streaming.md 5.5, "A UNION ALL with other watermarked
streams"), on both executors.

Per micro-batch, one file of each source: `devices` (A fast, B lagging; A5 behind A's 25) and
`gateways` (DELAY OF 5s; G6 arrives after [0, 10) closed), event times in seconds:

    batch  devices        gateways
    0      A1 B0          G3
    1      A12            G14
    2      A25 B2         G27
    3      B8 A5          G30
    4      B15            G35
    5      A31 B33        G6

W(N) = min(the devices' (the minimum latest over the devices not idle, never back), the
gateways' (their largest event time of the batches before N - 5s)); a row of batch N is judged
against W(N-1); a window fires when W >= its end; the finish ends the input. Every value below is
derived by hand (tests/streaming/test_partition_step.py steps the same batches without Spark).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import sqlflow
from sqlflow.spark import streaming as S
from sqlflow.spark.streaming import owned
from sqlflow.time import NEG_INF, POS_INF
from tests.partition_input import T, at, panes_by_batch, write_files

DEVICES = [[("A", 1), ("B", 0)], [("A", 12)], [("A", 25), ("B", 2)], [("B", 8), ("A", 5)], [("B", 15)],
           [("A", 31), ("B", 33)]]
GATEWAYS = [[("G", 3)], [("G", 14)], [("G", 27)], [("G", 30)], [("G", 35)], [("G", 6)]]


def _docs_sql() -> str:
    """The example of docs/streaming.md 5.5, "A UNION ALL with other watermarked streams"."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "streaming.md").read_text(encoding="utf-8")
    section = text[text.index("**A UNION ALL with other watermarked streams.**"):text.index("## 6. The changelog")]
    return re.findall(r"```sql\n(.*?)```", section, re.S)[0].strip()


SQL = _docs_sql()


@pytest.fixture(autouse=True)
def _finishable(rocksdb, finish_conf):
    """Every stream here runs a stateful operator and can be finished."""


def sources(spark, folder: Path, batches=slice(None)) -> None:
    """The two streams as views `devices` and `gateways`, one file per micro-batch each."""
    for name, rows in (("devices", DEVICES), ("gateways", GATEWAYS)):
        write_files(folder / name, rows[batches])
        spark.readStream.schema("device string, ts timestamp").option("maxFilesPerTrigger", 1) \
            .parquet(str(folder / name)).createOrReplaceTempView(name)


def replay_sources(spark, times: list[int], skip=None) -> None:
    """The rows as recorded views `rdevices` and `rgateways`, each arriving (column `at`) at its
    batch's time (`times`), but the row `skip`."""
    for name, rows in (("rdevices", DEVICES), ("rgateways", GATEWAYS)):
        spark.createDataFrame([(d, T(s), at(times[b])) for b, batch in enumerate(rows) for d, s in batch
                               if (d, s) != skip], "device string, ts timestamp, at timestamp") \
            .createOrReplaceTempView(name)


def seconds(values) -> list:
    """Watermarks as seconds of the day (None: none yet, "inf": the finish)."""
    return [None if w == NEG_INF else "inf" if w == POS_INF else int((at(w) - T(0)).total_seconds()) for w in values]


def test_the_lagging_device_and_the_gateways_hold_the_window_on_the_operators(spark, tmp_path):
    """On the operators (a `sqlflow.sql` result, `start`'s default executor). W after each batch:
    none, -2 (the gateways: 3 - 5), 2 (B), 8 (B), 15 (B), 30 (the gateways: 35 - 5). [0, 10)
    (A1 B0 G3 B2 B8) fires at batch 4, [10, 20) (A12 G14 B15) and [20, 30) (A25 G27) at batch 5,
    [30, 40) (G30 A31 B33 G35) at the finish. A5 is dropped behind its partition in batch 3, G6
    too late in batch 5 (W(4) = 15 passed [0, 10)), each listed with its source. The ARRIVAL
    replay of the same rows at their batches' times gives the same panes but for its end of input,
    its last arrival (batch 5)."""
    sources(spark, tmp_path)
    assert ("input: stream, watermark the minimum of 2 sources' (UNION ALL): ASCENDING PER device "
            in sqlflow.explain(SQL, spark))
    counts = sqlflow.sql(spark, SQL)
    query = S.start(counts, format="parquet", path=str(tmp_path / "out"), dropped_path=str(tmp_path / "dropped"),
                    checkpoint=str(tmp_path / "cp"), available_now=True, finish=True)
    times = [int(p["observedMetrics"]["sqlflow"]["batch_time"]) for p in query.recentProgress]
    assert len(times) == 7  # six batches of data, the finish marker's
    assert seconds(w for _, w in S.watermark_log(query)) == [-2, 2, 8, 15, 30, "inf"]
    written = spark.read.parquet(str(tmp_path / "out")).collect()
    assert panes_by_batch(written, times) == [(2, 20, "ON_TIME", 5), (3, 10, "ON_TIME", 5), (4, 30, "ON_TIME", 6),
                                              (5, 0, "ON_TIME", 4)]
    assert sorted((r.event_time, r.reason, r.window_start, r.emit_time, r.source, r.batch_id)
                  for r in spark.read.parquet(str(tmp_path / "dropped")).collect()) == [
        (T(5), "behind its partition", None, at(times[3]), "devices", 3),
        (T(6), "too late", T(0), at(times[5]), "gateways", 5)]
    metrics = S.query_metrics(query)
    assert (metrics["input_rows"], metrics["dropped_behind_partition"], metrics["dropped_too_late"],
            S.late_by_source(metrics)) == (16, 1, 1, {"devices": 0, "gateways": 1})
    replay_sources(spark, times)  # the replay of the same arrivals
    replay = sqlflow.sql(spark, SQL.replace("FROM devices", "FROM rdevices").replace("FROM gateways", "FROM rgateways")
                         .replace("ASCENDING PER device", "ASCENDING PER device ARRIVAL at")
                         .replace("DELAY OF 5s", "DELAY OF 5s ARRIVAL at"))
    assert panes_by_batch(replay.collect(), times) == [(2, 20, "ON_TIME", 5), (3, 10, "ON_TIME", 5),
                                                       (4, 30, "ON_TIME", 5), (5, 0, "ON_TIME", 4)]
    assert sorted((r.event_time, r.reason) for r in sqlflow.dropped(replay).collect()) == [
        (T(5), "behind its partition"), (T(6), "too late")]


def test_the_owned_executor_restarts_and_an_idle_device_releases_the_window(spark, tmp_path):
    """The owned-sink executor, devices under IDLE TIMEOUT 1ms (a device without a row in a batch
    is idle), stopped after three batches and started again on the same checkpoint. The devices'
    W: 0, 12 (B idle), 12 (min(25, 2) is below it: never back), 12 (A's only row is behind: A
    idle; B's 8), 15, 31; the gateways': none, -2, 9, 22, 25, 30; W(N): none, -2, 9, 12, 15, 30.
    So [0, 10) fires at batch 3 (a batch earlier than without the timeout, where B's 8 holds
    it), [10, 20) and [20, 30) at batch 5, [30, 40) at the finish; A5 and G6 dropped as on the
    operators. The TIMELINE replay of the stream's watermark log over the rows but A5 (dropped
    before the window) gives the same panes."""
    folder = tmp_path / "in"
    sources(spark, folder, slice(0, 3))
    sql = SQL.replace("ASCENDING PER device", "ASCENDING PER device IDLE TIMEOUT 1ms")
    counts = sqlflow.sql(spark, sql)
    options = dict(format="parquet", path=str(tmp_path / "out"), dropped_path=str(tmp_path / "dropped"),
                   checkpoint=str(tmp_path / "cp"), executor="owned")
    first = S.start(counts, available_now=True, **options)
    assert seconds(w for _, w in owned.run_of(first).log) == [None, -2, 9]
    sources(spark, folder, slice(3, None))
    second = S.start(sqlflow.sql(spark, sql), available_now=True, finish=True, **options)
    log = owned.run_of(second).log  # the whole stream's (kept in the state's bookkeeping)
    times = [p for p, _ in log]
    # the finish marker's batch logs the step its rows (none) make; its end of input follows it
    assert seconds(w for _, w in log) == [None, -2, 9, 12, 15, 30, 30]
    written = spark.read.parquet(str(tmp_path / "out")).collect()
    panes = panes_by_batch(written, times)
    assert panes == [(2, 20, "ON_TIME", 5), (3, 10, "ON_TIME", 5), (4, 30, "ON_TIME", 6), (5, 0, "ON_TIME", 3)]
    # the TIMELINE replay of the stream's own watermark log over the rows that reached the window
    spark.createDataFrame(S.watermark_log(second), "p long, w long") \
        .selectExpr("timestamp_micros(p) AS proc_time", "timestamp_micros(w) AS watermark") \
        .createOrReplaceTempView("union_log")
    replay_sources(spark, times, skip=("A", 5))
    replay = sqlflow.sql(spark, SQL.replace("FROM devices", "FROM rdevices").replace("FROM gateways", "FROM rgateways")
                         .replace("ASCENDING PER device", "TIMELINE union_log ARRIVAL at")
                         .replace("DELAY OF 5s", "TIMELINE union_log ARRIVAL at"))
    assert panes_by_batch(replay.collect(), times) == panes
    assert sorted((r.event_time, r.reason, r.window_start, r.emit_time, r.source, r.batch_id)
                  for r in spark.read.parquet(str(tmp_path / "dropped")).collect()) == [
        (T(5), "behind its partition", None, at(times[3]), "devices", 3),
        (T(6), "too late", T(0), at(times[5]), "gateways", 5)]
    metrics = S.query_metrics(second)  # the second run's batches
    assert (metrics["dropped_behind_partition"], S.late_by_source(metrics)) == (1, {"devices": 0, "gateways": 1})
