"""Errors of `sqlflow.sql` on bad queries and bad input, with their exact messages.

Spark's analysis errors (missing tables and columns, type mismatches) keep Spark's message and
point into the user's query: at the identifier Spark names, or at the sqlflow clause that
introduced it (ON, WATERMARK, ARRIVAL, TIMELINE, GAP, WHEN).
"""
import pytest
from pyspark.errors import AnalysisException

import sqlflow


@pytest.fixture(scope="module")
def tables(spark):
    spark.sql("""CREATE OR REPLACE TEMP VIEW clicks AS SELECT * FROM VALUES
      ('u1', 'home', 10, TIMESTAMP'2024-01-01 00:00:10', TIMESTAMP'2024-01-01 00:00:12', 5L)
      AS t(user, page, amount, ts, arrived, secs)""")
    spark.sql("""CREATE OR REPLACE TEMP VIEW backwards AS SELECT * FROM VALUES
      (TIMESTAMP'2024-01-01 00:00:01', TIMESTAMP'2024-01-01 00:00:09'),
      (TIMESTAMP'2024-01-01 00:00:02', TIMESTAMP'2024-01-01 00:00:05') AS t(proc_time, watermark)""")


def error_of(spark, query, **kwargs):
    with pytest.raises(sqlflow.SqlflowError) as info:
        sqlflow.sql(spark, query, **kwargs).collect()
    return info.value


