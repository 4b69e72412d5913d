"""Views and sqlflow.sql: what a query reads, and what a view over a windowed SELECT is.

- Every input of one `sqlflow.sql` call is resolved once: its several Spark jobs (a replay's
  timeline, the engine's buckets, the counters, the final query) read the same version of a temp
  view, even when another thread replaces the view while the call runs.
"""
from __future__ import annotations

import threading
from datetime import datetime

import pytest

import sqlflow
from sqlflow.spark import timeline, trigger_checks

H = 3600


def _rows(values, shift=0):
    """(k, ts, arrival, v) rows on 2024-01-01: (key, event second, arrival second, value)."""
    return [(k, datetime.utcfromtimestamp(1704067200 + t + shift), datetime.utcfromtimestamp(1704067200 + a + shift), v)
            for k, t, a, v in values]


A = _rows([("a", 10, 20, 1), ("a", 50, 70, 2), ("b", 100, 110, 4), ("a", 4000, 4010, 8)])
#: B arrives first, with event times ten hours on: its watermark would make every row of A late
B = _rows([("a", 20, 5, 100), ("c", 10 * H, 6, 200), ("c", 10 * H + 100, 7, 400)])

SCHEMA = "k string, ts timestamp, arrival timestamp, v bigint"

REPLAY = """SELECT k, SUM(v) AS total FROM {view} WATERMARK ts DELAY OF 1m ARRIVAL arrival
            GROUP BY k WINDOW FIXED(SIZE 1h) TRIGGER WATERMARK EARLY PERIOD 1m"""
BOUNDED = "SELECT k, COUNT(*) AS n, SUM(v) AS total FROM {view} GROUP BY k WINDOW FIXED(SIZE 1h) ON ts"


def _replaced_by_a_thread(spark, name, rows):
    """Replace temp view `name` by `rows`, from another thread (as another notebook cell would)."""
    done = []

    def replace():
        spark.createDataFrame(rows, SCHEMA).createOrReplaceTempView(name)
        done.append(True)

    thread = threading.Thread(target=replace)
    thread.start()
    thread.join()
    assert done == [True]


def _sorted(df):
    return sorted(tuple(r) for r in df.collect())


@pytest.mark.parametrize("query, hook", [(REPLAY, (timeline, "replay")), (BOUNDED, (trigger_checks, "bounded_notes"))],
                         ids=["engine-replay", "native"])
def test_a_view_replaced_while_the_query_runs_is_read_as_it_was(spark, monkeypatch, query, hook):
    """A thread replaces the view after sqlflow.sql read it once (its input relation) and before
    its next job (the replay's timeline; the native path's final query): the result and the
    counters are those of the version the call started with, never a mix of the two."""
    spark.createDataFrame(A, SCHEMA).createOrReplaceTempView("ev_a")
    expected = sqlflow.sql(spark, query.format(view="ev_a"))
    want, want_metrics = _sorted(expected), sqlflow.metrics(expected)
    assert want and want_metrics["input_rows"] == len(A)

    spark.createDataFrame(A, SCHEMA).createOrReplaceTempView("ev_live")
    module, name = hook
    original = getattr(module, name)
    calls = []

    def replaced_first(*args, **kwargs):
        if not calls:
            _replaced_by_a_thread(spark, "ev_live", B)
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, replaced_first)
    got = sqlflow.sql(spark, query.format(view="ev_live"))
    assert calls, "the hook ran: the view was replaced while sqlflow.sql ran"
    assert _sorted(got) == want
    assert sqlflow.metrics(got)["input_rows"] == len(A)
    # the next call reads the new version
    monkeypatch.setattr(module, name, original)
    assert sqlflow.metrics(sqlflow.sql(spark, query.format(view="ev_live")))["input_rows"] == len(B)

