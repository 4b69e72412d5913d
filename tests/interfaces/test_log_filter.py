"""PySpark's worker chatter stays out of the command's output and the notebook's cells at the
default log level. CI checks each part in process (the filter of lines, the loggers switched off,
the JVM's log filter and its stderr pipe after a magic cell); test_cli_spark_sql.py runs the
command on a failing stream. The release tier (`--release`) also runs a notebook's cells on a
plain Spark session in a fresh process and reads what the process, JVM included, wrote."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from sqlflow.spark.log_filter import ChatterFilter

#: lines PySpark 4.3 printed while examples/streaming.sql ran (abridged where marked ...)
SEEN = [
    "Starting Streaming TransformWithStateInPandas Python worker.\n",
    "\n",
    "Streaming TransformWithStateInPandas Python worker finish init stage of Python runner. Received UDF from "
    "JVM: <bound method ...>, received return type of UDF: StructType([StructField('__sqlflow_kind', ...)]).\n",
    "\n",
    "Streaming TransformWithStateInPandas Python worker received parameters for UDF. State server port/path: "
    "35813, key schema: StructType([StructField('__sqlflow_bucket', IntegerType(), True)]).\n",
    "\n",
    "26/11/24 05:26:15 WARN TimerStateImpl: Failed to delete timer for key=[4] and timestamp=1 ms since it "
    "does not exist\n",
    "26/11/24 05:25:51 WARN TransformWithStateInPySparkStateServer: No more data to read from the socket\n",
    "26/11/24 05:25:42 WARN MicroBatchExecution: Disabling AQE since AQE is not supported in stateful workloads.\n",
    "26/11/24 05:25:41 WARN ResolveWriteToStream: spark.sql.adaptive.enabled is not supported in streaming "
    "DataFrames/Datasets and will be disabled.\n",
    "26/11/24 05:25:28 WARN DAGScheduler: Failed to cancel job group d672178b. Cannot find active jobs for it.\n",
    "26/11/24 05:25:28 WARN ResolveWriteToStream: Temporary checkpoint location created which is deleted "
    "normally when the query didn't fail: /tmp/temporary-1234.\n",
]
KEPT = [
    "26/11/24 05:25:28 WARN TaskSetManager: Lost task 0.0 in stage 3.0: the user's business\n",
    "\n",
    "Time taken: 1.0 seconds\n",
]
#: what PySpark 4.3's daemon printed when the JVM had closed a worker's connection before its last
#: flush (a benchmark's run; `mapInArrow(...).first()` prints the same), and with
#: spark.python.daemon.killWorkerOnFlushFailure false
DAEMON = [
    "Traceback (most recent call last):\n",
    '  File "/work/venv/lib/python3.11/site-packages/pyspark/python/lib/pyspark.zip/pyspark/daemon.py", line 264, '
    "in manager\n",
    '  File "/work/venv/lib/python3.11/site-packages/pyspark/python/lib/pyspark.zip/pyspark/daemon.py", line 95, '
    "in worker\n",
    "BrokenPipeError: [Errno 32] Broken pipe\n",
    "PySpark daemon failed to flush the output to the worker process:\n",
    "Traceback (most recent call last):\n",
    '  File "/usr/lib/python3/dist-packages/pyspark/daemon.py", line 95, in worker\n',
    "BrokenPipeError: [Errno 32] Broken pipe\n",
]
#: the same with pyspark imported from site-packages (docs/spark-internals.md, 9): each frame with
#: its source line and marks, and two workers' tracebacks interleaved (a benchmark's run)
_FRAME = ['  File "/work/venv/lib/python3.11/site-packages/pyspark/daemon.py", line 264, in manager\n',
          "    code = worker(sock, authenticated)\n", "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"]
_LAST = ['  File "/work/venv/lib/python3.11/site-packages/pyspark/daemon.py", line 95, in worker\n',
         "    outfile.flush()\n", "BrokenPipeError: [Errno 32] Broken pipe\n"]
DAEMON_SOURCES = [DAEMON[0], *_FRAME, *_LAST, DAEMON[0], *_FRAME, DAEMON[0], *_FRAME, *_LAST, *_LAST]
#: a traceback of the user's: every line passed on
THEIRS = [
    "Traceback (most recent call last):\n",
    '  File "/work/venv/lib/python3.11/site-packages/pyspark/python/lib/pyspark.zip/pyspark/daemon.py", line 95, '
    "in worker\n",
    '  File "/home/me/job.py", line 3, in f\n',
    "BrokenPipeError: [Errno 32] Broken pipe\n",
]


def test_the_filter_drops_the_chatter_and_keeps_the_rest():
    keep = ChatterFilter()
    assert [line for line in SEEN + KEPT if keep(line)] == KEPT


def test_the_daemons_closed_connection_tracebacks_are_dropped_and_other_tracebacks_kept():
    keep = ChatterFilter()
    fed = [out for line in DAEMON + SEEN + THEIRS + KEPT + DAEMON[:3] for out in keep.feed(line)]
    assert fed + keep.flush() == THEIRS + KEPT + DAEMON[:3]   # a traceback cut off at the end: passed on
    assert keep.flush() == []
    fed = [out for line in DAEMON_SOURCES + KEPT + THEIRS + DAEMON_SOURCES[:4] for out in keep.feed(line)]
    assert fed + keep.flush() == KEPT + THEIRS + DAEMON_SOURCES[:4]
    alone = ChatterFilter()
    assert [out for line in ["Traceback (most recent call last):\n", "ValueError: x\n"] for out in alone.feed(line)] \
        == ["Traceback (most recent call last):\n", "ValueError: x\n"]


STREAMING_CELLS = r"""
import json, os, shutil, sys, tempfile
from IPython.core.interactiveshell import InteractiveShell
from pyspark.sql import SparkSession
os.environ["PYSPARK_PYTHON"] = sys.executable
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")   # no progress bars between the lines
         .config("spark.sql.shuffle.partitions", "2").getOrCreate())
