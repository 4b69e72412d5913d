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

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout: tests.crash_input
from tests import crash_input
from tests.crash_input import crash_query, crash_stream

QUERY = crash_query("DISCARDING")


def run(spark, input_dir: str, url: str, table: str, checkpoint: str, kill_at: str | None = None,
        options: dict | None = None):
    import sqlflow

    df = crash_stream(spark, input_dir, checkpoint, QUERY)
    options = {"on_step": crash_input.kill_at(kill_at)} if kill_at else (options or {})
    return sqlflow.start(df, format="postgres", table=table, url=url, checkpoint=checkpoint, available_now=True,
                         finish=True, options=options)


if __name__ == "__main__":
    from sqlflow.spark.session import local_session

    session = local_session(app_name="pg-crash-job", conf={"spark.sql.shuffle.partitions": "2"})
    run(session, *sys.argv[1:6])
    print("DONE", flush=True)
    session.stop()
