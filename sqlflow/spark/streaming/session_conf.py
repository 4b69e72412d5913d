"""What the stateful operator needs from the user's SparkSession, set by sqlflow where it can.

`transformWithStateInPandas` runs only on the RocksDB state store; Spark's default is the
HDFS-backed one, and a plain `SparkSession.builder.getOrCreate()` fails at run time with
STORE_BACKEND_NOT_SUPPORTED_FOR_TWS. The provider is a session setting that a streaming query
copies when it starts (Spark clones the session in the query's constructor, and keeps the
provider in the checkpoint's offset log: a restarted query keeps its own); Spark 4.3 has no
per-query option for it (`DataStreamWriter.option` does not reach SQL settings). So:

- `start` (and the streaming INSERTs of scripts, which use it) sets it for the query it starts
  and restores the session's value right after (`settings_for`);
- `sqlflow.sql`, whose streaming DataFrame the user starts with `df.writeStream` directly, sets
  it on the session when the session has Spark's default (unset or the HDFS-backed provider), and
  says so once with a `SqlflowSessionWarning` (`use_state_store`). Every stateful operator of
  Spark's runs on RocksDB, so the session's other streams keep working; queries restarted from
  a checkpoint keep the provider they started with. A provider of the user's own is refused with
  a located error naming the line to add.

`sqlflow.sql` also checks, once per Spark application, that Spark's Python workers can import
sqlflow (`check_python_workers`): a worker started from a Python without it (PYSPARK_PYTHON unset,
a virtualenv's python not on PATH) otherwise fails only at the stream's first batch, with Spark's
STREAMING_PYTHON_RUNNER_INITIALIZATION_FAILURE. The same job loads the engine and its compiled
kernels in the workers it runs on (they are reused: `spark.python.worker.reuse`), so the first
micro-batch does not.

Nothing else of the session matters to the results: sqlflow computes in UTC microseconds
(`unix_micros`, `timestamp_micros`) whatever `spark.sql.session.timeZone` says, and its Python
steps use Arrow whatever `spark.sql.execution.arrow.pyspark.enabled` says.

What the session's settings cost: a stateful operator of a stream has one partition, so one
task and one state store committed, per `spark.sql.shuffle.partitions` in every micro-batch,
with rows or not, and a new query keeps that number in its checkpoint. Spark's default, 200,
made four files of 50 rows take 108-117 s against 8.7-9.7 s at 8 partitions, alternated in one
process at load ~7 (docs/streaming.md 5.1). So `settings_for` also starts a new query on no more
shuffle partitions than its stateful operators have buckets (`conf.streaming_buckets`: they hold
the keys, the partitions only run them; a session with fewer keeps its number), for that query
only; a query restarted from a checkpoint keeps the number it started with (Spark restores it
from the offset log). A streaming result of `sqlflow.sql` applies it itself: its `writeStream`'s
`start` and `toTable` run inside `settings_for_result` (`start_with_settings`), so the user's own
`df.writeStream...start()` gets what `start` gets.

How Spark writes the checkpoint's files: through Hadoop's FileContext by default, which on the
local file system forks a `readlink` process from the JVM for every file (offsets, commits, the
source's log, the state store's files; several per micro-batch, docs/spark-internals.md 8).
Spark's FileSystem-based manager writes them with none, and a rename on a local file system is
atomic either way; on HDFS it is not the same (an overwriting rename onto an existing file leaves
the old one). So `settings_for`, given the query's checkpoint, takes the FileSystem-based manager
for a checkpoint on the local file system when the session has not chosen one, and Spark's
default for a checkpoint elsewhere when the session has the FileSystem-based one (as
`local_session` sets it); for that query only (`checkpoint_manager`).

How the RocksDB state store commits: by default every micro-batch uploads a snapshot of each
partition's RocksDB (its files zipped and synced: the operator's commit took 40 ms a batch here); with
changelog checkpointing it writes the batch's changes only, and snapshots in the background
(Spark's `spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled`: a checkpoint
written either way is read either way). So `settings_for` turns it on for a query that runs the
stateful operator, unless the session has chosen (`CHANGELOG_KEY`): the operator's commit fell
to 4 ms, and 50 batches of 2,000 rows 11.8 s to 11.2 s (docs/dev/streaming-performance.md 5).
"""
from __future__ import annotations

import sys
from contextlib import contextmanager
from functools import wraps

from ...errors import SqlflowExecutionError, SqlflowUnsupportedError
from ..session import CHECKPOINT_FILES, ROCKSDB_PROVIDER
from ...plan.user_warnings import warn

PROVIDER_KEY = "spark.sql.streaming.stateStore.providerClass"
#: RocksDB's changelog checkpointing (see the module's docstring)
CHANGELOG_KEY = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
HDFS_PROVIDER = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
#: the one line that makes a session run sqlflow's stateful streams
SET_PROVIDER = f'spark.conf.set("{PROVIDER_KEY}", "{ROCKSDB_PROVIDER}")'


