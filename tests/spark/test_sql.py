"""`sqlflow.sql` on bounded data: what goes in, what comes out, on both execution paths.

Table `clicks` (below) is small enough to check every value by hand:

    user page amount ts        arrived
    u1   home     10 00:00:10  00:00:12
    u1   cart     20 00:00:50  00:00:55
    u1   buy      30 00:03:00  00:03:01
    u2   home      5 00:01:00  00:01:30
    u2   home   NULL 00:01:20  00:07:00
    u3   home      7 NULL      00:02:00      (no event time: in no window, counted)
"""
import datetime as dt

import pytest

import sqlflow

PATHS = ["native", "engine"]


def T(text: str) -> dt.datetime:
    """'00:01:30' on 2024-01-01 (UTC, as the session's time zone)."""
    return dt.datetime.fromisoformat(f"2024-01-01 {text}")


@pytest.fixture(scope="module")
def clicks(spark):
    spark.sql("""
        CREATE OR REPLACE TEMP VIEW clicks AS SELECT user, page, amount, ts, arrived FROM VALUES
          ('u1', 'home', 10,   TIMESTAMP'2024-01-01 00:00:10', TIMESTAMP'2024-01-01 00:00:12'),
          ('u1', 'cart', 20,   TIMESTAMP'2024-01-01 00:00:50', TIMESTAMP'2024-01-01 00:00:55'),
          ('u1', 'buy',  30,   TIMESTAMP'2024-01-01 00:03:00', TIMESTAMP'2024-01-01 00:03:01'),
          ('u2', 'home', 5,    TIMESTAMP'2024-01-01 00:01:00', TIMESTAMP'2024-01-01 00:01:30'),
          ('u2', 'home', NULL, TIMESTAMP'2024-01-01 00:01:20', TIMESTAMP'2024-01-01 00:07:00'),
          ('u3', 'home', 7,    CAST(NULL AS TIMESTAMP),        TIMESTAMP'2024-01-01 00:02:00')
        AS t(user, page, amount, ts, arrived)""")
    spark.sql("""
        CREATE OR REPLACE TEMP VIEW users AS SELECT * FROM VALUES
          ('u1', 'gold'), ('u2', 'basic'), ('u3', 'gold') AS t(id, tier)""")
    return "clicks"


def srt(tuples):
    """Tuples in a fixed order (NULLs first in each position)."""
    return sorted(tuples, key=lambda t: tuple((v is not None, str(v)) for v in t))


def rows(df, *cols):
    """The rows of df as tuples of `cols` (all columns by default), sorted by `srt`."""
    cols = cols or tuple(df.columns)
    return srt(tuple(r[c] for c in cols) for r in df.collect())


# ----------------------------------------------------------------------------- plain SQL


class Recorder:
    """A SparkSession stand-in that records what reaches spark.sql."""

    def __init__(self, spark):
        self.spark, self.calls = spark, []

    def sql(self, query, args=None, **kwargs):
        self.calls.append((query, args, kwargs))
        return self.spark.sql(query, args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.spark, name)


@pytest.mark.parametrize("query", [
    "SELECT user, COUNT(*) AS n FROM clicks GROUP BY user",
    "  select /* WINDOW FIXED(SIZE 1m) */ 1 AS `x y` ;  ",
    "SELECT user, window.start, COUNT(*) FROM clicks WATERMARK ts DELAY OF INTERVAL 1 MINUTE "
    "GROUP BY user, window(ts, '1 minute')",
    "SHOW TABLES",
])
def test_plain_sql_reaches_spark_byte_for_byte(spark, clicks, query):
    recorder = Recorder(spark)
    df = sqlflow.sql(recorder, query)
    assert recorder.calls == [(query, None, {})]
    assert sorted(map(tuple, df.collect()), key=repr) == sorted(map(tuple, spark.sql(query).collect()), key=repr)


