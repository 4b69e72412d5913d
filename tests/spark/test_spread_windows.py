"""A windowed SELECT without GROUP BY keys over FIXED or CUMULATE windows runs over many buckets,
each window's rows in one (`engine_path.spread_over`): the same panes, dropped rows and metrics as
the one bucket that held every row before (the engine-level property: tests/engine/test_spread_blocks.py)."""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sqlflow
from sqlflow.spark import engine_path
from tests.conftest import examples

SECOND = 1_000_000
TRIGGERS = ["TRIGGER WATERMARK LATE COUNT 1", "TRIGGER WATERMARK EARLY PERIOD 10s LATE WATERMARK",
            "TRIGGER REPEAT(COUNT 3)", ""]
WINDOWS = ["FIXED(SIZE 20s)", "FIXED(SIZE 30s, OFFSET 7s)", "CUMULATE(STEP 10s, SIZE 30s)"]
MODES = ["DISCARDING", "ACCUMULATING", "ACCUMULATING AND RETRACTING"]


def _view(spark, seed: int, n: int):
    """`n` rows over 150 s of event time, arrivals 0-4 s late and some 20-50 s late, a few
    without an event time."""
    rng = np.random.default_rng(seed)
    et = rng.integers(0, 300, n) * SECOND // 2
    at = et + np.where(rng.random(n) < 0.85, rng.integers(0, 5, n), rng.integers(20, 50, n)) * SECOND
    rows = [(int(rng.integers(-5, 50)), None if rng.random() < 0.03 else int(et[i]), int(at[i])) for i in range(n)]
    df = spark.createDataFrame(rows, "v bigint, e long, a long")
    df.selectExpr("v", "timestamp_micros(e) AS et", "timestamp_micros(a) AS at").createOrReplaceTempView("keyless")


def _run(spark, query, monkeypatch, spread: bool):
    with monkeypatch.context() as m:
        if not spread:
            m.setattr(engine_path, "spread_over", lambda *a: None)
        df = sqlflow.sql(spark, query, path="engine")
        panes = sorted(map(tuple, df.collect()), key=repr)
        dropped = sorted(map(tuple, sqlflow.dropped(df).collect()), key=repr)
        metrics = {k: v for k, v in sqlflow.metrics(df).items() if k != "stages"}
    return panes, dropped, metrics


@settings(max_examples=examples(6), suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.integers(0, 10_000), st.sampled_from(WINDOWS), st.sampled_from(TRIGGERS), st.sampled_from(MODES),
       st.booleans())
def test_spread_windows_equal_one_bucket(spark, monkeypatch, seed, window, trigger, mode, replay):
    _view(spark, seed, 300)
    source = ("keyless WATERMARK et DELAY OF INTERVAL 5 SECONDS ARRIVAL at" if replay else "keyless")
    on = "" if replay else " ON et"
    query = (f"SELECT COUNT(*) AS n, SUM(v) AS total, MAX(v) AS top FROM {source} WINDOW {window}{on} {trigger} "
             f"ALLOWED LATENESS 20s EMIT {mode}")
    spread = _run(spark, query, monkeypatch, spread=True)
    assert spread == _run(spark, query, monkeypatch, spread=False)
    assert spread[0]  # panes were computed


def test_explain_says_the_rows_spread_by_window(spark):
    _view(spark, 1, 20)
    text = sqlflow.explain("SELECT COUNT(*) AS n FROM keyless WATERMARK et DELAY OF INTERVAL 5 SECONDS ARRIVAL at "
                           "WINDOW FIXED(SIZE 20s) TRIGGER WATERMARK LATE COUNT 1", spark)
    assert "no GROUP BY keys: the rows spread by window (each window's rows in one bucket)" in text
    text = sqlflow.explain("SELECT COUNT(*) AS n FROM keyless WATERMARK et DELAY OF INTERVAL 5 SECONDS ARRIVAL at "
                           "WINDOW SLIDING(SIZE 20s, PERIOD 10s) TRIGGER WATERMARK LATE COUNT 1", spark)
    assert "buckets: 1 (no GROUP BY keys: every row is one key)" in text
