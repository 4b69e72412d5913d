"""Result types equal Spark's own; names with spaces, backticks, quotes and unicode survive.

The engine computes aggregates in pandas, where an int column with NULLs is a float column: its
results are cast back to the type Spark's analysis gives the original aggregate call. A GLOBAL
window over rows that all have an event time holds exactly what a plain GROUP BY holds, so the
engine path must return what Spark returns, type for type. BIGINTs beyond 2^53 (which float64
cannot tell apart) stay exact on the engine's Arrow and pandas paths, next to NULL keys.
"""
import datetime as dt
from decimal import Decimal

import pytest

import sqlflow

BIG = 2**53  # the first integer float64 cannot tell from its successor

AGGREGATES = [
    "COUNT(*)", "COUNT(i)", "SUM(i)", "AVG(i)", "MIN(i)", "MAX(i)", "SUM(l)", "AVG(l)",
    "SUM(d)", "AVG(d)", "MIN(d)", "MAX(d)", "ROUND(STDDEV(d), 9)", "ROUND(VAR_POP(d), 9)", "ROUND(STDDEV_POP(i), 9)",
    "SUM(dec)", "AVG(dec)", "MIN(dec)", "MAX(dec)",
    "MIN(s)", "MAX(s)", "COUNT(DISTINCT s)", "sort_array(collect_set(s))", "sort_array(collect_list(i))",
    "MIN(t)", "MAX(t)", "MIN(day)", "MAX(day)", "MIN(flag)", "MAX(flag)",
    "COUNT_IF(i > 1)", "SUM(i) / COUNT(*) + 1", "SUM(i) FILTER (WHERE s <> 'x')",
    "COUNT(*) FILTER (WHERE s = 'y')", "mean(i)", "ROUND(std(d), 9)",
]


@pytest.fixture(scope="module")
def typed(spark):
    spark.sql("""
        CREATE OR REPLACE TEMP VIEW typed AS SELECT * FROM VALUES
          ('a', TIMESTAMP'2024-01-01 00:00:01', 1, 10000000000L, 1.5D, 1.25BD, 'x',
           TIMESTAMP'2024-05-01 10:00:00', DATE'2024-05-01', true),
          ('a', TIMESTAMP'2024-01-01 00:00:02', 2, NULL, 2.5D, 2.50BD, 'y', NULL, DATE'2024-05-03', false),
          ('a', TIMESTAMP'2024-01-01 00:00:03', NULL, 3L, NULL, NULL, NULL, TIMESTAMP'2024-05-02 10:00:00', NULL, NULL),
          ('b', TIMESTAMP'2024-01-01 00:00:04', 7, 7L, -1.0D, 0.10BD, 'y', TIMESTAMP'2024-05-03 10:00:00',
           DATE'2024-05-02', true),
          ('c', TIMESTAMP'2024-01-01 00:00:05', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)
        AS t(k, ts, i, l, d, dec, s, t, day, flag)""")
    return "typed"


def test_engine_aggregates_have_sparks_types_and_values(spark, typed):
    items = ", ".join(AGGREGATES)
    expected = spark.sql(f"SELECT k, {items} FROM typed GROUP BY k")
    got = sqlflow.sql(spark, f"SELECT k, {items} FROM typed GROUP BY k WINDOW GLOBAL ON ts", path="engine")
    assert got.columns[: len(expected.columns)] == expected.columns
    assert got.dtypes[: len(expected.columns)] == expected.dtypes
    assert sorted(got.select(*expected.columns).collect()) == sorted(expected.collect())


def test_an_aggregate_the_engine_lacks_runs_natively(spark, typed):
    expected = spark.sql("SELECT k, every(flag), percentile_approx(i, 0.5) FROM typed GROUP BY k")
    got = sqlflow.sql(spark, "SELECT k, every(flag), percentile_approx(i, 0.5) FROM typed GROUP BY k "
                             "WINDOW GLOBAL ON ts")
    assert sqlflow.metrics(got)["stages"][0]["path"] == "native"
    assert got.dtypes[:3] == expected.dtypes
    assert sorted(tuple(r)[:3] for r in got.collect()) == sorted(tuple(r) for r in expected.collect())


def test_native_path_has_the_same_types(spark, typed):
    items = ", ".join(AGGREGATES)
    native = sqlflow.sql(spark, f"SELECT k, {items} FROM typed GROUP BY k WINDOW GLOBAL ON ts", path="native")
    engine = sqlflow.sql(spark, f"SELECT k, {items} FROM typed GROUP BY k WINDOW GLOBAL ON ts", path="engine")
    assert native.dtypes == engine.dtypes
    assert sorted(native.collect()) == sorted(engine.collect())


