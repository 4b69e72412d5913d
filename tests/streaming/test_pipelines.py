"""Pipelines over a stream (docs/pipelines.md, docs/streaming.md 5.3): an aggregation downstream of
a windowed stage on a stream gives the same final result as on bounded data, or sqlflow.sql
refuses the shape with a located error; it never runs and is wrong.

The oracle is written here, independently of the engine: sessions are cut by hand from the
clicks sorted per user (a click more than GAP after the previous one starts a new session)."""
import json
import os
import time

import numpy as np
import pytest

import sqlflow
from sqlflow.errors import SqlflowUnsupportedError
from sqlflow.spark import streaming as S
from sqlflow.spark.streaming.session_conf import PROVIDER_KEY

GAP_S = 60  # the sessions' gap, seconds
DAY = "2024-01-01T"


@pytest.fixture(autouse=True)
def _state_store(rocksdb):
    """Every stage here runs the stateful operator, on the RocksDB state store (restored after
    each test, also after one that starts from Spark's default)."""


def write_files(directory, batches):
    """One json file per micro-batch of (user, seconds after midnight) clicks, in order."""
    directory.mkdir(parents=True)
    t = int(time.time()) - 10_000
    for i, rows in enumerate(batches):
        path = directory / f"part-{i:03d}.json"
        path.write_text("".join(json.dumps({"user_id": u, "ts": _stamp(s)}) + "\n" for u, s in rows))
        os.utime(path, (t + i, t + i))


def _stamp(seconds: int) -> str:
    return f"{DAY}{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}Z"


def clicks_view(spark, directory, name):
    spark.readStream.schema("user_id string, ts timestamp").option("maxFilesPerTrigger", 1) \
        .json(str(directory)).createOrReplaceTempView(name)


def oracle_sessions(batches, gap=GAP_S):
    """(user, start, end, clicks) of every session, cut by hand: [first, last + gap)."""
    by_user = {}
    for rows in batches:
        for user, s in rows:
            by_user.setdefault(user, []).append(s)
    out = []
    for user, times in by_user.items():
        times.sort()
        first = last = times[0]
        n = 1
        for s in times[1:]:
            if s < last + gap:  # windows [s, s + gap) overlap: the same session
                last, n = s, n + 1
            else:
                out.append((user, first, last + gap, n))
                first = last = s
                n = 1
        out.append((user, first, last + gap, n))
    return out


STAGE = """SELECT user_id, COUNT(*) AS clicks FROM {view} WATERMARK ts DELAY OF INTERVAL 1 SECOND
    GROUP BY user_id WINDOW SESSIONS(GAP 1m) {trigger} EMIT {mode}"""


def run_to_the_end(spark, df, name):
    S.start(df, format="memory", query_name=name, available_now=True, finish=True)
    return spark.table(name)


