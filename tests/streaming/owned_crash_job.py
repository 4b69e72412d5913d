"""A streaming job for the kill -9 tests of the owned-sink executor, run as a script in its own
process group (so the job can SIGKILL its driver with the JVM and the Python workers): sessions
with early and late firings, accumulating and retracting, over the parquet files in INPUT (one
file per micro-batch), written to parquet under OUT (one directory per batch) with checkpoint
CHECKPOINT; then the input is finished.

    python owned_crash_job.py INPUT OUT CHECKPOINT [BATCH:POINT]

With BATCH:POINT the job kills its own process group with SIGKILL when micro-batch BATCH reaches
POINT (`sqlflow.spark.streaming.owned.fault`'s points: mid-batch, after-state, after-sink): the
driver dies at a point chosen exactly, not at a moment a poll happened to see.
"""
from __future__ import annotations

import os
import signal
import sys

QUERY = """SELECT k, SUM(v) AS total, COUNT(*) AS n
FROM crash_in WATERMARK ts DELAY OF INTERVAL 10 SECONDS
GROUP BY k
WINDOW SESSIONS(GAP 1m)
TRIGGER WATERMARK EARLY COUNT 1 LATE COUNT 1
ALLOWED LATENESS 5m
EMIT ACCUMULATING AND RETRACTING"""


def run(spark, input_dir: str, out: str, checkpoint: str, kill_at: str | None = None):
    import sqlflow
    from sqlflow.spark import streaming as S
    from sqlflow.spark.streaming import owned

    spark.readStream.schema("k string, ts timestamp, v long").option("maxFilesPerTrigger", 1) \
        .parquet(input_dir).createOrReplaceTempView("crash_in")
    spark.conf.set(S.CONF_FINISH_DIR, checkpoint + "-finish")
    try:
        df = sqlflow.sql(spark, QUERY)
    finally:
        spark.conf.unset(S.CONF_FINISH_DIR)
    if kill_at:
        batch, point = kill_at.split(":")

        def fault(at: str, batch_id: int) -> None:
            if batch_id == int(batch) and at == point:
                print(f"KILLED {batch_id}:{at}", flush=True)
                os.killpg(os.getpgid(0), signal.SIGKILL)

        owned.fault = fault
    try:
        return sqlflow.start(df, format="parquet", path=out, checkpoint=checkpoint, available_now=True, finish=True,
                             executor="owned")
    finally:
        owned.fault = None


if __name__ == "__main__":
    from sqlflow.spark.session import local_session

    session = local_session(app_name="owned-crash-job")
    run(session, *sys.argv[1:5])
    print("DONE", flush=True)
    session.stop()
