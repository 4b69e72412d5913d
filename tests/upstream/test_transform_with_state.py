"""transformWithStateInPandas and streaming watermarks, as sqlflow's streaming operator relies on
them (docs/spark-internals.md, 1 and 8; docs/streaming.md, 3): which watermark each micro-batch
sees, which rows Spark drops before Python sees them and how it counts them, when event-time
timers fire, what survives between micro-batches.

Each input file is one micro-batch (maxFilesPerTrigger 1); event times are seconds after
2024-01-01 00:00:00 UTC, and the watermark delay is 10 s unless said otherwise.
"""
import pickle
import sys

import pandas as pd
import pytest
from pyspark import cloudpickle
from pyspark.errors import AnalysisException
from pyspark.sql import functions as F
from pyspark.sql.streaming import StatefulProcessor

# the processors below run on Python workers, which cannot import a test module: ship them by value
cloudpickle.register_pickle_by_value(sys.modules[__name__])

BASE_MS = int(pd.Timestamp("2024-01-01", tz="UTC").timestamp() * 1000)
BASE_TS = pd.Timestamp("2024-01-01").to_pydatetime()
SCHEMA = "k string, ts timestamp, v long"


def seconds(ms):
    """Milliseconds since the epoch as seconds after BASE (the epoch itself stays 0)."""
    return 0 if ms == 0 else (ms - BASE_MS) / 1000


