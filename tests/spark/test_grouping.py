"""GROUP BY in a windowed SELECT: the empty grouping set, and misspelt columns.

`GROUP BY ()` is one group, as a windowed SELECT without GROUP BY: the aggregates per window over
all rows, on every path. A column Spark cannot resolve is reported by Spark's own message (with
its suggestion) before sqlflow's check that every item is grouped or aggregated.
"""
import pytest

import sqlflow

PANES = "SELECT window_start, total, n, pane_timing FROM ({q}) ORDER BY window_start, emit_time, total"


@pytest.mark.parametrize("path", ["native", "engine"])
@pytest.mark.parametrize("group", ["GROUP BY ()", "GROUP BY (())", ""])
def test_the_empty_grouping_set_is_one_group_on_bounded_data(spark, paper_views, path, group):
    q = f"SELECT SUM(v) AS total, COUNT(*) AS n FROM events {group} WINDOW FIXED(SIZE 2m) ON et"
    df = sqlflow.sql(spark, q, path=path)
    assert [(r.window_start.strftime("%H:%M"), r.total, r.n) for r in df.orderBy("window_start").collect()] == [
        ("12:00", 14, 2), ("12:02", 22, 4), ("12:04", 3, 1), ("12:06", 12, 3)]


def test_the_empty_grouping_set_next_to_a_key_adds_nothing(spark, paper_views):
    q = "SELECT k, SUM(v) AS total FROM events GROUP BY (), k WINDOW GLOBAL ON et"
    assert [tuple(r) for r in sqlflow.sql(spark, q).select("k", "total").collect()] == [("k", 51)]
    assert "GROUP BY k" in sqlflow.transpile(q)


def test_the_empty_grouping_set_on_a_replay(spark, paper_views):
    q = ("SELECT SUM(v) AS total FROM events WATERMARK et TIMELINE heuristic ARRIVAL at GROUP BY () "
         "WINDOW FIXED(SIZE 2m) TRIGGER WATERMARK EARLY PERIOD 1m LATE COUNT 1 ALLOWED LATENESS 1h")
    keyed = q.replace("SUM(v) AS total", "k, SUM(v) AS total").replace("GROUP BY ()", "GROUP BY k")
    got = [tuple(r) for r in sqlflow.sql(spark, q).select("window_start", "total", "pane_timing", "emit_time")
           .orderBy("emit_time", "window_start").collect()]
    # one key in the paper's example: the same panes as grouping by it (figure 13's)
    assert got == [tuple(r) for r in sqlflow.sql(spark, keyed).select("window_start", "total", "pane_timing",
                                                                       "emit_time").orderBy("emit_time", "window_start").collect()]
    assert [r[1] for r in got] == [5, 7, 14, 3, 22, 3, 14, 12]  # the paper's figure 13


def test_a_misspelt_group_by_column_gets_sparks_message(spark):
    spark.sql("""CREATE OR REPLACE TEMP VIEW grouped_clicks AS SELECT * FROM VALUES
      ('u1', TIMESTAMP'2024-01-01 00:00:10') AS t(user_id, ts)""")
    with pytest.raises(sqlflow.SqlflowAnalysisError) as info:
        sqlflow.sql(spark, "SELECT user_id, COUNT(*) AS n FROM grouped_clicks\nGROUP BY usr_id WINDOW FIXED(SIZE 1h) ON ts")
    assert str(info.value) == (
        "sqlflow: SELECT: [UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter with "
        "name `usr_id` cannot be resolved. Did you mean one of the following? [`user_id`, `ts`]. (line 2, column 10)\n"
        "  GROUP BY usr_id WINDOW FIXED(SIZE 1h) ON ts\n"
        "           ^")


def test_a_misspelt_item_gets_sparks_message(spark):
    spark.sql("""CREATE OR REPLACE TEMP VIEW grouped_clicks AS SELECT * FROM VALUES
      ('u1', TIMESTAMP'2024-01-01 00:00:10') AS t(user_id, ts)""")
    with pytest.raises(sqlflow.SqlflowAnalysisError) as info:
        sqlflow.sql(spark, "SELECT usr_id, COUNT(*) AS n FROM grouped_clicks GROUP BY user_id WINDOW FIXED(SIZE 1h) ON ts")
    assert str(info.value).splitlines()[0] == (
        "sqlflow: SELECT: [UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter with "
        "name `usr_id` cannot be resolved. Did you mean one of the following? [`user_id`, `ts`]. (line 1, column 8)")


def test_an_ungrouped_column_that_exists_keeps_sqlflows_message(spark):
    spark.sql("""CREATE OR REPLACE TEMP VIEW grouped_clicks AS SELECT * FROM VALUES
      ('u1', 'home', TIMESTAMP'2024-01-01 00:00:10') AS t(user_id, page, ts)""")
    for run in (lambda q: sqlflow.sql(spark, q), lambda q: sqlflow.explain(q, spark)):
        with pytest.raises(sqlflow.SqlflowSemanticError) as info:
            run("SELECT page, COUNT(*) AS n FROM grouped_clicks GROUP BY user_id WINDOW FIXED(SIZE 1h) ON ts")
        assert str(info.value) == (
            "sqlflow: SELECT: page is neither in GROUP BY nor inside an aggregate (line 1, column 8)\n"
            "  SELECT page, COUNT(*) AS n FROM grouped_clicks GROUP BY user_id WINDOW FIXED(SIZE 1h) ON ts\n"
            "         ^\n"
            "add it to GROUP BY or aggregate it, e.g. first(page)")


@pytest.mark.parametrize("query,message", [
    ("SELECT upper(user_id) AS u, page, COUNT(*) AS n FROM grouped_clicks GROUP BY u WINDOW FIXED(SIZE 1h) ON ts",
     "page is neither in GROUP BY nor inside an aggregate"),
    ("SELECT * FROM grouped_clicks GROUP BY user_id WINDOW FIXED(SIZE 1h) ON ts", "SELECT * in a windowed SELECT"),
    ("SELECT user_id, is_retraction, COUNT(*) AS n FROM grouped_clicks GROUP BY user_id WINDOW FIXED(SIZE 1h) ON ts",
     "is_retraction is a pane column only with EMIT ACCUMULATING AND RETRACTING"),
])
def test_names_spark_resolves_keep_sqlflows_grouping_messages(spark, query, message):
    spark.sql("""CREATE OR REPLACE TEMP VIEW grouped_clicks AS SELECT * FROM VALUES
      ('u1', 'home', TIMESTAMP'2024-01-01 00:00:10') AS t(user_id, page, ts)""")
    with pytest.raises(sqlflow.SqlflowSemanticError) as info:
        sqlflow.sql(spark, query)
    assert info.value.message == message
