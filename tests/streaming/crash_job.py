"""A streaming job for the exactly-once test, run as a script in its own process (so the test can
kill it with SIGKILL): sessions with retractions over the parquet files in INPUT, one file per
micro-batch, to a parquet file sink at OUTPUT with checkpoint CHECKPOINT; then finishes the input.

    python crash_job.py INPUT OUTPUT CHECKPOINT
"""
from __future__ import annotations

import sys


def plan():
    from sqlflow import ast
    from sqlflow.engine.aggregates import Aggregate
    from sqlflow.engine.plan import EnginePlan
    from sqlflow.time import MINUTE

    D = ast.Duration
    windowing = ast.Windowing(ast.WindowClause(ast.Sessions(D(MINUTE))), ast.WatermarkEarlyLate(late=ast.Count(1)),
                              ast.AllowedLateness(D(5 * MINUTE)),
                              ast.Emit(ast.AccumulationMode.ACCUMULATING_AND_RETRACTING))
    return EnginePlan(windowing, (Aggregate("sum", "v", "total"), Aggregate("count_star", None, "n")), keys=("k",))


def run(spark, input_dir: str, output: str, checkpoint: str):
    from sqlflow.columns import EVENT_TIME
    from sqlflow.spark import streaming as S
    from sqlflow.time import SECOND

    src = (spark.readStream.schema("k string, et long, v long").option("maxFilesPerTrigger", 1).parquet(input_dir)
           .withColumnRenamed("et", EVENT_TIME))
    stream = S.build_stream(src, plan(), delay=10 * SECOND, buckets=3, finish_dir=checkpoint + "-finish")
    return S.start(stream, format="parquet", path=output, checkpoint=checkpoint, available_now=True, finish=True)


if __name__ == "__main__":
    from sqlflow.spark.session import local_session

    session = local_session(app_name="crash-job", conf={"spark.sql.shuffle.partitions": "2"})
    run(session, *sys.argv[1:4])
    print("DONE", flush=True)
    session.stop()
