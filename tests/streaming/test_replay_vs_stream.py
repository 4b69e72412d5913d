"""When an ARRIVAL replay gives the panes a stream emitted (docs/streaming.md 2.1).

A stream reads one file per micro-batch; the replay reads the same rows as a table, each arriving
at the processing time of the batch that read it. The replay's `DELAY OF d` watermark is the max
event time arrived so far - d, stepping when rows arrive; Spark's is the max of the batches
*before* the current one. They agree when each data batch is followed by one that only moves the
watermark (files one at a time); with a backlog (batches back to back) Spark's watermark lags a
batch, and the replay that agrees is `TIMELINE` of the stream's own watermark log
(`streaming.watermark_log`)."""
import os
import time
from datetime import datetime

import pandas as pd
import pytest

import sqlflow
from sqlflow.spark import streaming as S

QUERY = """SELECT k, SUM(v) AS total FROM {source}
    GROUP BY k WINDOW FIXED(SIZE 1m) TRIGGER WATERMARK LATE REPEAT(COUNT 1) ALLOWED LATENESS 1m
    OUTPUT TIMESTAMP EARLIEST"""
COLUMNS = ["k", "total", "window_start", "window_end", "pane_index", "pane_timing", "is_last"]


@pytest.fixture(autouse=True)
def _state_store(rocksdb, spark, tmp_path):
    """Every query here runs the stateful operator, and can be finished (the end of the input,
    as the replay's: every window emitted)."""
    spark.conf.set(S.CONF_FINISH_DIR, str(tmp_path / "finish"))
    yield
    spark.conf.unset(S.CONF_FINISH_DIR)


def batches() -> list[list[tuple[str, int, int]]]:
    """(key, second of event time, value) per file; every file moves the max event time on, and
    some rows are behind the watermark of the batch before (late, within the lateness)."""
    return [
        [("a", 10, 1), ("b", 20, 2)],
        [("a", 75, 4), ("b", 50, 8)],
        [("a", 55, 16), ("b", 130, 32)],
        [("a", 115, 64), ("b", 100, 128), ("a", 190, 256)],
        [("b", 170, 512), ("a", 250, 1024), ("b", 110, 2048)],
    ]


def frame(rows) -> pd.DataFrame:
    return pd.DataFrame({"k": [k for k, _, _ in rows],
                         "et": pd.to_datetime([1_700_000_000 + s for _, s, _ in rows], unit="s"),
                         "v": [v for _, _, v in rows]})


def write(files_dir, i: int, rows) -> None:
    tmp = files_dir.parent / f".part-{i}.parquet"
    frame(rows).to_parquet(tmp, index=False, coerce_timestamps="us")  # Spark reads micros, not nanos
    stamp = int(time.time()) - 1000 + i
    os.utime(tmp, (stamp, stamp))
    os.replace(tmp, files_dir / f"part-{i}.parquet")


def stream_query(spark, files_dir, name):
    spark.readStream.schema("k string, et timestamp, v long").option("maxFilesPerTrigger", 1) \
        .parquet(str(files_dir)).createOrReplaceTempView(name)
    return sqlflow.sql(spark, QUERY.format(source=f"{name} WATERMARK et DELAY OF INTERVAL 10 SECONDS"))


def panes(df) -> list[tuple]:
    return sorted(tuple(r) for r in df.select(*COLUMNS).collect())


def replay(spark, data, arrivals, watermark: str, name: str):
    """The same rows as a table, each arriving at its batch's processing time (us)."""
    rows = pd.concat([frame(b).assign(at=pd.to_datetime(p, unit="us")) for b, p in zip(data, arrivals)])
    spark.createDataFrame(rows).createOrReplaceTempView(name)
    return sqlflow.sql(spark, QUERY.format(source=f"{name} WATERMARK et {watermark} ARRIVAL at"))


def data_rows(progress) -> int:
    """The rows a micro-batch read from the data (not the finish marker's source)."""
    return sum(s["numInputRows"] for s in progress["sources"] if "finish" not in s["description"])


def data_batch_times(query) -> list[int]:
    return [int(p["observedMetrics"]["sqlflow"]["batch_time"]) for p in query.recentProgress if data_rows(p) > 0]


