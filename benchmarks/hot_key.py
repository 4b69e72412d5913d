"""Peak memory of one Python worker when every row has the same key (a hot key).

On the engine path all rows of a key are in one bucket, which one Python worker processes. This
measures that worker's peak resident memory (the largest `VmHWM` of `/proc/<pid>/status` over
Spark's Python processes, sampled every 20 ms while the query runs, each case in a fresh Spark
session so no worker carries an earlier peak) for queries over `rows` clicks of one user:

- `sessions`: scenario 2's query (benchmarks/compare.py): replayed sessions, early firings every
  minute, late firings, accumulating and retracting;
- `fixed`: replayed 1-minute windows with early firings every minute, accumulating.

The clicks are benchmarks/events.py's (out-of-order arrivals, ~1.4% late), every user_id set to 1.

    python benchmarks/hot_key.py                       # 2M and 10M rows, both queries
    python benchmarks/hot_key.py --rows 2000000 --cases sessions

Writes benchmarks/results/hot_key.json; the README's note on it is regenerated from that file
(`hot_key.markdown`, between its two hot_key.md markers).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import events  # noqa: E402
import provenance  # noqa: E402

QUERIES = {
    "sessions": """SELECT user_id, COUNT(*) AS clicks, SUM(amount) AS total
FROM events WATERMARK event_time DELAY OF INTERVAL 1 MINUTE ARRIVAL arrival_time
GROUP BY user_id WINDOW SESSIONS(GAP 5m)
TRIGGER SEQUENCE(REPEAT_UNTIL(PERIOD 1m, WATERMARK), REPEAT(WATERMARK))
ALLOWED LATENESS 1h EMIT ACCUMULATING AND RETRACTING""",
    "fixed": """SELECT user_id, COUNT(*) AS clicks, SUM(amount) AS total
FROM events WATERMARK event_time DELAY OF INTERVAL 1 MINUTE ARRIVAL arrival_time
GROUP BY user_id WINDOW FIXED(SIZE 1m)
TRIGGER WATERMARK EARLY PERIOD 1m LATE WATERMARK
ALLOWED LATENESS 1h EMIT ACCUMULATING""",
}
OUT = HERE / "results" / "hot_key.json"
README = HERE.parent / "README.md"
BEGIN, END = "<!-- benchmarks/results/hot_key.md: begin -->", "<!-- benchmarks/results/hot_key.md: end -->"
TARGET_MIB = 1024  # at 10M rows


def one_key(rows: int) -> Path:
    """events.dataset(rows) with every user_id 1, written once next to it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = events.DATA / f"hot-key-v{events.VERSION}-{rows}.parquet"
    if not path.exists():
        table = pq.read_table(events.dataset(rows))
        table = table.set_column(0, "user_id", pa.repeat(pa.scalar(1, pa.int64()), table.num_rows))
        tmp = path.with_suffix(".tmp")
        pq.write_table(table, tmp, row_group_size=1_000_000)
        tmp.rename(path)
    return path


class WorkerPeak:
    """The largest VmHWM (peak resident set) of this process's Python descendants, sampled."""

    def __init__(self, interval: float = 0.02):
        import psutil

        self.psutil, self.interval = psutil, interval
        self.peak: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        for p in self.psutil.Process().children(recursive=True):
            try:
                if not p.name().startswith("python"):
                    continue
                with open(f"/proc/{p.pid}/status") as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            kib = int(line.split()[1])
                            self.peak[p.pid] = max(self.peak.get(p.pid, 0), kib * 1024)
            except (OSError, self.psutil.Error):
                continue

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval)

    def __enter__(self) -> "WorkerPeak":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def run_case(case: str, rows: int) -> dict:
    """One query over the hot-key data in a fresh local Spark session: seconds, panes, the
    largest peak RSS of one Python worker and the base peak of an idle worker."""
    import sqlflow
    from sqlflow.spark.session import local_session

    spark = local_session(app_name="sqlflow-hot-key", conf={"spark.driver.memory": "4g"})
    try:
        spark.read.parquet(str(one_key(rows))).createOrReplaceTempView("events")
        with WorkerPeak() as idle:  # a trivial Python job: what a worker holds before any rows
            spark.range(1).mapInArrow(lambda batches: batches, "id long").count()
        df = sqlflow.sql(spark, QUERIES[case])
        start = time.perf_counter()
        with WorkerPeak() as peak:
            panes = df.count()
        seconds = time.perf_counter() - start
    finally:
        spark.stop()
    worst = max(peak.peak.values(), default=0)
    return {"case": case, "rows": rows, "seconds": round(seconds, 1), "panes": panes,
            "peak_worker_mib": round(worst / 2**20), "idle_worker_mib": round(max(idle.peak.values(), default=0) / 2**20),
            "bytes_per_row": round(worst / rows)}


