"""Two windowed stages on a stream (docs/pipelines.md "On a stream"): the second runs
after the first in the same query, on its panes and on the output watermark its buckets report,
and gives the panes of the two-stage replay of the same micro-batches (the first stage's
`TIMELINE` of the stream's own watermark log, arrivals at the batch times: see
test_replay_vs_stream.py), emit_time included."""
from datetime import datetime, timedelta, timezone

import numpy as np
import pandas as pd
import pytest

import sqlflow
from sqlflow.errors import SqlflowUnsupportedError
from sqlflow.spark import streaming as S
from sqlflow.spark.streaming.session_conf import PROVIDER_KEY

from .test_replay_vs_stream import data_batch_times, frame, write

STAGE1 = """SELECT k, COUNT(*) AS n, SUM(v) AS total FROM {source}
    GROUP BY k WINDOW {window} TRIGGER {trigger} ALLOWED LATENESS {lateness} EMIT ACCUMULATING AND RETRACTING"""
STAGE2 = """WITH s AS ({stage1})
    SELECT {keys}COUNT(*) AS windows, SUM(n) AS n, SUM(total) AS total FROM s{group}
    WINDOW FIXED(SIZE 20s) ON output_time TRIGGER {trigger} ALLOWED LATENESS 100s
    EMIT ACCUMULATING AND RETRACTING"""
COLUMNS = ["windows", "n", "total", "window_start", "window_end", "pane_index", "pane_timing", "is_last",
           "emit_time", "output_time", "is_retraction"]


@pytest.fixture(autouse=True)
def _state_store(rocksdb, spark, tmp_path):
    spark.conf.set(S.CONF_FINISH_DIR, str(tmp_path / "finish"))
    yield
    spark.conf.unset(S.CONF_FINISH_DIR)


def rows_of(df) -> list[tuple]:
    keys = ["k"] if "k" in df.columns else []
    return sorted(tuple(r) for r in df.select(*keys, *COLUMNS).collect())


def stream_and_replay(spark, tmp_path, name, data, stage1: dict, trigger2: str, keyed: bool = False):
    """The pipeline over `data` (one parquet file per micro-batch, read as a backlog) on a stream,
    and replayed: returns (streamed stage-2 panes, replayed ones, the stream's query). `keyed`:
    the second stage groups by k too."""
    second = {"keys": "k, " if keyed else "", "group": " GROUP BY k" if keyed else "", "trigger": trigger2}
    files = tmp_path / "in"
    files.mkdir()
    for i, rows in enumerate(data):
        write(files, i, rows)
    spark.readStream.schema("k string, et timestamp, v long").option("maxFilesPerTrigger", 1) \
        .parquet(str(files)).createOrReplaceTempView(name)
    source = f"{name} WATERMARK et DELAY OF INTERVAL 35 SECONDS"
    df = sqlflow.sql(spark, STAGE2.format(stage1=STAGE1.format(source=source, **stage1), **second))
    query = S.start(df, format="memory", query_name=f"{name}_out", available_now=True, finish=True)
    got = rows_of(spark.table(f"{name}_out"))
    arrivals = data_batch_times(query)
    assert len(arrivals) == len(data)
    steps = spark.createDataFrame(pd.DataFrame(S.watermark_log(query), columns=["p", "w"]))
    steps.selectExpr("timestamp_micros(p) AS proc_time", "timestamp_micros(w) AS watermark") \
        .createOrReplaceTempView(f"{name}_log")
    table = pd.concat([frame(b).assign(at=pd.to_datetime(p, unit="us")) for b, p in zip(data, arrivals)])
    spark.createDataFrame(table).createOrReplaceTempView(f"{name}_table")
    replay_source = f"{name}_table WATERMARK et TIMELINE {name}_log ARRIVAL at"
    replayed = sqlflow.sql(spark, STAGE2.format(stage1=STAGE1.format(source=replay_source, **stage1), **second))
    return got, rows_of(replayed), query