class Recorder(StatefulProcessor):
    """One output row per call: the rows of a key (and their frames), or a timer that fired.
    Keeps a count of rows in a pickled object in binary state; registers two timers per call."""

    OUT = ("kind string, k string, key_type string, rows long, frames long, wm long, expiry long, "
           "timers string, state_n long, calls long")

    def init(self, handle) -> None:
        self.handle = handle
        self.blob = handle.getValueState("blob", "blob binary")
        self.calls = 0  # an attribute of the instance: tells whether the instance outlives a batch

    def _n(self) -> int:
        return pickle.loads(self.blob.get()[0])["n"] if self.blob.exists() else 0

    def handleInputRows(self, key, rows, timerValues):
        self.calls += 1
        frames = list(rows)
        data = pd.concat(frames)
        n = self._n() + len(data)
        self.blob.update((pickle.dumps({"n": n}),))
        top = int(data["ts"].max().value // 1_000_000)
        self.handle.registerTimer(top + 5_000)
        self.handle.registerTimer(top + 10_000)
        timers = ",".join(f"{seconds(t):g}" for t in sorted(self.handle.listTimers()))
        yield pd.DataFrame([{"kind": "input", "k": key[0], "key_type": type(key).__name__, "rows": len(data),
                             "frames": len(frames), "wm": timerValues.getCurrentWatermarkInMs(), "expiry": None,
                             "timers": timers, "state_n": n, "calls": self.calls}])

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        yield pd.DataFrame([{"kind": "timer", "k": key[0], "key_type": type(key).__name__, "rows": 0, "frames": 0,
                             "wm": timerValues.getCurrentWatermarkInMs(),
                             "expiry": expiredTimerInfo.getExpiryTimeInMs(), "timers": "", "state_n": self._n(),
                             "calls": self.calls}])

    def handleInitialState(self, key, initialState, timerValues) -> None:
        self.blob.update((pickle.dumps({"n": int(initialState["n0"].sum())}),))


class Echo(StatefulProcessor):
    """Every row it is given, with the watermark of its micro-batch."""

    OUT = "k string, ts_ms long, wm long"

    def init(self, handle) -> None:
        pass

    def handleInputRows(self, key, rows, timerValues):
        for data in rows:
            yield pd.DataFrame({"k": data["k"], "ts_ms": data["ts"].astype("datetime64[us]").astype("int64") // 1000,
                                "wm": timerValues.getCurrentWatermarkInMs()})


def start(df, name: str, checkpoint, timeout: float = 300):
    """Run `df` with availableNow into the memory table `name`; the finished query."""
    query = (df.writeStream.format("memory").queryName(name).outputMode("append")
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    assert query.awaitTermination(timeout), "availableNow did not terminate"
    return query


def progress(query) -> list[tuple]:
    """(input rows, watermark, rows dropped by the watermark) of each micro-batch."""
    return [(p["numInputRows"], p["eventTime"].get("watermark"),
             [op.get("numRowsDroppedByWatermark") for op in p["stateOperators"]]) for p in query.recentProgress]


def stream(spark, stream_files, column: str = "ts", delay: str = "10 seconds"):
    return (spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(stream_files.path))
            .withColumn("wm", F.col("ts") + F.expr("INTERVAL 100 SECONDS")).withWatermark(column, delay))


def test_event_time_mode(spark, stream_files, frame, tmp_path):
    """Batch N sees max(event time of batches < N) - delay (the epoch in batch 0); a row is
    dropped before Python when its event time is <= the watermark of batch N - 1; a timer fires
    once the watermark reaches it, in a no-data batch too; availableNow terminates after that
    batch; state is restored, the processor instance is not."""
    for batch in ([("a", 0), ("b", 20)], [("a", 40)], [("a", 5), ("b", 35), ("c", 60), ("d", 30), ("e", 30.001)]):
        stream_files.write(frame(batch))
    initial = spark.createDataFrame([("a", 100), ("z", 7)], "k string, n0 long").groupBy("k")
    out = stream(spark, stream_files).groupBy("k").transformWithStateInPandas(
        Recorder(), Recorder.OUT, "Append", "EventTime", initialState=initial)
    query = start(out, "up_event_time", tmp_path / "cp")
    assert [p[:2] for p in progress(query)] == [
        (2, "1970-01-01T00:00:00.000Z"), (1, "2024-01-01T00:00:10.000Z"),
        (5, "2024-01-01T00:00:30.000Z"), (0, "2024-01-01T00:00:50.000Z")]
    got = {(r.kind, r.k, r.wm and seconds(r.wm), r.expiry and seconds(r.expiry)): r
           for r in spark.table("up_event_time").collect()}
    inputs = sorted((k, wm, r.rows, r.frames, r.timers, r.state_n, r.key_type)
                    for (kind, k, wm, _), r in got.items() if kind == "input")
    assert inputs == [
        ("a", 0, 1, 1, "5,10", 101, "tuple"),      # 100 from the initial state
        ("a", 10, 1, 1, "5,10,45,50", 102, "tuple"),  # timers about to fire are still listed
        ("b", 0, 1, 1, "25,30", 1, "tuple"),
        ("b", 30, 1, 1, "25,30,40,45", 2, "tuple"),
        ("c", 30, 1, 1, "65,70", 1, "tuple"),
        ("d", 30, 1, 1, "35,40", 1, "tuple"),       # 30 > 10, the watermark of the batch before
        ("e", 30, 1, 1, "35.001,40.001", 1, "tuple")]  # and a@5 (<= 10) was dropped
    timers = sorted((k, wm, expiry, r.state_n, r.key_type) for (kind, k, wm, expiry), r in got.items()
                    if kind == "timer")
    assert timers == [
        ("a", 10, 5, 102, "Row"), ("a", 10, 10, 102, "Row"),  # a timer at the watermark fires
        ("a", 50, 45, 102, "Row"), ("a", 50, 50, 102, "Row"),
        ("b", 30, 25, 2, "Row"), ("b", 30, 30, 2, "Row"), ("b", 50, 40, 2, "Row"), ("b", 50, 45, 2, "Row"),
        ("d", 50, 35, 1, "Row"), ("d", 50, 40, 1, "Row"), ("e", 50, 35.001, 1, "Row"), ("e", 50, 40.001, 1, "Row")]
    # c's timers (65, 70) lie beyond the final watermark: they never fire, there is no end-of-input flush.
    # Key a's instance in batch 1 starts counting afresh: instances do not outlive their micro-batch.
    assert got[("input", "a", 10, None)].calls == 1


def test_a_big_group_arrives_as_several_frames(spark, stream_files, frame, tmp_path):
    stream_files.write(frame([("a", i / 100) for i in range(2_500)]))
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "1000")
    try:
        out = stream(spark, stream_files).groupBy("k").transformWithStateInPandas(
            Recorder(), Recorder.OUT, "Append", "EventTime")
        start(out, "up_frames", tmp_path / "cp")
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert [(r.k, r.rows, r.frames) for r in spark.table("up_frames").where("kind = 'input'").collect()] == [
        ("a", 2_500, 3)]


