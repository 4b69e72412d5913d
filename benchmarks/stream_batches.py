"""Where a live stream's time goes: per micro-batch durations and Spark's stage times of the
streaming scenarios' sides (benchmarks/compare.py's 3, 3c and their native references, f3 and
f4's sqlflow side), one process, for profiling (docs/dev/streaming-performance.md, 3).

    python benchmarks/stream_batches.py [--rows 400000] [--cases f3pq,3c,n3c] [--rounds 2] [--marker FILE]
                                        [--buckets 2,4,8]

Cases: f3, f4 (flink_compare's sqlflow side: the CSV stream, DELAY 30 minutes, finished), f3pq and
f4pq (the same queries over the parquet stream), 3, 3b, 3c (compare.py's stateful sides), n3, n3c
(their native references). `--buckets N,M,...`: each stateful case (3, 3b, 3c) runs once per
count of the stateful operator's buckets (`spark.sqlflow.streaming.buckets`), labelled e.g. `3@4`.
Every round runs each case once, in order; the first round also
starts the Python workers, so read the last. Per case: wall time, each micro-batch's
triggerExecution and addBatch (s), and the run time of the Spark stages it ran (executorRunTime,
JVM CPU). `--marker FILE`: the file holds the case running in the last round ("done" at the end),
so that a profiler can attach to this process for the last round only, e.g.
`py-spy record --pid PID --subprocesses --idle --rate 40 --format raw`.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import compare  # noqa: E402
import events  # noqa: E402
import flink_compare  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=400_000)
    ap.add_argument("--files", type=int, default=10)
    ap.add_argument("--cases", default="f3pq,3c,n3c")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--marker", default=None)
    ap.add_argument("--buckets", default=None, help="bucket counts of the stateful cases, e.g. 2,4,8")
    args = ap.parse_args(argv)

    import sqlflow
    from pyspark.sql import functions as F

    from sqlflow.spark import streaming
    from sqlflow.spark.streaming import metrics
    from sqlflow.spark.session import local_session

    spark = local_session(app_name="sqlflow-stream-batches",
                          conf={"spark.driver.memory": "6g", "spark.ui.enabled": "true", "spark.ui.port": "4077"})
    work = Path(tempfile.mkdtemp(prefix="sqlflow-stream-batches-"))
    flink_compare.register_inputs(spark, args.rows, args.files)
    parquet = events.stream_files(args.rows, args.files)

    def parquet_view():
        (spark.readStream.schema(compare.SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(parquet))
         .createOrReplaceTempView("stream_events"))

    def run(case: str):
        case, _, buckets = case.partition("@")
        if buckets:
            spark.conf.set(streaming.CONF_BUCKETS, buckets)
        try:
            return run_case(case)
        finally:
            spark.conf.unset(streaming.CONF_BUCKETS)

    def run_case(case: str):
        checkpoint = tempfile.mkdtemp(dir=work)
        if case in ("f3", "f4", "f3pq", "f4pq"):
            query = flink_compare.sqlflow_query("tumble" if case.startswith("f3") else "session", True)
            if case.endswith("pq"):
                parquet_view()
                query = query.replace("flink_stream", "stream_events")
            return flink_compare.run_stream(spark, query, work)
        parquet_view()
        if case in ("3", "3b", "3c"):
            spark.conf.set("spark.sqlflow.streaming.operator", "stateful")
            try:
                df = sqlflow.sql(spark, {"3": compare.Q_STREAM, "3b": compare.Q_STREAM_FIXED,
                                         "3c": compare.Q_STREAM_SESSIONS}[case])
            finally:
                spark.conf.unset("spark.sqlflow.streaming.operator")
            return streaming.start(df, format="noop", checkpoint=checkpoint, available_now=True)
        if case in ("n3", "n3c"):
            if case == "n3c":
                window, delay, mode = F.session_window("event_time", "5 minutes"), "10 seconds", "append"
            else:
                window, delay, mode = F.window("event_time", "1 minute"), "70 seconds", "update"
            df = (spark.table("stream_events").withWatermark("event_time", delay).groupBy(window, "user_id")
                  .agg(F.count("*").alias("clicks"), F.sum("amount").alias("total")))
            query = (df.writeStream.outputMode(mode).format("noop").option("checkpointLocation", checkpoint)
                     .trigger(availableNow=True).start())
            query.awaitTermination()
            return query
        raise SystemExit(f"unknown case {case!r}")

    seen: set = set()

    def stage_seconds() -> tuple[float, float]:
        """executorRunTime and executorCpuTime (s) of the stages completed since the last call."""
        sc = spark.sparkContext
        url = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/stages?status=complete"
        run_ms = cpu_ns = 0
        for st in json.loads(urllib.request.urlopen(url).read()):
            if (st["stageId"], st["attemptId"]) not in seen:
                seen.add((st["stageId"], st["attemptId"]))
                run_ms += st["executorRunTime"]
                cpu_ns += st.get("executorCpuTime", 0)
        return run_ms / 1000, cpu_ns / 1e9

    cases = args.cases.split(",")
    if args.buckets:
        cases = [f"{c}@{b}" if c in ("3", "3b", "3c") else c for c in cases for b in
                 (args.buckets.split(",") if c in ("3", "3b", "3c") else [None])]
    marker = Path(args.marker) if args.marker else None
    try:
        for r in range(args.rounds):
            for case in cases:
                if marker is not None and r == args.rounds - 1:
                    marker.write_text(case)
                t0 = time.perf_counter()
                query = run(case)
                seconds = time.perf_counter() - t0
                batches = query.recentProgress
                run_s, cpu_s = stage_seconds()
                print(f"round {r} {case}: {seconds:.1f} s, {args.rows / seconds:,.0f} rows/s, {len(batches)} batches; "
                      f"stages: run {run_s:.1f} s, JVM CPU {cpu_s:.1f} s", flush=True)
                for phase in ("triggerExecution", "addBatch"):
                    print(f"    {phase}: {[round(b['durationMs'].get(phase, 0) / 1000, 1) for b in batches]}", flush=True)
                if batches:  # where the first batch's time outside addBatch goes (query start)
                    first = {k: round(v / 1000, 2) for k, v in batches[0]["durationMs"].items()
                             if k not in ("triggerExecution", "addBatch") and v >= 50}
                    print(f"    first batch, other phases: {first}", flush=True)
                live = [m for m in (metrics._observed_row((b["observedMetrics"] or {}).get(metrics.METRICS_NAME))
                                    for b in batches) if m.get("state_bytes") is not None]
                if live:  # the stateful operator's state, largest over the batches (summed over the buckets)
                    print("    state, largest: " + ", ".join(f"{k} {max(int(m[k] or 0) for m in live):,}" for k in
                                                           ("state_keys", "state_windows", "state_bytes")), flush=True)
    finally:
        if marker is not None:
            marker.write_text("done")
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
