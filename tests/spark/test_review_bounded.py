"""Review regressions of the bounded Spark path: exact values the engine path must get right."""
import datetime as dt

import pytest

import sqlflow

T0 = dt.datetime(2024, 1, 1)
BIG = 2**53  # the first integer float64 cannot tell from its successor


@pytest.fixture
def one_bucket(spark):
    spark.conf.set("spark.sqlflow.buckets", "1")
    yield
    spark.conf.unset("spark.sqlflow.buckets")


def test_bigint_keys_beyond_2_53_stay_apart_next_to_a_null_key(spark, one_bucket):
    # pandas sees a BIGINT column with NULLs as float64: 2^53 and 2^53 + 1 would become one key
    spark.sql(f"""CREATE OR REPLACE TEMP VIEW review_big AS SELECT * FROM VALUES
        ({BIG}L, {BIG + 1}L, TIMESTAMP'2024-01-01 00:00:10'),
        ({BIG + 1}L, {BIG + 3}L, TIMESTAMP'2024-01-01 00:00:20'),
        (NULL, NULL, TIMESTAMP'2024-01-01 00:00:30')
        AS t(k, v, ts)""")
    expected = [(None, None, None), (BIG, BIG + 1, BIG + 1), (BIG + 1, BIG + 3, BIG + 3)]
    for trigger in ("", "TRIGGER REPEAT(COUNT 1)"):  # the vectorised path and the per-key loop
        df = sqlflow.sql(spark, f"SELECT k, MAX(v) AS m, first(v) AS f FROM review_big GROUP BY k "
                                f"WINDOW GLOBAL ON ts {trigger}", path="engine")
        got = sorted((tuple(r) for r in df.select("k", "m", "f").collect()), key=lambda r: (r[0] is not None, r))
        assert got == expected, trigger
        assert dict(df.dtypes)["k"] == "bigint"


def test_dropped_rows_echo_bigint_arguments_exactly(spark, one_bucket):
    spark.sql(f"""CREATE OR REPLACE TEMP VIEW review_big_null_time AS SELECT * FROM VALUES
        ('a', {BIG + 1}L, CAST(NULL AS TIMESTAMP)),
        ('a', NULL, TIMESTAMP'2024-01-01 00:00:20')
        AS t(k, v, ts)""")
    df = sqlflow.sql(spark, "SELECT k, SUM(v) AS s FROM review_big_null_time GROUP BY k WINDOW FIXED(SIZE 1m) ON ts",
                     path="engine")
    rows = sqlflow.dropped(df).select("k", "v", "reason").collect()
    assert [tuple(r) for r in rows] == [("a", BIG + 1, "null event time")]


def test_bigint_keys_and_sums_beyond_2_53_stay_exact_without_nulls(spark, one_bucket):
    """No NULL anywhere: the pane columns are plain int64 in pandas, and the bucket's output puts
    them next to its metrics row, which has no key (stacked as float64 they would round)."""
    spark.sql(f"""CREATE OR REPLACE TEMP VIEW review_big_plain AS SELECT * FROM VALUES
        ({BIG + 1}L, {BIG + 1}L, TIMESTAMP'2024-01-01 00:00:10'),
        ({BIG + 3}L, {BIG + 3}L, TIMESTAMP'2024-01-01 00:00:20')
        AS t(k, v, ts)""")
    df = sqlflow.sql(spark, "SELECT k, SUM(v) AS s, MAX(v) AS m FROM review_big_plain GROUP BY k "
                            "WINDOW SESSIONS(GAP 1m) ON ts", path="engine")
    got = sorted(tuple(r) for r in df.select("k", "s", "m").collect())
    assert got == [(BIG + 1, BIG + 1, BIG + 1), (BIG + 3, BIG + 3, BIG + 3)]