def test_plain_sql_with_parameters_and_dataframes(spark, clicks):
    recorder = Recorder(spark)
    frame = spark.table("clicks")
    df = sqlflow.sql(recorder, "SELECT COUNT(*) AS n FROM {t} WHERE amount > :a", args={"a": 9}, t=frame)
    assert recorder.calls == [("SELECT COUNT(*) AS n FROM {t} WHERE amount > :a", {"a": 9}, {"t": frame})]
    assert df.first()["n"] == 3


# ----------------------------------------------------------------------------- the result


FIXED_1M = "SELECT user, SUM(amount) AS total, COUNT(*) AS n FROM clicks GROUP BY user WINDOW FIXED(SIZE 1m) ON ts"


@pytest.mark.parametrize("path", PATHS)
def test_fixed_windows_like_spark_window(spark, clicks, path):
    df = sqlflow.sql(spark, FIXED_1M, path=path)
    assert df.schema.simpleString() == (
        "struct<user:string,total:bigint,n:bigint,window_start:timestamp,window_end:timestamp,"
        "pane_index:bigint,pane_timing:string,is_last:boolean,emit_time:timestamp,output_time:timestamp>")
    last = dt.timedelta(microseconds=1)  # output_time: END OF WINDOW, the window's last instant
    assert rows(df) == srt([
        ("u1", 30, 2, T("00:00:00"), T("00:01:00"), 0, "ON_TIME", True, None, T("00:01:00") - last),
        ("u1", 30, 1, T("00:03:00"), T("00:04:00"), 0, "ON_TIME", True, None, T("00:04:00") - last),
        ("u2", 5, 2, T("00:01:00"), T("00:02:00"), 0, "ON_TIME", True, None, T("00:02:00") - last),
    ])


def test_retracting_mode_adds_is_retraction(spark, clicks):
    df = sqlflow.sql(spark, FIXED_1M + " EMIT ACCUMULATING AND RETRACTING")
    assert df.columns[-1] == "is_retraction"
    assert dict(df.dtypes)["is_retraction"] == "boolean"
    assert {r["is_retraction"] for r in df.collect()} == {False}


@pytest.mark.parametrize("path", PATHS)
def test_pane_columns_selected_by_name_keep_their_place(spark, clicks, path):
    df = sqlflow.sql(spark, "SELECT window_end, user, pane_timing AS timing, SUM(amount) AS total FROM clicks "
                            "GROUP BY user WINDOW FIXED(SIZE 1m) ON ts", path=path)
    assert df.columns == ["window_end", "user", "timing", "total", "window_start", "pane_index", "pane_timing",
                          "is_last", "emit_time", "output_time"]
    assert rows(df, "user", "window_end", "timing") == srt([
        ("u1", T("00:01:00"), "ON_TIME"), ("u1", T("00:04:00"), "ON_TIME"), ("u2", T("00:02:00"), "ON_TIME")])


@pytest.mark.parametrize("path", PATHS)
def test_unaliased_items_keep_sparks_names(spark, clicks, path):
    df = sqlflow.sql(spark, "SELECT clicks.user, upper(page), SUM(amount), COUNT(*) / 2, "
                            "date_format(window_start, 'HH:mm') FROM clicks WHERE ts IS NOT NULL "
                            "GROUP BY clicks.user, upper(page) WINDOW GLOBAL ON ts", path=path)
    assert df.columns[:5] == ["user", "upper(page)", "sum(amount)", "(count(1) / 2)",
                              "date_format(window_start, HH:mm)"]
    assert rows(df, "user", "upper(page)", "sum(amount)", "(count(1) / 2)") == srt([
        ("u1", "BUY", 30, 0.5), ("u1", "CART", 20, 0.5), ("u1", "HOME", 10, 0.5), ("u2", "HOME", 5, 1.0)])


# ----------------------------------------------------------------------------- what goes in


