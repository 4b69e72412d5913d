"""What the kill -9 tests share: their input (random micro-batches of clicks, one file each), the
job's stream over it, and the job's way of dying at a point chosen exactly.

The jobs (tests/postgres/crash_job.py, tests/streaming/owned_crash_job.py) run as scripts in a
process group of their own, so that SIGKILL to the group takes the driver, its JVM and the Python
workers at once."""
from __future__ import annotations

import os
import signal

import numpy as np
import pandas as pd

T0 = pd.Timestamp("2024-03-01 08:00", tz="UTC")
SCHEMA = "k string, ts timestamp, v long"
#: the same with BIGINT keys, whose batches of parquet files the owned-sink executor's driver-local
#: step reads itself (docs/streaming.md 3.0, "Reading a batch's files directly")
INT_SCHEMA = "k bigint, ts timestamp, v long"


def crash_query(emit: str) -> str:
    """The jobs' query: sessions with early and late firings per key, emitting `emit`."""
    return f"""SELECT k, SUM(v) AS total, COUNT(*) AS n
FROM crash_in WATERMARK ts DELAY OF INTERVAL 10 SECONDS
GROUP BY k
WINDOW SESSIONS(GAP 1m)
TRIGGER WATERMARK EARLY COUNT 1 LATE COUNT 1
ALLOWED LATENESS 5m
EMIT {emit}"""


def crash_batches(seed: int, n: int = 8, int_keys: bool = False) -> list[pd.DataFrame]:
    """`n` micro-batches of 10 clicks (keys p-s, or 1-4 with `int_keys`; up to 3 minutes out of
    order)."""
    rng = np.random.default_rng(seed)
    out = []
    for b in range(n):
        seconds = b * 60 + rng.integers(-180, 60, 10)
        out.append(pd.DataFrame({"k": rng.choice([1, 2, 3, 4] if int_keys else list("pqrs"), 10),
                                 "ts": (T0 + pd.to_timedelta(seconds, unit="s")).astype("datetime64[us, UTC]"),
                                 "v": rng.integers(1, 9, 10)}))
    return out


def crash_stream(spark, input_dir: str, checkpoint: str, query: str, schema: str = SCHEMA):
    """`query`'s result over the files in `input_dir` (view `crash_in`, one file per micro-batch,
    of `schema`), finished through `<checkpoint>-finish`."""
    import sqlflow
    from sqlflow.spark import streaming as S

    spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(input_dir) \
        .createOrReplaceTempView("crash_in")
    spark.conf.set(S.CONF_FINISH_DIR, checkpoint + "-finish")
    try:
        return sqlflow.sql(spark, query)
    finally:
        spark.conf.unset(S.CONF_FINISH_DIR)


def kill_at(where: str):
    """A hook `(batch_id, point)` that kills the job's process group when batch BATCH reaches
    POINT (`where` = "BATCH:POINT"), after printing `KILLED BATCH:POINT`."""
    batch, point = where.split(":")

    def hook(batch_id: int, at: str) -> None:
        if batch_id == int(batch) and at == point:
            print(f"KILLED {batch_id}:{at}", flush=True)
            os.killpg(os.getpgid(0), signal.SIGKILL)

    return hook
