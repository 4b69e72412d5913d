"""Every `spark.sqlflow.*` configuration key, and how the bounded path reads its own.

Set them like any Spark conf: `spark.conf.set("spark.sqlflow.buckets", "64")`, `SET
spark.sqlflow.buckets = 64` in a script, or `--conf spark.sqlflow.buckets=64` on spark-submit.
The bounded path's keys are in docs/bounded-execution.md, the streaming and script keys in
docs/streaming.md.
"""
from __future__ import annotations

#: auto | native | engine: force the execution path of every windowed SELECT (default auto)
PATH = "spark.sqlflow.path"
#: number of hash buckets of keys on the engine path (default: see `buckets`)
BUCKETS = "spark.sqlflow.buckets"
#: target input size of one bucket, in bytes, when sizing from Spark's statistics (default 8 MiB)
BUCKET_BYTES = "spark.sqlflow.bucketBytes"
#: true: replayed sessions combine rows in the bucket jobs where the rule allows (default false:
#: docs/bounded-execution.md, "Combining replayed rows", has the measurements)
REPLAY_COMBINE = "spark.sqlflow.replay.combine"

DEFAULT_BUCKET_BYTES = 8 * 1024 * 1024
#: size estimates from here on are Spark's "unknown" (Long.MaxValue, scaled by projections)
UNKNOWN_SIZE = 1 << 50
MAX_BUCKETS = 1 << 16
PATHS = ("auto", "native", "engine")

# ---- sqlflow.sql over a streaming source (sqlflow/spark/streaming/sql_stage.py)
#: auto | native | stateful: the operator of a windowed SELECT over a stream (default auto)
STREAMING_OPERATOR = "spark.sqlflow.streaming.operator"
STREAMING_OPERATORS = ("auto", "native", "stateful")
#: hash buckets of keys of the stateful operator (default: 4 per shuffle partition)
STREAMING_BUCKETS = "spark.sqlflow.streaming.buckets"
#: directory of the end-of-input marker (`PaneStream.finish`); unset: the stream cannot finish
STREAMING_FINISH_DIR = "spark.sqlflow.streaming.finishDir"
#: an interval added to event time for Spark's watermark, e.g. '36500 days' (times before 1970)
STREAMING_TIME_SHIFT = "spark.sqlflow.streaming.timeShift"

# ---- streaming INSERTs of a SQL script (sqlflow/spark/script.py)
#: the sink formats that write files under a path, for `start(format=...)` and a script's
#: INSERT INTO <format>.<path> (not a key: the one list both read)
FILE_FORMATS = ("json", "csv", "parquet", "orc", "text")
#: checkpoints go to <checkpointLocation>/<query name>
CHECKPOINT_LOCATION = "spark.sqlflow.checkpointLocation"
#: the query name (default: derived from the sink)
QUERY_NAME = "spark.sqlflow.queryName"
#: availableNow, an interval ('10 seconds') or default
TRIGGER = "spark.sqlflow.trigger"
#: true: with availableNow, emit every window at the end (the finish marker lives next to the checkpoint)
FINISH = "spark.sqlflow.finish"
#: the PostgreSQL database of `INSERT INTO postgres.<table>` (a URL; unset: libpq's PG* variables)
POSTGRES_URL = "spark.sqlflow.postgres.url"


def get(spark, key: str, default: str | None = None) -> str | None:
    if spark is None:
        return default
    try:
        value = spark.conf.get(key, None)
    except Exception:  # noqa: BLE001  (a conf Spark does not know and no default)
        value = None
    return default if value is None or value == "" else value


def shuffle_partitions(spark) -> int:
    try:
        return max(1, int(get(spark, "spark.sql.shuffle.partitions", "200")))
    except ValueError:
        return 200


def buckets(spark, df=None, *, keyed: bool = True) -> tuple[int, str]:
    """How many hash buckets of keys the engine path uses, and why.

    `spark.sqlflow.buckets` if set; else 2 x spark.sql.shuffle.partitions, raised so that one
    bucket holds about `spark.sqlflow.bucketBytes` of input by Spark's size estimate of the input
    (a bucket is one pandas frame in one Python worker: it must fit in memory).
    """
    if not keyed:
        return 1, "1 (no GROUP BY keys: every row is one key)"
    fixed = get(spark, BUCKETS)
    if fixed is not None:
        return max(1, int(fixed)), f"{int(fixed)} (spark.sqlflow.buckets)"
    base = 2 * shuffle_partitions(spark)
    size = estimated_bytes(df)
    target = int(get(spark, BUCKET_BYTES, str(DEFAULT_BUCKET_BYTES)))
    if size is not None and size > base * target:
        n = min(MAX_BUCKETS, -(-size // target))
        return n, f"{n} (input estimated at {size} bytes, {target} per bucket)"
    return base, f"{base} (2 x spark.sql.shuffle.partitions)"


def estimated_bytes(df) -> int | None:
    """Spark's estimate of a DataFrame's size (None when unknown: Spark then says Long.MaxValue)."""
    if df is None:
        return None
    try:
        size = df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()
        size = int(size if isinstance(size, int) else size.toString())  # py4j gives an int or a BigInt
    except Exception:  # noqa: BLE001  (Spark Connect, or no statistics)
        return None
    # Spark says Long.MaxValue for "unknown", and a projection over that scales it down a little
    # (Long.MaxValue x its row width / the child's): anything beyond a pebibyte is that, not data
    return None if size >= UNKNOWN_SIZE or size <= 0 else size
