"""The floor of scenario f5 on Spark: what Spark's micro-batches cost before any ordering.

f5 (benchmarks/flink_compare.py) orders a live stream of 200,000 rows read as 10 CSV files, one per
micro-batch. This script runs, alternated in one process, (a) Spark's own stream over the same
files, one per micro-batch, doing nothing (a projection to the noop sink: no state, no Python)
and (b) sqlflow's f5 stream, and writes benchmarks/results/order_floor.json. No design that runs
on Spark's micro-batches can take less than (a); Flink's whole f5 run is in the README's table.

    python benchmarks/order_floor.py --rows 200000 --files 10 --repeat 3
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

OUT = Path(__file__).resolve().parent / "results" / "order_floor.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    run = provenance.run_facts("benchmarks/order_floor.py", argv if argv is not None else sys.argv[1:])
    from sqlflow.spark.session import local_session

    spark = local_session(master="local[2]")
    inputs = flink_compare.register_inputs(spark, args.rows, args.files)
    work = Path(tempfile.mkdtemp())
    window, _, streaming = flink_compare.SHAPES["f5"]
    query = flink_compare.sqlflow_query(window, streaming)

    def floor() -> tuple[float, int]:
        df = (spark.readStream.schema(events.CSV_COLUMNS).option("maxFilesPerTrigger", 1).csv(str(inputs["folder"]))
              .selectExpr("user_id", "amount", "timestamp_millis(event_ms) AS event_time"))
        start = time.perf_counter()
        q = (df.writeStream.format("noop").option("checkpointLocation", tempfile.mkdtemp(dir=work))
             .trigger(availableNow=True).start())
        q.awaitTermination()
        return time.perf_counter() - start, len(q.recentProgress)

    def ordered() -> tuple[float, int]:
        start = time.perf_counter()
        q = flink_compare.run_stream(spark, query, work)
        return time.perf_counter() - start, len(q.recentProgress)

    load = provenance.load()
    floor(), ordered()  # warm-up: the JVM's first stream, Python workers
    seconds: dict[str, list[float]] = {"spark_pass_through": [], "sqlflow_f5": []}
    batches: dict[str, int] = {}
    for _ in range(args.repeat):
        for name, side in (("spark_pass_through", floor), ("sqlflow_f5", ordered)):
            s, n = side()
            seconds[name].append(round(s, 3))
            batches[name] = n
    result = {name: {"seconds": s, "median_s": statistics.median(s), "micro_batches": batches[name]}
              for name, s in seconds.items()}
    result["rows"], result["files"] = args.rows, args.files
    result[provenance.KEY] = provenance.record(run, load)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != provenance.KEY}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