@pytest.mark.parametrize("path", PATHS)
def test_cte_join_and_filter_before_the_window(spark, clicks, path):
    query = """
        WITH gold AS (SELECT c.* FROM clicks c JOIN users u ON c.user = u.id WHERE u.tier = 'gold')
        SELECT g.user, MAX(g.amount) AS top
        FROM gold g JOIN (SELECT DISTINCT id FROM users) AS known ON g.user = known.id
        WHERE g.page <> 'buy'
        GROUP BY g.user WINDOW FIXED(SIZE 1m) ON g.ts"""
    assert rows(sqlflow.sql(spark, query, path=path), "user", "top", "window_start") == srt([
        ("u1", 20, T("00:00:00"))])


@pytest.mark.parametrize("path", PATHS)
def test_having_expressions_order_and_limit_after_the_window(spark, clicks, path):
    query = """
        SELECT user, SUM(amount) * 2 AS double, AVG(amount) AS mean, window_start
        FROM clicks GROUP BY user
        HAVING double > 20 AND mean > 0
        WINDOW FIXED(SIZE 1m) ON ts
        ORDER BY SUM(amount) DESC, window_start DESC LIMIT 2"""
    df = sqlflow.sql(spark, query, path=path)
    assert [(r["user"], r["double"], r["mean"], r["window_start"]) for r in df.collect()] == [
        ("u1", 60, 30.0, T("00:03:00")), ("u1", 60, 15.0, T("00:00:00"))]


@pytest.mark.parametrize("path", PATHS)
def test_parameters_named_positional_and_dataframes(spark, clicks, path):
    query = "SELECT user, SUM(amount) AS total FROM {src} WHERE amount >= ? AND page <> ? " \
            "GROUP BY user WINDOW GLOBAL ON ts"
    df = sqlflow.sql(spark, query, [10, "buy"], path=path, src=spark.table("clicks"))
    assert rows(df, "user", "total") == srt([("u1", 30)])
    df = sqlflow.sql(spark, "SELECT user, SUM(amount) AS total FROM clicks WHERE amount >= :lo "
                            "GROUP BY user WINDOW SESSIONS(GAP 1m) ON ts", args={"lo": 10, "unused": 1}, path=path)
    assert rows(df, "user", "total", "window_start", "window_end") == srt([
        ("u1", 30, T("00:00:10"), T("00:01:50")), ("u1", 30, T("00:03:00"), T("00:04:00"))])


@pytest.mark.parametrize("path", PATHS)
def test_windowed_cte_and_subquery_consumed_by_sql(spark, clicks, path):
    query = """
        WITH per_minute AS (
          SELECT user, COUNT(*) AS n FROM clicks GROUP BY user WINDOW FIXED(SIZE 1m) ON ts)
        SELECT p.*, s.sessions
        FROM per_minute p
        JOIN (SELECT user, COUNT(*) AS sessions
              FROM (SELECT user, COUNT(*) AS c FROM clicks GROUP BY user WINDOW SESSIONS(GAP 1m) ON ts) x
              GROUP BY user) s ON p.user = s.user"""
    df = sqlflow.sql(spark, query, path=path)
    assert df.columns == ["user", "n", "window_start", "window_end", "pane_index", "pane_timing", "is_last",
                          "emit_time", "output_time", "sessions"]
    assert rows(df, "user", "n", "window_start", "sessions") == srt([
        ("u1", 1, T("00:03:00"), 2), ("u1", 2, T("00:00:00"), 2), ("u2", 2, T("00:01:00"), 1)])


# ----------------------------------------------------------------------------- window kinds


