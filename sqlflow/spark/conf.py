"""Every `spark.sqlflow.*` configuration key, and how the bounded path reads its own.

Set them like any Spark conf: `spark.conf.set("spark.sqlflow.buckets", "64")`, `SET
spark.sqlflow.buckets = 64` in a script, or `--conf spark.sqlflow.buckets=64` on spark-submit.
The bounded path's keys are in docs/bounded-execution.md, the streaming and script keys in
docs/streaming.md.
"""
from __future__ import annotations

from typing import overload

#: auto | native | engine: force the execution path of every windowed SELECT (default auto)
PATH = "spark.sqlflow.path"
#: number of hash buckets of keys on the engine path (default: see `buckets`)
BUCKETS = "spark.sqlflow.buckets"
#: target input size of one bucket, in bytes, when sizing from Spark's statistics (default 8 MiB)
BUCKET_BYTES = "spark.sqlflow.bucketBytes"
#: true: replayed sessions combine rows in the bucket jobs where the rule allows (default false:
#: docs/bounded-execution.md, "Combining replayed rows", has the measurements)
REPLAY_COMBINE = "spark.sqlflow.replay.combine"
#: a bucket with more rows than this whose replayed rows combine is read and combined in chunks of
#: this many rows (a hot key in bounded memory); 0: never (default 1,000,000)
BUCKET_CHUNK_ROWS = "spark.sqlflow.bucketChunkRows"
DEFAULT_BUCKET_CHUNK_ROWS = 1_000_000

DEFAULT_BUCKET_BYTES = 8 * 1024 * 1024
#: size estimates from here on are Spark's "unknown" (Long.MaxValue, scaled by projections)
UNKNOWN_SIZE = 1 << 50
MAX_BUCKETS = 1 << 16
PATHS = ("auto", "native", "engine")

# ---- sqlflow.sql over a streaming source (sqlflow/spark/streaming/sql_stage.py)
#: auto | native | stateful: the operator of a windowed SELECT over a stream (default auto)
STREAMING_OPERATOR = "spark.sqlflow.streaming.operator"
STREAMING_OPERATORS = ("auto", "native", "stateful")
#: auto | owned | operator: what runs a stream whose sink sqlflow writes (`start`, INSERT INTO):
#: the owned-sink executor (foreachBatch, sqlflow/spark/streaming/owned.py) or the stream's operator
STREAMING_EXECUTOR = "spark.sqlflow.streaming.executor"
STREAMING_EXECUTORS = ("auto", "owned", "operator")
#: hash buckets of keys of the stateful operator (default: `streaming_buckets`)
STREAMING_BUCKETS = "spark.sqlflow.streaming.buckets"
#: true (default): the stateful operator's input passes through one stateless Python pass that
#: combines its rows per key and window, packs them per bucket and adds the heartbeats; false:
#: the rows go to the operator as they are, and poll timers stand for the heartbeats (docs/streaming.md
#: 3.2, "The pass before the operator": faster on micro-batches of a few thousand rows)
STREAMING_COMBINE = "spark.sqlflow.streaming.combine"
#: directory of the end-of-input marker (`PaneStream.finish`); unset: the stream cannot finish
STREAMING_FINISH_DIR = "spark.sqlflow.streaming.finishDir"
#: the owned-sink executor runs a micro-batch's engine step in the driver when the batch has at
#: most this many rows (as Spark hands them, before they are combined); 0: never
#: (docs/streaming.md 3.0, "The driver-local step")
STREAMING_DRIVER_ROWS = "spark.sqlflow.streaming.driverStepRows"
DEFAULT_STREAMING_DRIVER_ROWS = 200_000
#: a batch whose files Spark knows to hold at most this many bytes per row of the driver-local
#: step's limit is collected without the limit (its extra stage), and counted after
DRIVER_STEP_BYTES_PER_ROW = 64
#: true (default): the driver-local step reads a micro-batch of CSV or parquet files with pyarrow
#: where it reads them as Spark does (sqlflow/spark/streaming/direct_read.py; docs/streaming.md
#: 3.0, "Reading a batch's files directly"); false: Spark scans and collects every batch
STREAMING_DIRECT_READ = "spark.sqlflow.streaming.directRead"
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
#: where a streaming INSERT into a file sink writes the rows its stream drops (late, closed
#: window, NULL event time, bad gap, behind its partition), in the sink's format, batch by batch
#: (`start(..., dropped_path=...)`); unset: they are only counted
DROPPED_PATH = "spark.sqlflow.droppedPath"
#: the PostgreSQL database of `INSERT INTO postgres.<table>` (a URL; unset: libpq's PG* variables)
POSTGRES_URL = "spark.sqlflow.postgres.url"