def test_a_merged_sessions_retraction_holds_the_second_stage(spark, tmp_path):
    """Sessions (gap 30 s, early every 2 elements, retracting; watermark DELAY OF 35 s) under a
    20-second FIXED window of their output_time (second 0 is 22:13:20). a@0 and a@2 (file 0) fire
    [0, 32) early; a@25 (file 1) grows it to [0, 55), pending: the retraction of [0, 32) is held at
    31.999999; b@75 (file 2) moves the first stage's watermark to 40 in the batch that reads file
    3, but its output watermark stays at 31.999999, so the second stage's [20, 40) is not closed
    with [0, 32)'s values in it (with the first stage's watermark it would fire ON_TIME with one
    window, n 2, total 3, and change LATE after). b@135 (file 3) moves the watermark to 100 in the
    batch after it: the first stage emits -[0, 32) and +[0, 55) ON_TIME, and the second [20, 40)
    ON_TIME with nothing in it and [40, 60) with a's session (n 3, total 7). At the end of the
    input b's sessions [75, 105) and [135, 165) fall in [100, 120) and [160, 180). The stream gives
    the replay's panes, emit times included."""
    data = [[("a", 0, 1), ("a", 2, 2)], [("a", 25, 4)], [("b", 75, 8)], [("b", 135, 16)]]
    got, replayed, query = stream_and_replay(
        spark, tmp_path, "merged", data,
        {"window": "SESSIONS(GAP 30s)", "trigger": "WATERMARK EARLY REPEAT(COUNT 2)", "lateness": "0s"},
        "WATERMARK")
    assert got == replayed
    t = lambda s: datetime(2023, 11, 14, 22, 13, 20) + timedelta(seconds=s)  # noqa: E731
    us = timedelta(microseconds=1)
    assert [(w, n, total, start, end, timing, out) for w, n, total, start, end, _, timing, _, _, out, _ in got] == [
        (0, 0, 0, t(20), t(40), "ON_TIME", t(40) - us),
        (1, 1, 8, t(100), t(120), "ON_TIME", t(120) - us),
        (1, 1, 16, t(160), t(180), "ON_TIME", t(180) - us),
        (1, 3, 7, t(40), t(60), "ON_TIME", t(60) - us),
    ]
    emitted = {start: emit for _, _, _, start, _, _, _, _, emit, _, _ in got}
    batches = [datetime.fromtimestamp(p / 1e6, timezone.utc).replace(tzinfo=None) for p in data_batch_times(query)]
    assert emitted[t(20)] == emitted[t(40)] > batches[3] > batches[2]  # the batch after file 3's
    assert emitted[t(100)] == emitted[t(160)] > emitted[t(20)]  # the end of the input
    query.stop()


def test_fixed_windows_through_a_select_with_late_panes_dropped_by_the_second_stage(spark, tmp_path):
    """A FIXED first stage (20 s, a pane per element early and late, ALLOWED LATENESS 60 s,
    retracting) read through a SELECT with a WHERE (`k <> 'c'`: c's panes never reach the second
    stage, the reports do), under a second stage without allowed lateness. b@90 (file 2) moves the
    watermark to 55 for the batch of file 3; a@15 (file 4) is judged against it: within the first
    stage's lateness, so its [0, 20) fires LATE (-1, +9), but the second stage's [0, 20) closed at
    its own watermark 55 and was dropped from its state, so it drops both rows and counts them (as
    `dropped_closed_window`) in its own counters (`sqlflow_2`), not the first stage's; its
    `input_rows` are the 8 panes of a and b, not the reports. Its panes: one per window of a's and
    b's first-stage windows (b@90 and b@95 in [80, 100): n 2, total 36). explain() names each
    stage's watermark source."""
    data = [[("a", 5, 1), ("c", 6, 100)], [("a", 50, 2)], [("b", 90, 4)], [("b", 95, 32)], [("a", 15, 8)],
            [("b", 200, 16)]]
    stage1 = {"window": "FIXED(SIZE 20s)", "trigger": "WATERMARK EARLY REPEAT(COUNT 1) LATE REPEAT(COUNT 1)",
              "lateness": "60s"}
    global STAGE2
    plain = STAGE2
    STAGE2 = plain.replace("FROM s{group}\n", "FROM (SELECT * FROM s WHERE k <> 'c') AS f\n")
    try:
        got, replayed, query = stream_and_replay(spark, tmp_path, "fixed", data, stage1, "WATERMARK")
        text = sqlflow.explain(STAGE2.format(stage1=STAGE1.format(
            source="fixed WATERMARK et DELAY OF INTERVAL 35 SECONDS", **stage1), trigger="WATERMARK", keys="",
            group=""), spark)
    finally:
        STAGE2 = plain
    assert got == replayed
    t = lambda s: datetime(2023, 11, 14, 22, 13, 20) + timedelta(seconds=s)  # noqa: E731
    assert [(w, n, total, start, timing) for w, n, total, start, _, _, timing, _, _, _, _ in got] == [
        (1, 1, 1, t(0), "ON_TIME"), (1, 1, 2, t(40), "ON_TIME"), (1, 1, 16, t(200), "ON_TIME"),
        (1, 2, 36, t(80), "ON_TIME")]
    metrics = S.query_metrics(query)
    second = S.query_metrics(query, "sqlflow_2")
    assert (S.late_rows(metrics), second["dropped_closed_window"], second["input_rows"]) == (0, 2, 8)
    assert "input: stream, watermark DELAY OF 35s" in text
    assert "watermark: that stage's output watermark" in text
    query.stop()


