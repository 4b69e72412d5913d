"""Live streams: sqlflow's stateful operator against Spark's native streaming aggregations, same
files, same micro-batches, same session, interleaved rounds (the two live-stream targets).

    python benchmarks/stream_live.py [--rows 2000000] [--files 10] [--repeat 3] [--cases card,fixed]

Input: benchmarks/events.py's events in arrival order, split into --files parquet files read one
per micro-batch (availableNow, noop sink). Throughput = input rows / wall time from start to
termination (query start-up included, on both sides). Cases:

- card: the README's first query, SESSIONS(GAP 30m) TRIGGER SEQUENCE(REPEAT_UNTIL(PERIOD 1m, WATERMARK),
  REPEAT(WATERMARK)) EMIT ACCUMULATING AND RETRACTING, watermark 10 s behind, every pane, vs
  native `session_window` in append mode with the same watermark (final values only);
- fixed: FIXED(SIZE 1m) TRIGGER WATERMARK EARLY PERIOD 1s LATE WATERMARK, ALLOWED LATENESS 1m,
  accumulating, vs native window aggregation in update mode with a 70 s watermark
  (benchmarks/compare.py's scenario 3).

Each round runs every case's two sides once; the first round is a warm-up. Medians are reported
with every round's time. Results: benchmarks/results/stream_live.json.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import events  # noqa: E402
import provenance  # noqa: E402

SCHEMA = "user_id BIGINT, amount BIGINT, event_time TIMESTAMP, arrival_time TIMESTAMP"
QUERIES = {
    "card": """SELECT user_id, COUNT(*) AS clicks, SUM(amount) AS total
FROM stream_events WATERMARK event_time DELAY OF INTERVAL 10 SECONDS
GROUP BY user_id WINDOW SESSIONS(GAP 30m)
TRIGGER SEQUENCE(REPEAT_UNTIL(PERIOD 1m, WATERMARK), REPEAT(WATERMARK))
EMIT ACCUMULATING AND RETRACTING""",
    "fixed": """SELECT user_id, COUNT(*) AS clicks, SUM(amount) AS total
FROM stream_events WATERMARK event_time DELAY OF INTERVAL 10 SECONDS
GROUP BY user_id WINDOW FIXED(SIZE 1m)
TRIGGER WATERMARK EARLY PERIOD 1s LATE WATERMARK
ALLOWED LATENESS 1m EMIT ACCUMULATING""",
}


def sides(spark, name: str, files: Path, work: Path):
    import sqlflow
    from pyspark.sql import functions as F

    from sqlflow.spark import streaming

    def source():
        return spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(files))

    def ours():
        source().createOrReplaceTempView("stream_events")
        cp = tempfile.mkdtemp(dir=work)
        query = streaming.start(sqlflow.sql(spark, QUERIES[name]), format="noop", checkpoint=cp, available_now=True)
        metrics = streaming.query_metrics(query)
        return {"micro_batches": len(query.recentProgress), "panes": metrics.get("panes"),
                "retractions": metrics.get("retractions"), "input_rows": metrics.get("input_rows")}

    def native():
        cp = tempfile.mkdtemp(dir=work)
        if name == "card":
            df = (source().withWatermark("event_time", "10 seconds")
                  .groupBy(F.session_window("event_time", "30 minutes"), "user_id")
                  .agg(F.count("*").alias("clicks"), F.sum("amount").alias("total")))
            mode = "append"
        else:
            df = (source().withWatermark("event_time", "70 seconds")
                  .groupBy(F.window("event_time", "1 minute"), "user_id")
                  .agg(F.count("*").alias("clicks"), F.sum("amount").alias("total")))
            mode = "update"
        query = (df.writeStream.outputMode(mode).format("noop").option("checkpointLocation", cp)
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        return {"micro_batches": len(query.recentProgress),
                "output_rows": sum(p["sink"].get("numOutputRows", 0) or 0 for p in query.recentProgress)}

    return {"sqlflow": ours, "native": native}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--files", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cases", default="card,fixed")
    ap.add_argument("--out", default=str(HERE / "results" / "stream_live.json"))
    args = ap.parse_args(argv)
    facts, at_start = provenance.run_facts("stream_live.py", argv), provenance.load()

    from sqlflow.spark.session import local_session

    spark = local_session(app_name="sqlflow-stream-live",
                          conf={"spark.sql.shuffle.partitions": "2", "spark.driver.memory": "6g"})
    files = events.stream_files(args.rows, args.files)
    work = Path(tempfile.mkdtemp(prefix="sqlflow-stream-live-"))
    cases = args.cases.split(",")
    runs = {c: {"sqlflow": [], "native": []} for c in cases}
    info = {c: {} for c in cases}
    try:
        for r in range(args.repeat + 1):
            for c in cases:
                for side, fn in sides(spark, c, files, work).items():
                    t0 = time.perf_counter()
                    out = fn()
                    s = time.perf_counter() - t0
                    info[c][side] = out
                    if r:
                        runs[c][side].append(round(s, 2))
                    print(f"round {r}{' (warm-up)' if not r else ''} {c} {side}: {s:.2f} s {out}", flush=True)
    finally:
        spark.stop()
    results = {}
    for c in cases:
        med = {side: statistics.median(v) for side, v in runs[c].items()}
        results[c] = {side: {"seconds": runs[c][side], "median_s": med[side],
                             "rows_per_second": round(args.rows / med[side]), **info[c][side]}
                      for side in ("sqlflow", "native")}
        results[c]["ratio"] = round(med["native"] / med["sqlflow"], 3)
        results[c]["spread"] = provenance.spreads(results[c])
        print(f"{c}: sqlflow {results[c]['sqlflow']['rows_per_second']:,} rows/s, native "
              f"{results[c]['native']['rows_per_second']:,} rows/s, ratio {results[c]['ratio']}")
    report = {"record": provenance.record(facts, at_start), "rows": args.rows, "files": args.files,
              "results": results}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
