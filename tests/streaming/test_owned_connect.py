"""The owned-sink executor on a Spark Connect session (docs/streaming.md 3.0): `executor="owned"`
is a located error naming what Connect lacks, `auto` runs the operator and gives its rows, and
`sqlflow.explain` says so. Run by CI's connect pass (SQLFLOW_TEST_SESSION=connect)."""
from __future__ import annotations

import pandas as pd
import pytest

import sqlflow
from sqlflow.columns import EVENT_TIME
from sqlflow.errors import SqlflowUnsupportedError
from sqlflow.spark import streaming as S
from sqlflow.spark.conf import STREAMING_EXECUTOR
from sqlflow.spark.streaming.owned import CONNECT_OBSTACLE
from sqlflow.spark.streaming.sink import choose_executor
from sqlflow.time import SECOND

from tests.conftest import CONNECT_SESSION
from .harness import write_batches

pytestmark = [pytest.mark.connect,
              pytest.mark.skipif(not CONNECT_SESSION, reason="a Spark Connect session (SQLFLOW_TEST_SESSION=connect)")]

QUERY = """SELECT k, SUM(v) * 10 AS total10 FROM {view} WATERMARK ts DELAY OF INTERVAL 1 SECOND
           GROUP BY k HAVING SUM(v) > 1 WINDOW FIXED(SIZE 1m)"""
#: every window of the batches below, finished: (k, total10, window_start in seconds)
EXPECTED = [("a", 30, 0), ("b", 30, 0), ("a", 40, 60), ("b", 50, 180), ("c", 60, 300)]


def stream(spark, stream_files, view: str, *, write: bool = True):
    batches = [pd.DataFrame({"k": ["a", "a", "b"], EVENT_TIME: [10, 20, 30], "v": [1, 2, 3]}),
               pd.DataFrame({"k": ["a", "b"], EVENT_TIME: [70 * SECOND, 200 * SECOND], "v": [4, 5]}),
               pd.DataFrame({"k": ["c"], EVENT_TIME: [300 * SECOND], "v": [6]})]
    if write:
        write_batches(stream_files, batches)
    src = spark.readStream.schema("k string, et long, v long").option("maxFilesPerTrigger", 1).parquet(
        str(stream_files.path)).selectExpr("k", "timestamp_micros(et) AS ts", "v")
    src.createOrReplaceTempView(view)
    return sqlflow.sql(spark, QUERY.format(view=view))


def rows(spark, name: str) -> list[tuple]:
    got = spark.table(name).selectExpr("k", "total10", "unix_seconds(window_start)").collect()
    return sorted((tuple(r) for r in got), key=lambda r: (r[2], r[0]))


def test_owned_on_connect_is_a_located_error_naming_what_connect_lacks(spark, stream_files, finish_conf):
    df = stream(spark, stream_files, "connect_owned_src")
    with pytest.raises(SqlflowUnsupportedError) as caught:
        S.start(df, format="memory", query_name="connect_owned", available_now=True, finish=True, executor="owned")
    assert caught.value.clause == "STREAM"
    assert caught.value.message == f"the owned-sink executor cannot run this stream: {CONNECT_OBSTACLE}"
    assert CONNECT_OBSTACLE.startswith("Spark Connect: its foreachBatch function runs in a Python process beside "
                                       "the server, without the JVM")
    assert caught.value.hint == f"SET {STREAMING_EXECUTOR} = auto"
    text = sqlflow.explain(QUERY.format(view="connect_owned_src"), spark)
    assert f"the owned-sink executor cannot run it: {CONNECT_OBSTACLE}" in text


def test_auto_on_connect_runs_the_operator_and_gives_its_rows(spark, stream_files, finish_conf):
    df = stream(spark, stream_files, "connect_auto_src")
    chosen = choose_executor(spark, S.pane_streams(df), df, format="memory", executor="auto")
    assert chosen == ("operator", f"not the owned-sink executor: {CONNECT_OBSTACLE}")
    spark.conf.set(STREAMING_EXECUTOR, "auto")
    try:
        S.start(df, format="memory", query_name="connect_auto", available_now=True, finish=True)
    finally:
        spark.conf.unset(STREAMING_EXECUTOR)
    S.start(stream(spark, stream_files, "connect_operator_src", write=False), format="memory", query_name="connect_operator",
            available_now=True, finish=True, executor="operator")
    assert rows(spark, "connect_auto") == rows(spark, "connect_operator") == EXPECTED
