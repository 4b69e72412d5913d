"""Native rewrite vs engine path of `sqlflow.sql`, per window kind, on this machine.

The same windowed query runs both ways (`path="native"` / `path="engine"`) over the same
synthetic clickstream (benchmarks/clickstream.py: bursty visits of many users), read from
parquet, and is written to Spark's `noop` sink (the full result is computed, nothing stored).
Default trigger, bounded data: the case where both paths exist. Each measurement is the median
of `--repeat` runs after one warm-up run. The winner per window kind is what
`sqlflow.engine.paths.PREFERRED` uses (copy the summary into `paths.MEASURED`;
tests/plan/test_path_choice.py fails until the two agree).

The fan-out rows (`fanout-N`) measure SLIDING windows with N windows per row (size / period) on
`--fanout-rows` rows (the cost of both paths grows with rows x N; Spark's `window()` expands each
row into N candidates, one projection per window, and its generated code grows with N). The
smallest measured fan-out from which the engine is faster at every larger one is
`paths.ENGINE_FROM_FANOUT` (copy `sliding_engine_from_fanout`).

    python benchmarks/bounded.py                      # 2M rows, 10,000 keys, ~15 minutes on 2 cores
    python benchmarks/bounded.py --only fanout-2,fanout-10,fanout-60,fanout-360 --repeat 1
    python benchmarks/bounded.py --rows 200000 --repeat 1 --out /tmp/bounded.json

Writes benchmarks/results/bounded.json; with `--only`, the rows run replace theirs in the file
and the others stay.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import provenance  # noqa: E402
from clickstream import clickstream  # noqa: E402

WINDOWS = {
    "GLOBAL": "GLOBAL",
    "FIXED": "FIXED(SIZE 1m)",
    "SLIDING": "SLIDING(SIZE 10m, PERIOD 5m)",
    "SESSIONS": "SESSIONS(GAP 5m)",
}

#: SLIDING windows of N windows per row (size / period), for the planner's fan-out threshold
FANOUTS = {
    2: "SLIDING(SIZE 10m, PERIOD 5m)",
    10: "SLIDING(SIZE 10m, PERIOD 1m)",
    60: "SLIDING(SIZE 10m, PERIOD 10s)",
    360: "SLIDING(SIZE 1h, PERIOD 10s)",
}
ROWS = {**WINDOWS, **{f"fanout-{n}": w for n, w in FANOUTS.items()}}

QUERY = ("SELECT user_id, COUNT(*) AS clicks, SUM(amount) AS total FROM clicks "
         "GROUP BY user_id WINDOW {window} ON event_time")


def measure(spark, sqlflow, query: str, repeat: int, n: int, label: str) -> dict:
    """Median seconds and rows/s of each path on the view `clicks`, and the panes (equal on both)."""
    result: dict = {}
    outputs = {}
    for path_name in ("native", "engine"):
        times = []
        for i in range(repeat + 1):
            df = sqlflow.sql(spark, query, path=path_name)
            start = time.perf_counter()
            df.write.format("noop").mode("overwrite").save()
            elapsed = time.perf_counter() - start
            if i:  # the first run warms up
                times.append(elapsed)
        outputs[path_name] = sqlflow.sql(spark, query, path=path_name).count()
        median = statistics.median(times)
        result[path_name] = {"seconds": [round(t, 3) for t in times], "median_s": round(median, 3),
                             "rows_per_s": round(n / median)}
        print(f"{label:11s} {path_name:7s} median {median:6.2f}s  {n / median / 1e6:5.2f}M rows/s", flush=True)
    assert outputs["native"] == outputs["engine"], (label, outputs)
    result["panes"] = outputs["native"]
    result["faster"] = min(("native", "engine"), key=lambda p: result[p]["median_s"])
    return result


def clicks_view(spark, tmp: str, rows: int, keys: int) -> int:
    """The synthetic clickstream as the view `clicks` (read from parquet); its row count."""
    frame = clickstream(rows, keys, days=1.0, seed=1)
    path = os.path.join(tmp, f"clicks-{rows}.parquet")
    frame[["user_id", "amount", "event_time"]].to_parquet(path, index=False)  # event_time: int64 micros
    spark.read.parquet(path).selectExpr("user_id", "amount", "timestamp_micros(event_time) AS event_time") \
        .createOrReplaceTempView("clicks")
    return spark.table("clicks").count()


def engine_from_fanout(fanout: dict) -> int | None:
    """The smallest measured fan-out from which the engine is faster at every larger one (None:
    native is faster at the largest).

    >>> engine_from_fanout({"2": {"faster": "native"}, "10": {"faster": "engine"}, "60": {"faster": "engine"}})
    10
    >>> engine_from_fanout({"2": {"faster": "engine"}, "10": {"faster": "native"}}) is None
    True
    """
    found = None
    for n in sorted(fanout, key=int, reverse=True):
        if fanout[n]["faster"] != "engine":
            break
        found = int(n)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--fanout-rows", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=str(HERE / "results" / "bounded.json"))
    parser.add_argument("--only", default=",".join(ROWS), help=f"rows to run, of {','.join(ROWS)}")
    options = parser.parse_args()
    only = options.only.split(",")
    unknown = [r for r in only if r not in ROWS]
    if unknown:
        parser.error(f"unknown rows {unknown}; choose among {','.join(ROWS)}")

    import sqlflow
    from sqlflow.spark.session import local_session

    facts = provenance.run_facts("bounded.py", None)
    out = Path(options.out)
    record = provenance.with_records(json.loads(out.read_text())) if out.exists() else {}
    results = record.get("results", {})
    fanout = record.get("fanout", {})
    spark = local_session(app_name="sqlflow-bounded-benchmark")
    with tempfile.TemporaryDirectory() as tmp:
        kinds = [k for k in only if k in WINDOWS]
        if kinds:
            n = clicks_view(spark, tmp, options.rows, options.keys)
            for kind in kinds:
                at_start = provenance.load()
                results[kind] = measure(spark, sqlflow, QUERY.format(window=WINDOWS[kind]), options.repeat, n, kind)
                results[kind]["record"] = provenance.record(facts, at_start, results[kind])
            record.update(rows=n, keys=options.keys, repeat=options.repeat)
        fans = [int(k.split("-")[1]) for k in only if k.startswith("fanout-")]
        if fans:
            n = clicks_view(spark, tmp, options.fanout_rows, max(1, options.fanout_rows // 200))
            for f in fans:
                at_start = provenance.load()
                fanout[str(f)] = {"window": FANOUTS[f], "rows": n, "repeat": options.repeat,
                                  **measure(spark, sqlflow, QUERY.format(window=FANOUTS[f]), options.repeat, n,
                                            f"fanout-{f}")}
                fanout[str(f)]["record"] = provenance.record(facts, at_start, fanout[str(f)])
    header = provenance.kept_header(record, {**results, **fanout})
    record.pop(provenance.OLD_HEADER, None)
    summary = {kind: {p: r[p]["rows_per_s"] for p in ("native", "engine")} for kind, r in results.items()}
    record.update({
        "benchmark": "benchmarks/bounded.py",
        "query": QUERY,
        "shuffle_partitions": spark.conf.get("spark.sql.shuffle.partitions"),
        **header,
        "results": results,
        "summary_rows_per_s": summary,
        "preferred": {kind: r["faster"] for kind, r in results.items()},
        "fanout": dict(sorted(fanout.items(), key=lambda kv: int(kv[0]))),
        "sliding_engine_from_fanout": engine_from_fanout(fanout),
    })
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps({"preferred": record["preferred"], "sliding_engine_from_fanout": record["sliding_engine_from_fanout"]}))
    spark.stop()


if __name__ == "__main__":
    main()