def test_some_values_by_hand(spark, typed):
    df = sqlflow.sql(spark, "SELECT k, SUM(i) AS si, AVG(dec) AS ad, MAX(t) AS mt, COUNT(DISTINCT s) AS ds "
                            "FROM typed GROUP BY k WINDOW GLOBAL ON ts", path="engine")
    got = {r["k"]: (r["si"], r["ad"], r["mt"], r["ds"]) for r in df.collect()}
    assert got == {
        "a": (3, Decimal("1.875000"), dt.datetime(2024, 5, 2, 10), 2),
        "b": (7, Decimal("0.100000"), dt.datetime(2024, 5, 3, 10), 1),
        "c": (None, None, None, 0),
    }


@pytest.fixture(scope="module")
def odd_names(spark):
    spark.sql("""
        CREATE OR REPLACE TEMP VIEW `my clicks` AS SELECT * FROM VALUES
          ('ana', 'é', 3, 1, 'q', TIMESTAMP'2024-01-01 00:00:10', TIMESTAMP'2024-01-01 00:00:11'),
          ('ana', 'é', 4, NULL, 'r', TIMESTAMP'2024-01-01 00:00:20', TIMESTAMP'2024-01-01 00:00:21'),
          ('bo b', 'ü', 5, 2, NULL, TIMESTAMP'2024-01-01 00:02:00', TIMESTAMP'2024-01-01 00:02:01')
        AS t(`user id`, `prénom`, `montant €`, `a``b`, `it's`, `event time`, `arrivée`)""")
    return "my clicks"


@pytest.mark.parametrize("path", ["native", "engine"])
def test_identifiers_survive_the_rewrite(spark, odd_names, path):
    query = """
        SELECT `user id`, `prénom`, SUM(`montant €`) AS `total €`, COUNT(`a``b`) AS `n "x"`, MAX(`it's`),
               window_start AS `début`
        FROM `my clicks` WATERMARK `event time` DELAY OF 1m
        GROUP BY `user id`, `prénom`
        WINDOW FIXED(SIZE 1m)"""
    df = sqlflow.sql(spark, query, path=path)
    assert df.columns[:6] == ["user id", "prénom", "total €", 'n "x"', "max(it's)", "début"]
    assert sorted(tuple(r)[:6] for r in df.collect()) == [
        ("ana", "é", 7, 1, "r", dt.datetime(2024, 1, 1, 0, 0)),
        ("bo b", "ü", 5, 1, None, dt.datetime(2024, 1, 1, 0, 2)),
    ]


def test_identifiers_survive_a_replay(spark, odd_names):
    query = """
        SELECT `user id` AS `qui ?`, COUNT(*) AS `数量`
        FROM `my clicks` WATERMARK `event time` PERFECT ARRIVAL `arrivée`
        GROUP BY `user id` WINDOW SESSIONS(GAP 30s) TRIGGER REPEAT(COUNT 1)"""
    df = sqlflow.sql(spark, query)
    assert df.columns[:2] == ["qui ?", "数量"]
    assert sorted((r["qui ?"], r["数量"], r["pane_index"]) for r in df.collect()) == [
        ("ana", 1, 0), ("ana", 2, 1), ("bo b", 1, 0)]


@pytest.fixture
def one_bucket(spark):
    spark.conf.set("spark.sqlflow.buckets", "1")
    yield
    spark.conf.unset("spark.sqlflow.buckets")


def test_bigint_keys_beyond_2_53_stay_apart_next_to_a_null_key(spark, one_bucket):
    # pandas sees a BIGINT column with NULLs as float64: 2^53 and 2^53 + 1 would become one key
    spark.sql(f"""CREATE OR REPLACE TEMP VIEW big_keys AS SELECT * FROM VALUES
        ({BIG}L, {BIG + 1}L, TIMESTAMP'2024-01-01 00:00:10'),
        ({BIG + 1}L, {BIG + 3}L, TIMESTAMP'2024-01-01 00:00:20'),
        (NULL, NULL, TIMESTAMP'2024-01-01 00:00:30')
        AS t(k, v, ts)""")
    expected = [(None, None, None), (BIG, BIG + 1, BIG + 1), (BIG + 1, BIG + 3, BIG + 3)]
    for trigger in ("", "TRIGGER REPEAT(COUNT 1)"):  # the vectorised path and the per-key loop
        df = sqlflow.sql(spark, f"SELECT k, MAX(v) AS m, first(v) AS f FROM big_keys GROUP BY k "
                                f"WINDOW GLOBAL ON ts {trigger}", path="engine")
        got = sorted((tuple(r) for r in df.select("k", "m", "f").collect()), key=lambda r: (r[0] is not None, r))
        assert got == expected, trigger
        assert dict(df.dtypes)["k"] == "bigint"


