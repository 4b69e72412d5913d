"""Snapshots of `sqlflow.transpile` (the native rewrite, exact Spark SQL) and of `sqlflow.explain`
without a Spark session. No Spark runs here: the rewrites are checked against Spark in
test_sql.py and test_native_vs_engine.py."""
import re

import pytest

import sqlflow

PANES = ("CAST(0 AS BIGINT) AS pane_index, 'ON_TIME' AS pane_timing, TRUE AS is_last, "
         "CAST(NULL AS TIMESTAMP) AS emit_time")
E = " - INTERVAL '1' MICROSECOND AS output_time"  # END OF WINDOW: the window's last instant

SNAPSHOTS = [
    ("SELECT user, SUM(amount) AS total FROM clicks GROUP BY user WINDOW FIXED(SIZE 1h) ON ts",
     "SELECT user, SUM(amount) AS total, WINDOW(ts, '1 hour').start AS window_start, WINDOW(ts, '1 hour').end "
     f"AS window_end, {PANES}, WINDOW(ts, '1 hour').end{E} FROM clicks WHERE NOT ts IS NULL "
     "GROUP BY user, WINDOW(ts, '1 hour')"),
    ("SELECT user, COUNT(*) AS n, window_start FROM clicks WHERE page <> 'buy' GROUP BY user HAVING n > 1 "
     "WINDOW FIXED(SIZE 1h, OFFSET 15m) ON ts ORDER BY n DESC LIMIT 10",
     "SELECT user, COUNT(*) AS n, WINDOW(ts, '1 hour', '1 hour', '15 minutes').start AS window_start, "
     "WINDOW(ts, '1 hour', '1 hour', '15 minutes').end AS window_end, "
     f"{PANES}, WINDOW(ts, '1 hour', '1 hour', '15 minutes').end{E} FROM clicks WHERE (page <> 'buy') AND NOT ts IS NULL "
     "GROUP BY user, WINDOW(ts, '1 hour', '1 hour', '15 minutes') HAVING n > 1 ORDER BY n DESC LIMIT 10"),
    ("SELECT user, SUM(amount) AS total FROM clicks WATERMARK ts DELAY OF INTERVAL 5 MINUTES "
     "GROUP BY user WINDOW SLIDING(SIZE 10m, PERIOD 5m)",
     "SELECT user, SUM(amount) AS total, WINDOW(clicks.ts, '10 minutes', '5 minutes').start AS window_start, "
     "WINDOW(clicks.ts, '10 minutes', '5 minutes').end AS window_end, "
     f"{PANES}, WINDOW(clicks.ts, '10 minutes', '5 minutes').end{E} FROM clicks WHERE NOT clicks.ts IS NULL GROUP BY user, WINDOW(clicks.ts, '10 minutes', '5 minutes')"),
    ("SELECT user, SUM(amount) AS total FROM clicks GROUP BY user WINDOW SESSIONS(GAP 30m) ON ts "
     "EMIT ACCUMULATING AND RETRACTING",
     "SELECT user, SUM(amount) AS total, SESSION_WINDOW(ts, '1799999999 microseconds').start AS window_start, "
     "SESSION_WINDOW(ts, '1799999999 microseconds').end + INTERVAL '1' MICROSECOND AS window_end, "
     f"{PANES}, SESSION_WINDOW(ts, '1799999999 microseconds').end AS output_time, FALSE AS is_retraction FROM clicks WHERE NOT ts IS NULL "
     "GROUP BY user, SESSION_WINDOW(ts, '1799999999 microseconds')"),
    ("SELECT COUNT(*) AS n FROM clicks WINDOW GLOBAL ON ts",
     "SELECT COUNT(*) AS n, CAST(NULL AS TIMESTAMP) AS window_start, CAST(NULL AS TIMESTAMP) AS window_end, "
     f"{PANES}, CAST(NULL AS TIMESTAMP) AS output_time FROM clicks WHERE NOT ts IS NULL HAVING COUNT(*) > 0"),
    ("WITH per_minute AS (SELECT page, COUNT(*) AS views FROM clicks GROUP BY page WINDOW FIXED(SIZE 1m) ON ts "
     "EMIT DISCARDING) SELECT page, SUM(views) AS total FROM per_minute GROUP BY page",
     "WITH per_minute AS (SELECT page, COUNT(*) AS views, WINDOW(ts, '1 minute').start AS window_start, "
     "WINDOW(ts, '1 minute').end AS window_end, "
     f"{PANES}, WINDOW(ts, '1 minute').end{E} FROM clicks WHERE NOT ts IS NULL GROUP BY page, WINDOW(ts, '1 minute')) "
     "SELECT page, SUM(views) AS total FROM per_minute GROUP BY page"),
    ("SELECT `user id`, SUM(`montant €`) AS `total €` FROM `my clicks` GROUP BY `user id` "
     "WINDOW FIXED(SIZE 1d) ON `event time`",
     "SELECT `user id`, SUM(`montant €`) AS `total €`, WINDOW(`event time`, '1 day').start AS window_start, "
     "WINDOW(`event time`, '1 day').end AS window_end, "
     f"{PANES}, WINDOW(`event time`, '1 day').end{E} FROM `my clicks` WHERE NOT `event time` IS NULL GROUP BY `user id`, WINDOW(`event time`, '1 day')"),
    ("SELECT user, COUNT(*) AS n FROM clicks GROUP BY user WINDOW FIXED(SIZE 1h) ON ts OUTPUT TIMESTAMP EARLIEST",
     "SELECT user, COUNT(*) AS n, WINDOW(ts, '1 hour').start AS window_start, WINDOW(ts, '1 hour').end "
     f"AS window_end, {PANES}, MIN(CAST(ts AS TIMESTAMP)) AS output_time FROM clicks WHERE NOT ts IS NULL "
     "GROUP BY user, WINDOW(ts, '1 hour')"),
    ("SELECT COUNT(*) AS n FROM clicks WINDOW GLOBAL ON ts OUTPUT TIMESTAMP LATEST",
     "SELECT COUNT(*) AS n, CAST(NULL AS TIMESTAMP) AS window_start, CAST(NULL AS TIMESTAMP) AS window_end, "
     f"{PANES}, MAX(CAST(ts AS TIMESTAMP)) AS output_time FROM clicks WHERE NOT ts IS NULL HAVING COUNT(*) > 0"),
    ("SELECT user, output_time, COUNT(*) AS n FROM clicks GROUP BY user WINDOW SLIDING(SIZE 1h, PERIOD 30m) ON ts "
     "OUTPUT TIMESTAMP START OF WINDOW",
     "SELECT user, WINDOW(ts, '1 hour', '30 minutes').start AS output_time, COUNT(*) AS n, "
     "WINDOW(ts, '1 hour', '30 minutes').start AS window_start, WINDOW(ts, '1 hour', '30 minutes').end "
     f"AS window_end, {PANES} FROM clicks WHERE NOT ts IS NULL GROUP BY user, WINDOW(ts, '1 hour', '30 minutes')"),
]


