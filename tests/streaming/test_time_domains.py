"""ON INGESTION TIME and ON PROCESSING TIME on a live stream (docs/semantics.md, 10): each row's
time is the time of the micro-batch that reads it, and so is the watermark, so a window fires at
the first micro-batch at or after its end. The batch times are the wall clock's; the tests read
them from the operator's metrics and check the panes against them: ingestion time exactly as a
replay with those arrivals, processing time as the replay's windows fired at those batches."""
import os
import re
import time
from pathlib import Path

import pandas as pd
import pytest

import sqlflow
from sqlflow.spark import streaming as S

#: (key, value) per file, one file per micro-batch
BATCHES = [[("a", 1), ("b", 2)], [("a", 4)], [("b", 8), ("a", 16)], [("a", 32), ("b", 64)]]
COLUMNS = ["k", "total", "window_start", "window_end", "pane_index", "pane_timing", "is_last"]


def _docs_sql() -> str:
    """The example of docs/streaming.md, section 3.4, as a template over {source} and {domain}."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "streaming.md").read_text(encoding="utf-8")
    sql = re.search(r"```sql\n(.*?)```", text[text.index("### 3.4 Ingestion and processing time"):], re.S).group(1)
    assert "FROM live" in sql and "ON INGESTION TIME" in sql
    return sql.replace("FROM live", "FROM {source}").replace("ON INGESTION TIME", "{domain}")


QUERY = _docs_sql()


@pytest.fixture(autouse=True)
def _finishable(rocksdb, spark, tmp_path):
    spark.conf.set(S.CONF_FINISH_DIR, str(tmp_path / "finish"))
    yield
    spark.conf.unset(S.CONF_FINISH_DIR)


def run_stream(spark, tmp_path, domain: str, name: str):
    """The stream over BATCHES as a backlog of files read one per batch, finished; its panes
    (with emit_time) and the processing time of each batch that read data."""
    files = tmp_path / name
    files.mkdir()
    for i, rows in enumerate(BATCHES):
        tmp = tmp_path / f".part-{name}-{i}.parquet"
        pd.DataFrame({"k": [k for k, _ in rows], "v": [v for _, v in rows]}).to_parquet(tmp, index=False)
        stamp = int(time.time()) - 1000 + i
        os.utime(tmp, (stamp, stamp))
        os.replace(tmp, files / f"part-{i}.parquet")
    spark.readStream.schema("k string, v long").option("maxFilesPerTrigger", 1).parquet(str(files)) \
        .createOrReplaceTempView(name)
    df = sqlflow.sql(spark, QUERY.format(source=name, domain=domain))
    assert "streaming stateful" in sqlflow.explain(QUERY.format(source=name, domain=domain), spark)
    query = S.start(df, format="memory", query_name=f"{name}_out", available_now=True, finish=True)
    progress = [p for p in query.recentProgress if p.get("observedMetrics", {}).get("sqlflow")]
    data = [int(p["observedMetrics"]["sqlflow"]["batch_time"]) for p in progress
            if sum(s["numInputRows"] for s in p["sources"] if "finish" not in s["description"]) > 0]
    rows = spark.table(f"{name}_out").select(*COLUMNS, "emit_time").collect()
    return sorted(tuple(r) for r in rows), data


def replay(spark, arrivals: list[int], domain: str, name: str):
    """BATCHES as a recorded table, each row arriving at its batch's processing time (us)."""
    rows = pd.DataFrame([(k, v, pd.to_datetime(p, unit="us")) for rows, p in zip(BATCHES, arrivals) for k, v in rows],
                        columns=["k", "v", "at"])
    spark.createDataFrame(rows).createOrReplaceTempView(name)
    df = sqlflow.sql(spark, QUERY.format(source=f"{name} WATERMARK at DELAY OF 0s ARRIVAL at", domain=domain))
    return sorted(tuple(r) for r in df.select(*COLUMNS, "emit_time").collect())


