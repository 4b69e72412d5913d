"""Ordering a replay by event time (docs/semantics.md, 11) against Spark's own ORDER BY of the same
rows, in the same run and session.

    python benchmarks/ordering.py [--rows 1000000] [--out benchmarks/results/ordering.json]

Data: `events.events(rows)` (Zipf users, arrivals up to 30 minutes after the event). Both sides
read the same cached DataFrame and write their sorted rows to a no-op sink (`.write.format("noop")`):

- sqlflow: `SELECT user_id, amount, event_time FROM ev WATERMARK event_time DELAY OF 1m
  ARRIVAL arrival_time ORDER BY event_time, user_id` (the replay's timeline, each row's emit
  instant, late rows out, sorted by emit time);
- sqlflow, per partition: the same with `ASCENDING PER user_id IDLE TIMEOUT 5m`;
- Spark: `SELECT user_id, amount, event_time FROM ev ORDER BY event_time, user_id` (no emit
  instants, no late rows: the bounded sort, the least the ordering must do).

Medians of 3 after a warm-up; rows/s and the ratio Spark / sqlflow time (>= 1.0: sqlflow as fast).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import events

QUERIES = {
    "sqlflow_delay": "SELECT user_id, amount, event_time FROM ev WATERMARK event_time DELAY OF 1m "
                     "ARRIVAL arrival_time ORDER BY event_time, user_id",
    "sqlflow_ascending_per": "SELECT user_id, amount, event_time FROM ev WATERMARK event_time ASCENDING PER "
                             "user_id IDLE TIMEOUT 5m ARRIVAL arrival_time ORDER BY event_time, user_id",
    "spark_order_by": "SELECT user_id, amount, event_time FROM ev ORDER BY event_time, user_id",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "ordering.json"))
    args = parser.parse_args()

    import pyspark.sql.functions as F

    import sqlflow

    spark = sqlflow.local_session()
    frame = events.events(args.rows)
    df = spark.createDataFrame(frame).select(
        "user_id", "amount", F.timestamp_micros(F.col("event_time")).alias("event_time"),
        F.timestamp_micros(F.col("arrival_time")).alias("arrival_time")).cache()
    df.count()
    df.createOrReplaceTempView("ev")
    seconds: dict[str, list[float]] = {}
    for name, query in QUERIES.items():
        run = (lambda q=query: spark.sql(q)) if name.startswith("spark") else (lambda q=query: sqlflow.sql(spark, q))
        run().write.format("noop").mode("overwrite").save()  # warm-up
        for _ in range(args.repeat):
            start = time.perf_counter()
            run().write.format("noop").mode("overwrite").save()
            seconds.setdefault(name, []).append(time.perf_counter() - start)
    medians = {name: statistics.median(s) for name, s in seconds.items()}
    result = {
        "rows": args.rows, "repeat": args.repeat, "seconds": seconds, "median_seconds": medians,
        "rows_per_second": {name: args.rows / m for name, m in medians.items()},
        "ratio_vs_spark_order_by": {name: medians["spark_order_by"] / m for name, m in medians.items()
                                    if name != "spark_order_by"},
    }
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
