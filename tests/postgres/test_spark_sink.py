"""The PostgreSQL sink on Spark against a real server: a live stream whose sessions merge and
whose late data corrects them, from `postgres_sink` in a foreachBatch of one's own, from
`sqlflow.start` and from a SQL script; bounded results with `write_panes`; located errors."""
from __future__ import annotations

import json
import os
import time

import pandas as pd
import pytest

import sqlflow
from sqlflow.errors import SqlflowAnalysisError, SqlflowUnsupportedError
from sqlflow.spark.script import run_script

from .changelogs import current_result

QUERY = """SELECT user_id, COUNT(*) AS clicks, SUM(amount) AS total
FROM {view} WATERMARK ts DELAY OF INTERVAL 1 MINUTE
GROUP BY user_id
WINDOW SESSIONS(GAP 10m)
TRIGGER WATERMARK EARLY COUNT 1 LATE COUNT 1
ALLOWED LATENESS 2h
EMIT {mode}"""
#: one file per micro-batch: two sessions of u1, a click between them merges them, the
#: watermark passes them, a late click extends the merged session
FILES = [
    [("u1", "08:00:00", 1), ("u1", "08:15:00", 2), ("u2", "08:05:00", 5)],
    [("u1", "08:07:00", 3), ("u2", "08:06:00", 1)],
    [("u3", "09:00:00", 4)],
    [("u1", "08:22:00", 2)],
    [("u3", "10:00:00", 1)],
]
TABLE_COLUMNS = ["user_id", "clicks", "total", "window_start", "window_end", "pane_index", "pane_timing", "is_last"]


def clicks_view(spark, tmp_path, view: str) -> None:
    src = tmp_path / "in"
    src.mkdir()
    t = int(time.time()) - 1000
    for i, rows in enumerate(FILES):
        path = src / f"part-{i}.json"
        path.write_text("".join(json.dumps({"user_id": u, "ts": f"2024-03-01T{at}Z", "amount": a}) + "\n"
                                for u, at, a in rows))
        os.utime(path, (t + i, t + i))
    spark.readStream.schema("user_id string, ts timestamp, amount bigint").option("maxFilesPerTrigger", 1) \
        .json(str(src)).createOrReplaceTempView(view)


def micros(series: pd.Series) -> pd.Series:
    return pd.to_datetime(series, utc=True).astype("int64") // 1000


def table_rows(pg, table: str) -> list[tuple]:
    rows = pg.execute(f'SELECT {", ".join(TABLE_COLUMNS)} FROM {table}').fetchall()
    frame = pd.DataFrame(rows, columns=TABLE_COLUMNS)
    return _rows(frame)


def _rows(frame: pd.DataFrame) -> list[tuple]:
    frame = frame[TABLE_COLUMNS].copy()
    for c in ("window_start", "window_end"):
        frame[c] = micros(frame[c])
    return sorted(tuple(r) for r in frame.astype(object).itertuples(index=False))


@pytest.mark.slow
def test_a_live_stream_keeps_the_table_equal_to_its_changelog(spark, rocksdb, tmp_path, pg, pg_url, table_name):
    """`postgres_sink` in a foreachBatch that also keeps the changelog: after every batch the table
    is the changelog re-aggregated; the merge deleted u1's two sessions, the late click moved the
    merged one."""
    clicks_view(spark, tmp_path, "pg_live")
    df = sqlflow.sql(spark, QUERY.format(view="pg_live", mode="ACCUMULATING AND RETRACTING"))
    sink = sqlflow.postgres_sink(pg_url, table_name, query=df)
    seen, after = [], []

    def both(batch, batch_id):
        sink(batch, batch_id)
        seen.append(batch.toPandas())
        after.append(table_rows(pg, table_name))

    q = (df.writeStream.foreachBatch(both).option("checkpointLocation", str(tmp_path / "cp"))
         .trigger(availableNow=True).start())
    q.awaitTermination()
    assert [int(s["is_retraction"].sum()) for s in seen if len(s)] == [0, 3, 0, 1, 0]
    for n, rows in enumerate(after, start=1):
        log = pd.concat(seen[:n], ignore_index=True)
        assert rows == _rows(current_result(log, sqlflow.ast.AccumulationMode.ACCUMULATING_AND_RETRACTING))
    t = pd.Timestamp("2024-03-01 08:00", tz="UTC").value // 1000
    minute = 60_000_000
    assert len(seen[0]) and after[0] == [("u1", 1, 1, t, t + 10 * minute, 0, "EARLY", False),
                        ("u1", 1, 2, t + 15 * minute, t + 25 * minute, 0, "EARLY", False),
                        ("u2", 1, 5, t + 5 * minute, t + 15 * minute, 0, "EARLY", False)]
    # the click at 08:07 merged u1's sessions: both rows gone, the merged one in; the late click at
    # 08:22 moved its end to 08:32
    assert after[1][0] == ("u1", 3, 6, t, t + 25 * minute, 1, "EARLY", False)
    assert after[-1] == [("u1", 4, 8, t, t + 32 * minute, 2, "EARLY", False),
                         ("u2", 2, 6, t + 5 * minute, t + 16 * minute, 1, "EARLY", False),
                         ("u3", 1, 1, t + 120 * minute, t + 130 * minute, 0, "EARLY", False),
                         ("u3", 1, 4, t + 60 * minute, t + 70 * minute, 0, "EARLY", False)]
    recorded = pg.execute("SELECT count(*), sum(rows_deleted) FROM sqlflow_batches WHERE table_name = %s",
                          (table_name,)).fetchone()
    assert recorded == (len(seen), 4)  # u1's two sessions and u2's first (batch 1), u1's merged one (batch 3)