@pytest.mark.parametrize("query,expected", SNAPSHOTS)
def test_transpile_snapshots(query, expected):
    assert sqlflow.transpile(query) == expected


def test_per_row_gap():
    sql = sqlflow.transpile("SELECT user, COUNT(*) AS n FROM clicks GROUP BY user "
                            "WINDOW SESSIONS(GAP CASE WHEN tier = 'gold' THEN INTERVAL 1 HOUR "
                            "ELSE INTERVAL 10 MINUTES END) ON ts")
    gap = ("MAKE_INTERVAL(0, 0, 0, 0, 0, 0, CAST((UNIX_MICROS(TIMESTAMP_MICROS(0) + (CASE WHEN tier = 'gold' "
           "THEN INTERVAL '1' HOUR ELSE INTERVAL '10' MINUTES END)) - 1) AS DECIMAL(18, 0)) / 1000000)")
    assert sql == (f"SELECT user, COUNT(*) AS n, SESSION_WINDOW(ts, {gap}).start AS window_start, "
                   f"SESSION_WINDOW(ts, {gap}).end + INTERVAL '1' MICROSECOND AS window_end, {PANES}, "
                   f"SESSION_WINDOW(ts, {gap}).end AS output_time FROM clicks WHERE NOT ts IS NULL GROUP BY user, SESSION_WINDOW(ts, {gap})")


@pytest.mark.parametrize("query", [
    "SELECT 1",
    "select k, count(*) from t watermark ts delay of interval 1 minute group by k, window(ts, '1 minute')",
    "SELECT * FROM t -- WINDOW GLOBAL",
])
def test_plain_sql_is_returned_unchanged(query):
    assert sqlflow.transpile(query) == query