def provider(spark) -> str:
    """The session's state store provider class (Spark's default when unset)."""
    try:
        return spark.conf.get(PROVIDER_KEY) or ""
    except Exception:  # noqa: BLE001  (a conf Spark does not know: never here, but not fatal)
        return ""


class SqlflowSessionWarning(UserWarning):
    """sqlflow changed a setting of the user's SparkSession (said once per change)."""


def use_state_store(spark, ws) -> None:
    """Before a stateful stream of `sqlflow.sql` (the windowed SELECT `ws`): the RocksDB state
    store on a session with Spark's default one, said once; a provider of the user's own is
    refused, naming the line to add."""
    current = provider(spark)
    if current == ROCKSDB_PROVIDER:
        return
    if current in ("", HDFS_PROVIDER):
        try:
            spark.conf.set(PROVIDER_KEY, ROCKSDB_PROVIDER)
        except Exception:  # noqa: BLE001  (a session that refuses the setting: refused below)
            pass
        else:
            warn(f"sqlflow: {ws.label()} runs on transformWithStateInPandas, which needs the RocksDB state "
                 f"store: this session's {PROVIDER_KEY} is now {ROCKSDB_PROVIDER} (was Spark's default, "
                 f"{HDFS_PROVIDER.rsplit('.', 1)[-1]}; streams restarted from a checkpoint keep their own)",
                 SqlflowSessionWarning)
            return
    raise ws.error(
        SqlflowUnsupportedError,
        f"{ws.label()} runs on a stream with transformWithStateInPandas, which needs the RocksDB state "
        f"store; this session's {PROVIDER_KEY} is {current.rsplit('.', 1)[-1] or 'unset'}",
        "WINDOW", pos=ws.windowing.pos,
        hint=f"add {SET_PROVIDER} before sqlflow.sql (in SQL: SET {PROVIDER_KEY} = {ROCKSDB_PROVIDER}), "
             "or start the stream with sqlflow.spark.streaming.start, which sets it for the query it starts")


#: the Spark applications whose Python workers imported sqlflow (`check_python_workers`)
_WORKERS_READY: set[str] = set()


def check_python_workers(spark, ws) -> None:
    """Before a stateful stream (the windowed SELECT `ws`): one small job, once per Spark
    application, in which Spark's Python workers import sqlflow's operator and load the engine's
    compiled kernels; a worker that cannot is a located error with the fix, now rather than
    Spark's STREAMING_PYTHON_RUNNER_INITIALIZATION_FAILURE at the first micro-batch."""
    from pyspark.sql import types as T

    from ...udfs.probe import ready

    try:
        app = spark.conf.get("spark.app.id", None) or ""
    except Exception:  # noqa: BLE001
        app = ""
    if app and app in _WORKERS_READY:
        return
    from .. import conf
    from ..log_filter import failures_reported

    n = conf.cores(spark)
    schema = T.StructType([T.StructField("python", T.StringType()), T.StructField("version", T.StringType())])
    try:
        with failures_reported(spark):  # the failed tasks' stack traces: the error below says why
            spark.range(0, n, 1, n).mapInArrow(ready, schema).collect()
    except Exception as e:  # noqa: BLE001  (Py4JJavaError, PythonException, SparkConnectGrpcException)
        cause = worker_failure(str(e))
        raise ws.error(
            SqlflowExecutionError,
            f"{ws.label()} runs on a stream in Spark's Python workers, and they cannot run sqlflow: {cause}",
            "WINDOW", pos=ws.windowing.pos,
            hint=f"start Spark with the Python that has sqlflow installed: PYSPARK_PYTHON={sys.executable} in the "
                 f"environment before the session starts, or SparkSession.builder.config(\"spark.pyspark.python\", "
                 f"\"{sys.executable}\")") from None
    if app:
        _WORKERS_READY.add(app)


def worker_failure(text: str) -> str:
    """The line of a failed Python worker's error that says why (a module it could not import, a
    program Spark could not run), else the error's first line.

    >>> worker_failure("org.apache.spark.api.python.PythonException: Traceback ...\\n  File x\\n"
    ...                "ModuleNotFoundError: No module named 'sqlflow'\\n\\tat org.apache")
    "ModuleNotFoundError: No module named 'sqlflow'"
    >>> worker_failure('java.io.IOException: Cannot run program "python3": error=2, No such file or directory')
    'java.io.IOException: Cannot run program "python3": error=2, No such file or directory'
    """
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        if "ModuleNotFoundError" in line or "ImportError" in line or "Cannot run program" in line:
            return line
    return lines[0][:300] if lines else "the worker failed"


#: Spark's setting: the partitions of a query's shuffles, so of its stateful operators
SHUFFLE_KEY = "spark.sql.shuffle.partitions"


#: Spark's setting: the class writing a stream's checkpoint files
CHECKPOINT_MANAGER_KEY = "spark.sql.streaming.checkpointFileManagerClass"