def markdown(record: dict) -> str:
    """The results as the README's table: one row per query and size, the target at 10M rows, and
    the run that measured the row (its record, benchmarks/provenance.py)."""
    lines = ["Each query in a fresh Spark session; the machine is shared: times are for orientation only.", "",
             "| query, one key | rows | peak RSS of one Python worker | bytes per row | time | target | run |",
             "|---|---|---|---|---|---|---|"]
    for r in sorted(record["results"].values(), key=lambda r: (r["case"], r["rows"])):
        target = "n/a"
        if r["rows"] >= 10_000_000:
            target = f"<= {TARGET_MIB:,} MiB: {'met' if r['peak_worker_mib'] <= TARGET_MIB else '**missed**'}"
        rec = r.get(provenance.KEY)
        run = provenance.BEFORE if not rec else (
            f"commit {(rec.get('commit') or 'unknown')[:12]}{' (dirty)' if (rec.get('commit') or '').endswith('dirty') else ''}, "
            f"{rec['finished']}, PySpark {rec['versions'].get('pyspark')}, load {rec['load_average'][0]} to "
            f"{rec['load_average'][1]}")
        lines.append(f"| {r['case']} | {r['rows']:,} | {r['peak_worker_mib']:,} MiB | {r['bytes_per_row']} | "
                     f"{r['seconds']} s | {target} | {run} |")
    old = record.get(provenance.OLD_HEADER)
    if old and any(provenance.KEY not in r for r in record["results"].values()):
        lines += ["", f"{provenance.BEFORE.capitalize()}: the file's one header then: `{old.get('command')}`, finished "
                  f"{old.get('finished')} on {old.get('cpus')} cores, PySpark {old.get('pyspark')}, load average "
                  f"{old.get('load_average')} at the end (of the last run merged into the file)."]
    return "\n".join(lines) + "\n"


def write_report(out: Path, record: dict) -> str:
    """The results file, its Markdown table next to it, and (the default file) the README's table."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2) + "\n")
    table = markdown(record)
    out.with_suffix(".md").write_text(table)
    if out.resolve() == OUT.resolve():
        README.write_text(readme_with(README.read_text(), table))
    return table


def readme_with(readme: str, table: str) -> str:
    head, begin, rest = readme.partition(BEGIN)
    _, end, tail = rest.partition(END)
    if not begin or not end:
        raise ValueError(f"README.md has no {BEGIN} ... {END} region")
    return f"{head}{BEGIN}\n{table}{END}{tail}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="2000000,10000000")
    ap.add_argument("--cases", default=",".join(QUERIES))
    ap.add_argument("--one", help=argparse.SUPPRESS)  # case:rows, run in this process (a child)
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--report", action="store_true", help="only rewrite the table from the results file")
    args = ap.parse_args(argv)
    if args.one:
        case, rows = args.one.split(":")
        print(json.dumps(run_case(case, int(rows))))
        return 0
    out = Path(args.out)
    previous = provenance.with_records(json.loads(out.read_text())) if out.exists() else {}
    if args.report:
        print(write_report(out, previous))
        return 0
    facts = provenance.run_facts("hot_key.py", argv)
    results = dict(previous.get("results", {}))
    for rows in (int(r) for r in args.rows.split(",")):
        for case in args.cases.split(","):
            at_start = provenance.load()
            proc = subprocess.run([sys.executable, __file__, "--one", f"{case}:{rows}"], capture_output=True,
                                  text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(
                                      [str(HERE.parent), os.environ.get("PYTHONPATH", "")])})
            if proc.returncode:
                print(proc.stderr[-3000:], file=sys.stderr)
                return proc.returncode
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            print(r, flush=True)
            results[f"{case}-{rows}"] = dict(r, record=provenance.record(facts, at_start))
    record = {"benchmark": "benchmarks/hot_key.py", "queries": QUERIES, "target_mib_at_10m": TARGET_MIB,
              "results": results, **provenance.kept_header(previous, results)}
    print(write_report(out, record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
