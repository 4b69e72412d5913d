"""A stream on a session with Spark's default state store: `start` and scripts
set the RocksDB store for the query they start; `sqlflow.sql` refuses, naming the line to add."""
import json
import os
import time

import pytest

import sqlflow
from sqlflow.errors import SqlflowUnsupportedError
from sqlflow.spark import streaming as S
from sqlflow.spark.script import run_script
from sqlflow.spark.streaming.session_conf import HDFS_PROVIDER, PROVIDER_KEY, SET_PROVIDER

SESSIONS = ("SELECT user_id, COUNT(*) AS n FROM {view} WATERMARK ts DELAY OF INTERVAL 1 SECOND\n"
            "GROUP BY user_id WINDOW SESSIONS(GAP 1m)")


@pytest.fixture
def default_store(spark):
    """The session as Spark builds it by default: the HDFS-backed state store."""
    before = spark.conf.get(PROVIDER_KEY)
    spark.conf.unset(PROVIDER_KEY)
    assert spark.conf.get(PROVIDER_KEY) == HDFS_PROVIDER
    yield
    spark.conf.set(PROVIDER_KEY, before)


def clicks(spark, tmp_path, view):
    src = tmp_path / "in"
    src.mkdir()
    t = int(time.time()) - 1000
    for i, second in enumerate((0, 30, 200)):
        path = src / f"part-{i}.json"
        path.write_text(json.dumps({"user_id": "u1", "ts": f"2024-01-01T00:{second // 60:02d}:{second % 60:02d}Z"}))
        os.utime(path, (t + i, t + i))
    spark.readStream.schema("user_id string, ts timestamp").option("maxFilesPerTrigger", 1).json(str(src)) \
        .createOrReplaceTempView(view)
    return src


def test_sql_refuses_a_stateful_stream_and_names_the_line_to_add(spark, tmp_path, default_store):
    clicks(spark, tmp_path, "clicks_plain")
    with pytest.raises(SqlflowUnsupportedError, match="RocksDB state store") as err:
        sqlflow.sql(spark, SESSIONS.format(view="clicks_plain"))
    assert (err.value.clause, err.value.line) == ("WINDOW", 2)
    assert SET_PROVIDER in err.value.hint
    # the native operator needs no state store of its own choosing
    fixed = sqlflow.sql(spark, "SELECT user_id, COUNT(*) AS n FROM clicks_plain WATERMARK ts DELAY OF INTERVAL 1 SECOND "
                               "GROUP BY user_id WINDOW FIXED(SIZE 1m)")
    assert [s.operator for s in S.pane_streams(fixed)] == ["native"]


def test_a_script_and_start_set_the_state_store_for_their_query_only(spark, tmp_path, default_store):
    clicks(spark, tmp_path, "clicks_script")
    script = f"""SET spark.sqlflow.checkpointLocation = {tmp_path / 'cp'};
        SET spark.sqlflow.trigger = availableNow;
        SET spark.sqlflow.finish = true;
        INSERT INTO memory.sessions_plain {SESSIONS.format(view='clicks_script')};"""
    try:
        run_script(spark, script)
    finally:
        for key in ("checkpointLocation", "trigger", "finish"):
            spark.conf.unset(f"spark.sqlflow.{key}")
    got = sorted((r.window_start.strftime("%M:%S"), r.window_end.strftime("%M:%S"), r.n)
                 for r in spark.table("sessions_plain").collect())
    assert got == [("00:00", "01:30", 2), ("03:20", "04:20", 1)]
    assert spark.conf.get(PROVIDER_KEY) == HDFS_PROVIDER  # the session is as it was

    # sqlflow.sql once the line is added, then start: the same panes
    spark.conf.set(PROVIDER_KEY, "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
    spark.conf.set(S.CONF_FINISH_DIR, str(tmp_path / "fin"))
    try:
        df = sqlflow.sql(spark, SESSIONS.format(view="clicks_script"))
    finally:
        spark.conf.unset(S.CONF_FINISH_DIR)
    spark.conf.unset(PROVIDER_KEY)
    S.start(df, format="memory", query_name="sessions_started", available_now=True, finish=True)
    again = sorted((r.window_start.strftime("%M:%S"), r.window_end.strftime("%M:%S"), r.n)
                   for r in spark.table("sessions_started").collect())
    assert again == got
    assert spark.conf.get(PROVIDER_KEY) == HDFS_PROVIDER