def local_checkpoint(spark, checkpoint: str) -> bool | None:
    """Whether `checkpoint` is on the local file system (Hadoop's qualified path); None when this
    process cannot tell (Spark Connect, a path without a scheme: the server's default file system)."""
    from urllib.parse import urlparse

    from ..lifetimes import is_connect

    scheme = urlparse(checkpoint).scheme
    if scheme == "file":
        return True
    if is_connect(spark):
        return None if len(scheme) <= 1 else False  # (one letter: a Windows drive)
    from .checkpoint_files import file_system

    try:
        return file_system(spark, checkpoint)[1].startswith("file:")
    except Exception:  # noqa: BLE001  (a scheme without a file system here: Spark's own error at start)
        return None


def checkpoint_manager(spark, checkpoint: str | None) -> str | None:
    """The checkpoint file manager a query on `checkpoint` is started with (module docstring): the
    FileSystem-based one on the local file system when the session has none of its own, "" (Spark's
    default) elsewhere when the session has that one, None to leave the session's."""
    if checkpoint is None:
        return None
    current = spark.conf.get(CHECKPOINT_MANAGER_KEY, None) or None
    if current not in (None, CHECKPOINT_FILES):
        return None
    local = local_checkpoint(spark, checkpoint)
    if local and current is None:
        return CHECKPOINT_FILES
    if local is False and current == CHECKPOINT_FILES:
        return ""
    return None


@contextmanager
def settings_for(spark, streams: list, checkpoint: str | None = None):
    """Around starting a query over the pane streams `streams` on `checkpoint`: what the query
    needs of the session, for that query only, the session's own settings again afterwards: the
    RocksDB state store (and its changelog checkpointing, where the session has not chosen) when
    a stream runs the stateful operator, no more shuffle partitions than its operators have
    buckets (the most of theirs; a native operator's are `conf.streaming_buckets`), and the
    checkpoint's file manager (`checkpoint_manager`)."""
    from .. import conf

    wanted: dict[str, str] = {}
    manager = checkpoint_manager(spark, checkpoint)
    if manager is not None:
        wanted[CHECKPOINT_MANAGER_KEY] = manager
    if any(s.operator == "stateful" for s in streams):
        if provider(spark) != ROCKSDB_PROVIDER:
            wanted[PROVIDER_KEY] = ROCKSDB_PROVIDER
        if spark.conf.get(CHANGELOG_KEY, None) is None:
            wanted[CHANGELOG_KEY] = "true"
    if streams:  # fewer partitions than the session's, never more (a bucket per partition at most)
        buckets = max(s.buckets if s.operator == "stateful" else conf.streaming_buckets(spark)[0] for s in streams)
        if buckets < conf.shuffle_partitions(spark):
            wanted[SHUFFLE_KEY] = str(buckets)
    before = {key: spark.conf.get(key, None) for key in wanted}
    for key, value in wanted.items():
        if value:
            spark.conf.set(key, value)
        else:
            spark.conf.unset(key)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None or (key == PROVIDER_KEY and value == HDFS_PROVIDER):
                spark.conf.unset(key)  # Spark's default again
            else:
                spark.conf.set(key, value)


def settings_for_result(df):
    """`settings_for` the pane streams behind a `sqlflow.sql` result: around
    `df.writeStream...start()` in code that starts the result itself (the magic, the CLI)."""
    from .pane_stream import pane_streams

    return settings_for(df.sparkSession, pane_streams(df))


#: the DataStreamWriter methods that start a query
STARTS = ("start", "toTable")


def start_with_settings(df) -> None:
    """A streaming result `df` of `sqlflow.sql` whose `df.writeStream` starts its query (`start`,
    `toTable`) inside `settings_for_result(df)`: the user's own `df.writeStream...start()` gets the
    partitions and the state store for that query only, as `start` does. A DataFrame derived from
    `df` (`df.where(...)`) is Spark's own and starts on the session's settings."""
    frame = type(df)
    if frame not in _STARTING:
        _STARTING[frame] = _starting(frame)
    df.__class__ = _STARTING[frame]


#: DataFrame class (classic's, Connect's) -> its subclass from `_starting`
_STARTING: dict[type, type] = {}


def _starting(frame: type) -> type:
    """`frame` with a `writeStream` whose starts run inside `settings_for_result`."""
    def write_stream(self):
        writer = frame.writeStream.fget(self)  # type: ignore[attr-defined]
        for name in STARTS:
            setattr(writer, name, _within_settings(self, getattr(writer, name)))
        return writer

    write_stream.__doc__ = frame.writeStream.__doc__  # type: ignore[attr-defined]
    return type(frame.__name__, (frame,), {"writeStream": property(write_stream), "__module__": frame.__module__,
                                           "__qualname__": frame.__qualname__})


def _within_settings(df, start):
    @wraps(start)
    def started(*args, **kwargs):
        with settings_for_result(df):
            return start(*args, **kwargs)
    return started