WINDOW_CASES = {  # "-23:59:00" is on the day before
    "GLOBAL": ("WINDOW GLOBAL ON ts", [("u1", 60, None, None), ("u2", 5, None, None)]),
    "FIXED with offset": ("WINDOW FIXED(SIZE 2m, OFFSET 30s) ON ts",
                          [("u1", 10, "-23:58:30", "00:00:30"), ("u1", 20, "00:00:30", "00:02:30"),
                           ("u1", 30, "00:02:30", "00:04:30"), ("u2", 5, "00:00:30", "00:02:30")]),
    "SLIDING": ("WINDOW SLIDING(SIZE 2m, PERIOD 1m) ON ts",
                [("u1", 30, "-23:59:00", "00:01:00"), ("u1", 30, "00:00:00", "00:02:00"),
                 ("u1", 30, "00:02:00", "00:04:00"), ("u1", 30, "00:03:00", "00:05:00"),
                 ("u2", 5, "00:00:00", "00:02:00"), ("u2", 5, "00:01:00", "00:03:00")]),
    "SLIDING, PERIOD not dividing SIZE": (
        "WINDOW SLIDING(SIZE 90s, PERIOD 1m) ON ts",
        [("u1", 10, "-23:59:00", "00:00:30"), ("u1", 30, "00:00:00", "00:01:30"), ("u1", 30, "00:02:00", "00:03:30"),
         ("u1", 30, "00:03:00", "00:04:30"), ("u2", 5, "00:00:00", "00:01:30"), ("u2", 5, "00:01:00", "00:02:30")]),
    "SESSIONS": ("WINDOW SESSIONS(GAP 41s) ON ts",
                 [("u1", 30, "00:00:10", "00:01:31"), ("u1", 30, "00:03:00", "00:03:41"),
                  ("u2", 5, "00:01:00", "00:02:01")]),
    "SESSIONS, rows exactly a gap apart": ("WINDOW SESSIONS(GAP 40s) ON ts",
                                          [("u1", 10, "00:00:10", "00:00:50"), ("u1", 20, "00:00:50", "00:01:30"),
                                           ("u1", 30, "00:03:00", "00:03:40"), ("u2", 5, "00:01:00", "00:02:00")]),
    "SESSIONS, per-row gap": ("WINDOW SESSIONS(GAP CASE WHEN page = 'home' THEN INTERVAL 1 MINUTE "
                              "ELSE INTERVAL 5 SECONDS END) ON ts",
                              [("u1", 30, "00:00:10", "00:01:10"), ("u1", 30, "00:03:00", "00:03:05"),
                               ("u2", 5, "00:01:00", "00:02:20")]),
}


def _t(text):
    if text is None:
        return None
    if text.startswith("-"):
        return dt.datetime.fromisoformat(f"2023-12-31 {text[1:]}")
    return T(text)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("case", list(WINDOW_CASES))
def test_window_kinds(spark, clicks, path, case):
    window, expected = WINDOW_CASES[case]
    df = sqlflow.sql(spark, f"SELECT user, SUM(amount) AS total FROM clicks GROUP BY user {window}", path=path)
    assert rows(df, "user", "total", "window_start", "window_end") == srt(
        (u, v, _t(s), _t(e)) for u, v, s, e in expected)


def test_cumulate_runs_on_the_engine(spark, clicks):
    query = "SELECT user, SUM(amount) AS total FROM clicks GROUP BY user WINDOW CUMULATE(STEP 1m, SIZE 2m) ON ts"
    df = sqlflow.sql(spark, query)
    assert rows(df, "user", "total", "window_start", "window_end") == srt([
        ("u1", 30, T("00:00:00"), T("00:01:00")), ("u1", 30, T("00:00:00"), T("00:02:00")),
        ("u1", 30, T("00:02:00"), T("00:04:00")), ("u2", 5, T("00:00:00"), T("00:02:00"))])
    with pytest.raises(sqlflow.SqlflowUnsupportedError, match="Spark has no cumulating windows"):
        sqlflow.sql(spark, query, path="native")


