"""Floors under two streaming targets: what Spark 4.3's micro-batches and its stateful Python
operators cost before sqlflow computes anything (docs/dev/streaming-performance.md, 5).

`flink`: f3o and f4o's input (benchmarks/flink_compare.py: the rows in --files CSV files, one per
micro-batch, availableNow), alternated in one process:

- `pass_through`: Spark's own stream doing nothing (a projection to the noop sink);
- `collect_partials`: foreachBatch collecting each batch to the driver as Arrow and combining it
  per key and minute with pyarrow (the first steps of the owned-sink executor's driver-local
  batch, without the engine, its state or a sink);
- `batch_count`: foreachBatch counting each batch's rows in the JVM (the least a design that
  writes its own sink does with a batch);
- `jvm_partials`: foreachBatch combining each batch per key and minute by Spark's own batch
  aggregation and collecting the partials as Arrow (the first step of the owned-sink
  executor's distributed batch, where Spark combines, without the engine, its state or a sink);
- `native_append`: Spark's own window aggregation of f3o (fixed 1-minute windows, COUNT and SUM
  per user, watermark 30 minutes behind, append mode);
- `sqlflow_f3o`, `sqlflow_f4o`: sqlflow's f3o and f4o streams.

Flink's whole f3o/f4o run is in the README's table: no design on Spark's micro-batches takes less
than `pass_through`.

`operator`: scenario 3's input (benchmarks/compare.py: --stream-rows rows of events.py in --files
parquet files), alternated in one process:

- `native`: Spark's update-mode window aggregation on the session's shuffle partitions (2, one
  per core: scenario 3's reference in benchmarks/compare.py);
- `native_8`: the same on 8 shuffle partitions, the operator's (what the runs before this side
  was added called `native`);
- `tws_noop`: `transformWithStateInPandas` over 8 hash buckets of the key (the stateful operator's
  shape when its default was 4 buckets per core, as many shuffle partitions), a body that reads its rows, counts them
  and keeps one value of state per bucket;
- `tws_unread`: the same, its rows not read;
- `apiws_noop`: `applyInPandasWithState` (Spark 4.3's other stateful Python API) over the same
  buckets, the same body, an event-time timeout;
- `tws_noop_2`: `tws_noop` on 2 buckets and 2 shuffle partitions (one per core);
- `sqlflow`: scenario 3's query on sqlflow's stateful operator (`streaming.start`, noop sink);
- `sqlflow_noop`: the same plan (rows combined per key and window and packed per bucket in one
  stateless Python pass, the heartbeats, the operator's buckets, its initial state and counters)
  with a processor that reads its rows and does nothing else (benchmarks/noop_processor.py): the
  floor of sqlflow's design on the streaming DataFrame, before the engine, its state and panes;
- `sqlflow_2`, `sqlflow_noop_2`: the two above on 2 buckets; `tws_noop_1`, `sqlflow_1`,
  `sqlflow_noop_1`: on one bucket; `sqlflow_8`: on 8 (the operator's default was 4 per core until
  it kept its count in its state: the runs of floors.json before then call that `sqlflow`; one
  per core since, 2 here);
- `native_sessions`, `sessions`, `sessions_2`, `sessions_1`, `sessions_8`: scenario 3c (Spark's
  streaming `session_window`; sqlflow's sessions with early and late firings and retractions on
  the operator's default buckets, on 2, on 1 and on 8);
- `arrow_pass`: every row through one stateless Python pass (`mapInArrow` counting its Arrow
  batches, one row out per input partition) to the noop sink, no state: what any design that
  computes in Python pays on a streaming DataFrame, where Spark aggregates nothing ahead of it.

A stateful operator in a streaming DataFrame (the user's own sink) that is handed every row of a
batch costs at least these bodies that do nothing: Spark allows no partial aggregation in the JVM
ahead of it (an aggregation in a stream is Spark's own stateful operator). sqlflow's operator
combines the rows in a stateless Python pass first, so these bound the design without that pass,
not sqlflow's (docs/dev/streaming-performance.md, 5).

    python benchmarks/floors.py flink --rows 2000000 --files 10 --repeat 3
    python benchmarks/floors.py operator --stream-rows 1000000 --files 10 --repeat 3
    python benchmarks/floors.py operator --stream-rows 100000 --files 50 --repeat 3   # 3sf's small batches

`--sides a,b` runs only those sides, kept under `<floor>[, <rows> rows in <files> files]; sides a,b`.

Results: benchmarks/results/floors.json (one entry per floor and size, each with its run's record:
`flink` and `operator` at the sizes above, other sizes under `<floor>, <rows> rows in <files> files`).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import events
import flink_compare
import provenance

OUT = Path(__file__).resolve().parent / "results" / "floors.json"
BUCKETS = 8


def flink_sides(spark, args, work: Path) -> dict:
    import pyarrow as pa
    import pyarrow.compute as pc

    inputs = flink_compare.register_inputs(spark, args.rows, args.files)

    def source():
        return (spark.readStream.schema(events.CSV_COLUMNS).option("maxFilesPerTrigger", 1).csv(str(inputs["folder"]))
                .selectExpr("user_id", "amount", "timestamp_millis(event_ms) AS event_time"))

    def partials(df, batch_id):
        t = df.toArrow()
        minute = pc.divide(pc.cast(t["event_time"], pa.int64()), 60_000_000)
        (pa.table({"user_id": t["user_id"], "minute": minute, "amount": t["amount"]})
         .group_by(["user_id", "minute"]).aggregate([("amount", "sum"), ("amount", "count")]))

    def jvm(df, batch_id):
        from pyspark.sql import functions as F

        (df.groupBy("user_id", F.floor(F.unix_micros("event_time") / 60_000_000).alias("minute"))
         .agg(F.sum("amount"), F.count("*")).toArrow())

    def pass_through():
        return _run(source().writeStream.format("noop"), work)

    def batch_count():
        return _run(source().writeStream.foreachBatch(lambda df, batch_id: df.count()), work)

    def jvm_partials():
        return _run(source().writeStream.foreachBatch(jvm), work)

    def collect_partials():
        return _run(source().writeStream.foreachBatch(partials), work)

    def native_append():
        from pyspark.sql import functions as F

        df = (source().withWatermark("event_time", f"{flink_compare.DELAY_MS // 60_000} minutes")
              .groupBy(F.window("event_time", "1 minute"), "user_id")
              .agg(F.count("*").alias("clicks"), F.sum("amount").alias("total")))
        return _run(df.writeStream.format("noop").outputMode("append"), work)

    def owned(name):
        window, _, streaming = flink_compare.SHAPES[name]
        query = flink_compare.sqlflow_query(window, streaming)
        return lambda: flink_compare.run_stream(spark, query, work, executor="owned")

    return {"pass_through": pass_through, "batch_count": batch_count, "collect_partials": collect_partials,
            "jvm_partials": jvm_partials, "native_append": native_append,
            "sqlflow_f3o": owned("f3o"), "sqlflow_f4o": owned("f4o")}


def operator_sides(spark, args, work: Path) -> dict:
    import pandas as pd
    from pyspark.sql import functions as F
    from pyspark.sql import types as T
    from pyspark.sql.streaming.state import GroupStateTimeout
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    from compare import SCHEMA

    files = events.stream_files(args.stream_rows, args.files)
    out = T.StructType([T.StructField("bucket", T.IntegerType()), T.StructField("n", T.LongType())])
    state = T.StructType([T.StructField("n", T.LongType())])

    def stream():
        return spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(files))

    def source(buckets=BUCKETS):
        return (stream()
                .withWatermark("event_time", "70 seconds")
                .withColumn("bucket", F.pmod(F.hash("user_id"), F.lit(buckets))))

    class Counting(StatefulProcessor):
        read = True

        def init(self, handle):
            self.n = handle.getValueState("n", state)

        def handleInputRows(self, key, rows, timerValues):
            n = sum(len(frame) for frame in rows) if self.read else 0
            self.n.update((n,))
            yield pd.DataFrame({"bucket": [int(key[0])], "n": [n]})

        def close(self):
            pass

    class Unread(Counting):
        read = False

    def counting(key, frames, group_state):
        n = sum(len(frame) for frame in frames)
        if not group_state.hasTimedOut:
            group_state.update((n,))
            group_state.setTimeoutTimestamp(group_state.getCurrentWatermarkMs() + 60_000)
        yield pd.DataFrame({"bucket": [int(key[0])], "n": [n]})

    def partitions(n: int):
        return {"spark.sql.shuffle.partitions": str(n)}

    def native(n: int | None = None):
        def side():
            df = (source().groupBy(F.window("event_time", "1 minute"), "user_id")
                  .agg(F.count("*").alias("clicks"), F.sum("amount").alias("total")))
            return _run(df.writeStream.format("noop").outputMode("update"), work, spark, n and partitions(n))
        return side

    def tws(processor, buckets=BUCKETS):
        def side():
            df = source(buckets).groupBy("bucket").transformWithStateInPandas(processor(), out, "Update", "None")
            return _run(df.writeStream.format("noop").outputMode("update"), work, spark, partitions(buckets))
        return side

    def apiws():
        df = source().groupBy("bucket").applyInPandasWithState(counting, out, state, "Update",
                                                               GroupStateTimeout.EventTimeTimeout)
        return _run(df.writeStream.format("noop").outputMode("update"), work, spark, partitions(BUCKETS))

    def sqlflow_side(noop: bool, buckets: int | None = None, sessions: bool = False, combine: bool = True):
        import noop_processor

        import sqlflow
        from compare import Q_STREAM, Q_STREAM_SESSIONS
        from sqlflow.spark import streaming
        from sqlflow.spark.conf import STREAMING_BUCKETS, STREAMING_COMBINE

        def side():
            stream().createOrReplaceTempView("stream_events")
            restore = noop_processor.register() if noop else None
            if buckets:
                spark.conf.set(STREAMING_BUCKETS, str(buckets))
            if not combine:
                spark.conf.set(STREAMING_COMBINE, "false")
            try:
                df = sqlflow.sql(spark, Q_STREAM_SESSIONS if sessions else Q_STREAM)
            finally:
                spark.conf.unset(STREAMING_BUCKETS)
                spark.conf.unset(STREAMING_COMBINE)
                if restore:
                    restore()
            q = streaming.start(df, format="noop", checkpoint=tempfile.mkdtemp(dir=work), available_now=True,
                                executor="operator")
            q.awaitTermination()
            return q
        return side

    def native_sessions():
        df = (stream().withWatermark("event_time", "10 seconds").groupBy(F.session_window("event_time", "5 minutes"), "user_id")
              .agg(F.count("*").alias("clicks"), F.sum("amount").alias("total")))
        return _run(df.writeStream.format("noop").outputMode("append"), work)

    def arrow_pass():
        import pyarrow as pa

        def count(batches):
            n = 0
            for b in batches:
                n += b.num_rows
            yield pa.RecordBatch.from_pydict({"n": [n]})

        df = stream().mapInArrow(count, "n long")
        return _run(df.writeStream.format("noop"), work)

    def plain():
        return _run(stream().writeStream.format("noop"), work)

    return {"native": native(), "native_8": native(BUCKETS), "tws_noop": tws(Counting), "tws_unread": tws(Unread),
            "apiws_noop": apiws, "tws_noop_2": tws(Counting, 2), "sqlflow": sqlflow_side(False),
            "sqlflow_noop": sqlflow_side(True), "sqlflow_2": sqlflow_side(False, 2),
            "sqlflow_noop_2": sqlflow_side(True, 2), "tws_noop_1": tws(Counting, 1), "sqlflow_1": sqlflow_side(False, 1),
            "sqlflow_noop_1": sqlflow_side(True, 1), "arrow_pass": arrow_pass, "plain": plain, "native_sessions": native_sessions,
            "sessions": sqlflow_side(False, sessions=True), "sessions_2": sqlflow_side(False, 2, sessions=True),
            "sessions_1": sqlflow_side(False, 1, sessions=True), "sqlflow_8": sqlflow_side(False, 8),
            "sessions_8": sqlflow_side(False, 8, sessions=True),
            "uncombined": sqlflow_side(False, combine=False), "uncombined_1": sqlflow_side(False, 1, combine=False)}


def _run(writer, work: Path, spark=None, settings: dict | None = None):
    """Start `writer` availableNow on a fresh checkpoint (with `settings` on the session for the
    start: a query keeps its shuffle partitions from then on), wait for it; returns the query."""
    saved = {k: spark.conf.get(k) for k in settings or {}} if spark is not None else {}
    for k, v in (settings or {}).items():
        spark.conf.set(k, v)
    try:
        q = writer.option("checkpointLocation", tempfile.mkdtemp(dir=work)).trigger(availableNow=True).start()
    finally:
        for k, v in saved.items():
            spark.conf.set(k, v)
    q.awaitTermination()
    return q


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("floor", choices=("flink", "operator"))
    parser.add_argument("--rows", type=int, default=2_000_000, help="flink: the rows of f3o and f4o")
    parser.add_argument("--stream-rows", type=int, default=1_000_000, help="operator: the rows of scenario 3")
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sides", help="comma-separated: run only these sides")
    args = parser.parse_args(argv)
    run = provenance.run_facts("benchmarks/floors.py", argv if argv is not None else sys.argv[1:])
    from sqlflow.spark.session import local_session

    spark = local_session(master="local[2]", conf={"spark.driver.memory": "8g"})
    work = Path(tempfile.mkdtemp())
    sides = (flink_sides if args.floor == "flink" else operator_sides)(spark, args, work)
    if args.sides:
        unknown = set(args.sides.split(",")) - set(sides)
        if unknown:
            parser.error(f"unknown sides {sorted(unknown)}; the {args.floor} floor has {sorted(sides)}")
        sides = {name: side for name, side in sides.items() if name in args.sides.split(",")}
    load = provenance.load()
    for side in sides.values():  # warm-up: the JVM's first streams, Python workers
        side()
    seconds: dict[str, list[float]] = {name: [] for name in sides}
    batches: dict[str, int] = {}
    for _ in range(args.repeat):
        for name, side in sides.items():
            start = time.perf_counter()
            q = side()
            seconds[name].append(round(time.perf_counter() - start, 3))
            batches[name] = len(q.recentProgress)
    result = {name: {"seconds": s, "median_s": statistics.median(s), "micro_batches": batches[name]}
              for name, s in seconds.items()}
    result["rows"] = args.rows if args.floor == "flink" else args.stream_rows
    result["files"] = args.files
    result[provenance.KEY] = provenance.record(run, load)
    results = json.loads(OUT.read_text()) if OUT.exists() else {}
    sizes = (args.rows if args.floor == "flink" else args.stream_rows, args.files)
    defaults = (parser.get_default("rows") if args.floor == "flink" else parser.get_default("stream_rows"),
                parser.get_default("files"))
    key = args.floor if sizes == defaults else f"{args.floor}, {sizes[0]} rows in {sizes[1]} files"
    results[f"{key}; sides {','.join(sides)}" if args.sides else key] = result
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != provenance.KEY}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