spark.range(1).collect()
print("=== SESSION STARTED", file=sys.stderr, flush=True)
shell = InteractiveShell.instance()
shell.user_ns["spark"] = spark
shell.run_line_magic("load_ext", "sqlflow")
for cell in [
    "%%sqlflow\nCREATE OR REPLACE TEMPORARY VIEW clicks (user_id STRING, page STRING, ts TIMESTAMP, "
    "arrived_at TIMESTAMP) USING csv OPTIONS (path 'examples/data/clickstream*.csv', header 'true', streaming true)",
    "%%sqlflow -l 3\nSELECT user_id, COUNT(*) AS clicks FROM clicks WATERMARK ts DELAY OF INTERVAL 5 MINUTES\n"
    "GROUP BY user_id WINDOW SESSIONS(GAP 10m) TRIGGER WATERMARK EARLY PERIOD 5m EMIT ACCUMULATING AND RETRACTING",
]:
    assert shell.run_cell(cell).success, cell
print("=== FAILING CELL", file=sys.stderr, flush=True)
r = shell.run_cell("%%sqlflow\nSELECT user_id, SUM(1/0) AS bad FROM clicks WATERMARK ts DELAY OF INTERVAL 5 MINUTES\n"
                   "GROUP BY user_id WINDOW SESSIONS(GAP 10m) EMIT ACCUMULATING")