CASES = {
    "missing table": (
        "SELECT user, COUNT(*) AS n\nFROM nosuch\nGROUP BY user WINDOW GLOBAL ON ts",
        sqlflow.SqlflowAnalysisError,
        "sqlflow: SELECT: [TABLE_OR_VIEW_NOT_FOUND] The table or view `nosuch` cannot be found. Verify the "
        "spelling and correctness of the schema and catalog. (line 2, column 6)\n"
        "  FROM nosuch\n"
        "       ^"),
    "missing column": (
        "SELECT user, SUM(nope) AS n\nFROM clicks\nGROUP BY user WINDOW GLOBAL ON ts",
        sqlflow.SqlflowAnalysisError,
        "sqlflow: SELECT: [UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter with "
        "name `nope` cannot be resolved. Did you mean one of the following? [`ts`, `page`, `user`, `secs`, "
        "`amount`]. (line 1, column 18)\n"
        "  SELECT user, SUM(nope) AS n\n"
        "                   ^"),
    "missing event-time column in ON": (
        "SELECT user, COUNT(*) AS n\nFROM clicks\nGROUP BY user WINDOW FIXED(SIZE 1m) ON nots",
        sqlflow.SqlflowAnalysisError,
        "sqlflow: WINDOW: [UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter with "
        "name `nots` cannot be resolved. Did you mean one of the following? [`ts`, `secs`, `amount`, `page`, "
        "`user`]. (line 3, column 40)\n"
        "  GROUP BY user WINDOW FIXED(SIZE 1m) ON nots\n"
        "                                         ^"),
    "missing event-time column in WATERMARK": (
        "SELECT user, COUNT(*) AS n\nFROM clicks WATERMARK tss DELAY OF 1m\nGROUP BY user WINDOW FIXED(SIZE 1m)",
        sqlflow.SqlflowAnalysisError,
        "sqlflow: WATERMARK: [UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter "
        "with name `clicks`.`tss` cannot be resolved. Did you mean one of the following? [`clicks`.`ts`, "
        "`clicks`.`secs`, `clicks`.`user`, `clicks`.`page`, `clicks`.`amount`]. (line 2, column 23)\n"
        "  FROM clicks WATERMARK tss DELAY OF 1m\n"
        "                        ^"),
    "event time not a timestamp (ON)": (
        "SELECT user, COUNT(*) AS n\nFROM clicks\nGROUP BY user WINDOW FIXED(SIZE 1m) ON amount",
        sqlflow.SqlflowAnalysisError,
        "sqlflow: WINDOW: the event-time column amount is INT, not a TIMESTAMP (line 3, column 40)\n"
        "  GROUP BY user WINDOW FIXED(SIZE 1m) ON amount\n"
        "                                         ^\n"
        "convert it in a subquery, e.g. timestamp_seconds(amount) or to_timestamp(amount)"),
    "event time not a timestamp (WATERMARK)": (
        "SELECT user, COUNT(*) AS n\nFROM clicks WATERMARK secs DELAY OF 1m\nGROUP BY user WINDOW FIXED(SIZE 1m)",
        sqlflow.SqlflowAnalysisError,
        "sqlflow: WATERMARK: the event-time column secs is BIGINT, not a TIMESTAMP (line 2, column 23)\n"
        "  FROM clicks WATERMARK secs DELAY OF 1m\n"
        "                        ^\n"
        "convert it in a subquery, e.g. timestamp_seconds(secs) or to_timestamp(secs)"),
    "arrival not a timestamp": (
        "SELECT user, COUNT(*) AS n\nFROM clicks WATERMARK ts PERFECT ARRIVAL secs\nGROUP BY user WINDOW FIXED(SIZE 1m)",
        sqlflow.SqlflowAnalysisError,
        "sqlflow: WATERMARK: the arrival column secs is BIGINT, not a TIMESTAMP (line 2, column 42)\n"
        "  FROM clicks WATERMARK ts PERFECT ARRIVAL secs\n"
        "                                           ^\n"
        "convert it in a subquery, e.g. timestamp_seconds(secs) or to_timestamp(secs)"),
    "arrival a string": (
        "SELECT user, COUNT(*) AS n\nFROM clicks WATERMARK ts DELAY OF 1m ARRIVAL page\nGROUP BY user WINDOW FIXED(SIZE 1m)",
        sqlflow.SqlflowAnalysisError,
        "sqlflow: WATERMARK: the arrival column page is STRING, not a TIMESTAMP (line 2, column 46)\n"
        "  FROM clicks WATERMARK ts DELAY OF 1m ARRIVAL page\n"
        "                                               ^\n"
        "convert it in a subquery, e.g. to_timestamp(page) (or to_timestamp(page, 'yyyy-MM-dd HH:mm:ss'))"),
    "SUM of a string": (
        "SELECT user, SUM(page) AS n\nFROM clicks\nGROUP BY user WINDOW FIXED(SIZE 1m) ON ts",
        sqlflow.SqlflowAnalysisError,
        "sqlflow: SELECT: SUM(page) needs numbers, but page is a STRING (line 1, column 14)\n"
        "  SELECT user, SUM(page) AS n\n"
        "               ^\n"
        "cast it explicitly, e.g. SUM(CAST(page AS DOUBLE))"),
    "AVG of a date": (
        "SELECT user, AVG(DATE(ts)) AS n\nFROM clicks\nGROUP BY user WINDOW FIXED(SIZE 1m) ON ts",
        sqlflow.SqlflowAnalysisError,
        'sqlflow: SELECT: [DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE] Cannot resolve "avg(CAST(ts AS DATE))" due '
        'to data type mismatch: The first parameter requires the "NUMERIC" or "ANSI INTERVAL" type, however '
        '"CAST(ts AS DATE)" has the type "DATE". (line 1, column 14)\n'
        "  SELECT user, AVG(DATE(ts)) AS n\n"
        "               ^"),
    "missing TIMELINE table": (
        "SELECT user, COUNT(*) AS n\nFROM clicks WATERMARK ts TIMELINE missing ARRIVAL arrived\n"
        "GROUP BY user WINDOW FIXED(SIZE 1m)",
        sqlflow.SqlflowAnalysisError,
        "sqlflow: WATERMARK: [TABLE_OR_VIEW_NOT_FOUND] The table or view `missing` cannot be found. Verify the "
        "spelling and correctness of the schema and catalog. (line 2, column 26)\n"
        "  FROM clicks WATERMARK ts TIMELINE missing ARRIVAL arrived\n"
        "                           ^"),
    "TIMELINE moving backwards": (
        "SELECT user, COUNT(*) AS n\nFROM clicks WATERMARK ts TIMELINE backwards ARRIVAL arrived\n"
        "GROUP BY user WINDOW FIXED(SIZE 1m)",
        sqlflow.SqlflowExecutionError,
        "sqlflow: WATERMARK: TIMELINE backwards moves backwards at processing time 2024-01-01 00:00:02: "
        "2024-01-01 00:00:09 then 2024-01-01 00:00:05; a watermark never decreases (line 2, column 26)\n"
        "  FROM clicks WATERMARK ts TIMELINE backwards ARRIVAL arrived\n"
        "                           ^"),
    "GAP not an interval": (
        "SELECT user, COUNT(*) AS n\nFROM clicks\nGROUP BY user WINDOW SESSIONS(GAP secs) ON ts",
        sqlflow.SqlflowAnalysisError,
        "sqlflow: WINDOW: the session GAP secs is BIGINT, not an interval (line 3, column 35)\n"
        "  GROUP BY user WINDOW SESSIONS(GAP secs) ON ts\n"
        "                                    ^\n"
        "write it as an interval, e.g. INTERVAL 5 MINUTES or make_interval(...)"),
    "WHEN predicate not a boolean": (
        "SELECT user, COUNT(*) AS n\nFROM clicks\nGROUP BY user WINDOW GLOBAL ON ts TRIGGER REPEAT(WHEN(page))",
        sqlflow.SqlflowAnalysisError,
        "sqlflow: TRIGGER: WHEN needs a boolean predicate, page is STRING (line 3, column 55)\n"
        "  GROUP BY user WINDOW GLOBAL ON ts TRIGGER REPEAT(WHEN(page))\n"
        "                                                        ^\n"
        "compare it, e.g. WHEN(x > 0)"),
    "missing column in WHEN": (
        "SELECT user, COUNT(*) AS n\nFROM clicks\nGROUP BY user WINDOW GLOBAL ON ts TRIGGER REPEAT(WHEN(nocol > 1))",
        sqlflow.SqlflowAnalysisError,
        "sqlflow: TRIGGER: [UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter with "
        "name `nocol` cannot be resolved. Did you mean one of the following? [`secs`, `ts`, `page`, `user`, "
        "`amount`]. (line 3, column 55)\n"
        "  GROUP BY user WINDOW GLOBAL ON ts TRIGGER REPEAT(WHEN(nocol > 1))\n"
        "                                                        ^"),
    "missing column after the window": (
        "SELECT user, COUNT(*) AS n\nFROM clicks\nGROUP BY user WINDOW FIXED(SIZE 1m) ON ts ORDER BY nothing",
        sqlflow.SqlflowAnalysisError,
        "sqlflow: SELECT: [UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter with "
        "name `nothing` cannot be resolved. Did you mean one of the following? [`n`, `pane_timing`, "
        "`emit_time`, `is_last`, `window_end`]. (line 3, column 52)\n"
        "  GROUP BY user WINDOW FIXED(SIZE 1m) ON ts ORDER BY nothing\n"
        "                                                     ^"),
    "neither path": (
        "SELECT user, percentile_approx(amount, 0.5) AS p\nFROM clicks WATERMARK ts PERFECT ARRIVAL arrived\n"
        "GROUP BY user WINDOW GLOBAL",
        sqlflow.SqlflowUnsupportedError,
        "sqlflow: SELECT: the SELECT with WINDOW GLOBAL at line 3, column 15 can run neither natively (its "
        "input is replayed (ARRIVAL arrived): panes depend on the arrival order, which only the engine "
        "follows) nor on the engine (PERCENTILE_APPROX(amount, 0.5): the sqlflow engine has no "
        "PERCENTILE_APPROX) (line 1, column 8)\n"
        "  SELECT user, percentile_approx(amount, 0.5) AS p\n"
        "         ^"),
    "syntax error from the front end": (
        "SELECT user, COUNT(*) AS n FROM clicks GROUP BY user WINDOW SESSION(GAP 1m) ON ts",
        sqlflow.SqlflowSyntaxError,
        None),
}


