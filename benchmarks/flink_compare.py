"""Scenarios f1 to f5 of the comparison suite (benchmarks/compare.py): sqlflow against Flink SQL 2.3.

Flink runs in its own virtualenv (`apache-flink==2.3.*` pins py4j, apache-beam 2.61 and pyarrow
versions that clash with sqlflow's), created under benchmarks/data/ on first use and reused
(`flink_python`), as one subprocess (benchmarks/flink_side.py) that starts the JVM and a
mini-cluster once (parallelism 2, as Spark's local[2]) and runs one job per request. Neither
side's start-up is timed: Spark's session and Flink's JVM and mini-cluster are both up before the
first round, and both are reported separately. Both sides read the same CSV (`events.csv_dataset`:
no extra jar on either side), compute COUNT(*) and SUM(amount) per user and window with the
default trigger (one final value per window), and write to a sink that discards (Spark's noop,
Flink's blackhole); an untimed run of each writes its rows, which must be equal:

  f1  fixed 1-minute windows, bounded: sqlflow on the CSV file vs Flink's TUMBLE in batch mode.
  f2  sessions (gap 5 minutes), bounded: sqlflow on the CSV file vs Flink's SESSION in streaming
      mode over the bounded file (Flink 2.3's batch mode refuses session windows: "Unaligned
      windows like session are not supported in batch mode yet"), watermark DELAY behind.
  f3  fixed 1-minute windows, streaming, watermark DELAY behind: sqlflow's live stream (a file
      stream of the rows in --files CSV files, one per micro-batch, availableNow, then finished so
      that every window is emitted, as Flink does at the end of its input) vs Flink's streaming
      mode.
  f4  sessions, streaming: as f3.
  f3o, f4o  f3 and f4 with sqlflow's stream on the owned-sink executor (`start(...,
      executor="owned")`, docs/streaming.md 3.0) rather than the stateful operator.
  f5  ordering by event time, streaming: `ORDER BY event_time, user_id` over the watermarked rows
      (no window), sqlflow's live stream as f3 (its ordering operator, docs/streaming.md 5.5) vs
      Flink's streaming ORDER BY on its time attribute (a temporal sort); both emit every row,
      each once the watermark passes it. The rows must be the same (as multisets), and sqlflow's
      in event-time order across its micro-batches.

DELAY is 30 minutes, the data's largest lateness (events.py): no row is late on either side, so
the final values are those of the bounded data and can be compared exactly (the sums are of
BIGINT amounts: exact integers, no tolerance). With a shorter delay each side drops late rows by
its own rule (Spark: against the watermark of the previous micro-batch; Flink: against a
watermark that moves with every record), and their final values would differ by design.

Flink's streaming jobs read the one CSV file in arrival order, not the folder of files that
sqlflow's stream reads: Flink's file source hands a folder's files to its readers in no
particular order (its split assigner iterates a HashSet), so a later file read before an earlier
one moves the watermark past the earlier file's rows and drops them as late (measured: 39% of the
fixed windows lost on 200,000 rows in 5 files). A CSV file is one split for Flink (not
splittable): one of its two source readers reads it, both run the windows.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import events
import provenance
from finals import finals, same_rows
from measure import PeakMemory, measure, noop

HERE = Path(__file__).resolve().parent
REQUIREMENT = "apache-flink==2.3.*"
DELAY_MS = 30 * 60 * 1000
SCENARIOS = ("f1", "f2", "f3", "f4", "f3o", "f4o", "f5")
#: scenario -> (window, Flink's runtime mode, streaming input on sqlflow's side)
SHAPES = {"f1": ("tumble", "batch", False), "f2": ("session", "streaming", False),
          "f3": ("tumble", "streaming", True), "f4": ("session", "streaming", True),
          "f3o": ("tumble", "streaming", True), "f4o": ("session", "streaming", True),
          "f5": ("order", "streaming", True)}
#: the scenarios whose stream runs on the owned-sink executor
OWNED = ("f3o", "f4o")
WINDOW = {"tumble": "FIXED(SIZE 1m)", "session": "SESSIONS(GAP 5m)"}
ANSWER = "@flink-side "  # prefix of flink_side.py's answers on its stdout (the JVM may print too)


def sqlflow_query(window: str, streaming: bool) -> str:
    if window == "order":
        return (f"SELECT user_id, amount, event_time FROM flink_stream WATERMARK event_time DELAY OF "
                f"{DELAY_MS // 60_000}m\nORDER BY event_time, user_id")
    source = f"flink_stream WATERMARK event_time DELAY OF INTERVAL {DELAY_MS // 60_000} MINUTES" if streaming \
        else "flink_events"
    on = "" if streaming else " ON event_time"
    return (f"SELECT user_id, COUNT(*) AS clicks, SUM(amount) AS total FROM {source}\n"
            f"GROUP BY user_id WINDOW {WINDOW[window]}{on}")


# --------------------------------------------------------------------------------------------
# the Flink side: its virtualenv and its process


def flink_venv() -> Path:
    return Path(os.environ.get("SQLFLOW_FLINK_VENV", events.DATA / "flink-venv"))


def flink_python() -> Path:
    """The Flink virtualenv's interpreter, creating the virtualenv on first use (a few minutes)."""
    venv = flink_venv()
    python, marker = venv / "bin" / "python", venv / "sqlflow-installed.txt"
    if marker.exists() and marker.read_text().strip() == REQUIREMENT and python.exists():
        return python
    if shutil.which("java") is None:
        raise RuntimeError("Flink needs Java 11 or 17 on the PATH (e.g. apt-get install openjdk-17-jre-headless)")
    print(f"  creating the Flink virtualenv {venv} ({REQUIREMENT}; once)", flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    proc = subprocess.run([str(python), "-m", "pip", "install", "-q", REQUIREMENT], capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"pip install {REQUIREMENT} failed:\n{proc.stderr[-4000:]}")
    marker.write_text(REQUIREMENT + "\n")
    return python


class FlinkSide:
    """flink_side.py in its virtualenv: one JVM and mini-cluster for all the rounds."""

    def __init__(self, log: Path):
        self.log = log
        with open(log, "w") as err:
            self.proc = subprocess.Popen([str(flink_python()), str(HERE / "flink_side.py")], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=err, text=True, bufsize=1)
        self.ready = self._answer()
        PeakMemory.foreign.add(self.proc.pid)  # measured on its own (flink_side.peak_rss_mb)

    def _answer(self) -> dict:
        for line in self.proc.stdout:
            if line.startswith(ANSWER):
                answer = json.loads(line[len(ANSWER):])
                if "error" in answer:
                    raise RuntimeError(f"Flink failed: {answer['error']}")
                return answer
        raise RuntimeError(f"flink_side.py ended (exit {self.proc.wait()}):\n{self.log.read_text()[-4000:]}")

    def run(self, **request) -> dict:
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        return self._answer()

    def close(self) -> None:
        PeakMemory.foreign.discard(self.proc.pid)
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


# --------------------------------------------------------------------------------------------
# the sqlflow side


def register_inputs(spark, rows: int, files: int) -> dict:
    """The views `flink_events` (the CSV file) and `flink_stream` (its rows in `files` CSV files,
    one per micro-batch), event_time a TIMESTAMP from the epoch milliseconds, as Flink reads them."""
    path, folder = events.csv_dataset(rows), events.csv_stream_files(rows, files)
    columns = ("user_id", "amount", "timestamp_millis(event_ms) AS event_time")
    spark.read.schema(events.CSV_COLUMNS).csv(str(path)).selectExpr(*columns).createOrReplaceTempView("flink_events")
    (spark.readStream.schema(events.CSV_COLUMNS).option("maxFilesPerTrigger", 1).csv(str(folder))
     .selectExpr(*columns).createOrReplaceTempView("flink_stream"))
    return {"file": path, "folder": folder}


def run_stream(spark, query: str, work: Path, *, out: Path | None = None, executor: str = "operator"):
    """sqlflow's live stream of `query` on `executor`, availableNow and finished (every window
    emitted), to the noop sink or to parquet at `out`; returns the last StreamingQuery."""
    from sqlflow.spark import streaming
    from sqlflow.spark.api import run_sql

    checkpoint = tempfile.mkdtemp(dir=work)
    panes = run_sql(spark, query, finish_dir=checkpoint + "-finish")
    if out is None:
        return streaming.start(panes, format="noop", checkpoint=checkpoint, available_now=True, finish=True,
                               executor=executor)
    return streaming.start(panes, format="parquet", path=str(out), checkpoint=checkpoint, available_now=True,
                           finish=True, executor=executor)


def executor(name: str) -> str:
    return "owned" if name in OWNED else "operator"


def batch_profile(query) -> dict:
    """Where a finished stream's time went, from Spark's progress of its last run (the finishing
    one: the data's micro-batches, then the finish marker's): per micro-batch, the whole batch and
    its addBatch (the query's work; the rest is offsets, planning and commits)."""
    batches = query.recentProgress
    return {"micro_batches": len(batches),
            "batch_ms": [b["durationMs"].get("triggerExecution") for b in batches],
            "add_batch_ms": [b["durationMs"].get("addBatch") for b in batches],
            "input_rows": [b["numInputRows"] for b in batches]}


def sides(spark, flink: FlinkSide, name: str, inputs: dict, work: Path) -> dict:
    import sqlflow

    window, mode, streaming = SHAPES[name]
    query = sqlflow_query(window, streaming)
    if streaming:
        def ours():
            return batch_profile(run_stream(spark, query, work, executor=executor(name)))
    else:
        def ours():
            noop(sqlflow.sql(spark, query))

    def theirs():
        r = flink.run(window=window, mode=mode, path=str(inputs["file"]), delay_ms=DELAY_MS, out=None)
        return {"timed_s": r["seconds"], "flink_peak_rss_mb": r["peak_rss_mb"], "job_run_s": r["job_run_s"],
                "vertices": r["vertices"]}

    return {"sqlflow": ours, "reference": theirs}


def check(spark, flink: FlinkSide, name: str, inputs: dict, work: Path) -> dict:
    """One untimed run of each side writing its rows; both sets of final values must be equal."""
    import sqlflow

    window, mode, streaming = SHAPES[name]
    query = sqlflow_query(window, streaming)
    if streaming:
        out = work / f"{name}-sqlflow"
        run_stream(spark, query, work, out=out, executor=executor(name))
        ours = finals(spark.read.parquet(str(out)))
    else:
        ours = finals(sqlflow.sql(spark, query))
    folder = work / f"{name}-flink"
    flink.run(window=window, mode=mode, path=str(inputs["file"]), delay_ms=DELAY_MS, out=str(folder))
    if window == "order":
        return order_check(spark, out, folder)
    theirs = (spark.read.schema("user_id BIGINT, start_ms BIGINT, end_ms BIGINT, clicks BIGINT, total BIGINT")
              .csv(str(folder)).selectExpr("user_id", "timestamp_millis(start_ms) AS window_start",
                                           "timestamp_millis(end_ms) AS window_end", "clicks", "total"))
    result = same_rows(ours, theirs)
    result["input_rows_counted"] = {"sqlflow": ours.agg({"clicks": "sum"}).first()[0],
                                    "flink": theirs.agg({"clicks": "sum"}).first()[0]}
    return result


def order_check(spark, ours_path: Path, theirs_path: Path) -> dict:
    """f5: the same rows on both sides (as multisets of user_id, amount, event time in ms), and
    sqlflow's micro-batches in event-time order (every batch's rows at or above the previous
    batch's largest event time)."""
    from pyspark.sql import functions as F

    ours_df = spark.read.parquet(str(ours_path))
    ours = ours_df.selectExpr("user_id", "amount", "unix_millis(event_time) AS event_ms")
    theirs = spark.read.schema("user_id BIGINT, amount BIGINT, event_ms BIGINT").csv(str(theirs_path))
    only_ours, only_theirs = ours.exceptAll(theirs).count(), theirs.exceptAll(ours).count()
    batches = (ours_df.groupBy("emit_time").agg(F.min("event_time").alias("lo"), F.max("event_time").alias("hi"))
               .orderBy("emit_time").collect())
    ordered = all(a["hi"] <= b["lo"] for a, b in zip(batches, batches[1:]))
    rows, reference_rows = ours.count(), theirs.count()
    return {"equal": only_ours == only_theirs == 0 and ordered, "rows": rows, "reference_rows": reference_rows,
            "only_sqlflow": only_ours, "only_reference": only_theirs, "emit_batches": len(batches),
            "batches_in_event_time_order": ordered}


def run(spark, only: list[str], rows: int, files: int, repeat: int, warmup: int, work: Path,
        facts: dict | None = None) -> dict:
    """Scenarios `only` (of f1-f5) on `rows` rows; returns their results (summarised by compare.py),
    each with its record when given the run's `facts` (benchmarks/provenance.py)."""
    inputs = register_inputs(spark, rows, files)
    flink = FlinkSide(work / "flink-side.log")
    results = {}
    try:
        for name in only:
            window, mode, streaming = SHAPES[name]
            print(f"scenario {name}: {'ORDER BY event time' if window == 'order' else window + ' windows'}, {'streaming' if streaming else 'bounded'}, {rows:,} rows, "
                  f"vs Flink {flink.ready['flink']} ({mode} mode)", flush=True)
            at_start = provenance.load()
            r = measure(sides(spark, flink, name, inputs, work), rows, repeat, warmup)
            r["check"] = check(spark, flink, name, inputs, work)
            results[name] = dict(r, rows=rows, stream_files=files, flink_mode=mode, delay_ms=DELAY_MS,
                                 flink_version=flink.ready["flink"], flink_startup_s=flink.ready["startup_s"],
                                 parallelism=flink.ready["parallelism"])
            if facts is not None:
                results[name]["record"] = provenance.record(facts, at_start, r, flink=flink.ready["flink"])
    finally:
        flink.close()
    return results


def notes(results: dict) -> list[str]:
    """What the table's f rows need said: start-ups (not timed), watermark, inputs, and where each
    side's time went (Flink: planning and submission vs the job on the cluster; sqlflow's streams:
    their micro-batches)."""
    done = {k: results[k] for k in SCENARIOS if k in results}
    if not done:
        return []
    r = list(done.values())[-1]
    lines = ["", f"Scenarios f1-f5 (benchmarks/flink_compare.py): Flink {r['flink_version']} in its own virtualenv, "
             f"a local mini-cluster at parallelism {r['parallelism']} (Spark: local[2]), both reading the same CSV "
             f"(epoch milliseconds; no extra jars). Start-up is not timed on either side: Flink's JVM and "
             f"mini-cluster took {r['flink_startup_s']} s, Spark's session {r['spark_startup_s']} s. Watermark "
             f"(Flink's streaming mode, f2-f5, and sqlflow's streams, f3-f5): {r['delay_ms'] // 60_000} minutes "
             f"behind the largest event time, the data's largest lateness, so no row is late on either side and "
             f"the final values are compared exactly. f3-f5: sqlflow's live stream reads the rows in "
             f"{r['stream_files']} files, one per micro-batch (availableNow, then finished: every window emitted, "
             f"as Flink does at the end of its input); Flink reads the one file in arrival order (its file source "
             f"reads a folder's files in no order).", ""]
    for name, r in done.items():
        ref, ours = r["reference"], r["sqlflow"]
        line = (f"- {name}, last round: Flink's job ran {ref.get('job_run_s')} s on the cluster of its "
                f"{ref['seconds'][-1]} s (the rest: planning and submission)")
        if "batch_ms" in ours:
            line += (f"; sqlflow's stream ran {ours['micro_batches']} micro-batches of "
                     f"{', '.join(f'{b / 1000:.1f}' for b in ours['batch_ms'])} s (of which the query's own work, "
                     f"addBatch: {', '.join(f'{b / 1000:.1f}' for b in ours['add_batch_ms'])} s)")
        lines.append(line + ".")
    return lines
