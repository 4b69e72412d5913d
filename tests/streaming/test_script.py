"""SQL scripts: a streaming source, a windowed query and a sink with a checkpoint, end to end;
and sqlflow.sql over streaming views and STREAM(...)."""
import json
import re

import pytest

import sqlflow
from sqlflow.errors import SqlflowUnsupportedError
from sqlflow.spark import streaming as S
from sqlflow.spark.script import run_script

#: also on Spark Connect and on a session with Spark's defaults (tests/conftest.py)
pytestmark = [pytest.mark.connect, pytest.mark.defaults]

@pytest.fixture(autouse=True)
def _reset_sqlflow_conf(spark):
    """Scripts SET session-wide keys: unset them after each test."""
    yield
    for key in ("checkpointLocation", "trigger", "finish", "queryName", "streaming.finishDir"):
        spark.conf.unset(f"spark.sqlflow.{key}")


EVENTS = [  # (user, seconds after midnight, amount), one file per micro-batch
    [("u1", 0, 1), ("u2", 20, 2)],
    [("u1", 50, 4), ("u1", 200, 8)],
    [("u2", 30, 32), ("not json", None, None)],
    [("u1", 100, 16)],
]


def write_json(directory, batches):
    directory.mkdir(parents=True)
    import os
    import time
    t = int(time.time()) - 1000
    for i, batch in enumerate(batches):
        lines = []
        for user, sec, amount in batch:
            if sec is None:
                lines.append('{"user_id": "broken"')
            else:
                lines.append(json.dumps({"user_id": user, "ts": f"2024-01-01T00:{sec // 60:02d}:{sec % 60:02d}Z",
                                         "amount": amount}))
        path = directory / f"part-{i}.json"
        path.write_text("\n".join(lines) + "\n")
        os.utime(path, (t + i, t + i))


SCRIPT = """
SET spark.sqlflow.checkpointLocation = {cp};
SET spark.sqlflow.trigger = availableNow;
SET spark.sqlflow.finish = true;
CREATE TEMPORARY VIEW clicks (user_id STRING, ts TIMESTAMP, amount BIGINT)
USING json OPTIONS (path '{src}', streaming true, mode 'DROPMALFORMED', maxFilesPerTrigger 1);
INSERT INTO parquet.`{out}`
SELECT user_id, SUM(amount) AS total, COUNT(*) AS clicks
FROM clicks WATERMARK ts DELAY OF INTERVAL 10 SECONDS
GROUP BY user_id
WINDOW SESSIONS(GAP 1m) ALLOWED LATENESS 5m EMIT ACCUMULATING AND RETRACTING;
"""


def test_script_source_query_sink_with_checkpoint(spark, tmp_path):
    write_json(tmp_path / "in", EVENTS)
    text = SCRIPT.format(cp=tmp_path / "cp", src=tmp_path / "in", out=tmp_path / "out")
    results = run_script(spark, text)
    query = results[-1]
    assert not query.isActive
    # the query's name (its checkpoint's subdirectory): the sink's format and path, every run of
    # characters other than letters and digits one "_" (a temp path may hold "-" and ".")
    assert (tmp_path / "cp" / f"parquet_{re.sub('[^0-9A-Za-z]+', '_', str(tmp_path / 'out')).strip('_')}").is_dir()
    got = sorted((r.user_id, r.window_start.strftime("%M:%S"), r.window_end.strftime("%M:%S"), r.total, r.clicks,
                  r.pane_index, r.pane_timing, r.is_retraction)
                 for r in spark.read.parquet(str(tmp_path / "out")).collect())
    # u1@0 and u1@50 form [0:00, 1:50), emitted when the watermark passes 1:50 (3:10 in batch 2);
    # u1@100 arrives late in batch 3 and merges into it: the session's ON_TIME pane is retracted
    # and replaced by a LATE one; u1@200 stays alone
    assert got == sorted([
        ("u2", "00:20", "01:30", 34, 2, 0, "ON_TIME", False),
        ("u1", "00:00", "01:50", 5, 2, 0, "ON_TIME", False),
        ("u1", "00:00", "01:50", 5, 2, 0, "ON_TIME", True),
        ("u1", "00:00", "02:40", 21, 3, 1, "LATE", False),
        ("u1", "03:20", "04:20", 8, 1, 0, "ON_TIME", False),
    ])
    metrics = S.query_metrics(query)
    assert metrics["malformed_records"] == 1