@pytest.mark.connect
@pytest.mark.defaults
def test_two_clicks_forming_one_session_count_once(spark, tmp_path, repo_root):
    """docs/pipelines.md's stream example, run as written: the first click's EARLY session is
    retracted when the second merges into it, and the stream's downstream COUNT and SUM subtract
    it, as on bounded data."""
    import re

    batches = [[("u1", 0)], [("u1", 30)]]
    write_files(tmp_path / "in", batches)
    text = (repo_root / "docs" / "pipelines.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text[text.index("## On a stream"):], re.S)
    code = next(b for b in blocks if "by_user" in b)
    code = code.replace("/data/clicks", str(tmp_path / "in")).replace("/tmp/sqlflow-finish", str(tmp_path / "fin"))
    scope = {"spark": spark, "sqlflow": sqlflow}
    spark.conf.unset(PROVIDER_KEY)  # Spark's default state store: the example needs no line for it
    try:
        exec(code, scope)
    finally:
        spark.conf.unset(S.CONF_FINISH_DIR)
    got = [tuple(r) for r in spark.table("by_user").collect()]
    assert got == [("u1", 1, 2)]
    assert [(u, 1, n) for u, _, _, n in oracle_sessions(batches)] == got


@pytest.mark.connect
def test_the_example_run_twice_with_the_same_finish_dir_counts_every_click_both_times(spark, tmp_path, repo_root):
    """A finish marker belongs to the run that wrote it: re-running docs/pipelines.md's example
    (a re-run notebook cell: the same fixed finish directory), one file per micro-batch, reads
    every click again; the first run's marker does not end the second at its first batch."""
    import re

    batches = [[("u1", 0)], [("u1", 30)]]
    write_files(tmp_path / "in", batches)
    text = (repo_root / "docs" / "pipelines.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text[text.index("## On a stream"):], re.S)
    code = next(b for b in blocks if "by_user" in b)
    code = (code.replace('.json("/data/clicks")', f'.option("maxFilesPerTrigger", 1).json("{tmp_path / "in"}")')
            .replace("/tmp/sqlflow-finish", str(tmp_path / "fin")))
    assert "maxFilesPerTrigger" in code
    got = []
    for _ in range(2):
        scope = {"spark": spark, "sqlflow": sqlflow}
        try:
            exec(code, scope)
        finally:
            spark.conf.unset(S.CONF_FINISH_DIR)
        got.append([tuple(r) for r in spark.table("by_user").collect()])
    assert got == [[("u1", 1, 2)], [("u1", 1, 2)]]


def test_a_one_stage_query_run_twice_with_the_same_finish_dir_counts_every_row_both_times(spark, tmp_path):
    """Six files, one per micro-batch, 36 rows: both runs count 36 (a stale marker of the first
    run would finish the second at its first batch, and drop every later row as too late)."""
    batches = [[(f"u{i}", 600 * b + 10 * i) for i in range(6)] for b in range(6)]
    write_files(tmp_path / "in", batches)
    clicks_view(spark, tmp_path / "in", "clicks_twice")
    query = ("SELECT user_id, COUNT(*) AS n FROM clicks_twice WATERMARK ts DELAY OF INTERVAL 1 SECOND "
             "GROUP BY user_id WINDOW FIXED(SIZE 1h)")
    totals = []
    for run in range(2):
        spark.conf.set(S.CONF_FINISH_DIR, str(tmp_path / "finish"))
        try:
            df = sqlflow.sql(spark, query)
        finally:
            spark.conf.unset(S.CONF_FINISH_DIR)
        query_run = S.start(df, format="memory", query_name=f"twice_{run}", available_now=True, finish=True)
        totals.append((sum(r.n for r in spark.table(f"twice_{run}").collect()),
                       S.query_metrics(query_run)["dropped_too_late"]))
    assert totals == [(36, 0), (36, 0)]


def random_clicks(seed: int, users: int = 12, batches: int = 6, per_batch: int = 25, behind: int = 120):
    """Clicks drifting forward 90 s per batch; a batch reaches `behind` seconds back, past the
    watermark of the batch before (late clicks, kept: the stages allow an hour of lateness)."""
    rng = np.random.default_rng(seed)
    out = []
    for b in range(batches):
        times = 3600 + b * 90 + rng.integers(-behind, 40, per_batch)
        out.append([(f"u{u:02d}", int(s)) for u, s in zip(rng.integers(0, users, per_batch), times)])
    return out


LENGTH = "CASE WHEN window_end - window_start < INTERVAL 90 SECONDS THEN 'short' ELSE 'long' END"


#: the most firings (every row early and late) and the fewest (the default trigger); triggers in
#: between are the operator step's properties (tests/streaming/test_owned_step.py) and the
#: equivalence tests' (tests/streaming/test_equivalence.py)
@pytest.mark.parametrize("seed, trigger", [
    (1, "TRIGGER WATERMARK EARLY REPEAT(COUNT 1) LATE REPEAT(COUNT 1)"),
    (3, ""),
])
def test_sessions_by_length_on_a_stream_equal_the_oracle(spark, tmp_path, finish_conf, seed, trigger):
    batches = random_clicks(seed)
    write_files(tmp_path / "in", batches)
    view = f"clicks_{seed}"
    clicks_view(spark, tmp_path / "in", view)
    stage = STAGE.format(view=view, trigger=trigger + " ALLOWED LATENESS 1h", mode="ACCUMULATING AND RETRACTING")
    query = f"""WITH sessions AS ({stage})
        SELECT {LENGTH} AS length, COUNT(*) AS sessions, SUM(clicks) AS clicks, AVG(clicks) AS mean
        FROM sessions GROUP BY 1"""
    assert "HAVING SUM(IF(sessions.is_retraction, -1, 1)) <> 0" in sqlflow.explain(query, spark)
    df = sqlflow.sql(spark, query)
    got = sorted(tuple(r) for r in run_to_the_end(spark, df, f"by_length_{seed}").collect())
    sessions = oracle_sessions(batches)
    expected = []
    for length in ("long", "short"):
        mine = [n for _, start, end, n in sessions if (end - start < 90) == (length == "short")]
        if mine:
            expected.append((length, len(mine), sum(mine), sum(mine) / len(mine)))
    assert got == expected
    assert sum(n for *_, n in sessions) == sum(len(b) for b in batches)
    assert len(expected) == 2


def test_a_discarding_stage_sums_to_totals(spark, tmp_path, finish_conf):
    """Each pane of a DISCARDING stage is a delta: downstream sums are totals per user."""
    batches = random_clicks(4)
    write_files(tmp_path / "in", batches)
    clicks_view(spark, tmp_path / "in", "clicks_disc")
    stage = STAGE.format(view="clicks_disc", trigger="TRIGGER WATERMARK EARLY REPEAT(COUNT 1) ALLOWED LATENESS 1h",
                         mode="DISCARDING")
    df = sqlflow.sql(spark, f"WITH s AS ({stage}) SELECT user_id, SUM(clicks) AS c FROM s GROUP BY user_id")
    # an aggregation over the panes has no result per micro-batch to write beside its dropped rows
    with pytest.raises(SqlflowUnsupportedError, match=r"dropped_path writes each micro-batch's panes and dropped "
                                                      r"rows by batch id; a statement that aggregates the panes "
                                                      r"downstream \(complete or update mode\)") as info:
        S.start(df, format="parquet", path=str(tmp_path / "out"), dropped_path=str(tmp_path / "dropped"),
                checkpoint=str(tmp_path / "cp"))
    assert info.value.clause == "STREAM" and not spark.streams.active
    got = sorted(tuple(r) for r in run_to_the_end(spark, df, "disc_out").collect())
    users = sorted({u for rows in batches for u, _ in rows})
    assert got == [(u, sum(1 for rows in batches for v, _ in rows if v == u)) for u in users]


def test_a_default_trigger_accumulating_stage_emits_final_panes_only(spark, tmp_path, finish_conf):
    """Without early or late firings every session has one pane: nothing to replace downstream."""
    batches = random_clicks(5, behind=50)  # no click behind the watermark: no lateness needed
    write_files(tmp_path / "in", batches)
    clicks_view(spark, tmp_path / "in", "clicks_acc")
    stage = STAGE.format(view="clicks_acc", trigger="", mode="ACCUMULATING")
    df = sqlflow.sql(spark, f"WITH s AS ({stage}) SELECT user_id, COUNT(*) AS n, SUM(clicks) AS c, MAX(clicks) AS top "
                            "FROM s GROUP BY user_id")
    got = sorted(tuple(r) for r in run_to_the_end(spark, df, "acc_out").collect())
    sessions = oracle_sessions(batches)
    users = sorted({u for u, *_ in sessions})
    assert got == [(u, sum(1 for s in sessions if s[0] == u), sum(s[3] for s in sessions if s[0] == u),
                    max(s[3] for s in sessions if s[0] == u)) for u in users]


REFUSED = [
    # MIN, MAX, COUNT(DISTINCT) need the final panes, which a stream never has
    ("WITH s AS ({retracting})\nSELECT MAX(clicks) AS top FROM s", "MAX", (3, 8)),
    ("WITH s AS ({retracting})\nSELECT COUNT(DISTINCT clicks) AS d FROM s", "COUNT", (3, 8)),
    # an ACCUMULATING stage that refines its panes: a streaming aggregation cannot replace them
    ("WITH s AS ({accumulating})\nSELECT SUM(clicks) AS c FROM s", "ACCUMULATING", (3, 8)),
]


@pytest.mark.connect
@pytest.mark.parametrize("query, names, at", REFUSED)
def test_shapes_that_cannot_be_right_on_a_stream_are_refused(spark, tmp_path, query, names, at):
    write_files(tmp_path / "in", [[("u1", 0)]])
    clicks_view(spark, tmp_path / "in", "clicks_refused")
    early = "TRIGGER WATERMARK EARLY REPEAT(COUNT 1)"
    text = query.format(retracting=STAGE.format(view="clicks_refused", trigger=early, mode="ACCUMULATING AND RETRACTING"),
                        accumulating=STAGE.format(view="clicks_refused", trigger=early, mode="ACCUMULATING"))
    with pytest.raises(SqlflowUnsupportedError) as err:
        sqlflow.sql(spark, text)
    message = str(err.value)
    assert names in message and "stream" in message
    assert (err.value.line, err.value.column) == at
    assert err.value.hint


@pytest.mark.connect
def test_a_windowed_select_over_a_latest_stage_on_a_stream_is_refused_where_it_is_written(spark, tmp_path):
    """A windowed SELECT over a windowed stage on a stream runs chained after it
    (tests/streaming/test_chained_stages.py), but only at OUTPUT TIMESTAMP END OF WINDOW upstream:
    with another output timestamp no stream can know the stage's output watermark
    (docs/semantics.md, 1.3), and sqlflow.sql refuses, naming the downstream WINDOW and why."""
    write_files(tmp_path / "in", [[("u1", 0)]])
    clicks_view(spark, tmp_path / "in", "clicks_chained")
    stage = STAGE.format(view="clicks_chained", trigger="", mode="ACCUMULATING AND RETRACTING OUTPUT TIMESTAMP LATEST")
    query = (f"WITH s AS ({stage})\nSELECT COUNT(*) AS n, SUM(clicks) AS c FROM s "
             "WINDOW FIXED(SIZE 1h) ON output_time")
    with pytest.raises(SqlflowUnsupportedError) as err:
        sqlflow.sql(spark, query)
    assert err.value.clause == "WINDOW" and (err.value.line, err.value.column) == (3, 47)
    assert str(err.value).splitlines()[0] == (
        "sqlflow: WINDOW: the SELECT with WINDOW FIXED reads the panes of the SELECT with WINDOW SESSIONS at line 2, "
        "column 22 on a stream, whose OUTPUT TIMESTAMP is LATEST: no stream can know that stage's output watermark, "
        "which at an instant depends on input arriving later (docs/semantics.md, 1.3; docs/pipelines.md, "
        "\"On a stream\") (line 3, column 47)")
    assert err.value.hint.startswith("use OUTPUT TIMESTAMP END OF WINDOW upstream (the default)")

    # across statements the first result is a stream with a watermark of its own
    sqlflow.sql(spark, stage).createOrReplaceTempView("sessions_view")
    with pytest.raises(SqlflowUnsupportedError, match="already has a watermark"):
        sqlflow.sql(spark, "SELECT user_id, COUNT(*) AS n FROM sessions_view WATERMARK window_end "
                           "DELAY OF INTERVAL 1 SECOND GROUP BY user_id WINDOW FIXED(SIZE 1h)")


@pytest.mark.connect
def test_a_stream_with_its_own_spark_watermark_is_refused(spark, tmp_path):
    write_files(tmp_path / "in", [[("u1", 0)]])
    spark.readStream.schema("user_id string, ts timestamp").json(str(tmp_path / "in")) \
        .withWatermark("ts", "5 seconds").createOrReplaceTempView("clicks_watermarked")
    with pytest.raises(SqlflowUnsupportedError, match="already has a watermark") as err:
        sqlflow.sql(spark, "SELECT user_id, COUNT(*) AS n FROM clicks_watermarked WATERMARK ts "
                           "DELAY OF INTERVAL 1 SECOND GROUP BY user_id WINDOW FIXED(SIZE 1m)")
    assert "withWatermark" in err.value.hint