SHIFT_BATCHES = [
    [("a", 0), ("b", 20)],
    [("a", 40)],                         # watermark after: 30
    [("a", 5), ("b", 25), ("c", 35)],    # a@5 is 25 s behind it
    [("a", 200)],                        # watermark after: 190
    [("a", 80), ("b", 95), ("c", 150)],
    [("a", 10), ("b", 70), ("c", 185), ("d", 89.999), ("e", 90)],  # late-row watermark 190
]
SHIFT_PROGRESS = [
    (2, "1970-01-01T00:00:00.000Z", [0]), (1, "2024-01-01T00:00:10.000Z", [0]),
    (3, "2024-01-01T00:00:30.000Z", [0]), (1, "2024-01-01T00:00:30.000Z", [0]),
    (3, "2024-01-01T00:03:10.000Z", [0]), (5, "2024-01-01T00:03:10.000Z", [4])]


def test_a_watermark_on_a_shifted_column(spark, stream_files, frame, tmp_path):
    """sqlflow's operator: the watermark on `ts + 100 s` with delay `10 s + 100 s` is the same
    watermark, while Spark drops only rows more than 100 s behind it, and counts them as rows."""
    for batch in SHIFT_BATCHES:
        stream_files.write(frame(batch))
    out = stream(spark, stream_files, "wm", "110 seconds").groupBy("k").transformWithStateInPandas(
        Echo(), Echo.OUT, "Append", "EventTime")
    query = start(out, "up_shifted", tmp_path / "cp")
    assert progress(query) == SHIFT_PROGRESS
    assert sorted((seconds(r.wm), r.k, seconds(r.ts_ms)) for r in spark.table("up_shifted").collect()) == [
        (0, "a", 0), (0, "b", 20), (10, "a", 40), (30, "a", 5), (30, "a", 200), (30, "b", 25), (30, "c", 35),
        (190, "a", 80), (190, "b", 95), (190, "c", 150), (190, "c", 185)]  # a@10, b@70, d@89.999, e@90: dropped


def test_native_aggregation_drops_by_window_end(spark, stream_files, frame, tmp_path):
    """Spark's own windowed aggregation drops a row when its window's end is <= the watermark of
    the batch before (not its event time), and counts dropped rows the same way."""
    for batch in SHIFT_BATCHES:
        stream_files.write(frame(batch))
    counts = stream(spark, stream_files).groupBy("k", F.window("ts", "60 seconds")).agg(F.count("*").alias("n"))
    query = start(counts, "up_native", tmp_path / "cp")
    assert progress(query) == SHIFT_PROGRESS
    assert sorted((r.k, (r.window.start - BASE_TS).total_seconds(), r.n) for r in spark.table("up_native").collect()) == [
        ("a", 0, 3), ("a", 60, 1), ("b", 0, 2), ("b", 60, 1), ("c", 0, 1), ("c", 120, 1)]
    # [180, 240) (a@200, c@185) is still open at the end: availableNow emits only closed windows


def test_event_times_before_1970_are_late_in_batch_0(spark, stream_files, tmp_path):
    """The watermark starts at 0 (the epoch), so a pre-1970 row is behind it from the start."""
    def rows(pairs):
        return pd.DataFrame({"k": [k for k, _ in pairs], "ts": pd.to_datetime([t for _, t in pairs]),
                             "v": range(len(pairs))}).astype({"ts": "datetime64[us]"})

    stream_files.write(rows([("old0", "1969-12-31 23:00:00"), ("new0", "1970-01-01 00:00:30")]))
    stream_files.write(rows([("old1", "1969-12-31 23:59:59"), ("new1", "1970-01-01 00:01:00")]))
    stream_files.write(rows([("far", "1970-01-01 10:00:00")]))
    source = stream(spark, stream_files)
    start(source.groupBy("k").transformWithStateInPandas(Echo(), Echo.OUT, "Append", "EventTime"),
          "up_pre1970", tmp_path / "cp1")
    assert sorted((r.k, r.wm) for r in spark.table("up_pre1970").collect()) == [
        ("far", 50_000), ("new0", 0), ("new1", 20_000)]
    start(source.groupBy("k", F.window("ts", "1 minute")).count(), "up_pre1970_native", tmp_path / "cp2")
    assert sorted((r.k, r.window.start.minute) for r in spark.table("up_pre1970_native").collect()) == [
        ("new0", 0), ("new1", 1)]


