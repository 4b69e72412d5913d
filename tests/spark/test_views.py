"""Views and sqlflow.sql: what a query reads, and what a view over a windowed SELECT is.

- Every input of one `sqlflow.sql` call is resolved once: its several Spark jobs (a replay's
  timeline, the engine's buckets, the counters, the final query) read the same version of a temp
  view, even when another thread replaces the view while the call runs.
- `CREATE TEMP VIEW v AS <windowed SELECT>` behaves as Spark's views: on the native path (plain
  Spark SQL) it is recomputed at each read and follows its source; a SELECT the engine runs
  cannot be recomputed by Spark, and is refused with a located error naming the alternative.
  Neither leaves a view of sqlflow's behind.
"""
from __future__ import annotations

import threading
from datetime import datetime

import pytest

import sqlflow
from sqlflow.errors import SqlflowUnsupportedError
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


def _internal_views(spark):
    from tests.conftest import temp_views

    return sorted(name for name in temp_views(spark) if name.startswith("__sqlflow"))


VIEW = "CREATE OR REPLACE TEMP VIEW {name} AS\n" + BOUNDED


def test_a_native_view_of_a_windowed_select_follows_its_source(spark):
    spark.createDataFrame(A, SCHEMA).createOrReplaceTempView("ev_src")
    before = _internal_views(spark)
    sqlflow.sql(spark, VIEW.format(name="hourly_native", view="ev_src"), path="native")
    read = "SELECT k, n, total, window_start FROM hourly_native"
    assert sorted(tuple(r) for r in spark.sql(read).collect()) == [
        ("a", 1, 8, datetime(2024, 1, 1, 1)), ("a", 2, 3, datetime(2024, 1, 1, 0)), ("b", 1, 4, datetime(2024, 1, 1, 0))]
    spark.createDataFrame(B, SCHEMA).createOrReplaceTempView("ev_src")
    assert sorted(tuple(r) for r in spark.sql(read).collect()) == [
        ("a", 1, 100, datetime(2024, 1, 1, 0)), ("c", 2, 600, datetime(2024, 1, 1, 10))]
    assert not set(_internal_views(spark)) - set(before)  # none new (Spark Connect drops old ones lazily)


@pytest.mark.parametrize("query, path, at", [
    (VIEW, "engine", (2, 8)),
    ("CREATE OR REPLACE TEMP VIEW {name} AS\n" + REPLAY, None, (2, 8)),  # a replay: the engine's only
    ("CREATE OR REPLACE TEMP VIEW {name} AS\nWITH s AS (" + REPLAY + ")\nSELECT k, SUM(total) AS t FROM s GROUP BY k",
     None, (2, 19)),
], ids=["forced", "replay", "in-a-cte"])
def test_a_view_of_a_windowed_select_the_engine_runs_is_refused(spark, query, path, at):
    spark.createDataFrame(A, SCHEMA).createOrReplaceTempView("ev_src")
    before = _internal_views(spark)
    with pytest.raises(SqlflowUnsupportedError) as err:
        sqlflow.sql(spark, query.format(name="hourly_engine", view="ev_src"), path=path)
    assert (err.value.clause, err.value.line, err.value.column) == ("SELECT", *at)
    assert "CREATE VIEW" in str(err.value) and "recomputed" in str(err.value)
    assert "createOrReplaceTempView" in err.value.hint and "native" in err.value.hint
    assert not spark.catalog.tableExists("hourly_engine")
    assert not set(_internal_views(spark)) - set(before)  # none new (Spark Connect drops old ones lazily)

