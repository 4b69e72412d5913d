"""State growth of a long-running stream: Spark's state numbers for sqlflow's stateful operator
against Spark's native window aggregation, batch by batch.

    python benchmarks/state_growth.py [--batches 40] [--keys 220] [--retain 10,100] [--maintenance 1s] [--label after]

Input: --batches parquet files, one per micro-batch (maxFilesPerTrigger 1, availableNow, noop
sink), each with one row per key for --keys keys, event times spread over the next 20 s (so the
watermark, 10 s behind, advances every batch and fixed 1-minute windows close every third batch).
Query: COUNT(*) and SUM per key, FIXED(SIZE 1m), default trigger, run once with
`spark.sqlflow.streaming.operator` native and once stateful, for every
`spark.sql.streaming.minBatchesToRetain` of --retain.

Per batch: the state operator's `memoryUsedBytes`, `numRowsTotal`, RocksDB's live SST bytes
(custom metric `rocksdbSstFileSize`), the bytes RocksDB wrote (`rocksdbPutCount`,
`rocksdbBytesCopied`, where reported), sqlflow's own `state_bytes`, and the bytes of the
checkpoint's `state/` directory after the batch. Results: benchmarks/results/state_growth.json
(one entry per --label, so a run before a change and one after sit side by side).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import provenance  # noqa: E402

T0 = pd.Timestamp("2026-01-01 00:00:00")
QUERY = """SELECT k, COUNT(*) AS n, SUM(v) AS total
FROM growth_events WATERMARK event_time DELAY OF INTERVAL 10 SECONDS
GROUP BY k WINDOW FIXED(SIZE 1m)"""


def write_files(root: Path, batches: int, keys: int) -> Path:
    rng = np.random.default_rng(7)
    for b in range(batches):
        offsets = rng.integers(0, 20_000, keys)  # ms within the batch's 20 s
        frame = pd.DataFrame({"k": [f"k{i:04d}" for i in range(keys)],
                              "v": rng.integers(1, 100, keys).astype(np.int64),
                              "event_time": T0 + pd.to_timedelta(b * 20_000 + offsets, unit="ms")})
        frame.to_parquet(root / f"part-{b:05d}.parquet", index=False, coerce_timestamps="us")
    return root


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def run(spark, files: Path, work: Path, operator: str, retain: int) -> list[dict]:
    import sqlflow
    from sqlflow.spark import streaming

    spark.conf.set("spark.sqlflow.streaming.operator", operator)
    spark.conf.set("spark.sql.streaming.minBatchesToRetain", str(retain))
    source = spark.readStream.schema("k STRING, v BIGINT, event_time TIMESTAMP").option("maxFilesPerTrigger", 1)
    source.parquet(str(files)).createOrReplaceTempView("growth_events")
    cp = Path(tempfile.mkdtemp(dir=work))
    query = streaming.start(sqlflow.sql(spark, QUERY), format="noop", checkpoint=str(cp), available_now=False)
    seen, rows = -1, []
    n_files = len(list(files.glob("*.parquet")))
    try:
        while seen < n_files - 1:  # sample the state directory after each batch
            progress = query.lastProgress
            if progress is None or progress["batchId"] == seen or not progress["stateOperators"]:
                if query.exception() is not None:
                    raise query.exception()
                time.sleep(0.05)
                continue
            for p in query.recentProgress:
                if p["batchId"] > seen and p["stateOperators"]:
                    rows.append(sample(p, cp))
                    seen = p["batchId"]
    finally:
        query.stop()
    return rows


def sample(progress: dict, cp: Path) -> dict:
    from sqlflow.spark.streaming import progress_metrics

    state = progress["stateOperators"]
    custom = {}
    for op in state:
        for k, v in (op.get("customMetrics") or {}).items():
            custom[k] = custom.get(k, 0) + int(v)
    ours = progress_metrics(progress)
    return {"batch": progress["batchId"],
            "memory_used_bytes": sum(op["memoryUsedBytes"] for op in state),
            "num_rows_total": sum(op["numRowsTotal"] for op in state),
            "rows_updated": sum(op["numRowsUpdated"] for op in state),
            "sst_bytes": custom.get("rocksdbSstFileSize"),
            "bytes_copied": custom.get("rocksdbBytesCopied"),
            "put_count": custom.get("rocksdbPutCount"),
            "state_dir_bytes": dir_bytes(cp / "state") if (cp / "state").exists() else 0,
            "state_bytes": ours.get("state_bytes"), "state_keys": ours.get("state_keys")}


def growth(rows: list[dict], field: str, retain: int) -> dict:
    """The field's per-batch growth before `retain` batches, and its range after 2 x `retain`."""
    values = [r[field] for r in rows if r[field] is not None]
    if len(values) < 2:
        return {}
    head = values[:min(retain, len(values))]
    tail = values[min(2 * retain, len(values) - 1):]
    return {"first": values[0], "at_retain": head[-1], "per_batch_before_retain": round((head[-1] - head[0]) / max(len(head) - 1, 1)),
            "after_2x_retain_min": min(tail), "after_2x_retain_max": max(tail), "last": values[-1]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, default=40)
    ap.add_argument("--keys", type=int, default=220)
    ap.add_argument("--retain", default="10")
    ap.add_argument("--operators", default="native,stateful")
    ap.add_argument("--maintenance", default="60s",
                    help="spark.sql.streaming.stateStore.maintenanceInterval: how often old versions are deleted")
    ap.add_argument("--conf", action="append", default=[], help="KEY=VALUE: a further Spark setting")
    ap.add_argument("--label", default="current")
    ap.add_argument("--out", default=str(HERE / "results" / "state_growth.json"))
    args = ap.parse_args(argv)
    facts, at_start = provenance.run_facts("state_growth.py", argv), provenance.load()

    from sqlflow.spark.session import local_session

    spark = local_session(app_name="sqlflow-state-growth", conf={"spark.sql.shuffle.partitions": "2",
                          "spark.sql.streaming.stateStore.maintenanceInterval": args.maintenance,
                          **dict(c.split("=", 1) for c in args.conf)})
    work = Path(tempfile.mkdtemp(prefix="sqlflow-state-growth-"))
    files = write_files(Path(tempfile.mkdtemp(dir=work)), args.batches, args.keys)
    results = {}
    try:
        for retain in (int(r) for r in args.retain.split(",")):
            for operator in args.operators.split(","):
                rows = run(spark, files, work, operator, retain)
                summary = {f: growth(rows, f, retain) for f in ("memory_used_bytes", "sst_bytes", "state_dir_bytes", "state_bytes")}
                results[f"{operator} retain={retain}"] = {"summary": summary, "batches": rows}
                print(f"{operator} retain={retain}: " + "; ".join(f"{f} {s}" for f, s in summary.items()), flush=True)
    finally:
        spark.stop()
    out = Path(args.out)
    report = json.loads(out.read_text()) if out.exists() else {}
    report[args.label] = {"record": provenance.record(facts, at_start), "batches": args.batches, "keys": args.keys,
                          "maintenance_interval": args.maintenance, "results": results}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
