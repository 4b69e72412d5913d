"""Several watermarked streams feeding one window (docs/semantics.md, 9; the low-watermark article): a UNION ALL of
two file sources, each with its own WATERMARK ... DELAY OF; the window's watermark is the minimum
of theirs (a source that has sent nothing holds it back), late rows are judged against it and
counted per source. A join with a static table keeps the stream's own watermark."""
import os
import re
import time
from datetime import datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest

import sqlflow
from sqlflow.spark import streaming as S

BASE = datetime(2023, 11, 14, 22, 13, 20)  # event second 0 (1_700_000_000)
#: per micro-batch, (key, event second, value) of source a (DELAY OF 10s) and of source b (30s)
A = [[("x", 45, 1)], [("x", 115, 2)], [("x", 175, 4)], [("x", 235, 8)], [("x", 30, 16), ("x", 250, 32)]]
B = [[("x", 50, 10)], [("x", 60, 20)], [("x", 95, 40)], [("x", 140, 80)],
     [("x", 35, 64), ("x", 38, 128), ("x", 150, 256)]]


def _docs_sql() -> str:
    """The example of docs/streaming.md, section 5.4, as a template over sources {a} and {b}."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "streaming.md").read_text(encoding="utf-8")
    sql = re.search(r"```sql\n(.*?)```", text[text.index("### 5.4 Several streams"):], re.S).group(1)
    assert "FROM eu WATERMARK" in sql and "FROM us WATERMARK" in sql
    return sql.replace("FROM eu", "FROM {a}").replace("FROM us", "FROM {b}")


UNION = _docs_sql()
COLUMNS = ["k", "total", "window_start", "pane_index", "pane_timing", "is_last"]


def S_(second: int) -> datetime:
    return BASE + timedelta(seconds=second)


@pytest.fixture(autouse=True)
def _state_store(rocksdb, spark, tmp_path):
    spark.conf.set(S.CONF_FINISH_DIR, str(tmp_path / "finish"))
    yield
    spark.conf.unset(S.CONF_FINISH_DIR)


def frame(rows) -> pd.DataFrame:
    return pd.DataFrame({"k": [k for k, _, _ in rows], "v": [v for _, _, v in rows],
                         "et": pd.to_datetime([1_700_000_000 + s for _, s, _ in rows], unit="s")})


def source(spark, tmp_path, name: str, batches) -> None:
    """A backlog of files, one per micro-batch, as streaming view `name`."""
    files = tmp_path / name
    files.mkdir()
    for i, rows in enumerate(batches):
        tmp = tmp_path / f".{name}-{i}.parquet"
        frame(rows).to_parquet(tmp, index=False, coerce_timestamps="us")
        stamp = int(time.time()) - 1000 + i
        os.utime(tmp, (stamp, stamp))
        os.replace(tmp, files / f"part-{i}.parquet")
    spark.readStream.schema("k string, v long, et timestamp").option("maxFilesPerTrigger", 1) \
        .parquet(str(files)).createOrReplaceTempView(name)


def data_batch_times(query) -> list[int]:
    return [int(p["observedMetrics"]["sqlflow"]["batch_time"]) for p in query.recentProgress
            if sum(s["numInputRows"] for s in p["sources"] if "finish" not in s["description"]) > 0]


def run(spark, df, name):
    query = S.start(df, format="memory", query_name=name, available_now=True, finish=True)
    rows = spark.table(name).select(*COLUMNS, "emit_time").collect()
    return sorted((tuple(r) for r in rows), key=lambda r: (r[2], r[3])), query


def test_two_streams_the_watermark_is_their_minimum(spark, tmp_path):
    """Batch N reads file N of each source, judges its rows against W(N-1) and steps to W(N),
    the minimum over the sources of (max event time of the batches before N - delay), seconds:

        batch  a's max (10s)  b's max (30s)  W(N) = min                      fires ON_TIME
        0      -              -              none
        1      45             50             min(35, 20)   = 20
        2      115            60             min(105, 30)  = 30   (a alone: 105 fires [40, 100))
        3      175            95             min(165, 65)  = 65
        4      235            140            min(225, 110) = 110                [40, 100): 1+10+20+40
        5 (no data)  250      150            min(240, 120) = 120
        finish                               +inf      [100, 160): 2+80+256, [160, 220): 4, [220, 280): 8+32

    Batch 4 judges against W(3) = 65: a's row at 30 and b's at 35 and 38 are in [-20, 40), past
    the watermark: too late, one of a's and two of b's."""
    source(spark, tmp_path, "eu", A)
    source(spark, tmp_path, "us", B)
    query_text = UNION.format(a="eu", b="us")
    assert ("input: stream, watermark the minimum of 2 sources' (UNION ALL): DELAY OF 10s on et of eu, "
            "DELAY OF 30s on et of us") in sqlflow.explain(query_text, spark)
    df = sqlflow.sql(spark, query_text)
    got, query = run(spark, df, "several_out")
    arrivals = data_batch_times(query)
    assert len(arrivals) == 5
    at = [pd.to_datetime(p, unit="us").to_pydatetime() for p in arrivals]
    finish = max(r[-1] for r in got)
    assert got == [
        ("x", 71, S_(40), 0, "ON_TIME", True, at[4]),
        ("x", 338, S_(100), 0, "ON_TIME", True, finish),
        ("x", 4, S_(160), 0, "ON_TIME", True, finish),
        ("x", 40, S_(220), 0, "ON_TIME", True, finish),
    ]
    assert finish > at[4]
    metrics = S.query_metrics(query)
    assert (metrics["dropped_too_late"], S.late_by_source(metrics)) == (3, {"eu": 1, "us": 2})
    # the log starts at batch 1 (batch 0 has no watermark yet)
    assert [w for _, w in S.watermark_log(query)][:5] == [
        int((S_(s) - datetime(1970, 1, 1)).total_seconds() * 1e6) for s in (20, 30, 65, 110, 120)]

    # the replay of the same arrivals under the stream's watermark log (TIMELINE) gives its panes
    steps = spark.createDataFrame(pd.DataFrame(S.watermark_log(query), columns=["p", "w"]))
    steps.selectExpr("timestamp_micros(p) AS proc_time", "timestamp_micros(w) AS watermark") \
        .createOrReplaceTempView("several_log")
    for name, batches in (("ra", A), ("rb", B)):
        rows = pd.concat([frame(b).assign(at=pd.to_datetime(p, unit="us")) for b, p in zip(batches, arrivals)])
        spark.createDataFrame(rows).createOrReplaceTempView(name)
    replayed = sqlflow.sql(spark, UNION.format(a="ra", b="rb").replace("k, v, et FROM", "k, v, et, at FROM").replace(
        "DELAY OF INTERVAL 10 SECONDS", "TIMELINE several_log ARRIVAL at").replace(
        "DELAY OF INTERVAL 30 SECONDS", "TIMELINE several_log ARRIVAL at"))
    assert sorted((tuple(r) for r in replayed.select(*COLUMNS).collect()), key=lambda r: (r[2], r[3])) == [g[:-1] for g in got]


def test_a_silent_source_holds_the_watermark(spark, tmp_path):
    """A source that has sent no row yet holds the window's watermark at none (the low-watermark article: the
    minimum over every input; Spark's own minimum would leave it out): nothing fires before the
    finish, and nothing is late."""
    source(spark, tmp_path, "la", [A[0], A[4]])
    (tmp_path / "lb").mkdir()
    spark.readStream.schema("k string, v long, et timestamp").parquet(str(tmp_path / "lb")) \
        .createOrReplaceTempView("lb")
    got, query = run(spark, sqlflow.sql(spark, UNION.format(a="la", b="lb")), "silent_out")
    assert len({r[-1] for r in got}) == 1 and min(r[-1] for r in got) > max(
        pd.to_datetime(p, unit="us").to_pydatetime() for p in data_batch_times(query))
    assert [r[:-1] for r in got] == [("x", 16, S_(-20), 0, "ON_TIME", True), ("x", 1, S_(40), 0, "ON_TIME", True),
                                     ("x", 32, S_(220), 0, "ON_TIME", True)]
    assert S.late_by_source(S.query_metrics(query)) == {"la": 0, "lb": 0}


def test_a_join_with_a_static_table_keeps_the_stream_watermark(spark, tmp_path):
    """Source a alone, joined with a table without WATERMARK: a's own watermark, seconds
    (W(N) = a's max of the batches before N - 10): 35, 105, 165, 225, then 240 (no data);
    [40, 100) fires in batch 2, [100, 160) in 3, [160, 220) in 4, where a@30 is too late
    (judged against 165); [220, 280) at the finish."""
    source(spark, tmp_path, "ja", A)
    spark.createDataFrame([("x", "gold")], "k string, tier string").createOrReplaceTempView("tiers")
    df = sqlflow.sql(spark, "SELECT t.tier AS k, SUM(v) AS total FROM ja WATERMARK et DELAY OF INTERVAL 10 SECONDS "
                            "JOIN tiers t ON ja.k = t.k GROUP BY t.tier WINDOW FIXED(SIZE 1m)")
    got, query = run(spark, df, "joined_out")
    at = [pd.to_datetime(p, unit="us").to_pydatetime() for p in data_batch_times(query)]
    finish = max(r[-1] for r in got)
    assert got == [("gold", 1, S_(40), 0, "ON_TIME", True, at[2]), ("gold", 2, S_(100), 0, "ON_TIME", True, at[3]),
                   ("gold", 4, S_(160), 0, "ON_TIME", True, at[4]), ("gold", 40, S_(220), 0, "ON_TIME", True, finish)]
    assert S.query_metrics(query)["dropped_too_late"] == 1


def test_the_native_operator_is_refused_for_several_watermarked_streams(spark, tmp_path):
    """`spark.sqlflow.streaming.operator = native` cannot run a window fed by two watermarked
    streams (Spark's window aggregation keeps one watermark): refused at the second WATERMARK."""
    from sqlflow.errors import SqlflowUnsupportedError

    source(spark, tmp_path, "eu", A)
    source(spark, tmp_path, "us", B)
    query_text = UNION.format(a="eu", b="us")
    spark.conf.set("spark.sqlflow.streaming.operator", "native")
    try:
        with pytest.raises(SqlflowUnsupportedError) as caught:
            sqlflow.sql(spark, query_text)
    finally:
        spark.conf.unset("spark.sqlflow.streaming.operator")
    second = query_text.splitlines().index(next(line for line in query_text.splitlines() if "FROM us WATERMARK" in line))
    assert (caught.value.clause, caught.value.line) == ("WATERMARK", second + 1)
    assert ("spark.sqlflow.streaming.operator is native, but Spark's window aggregation keeps one watermark, and 2 "
            "watermarked streams feed this window") in str(caught.value)
