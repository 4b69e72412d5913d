"""A streaming job for the kill -9 tests of the owned-sink executor, run as a script in its own
process group (so the job can SIGKILL its driver with the JVM and the Python workers): sessions
with early and late firings, accumulating and retracting, over the parquet files in INPUT (one
file per micro-batch), written to parquet under OUT (one directory per batch) with checkpoint
CHECKPOINT; then the input is finished.

    python owned_crash_job.py INPUT OUT CHECKPOINT [BATCH:POINT]

With BATCH:POINT the job kills its own process group with SIGKILL when micro-batch BATCH reaches
POINT (`sqlflow.spark.streaming.owned.fault`'s points: mid-batch, after-outputs, after-sink,
before-delivery): the driver dies at a point chosen exactly, not at a moment a poll happened to
see. At before-delivery (the delivery thread's, as the batch function returns) it first waits for
Spark's commit of the batch, so that the batch is committed and its panes are not in the sink.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout: tests.crash_input
from tests import crash_input
from tests.crash_input import INT_SCHEMA, crash_query, crash_stream

QUERY = crash_query("ACCUMULATING AND RETRACTING")


def run(spark, input_dir: str, out: str, checkpoint: str, kill_at: str | None = None):
    import sqlflow
    from sqlflow.spark.streaming import owned

    df = crash_stream(spark, input_dir, checkpoint, QUERY, INT_SCHEMA)  # BIGINT keys: files read directly
    if kill_at:
        hook = crash_input.kill_at(kill_at)

        def fault(point: str, batch_id: int) -> None:
            if point == "before-delivery" and kill_at == f"{batch_id}:{point}":
                committed = Path(checkpoint, "commits", str(batch_id))
                deadline = time.monotonic() + 60
                while not committed.exists() and time.monotonic() < deadline:
                    time.sleep(0.01)
            hook(batch_id, point)

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