def test_files_one_at_a_time_replay_as_arrival_delay(spark, tmp_path):
    """Each file is read, then a batch without data moves the watermark: the DELAY OF replay gives
    the stream's panes but one is_last, and emit_time differs (the stream emits a window the
    watermark passed in the batch after the one that read its rows).

    The is_last: b@1:50 (2048) arrives in the last file with a@4:10, and is judged against 3:00
    (a@3:10 - 10s) by both: LATE, within [1:40, 2:40)'s lateness. In the replay the watermark steps
    to 4:00 at that same arrival, past 2:40 + 1m, so that LATE pane is the window's last; the stream
    learns it one batch later, when the window expires without a new pane."""
    files = tmp_path / "in"
    files.mkdir()
    df = stream_query(spark, files, "one_at_a_time")
    query = S.start(df, format="memory", query_name="one_at_a_time_out")
    data = batches()
    for i, rows in enumerate(data):
        write(files, i, rows)
        query.processAllAvailable()
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:  # the batch without data that moves the watermark
            last = query.recentProgress[-1]
            if data_rows(last) == 0 and last["batchId"] > 0 and data_rows(query.recentProgress[-2]) > 0:
                break
            time.sleep(0.5)
            query.processAllAvailable()
    S.pane_streams(df)[0].finish()  # the end of the input: every window emitted, as in the replay
    query.processAllAvailable()
    arrivals = data_batch_times(query)
    assert len(arrivals) == len(data)
    assert [data_rows(p) for p in query.recentProgress][:2 * len(data)] == [len(b) if i % 2 == 0 else 0
                                                                            for b in data for i in (0, 1)]
    got = panes(spark.table("one_at_a_time_out"))
    query.stop()
    replayed = panes(replay(spark, data, arrivals, "DELAY OF INTERVAL 10 SECONDS", "one_at_a_time_replay"))
    late_b = ("b", 32 + 128 + 2048, datetime(2023, 11, 14, 22, 15), datetime(2023, 11, 14, 22, 16), 1, "LATE")
    assert len(got) == len(replayed)
    assert [(g, r) for g, r in zip(got, replayed) if g != r] == [(late_b + (False,), late_b + (True,))]


def test_a_backlog_lags_a_batch_and_replays_as_its_timeline(spark, tmp_path):
    """Five files waiting, read back to back: Spark judges each batch's rows against the watermark
    of two batches before, and fires windows a batch later. The DELAY OF replay is a batch ahead
    (event second 0 is 22:13:20): the fourth file's b@22:15:00 and b@22:15:30 arrive with a@22:16:30,
    so its watermark reaches 22:16:20 at that arrival and fires b's [22:15, 22:16) ON_TIME with 160;
    the fifth file's b@22:15:10 is then a LATE pane (2208), the last, as a@22:17:30 moves the
    watermark past 22:16 + 1m. The stream's watermark of 22:16:20 takes effect only in the batch that
    reads the fifth file, so it fires that window once, ON_TIME, with b@22:15:10 in it. Nothing is
    dropped by either. TIMELINE over the stream's watermark log gives the stream's panes exactly,
    emit_time and output_time (EARLIEST) included."""
    files = tmp_path / "in"
    files.mkdir()
    data = batches()
    for i, rows in enumerate(data):
        write(files, i, rows)
    df = stream_query(spark, files, "backlog")
    query = S.start(df, format="memory", query_name="backlog_out", available_now=True, finish=True)
    arrivals = data_batch_times(query)
    assert len(arrivals) == len(data)
    got = panes(spark.table("backlog_out"))

    ahead = replay(spark, data, arrivals, "DELAY OF INTERVAL 10 SECONDS", "backlog_delay")
    window = (datetime(2023, 11, 14, 22, 15), datetime(2023, 11, 14, 22, 16))
    assert (sorted(set(panes(ahead)) - set(got)), sorted(set(got) - set(panes(ahead)))) == (
        [("b", 160, *window, 0, "ON_TIME", False), ("b", 2208, *window, 1, "LATE", True)],
        [("b", 2208, *window, 0, "ON_TIME", False)])
    assert (sqlflow.metrics(ahead)["dropped_too_late"], S.query_metrics(query)["dropped_too_late"]) == (0, 0)

    steps = spark.createDataFrame(pd.DataFrame(S.watermark_log(query), columns=["p", "w"]))
    steps.selectExpr("timestamp_micros(p) AS proc_time", "timestamp_micros(w) AS watermark") \
        .createOrReplaceTempView("backlog_log")
    exact = replay(spark, data, arrivals, "TIMELINE backlog_log", "backlog_timeline")
    assert got == panes(exact)
    # output_time too: EARLIEST is over the timely elements, judged against the same watermark
    with_emit = COLUMNS + ["emit_time", "output_time"]
    assert sorted(tuple(r) for r in spark.table("backlog_out").select(*with_emit).collect()) == \
        sorted(tuple(r) for r in exact.select(*with_emit).collect())
