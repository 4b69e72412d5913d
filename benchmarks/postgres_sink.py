"""The PostgreSQL current-results sink against the parquet sink, same stream, same panes, one run.

    python benchmarks/postgres_sink.py [--rows 1000000] [--files 10] [--repeat 3] [--warmup 1]

The README's first query (sessions per user, early firings every minute until the
watermark, retractions) on benchmarks/events.py's clicks, read as a live file stream (one file per
micro-batch, availableNow), written by `sqlflow.start` to a parquet sink (the pane changelog,
appended) and, interleaved with it as benchmarks/compare.py interleaves its sides, to a PostgreSQL
table kept by `format="postgres"` (one transaction per micro-batch: COPY, DELETE, INSERT ... ON
CONFLICT; docs/postgres.md). The server is a LocalPostgres in a temp dir (fsync off, as a test
server; a production server's commit costs one WAL flush per micro-batch more). Target: the
PostgreSQL side's throughput >= 0.7x the parquet side's. Both sides must end with the same current
result: an untimed run writes both from one foreachBatch, and its table must equal its parquet
changelog re-aggregated (the panes no retraction withdrew).

Results: benchmarks/results/postgres.json and postgres.md.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import events  # noqa: E402
from measure import measure  # noqa: E402
import provenance  # noqa: E402
import report  # noqa: E402
from report import README, readme_with  # noqa: E402

SCHEMA = "user_id BIGINT, amount BIGINT, event_time TIMESTAMP, arrival_time TIMESTAMP"
#: the README's first query, on the benchmark's events
Q_CARD = """SELECT user_id, SUM(amount) AS total
FROM stream_events WATERMARK event_time DELAY OF INTERVAL 5 MINUTES
GROUP BY user_id
WINDOW SESSIONS(GAP 30m)
TRIGGER SEQUENCE(REPEAT_UNTIL(PERIOD 1m, WATERMARK), REPEAT(WATERMARK))
EMIT ACCUMULATING AND RETRACTING"""
TARGET = 0.7
OUT = HERE / "results" / "postgres.json"


def sides(spark, files: Path, work: Path, url: str) -> tuple[dict, dict]:
    import sqlflow

    last: dict = {}

    def stream():
        spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(files)) \
            .createOrReplaceTempView("stream_events")
        return sqlflow.sql(spark, Q_CARD)

    def parquet():
        out, cp = tempfile.mkdtemp(dir=work), tempfile.mkdtemp(dir=work)
        query = sqlflow.start(stream(), format="parquet", path=out, checkpoint=cp, available_now=True)
        last["parquet"] = out
        return {"micro_batches": len(query.recentProgress)}

    def postgres():
        cp = tempfile.mkdtemp(dir=work)
        table = f"sessions_{len(last.get('tables', []))}"
        last.setdefault("tables", []).append(table)
        query = sqlflow.start(stream(), format="postgres", table=table, url=url, checkpoint=cp, available_now=True)
        return {"micro_batches": len(query.recentProgress)}

    return {"parquet": parquet, "postgres": postgres}, last


def check(spark, files: Path, work: Path, url: str) -> dict:
    """One more, untimed run whose foreachBatch both keeps a table and appends the same panes to
    parquet: the table must equal that changelog re-aggregated (panes no retraction withdrew).
    (Two runs of the query are not comparable: PERIOD fires on processing time.)"""
    import psycopg
    import sqlflow
    from pyspark.sql import functions as F

    spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(files)) \
        .createOrReplaceTempView("stream_events")
    df = sqlflow.sql(spark, Q_CARD)
    sink = sqlflow.postgres_sink(url, "sessions_checked", query=df)
    changelog_dir = str(work / "checked-changelog")

    def both(batch, batch_id):
        sink(batch, batch_id)
        batch.write.mode("append").parquet(changelog_dir)

    previous = spark.conf.get("spark.sql.streaming.stateStore.providerClass")
    spark.conf.set("spark.sql.streaming.stateStore.providerClass",
                   "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
    try:
        (df.writeStream.foreachBatch(both).option("checkpointLocation", str(work / "checked-cp"))
         .trigger(availableNow=True).start().awaitTermination())
    finally:
        spark.conf.set("spark.sql.streaming.stateStore.providerClass", previous)
    changelog = spark.read.parquet(changelog_dir)
    keys = ["user_id", "window_start", "window_end", "pane_index"]
    signed = changelog.groupBy(*keys).agg(F.sum(F.when(F.col("is_retraction"), -1).otherwise(1)).alias("net"))
    current = (changelog.where(~F.col("is_retraction")).join(signed.where("net > 0"), keys)
               .select("user_id", "total", F.unix_micros("window_start").alias("ws"),
                       F.unix_micros("window_end").alias("we")))
    expected = sorted(tuple(r) for r in current.collect())
    with psycopg.connect(url) as db:
        got = sorted(db.execute("SELECT user_id, total, (extract(epoch FROM window_start) * 1000000)::bigint, "
                                "(extract(epoch FROM window_end) * 1000000)::bigint FROM sessions_checked").fetchall())
    return {"equal": got == expected, "rows": len(got)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--files", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--out", default=str(OUT))
    report.add_report_option(ap)
    args = ap.parse_args(argv)
    done = report.reported(ap, args, write)
    if done is not None:
        return done
    facts = provenance.run_facts("postgres_sink.py", argv)


    from sqlflow.interfaces.local_postgres import LocalPostgres
    from sqlflow.spark.session import local_session

    server = LocalPostgres().start()
    spark = local_session(app_name="sqlflow-postgres-bench", conf={"spark.driver.memory": "8g"})
    work = Path(tempfile.mkdtemp(prefix="sqlflow-pg-bench-"))
    at_start = provenance.load()
    try:
        files = events.stream_files(args.rows, args.files)
        fns, last = sides(spark, files, work, server.url)
        print(f"postgres vs parquet sink: the README's first query, {args.rows:,} rows in {args.files} files", flush=True)
        r = measure(fns, args.rows, args.repeat, args.warmup)
        r["check"] = check(spark, files, work, server.url)
    finally:
        spark.stop()
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    ratio = r["parquet"]["median_s"] / r["postgres"]["median_s"]
    result = {"scenario": "the README's first query as a live stream into PostgreSQL vs the same panes appended to "
                          "parquet", "rows": args.rows, "files": args.files, **r,
              "ratio": round(ratio, 3), "ratio_kind": "throughput postgres / parquet", "target": f">= {TARGET}",
              "met": ratio >= TARGET and r["check"]["equal"], "repeat": args.repeat, "warmup": args.warmup,
              "record": provenance.record(facts, at_start, r)}
    write(Path(args.out), result)
    return 0 if result["met"] else 1


def markdown(result: dict) -> str:
    """The README's table of a results file, with the run that measured it."""
    r, rec = result, result.get(provenance.KEY)
    if rec:
        commit = (rec.get("commit") or "unknown")[:12] + (" (dirty)" if (rec.get("commit") or "").endswith("dirty") else "")
        spread = "; ".join(f"{side} {s['min_s']}-{s['max_s']} s" for side, s in rec["spread"].items())
        run = (f"`{rec['command']}` at commit {commit}, finished {rec['finished']}, PySpark "
               f"{rec['versions'].get('pyspark')}, sqlflow {rec['versions'].get('sqlflow')}; load average "
               f"{rec['load_average'][0]} at the start and {rec['load_average'][1]} at the end on "
               f"{rec['machine'].get('cpus')} cores; rounds: {spread}")
    else:
        run = f"{provenance.BEFORE} (load average {r.get('load_at_start')} at the start)"
    rounds = f", {len(r['postgres']['seconds'])} runs" + (f" after {r['warmup']} warm-up" if "warmup" in r else "")
    return (f"| sink | median s | rows/s | ratio | target | met | same current result |\n|---|---|---|---|---|---|---|\n"
            f"| parquet (changelog) | {r['parquet']['median_s']} | {r['parquet']['rows_per_s']:,} | | | | |\n"
            f"| postgres (current table) | {r['postgres']['median_s']} | {r['postgres']['rows_per_s']:,} | "
            f"{r['ratio']} | {r['target']} | {'yes' if r['met'] else 'no'} | "
            f"{'yes' if r['check']['equal'] else 'no'} ({r['check']['rows']:,} rows) |\n\n"
            f"{r['rows']:,} rows in {r['files']} micro-batches{rounds}, medians. Run: {run}.\n")


def write(out: Path, result: dict) -> int:
    """The results file, its table next to it, and for the default file the README's table."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    md = markdown(result)
    out.with_suffix(".md").write_text(md)
    if out.resolve() == OUT.resolve():  # the README's table is the default results file's
        README.write_text(readme_with(README.read_text(), md, results="postgres.md"))
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
