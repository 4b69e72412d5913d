"""Differences found between the engine path and Spark, one regression test each: GROUP BY an
ARRAY or STRUCT key, FLOAT/DOUBLE keys, DECIMAL(38,18) near 1E+20, STDDEV of two 1.0E308, and
BIGINT SUM overflow under `spark.sql.ansi.enabled` on bounded, replayed and streaming paths, each
against Spark's own answer (docs/semantics.md, 7.1)."""
from __future__ import annotations

import json
import math
import os
import time
from decimal import Decimal
from fractions import Fraction as F

import pytest
from pyspark.errors import PySparkException

import sqlflow
from sqlflow.spark import streaming as S

T = "TIMESTAMP'2024-01-01 00:00:01'"
I64_MAX = 2**63 - 1
NEAR = Decimal("99999999999999999999.999999999999999999")


@pytest.fixture
def ansi(spark):
    """Set spark.sql.ansi.enabled for one test (`ansi(False)`), back to Spark 4's default after."""
    def set_mode(on: bool):
        spark.conf.set("spark.sql.ansi.enabled", "true" if on else "false")
    yield set_mode
    spark.conf.set("spark.sql.ansi.enabled", "true")


def view(spark, name, rows, columns):
    spark.sql(f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT * FROM VALUES {', '.join(rows)} AS t({columns})")


def rows_of(df, columns):
    return sorted((tuple(r) for r in df.select(*columns).collect()), key=repr)


def both_paths(spark, query):
    return [sqlflow.sql(spark, query, path=p) for p in ("engine", "native")]


# ------------------------------------------------------------------------------------- keys


@pytest.mark.parametrize("window, spark_window", [
    ("FIXED(SIZE 1m)", "window(ts, '1 minute')"),
    ("SESSIONS(GAP 1m)", "session_window(ts, '59999999 microseconds')"),
])
@pytest.mark.parametrize("key", ["array", "struct", "map"])
def test_array_struct_and_map_keys_group_as_in_spark(spark, key, window, spark_window):
    keys = {"array": ["array(1, 2)", "array(1, 2)", "array(3)", "CAST(NULL AS ARRAY<INT>)", "array(1, NULL)"],
            "struct": ["named_struct('a', 1, 'b', 'x')", "named_struct('a', 1, 'b', 'x')",
                       "named_struct('a', 2, 'b', CAST(NULL AS STRING))", "CAST(NULL AS STRUCT<a: INT, b: STRING>)",
                       "named_struct('a', CAST(NULL AS INT), 'b', 'x')"],
            "map": ["map(1, 2, 3, 4)", "map(3, 4, 1, 2)", "map(1, 2)", "CAST(NULL AS MAP<INT, INT>)", "map(1, 3)"]}[key]
    view(spark, "keyed", [f"({k}, {T}, {i})" for i, k in enumerate(keys)], "k, ts, v")
    expected = rows_of(spark.sql(f"SELECT k, SUM(v) AS s, COUNT(*) AS n FROM keyed GROUP BY k, {spark_window}"),
                       ["k", "s", "n"])
    assert len(expected) == 4  # the first two keys are one group
    got = sqlflow.sql(spark, f"SELECT k, SUM(v) AS s, COUNT(*) AS n FROM keyed GROUP BY k WINDOW {window} ON ts",
                      path="engine")
    assert rows_of(got, ["k", "s", "n"]) == expected
    assert dict(got.dtypes)["k"] == dict(spark.table("keyed").dtypes)["k"]


@pytest.mark.parametrize("key", ["struct", "double"])
def test_replayed_sessions_group_keys_as_spark(spark, key):
    # a replay's rows are combined per key before the engine: by Spark's equality of keys too
    keys = {"struct": ["named_struct('a', 1)", "named_struct('a', 1)", "CAST(NULL AS STRUCT<a: INT>)"],
            "double": ["CAST('NaN' AS DOUBLE)", "CAST('-NaN' AS DOUBLE)", "CAST(NULL AS DOUBLE)"]}[key]
    rows = [f"({k}, TIMESTAMP'2024-01-01 00:00:0{i}', {i + 1}, TIMESTAMP'2024-01-01 00:00:0{i}')"
            for i, k in enumerate(keys)]
    view(spark, "replayed_keys", rows, "k, ts, v, at")
    df = sqlflow.sql(spark, "SELECT k, SUM(v) AS s, COUNT(*) AS n FROM replayed_keys WATERMARK ts DELAY OF "
                            "INTERVAL 1 SECOND ARRIVAL at GROUP BY k WINDOW SESSIONS(GAP 1m)", path="engine")
    assert sorted((r.k is None, r.s, r.n) for r in df.collect()) == [(False, 3, 2), (True, 3, 1)]


@pytest.mark.parametrize("dtype", ["FLOAT", "DOUBLE"])
def test_float_keys_group_as_in_spark(spark, dtype):
    # Spark normalises -0.0 to 0.0 and makes every NaN one NaN: four groups, not five or three
    values = ["0.0", "-0.0", "'NaN'", "'-NaN'", "1.0", "NULL"]
    view(spark, "float_keys", [f"(CAST({v} AS {dtype}), {T}, {i})" for i, v in enumerate(values)], "k, ts, v")
    for df in both_paths(spark, "SELECT k, SUM(v) AS s FROM float_keys GROUP BY k WINDOW FIXED(SIZE 1m) ON ts"):
        got = {("NaN" if r.k is not None and math.isnan(r.k) else r.k): r.s for r in df.collect()}
        assert got == {0.0: 1, "NaN": 5, 1.0: 4, None: 5}
        assert dict(df.dtypes)["k"] == dtype.lower()


def test_a_nan_key_is_not_a_null_key(spark):
    view(spark, "nan_null", [f"(CAST('NaN' AS DOUBLE), {T}, 1)", f"(CAST(NULL AS DOUBLE), {T}, 2)"], "k, ts, v")
    df = sqlflow.sql(spark, "SELECT k, SUM(v) AS s FROM nan_null GROUP BY k WINDOW GLOBAL ON ts", path="engine")
    got = sorted((r.k is None, r.s) for r in df.collect())
    assert got == [(False, 1), (True, 2)]


# ------------------------------------------------------------------------------------- values


def test_decimals_near_1e20_keep_sparks_precision_and_overflow(spark, ansi):
    view(spark, "near", [f"('a', {T}, CAST('{NEAR}' AS DECIMAL(38,18)))", f"('a', {T}, CAST(1 AS DECIMAL(38,18)))",
                         f"('b', {T}, CAST('{NEAR}' AS DECIMAL(38,18)))"], "k, ts, v")
    query = "SELECT k, MAX(v) AS mx, LAST(v) AS l, MIN(v) AS mn FROM near GROUP BY k WINDOW FIXED(SIZE 1m) ON ts"
    for df in both_paths(spark, query):
        assert rows_of(df, ["k", "mx", "mn"]) == [("a", NEAR, Decimal(1)), ("b", NEAR, NEAR)]
        last = {r.k: r.l for r in df.collect()}  # a's two rows have one event time: either is last
        assert last["b"] == NEAR and last["a"] in (NEAR, Decimal(1))
        assert [t for c, t in df.dtypes if c in ("mx", "l", "mn")] == ["decimal(38,18)"] * 3
    # SUM and AVG of 'a' overflow DECIMAL(38,18) and DECIMAL(38,22): Spark fails in ANSI mode, NULL otherwise
    query = "SELECT k, SUM(v) AS s, AVG(v) AS m FROM near GROUP BY k WINDOW FIXED(SIZE 1m) ON ts"
    spark_query = "SELECT k, SUM(v) AS s, AVG(v) AS m FROM near GROUP BY k, window(ts, '1 minute')"
    for on in (True, False):
        ansi(on)
        if on:
            with pytest.raises(PySparkException) as expected:
                spark.sql(spark_query).collect()
            for df in both_paths(spark, query):
                with pytest.raises(PySparkException) as got:
                    df.collect()
                assert got.value.getSqlState() == expected.value.getSqlState() == "22003"
        else:
            expected = rows_of(spark.sql(spark_query), ["k", "s", "m"])
            # AVG is a DECIMAL(38,22): 16 digits before the point, so even b's average overflows
            assert expected == [("a", None, None), ("b", NEAR, None)]
            for df in both_paths(spark, query):
                assert rows_of(df, ["k", "s", "m"]) == expected
                assert [t for c, t in df.dtypes if c in ("s", "m")] == ["decimal(38,18)", "decimal(38,22)"]


def test_avg_of_a_decimal_rounds_as_spark_does(spark):
    values = ["0.01", "0.02", "0.02", "-0.005", "12345678901234567.89"]
    view(spark, "avg_dec", [f"('a', {T}, CAST('{v}' AS DECIMAL(20,2)))" for v in values], "k, ts, v")
    expected = spark.sql("SELECT k, AVG(v) AS m, SUM(v) AS s FROM avg_dec GROUP BY k")
    for df in both_paths(spark, "SELECT k, AVG(v) AS m, SUM(v) AS s FROM avg_dec GROUP BY k WINDOW GLOBAL ON ts"):
        assert rows_of(df, ["k", "m", "s"]) == rows_of(expected, ["k", "m", "s"])
        assert df.select("m", "s").dtypes == expected.select("m", "s").dtypes


def test_stddev_of_two_1e308_is_zero(spark):
    view(spark, "huge", [f"('a', {T}, 1.0E308D)", f"('a', {T}, 1.0E308D)", f"('b', {T}, 5.0D)"], "k, ts, v")
    query = ("SELECT k, STDDEV(v) AS s, VARIANCE(v) AS var, STDDEV_POP(v) AS sp, VAR_POP(v) AS vp FROM huge "
             "GROUP BY k WINDOW FIXED(SIZE 1m) ON ts")
    expected = rows_of(spark.sql("SELECT k, STDDEV(v) AS s, VARIANCE(v) AS var, STDDEV_POP(v) AS sp, "
                                 "VAR_POP(v) AS vp FROM huge GROUP BY k"), ["k", "s", "var", "sp", "vp"])
    assert expected == [("a", 0.0, 0.0, 0.0, 0.0), ("b", None, None, 0.0, 0.0)]
    for df in both_paths(spark, query):
        assert rows_of(df, ["k", "s", "var", "sp", "vp"]) == expected


ADVERSARIAL = {  # key: DOUBLE values (None is NULL)
    "offset": [1e9 + 0.1, 1e9 + 0.2, 1e9 + 0.3, None],     # a large common offset: no cancellation
    "constant": [7.25] * 5,                                # exactly no spread
    "one": [3.0],                                          # the sample variance needs two rows
    "nulls": [None, None],                                 # no value: NULL
    "huge": [1e200, -1e200, 1e200],                        # squares past the largest DOUBLE: inf
    "apart": [1e308, -1e308, 1e308],                       # a difference past the largest DOUBLE: NaN
    "tiny": [5e-324, 5e-324, 0.0],                         # subnormals
    "inf": [math.inf, 1.0],                                # NaN, as in Spark
    "nan": [math.nan, 1.0, 2.0],
}


def _double_literal(x):
    if x is None:
        return "CAST(NULL AS DOUBLE)"
    return f"CAST('{'NaN' if math.isnan(x) else 'Infinity' if math.isinf(x) else repr(x)}' AS DOUBLE)"


def test_the_variance_family_matches_spark_on_adversarial_data(spark):
    view(spark, "adversarial", [f"('{k}', {T}, {_double_literal(x)})" for k, xs in ADVERSARIAL.items() for x in xs],
         "k, ts, v")
    items = "STDDEV(v) AS s, VARIANCE(v) AS var, STDDEV_POP(v) AS sp, VAR_POP(v) AS vp"
    columns = ["k", "s", "var", "sp", "vp"]
    expected = rows_of(spark.sql(f"SELECT k, {items} FROM adversarial GROUP BY k"), columns)
    assert dict((r[0], r[1:]) for r in expected)["constant"] == (0.0, 0.0, 0.0, 0.0)
    assert dict((r[0], r[1:]) for r in expected)["nulls"] == (None, None, None, None)
    assert dict((r[0], r[1:]) for r in expected)["huge"] == (math.inf,) * 4
    assert all(math.isnan(x) for x in dict((r[0], r[1:]) for r in expected)["apart"])
    # Spark's running update loses digits to a large common offset (7e-7 relative here), the
    # engine does not: its answer is the exact one (docs/semantics.md 7.1, exception 4)
    xs = [F(x) for x in ADVERSARIAL["offset"] if x is not None]
    m2 = sum((x - sum(xs) / len(xs)) ** 2 for x in xs)
    exact = (math.sqrt(m2 / 2), float(m2 / 2), math.sqrt(m2 / 3), float(m2 / 3))
    spark_offset = dict((r[0], r[1:]) for r in expected)["offset"]
    assert spark_offset == pytest.approx(exact, rel=1e-5) and spark_offset != pytest.approx(exact, rel=1e-9)
    query = f"SELECT k, {items} FROM adversarial GROUP BY k WINDOW FIXED(SIZE 1m) ON ts"
    for path, wanted in (("native", expected), ("engine", [(r[0], *exact) if r[0] == "offset" else r for r in expected])):
        got = rows_of(sqlflow.sql(spark, query, path=path), columns)
        assert [r[0] for r in got] == [r[0] for r in wanted]
        for g, e in zip(got, wanted):
            assert all(_same_double(x, y) for x, y in zip(g[1:], e[1:])), (path, g, e)


def _same_double(x, y):
    """Equal, both NULL or both NaN; the last bits may differ (docs/semantics.md 7.1, exception 4)."""
    if x is None or y is None:
        return x is y
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    return x == pytest.approx(y, rel=1e-9)


# ------------------------------------------------------------------------------------- BIGINT overflow


BIG_ROWS = [f"('a', TIMESTAMP'2024-01-01 00:00:0{i}', {I64_MAX}L, TIMESTAMP'2024-01-01 00:00:1{i}')" for i in (1, 2)]
BIG_ROWS.append("('b', TIMESTAMP'2024-01-01 00:00:03', 5L, TIMESTAMP'2024-01-01 00:00:13')")


@pytest.mark.parametrize("source", ["bounded", "replay"])
def test_bigint_sum_overflow_follows_ansi_mode(spark, ansi, source):
    view(spark, "big_sum", BIG_ROWS, "k, ts, v, at")
    src = "big_sum" if source == "bounded" else "big_sum WATERMARK ts DELAY OF INTERVAL 1 SECOND ARRIVAL at"
    on = "ON ts" if source == "bounded" else ""
    query = f"SELECT k, SUM(v) AS s FROM {src}\nGROUP BY k WINDOW FIXED(SIZE 1m) {on}"
    ansi(True)
    with pytest.raises(PySparkException) as expected:
        spark.sql("SELECT k, SUM(v) FROM big_sum GROUP BY k, window(ts, '1 minute')").collect()
    with pytest.raises(PySparkException) as got:
        sqlflow.sql(spark, query, path="engine").collect()
    assert got.value.getCondition() == expected.value.getCondition() == "ARITHMETIC_OVERFLOW"
    assert got.value.getSqlState() == "22003"
    # Spark's message, and the call in the user's query with its line and column
    assert str(got.value).startswith(str(expected.value).splitlines()[0])
    assert "sqlflow: SELECT: SUM(v) overflows BIGINT (line 1, column 11)" in str(got.value)
    ansi(False)
    expected = rows_of(spark.sql("SELECT k, SUM(v) AS s FROM big_sum GROUP BY k, window(ts, '1 minute')"), ["k", "s"])
    assert expected == [("a", -2), ("b", 5)]
    assert rows_of(sqlflow.sql(spark, query, path="engine"), ["k", "s"]) == expected


@pytest.mark.parametrize("on", [True, False], ids=["ansi", "non-ansi"])
def test_bigint_sum_overflow_on_a_stream(spark, ansi, tmp_path, stateful_operator, on):
    folder = tmp_path / "in"
    folder.mkdir()
    rows = [{"k": "a", "v": I64_MAX, "ts": "2024-01-01T00:00:01Z"}, {"k": "a", "v": I64_MAX, "ts": "2024-01-01T00:00:02Z"},
            {"k": "b", "v": 5, "ts": "2024-01-01T00:00:03Z"}]
    (folder / "part-0.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    os.utime(folder / "part-0.json", (time.time() - 100, time.time() - 100))
    spark.readStream.schema("k STRING, v BIGINT, ts TIMESTAMP").json(str(folder)).createOrReplaceTempView("big_stream")
    ansi(on)
    df = sqlflow.sql(spark, "SELECT k, SUM(v) AS s FROM big_stream WATERMARK ts DELAY OF INTERVAL 1 SECOND "
                            "GROUP BY k WINDOW FIXED(SIZE 1m)")
    name = f"big_stream_out_{int(on)}"
    if on:
        with pytest.raises(Exception) as failed:
            S.start(df, format="memory", query_name=name, available_now=True, finish=True)
        text = str(failed.value)
        assert "ARITHMETIC_OVERFLOW" in text and "SUM(v) overflows BIGINT" in text
        assert "PYTHON_EXCEPTION" not in text  # Spark's error, not a Python worker's traceback
    else:
        S.start(df, format="memory", query_name=name, available_now=True, finish=True)
        assert rows_of(spark.table(name), ["k", "s"]) == [("a", -2), ("b", 5)]


def test_avg_of_decimals_on_a_stream_rounds_as_spark_does(spark, tmp_path, stateful_operator):
    """The stream's engine kept AVG of a DECIMAL(10,2) to 100 digits (1/3 as 0.333...): Arrow
    refused it as the operator's DECIMAL(14,6) and the stream failed with a Python traceback.
    It is now Spark's AVG: s + 4 decimals, half up."""
    folder = tmp_path / "in"
    folder.mkdir()
    values = [("a", "1.00"), ("a", "0.00"), ("a", "0.00"), ("b", "-0.01")] + [("b", "0.00")] * 5
    rows = [{"k": k, "v": v, "ts": f"2024-01-01T00:00:0{i}Z"} for i, (k, v) in enumerate(values)]
    (folder / "part-0.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    os.utime(folder / "part-0.json", (time.time() - 100, time.time() - 100))
    spark.readStream.schema("k STRING, v STRING, ts TIMESTAMP").json(str(folder)) \
        .selectExpr("k", "CAST(v AS DECIMAL(10,2)) AS v", "ts").createOrReplaceTempView("dec_stream")
    df = sqlflow.sql(spark, "SELECT k, AVG(v) AS m FROM dec_stream WATERMARK ts DELAY OF INTERVAL 1 SECOND "
                            "GROUP BY k WINDOW FIXED(SIZE 1m)")
    S.start(df, format="memory", query_name="dec_avg_out", available_now=True, finish=True)
    got = rows_of(spark.table("dec_avg_out"), ["k", "m"])
    assert got == [("a", Decimal("0.333333")), ("b", Decimal("-0.001667"))]
    view(spark, "dec_rows", [f"('{k}', CAST('{v}' AS DECIMAL(10,2)))" for k, v in values], "k, v")
    assert got == rows_of(spark.sql("SELECT k, AVG(v) AS m FROM dec_rows GROUP BY k"), ["k", "m"])


def test_avg_of_decimals_keeps_the_digits_and_overflows_of_sparks(spark, ansi):
    """AVG of DECIMAL(p, s) is DECIMAL(p + 4, s + 4): a division in Spark SQL kept fewer decimals
    (DECIMAL(38,18) / count has 18) and overflowed its own type (DECIMAL(38,0) / count: 32
    digits before the point); sqlflow divides as Spark's Average does. Random groups of 1 to 7
    values of four types, from tiny to 38 digits, against Spark's AVG (not ANSI: an overflow is
    NULL on both). Values of the wide types are not negative: Spark's partial sums of mixed signs
    may overflow where the total does not (docs/semantics.md, 7.1, the exceptions)."""
    import random

    rng = random.Random(7)
    types = {"a": (38, 0), "b": (38, 18), "c": (38, 37), "d": (12, 3)}

    def value(p, s):
        units = rng.choices([rng.randint(0, 400), 10**p - 1, rng.randint(0, 10**p - 1), rng.randint(0, 10 ** (p // 2)),
                             5 * 10 ** (p - 1) - 1], weights=[6, 1, 1, 4, 1])[0]
        if p < 20:  # a sum of DECIMAL(p + 10, s) then never overflows, whatever the signs and order
            units = rng.choice([-1, 1]) * units
        digits = str(abs(units)).rjust(s + 1, "0")
        text = ("-" if units < 0 else "") + (f"{digits[:-s]}.{digits[-s:]}" if s else digits)
        return f"CAST('{text}' AS DECIMAL({p},{s}))"

    rows = [f"({g}, {T}, {', '.join(value(p, s) for p, s in types.values())})"
            for g in range(60) for _ in range(rng.randint(1, 7))]
    view(spark, "avg_types", rows, "k, ts, " + ", ".join(types))
    items = ", ".join(f"AVG({c}) AS m_{c}" for c in types)
    ansi(False)
    expected = spark.sql(f"SELECT k, {items} FROM avg_types GROUP BY k")
    df = sqlflow.sql(spark, f"SELECT k, {items} FROM avg_types GROUP BY k WINDOW GLOBAL ON ts", path="engine")
    columns = ["k"] + [f"m_{c}" for c in types]
    want = rows_of(expected, columns)
    assert rows_of(df, columns) == want
    assert df.select(*columns).dtypes == expected.select(*columns).dtypes
    assert sum(r[1] is None for r in want) > 5 and sum(r[1] is not None for r in want) > 5  # overflows and values