@pytest.mark.parametrize("case", list(CASES))
def test_error_messages(spark, tables, case):
    query, kind, message = CASES[case]
    error = error_of(spark, query)
    assert type(error) is kind
    if message is not None:
        assert str(error) == message


def test_forcing_an_impossible_path(spark, tables):
    query = "SELECT user, COUNT(*) AS n FROM clicks GROUP BY user WINDOW CUMULATE(STEP 1m, SIZE 2m) ON ts"
    error = error_of(spark, query, path="native")
    assert str(error).splitlines()[0] == (
        "sqlflow: WINDOW: path='native' is impossible for the SELECT with WINDOW CUMULATE: "
        "Spark has no cumulating windows (line 1, column 54)")  # one line number per place
    query = "SELECT user, percentile_approx(amount, 0.5) AS p FROM clicks GROUP BY user WINDOW GLOBAL ON ts"
    error = error_of(spark, query, path="engine")
    assert str(error).splitlines()[0] == (
        "sqlflow: SELECT: path='engine' is impossible for the SELECT with WINDOW GLOBAL at line 1, column 76: "
        "PERCENTILE_APPROX(amount, 0.5): the sqlflow engine has no PERCENTILE_APPROX (line 1, column 8)")
    with pytest.raises(sqlflow.SqlflowError, match="path must be one of auto, native, engine, got 'fast'"):
        sqlflow.sql(spark, query, path="fast")