@pytest.mark.slow
def test_start_and_a_script_write_the_same_table(spark, rocksdb, tmp_path, pg, pg_url, table_name):
    clicks_view(spark, tmp_path, "pg_start")
    df = sqlflow.sql(spark, QUERY.format(view="pg_start", mode="ACCUMULATING AND RETRACTING"))
    sqlflow.start(df, format="postgres", table=table_name, url=pg_url, checkpoint=str(tmp_path / "cp1"),
                  available_now=True)
    by_start = table_rows(pg, table_name)
    assert len(by_start) == 4
    pg.execute("CREATE SCHEMA IF NOT EXISTS dash")
    script = f"""SET spark.sqlflow.checkpointLocation = {tmp_path / 'cp2'};
        SET spark.sqlflow.trigger = availableNow;
        SET spark.sqlflow.postgres.url = {pg_url};
        INSERT INTO postgres.dash.{table_name} {QUERY.format(view='pg_start', mode='ACCUMULATING AND RETRACTING')};"""
    try:
        run_script(spark, script)
    finally:
        for key in ("checkpointLocation", "trigger", "postgres.url"):
            spark.conf.unset(f"spark.sqlflow.{key}")
    assert table_rows(pg, f"dash.{table_name}") == by_start


def test_bounded_panes_written_once(spark, pg, pg_url, table_name):
    spark.createDataFrame([("a", "2024-03-01 08:00:00", 2), ("a", "2024-03-01 08:04:00", 3),
                           ("b", "2024-03-01 08:01:00", 7)], "k string, ts string, v bigint") \
        .selectExpr("k", "CAST(ts AS TIMESTAMP) AS ts", "v").createOrReplaceTempView("pg_bounded")
    panes = sqlflow.sql(spark, "SELECT k, SUM(v) AS total, COUNT(*) AS n FROM pg_bounded GROUP BY k "
                               "WINDOW SESSIONS(GAP 10m) ON ts")
    assert sqlflow.write_panes(panes, pg_url, table_name, run_id="first") is True
    assert sqlflow.write_panes(panes, pg_url, table_name, run_id="first") is False
    rows = pg.execute(f"SELECT k, total, n, pane_timing, is_last, emit_time FROM {table_name} ORDER BY k").fetchall()
    assert rows == [("a", 5, 2, "ON_TIME", True, None), ("b", 7, 1, "ON_TIME", True, None)]
    types = pg.execute("SELECT column_name, data_type FROM information_schema.columns WHERE table_name = %s "
                       "ORDER BY ordinal_position", (table_name,)).fetchall()
    assert types == [("k", "text"), ("window_start", "timestamp with time zone"),
                     ("window_end", "timestamp with time zone"), ("total", "bigint"), ("n", "bigint"),
                     ("pane_index", "bigint"), ("pane_timing", "text"), ("is_last", "boolean"),
                     ("emit_time", "timestamp with time zone"), ("output_time", "timestamp with time zone")]


def test_discarding_refuses_an_aggregate_that_does_not_add(spark, pg_url, table_name):
    spark.createDataFrame([("a", 1)], "k string, v bigint").selectExpr("k", "v", "current_timestamp() AS ts") \
        .createOrReplaceTempView("pg_disc")
    panes = sqlflow.sql(spark, "SELECT k, SUM(v) AS total,\n       MAX(v) AS top FROM pg_disc GROUP BY k\n"
                               "WINDOW FIXED(SIZE 1m) ON ts EMIT DISCARDING")
    with pytest.raises(SqlflowUnsupportedError) as e:
        sqlflow.write_panes(panes, pg_url, table_name)
    assert (e.value.clause, e.value.line, e.value.column) == ("EMIT", 2, 8)
    assert "EMIT DISCARDING panes of top cannot be added" in str(e.value)
    assert sqlflow.write_panes(sqlflow.sql(spark, "SELECT k, SUM(v) AS total, COUNT(*) AS n FROM pg_disc GROUP BY k "
                                                  "WINDOW FIXED(SIZE 1m) ON ts EMIT DISCARDING"), pg_url, table_name)


def test_a_table_of_another_shape_is_refused_before_the_stream_starts(spark, rocksdb, tmp_path, pg, pg_url,
                                                                       table_name):
    clicks_view(spark, tmp_path, "pg_shape")
    pg.execute(f"CREATE TABLE {table_name} (user_id text, clicks integer)")
    df = sqlflow.sql(spark, QUERY.format(view="pg_shape", mode="ACCUMULATING"))
    with pytest.raises(SqlflowAnalysisError, match=f"table {table_name} exists with another shape") as e:
        sqlflow.start(df, format="postgres", table=table_name, url=pg_url, checkpoint=str(tmp_path / "cp"))
    assert e.value.clause == "INSERT"
    assert not spark.streams.active