@pytest.mark.parametrize("query,why", [
    ("SELECT k, COUNT(*) AS n FROM t WATERMARK ts PERFECT ARRIVAL at GROUP BY k WINDOW FIXED(SIZE 1m)",
     "sqlflow: WINDOW: no native Spark SQL for the SELECT with WINDOW FIXED: its input is "
     "replayed (ARRIVAL at): panes depend on the arrival order, which only the engine follows (line 1, column 75)"),
    ("SELECT k, COUNT(*) AS n FROM t GROUP BY k WINDOW GLOBAL ON ts TRIGGER REPEAT(COUNT 10)",
     "sqlflow: WINDOW: no native Spark SQL for the SELECT with WINDOW GLOBAL: its trigger "
     "can fire before the end of the input (COUNT, WHEN or WATERMARK PERCENTILE), so a window may emit several "
     "panes (line 1, column 43)"),
    ("SELECT k, COUNT(*) AS n FROM t GROUP BY k WINDOW CUMULATE(STEP 1m, SIZE 1h) ON ts",
     "sqlflow: WINDOW: no native Spark SQL for the SELECT with WINDOW CUMULATE: Spark has "
     "no cumulating windows (line 1, column 43)"),
    ("SELECT k, COUNT(*) AS n FROM t GROUP BY k WINDOW my_window(3) ON ts",
     "sqlflow: WINDOW: no native Spark SQL for the SELECT with WINDOW CUSTOM: my_window is "
     "a custom window function (line 1, column 43)"),
])
def test_no_native_rewrite_says_why(query, why):
    with pytest.raises(sqlflow.SqlflowUnsupportedError) as info:
        sqlflow.transpile(query)
    assert str(info.value).splitlines()[0] == why


def test_explain_without_spark():
    text = sqlflow.explain("SELECT k, COUNT(*) AS n FROM t WATERMARK ts PERFECT ARRIVAL at "
                           "GROUP BY k WINDOW SESSIONS(GAP 5m) TRIGGER WATERMARK EARLY PERIOD 1m "
                           "EMIT ACCUMULATING AND RETRACTING", spark=None)
    text = re.sub(r"__sqlflow_panes_\w+", "<panes>", text)
    assert text == """\
the SELECT with WINDOW SESSIONS at line 1, column 75:
  path: engine (no native rewrite: its input is replayed (ARRIVAL at): panes depend on the arrival order, \
which only the engine follows)
  emit: ACCUMULATING AND RETRACTING
  output time: END OF WINDOW
  engine: vectorised watermark schedule
  input: replay of ARRIVAL at, watermark PERFECT
  buckets: 2 x spark.sql.shuffle.partitions (decided at run time)
Spark SQL:
  SELECT __sqlflow_k0 AS `k`, __sqlflow_agg0 AS n, window_start, window_end, pane_index, pane_timing, \
is_last, emit_time, output_time, is_retraction FROM <panes>"""


@pytest.mark.parametrize("query,path", [
    ("SELECT k, COUNT(*) AS n FROM t GROUP BY k WINDOW SESSIONS(GAP 5m) ON ts",
     "  path: engine (SESSIONS windows run faster on the engine (measured: native 0.65M rows/s, engine 1.16M rows/s))"),
    ("SELECT k, COUNT(*) AS n FROM t GROUP BY k WINDOW FIXED(SIZE 5m) ON ts",
     "  path: native (FIXED windows run faster natively (measured: native 1.40M rows/s, engine 0.58M rows/s))"),
    ("SELECT k, percentile_approx(x, 0.5) AS p FROM t GROUP BY k WINDOW SESSIONS(GAP 5m) ON ts",
     "  path: native (the engine cannot run it: PERCENTILE_APPROX(x, 0.5): the sqlflow engine has no "
     "PERCENTILE_APPROX)"),
    ("SELECT k, COUNT(*) AS n FROM t GROUP BY k WINDOW FIXED(SIZE 5m) ON ts TRIGGER REPEAT(WHEN(x > 1))",
     "  path: engine (no native rewrite: its trigger can fire before the end of the input (COUNT, WHEN or "
     "WATERMARK PERCENTILE), so a window may emit several panes)"),
])
def test_explain_says_which_path_and_why(query, path):
    lines = sqlflow.explain(query, spark=None).splitlines()
    assert lines[1] == path


def test_explain_a_plain_statement():
    assert sqlflow.explain("SELECT 1", spark=None) == \
        "plain Spark SQL: no windowed SELECT, the statement goes to spark.sql unchanged"