def test_ingestion_time_on_a_stream_is_its_replay(spark, tmp_path):
    """Every row's event time is its batch's time and the watermark moves to each batch's time:
    the replay of the same rows arriving at those times gives the same panes. Where the replay
    fires a window at an arrival, the stream fires it in that batch (same emit_time); the last
    windows fire at the replay's end of input, and in the stream at the finish, after it."""
    got, arrivals = run_stream(spark, tmp_path, "ON INGESTION TIME", "ingest")
    assert len(arrivals) == len(BATCHES)
    expected = replay(spark, arrivals, "ON INGESTION TIME", "ingest_replay")
    assert [g[:-1] for g in got] == [e[:-1] for e in expected]
    last = pd.to_datetime(arrivals[-1], unit="us")
    assert [g[-1] for g, e in zip(got, expected) if e[-1] < last] == [e[-1] for e in expected if e[-1] < last]
    assert all(g[-1] >= last for g, e in zip(got, expected) if e[-1] >= last)
    assert sum(g[1] for g in got) == 127  # every row counted once: discarding nothing, one pane per window


def test_processing_time_on_a_stream_fires_at_the_first_batch_after_the_end(spark, tmp_path):
    """The windows and totals of the replay on processing time over the same arrivals; the
    replay fires each at its end, the stream at the first of its batches at or after it."""
    got, arrivals = run_stream(spark, tmp_path, "ON PROCESSING TIME", "proc")
    assert len(arrivals) == len(BATCHES)
    expected = replay(spark, arrivals, "ON PROCESSING TIME", "proc_replay")
    assert [g[:-1] for g in got] == [e[:-1] for e in expected]
    assert all(e[-1] == e[3] for e in expected)  # the replay: at the window's end exactly
    later = [pd.to_datetime(a, unit="us") for a in arrivals]
    for g in got:
        after = [b for b in later if b >= g[3]]
        assert g[-1] == after[0] if after else g[-1] >= later[-1]
    assert {g[5] for g in got} == {"ON_TIME"}


def test_explain_says_the_sources_watermark_is_not_used(spark):
    spark.readStream.format("rate").load() \
        .selectExpr("CAST(value % 3 AS STRING) AS k", "value AS v", "timestamp AS ts").createOrReplaceTempView("rate_live")
    text = sqlflow.explain("SELECT k, SUM(v) AS total FROM rate_live WATERMARK ts DELAY OF 10s "
                           "GROUP BY k WINDOW FIXED(SIZE 1s) ON PROCESSING TIME", spark)
    assert ("input: stream, on PROCESSING TIME: each row's time is its micro-batch's, and so is the watermark (a "
            "window fires at the first micro-batch at or after its end); the source's WATERMARK clause (on ts) "
            "is not used") in text


def test_a_trigger_that_finishes_is_warned_about_on_a_stream(spark):
    """A stream gets the note too: its windows accept data until the watermark passes end + the
    lateness, and COUNT 2 closes a window at its second element."""
    import warnings

    from sqlflow.spark.trigger_checks import SqlflowTriggerWarning

    spark.readStream.format("rate").load() \
        .selectExpr("CAST(value % 3 AS STRING) AS k", "value AS v", "timestamp AS ts").createOrReplaceTempView("rate_count")
    query = ("SELECT k, SUM(v) AS total FROM rate_count WATERMARK ts DELAY OF 10s "
             "GROUP BY k WINDOW FIXED(SIZE 1m) TRIGGER COUNT 2 ALLOWED LATENESS 1h")
    note = ("TRIGGER COUNT 2 can finish before the watermark passes the window's end: the window is then closed, and "
            "its later elements are dropped (counted as 'closed window', listed by sqlflow.dropped); REPEAT(...) or "
            "WATERMARK ... LATE keeps it firing")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        df = sqlflow.sql(spark, query)
    assert df.isStreaming
    assert [str(w.message) for w in caught if w.category is SqlflowTriggerWarning] == [
        f"sqlflow: the SELECT with WINDOW FIXED at line 1, column 80: {note}"]
    assert f"  warning: {note}" in sqlflow.explain(query, spark).splitlines()