assert not r.success
print("=== PYTHON API", file=sys.stderr, flush=True)
# the README's Python stream example (its session, sqlflow.local_session, has the RocksDB state store)
import sqlflow
spark.conf.set("spark.sql.streaming.stateStore.providerClass",
               "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
work = tempfile.mkdtemp()
os.makedirs(work + "/in")
with open(work + "/in/clicks-1.json", "w") as f:
    for user, amount, t in [("u1", 5.0, "08:00:05"), ("u1", 2.5, "08:00:40"), ("u2", 9.0, "08:00:50"),
                            ("u1", 1.0, "08:02:30")]:
        f.write(json.dumps({"user_id": user, "amount": amount, "event_time": f"2024-03-01 {t}"}) + "\n")
spark.readStream.schema("user_id string, amount double, event_time timestamp") \
     .json(work + "/in").createOrReplaceTempView("live_clicks")
live = sqlflow.sql(spark, '''
    SELECT user_id, SUM(amount) AS total FROM live_clicks
    WATERMARK event_time DELAY OF INTERVAL 10 SECONDS
    GROUP BY user_id WINDOW FIXED(SIZE 1m) TRIGGER WATERMARK EARLY PERIOD 10s''')
query = sqlflow.start(live, format="parquet", path=work + "/out", checkpoint=work + "/cp",
                      trigger_interval="10 seconds")
query.processAllAvailable()
query.stop()
print("PANES", spark.read.parquet(work + "/out").count())
shutil.rmtree(work)
print("CELLS DONE")
"""


def _sections(stderr: str, stderr_lines) -> dict[str, list[str]]:
    """The lines of stderr after each "=== NAME" marker the script printed (less Spark's start-up
    lines and progress bars)."""
    sections: dict[str, list[str]] = {"start": []}
    current = "start"
    for line in stderr_lines(stderr):
        if line.startswith("=== "):
            current = line[4:]
            sections[current] = []
        else:
            sections[current].append(line)
    return sections


@pytest.mark.slow
@pytest.mark.release
def test_a_notebook_on_a_plain_spark_session_shows_no_chatter_and_failures_alone(repo_root, stderr_lines):
    proc = subprocess.run([sys.executable, "-c", STREAMING_CELLS], capture_output=True, text=True,
                          cwd=repo_root, timeout=1200, env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    assert "CELLS DONE" in proc.stdout, proc.stdout + proc.stderr
    assert "finished:" in proc.stdout and "PANES 3" in proc.stdout
    shown = _sections(proc.stderr, stderr_lines)
    assert shown["start"] == []
    # the streaming cells, the failing one and the README's Python stream: not a line on stderr
    # (but Spark's word that a batch took longer than the user's trigger interval: on a busy
    # machine, a micro-batch of the README's example can take more than its 10 seconds)
    python_api = [line for line in shown["PYTHON API"] if "WARN ProcessingTimeExecutor: Current batch is falling "
                  "behind. The trigger interval is 10000 milliseconds" not in line]
    assert (shown["SESSION STARTED"], shown["FAILING CELL"], python_api) == ([], [], [])
    # the failed stream's cell: its view ("failed" and the message), then the located error
    failed = proc.stdout[proc.stdout.index("sqlflow: STREAM: the streaming query"):]
    assert "[DIVIDE_BY_ZERO] Division by zero." in failed and "\tat " not in proc.stdout


@pytest.mark.slow
@pytest.mark.release  # in CI: a failing stream's command (test_cli_spark_sql.py), and test_cli.py's in-process run of the script
def test_the_command_prints_its_progress_and_timings_alone(sqlflow_cli, tmp_path, stderr_lines):
    r = sqlflow_cli("-f", "examples/streaming.sql", "-d", f"out={tmp_path}")
    assert r.returncode == 0, r.stderr
    lines = stderr_lines(r.stderr)
    assert lines[0].startswith("Spark master: ")
    pattern = r"query \w+ batch \d+: (\d+) input rows(?:, (\d+) panes)?(?:, \d+ [a-z ]+)*"
    progress = [re.fullmatch(pattern, line) for line in lines if line.startswith("query ")]
    assert all(progress) and len(progress) >= 2, lines   # how the panes spread over batches varies
    assert sum(int(m.group(1)) for m in progress) == 141 and sum(int(m.group(2) or 0) for m in progress) == 21
    timings = [line for line in lines if line.startswith("Time taken: ")]
    assert len(timings) == 6 and len(lines) == 1 + len(progress) + 6, lines   # nothing else


def _level(spark, name: str) -> str:
    return str(spark._jvm.org.apache.logging.log4j.LogManager.getLogger(name).getLevel())


def test_the_operators_loggers_are_off_and_failure_loggers_only_while_a_statement_runs(spark):
    from sqlflow.spark.log_filter import FAILURE_LOGGERS, QUIET_LOGGERS, failures_reported, quiet

    quiet(spark)
    assert {_level(spark, name) for name in QUIET_LOGGERS} == {"OFF"}
    state_server = "org.apache.spark.sql.execution.python.streaming.TransformWithStateInPySparkStateServer"
    assert _level(spark, state_server) == "OFF"
    spark.sparkContext.setLogLevel("WARN")   # the session's level (a test before may have changed it)
    before = {name: _level(spark, name) for name in FAILURE_LOGGERS}
    assert set(before.values()) == {"WARN"}
    with failures_reported(spark):
        assert {_level(spark, name) for name in FAILURE_LOGGERS} == {"OFF"}
    assert {name: _level(spark, name) for name in FAILURE_LOGGERS} == before
    spark.sparkContext.setLogLevel("ERROR")   # they follow the session's level again
    try:
        assert {_level(spark, name) for name in FAILURE_LOGGERS} == {"ERROR"}
    finally:
        spark.sparkContext.setLogLevel("WARN")


def test_after_a_magic_cell_the_jvms_log_drops_the_chatter_of_general_loggers(spark, ipython):
    """The log4j filter `quiet` adds (the magic calls it on the session it runs on): a line of a
    general logger about sqlflow's streams is denied, any other passes on to the loggers' levels."""
    from sqlflow.spark.log_filter import PATTERNS

    assert ipython.run_cell("%sqlflow SELECT 1 AS one", store_history=False).success
    log4j = spark._jvm.org.apache.logging.log4j
    config = log4j.LogManager.getContext(False).getConfiguration()

    def verdict(line: str) -> str:
        event = (log4j.core.impl.Log4jLogEvent.newBuilder().setLoggerName("org.apache.spark.sql.Some")
                 .setLevel(log4j.Level.WARN).setMessage(log4j.message.SimpleMessage(line)).build())
        return str(config.getFilter().filter(event))

    chatter = [line.split(": ", 1)[1].strip() for line in SEEN if " WARN " in line]   # the message alone
    assert [verdict(line) for line in chatter] == ["DENY"] * len(chatter)
    assert [verdict(f"before {p} after") for p in PATTERNS] == ["DENY"] * len(PATTERNS)
    assert verdict("Lost task 0.0 in stage 3.0: the user's business") == "NEUTRAL"


def test_the_jvms_stderr_reaches_the_cell_less_the_workers_chatter(spark, capsys):
    """What the JVM prints on System.err (where Spark copies its Python workers' output) is read
    through a pipe and written to this process's stderr (a cell's) less the chatter. The JVM's
    System.err is put back after, and the pipe closed."""
    import threading

    from sqlflow.spark.log_filter import _filter_system_err

    system = spark._jvm.java.lang.System
    before, threads = system.err, set(threading.enumerate())
    _filter_system_err(spark._jvm)
    (copier,) = set(threading.enumerate()) - threads
    piped = system.err
    try:
        for line in SEEN + DAEMON + KEPT:
            piped.print(line)
    finally:
        system.setErr(before)
        piped.close()   # the copying thread reads to the end of the pipe and stops
    copier.join(timeout=120)
    assert not copier.is_alive()
    assert capsys.readouterr().err == "".join(KEPT)
