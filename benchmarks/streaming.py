"""Streaming benchmark: sqlflow's stateful operator (transformWithStateInPandas running the engine
per hash bucket of keys) against Spark's native streaming window aggregation, same rows, same
machine, one run each.

Input: `clickstream.py`'s 2,000,000 events over 10,000 users (one day), sorted by arrival time and
split into parquet files of equal size, one file per micro-batch (maxFilesPerTrigger=1); the
watermark is 10 s behind the largest event time; sink: noop; trigger: availableNow. Throughput =
input rows / wall time from start to termination (query start-up included). Cases:

- fixed 1-minute windows, default trigger: native window aggregation vs the stateful operator,
  and the stateful operator without heartbeats;
- the stateful operator with other bucket counts, and grouped by key (one call per key, on a
  prefix of the input: it is much slower);
- sessions (gap 5 min) with early firings every second of processing time and late firings,
  accumulating and retracting, 30 minutes of allowed lateness (stateful only);
- both listing their dropped rows (`keep_dropped`, what `start(..., dropped_path=...)` runs).

    python benchmarks/streaming.py [--events N] [--files F] [--quick]

Results go to benchmarks/results/streaming.json and are printed.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import provenance  # noqa: E402
from clickstream import MINUTE, SECOND, clickstream  # noqa: E402


def write_files(events: int, files: int, users: int, where: Path) -> int:
    frame = clickstream(events, users, days=1.0, seed=1).sort_values("arrival_time", kind="stable")
    frame = frame.reset_index(drop=True)[["user_id", "amount", "event_time"]]
    where.mkdir(parents=True)
    size = -(-len(frame) // files)
    t = time.time() - 10 * files
    for i in range(files):
        path = where / f"part-{i:04d}.parquet"
        frame.iloc[i * size:(i + 1) * size].to_parquet(path, index=False)
        os.utime(path, (t + i, t + i))  # the file source orders by modification time
    return len(frame)


def plans():
    from sqlflow import ast
    from sqlflow.engine.aggregates import Aggregate
    from sqlflow.engine.plan import EnginePlan

    D = ast.Duration
    aggs = (Aggregate("sum", "amount", "total"), Aggregate("count_star", None, "clicks"))
    fixed = EnginePlan(ast.Windowing(ast.WindowClause(ast.Fixed(D(MINUTE)))), aggs, keys=("user_id",))
    sessions = EnginePlan(
        ast.Windowing(ast.WindowClause(ast.Sessions(D(5 * MINUTE))),
                      ast.WatermarkEarlyLate(early=ast.Repeat(ast.Period(D(SECOND)))),
                      ast.AllowedLateness(D(30 * MINUTE)),
                      ast.Emit(ast.AccumulationMode.ACCUMULATING_AND_RETRACTING)),
        aggs, keys=("user_id",))
    return fixed, sessions


def run_case(spark, src_dir: Path, plan, **options) -> dict:
    from sqlflow.columns import EVENT_TIME
    from sqlflow.spark import streaming as S

    reader = spark.readStream.schema("user_id long, amount long, event_time long").option("maxFilesPerTrigger", 1)
    src = reader.parquet(str(src_dir)).withColumnRenamed("event_time", EVENT_TIME)
    stream = S.build_stream(src, plan, delay=10 * SECOND, **options)
    checkpoint = tempfile.mkdtemp(prefix="sqlflow-bench-cp-")
    t0 = time.time()
    query = S.start(stream, format="noop", checkpoint=checkpoint, available_now=True)
    wall = time.time() - t0
    metrics = S.query_metrics(query)
    batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
    shutil.rmtree(checkpoint, ignore_errors=True)
    rows = metrics.get("input_rows", 0)
    return {
        "operator": stream.operator, "buckets": stream.buckets, "rows": rows, "seconds": round(wall, 2),
        "rows_per_second": round(rows / wall), "micro_batches": len(query.recentProgress),
        "data_batches": len(batches),
        "median_batch_ms": sorted(p["durationMs"]["triggerExecution"] for p in batches)[len(batches) // 2]
        if batches else None,
        "metrics": metrics,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--quick", action="store_true", help="fewer cases (no bucket sweep, no per-key run)")
    parser.add_argument("--only", default="", help="comma-separated case names: run these and merge them into --out")
    parser.add_argument("--out", default=str(HERE / "results" / "streaming.json"))
    args = parser.parse_args()
    facts = provenance.run_facts("streaming.py", None)

    from sqlflow.spark.session import local_session

    spark = local_session(app_name="sqlflow-streaming-benchmark",
                          conf={"spark.sql.shuffle.partitions": "2", "spark.driver.memory": "6g"})
    work = Path(tempfile.mkdtemp(prefix="sqlflow-bench-"))
    try:
        n = write_files(args.events, args.files, args.users, work / "all")
        fixed, sessions = plans()
        # a small warm-up (JVM, Python workers) on a copy of the first file
        (work / "warm").mkdir()
        shutil.copy(next((work / "all").glob("part-0000.parquet")), work / "warm")
        run_case(spark, work / "warm", fixed, native=False, buckets=8)

        only = [c for c in args.only.split(",") if c]
        previous = (provenance.with_records(json.loads(Path(args.out).read_text()))
                    if only and Path(args.out).exists() else None)
        results = dict(previous["results"]) if previous else {}

        def case(name, *a, **kw):
            if only and name not in only:
                return
            print(f"{name} ...", flush=True)
            at_start = provenance.load()
            results[name] = run_case(spark, *a, **kw)
            results[name]["record"] = provenance.record(facts, at_start)
            r = results[name]
            print(f"  {r['operator']}: {r['rows']:,} rows in {r['seconds']} s = {r['rows_per_second']:,} rows/s "
                  f"({r['micro_batches']} micro-batches, median {r['median_batch_ms']} ms)", flush=True)

        case("fixed_native", work / "all", fixed, native=True)
        case("fixed_stateful", work / "all", fixed, native=False)
        case("sessions_early_late_retracting", work / "all", sessions)
        # what the heartbeats cost (every bucket in every batch, with the batch's max event time;
        # on by default: processing-time triggers and restarts need them)
        case("fixed_stateful_no_heartbeats", work / "all", fixed, native=False, heartbeat=False)
        # what listing the dropped rows costs (`keep_dropped`, what `start(..., dropped_path=...)` runs
        # on the operator): the stateful operator instead of the native one, and no pre-combining
        case("fixed_keep_dropped", work / "all", fixed, keep_dropped=True)
        case("sessions_keep_dropped", work / "all", sessions, keep_dropped=True)
        if not args.quick:
            for b in (2, 32, 128):
                case(f"fixed_stateful_{b}_buckets", work / "all", fixed, native=False, buckets=b)
            # one call per key: on the first two files only (it is slow)
            (work / "prefix").mkdir()
            for f in sorted((work / "all").glob("*.parquet"))[:2]:
                shutil.copy2(f, work / "prefix")
            case("fixed_stateful_prefix_by_bucket", work / "prefix", fixed, native=False)
            case("fixed_stateful_prefix_by_key", work / "prefix", fixed, native=False, grouping="key")
        native = results["fixed_native"]["rows_per_second"]
        stateful = results["fixed_stateful"]["rows_per_second"]
        out = {
            "merged": sorted(set((previous or {}).get("merged", [])) | set(only)) or None,
            "events": n, "files": args.files, "users": args.users,
            "results": results,
            **provenance.kept_header(previous, results),
            "fixed_stateful_vs_native": round(stateful / native, 3),
            "target_half_of_native": stateful >= native / 2,
        }
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
        print(json.dumps({k: v for k, v in out.items() if k != "results"}, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)
        spark.stop()


if __name__ == "__main__":
    main()