def test_bigint_keys_beyond_2_53_stay_apart_on_the_pandas_path_too(spark, one_bucket):
    """A DECIMAL aggregate has no plain Arrow form: the bucket jobs take PySpark's pandas
    conversion, where BIGINTs travel with NULL masks (sqlflow/spark/engine_path.py)."""
    spark.sql(f"""CREATE OR REPLACE TEMP VIEW review_big_decimal AS SELECT * FROM VALUES
        ({BIG}L, {BIG + 1}L, 1.5BD, TIMESTAMP'2024-01-01 00:00:10'),
        ({BIG + 1}L, {BIG + 3}L, 2.25BD, TIMESTAMP'2024-01-01 00:00:20'),
        (NULL, NULL, NULL, TIMESTAMP'2024-01-01 00:00:30')
        AS t(k, v, d, ts)""")
    df = sqlflow.sql(spark, "SELECT k, MAX(v) AS m, SUM(d) AS s FROM review_big_decimal GROUP BY k "
                            "WINDOW GLOBAL ON ts", path="engine")
    assert "MapInPandas" in df._jdf.queryExecution().executedPlan().toString()
    got = sorted((tuple(r) for r in df.select("k", "m", "s").collect()), key=lambda r: (r[0] is not None, r))
    assert [(k, m, None if s is None else str(s)) for k, m, s in got] == [
        (None, None, None), (BIG, BIG + 1, "1.50"), (BIG + 1, BIG + 3, "2.25")]


def test_arrow_path_with_large_var_types_and_null_keys(spark, one_bucket):
    """The Arrow path builds its output schema itself (string keys as large_string when Spark's
    large var types are on, as Spark declares them); NULL keys and NULL sums stay NULL."""
    spark.sql("""CREATE OR REPLACE TEMP VIEW review_large_strings AS SELECT * FROM VALUES
        ('a', 1L, TIMESTAMP'2024-01-01 00:00:10'), ('a', 2L, TIMESTAMP'2024-01-01 00:00:20'),
        (NULL, 5L, TIMESTAMP'2024-01-01 00:00:30'), ('b', NULL, TIMESTAMP'2024-01-01 00:00:40')
        AS t(k, v, ts)""")
    spark.conf.set("spark.sql.execution.arrow.useLargeVarTypes", "true")
    try:
        df = sqlflow.sql(spark, "SELECT k, SUM(v) AS s, COUNT(*) AS n FROM review_large_strings GROUP BY k "
                                "WINDOW FIXED(SIZE 1m) ON ts TRIGGER REPEAT(COUNT 1)", path="engine")
        assert "MapInArrow" in df._jdf.queryExecution().executedPlan().toString()
        got = sorted((tuple(r) for r in df.select("k", "s", "n", "pane_index").collect()),
                     key=lambda r: (r[0] is not None, r))
    finally:
        spark.conf.unset("spark.sql.execution.arrow.useLargeVarTypes")
    assert got == [(None, 5, 1, 0), ("a", 1, 1, 0), ("a", 3, 2, 1), ("b", None, 1, 0)]


@pytest.mark.parametrize("clause, text, start", [
    ("TRIGGER", "TRIGGER REPEAT(WHEN(v > ?))", "v > ?"),
    ("WINDOW", "WINDOW SESSIONS(GAP make_interval(0, 0, 0, 0, 0, 0, ?)) ON ts", "make_interval"),
])
def test_positional_parameter_in_a_sqlflow_clause_is_a_located_error(spark, clause, text, start):
    # a clause's expression is not in the SQL tree whose `?` markers are numbered: say so, and where
    spark.sql("CREATE OR REPLACE TEMP VIEW review_params AS SELECT 'a' AS k, 1 AS v, "
              "TIMESTAMP'2024-01-01 00:00:10' AS ts")
    window = "" if text.startswith("WINDOW") else "WINDOW FIXED(SIZE 1m) ON ts "
    query = f"SELECT k, COUNT(*) AS n FROM review_params WHERE v > ? GROUP BY k {window}{text}"
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
    spark.sql("CREATE OR REPLACE TEMP VIEW review_names AS SELECT 'a' AS k, 1 AS v, "
              "TIMESTAMP'2024-01-01 00:00:10' AS ts")
    query = ("SELECT k, COUNT(*) AS n FROM review_names GROUP BY k WINDOW FIXED(SIZE 1m) ON ts "
             "TRIGGER REPEAT(COUNT 1) ORDER BY nosuch")
    with pytest.raises(sqlflow.SqlflowError) as info:
        sqlflow.sql(spark, query)
    err = info.value
    assert "nosuch" in err.message and "__sqlflow" not in err.message
    assert (err.line, err.column) == (1, query.index("nosuch") + 1)