@overload
def get(spark, key: str) -> str | None: ...
@overload
def get(spark, key: str, default: str) -> str: ...
@overload
def get(spark, key: str, default: None) -> str | None: ...


def get(spark, key: str, default: str | None = None) -> str | None:
    """A session conf's value: `default` when unset or empty (or without a session)."""
    if spark is None:
        return default
    try:
        value = spark.conf.get(key, None)
    except Exception:  # noqa: BLE001  (a conf Spark does not know and no default)
        value = None
    return default if value is None or value == "" else value


def flag(spark, key: str, default: bool = False) -> bool:
    """A boolean conf as Spark reads one: `true`/`false` in any case and spacing (else `default`).

    >>> flag(None, "spark.sql.ansi.enabled", True)
    True
    """
    value = get(spark, key)
    return default if value is None else is_true(value)


def is_true(value: object) -> bool:
    """A boolean setting as sqlflow reads every one (confs, table OPTIONS, the CLI's hiveconf):
    `true` in any case and spacing; anything else is false.

    >>> is_true(" TRUE "), is_true("false"), is_true(True), is_true("yes")
    (True, False, True, False)
    """
    return str(value).strip().lower() == "true"


#: Spark's conf of Arrow's large string and binary types (the Arrow schema of a Python UDF's output)
ARROW_LARGE_VAR_TYPES = "spark.sql.execution.arrow.useLargeVarTypes"
#: Spark's conf of the size (bytes) under which a DataFrame of Arrow data from Python is a
#: LocalRelation (its rows serialised into every task) rather than Arrow batches read by the tasks
ARROW_LOCAL_RELATION_THRESHOLD = "spark.sql.execution.arrow.localRelationThreshold"
#: Spark's ANSI mode
ANSI_ENABLED = "spark.sql.ansi.enabled"