def test_two_joined_replays_are_refused(spark, tables):
    """Replays combine as branches of one UNION ALL (tests/spark/test_several_inputs.py); joined,
    the arrival of a joined row is unknown."""
    error = error_of(spark, """
        SELECT a.user, COUNT(*) AS n
        FROM clicks WATERMARK ts PERFECT ARRIVAL arrived AS a
        JOIN clicks WATERMARK ts PERFECT ARRIVAL arrived AS b ON a.user = b.user
        GROUP BY a.user WINDOW GLOBAL ON a.ts""")
    assert type(error) is sqlflow.SqlflowUnsupportedError
    assert error.message == ("2 sources with ARRIVAL feed this window, not as branches of one UNION ALL: "
                             "the arrival of rows of two replays joined together is unknown")


def test_an_input_column_named_like_a_pane_column_is_explained(spark):
    spark.sql("SELECT 'a' AS k, 1 AS v, TIMESTAMP'2024-01-01 00:00:10' AS ts, 7 AS pane_index"
              ).createOrReplaceTempView("clashing_input")
    with pytest.raises(sqlflow.SqlflowAnalysisError) as info:
        sqlflow.sql(spark, "SELECT k, SUM(pane_index) AS s FROM clashing_input GROUP BY k\n"
                           "WINDOW FIXED(SIZE 1m) ON ts").collect()
    message = str(info.value)
    assert "could be: [the pane column `pane_index`, `clashing_input`.`pane_index`]. An input column is also" \
           " named `pane_index`: qualify it with its table or rename it before the windowed SELECT" in message
    assert "__sqlflow" not in message and "(line 1, column 15)" in message
    qualified = sqlflow.sql(spark, "SELECT k, SUM(c.pane_index) AS s FROM clashing_input AS c GROUP BY k\n"
                                   "WINDOW FIXED(SIZE 1m) ON ts")
    assert [(r.k, r.s, r.pane_index) for r in qualified.collect()] == [("a", 7, 0)]


def test_spark_errors_stay_sparks_own_after_a_windowed_query(spark, no_query_context_loggers):
    """sqlflow silences PySpark's query-context loggers while it asks Spark to analyse its own
    queries; it must not create them as plain Loggers (PySpark then calls them with keyword
    arguments and every later AnalysisException became a TypeError). The loggers as a fresh
    interpreter has them: not created yet."""
    spark.sql("SELECT 'a' AS k, TIMESTAMP'2024-01-01 00:00:00' AS ts").createOrReplaceTempView("fresh_loggers")
    try:
        sqlflow.sql(spark, "SELECT k, COUNT(*) AS n FROM fresh_loggers GROUP BY k WINDOW FIXED(SIZE 1m) ON ts").collect()
        with pytest.raises(AnalysisException) as caught:
            spark.sql("SELECT no_such_column FROM fresh_loggers").collect()
    finally:
        spark.catalog.dropTempView("fresh_loggers")
    assert caught.value.getCondition() == "UNRESOLVED_COLUMN.WITH_SUGGESTION"


@pytest.mark.parametrize("clause, text, start", [
    ("TRIGGER", "TRIGGER REPEAT(WHEN(v > ?))", "v > ?"),
    ("WINDOW", "WINDOW SESSIONS(GAP make_interval(0, 0, 0, 0, 0, 0, ?)) ON ts", "make_interval"),
])
def test_positional_parameter_in_a_sqlflow_clause_is_a_located_error(spark, clause, text, start):
    # a clause's expression is not in the SQL tree whose `?` markers are numbered: say so, and where
    spark.sql("CREATE OR REPLACE TEMP VIEW positional_params AS SELECT 'a' AS k, 1 AS v, "
              "TIMESTAMP'2024-01-01 00:00:10' AS ts")
    window = "" if text.startswith("WINDOW") else "WINDOW FIXED(SIZE 1m) ON ts "
    query = f"SELECT k, COUNT(*) AS n FROM positional_params WHERE v > ? GROUP BY k {window}{text}"
    with pytest.raises(sqlflow.SqlflowError) as info:
        sqlflow.sql(spark, query, args=[0, 1])
    err = info.value
    assert err.clause == clause
    assert "named parameters" in str(err)
    assert (err.line, err.column) == (1, query.rindex(start) + 1)
    # named parameters work there
    named = query.replace("v > ?", "v > :low", 1).replace("?", ":x")
    assert sqlflow.sql(spark, named, args={"low": 0, "x": 1}).count() == 1