def test_what_cannot_be_chained_is_refused_where_it_is_written(spark, tmp_path):
    """Each refusal names its clause: an upstream OUTPUT TIMESTAMP other than END OF WINDOW (no
    stream can know its output watermark), an aggregation between the stages (it cannot pass the
    reports on), a WATERMARK clause on the second stage, and a window not ON output_time."""
    files = tmp_path / "in"
    files.mkdir()
    write(files, 0, [("a", 0, 1)])
    spark.readStream.schema("k string, et timestamp, v long").parquet(str(files)).createOrReplaceTempView("refused")
    stage1 = STAGE1.format(source="refused WATERMARK et DELAY OF INTERVAL 35 SECONDS", window="SESSIONS(GAP 30s)",
                           trigger="WATERMARK EARLY REPEAT(COUNT 2)", lateness="0s")

    def error(sql):
        with pytest.raises(SqlflowUnsupportedError) as caught:
            sqlflow.sql(spark, sql)
        return caught.value

    latest = error(STAGE2.format(stage1=stage1.replace("EMIT ACCUMULATING AND RETRACTING",
                                                       "EMIT ACCUMULATING AND RETRACTING OUTPUT TIMESTAMP LATEST"),
                                 trigger="WATERMARK", keys="", group=""))
    assert (latest.clause, "whose OUTPUT TIMESTAMP is LATEST" in str(latest)) == ("WINDOW", True)
    grouped = error(STAGE2.format(stage1=stage1, trigger="WATERMARK", keys="", group="").replace(
        "FROM s\n", "FROM (SELECT k, output_time, is_retraction, SUM(n) AS n, SUM(total) AS total FROM s "
                    "GROUP BY k, output_time, is_retraction) AS g\n"))
    assert (grouped.clause, "through an aggregation" in str(grouped)) == ("WINDOW", True)
    watermarked = error(STAGE2.format(stage1=stage1, trigger="WATERMARK", keys="", group="").replace(
        "FROM s\n", "FROM s WATERMARK output_time DELAY OF INTERVAL 1 SECOND\n"))
    assert watermarked.clause == "WATERMARK"
    by_end = error(STAGE2.format(stage1=stage1, trigger="WATERMARK", keys="", group="").replace(
        "ON output_time", "ON window_end"))
    assert (by_end.clause, "not window_end" in str(by_end)) == ("WINDOW", True)
    spark.conf.set("spark.sqlflow.streaming.operator", "native")
    try:
        native = error(STAGE2.format(stage1=stage1, trigger="WATERMARK", keys="", group=""))
    finally:
        spark.conf.unset("spark.sqlflow.streaming.operator")
    assert (native.clause, native.line, "only the stateful operator reports" in str(native)) == ("WINDOW", 2, True)


@pytest.mark.defaults
def test_the_docs_hourly_sessions_example(spark, tmp_path, repo_root):
    """docs/pipelines.md's two-stage stream example, run as written: u1's clicks at 00:00:00 and
    00:00:30 (one session [0:00:00, 0:01:30), its first EARLY pane retracted when the second click
    joined it) and u2's at 00:10:00 give one ON_TIME pane for the hour, emitted when the input
    ends: two sessions, three clicks."""
    import re

    from .test_pipelines import write_files

    write_files(tmp_path / "in", [[("u1", 0)], [("u1", 30)], [("u2", 600)]])
    text = (repo_root / "docs" / "pipelines.md").read_text(encoding="utf-8")
    start = text.index("A **windowed** SELECT over a windowed stage on a stream runs")
    code = re.search(r"```python\n(.*?)```", text[start:], re.S).group(1)
    code = code.replace("/data/clicks", str(tmp_path / "in")).replace("/tmp/sqlflow-finish-hourly",
                                                                      str(tmp_path / "fin"))
    scope = {"spark": spark, "sqlflow": sqlflow}
    spark.conf.unset(PROVIDER_KEY)  # Spark's default state store: the example needs no line for it
    exec(code, scope)
    rows = spark.table("hourly").select("window_start", "sessions", "clicks", "pane_timing").collect()
    assert [tuple(r) for r in rows] == [(datetime(2024, 1, 1, 0, 0), 2, 3, "ON_TIME")]
    # the first stage's panes: +[0:00, 0:01), then -[0:00, 0:01) and +[0:00, 0:01:30), then
    # +[0:10, 0:11), each EARLY (a pane per click); no ON_TIME pane without new input (docs/semantics.md, 5.1)
    assert S.query_metrics(scope["query"], "sqlflow_2")["input_rows"] == 4


@pytest.mark.parametrize("seed", [7])
def test_random_two_stage_streams_give_the_two_stage_replay(spark, tmp_path, seed):
    # the second stage per key: its panes go to the buckets of their keys, the reports to all
    """Random keys and event times drifting forward over six files, some behind the watermark
    (late, within the first stage's lateness; some too late for it): sessions with a pane every
    second element and late panes, retracting, under a second stage with early panes every
    element. The streamed panes of the second stage are the replay's, emit times included, and
    rows the first stage dropped are counted in its counters."""
    rng = np.random.default_rng(seed)
    data = []
    for b in range(6):
        times = 40 * b + rng.integers(-60, 30, 8)
        data.append([(f"k{k}", int(max(t, 0)), int(v)) for k, t, v in
                     zip(rng.integers(0, 3, 8), times, rng.integers(1, 100, 8))])
    got, replayed, query = stream_and_replay(
        spark, tmp_path, "random", data,
        {"window": "SESSIONS(GAP 15s)", "trigger": "WATERMARK EARLY REPEAT(COUNT 2) LATE REPEAT(COUNT 1)",
         "lateness": "20s"},
        "WATERMARK EARLY REPEAT(COUNT 1)", keyed=True)
    assert got == replayed
    assert len(got) > 10
    query.stop()