def whole_number(spark, key: str, default: int, what: str, *, least: int = 1) -> int:
    """A conf holding a whole number of at least `least` (`default` when unset), or a located
    error naming the key, what it counts and the value (never Python's own ValueError).

    >>> whole_number(None, BUCKET_BYTES, DEFAULT_BUCKET_BYTES, "a number of bytes")
    8388608
    """
    from ..errors import SqlflowError

    text = get(spark, key, str(default))
    try:
        value = int(text.strip())
    except ValueError:
        value = least - 1
    if value < least:
        raise SqlflowError(f"{key} must be {what}, not {text!r}", clause="SET")
    return value


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
    if get(spark, BUCKETS) is not None:
        fixed = whole_number(spark, BUCKETS, 1, "a number of buckets (1 or more)")
        return fixed, f"{fixed} (spark.sqlflow.buckets)"
    base = 2 * shuffle_partitions(spark)
    size = estimated_bytes(df)
    target = whole_number(spark, BUCKET_BYTES, DEFAULT_BUCKET_BYTES, "a number of bytes per bucket (1 or more)")
    if size is not None and size > base * target:
        n = min(MAX_BUCKETS, -(-size // target))
        return n, f"{n} (input estimated at {size} bytes, {target} per bucket)"
    return base, f"{base} (2 x spark.sql.shuffle.partitions)"


#: a stream's default hash buckets of keys per core that runs its tasks (docs/streaming.md, 3.2):
#: one. A bucket is a task and a Python call in every micro-batch (and, in the stateful operator,
#: a state store commit), and the engine step is vectorised over every key of a bucket, so more
#: buckets than cores only add calls (docs/dev/streaming-performance.md: scenario 3o through an
#: owned sink, 4 per core 57.2/44.6/37.7 s, 1 per core 43.1/29.5/30.5 s; the operator at 8, 2
#: and 1 buckets, 50 batches of 2,000 rows, 0.54x, 0.62x, 0.66x native)
STREAMING_BUCKETS_PER_CORE = 1
#: the stateful operator's default before its state kept its count: a value of that time is taken
#: to have this many per core unless the count is set (`previous_streaming_buckets`)
PREVIOUS_STREAMING_BUCKETS_PER_CORE = 4
#: the largest default: each bucket is visited in every micro-batch with data (its heartbeats)
MAX_STREAMING_BUCKETS = 256
#: the stateful operator's (transformWithStateInPandas) default: one bucket per two cores. Its task
#: keeps two threads busy, the Python worker and the JVM's state server answering its state
#: calls, and each bucket is a task, a Python worker and a state store commit in every
#: micro-batch. On local[2] one bucket against two, alternated in one run, 3 rounds:
#: 1M rows in 10 batches 4.56-4.81 s against 5.43-5.74 s (native 3.89-4.51 s), 50 batches of
#: 2,000 rows 14.2 s against 16.6 s (medians; docs/dev/streaming-performance.md, 5).
OPERATOR_CORES_PER_BUCKET = 2


def cores(spark) -> int:
    """The cores Spark runs tasks on (`defaultParallelism`; on Spark Connect, which does not say,
    `spark.default.parallelism` when set, else 2)."""
    try:
        return max(1, int(spark.sparkContext.defaultParallelism))
    except Exception:  # noqa: BLE001  (Spark Connect has no SparkContext)
        try:
            return max(1, int(get(spark, "spark.default.parallelism", "2") or 2))
        except ValueError:
            return 2


def streaming_buckets(spark, *, keyed: bool = True, per_core: int = STREAMING_BUCKETS_PER_CORE,
                      cores_per_bucket: int = 1) -> tuple[int, str]:
    """How many hash buckets of keys a stream's stateful operator uses, and why (for explain): the
    one place that decides it (the stateful operator, a chained stage's and the owned-sink
    executor all ask here).

    `spark.sqlflow.streaming.buckets` if set; else `STREAMING_BUCKETS_PER_CORE` per core that
    runs the buckets (`cores`: enough to keep them busy, and a bucket's state stays a fraction of
    the stream's), or one per `cores_per_bucket` cores (the stateful operator's:
    `operator_buckets`). A stream's size is not known when it is planned (Spark has no statistics for
    a streaming source), so unlike the bounded path's `buckets` there is no estimate to size by.
    Never from `spark.sql.shuffle.partitions`: a bucket costs a Python call in every micro-batch
    with data whether it holds one key or many, so Spark's default of 200 partitions must not
    mean 800 buckets for a few rows.
    """
    if not keyed:
        return 1, "no GROUP BY keys: every row is one key"
    if get(spark, STREAMING_BUCKETS) is not None:
        return whole_number(spark, STREAMING_BUCKETS, 1, "a number of buckets (1 or more)"), STREAMING_BUCKETS
    n = cores(spark)
    if cores_per_bucket > 1:
        base = min(MAX_STREAMING_BUCKETS, max(1, n // cores_per_bucket))
        return base, f"1 per {cores_per_bucket} cores, {n} cores"
    base = min(MAX_STREAMING_BUCKETS, per_core * n)
    return base, f"{per_core} per core, {n} cores"


def operator_buckets(spark, *, keyed: bool = True) -> tuple[int, str]:
    """The stateful operator's default hash buckets of keys, and why: one per
    `OPERATOR_CORES_PER_BUCKET` cores (`streaming_buckets`)."""
    return streaming_buckets(spark, keyed=keyed, cores_per_bucket=OPERATOR_CORES_PER_BUCKET)


def previous_streaming_buckets(spark) -> int:
    """The hash buckets a stateful operator's state of an older sqlflow, which kept no count, is
    taken to have: `spark.sqlflow.streaming.buckets` if set, else that version's default,
    `PREVIOUS_STREAMING_BUCKETS_PER_CORE` per core (udfs/streaming.py's `read_state`)."""
    return streaming_buckets(spark, per_core=PREVIOUS_STREAMING_BUCKETS_PER_CORE)[0]


def driver_step_rows(spark) -> int:
    """`spark.sqlflow.streaming.driverStepRows`: the most rows of a micro-batch the owned-sink
    executor steps in the driver (0: never; docs/streaming.md 3.0)."""
    return whole_number(spark, STREAMING_DRIVER_ROWS, DEFAULT_STREAMING_DRIVER_ROWS, "a number of rows (0: never)",
                        least=0)


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


def chunk_rows(spark) -> int:
    """`spark.sqlflow.bucketChunkRows`: a positive number of rows, or 0 (never chunked)."""
    return whole_number(spark, BUCKET_CHUNK_ROWS, DEFAULT_BUCKET_CHUNK_ROWS, "a number of rows (0: never chunked)",
                        least=0)
