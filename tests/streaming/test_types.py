"""Column types survive the streaming stateful operator exactly: BIGINTs beyond 2^53 next to NULLs."""
import json
import os
import time

import pytest

import sqlflow
from sqlflow.spark import streaming as S

#: also on a session with Spark's defaults (tests/conftest.py)
pytestmark = pytest.mark.defaults

BIG = 2**53  # the first integer float64 cannot tell from its successor


def write_json_batches(directory, batches):
    directory.mkdir(parents=True)
    t = int(time.time()) - 1000
    for i, rows in enumerate(batches):
        path = directory / f"part-{i}.json"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.utime(path, (t + i, t + i))


def test_bigint_keys_beyond_2_53_stay_apart_next_to_a_null_key(spark, tmp_path, stateful_operator):
    write_json_batches(tmp_path / "in", [[
        {"k": BIG, "v": BIG + 1, "ts": "2024-01-01T00:00:10Z"},
        {"k": BIG + 1, "v": BIG + 3, "ts": "2024-01-01T00:00:20Z"},
        {"k": None, "v": None, "ts": "2024-01-01T00:00:30Z"}]])
    spark.readStream.schema("k BIGINT, v BIGINT, ts TIMESTAMP").json(str(tmp_path / "in")) \
        .createOrReplaceTempView("big_keys_stream")
    df = sqlflow.sql(spark, "SELECT k, MAX(v) AS m FROM big_keys_stream WATERMARK ts DELAY OF INTERVAL 1 SECOND "
                            "GROUP BY k WINDOW FIXED(SIZE 1m)")
    assert [s.operator for s in S.pane_streams(df)] == ["stateful"]
    S.start(df, format="memory", query_name="big_keys_out", available_now=True, finish=True)
    got = sorted((tuple(r) for r in spark.table("big_keys_out").select("k", "m").collect()),
                 key=lambda r: (r[0] is not None, r))
    assert got == [(None, None), (BIG, BIG + 1), (BIG + 1, BIG + 3)]


def test_bigint_columns_with_a_processing_time_trigger(spark, tmp_path, stateful_operator):
    # heartbeat rows (NULL in every data column but the event time) meet the masked BIGINT columns
    write_json_batches(tmp_path / "in", [[
        {"user_id": "1", "amount": 10, "ts": "2024-03-01T08:00:00Z"},
        {"user_id": "2", "amount": None, "ts": "2024-03-01T08:00:30Z"},
        {"user_id": "1", "amount": 30, "ts": "2024-03-01T08:02:00Z"}]])
    spark.readStream.schema("user_id STRING, amount BIGINT, ts TIMESTAMP").json(str(tmp_path / "in")) \
        .createOrReplaceTempView("period_stream")
    df = sqlflow.sql(spark, "SELECT user_id, SUM(amount) AS total FROM period_stream "
                            "WATERMARK ts DELAY OF INTERVAL 10 SECONDS GROUP BY user_id "
                            "WINDOW SESSIONS(GAP 5m) TRIGGER WATERMARK EARLY PERIOD 1s")
    S.start(df, format="memory", query_name="period_out", available_now=True, finish=True)
    got = sorted((r.user_id, r.total, r.window_start.minute, r.window_end.minute, r.pane_index, r.pane_timing)
                 for r in spark.table("period_out").collect())
    # one batch: the PERIOD timer fires before the watermark passes the sessions, which then have
    # nothing new to emit (docs/semantics.md)
    assert got == [("1", 40, 0, 7, 0, "EARLY"), ("2", None, 0, 5, 0, "EARLY")]