def test_analysis_error_over_the_panes_names_no_internal_view(spark):
    spark.sql("CREATE OR REPLACE TEMP VIEW panes_names AS SELECT 'a' AS k, 1 AS v, "
              "TIMESTAMP'2024-01-01 00:00:10' AS ts")
    query = ("SELECT k, COUNT(*) AS n FROM panes_names GROUP BY k WINDOW FIXED(SIZE 1m) ON ts "
             "TRIGGER REPEAT(COUNT 1) ORDER BY nosuch")
    with pytest.raises(sqlflow.SqlflowError) as info:
        sqlflow.sql(spark, query)
    err = info.value
    assert "nosuch" in err.message and "__sqlflow" not in err.message
    assert (err.line, err.column) == (1, query.index("nosuch") + 1)


@pytest.mark.parametrize("query", [
    "SELECT user, COUNT(*) AS n FROM clicks WHERE user <> 'x\ud800' GROUP BY user WINDOW GLOBAL ON ts",
    "SELECT 'x\ud800' AS plain",
], ids=["windowed", "plain"])
def test_a_lone_surrogate_is_a_located_error_not_a_py4j_error(spark, tables, query):
    # py4j cannot encode a lone surrogate: Spark would raise a raw Py4JError
    error = error_of(spark, query)
    assert type(error) is sqlflow.SqlflowSyntaxError
    assert (error.clause, error.line, error.column) == ("SQL", 1, query.index("\ud800") + 1)
    assert str(error).splitlines()[0].startswith("sqlflow: SQL: the text holds a lone surrogate U+D800")
    assert "\ud800" not in str(error)  # printable: the echoed line shows a blank instead
    with pytest.raises(sqlflow.SqlflowError, match=r"the value of :who holds a lone surrogate"):
        sqlflow.sql(spark, "SELECT :who AS w", args={"who": "a\udfff"})


@pytest.mark.parametrize("path", ["native", "engine"])
def test_a_located_spark_error_keeps_its_class_and_sqlstate(spark, tables, path):
    # Spark refuses SUM of a string array: sqlflow locates the error and keeps Spark's codes
    query = "SELECT user, SUM(array(page)) AS s FROM clicks GROUP BY user WINDOW GLOBAL ON ts"
    error = error_of(spark, query, path=path)
    assert type(error) is sqlflow.SqlflowAnalysisError
    assert (error.spark_error_class, error.spark_sql_state) == ("DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE", "42K09")
    assert (error.line, error.column) == (1, query.index("SUM") + 1)


def test_grouping_sets_rollup_and_cube_are_refused_before_spark(spark, tables):
    """Spark's analysis of the rewrite gave an empty message (GROUPING SETS) or "Cannot resolve
    routine ROLLUP": the frontend refuses them first, at their words."""
    for grouping, word in (("GROUPING SETS ((user), ())", "GROUPING SETS"), ("ROLLUP(user)", "ROLLUP"),
                           ("CUBE(user)", "CUBE")):
        e = error_of(spark, f"SELECT user, COUNT(*) AS n FROM clicks\nGROUP BY {grouping} WINDOW GLOBAL ON ts")
        assert type(e) is sqlflow.SqlflowUnsupportedError
        assert (e.clause, e.line, e.column, e.hint) == ("GROUP BY", 2, 10,
                                                        "run one windowed SELECT per grouping and UNION ALL them")
        assert e.message == f"GROUP BY {word} in a windowed SELECT: a window's panes have one grouping"


def test_an_unknown_window_function_is_refused_when_planned(spark, tables):
    """`WINDOW TUMBLE(1h)` parses as a custom window function; unregistered, it failed inside a
    Python worker. It is refused when planned (explain too, without Spark), naming FIXED."""
    query = "SELECT user, COUNT(*) AS n FROM clicks GROUP BY user\nWINDOW TUMBLE(1h) ON ts"
    for run in (lambda: sqlflow.sql(spark, query), lambda: sqlflow.explain(query)):
        with pytest.raises(sqlflow.SqlflowError) as info:
            run()
        e = info.value
        assert (type(e), e.clause, e.line, e.column) == (sqlflow.SqlflowSemanticError, "WINDOW", 2, 8)
        assert e.message == "unknown window function TUMBLE"
        assert e.hint == ("did you mean FIXED(SIZE 1h)? A custom window function is registered with "
                          "sqlflow.register_window_fn before the query runs")


