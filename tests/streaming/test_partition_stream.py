"""Windows over `WATERMARK ts ASCENDING PER p` on a live stream (docs/semantics.md 1.2 and 11;
docs/streaming.md 5.5, "Windows per partition"), on both executors.

The data are the nine readings of docs/semantics.md 11 (two devices, B lagging), one file
(micro-batch) per arrival instant, plus `A5` in the sixth batch, behind A's 25. The stream reads
one file per micro-batch as a backlog; every value below is derived by hand from the rule: W(N) =
the minimum over the devices (not idle) of their latest event time after batch N, never back; a
row of batch N is judged against W(N-1); a window fires when W >= its end; the finish ends the
input. The batches' processing times are the wall clock's, read from the query's watermark log.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import sqlflow
from sqlflow.spark import streaming as S
from sqlflow.spark.conf import STREAMING_DRIVER_ROWS
from sqlflow.spark.streaming import owned
from tests.partition_input import DAY, EPOCH, T, at, panes_by_batch, write_files

#: one batch per arrival instant of docs/semantics.md 11's readings: (device, event time in seconds);
#: A5 (sixth batch) is behind A's latest, 25
BATCHES = [[("A", 1), ("B", 0)], [("A", 12)], [("A", 25)], [("B", 2)], [("B", 8)], [("A", 31), ("A", 5)],
           [("B", 15)], [("B", 33)]]


def _docs_section() -> str:
    text = (Path(__file__).resolve().parents[2] / "docs" / "streaming.md").read_text(encoding="utf-8")
    return text[text.index("**Windows per partition.**"):text.index("## 6. The changelog")]


def _docs_sql() -> str:
    """The windowed example of docs/streaming.md 5.5 ("Windows per partition")."""
    return re.findall(r"```sql\n(.*?)```", _docs_section(), re.S)[0].strip()


def _docs_python(tmp_path: Path) -> str:
    """Its Python example, which writes the panes and the dropped rows (paths under `tmp_path`)."""
    (code,) = re.findall(r"```python\n(.*?)```", _docs_section(), re.S)
    for name in ("device-counts-dropped", "device-counts", "checkpoints/device-counts", "devices", "finish"):
        code = code.replace(f"/data/{name}", str(tmp_path / name.replace("/", "-")))
    return code


@pytest.fixture(autouse=True)
def _finishable(rocksdb, finish_conf):
    """Every stream here runs the stateful operator and can be finished."""


def devices(spark, folder: Path) -> None:
    spark.readStream.schema("device string, ts timestamp").option("maxFilesPerTrigger", 1).parquet(str(folder)) \
        .createOrReplaceTempView("devices")


def test_windows_per_partition_on_the_operators_are_the_arrival_replay(spark, tmp_path):
    """docs/streaming.md 5.5's example, on the operators. W after each of the eight data batches:
    0, 0, 0, 2, 8, 8, 15, 31 (A5 behind A's 25 moves nothing); [0,10) (A1 B0 B2 B8) fires at
    batch 6 (W 15), [10,20) (A12 B15) and [20,30) (A25) at batch 7 (W 31), [30,40) (A31 B33) at
    the finish (batch 8); A5 is the one dropped row, in batch 5's directory. The ARRIVAL replay of
    the same rows at their batches' times gives the same panes, but its end of input is its last
    arrival (batch 7), and lists A5. The global rule (DELAY OF 0s) over the same arrivals drops
    B2, B8, B15 and A5 as too late: 2, 1, 1, 2 (the global rule on a live stream:
    tests/streaming/test_reliability.py's late rows)."""
    write_files(tmp_path / "devices", BATCHES)
    sql = _docs_sql()
    devices(spark, tmp_path / "devices")
    assert "computed over the micro-batches" in sqlflow.explain(sql, spark)
    assert sqlflow.sql(spark, sql).isStreaming
    code = _docs_python(tmp_path)
    assert " ".join(sql.split()) in " ".join(code.split())  # the example runs the SQL above
    names: dict = {"spark": spark}
    exec(code, names)
    query = names["query"]
    log = S.watermark_log(query)
    times = [p for p, _ in log]
    assert [w for _, w in log][:8] == [int((T(s) - EPOCH).total_seconds()) * 1_000_000
                                       for s in (0, 0, 0, 2, 8, 8, 15, 31)]
    assert len(log) == 9  # the finish marker's batch
    written = spark.read.parquet(str(tmp_path / "device-counts"))
    assert written.columns[:4] == ["n", "window_start", "pane_timing", "emit_time"]  # the statement's
    assert written.columns == names["counts"].columns + ["batch_id"]  # as start(counts) writes them
    assert panes_by_batch(written.collect(), times) == [(1, 20, "ON_TIME", 7), (2, 10, "ON_TIME", 7),
                                                        (2, 30, "ON_TIME", 8), (4, 0, "ON_TIME", 6)]
    assert [(r.event_time, r.reason, r.window_start, r.window_end, r.emit_time, r.batch_id)
            for r in spark.read.parquet(str(tmp_path / "device-counts-dropped")).collect()] == [
        (T(5), "behind its partition", None, None, at(times[5]), 5)]
    metrics = S.query_metrics(query)
    assert (metrics["input_rows"], metrics["dropped_behind_partition"], metrics["dropped_too_late"],
            metrics["panes"]) == (10, 1, 0, 4)
    # the replay of the same arrivals
    arrivals = [(d, T(s), at(times[b])) for b, batch in enumerate(BATCHES) for d, s in batch]
    spark.createDataFrame(arrivals, "device string, ts timestamp, at timestamp").createOrReplaceTempView("recorded")
    replay = sqlflow.sql(spark, sql.replace("FROM devices WATERMARK ts ASCENDING PER device",
                                            "FROM recorded WATERMARK ts ASCENDING PER device ARRIVAL at"))
    replayed = panes_by_batch(replay.collect(), times)
    assert replayed == [(1, 20, "ON_TIME", 7), (2, 10, "ON_TIME", 7), (2, 30, "ON_TIME", 7), (4, 0, "ON_TIME", 6)]
    assert [(r.device, r.event_time, r.reason) for r in sqlflow.dropped(replay).collect()] == [
        ("A", T(5), "behind its partition")]
    # the global rule over the same arrivals
    glob = sqlflow.sql(spark, sql.replace("FROM devices WATERMARK ts ASCENDING PER device",
                                          "FROM recorded WATERMARK ts DELAY OF 0s ARRIVAL at"))
    counts = sorted((int((r.window_start - DAY).total_seconds()), r.n) for r in glob.collect()
                    if r.pane_timing == "ON_TIME")
    assert counts == [(0, 2), (10, 1), (20, 1), (30, 2)]
    assert sorted((int((r.event_time - DAY).total_seconds()), r.reason) for r in sqlflow.dropped(glob).collect()) \
        == [(2, "too late"), (5, "too late"), (8, "too late"), (15, "too late")]


class Crash(Exception):
    pass


def test_the_owned_executor_restarts_and_idle_devices_release_the_watermark(spark, tmp_path):
    """The owned-sink executor, IDLE TIMEOUT 1ms (a device without a row in a batch is idle),
    stopped after four batches and started again on the same checkpoint. W: 0 (A1 B0), 12 (B
    idle), 25, 25 (B2 arrives behind W 25: too late, B's latest 0 so not behind it; only B active,
    W stays), 25 (B8 too late), 31 (A5 behind A's 25), 31 (B15 too late for [10,20)), 33 (only B
    active); [0,10) fires 2 (A1 B0) at batch 1, [10,20) 1 (A12) at batch 2, [20,30) 1 (A25) at
    batch 5, [30,40) 2 (A31 B33) at the finish. The dropped rows go to `dropped_path`, each in
    its batch's directory, once, although batch 5 fails after its outputs and runs again. Each
    batch through the distributed step (`driverStepRows = 0`; test_partition_union.py restarts
    the driver-local one under a partition rule)."""
    driver_rows = "0"
    spark.conf.set(STREAMING_DRIVER_ROWS, driver_rows)
    try:
        _restart_and_idle_devices(spark, tmp_path)
        assert spark.conf.get(STREAMING_DRIVER_ROWS) == driver_rows
    finally:
        spark.conf.unset(STREAMING_DRIVER_ROWS)


def _restart_and_idle_devices(spark, tmp_path):
    folder, out, dropped, checkpoint = tmp_path / "in", tmp_path / "out", tmp_path / "dropped", tmp_path / "cp"
    write_files(folder, BATCHES[:4])
    devices(spark, folder)
    sql = _docs_sql().replace("ASCENDING PER device", "ASCENDING PER device IDLE TIMEOUT 1ms")
    stream = sqlflow.sql(spark, sql)  # the statement's rows, and the dropped ones
    options = dict(format="parquet", path=str(out), dropped_path=str(dropped), checkpoint=str(checkpoint),
                   executor="owned")
    first = S.start(stream, available_now=True, **options)
    run = owned.run_of(first)
    assert run is not None and not run.combine  # a dropped row is a row, not a combined element
    assert [w for _, w in S.watermark_log(first)] == [int((T(s) - EPOCH).total_seconds()) * 1_000_000
                                                      for s in (0, 12, 25, 25)]
    assert S.query_metrics(first)["dropped_too_late"] == 1
    write_files(folder, BATCHES[4:])

    def fail(point, batch_id):
        if point == "after-sink" and batch_id == 5:
            raise Crash(f"injected at {point} of batch {batch_id}")

    owned.fault = fail
    try:
        with pytest.raises(Exception, match="injected at after-sink of batch 5"):
            S.start(stream, available_now=True, finish=True, **options)
    finally:
        owned.fault = None
    assert (dropped / "batch_id=5").exists() and not (checkpoint / "commits" / "5").exists()
    second = S.start(stream, available_now=True, finish=True, **options)
    log = S.watermark_log(second)  # the whole stream's (kept in the state's bookkeeping)
    assert [w for _, w in log][:8] == [int((T(s) - EPOCH).total_seconds()) * 1_000_000
                                       for s in (0, 12, 25, 25, 25, 31, 31, 33)]
    times = [p for p, _ in log]
    rows = spark.read.parquet(str(out)).collect()
    assert panes_by_batch(rows, times) == [(1, 10, "ON_TIME", 2), (1, 20, "ON_TIME", 5), (2, 0, "ON_TIME", 1),
                                           (2, 30, "ON_TIME", 8)]
    metrics = S.query_metrics(second)  # the last run's batches: A31 A5 (again), B15, B33, the finish
    assert (metrics["input_rows"], metrics["dropped_behind_partition"], metrics["dropped_too_late"]) == (4, 1, 1)
    in_driver = int(spark.conf.get(STREAMING_DRIVER_ROWS) != "0")
    assert {b["driver_steps"] for b in owned.run_of(second).progress} == {in_driver}
    got = sorted((r.event_time, r.reason, r.window_start, r.window_end, r.emit_time, r.batch_id)
                 for r in spark.read.parquet(str(dropped)).collect())
    assert got == [(T(2), "too late", T(0), T(10), at(times[3]), 3),
                   (T(5), "behind its partition", None, None, at(times[5]), 5),
                   (T(8), "too late", T(0), T(10), at(times[4]), 4),
                   (T(15), "too late", T(10), T(20), at(times[6]), 6)]
