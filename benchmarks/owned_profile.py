"""Where a micro-batch of the owned-sink executor spends its time (docs/dev/streaming-performance.md, 1).

    PYTHONPATH=$PWD python benchmarks/owned_profile.py ROWS FILES [--runs 2] [--sessions] [--floor]

Runs scenario 3's query (3c's with --sessions) through the owned-sink executor over ROWS rows of
benchmarks/events.py in FILES parquet files (one per micro-batch), availableNow, noop sink, then
Spark's native aggregation over the same files, --runs times in one session (the first is cold).
Prints each run's wall time, the executor's seconds by phase summed over the batches
(`owned.run_of(query).timings`: plan, job, book; of the driver-local step, the job's collect, step
and sink) and Spark's own `durationMs` sums of both sides.
With --floor it also runs three foreachBatch shapes without sqlflow, the floor under the
executor's plan: `noop` (the batch written to noop), `agg` (repartition by key and Spark's
aggregation per key and minute) and `arrow` (that, then a no-op `groupBy(bucket).applyInArrow`).
"""
from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import events  # noqa: E402
from compare import Q_STREAM, Q_STREAM_SESSIONS, SCHEMA  # noqa: E402


def summed(progress: list) -> dict:
    """Spark's `durationMs` of a query's batches, summed by phase."""
    total: collections.Counter = collections.Counter()
    for p in progress:
        total.update(p["durationMs"])
    return dict(total)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("rows", type=int)
    ap.add_argument("files", type=int)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--sessions", action="store_true", help="scenario 3c's query (sessions, retracting)")
    ap.add_argument("--floor", action="store_true", help="also the foreachBatch shapes without sqlflow")
    ap.add_argument("--steps", default="",
                    help="comma-separated values of spark.sqlflow.streaming.driverStepRows to run the executor "
                         "with, alternated in each run (0: the distributed step; default: the session's)")
    args = ap.parse_args()

    import sqlflow
    from pyspark.sql import functions as F

    from sqlflow.spark import streaming
    from sqlflow.spark.session import local_session
    from sqlflow.spark.streaming import owned

    spark = local_session(app_name="owned-profile", conf={"spark.driver.memory": "8g"})
    files = events.stream_files(args.rows, args.files)
    work = Path(tempfile.mkdtemp(prefix="owned-profile-"))
    query_text = Q_STREAM_SESSIONS if args.sessions else Q_STREAM

    def source():
        return spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(files))

    def ours(driver_rows: str = "") -> None:
        if driver_rows:
            spark.conf.set("spark.sqlflow.streaming.driverStepRows", driver_rows)
        source().createOrReplaceTempView("stream_events")
        spark.conf.set("spark.sqlflow.streaming.operator", "stateful")
        try:
            df = sqlflow.sql(spark, query_text)
        finally:
            spark.conf.unset("spark.sqlflow.streaming.operator")
        clock = time.perf_counter()
        query = streaming.start(df, format="noop", checkpoint=tempfile.mkdtemp(dir=work), available_now=True,
                                executor="owned")
        wall = time.perf_counter() - clock
        run = owned.run_of(query)
        assert run is not None
        phases: collections.Counter = collections.Counter()
        for t in run.timings:
            phases.update(t)
        spark.conf.unset("spark.sqlflow.streaming.driverStepRows")
        print(f"owned{' driverStepRows=' + driver_rows if driver_rows else ''} {wall:.2f} s, {streaming.query_metrics(query).get('panes')} panes; phases "
              f"{ {k: round(v, 2) for k, v in phases.items()} }; Spark {summed(query.recentProgress)}", flush=True)

    def native() -> None:
        if args.sessions:
            window, delay, mode = F.session_window("event_time", "5 minutes"), "10 seconds", "append"
        else:
            window, delay, mode = F.window("event_time", "1 minute"), "70 seconds", "update"
        df = (source().withWatermark("event_time", delay).groupBy(window, "user_id")
              .agg(F.count("*").alias("clicks"), F.sum("amount").alias("total")))
        clock = time.perf_counter()
        query = (df.writeStream.outputMode(mode).format("noop").option("checkpointLocation", tempfile.mkdtemp(dir=work))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        print(f"native {time.perf_counter() - clock:.2f} s; Spark {summed(query.recentProgress)}", flush=True)

    def shape(kind: str) -> None:
        def empty(key, table):
            return table.slice(0, 0).select(["user_id"])

        def batch(df, batch_id):
            if kind != "noop":
                df = (df.repartition(2, "user_id").groupBy("user_id", F.window("event_time", "1 minute"))
                      .agg(F.count("*"), F.sum("amount")))
            if kind == "arrow":
                df = df.groupBy(F.pmod(F.hash("user_id"), F.lit(2)).alias("b")).applyInArrow(empty, "user_id long")
            df.write.format("noop").mode("overwrite").save()

        clock = time.perf_counter()
        query = (source().writeStream.foreachBatch(batch).option("checkpointLocation", tempfile.mkdtemp(dir=work))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        print(f"floor {kind} {time.perf_counter() - clock:.2f} s; Spark {summed(query.recentProgress)}", flush=True)

    for _ in range(args.runs):
        for rows in args.steps.split(",") if args.steps else [""]:
            ours(rows)
        native()
        if args.floor:
            for kind in ("noop", "agg", "arrow"):
                shape(kind)


if __name__ == "__main__":
    main()
