"""What the stateful operator needs from the user's SparkSession, per query where Spark allows.

`transformWithStateInPandas` runs only on the RocksDB state store; Spark's default is the
HDFS-backed one, and a plain `SparkSession.builder.getOrCreate()` fails at run time with
STORE_BACKEND_NOT_SUPPORTED_FOR_TWS. The provider is a session setting that a streaming query
copies when it starts (Spark clones the session in the query's constructor, and keeps the
provider in the checkpoint's offset log: a restarted query keeps its own). So:

- `start` (and the streaming INSERTs of scripts, which use it) sets it for the query it starts
  and restores the session's value right after (`state_store_for`);
- `sqlflow.sql`, whose streaming DataFrame the user may start with `df.writeStream` directly,
  refuses it when the session's provider is another, naming the one line to add
  (`check_state_store`).

Nothing else of the session matters to the results: sqlflow computes in UTC microseconds
(`unix_micros`, `timestamp_micros`) whatever `spark.sql.session.timeZone` says, and its Python
steps use Arrow whatever `spark.sql.execution.arrow.pyspark.enabled` says.
"""
from __future__ import annotations

from contextlib import contextmanager

from ...errors import SqlflowUnsupportedError
from ..session import ROCKSDB_PROVIDER

PROVIDER_KEY = "spark.sql.streaming.stateStore.providerClass"
HDFS_PROVIDER = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
#: the one line that makes a session run sqlflow's stateful streams
SET_PROVIDER = f'spark.conf.set("{PROVIDER_KEY}", "{ROCKSDB_PROVIDER}")'


def provider(spark) -> str:
    """The session's state store provider class (Spark's default when unset)."""
    try:
        return spark.conf.get(PROVIDER_KEY) or ""
    except Exception:  # noqa: BLE001  (a conf Spark does not know: never here, but not fatal)
        return ""


def check_state_store(spark, ws) -> None:
    """Refuse, at the windowed SELECT `ws`, a stateful stream on a session whose state store
    cannot run it."""
    current = provider(spark)
    if current == ROCKSDB_PROVIDER:
        return
    raise ws.error(
        SqlflowUnsupportedError,
        f"{ws.label()} runs on a stream with transformWithStateInPandas, which needs the RocksDB state "
        f"store; this session's {PROVIDER_KEY} is {current.rsplit('.', 1)[-1] or 'unset'}",
        "WINDOW", pos=ws.windowing.pos,
        hint=f"add {SET_PROVIDER} before sqlflow.sql (in SQL: SET {PROVIDER_KEY} = {ROCKSDB_PROVIDER}), "
             "or start the stream with sqlflow.spark.streaming.start, which sets it for the query it starts")


@contextmanager
def state_store_for(spark, needed: bool):
    """Around starting a query: the RocksDB state store for that query only (`needed`: it runs
    the stateful operator), the session's own setting again afterwards."""
    before = provider(spark) if needed else ROCKSDB_PROVIDER
    if before == ROCKSDB_PROVIDER:
        yield
        return
    spark.conf.set(PROVIDER_KEY, ROCKSDB_PROVIDER)
    try:
        yield
    finally:
        if before in ("", HDFS_PROVIDER):
            spark.conf.unset(PROVIDER_KEY)  # Spark's default again
        else:
            spark.conf.set(PROVIDER_KEY, before)


def state_store_for_result(df):
    """`state_store_for` the pane streams behind a `sqlflow.sql` result: around
    `df.writeStream...start()` in code that starts the result itself (the magic, the CLI)."""
    from .pane_stream import pane_streams

    return state_store_for(df.sparkSession, any(s.operator == "stateful" for s in pane_streams(df)))
