"""A streaming job for the kill -9 tests of the PostgreSQL sink, run as a script in its own
process group (so a test, or the job itself, can SIGKILL the driver with its JVM and workers):
sessions in DISCARDING mode (each pane adds to its row: a batch applied twice would show) over
the parquet files in INPUT, one file per micro-batch, kept in the
PostgreSQL table TABLE at URL with checkpoint CHECKPOINT; then the input is finished.

    python crash_job.py INPUT URL TABLE CHECKPOINT [BATCH:STEP]

With BATCH:STEP the job kills its own process group with SIGKILL when the sink reaches STEP of
micro-batch BATCH (sqlflow.spark.sinks.postgres.STEPS: begin, recorded, applied, committed):
the driver dies at a point chosen exactly, not at a moment a poll happened to see.
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
EMIT DISCARDING"""


def run(spark, input_dir: str, url: str, table: str, checkpoint: str, kill_at: str | None = None):
    import sqlflow
    from sqlflow.spark import streaming as S

    spark.readStream.schema("k string, ts timestamp, v long").option("maxFilesPerTrigger", 1) \
        .parquet(input_dir).createOrReplaceTempView("crash_in")
    spark.conf.set(S.CONF_FINISH_DIR, checkpoint + "-finish")
    try:
        df = sqlflow.sql(spark, QUERY)
    finally:
        spark.conf.unset(S.CONF_FINISH_DIR)
    options = {}
    if kill_at:
        batch, step = kill_at.split(":")

        def on_step(batch_id: int, name: str) -> None:
            if batch_id == int(batch) and name == step:
                print(f"KILLED {batch_id}:{name}", flush=True)
                os.killpg(os.getpgid(0), signal.SIGKILL)

        options["on_step"] = on_step
    return sqlflow.start(df, format="postgres", table=table, url=url, checkpoint=checkpoint, available_now=True,
                         finish=True, options=options)


if __name__ == "__main__":
    from sqlflow.spark.session import local_session

    session = local_session(app_name="pg-crash-job", conf={"spark.sql.shuffle.partitions": "2"})
    run(session, *sys.argv[1:6])
    print("DONE", flush=True)
    session.stop()
