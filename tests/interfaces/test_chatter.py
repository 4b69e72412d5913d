"""PySpark's worker chatter stays out of the command's output and the notebook's cells at the
default log level. The slow tests run a stateful streaming query (its
transformWithState driver worker prints at start) in a fresh process and read what the process,
JVM included, wrote."""
from __future__ import annotations

import subprocess
import sys

import pytest

from sqlflow.interfaces.chatter import PATTERNS, ChatterFilter

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


def test_the_filter_drops_the_chatter_and_keeps_the_rest():
    keep = ChatterFilter()
    assert [line for line in SEEN + KEPT if keep(line)] == KEPT


STREAMING_CELLS = r'''
import os, sys
from IPython.core.interactiveshell import InteractiveShell
from pyspark.sql import SparkSession
os.environ["PYSPARK_PYTHON"] = sys.executable
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "2")
         .config("spark.sql.streaming.stateStore.providerClass",
                 "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
         .getOrCreate())
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
print("CELLS DONE")
'''


@pytest.mark.slow
def test_no_chatter_in_a_notebook_on_a_plain_spark_session(repo_root):
    proc = subprocess.run([sys.executable, "-c", STREAMING_CELLS], capture_output=True, text=True,
                          cwd=repo_root, timeout=900, env={**__import__("os").environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    assert "CELLS DONE" in proc.stdout, proc.stdout + proc.stderr
    shown = proc.stdout + proc.stderr
    assert "finished:" in shown
    assert [p for p in PATTERNS if p in shown] == []


@pytest.mark.slow
def test_no_chatter_from_the_command(sqlflow_cli, tmp_path):
    r = sqlflow_cli("-f", "examples/streaming.sql", "-d", f"out={tmp_path}")
    assert r.returncode == 0, r.stderr
    assert "batch 0: 141 input rows" in r.stderr and "Time taken:" in r.stderr
    assert [p for p in PATTERNS if p in r.stderr] == []
    assert "\n\n" not in r.stderr