def test_an_unquoted_column_named_window_is_located(spark):
    spark.sql("SELECT 'a' AS k, 'x' AS window, TIMESTAMP'2024-01-01 00:00:10' AS ts").createOrReplaceTempView("wcol")
    e = error_of(spark, "SELECT window, COUNT(*) AS n FROM wcol GROUP BY window WINDOW GLOBAL ON ts")
    assert (type(e), e.clause, e.line, e.column) == (sqlflow.SqlflowSyntaxError, "SQL", 1, 49)
    assert e.hint == "write `window` (in backquotes)"
    rows = sqlflow.sql(spark, "SELECT k, window, COUNT(*) AS n FROM wcol GROUP BY k, window WINDOW GLOBAL ON ts")
    assert [(r.k, r.window, r.n) for r in rows.collect()] == [("a", "x", 1)]


PANE_COLUMNS = ["window_start", "window_end", "pane_index", "pane_timing", "is_last", "emit_time", "output_time",
                "is_retraction"]


@pytest.mark.parametrize("path", ["native", "engine"])
def test_an_alias_named_like_a_pane_column_is_refused_on_both_paths(spark, tables, path):
    """It took the pane column's place in the result (the count came back as window_start)."""
    for column in PANE_COLUMNS:
        e = error_of(spark, f"SELECT user,\n  COUNT(*) AS {column}\nFROM clicks GROUP BY user "
                            "WINDOW FIXED(SIZE 1h) ON ts EMIT ACCUMULATING AND RETRACTING", path=path)
        assert type(e) is sqlflow.SqlflowSemanticError, column
        assert (e.clause, e.line, e.column) == ("SELECT", 2, 15), column
        assert e.message.startswith(f"the alias {column} names a pane column"), column
    got = sqlflow.sql(spark, "SELECT user, window_start AS window_start, COUNT(*) AS n FROM clicks GROUP BY user "
                             "WINDOW FIXED(SIZE 1h) ON ts", path=path)
    assert [(r.user, str(r.window_start), r.n) for r in got.collect()] == [("u1", "2024-01-01 00:00:00", 1)]


GLOBAL_STAGE = "WITH s AS (SELECT user, COUNT(*) AS n FROM clicks GROUP BY user WINDOW GLOBAL ON ts{ot})\n"


def test_a_window_on_the_output_time_of_a_global_stage_without_output_timestamp_is_refused(spark, tables):
    """Its output_time is NULL in every pane: the window returned 0 rows without a word."""
    query = GLOBAL_STAGE + "SELECT COUNT(*) AS users FROM s WINDOW FIXED(SIZE 1h) ON output_time"
    e = error_of(spark, query.format(ot=""))
    assert type(e) is sqlflow.SqlflowSemanticError
    assert (e.clause, e.line, e.column) == ("WINDOW", 2, 58)
    assert "NULL in every pane" in e.message and "OUTPUT TIMESTAMP EARLIEST or LATEST" in e.hint
    got = sqlflow.sql(spark, query.format(ot=" OUTPUT TIMESTAMP LATEST"))
    assert [(r.users, str(r.window_start)) for r in got.collect()] == [(1, "2024-01-01 00:00:00")]


@pytest.mark.parametrize("call", ["sql", "explain", "transpile"])
def test_a_dataframe_where_the_query_text_goes_is_a_clear_error(spark, call):
    """A result passed back where the SQL text goes (`sqlflow.explain(df)`): a TypeError naming what
    was given and what describes a result, not an error from inside the parser."""
    df = spark.range(1)
    with pytest.raises(TypeError) as caught:
        if call == "sql":
            sqlflow.sql(spark, df)
        elif call == "explain":
            sqlflow.explain(df, spark)
        else:
            sqlflow.transpile(df)
    assert str(caught.value) == ("sqlflow takes a query as SQL text (a str), not DataFrame: sqlflow.metrics(df) and "
                                 "sqlflow.dropped(df) describe a result, df.explain() its Spark plan")