def test_sql_over_a_streaming_view(spark, tmp_path):
    write_json(tmp_path / "in", EVENTS[:2])
    run_script(spark, f"CREATE TEMPORARY VIEW clicks2 (user_id STRING, ts TIMESTAMP, amount BIGINT) "
                      f"USING json OPTIONS (path '{tmp_path / 'in'}', streaming true, maxFilesPerTrigger 1)")
    for source in ("clicks2", "STREAM(clicks2)"):
        df = sqlflow.sql(spark, f"SELECT user_id, SUM(amount) AS total FROM {source} "
                                "WATERMARK ts DELAY OF INTERVAL 10 SECONDS GROUP BY user_id WINDOW FIXED(SIZE 1m)")
        assert df.isStreaming
        assert df.columns == ["user_id", "total", "window_start", "window_end", "pane_index", "pane_timing",
                              "is_last", "emit_time", "output_time"]
        assert [s.operator for s in S.pane_streams(df)] == ["native"]
        name = "fixed_" + source.replace("(", "_").replace(")", "")
        S.start(df, format="memory", query_name=name, available_now=True)
        # the watermark ends at 3:10 (u1@200 - 10 s): [0:00, 1:00) is emitted, [3:00, 4:00) is open
        got = sorted((r.user_id, r.window_start.strftime("%M:%S"), r.total) for r in spark.table(name).collect())
        assert got == [("u1", "00:00", 5), ("u2", "00:00", 2)]
    # counts of a stream live in its query's progress, not in a report of the DataFrame
    with pytest.raises(SqlflowUnsupportedError, match="query_metrics"):
        sqlflow.metrics(df)


def test_streaming_sql_errors(spark, tmp_path):
    write_json(tmp_path / "in", EVENTS[:1])
    run_script(spark, f"CREATE TEMPORARY VIEW clicks3 (user_id STRING, ts TIMESTAMP, amount BIGINT) "
                      f"USING json OPTIONS (path '{tmp_path / 'in'}', streaming true)")
    with pytest.raises(sqlflow.SqlflowError, match="needs a source with WATERMARK"):
        sqlflow.sql(spark, "SELECT user_id, SUM(amount) FROM clicks3 GROUP BY user_id WINDOW FIXED(SIZE 1m) ON ts")
    # several watermarked streams feed a window as branches of one UNION ALL, not joined together
    with pytest.raises(SqlflowUnsupportedError) as err:
        sqlflow.sql(spark, "SELECT x.user_id, SUM(x.amount) AS s FROM\n"
                           "clicks3 WATERMARK ts DELAY OF INTERVAL 1 SECOND AS x JOIN\n"
                           "clicks3 WATERMARK ts DELAY OF INTERVAL 1 MINUTE AS y ON x.user_id = y.user_id\n"
                           "GROUP BY x.user_id WINDOW FIXED(SIZE 1m) ON x.ts")
    assert str(err.value).splitlines()[0] == (
        "sqlflow: WATERMARK: 2 watermarked streams feed this window, not as branches of one UNION ALL: a stream "
        "joined to another stream has no defined watermark here (line 2, column 9)")
    # ... whose rows must reach the window with the column naming their source
    with pytest.raises(SqlflowUnsupportedError) as err:
        sqlflow.sql(spark, "SELECT user_id, SUM(amount) AS s FROM (SELECT user_id, amount, ts FROM (\n"
                           "SELECT * FROM clicks3 WATERMARK ts DELAY OF INTERVAL 1 SECOND UNION ALL\n"
                           "SELECT * FROM clicks3 WATERMARK ts DELAY OF INTERVAL 1 MINUTE) u) v\n"
                           "GROUP BY user_id WINDOW FIXED(SIZE 1m) ON ts")
    assert str(err.value).splitlines()[0] == (
        "sqlflow: WATERMARK: 2 watermarked streams feed this window, but a SELECT list between their UNION ALL "
        "and the window leaves out the column that says which source each row comes from (line 2, column 23)")
    with pytest.raises(sqlflow.SqlflowError, match="needs a checkpoint"):
        run_script(spark, f"INSERT INTO parquet.`{tmp_path / 'o'}` SELECT user_id, SUM(amount) AS s FROM clicks3 "
                          "WATERMARK ts DELAY OF INTERVAL 1 SECOND GROUP BY user_id WINDOW FIXED(SIZE 1m)")