def test_dropped_rows_echo_bigint_arguments_exactly(spark, one_bucket):
    spark.sql(f"""CREATE OR REPLACE TEMP VIEW big_null_time AS SELECT * FROM VALUES
        ('a', {BIG + 1}L, CAST(NULL AS TIMESTAMP)),
        ('a', NULL, TIMESTAMP'2024-01-01 00:00:20')
        AS t(k, v, ts)""")
    df = sqlflow.sql(spark, "SELECT k, SUM(v) AS s FROM big_null_time GROUP BY k WINDOW FIXED(SIZE 1m) ON ts",
                     path="engine")
    rows = sqlflow.dropped(df).select("k", "v", "reason").collect()
    assert [tuple(r) for r in rows] == [("a", BIG + 1, "null event time")]


def test_bigint_keys_and_sums_beyond_2_53_stay_exact_without_nulls(spark, one_bucket):
    """No NULL anywhere: the pane columns are plain int64 in pandas, and the bucket's output puts
    them next to its metrics row, which has no key (stacked as float64 they would round)."""
    spark.sql(f"""CREATE OR REPLACE TEMP VIEW big_plain AS SELECT * FROM VALUES
        ({BIG + 1}L, {BIG + 1}L, TIMESTAMP'2024-01-01 00:00:10'),
        ({BIG + 3}L, {BIG + 3}L, TIMESTAMP'2024-01-01 00:00:20')
        AS t(k, v, ts)""")
    df = sqlflow.sql(spark, "SELECT k, SUM(v) AS s, MAX(v) AS m FROM big_plain GROUP BY k "
                            "WINDOW SESSIONS(GAP 1m) ON ts", path="engine")
    got = sorted(tuple(r) for r in df.select("k", "s", "m").collect())
    assert got == [(BIG + 1, BIG + 1, BIG + 1), (BIG + 3, BIG + 3, BIG + 3)]


def test_bigint_keys_beyond_2_53_stay_apart_next_to_a_decimal(spark, one_bucket):
    """Every type crosses to the bucket jobs as Arrow (sqlflow/udfs/bucket.py), a DECIMAL too:
    BIGINTs with NULLs stay exact next to it (PySpark's pandas conversion made them float64)."""
    spark.sql(f"""CREATE OR REPLACE TEMP VIEW big_decimal AS SELECT * FROM VALUES
        ({BIG}L, {BIG + 1}L, 1.5BD, TIMESTAMP'2024-01-01 00:00:10'),
        ({BIG + 1}L, {BIG + 3}L, 2.25BD, TIMESTAMP'2024-01-01 00:00:20'),
        (NULL, NULL, NULL, TIMESTAMP'2024-01-01 00:00:30')
        AS t(k, v, d, ts)""")
    df = sqlflow.sql(spark, "SELECT k, MAX(v) AS m, SUM(d) AS s FROM big_decimal GROUP BY k "
                            "WINDOW GLOBAL ON ts", path="engine")
    assert "MapInArrow" in df._jdf.queryExecution().executedPlan().toString()
    got = sorted((tuple(r) for r in df.select("k", "m", "s").collect()), key=lambda r: (r[0] is not None, r))
    assert [(k, m, None if s is None else str(s)) for k, m, s in got] == [
        (None, None, None), (BIG, BIG + 1, "1.50"), (BIG + 1, BIG + 3, "2.25")]


def test_arrow_path_with_large_var_types_and_null_keys(spark, one_bucket):
    """The Arrow path builds its output schema itself (string keys as large_string when Spark's
    large var types are on, as Spark declares them); NULL keys and NULL sums stay NULL."""
    spark.sql("""CREATE OR REPLACE TEMP VIEW large_strings AS SELECT * FROM VALUES
        ('a', 1L, TIMESTAMP'2024-01-01 00:00:10'), ('a', 2L, TIMESTAMP'2024-01-01 00:00:20'),
        (NULL, 5L, TIMESTAMP'2024-01-01 00:00:30'), ('b', NULL, TIMESTAMP'2024-01-01 00:00:40')
        AS t(k, v, ts)""")
    spark.conf.set("spark.sql.execution.arrow.useLargeVarTypes", "true")
    try:
        df = sqlflow.sql(spark, "SELECT k, SUM(v) AS s, COUNT(*) AS n FROM large_strings GROUP BY k "
                                "WINDOW FIXED(SIZE 1m) ON ts TRIGGER REPEAT(COUNT 1)", path="engine")
        assert "MapInArrow" in df._jdf.queryExecution().executedPlan().toString()
        got = sorted((tuple(r) for r in df.select("k", "s", "n", "pane_index").collect()),
                     key=lambda r: (r[0] is not None, r))
    finally:
        spark.conf.unset("spark.sql.execution.arrow.useLargeVarTypes")
    assert got == [(None, 5, 1, 0), ("a", 1, 1, 0), ("a", 3, 2, 1), ("b", None, 1, 0)]