def test_what_a_streaming_query_refuses(spark, stream_files, frame, tmp_path):
    stream_files.write(frame([("a", 0), ("b", 1)]))
    source = stream(spark, stream_files)
    with pytest.raises(AnalysisException, match=r"monotonically_increasing_id\(\) is not supported with streaming"):
        start(source.withColumn("id", F.monotonically_increasing_id()), "up_refused", tmp_path / "cp")
    # a grouping expression cannot be named inline for transformWithStateInPandas: add a column first
    with pytest.raises(AnalysisException) as info:
        source.groupBy(F.pmod(F.hash("k"), F.lit(4)).alias("bucket")).transformWithStateInPandas(
            Echo(), Echo.OUT, "Append", "EventTime")
    assert info.value.getCondition().startswith("UNRESOLVED_COLUMN")


class SessionCount(StatefulProcessor):
    """The minimal example of docs/spark-internals.md: a pickled object in binary state, one
    event-time timer per key (the previous one deleted), output when it fires."""

    def init(self, handle) -> None:
        self.handle = handle
        self.state = handle.getValueState("state", "blob binary")

    def handleInputRows(self, key, rows, timerValues):
        st = pickle.loads(self.state.get()[0]) if self.state.exists() else {"n": 0, "last_ms": 0}
        for data in rows:
            st["n"] += len(data)
            st["last_ms"] = max(st["last_ms"], int(data["ts"].max().value // 1_000_000))
        self.state.update((pickle.dumps(st),))
        for t in self.handle.listTimers():
            self.handle.deleteTimer(t)
        self.handle.registerTimer(st["last_ms"] + 30_000)
        return iter([])

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        st = pickle.loads(self.state.get()[0])
        self.state.clear()
        yield pd.DataFrame({"k": [key[0]], "n": [st["n"]], "fired_at_wm": [timerValues.getCurrentWatermarkInMs()]})


def test_the_minimal_example(spark, stream_files, frame, tmp_path):
    stream_files.write(frame([("a", 0), ("a", 10), ("b", 5)]))
    stream_files.write(frame([("c", 600)]))
    out = stream(spark, stream_files).groupBy("k").transformWithStateInPandas(
        statefulProcessor=SessionCount(), outputStructType="k string, n long, fired_at_wm long",
        outputMode="Append", timeMode="EventTime")
    start(out, "up_sessions", tmp_path / "cp")
    # c's timer (630 s) lies beyond the final watermark (590 s): never fired
    assert sorted(tuple(r) for r in spark.table("up_sessions").collect()) == [
        ("a", 2, BASE_MS + 590_000), ("b", 1, BASE_MS + 590_000)]


class Forward(StatefulProcessor):
    """Stage 1 of two chained operators: per call, one row per downstream bucket (0 and 1) with
    the key's rows, its batch's watermark and an event time at the epoch, far behind it."""

    OUT = "b2 int, k string, rows long, wm1 long, old timestamp"

    def init(self, handle) -> None:
        pass

    def handleInputRows(self, key, rows, timerValues):
        n = sum(len(frame) for frame in rows)
        yield pd.DataFrame({"b2": [0, 1], "k": [key[0]] * 2, "rows": [n] * 2,
                            "wm1": [timerValues.getCurrentWatermarkInMs()] * 2,
                            "old": [pd.Timestamp(0)] * 2}).astype({"old": "datetime64[us]"})


class Gather(StatefulProcessor):
    """Stage 2 (timeMode None): every row it is given, with its own watermark and processing time."""

    OUT = "b2 int, k string, rows long, wm1 long, wm2 long, p2 long"

    def init(self, handle) -> None:
        pass

    def handleInputRows(self, key, rows, timerValues):
        for data in rows:
            yield pd.DataFrame({"b2": data["b2"], "k": data["k"], "rows": data["rows"], "wm1": data["wm1"],
                                "wm2": timerValues.getCurrentWatermarkInMs(),
                                "p2": timerValues.getCurrentProcessingTimeInMs()})


def test_a_second_operator_without_event_time_follows_in_the_same_batch(spark, stream_files, frame, tmp_path):
    """What a windowed stage over a windowed stream could build on (docs/pipelines.md, "On a
    stream"): an EventTime operator without eventTimeColumnName feeding a second
    transformWithStateInPandas in timeMode None runs in one append query; the rows the first
    emits in micro-batch N reach the second in batch N, even rows far behind the watermark (no
    EMITTING_ROWS_OLDER_THAN_WATERMARK check: they carry no event time for Spark); the second sees
    neither watermark nor processing time (-1 both): time must travel in the rows."""
    for batch in ([("a", 0), ("b", 20)], [("a", 40)], [("c", 60)]):
        stream_files.write(frame(batch))
    first = stream(spark, stream_files).groupBy("k").transformWithStateInPandas(
        Forward(), Forward.OUT, "Append", "EventTime")
    second = first.groupBy("b2").transformWithStateInPandas(Gather(), Gather.OUT, "Append", "None")
    rows: list[tuple] = []
    query = (second.writeStream.outputMode("append")
             .foreachBatch(lambda batch, n: rows.extend((n, *r) for r in batch.collect()))
             .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start())
    assert query.awaitTermination(300), "availableNow did not terminate"
    assert sorted((n, b2, k, count, seconds(wm1), wm2, p2) for n, b2, k, count, wm1, wm2, p2 in rows) == [
        (0, 0, "a", 1, 0, -1, -1), (0, 0, "b", 1, 0, -1, -1), (0, 1, "a", 1, 0, -1, -1), (0, 1, "b", 1, 0, -1, -1),
        (1, 0, "a", 1, 10, -1, -1), (1, 1, "a", 1, 10, -1, -1),
        (2, 0, "c", 1, 30, -1, -1), (2, 1, "c", 1, 30, -1, -1)]
    assert [p[:2] for p in progress(query)][-1] == (0, "2024-01-01T00:00:50.000Z")  # the no-data batch


def test_two_branches_off_one_operator_run_it_twice(spark, stream_files, frame, tmp_path):
    """Why the first stage's reports to the second (its output watermark) must travel in the same
    rows as its panes, through whatever SQL lies between the stages (docs/pipelines.md, "On a
    stream"): a UNION ALL of two branches read off one transformWithStateInPandas plans that
    operator twice (three stateful operators here, each with its own state), and the two copies do
    not even see the same watermark (batch 1: 10 s in one branch, none in the other)."""
    for batch in ([("a", 0), ("b", 20)], [("a", 40)]):
        stream_files.write(frame(batch))
    first = stream(spark, stream_files).groupBy("k").transformWithStateInPandas(
        Forward(), Forward.OUT, "Append", "EventTime")
    both = first.where(F.col("b2") == 0).unionByName(first.where(F.col("b2") == 1))
    second = both.groupBy("b2").transformWithStateInPandas(Gather(), Gather.OUT, "Append", "None")
    rows: list[tuple] = []
    query = (second.writeStream.outputMode("append")
             .foreachBatch(lambda batch, n: rows.extend((n, *r) for r in batch.collect()))
             .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start())
    assert query.awaitTermination(300), "availableNow did not terminate"
    assert sorted((n, b2, k, count, seconds(wm1)) for n, b2, k, count, wm1, _, _ in rows) == [
        (0, 0, "a", 1, 0), (0, 0, "b", 1, 0), (0, 1, "a", 1, 0), (0, 1, "b", 1, 0),
        (1, 0, "a", 1, 10), (1, 1, "a", 1, 0)]
    assert [[op["operatorName"] for op in p["stateOperators"]] for p in query.recentProgress][0] == \
        ["transformWithStateInPandasExec"] * 3
