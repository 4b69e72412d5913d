"""Native rewrite vs engine path of `sqlflow.sql`, per window kind, on this machine.

The same windowed query runs both ways (`path="native"` / `path="engine"`) over the same
synthetic clickstream (benchmarks/clickstream.py: bursty visits of many users), read from
parquet, and is written to Spark's `noop` sink (the full result is computed, nothing stored).
Default trigger, bounded data: the case where both paths exist. Each measurement is the median
of `--repeat` runs after one warm-up run. The winner per window kind is what
`sqlflow.spark.planner.PREFERRED` uses (copy the summary into `planner.MEASURED`).

    python benchmarks/bounded.py                      # 2M rows, 10,000 keys, ~5 minutes on 2 cores
    python benchmarks/bounded.py --rows 200000 --repeat 1

Writes benchmarks/results/bounded.json.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from clickstream import clickstream  # noqa: E402

WINDOWS = {
    "GLOBAL": "GLOBAL",
    "FIXED": "FIXED(SIZE 1m)",
    "SLIDING": "SLIDING(SIZE 10m, PERIOD 5m)",
    "SESSIONS": "SESSIONS(GAP 5m)",
}

QUERY = ("SELECT user_id, COUNT(*) AS clicks, SUM(amount) AS total FROM clicks "
         "GROUP BY user_id WINDOW {window} ON event_time")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=str(HERE / "results" / "bounded.json"))
    parser.add_argument("--kinds", default=",".join(WINDOWS))
    options = parser.parse_args()

    import sqlflow
    from sqlflow.spark.session import local_session

    spark = local_session(app_name="sqlflow-bounded-benchmark")
    frame = clickstream(options.rows, options.keys, days=1.0, seed=1)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "clicks.parquet")
        frame[["user_id", "amount", "event_time"]].to_parquet(path, index=False)  # event_time: int64 micros
        spark.read.parquet(path).selectExpr("user_id", "amount", "timestamp_micros(event_time) AS event_time") \
            .createOrReplaceTempView("clicks")
        n = spark.table("clicks").count()
        results = {}
        for kind in options.kinds.split(","):
            query = QUERY.format(window=WINDOWS[kind])
            results[kind] = {}
            outputs = {}
            for path_name in ("native", "engine"):
                times = []
                for i in range(options.repeat + 1):
                    df = sqlflow.sql(spark, query, path=path_name)
                    start = time.perf_counter()
                    df.write.format("noop").mode("overwrite").save()
                    elapsed = time.perf_counter() - start
                    if i:  # the first run warms up
                        times.append(elapsed)
                outputs[path_name] = sqlflow.sql(spark, query, path=path_name).count()
                median = statistics.median(times)
                results[kind][path_name] = {"seconds": [round(t, 3) for t in times], "median_s": round(median, 3),
                                            "rows_per_s": round(n / median)}
                print(f"{kind:9s} {path_name:7s} median {median:6.2f}s  {n / median / 1e6:5.2f}M rows/s", flush=True)
            assert outputs["native"] == outputs["engine"], (kind, outputs)
            results[kind]["panes"] = outputs["native"]
            results[kind]["faster"] = min(("native", "engine"), key=lambda p: results[kind][p]["median_s"])
    summary = {kind: {p: r[p]["rows_per_s"] for p in ("native", "engine")} for kind, r in results.items()}
    record = {
        "benchmark": "benchmarks/bounded.py",
        "query": QUERY,
        "rows": n, "keys": options.keys, "repeat": options.repeat,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
                    "pyspark": __import__("pyspark").__version__,
                    "shuffle_partitions": spark.conf.get("spark.sql.shuffle.partitions")},
        "results": results,
        "summary_rows_per_s": summary,
        "preferred": {kind: r["faster"] for kind, r in results.items()},
    }
    Path(options.out).parent.mkdir(parents=True, exist_ok=True)
    Path(options.out).write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record["preferred"]))
    spark.stop()


if __name__ == "__main__":
    main()
