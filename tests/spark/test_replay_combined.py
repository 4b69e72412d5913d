"""Replayed sessions combined per key, gap-aligned slice and arrival period in the bucket jobs
(sqlflow/engine/arrival_combine.py, engine_path.replay_combining; `spark.sqlflow.replay.combine`
true): the same panes, dropped rows and metrics as the engine over the single rows."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sqlflow
from sqlflow.spark import conf, engine_path
from tests.conftest import examples

SECOND = 1_000_000
EARLY_LATE = "TRIGGER SEQUENCE(REPEAT_UNTIL(PERIOD 10s, WATERMARK), REPEAT(WATERMARK))"


def _query(trigger=EARLY_LATE, lateness="ALLOWED LATENESS 20s", aggs="COUNT(*) AS n, COUNT(v) AS nv, "
           "SUM(v) AS sv, MIN(v) AS lo, MAX(v) AS hi", window="SESSIONS(GAP 15s)"):
    return (f"SELECT k, {aggs} FROM replayed WATERMARK et DELAY OF INTERVAL 5 SECONDS ARRIVAL at "
            f"GROUP BY k WINDOW {window} {trigger} {lateness} EMIT ACCUMULATING AND RETRACTING")


def _view(spark, seed: int, n: int):
    """`n` rows of 3 keys (and NULL), values with NULLs, arrivals 0-4 s late and some 30-60 s
    late, a few rows without an event or arrival time."""
    rng = np.random.default_rng(seed)
    et = rng.integers(0, 300, n) * SECOND // 2
    at = et + np.where(rng.random(n) < 0.85, rng.integers(0, 5, n), rng.integers(30, 60, n)) * SECOND
    rows = []
    for i in range(n):
        k = None if rng.random() < 0.1 else f"u{rng.integers(0, 3)}"
        v = None if rng.random() < 0.1 else int(rng.integers(-5, 50))
        e = None if rng.random() < 0.03 else int(et[i])
        a = None if rng.random() < 0.03 else int(at[i])
        rows.append((k, v, e, a))
    df = spark.createDataFrame(rows, "k string, v bigint, e long, a long")
    df.selectExpr("k", "v", "timestamp_micros(e) AS et", "timestamp_micros(a) AS at").createOrReplaceTempView(
        "replayed")


@pytest.fixture(autouse=True)
def combining(spark):
    spark.conf.set(conf.REPLAY_COMBINE, "true")
    yield
    spark.conf.unset(conf.REPLAY_COMBINE)


def _run(spark, query, monkeypatch, combine: bool):
    with monkeypatch.context() as m:
        if not combine:
            m.setattr(engine_path, "replay_combining", lambda *a: None)
        df = sqlflow.sql(spark, query, path="engine")
        panes = sorted(map(tuple, df.collect()), key=repr)
        dropped = sorted(map(tuple, sqlflow.dropped(df).collect()), key=repr)
        metrics = sqlflow.metrics(df)
    metrics = {k: v for k, v in metrics.items() if k != "stages"}
    return panes, dropped, metrics


def test_not_combined_unless_asked(spark):
    _view(spark, 5, 20)
    spark.conf.unset(conf.REPLAY_COMBINE)
    assert "replayed rows combined" not in sqlflow.explain(_query(), spark)


def test_combined_replay_gives_the_panes_of_single_rows(spark, monkeypatch):
    _view(spark, 5, 400)
    query = _query()
    assert "replayed rows combined per key, aligned slice and arrival period" in sqlflow.explain(query, spark)
    got = _run(spark, query, monkeypatch, combine=True)
    want = _run(spark, query, monkeypatch, combine=False)
    assert got == want
    panes, dropped, metrics = got
    assert metrics["input_rows"] == 400 and metrics["panes"] + metrics["retractions"] == len(panes)
    assert {r[-3] for r in dropped} >= {"null event time", "null arrival time"}  # reason column


@settings(max_examples=examples(8), suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**16), n=st.integers(0, 120),
       trigger=st.sampled_from([EARLY_LATE, "", "TRIGGER WATERMARK EARLY PERIOD 3s"]),
       lateness=st.sampled_from(["", "ALLOWED LATENESS 20s"]))
def test_combined_replay_equals_single_rows_on_random_input(spark, monkeypatch, seed, n, trigger, lateness):
    _view(spark, seed, n)
    query = _query(trigger, lateness)
    assert _run(spark, query, monkeypatch, combine=True) == _run(spark, query, monkeypatch, combine=False)


@pytest.mark.parametrize("query", [
    _query(trigger="TRIGGER REPEAT(COUNT 2)"),
    _query(trigger="TRIGGER WATERMARK EARLY DELAY 3s"),
    _query(aggs="AVG(v) AS a"),
    _query(aggs="MIN(CAST(v AS STRING)) AS a"),
    _query(aggs="SUM(CAST(v AS DOUBLE)) AS a"),
])
def test_not_combined_where_the_rule_does_not_hold(spark, query):
    _view(spark, 5, 20)
    text = sqlflow.explain(query, spark)
    assert "engine" in text and "replayed rows combined" not in text


@settings(max_examples=examples(8), suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**16), n=st.integers(0, 300), chunk=st.sampled_from([1, 40, 97]),
       batch=st.sampled_from([13, 64, 10_000]),
       trigger=st.sampled_from([EARLY_LATE, "", "TRIGGER WATERMARK EARLY PERIOD 3s"]),
       window=st.sampled_from(["SESSIONS(GAP 15s)", "FIXED(SIZE 20s, OFFSET 3s)"]))
def test_a_hot_bucket_read_in_chunks_equals_single_rows(spark, monkeypatch, seed, n, chunk, batch, trigger, window):
    """A bucket above spark.sqlflow.bucketChunkRows rows (a hot key) is read in chunks of as many
    rows, each combined into the groups of the ones before: the panes, dropped rows and metrics
    of the single rows, whatever the chunk and Arrow batch sizes, for sessions and FIXED windows."""
    _view(spark, seed, n)
    query = _query(trigger, window=window)
    spark.conf.unset(conf.REPLAY_COMBINE)
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(batch))
    spark.conf.set(conf.BUCKET_CHUNK_ROWS, str(chunk))
    try:
        assert f"a bucket above {chunk:,} rows (a hot key) is read in chunks" in sqlflow.explain(query, spark)
        got = _run(spark, query, monkeypatch, combine=True)
        spark.conf.set(conf.BUCKET_CHUNK_ROWS, "0")
        assert "read in chunks" not in sqlflow.explain(query, spark)
        assert got == _run(spark, query, monkeypatch, combine=True)
    finally:
        spark.conf.unset(conf.BUCKET_CHUNK_ROWS)
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")


def test_a_bad_chunk_size_is_a_located_error(spark):
    _view(spark, 5, 20)
    spark.conf.unset(conf.REPLAY_COMBINE)
    spark.conf.set(conf.BUCKET_CHUNK_ROWS, "many")
    try:
        with pytest.raises(sqlflow.SqlflowError, match="bucketChunkRows must be a number of rows"):
            sqlflow.sql(spark, _query(), path="engine")
    finally:
        spark.conf.unset(conf.BUCKET_CHUNK_ROWS)