class EveryTwoMinutes:
    """A custom window function: [floor to 2m, + 2m), aligned on the epoch."""

    def __init__(self, minutes):
        self.size = minutes * 60_000_000

    def assign(self, t):
        import numpy as np

        start = (t // self.size) * self.size
        return np.arange(len(t)), start, start + self.size


def test_custom_window_function(spark, clicks):
    sqlflow.register_window_fn("every_n_minutes", EveryTwoMinutes)
    df = sqlflow.sql(spark, "SELECT user, SUM(amount) AS total FROM clicks GROUP BY user "
                            "WINDOW every_n_minutes(2) ON ts")
    assert rows(df, "user", "total", "window_start") == srt([
        ("u1", 30, T("00:00:00")), ("u1", 30, T("00:02:00")), ("u2", 5, T("00:00:00"))])


# ----------------------------------------------------------------------------- triggers and modes on bounded data


def test_count_trigger_sees_rows_in_event_time_order(spark, clicks):
    df = sqlflow.sql(spark, "SELECT user, SUM(amount) AS total, COUNT(*) AS n FROM clicks GROUP BY user "
                            "WINDOW GLOBAL ON ts TRIGGER REPEAT(COUNT 2) EMIT DISCARDING")
    # u1: 10, 20 (count 2 fires), then 30 alone at the end; u2: 5, NULL fires at 2
    assert rows(df, "user", "pane_index", "total", "n", "pane_timing", "is_last") == srt([
        ("u1", 0, 30, 2, "EARLY", False), ("u1", 1, 30, 1, "ON_TIME", True), ("u2", 0, 5, 2, "EARLY", False)])


def test_when_trigger(spark, clicks):
    df = sqlflow.sql(spark, "SELECT user, SUM(amount) AS total FROM clicks GROUP BY user WINDOW GLOBAL ON ts "
                            "TRIGGER REPEAT(WHEN(page = 'cart')) EMIT ACCUMULATING")
    assert rows(df, "user", "pane_index", "total", "pane_timing") == srt([
        ("u1", 0, 30, "EARLY"), ("u1", 1, 60, "ON_TIME"), ("u2", 0, 5, "ON_TIME")])


@pytest.mark.parametrize("mode,expected", [
    ("DISCARDING", [(0, 10, False), (1, 20, False), (2, 30, False)]),
    ("ACCUMULATING", [(0, 10, False), (1, 30, False), (2, 60, False)]),
    ("ACCUMULATING AND RETRACTING", [(0, 10, False), (0, 10, True), (1, 30, False), (1, 30, True), (2, 60, False)]),
])
def test_accumulation_modes(spark, clicks, mode, expected):
    df = sqlflow.sql(spark, "SELECT user, SUM(amount) AS total FROM clicks WHERE user = 'u1' GROUP BY user "
                            f"WINDOW GLOBAL ON ts TRIGGER REPEAT(COUNT 1) EMIT {mode}")
    retracting = "is_retraction" in df.columns
    assert rows(df, "pane_index", "total", *(["is_retraction"] if retracting else [])) == srt(
        e if retracting else e[:2] for e in expected)


def test_replay_with_a_bounded_delay_watermark_drops_late_rows(spark, clicks):
    query = """SELECT user, COUNT(*) AS n FROM clicks WATERMARK ts DELAY OF 30s ARRIVAL arrived
               GROUP BY user WINDOW FIXED(SIZE 1m)"""
    df = sqlflow.sql(spark, query)
    # u2's second click (event 00:01:20) arrives at 00:07:00, when the watermark is 00:02:30: too late
    # u1's window [00:03, 00:04) ends after the last watermark step (00:02:30): it is emitted when the
    # input ends, at the last arrival (00:07:00)
    assert rows(df, "user", "n", "window_start", "pane_timing", "emit_time") == srt([
        ("u1", 1, T("00:03:00"), "ON_TIME", T("00:07:00")),
        ("u1", 2, T("00:00:00"), "ON_TIME", T("00:03:01")),
        ("u2", 1, T("00:01:00"), "ON_TIME", T("00:03:01"))])
    dropped = sqlflow.dropped(df)
    assert rows(dropped, "stage", "user", "event_time", "arrival_time", "reason", "window_start", "window_end") == srt([
        (1, "u2", T("00:01:20"), T("00:07:00"), "too late", T("00:01:00"), T("00:02:00")),
        (1, "u3", None, T("00:02:00"), "null event time", None, None)])
    m = sqlflow.metrics(df)
    assert (m["input_rows"], m["panes"], m["dropped_too_late"], m["dropped_null_event_time"]) == (6, 3, 1, 1)


@pytest.mark.parametrize("path", PATHS)
def test_null_event_times_are_excluded_counted_and_warned_about(spark, clicks, path):
    df = sqlflow.sql(spark, FIXED_1M, path=path)
    assert "u3" not in {r["user"] for r in df.collect()}
    with pytest.warns(sqlflow.spark.report.SqlflowDataWarning, match="1 input rows have a NULL event time"):
        m = sqlflow.metrics(df)
    assert {k: v for k, v in m.items() if k != "stages"} == {
        "input_rows": 6, "panes": 3, "retractions": 0, "dropped_null_event_time": 1, "dropped_null_arrival_time": 0,
        "dropped_bad_gap": 0, "dropped_too_late": 0, "dropped_closed_window": 0}
    assert m["stages"][0]["path"] == path
    assert rows(sqlflow.dropped(df), "stage", "user", "amount", "event_time", "reason") == srt([
        (1, "u3", 7, None, "null event time")])


def test_native_panes_are_counted_from_the_result_or_from_their_own_query(spark, clicks):
    """A lone native windowed SELECT is its own panes query: Spark analyses it once and the counts
    read the result. With ORDER BY / LIMIT / HAVING the panes are a separate query, counted before
    those clauses (the LIMIT keeps 1 row of 3 panes, the HAVING 2)."""
    from sqlflow.spark.report import ATTRIBUTE

    lone = sqlflow.sql(spark, FIXED_1M, path="native")
    stage = getattr(lone, ATTRIBUTE).stages[0]
    assert stage.panes_are_result and stage.panes is lone
    limited = sqlflow.sql(spark, FIXED_1M + " ORDER BY window_start LIMIT 1", path="native")
    having = sqlflow.sql(spark, FIXED_1M.replace("WINDOW FIXED", "HAVING SUM(amount) > 20 WINDOW FIXED"),
                         path="native")
    for df, shown in ((lone, 3), (limited, 1), (having, 2)):
        stage = getattr(df, ATTRIBUTE).stages[0]
        assert stage.panes_are_result == (df is lone)
        assert df.count() == shown
        with pytest.warns(sqlflow.spark.report.SqlflowDataWarning):
            assert sqlflow.metrics(df)["panes"] == 3


@pytest.mark.parametrize("query, analyses", [
    (FIXED_1M, ["input", "statement"]),
    # a pane column among the items: the naming query names it and finds input columns that clash
    (FIXED_1M.replace("COUNT(*) AS n", "COUNT(*) + pane_index"), ["input", "naming", "statement"]),
    # the panes are counted before LIMIT: their own query
    (FIXED_1M + " LIMIT 2", ["input", "panes", "statement"]),
])
def test_spark_analyses_of_a_native_windowed_select(spark, clicks, monkeypatch, query, analyses):
    """Each Spark analysis costs a query ~17 ms of planning: a lone native windowed SELECT needs
    only its input relation's and the statement's."""
    from sqlflow.spark import analysis, execute

    seen, original = [], analysis.spark_sql

    def counting(spark_, text, *args, **kwargs):
        seen.append("statement" if kwargs["fallback"] is None else "input" if "__sqlflow_et" in text
                    else "naming" if "CROSS JOIN" in text else "panes")
        return original(spark_, text, *args, **kwargs)

    monkeypatch.setattr(execute, "spark_sql", counting)  # the Runner's analyses
    monkeypatch.setattr(analysis, "spark_sql", counting)  # the statement's (sqlflow.spark.api._run)
    assert sqlflow.sql(spark, query, path="native").count() == (2 if "LIMIT" in query else 3)
    assert seen == analyses


# ----------------------------------------------------------------------------- statements and time zones


@pytest.mark.parametrize("path", PATHS)
def test_windowed_selects_in_a_union(spark, clicks, path):
    query = """
        SELECT user, COUNT(*) AS n, 'fixed' AS kind FROM clicks GROUP BY user WINDOW FIXED(SIZE 10m) ON ts
        UNION ALL
        SELECT user, COUNT(*) AS n, 'sessions' AS kind FROM clicks GROUP BY user WINDOW SESSIONS(GAP 1m) ON ts"""
    assert rows(sqlflow.sql(spark, query, path=path), "kind", "user", "n") == srt([
        ("fixed", "u1", 3), ("fixed", "u2", 2), ("sessions", "u1", 1), ("sessions", "u1", 2), ("sessions", "u2", 2)])


def test_create_a_temp_view_of_a_windowed_select(spark, clicks):
    """On the native path (a view of the engine path is refused: tests/spark/test_views.py)."""
    sqlflow.sql(spark, "CREATE OR REPLACE TEMP VIEW per_user AS SELECT user, SUM(amount) AS total FROM clicks "
                       "GROUP BY user WINDOW GLOBAL ON ts", path="native")
    assert rows(spark.sql("SELECT user, total, window_start FROM per_user"), "user", "total") == srt(
        [("u1", 60), ("u2", 5)])


@pytest.mark.parametrize("path", PATHS)
def test_timestamp_ntz_event_times_in_another_time_zone(spark, path):
    spark.conf.set("spark.sql.session.timeZone", "Asia/Kolkata")  # +05:30: not a multiple of the window
    try:
        df = sqlflow.sql(spark, "SELECT k, COUNT(*) AS n FROM VALUES ('a', TIMESTAMP_NTZ'2024-01-01 00:20:00'), "
                                "('a', TIMESTAMP_NTZ'2024-01-01 00:40:00') AS t(k, local) "
                                "GROUP BY k WINDOW FIXED(SIZE 1h) ON local", path=path)
        assert dict(df.dtypes)["window_start"] == "timestamp"
        got = rows(df, "k", "n", "window_start", "window_end")
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")
    # 00:20 and 00:40 in Kolkata are 18:50 and 19:10 UTC: windows align on UTC hours, as for TIMESTAMPs
    # (collect() shows UTC here); aligned on the local wall clock both would be in [18:30, 19:30) UTC
    assert got == srt([("a", 1, dt.datetime(2023, 12, 31, 18), dt.datetime(2023, 12, 31, 19)),
                       ("a", 1, dt.datetime(2023, 12, 31, 19), dt.datetime(2023, 12, 31, 20))])


@pytest.mark.parametrize("path", PATHS)
def test_window_functions_over_the_aggregates(spark, clicks, path):
    query = """SELECT user, SUM(amount) AS total,
                      RANK() OVER (PARTITION BY window_start ORDER BY SUM(amount) DESC) AS rank,
                      SUM(SUM(amount)) OVER (PARTITION BY user) AS user_total
               FROM clicks GROUP BY user WINDOW FIXED(SIZE 2m) ON ts"""
    assert rows(sqlflow.sql(spark, query, path=path), "user", "window_start", "total", "rank", "user_total") == srt([
        ("u1", T("00:00:00"), 30, 1, 60), ("u2", T("00:00:00"), 5, 2, 5), ("u1", T("00:02:00"), 30, 1, 60)])


def test_configuration_keys(spark, clicks):
    query = "SELECT user, COUNT(*) AS n FROM clicks GROUP BY user WINDOW SESSIONS(GAP 1m) ON ts"
    assert "  buckets: 4 (2 x spark.sql.shuffle.partitions)" in sqlflow.explain(query, spark).splitlines()
    spark.conf.set("spark.sqlflow.buckets", "7")
    spark.conf.set("spark.sqlflow.path", "native")
    try:
        assert "  path: native (forced (path='native'))" in sqlflow.explain(query, spark).splitlines()
        df = sqlflow.sql(spark, query, path="engine")  # the argument wins over the conf
        assert sqlflow.metrics(df)["stages"][0]["path"] == "engine"
        spark.conf.set("spark.sqlflow.path", "auto")
        assert "  buckets: 7 (spark.sqlflow.buckets)" in sqlflow.explain(query, spark).splitlines()
        assert rows(df, "user", "n") == srt([("u1", 1), ("u1", 2), ("u2", 2)])
    finally:
        spark.conf.unset("spark.sqlflow.buckets")
        spark.conf.unset("spark.sqlflow.path")


def test_buckets_follow_the_size_estimate_of_a_file_source(spark, tmp_path):
    """Without spark.sqlflow.buckets, a parquet source estimated at more than bucketBytes per
    bucket gets more buckets (Spark's estimate is the files' size)."""
    from sqlflow.spark import conf

    path = str(tmp_path / "events.parquet")
    spark.range(20_000).selectExpr("id % 97 AS user", "timestamp_seconds(id) AS ts").write.parquet(path)
    df = spark.read.parquet(path)
    size = conf.estimated_bytes(df)
    assert size is not None and size > 10_000
    assert conf.buckets(spark, df) == (4, "4 (2 x spark.sql.shuffle.partitions)")
    target = -(-size // 10)
    spark.conf.set("spark.sqlflow.bucketBytes", str(target))
    try:
        assert conf.buckets(spark, df) == (10, f"10 (input estimated at {size} bytes, {target} per bucket)")
    finally:
        spark.conf.unset("spark.sqlflow.bucketBytes")


@pytest.mark.parametrize("value", ["8MB", "0", "-1"])
def test_a_bad_bucket_size_is_a_located_error(spark, value):
    """spark.sqlflow.bucketBytes that is not a positive number of bytes fails the statement with a
    SqlflowError naming the key and the value (it was Python's ValueError from inside sqlflow, or
    a division by zero)."""
    spark.createDataFrame([(1, 2, "2024-01-01 00:00:01")], "k long, v long, ts string") \
        .selectExpr("k", "v", "CAST(ts AS TIMESTAMP) AS ts").createOrReplaceTempView("sized")
    spark.conf.set("spark.sqlflow.bucketBytes", value)
    try:
        with pytest.raises(sqlflow.SqlflowError) as error:
            sqlflow.sql(spark, "SELECT k, SUM(v) AS s FROM sized GROUP BY k WINDOW FIXED(SIZE 1m) ON ts", path="engine")
        assert f"spark.sqlflow.bucketBytes must be a number of bytes per bucket (1 or more), not '{value}'" in str(error.value)
        assert error.value.clause == "SET"
    finally:
        spark.conf.unset("spark.sqlflow.bucketBytes")


@pytest.mark.parametrize("key, value, read", [
    ("spark.sqlflow.buckets", "eight", lambda c, s: c.buckets(s)),
    ("spark.sqlflow.buckets", "0", lambda c, s: c.buckets(s)),
    ("spark.sqlflow.streaming.buckets", "4.5", lambda c, s: c.streaming_buckets(s)),
    ("spark.sqlflow.bucketChunkRows", "-3", lambda c, s: c.chunk_rows(s)),
])
def test_counting_keys_with_other_values_are_located_errors(key, value, read):
    """Every key holding a whole number reads it in one place (`conf.whole_number`): a value that
    is not one is a SqlflowError naming the key (a session's conf is all it reads)."""
    from types import SimpleNamespace

    from sqlflow.spark import conf

    session = SimpleNamespace(conf=SimpleNamespace(get=lambda k, default=None: {key: value}.get(k, default)))
    with pytest.raises(sqlflow.SqlflowError, match=f"{key} must be a number of .*, not '{value}'") as error:
        read(conf, session)
    assert error.value.clause == "SET"


def test_an_unknown_size_estimate_keeps_the_default_bucket_count(spark):
    """Spark estimates a DataFrame built from Python data at Long.MaxValue ("unknown"), and a
    projection over it at a little less: neither sizes the buckets (one partition per bucket:
    65,536 of them would be 65,536 tasks)."""
    from sqlflow.spark import conf

    df = spark.createDataFrame([(1, 2)], "a long, b long")
    assert conf.estimated_bytes(df) is None
    assert conf.estimated_bytes(df.select((df.a + 1).alias("x"))) is None
    assert conf.buckets(spark, df.select("a")) == (4, "4 (2 x spark.sql.shuffle.partitions)")
