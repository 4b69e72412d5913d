"""GROUP BY keys of collated strings (Spark 4 collations; docs/semantics.md, 7.1): keys compare as
Spark's GROUP BY compares them, on every window kind, and a group shows its smallest member (by
bytes); streams and collated strings inside a MAP are refused with a located error."""
from __future__ import annotations

import json
import os
import time

import pytest

import sqlflow
from sqlflow.errors import SqlflowUnsupportedError

# 'a' and 'A' are one key in UTF8_LCASE, 'b' and 'B' another; 'B' (0x42) is smaller than 'b'
ROWS = [("a", "00:00:10", 1), ("A", "00:00:20", 2), ("b", "00:00:30", 4), ("B", "00:01:10", 8), (None, "00:00:40", 16)]
LCASE = "STRING COLLATE UTF8_LCASE"


def _view(spark, name, key_sql="CAST(k AS STRING) COLLATE UTF8_LCASE"):
    values = ", ".join(f"({'NULL' if k is None else repr(k)}, '2024-01-01 {t}', {v})" for k, t, v in ROWS)
    spark.sql(f"CREATE OR REPLACE TEMP VIEW {name} AS SELECT {key_sql} AS k, CAST(t AS TIMESTAMP) AS ts, v, "
              f"CAST(t AS TIMESTAMP) AS at FROM VALUES {values} AS x(k, t, v)")


def _rows(df, key=lambda k: k):
    return sorted(((key(r.k), r.s, r.window_start.strftime("%H:%M:%S"), r.window_end.strftime("%H:%M:%S"))
                   for r in df.collect()), key=repr)


@pytest.fixture(scope="module")
def lcase(spark):
    _view(spark, "lcase")
    return "lcase"


WINDOWS = {
    "FIXED(SIZE 1m)": ("window(ts, '1 minute')", [
        ("A", 3, "00:00:00", "00:01:00"), ("B", 4, "00:00:00", "00:01:00"), ("B", 8, "00:01:00", "00:02:00"),
        (None, 16, "00:00:00", "00:01:00")]),
    "SLIDING(SIZE 1m, PERIOD 30s)": ("window(ts, '1 minute', '30 seconds')", [
        ("A", 3, "23:59:30", "00:00:30"), ("A", 3, "00:00:00", "00:01:00"), ("B", 4, "00:00:00", "00:01:00"),
        ("B", 12, "00:00:30", "00:01:30"), ("B", 8, "00:01:00", "00:02:00"), (None, 16, "00:00:00", "00:01:00"),
        (None, 16, "00:00:30", "00:01:30")]),
    # b (00:30) and B (01:10) are one key: one session; Spark's session_window would keep them apart
    "SESSIONS(GAP 1m)": ("session_window(ts, '59999999 microseconds')", [
        ("A", 3, "00:00:10", "00:01:20"), ("B", 12, "00:00:30", "00:02:10"), (None, 16, "00:00:40", "00:01:40")]),
}


@pytest.mark.parametrize("window", list(WINDOWS))
@pytest.mark.parametrize("aggregate", ["SUM(v)", "CAST(AVG(v) * COUNT(v) AS BIGINT)"],
                         ids=["combining", "not-combining"])
def test_collated_keys_group_by_collation_showing_the_smallest_member(spark, lcase, window, aggregate):
    spark_window, expected = WINDOWS[window]
    query = f"SELECT k, {aggregate} AS s FROM lcase GROUP BY k WINDOW {window} ON ts"
    df = sqlflow.sql(spark, query)
    assert _rows(df) == sorted(expected, key=repr)
    assert dict(df.dtypes)["k"] == "string collate UTF8_LCASE"
    assert "path: engine (no native rewrite: GROUP BY k: keys of collation UTF8_LCASE" in sqlflow.explain(query, spark)
    if window.startswith("SESSIONS"):
        return
    # Spark's own GROUP BY: the same groups, each showing any of its members
    by_hand = spark.sql(f"SELECT k, SUM(v) AS s, w.start AS window_start, w.end AS window_end FROM "
                        f"(SELECT *, {spark_window} AS w FROM lcase) GROUP BY k, w")
    assert _rows(by_hand, key=lambda k: k and k.upper()) == sorted(expected, key=repr)


def test_the_smallest_member_by_hand_gives_the_same_sessions(spark, lcase):
    # written by hand with each key replaced by its group's smallest member first
    by_hand = spark.sql(f"""SELECT k, SUM(v) AS s, w.start AS window_start, w.end + INTERVAL '1' MICROSECOND AS window_end
        FROM (SELECT CAST(min(CAST(k AS STRING COLLATE UTF8_BINARY)) OVER (PARTITION BY k) AS {LCASE}) AS k, v,
              session_window(ts, '59999999 microseconds') AS w FROM lcase) GROUP BY k, w""")
    assert _rows(by_hand) == sorted(WINDOWS["SESSIONS(GAP 1m)"][1], key=repr)


@pytest.mark.parametrize("window", ["FIXED(SIZE 1m)", "SESSIONS(GAP 1m)"])
def test_replayed_collated_keys_group_by_collation(spark, lcase, window):
    df = sqlflow.sql(spark, f"SELECT k, SUM(v) AS s FROM lcase WATERMARK ts DELAY OF INTERVAL 1 SECOND ARRIVAL at "
                            f"GROUP BY k WINDOW {window}")
    assert _rows(df) == sorted(WINDOWS[window][1], key=repr)


def test_the_native_path_is_refused_with_a_located_error(spark, lcase):
    with pytest.raises(SqlflowUnsupportedError) as e:
        sqlflow.sql(spark, "SELECT k, SUM(v) AS s FROM lcase GROUP BY k WINDOW FIXED(SIZE 1m) ON ts", path="native")
    text = str(e.value)
    assert "path='native' is impossible" in text and "GROUP BY k: keys of collation UTF8_LCASE" in text
    assert "line 1, column 45" in text


@pytest.mark.parametrize("key_sql, show", [
    ("CAST(k AS STRING) COLLATE UNICODE_CI", lambda k: k),
    ("array(CAST(k AS STRING) COLLATE UTF8_LCASE)", lambda k: k and k[0]),
    ("named_struct('s', CAST(k AS STRING) COLLATE UTF8_LCASE, 'n', 1)", lambda k: k and k.s),
], ids=["unicode_ci", "array", "struct"])
def test_other_collations_and_nested_collated_strings(spark, key_sql, show):
    _view(spark, "other_collation", key_sql)
    df = sqlflow.sql(spark, "SELECT k, SUM(v) AS s FROM other_collation GROUP BY k WINDOW FIXED(SIZE 1m) ON ts")
    expected = WINDOWS["FIXED(SIZE 1m)"][1]
    if "named_struct" in key_sql:  # a NULL string makes a struct, not a NULL key
        expected = [e for e in expected if e[0] is not None] + [(None, 16, "00:00:00", "00:01:00")]
    assert _rows(df, show) == sorted(expected, key=repr)


def test_a_map_of_collated_strings_is_refused_at_group_by(spark):
    _view(spark, "map_key", "map(1, CAST(k AS STRING) COLLATE UTF8_LCASE)")
    with pytest.raises(SqlflowUnsupportedError) as e:
        sqlflow.sql(spark, "SELECT k, SUM(v) AS s FROM map_key\nGROUP BY k WINDOW FIXED(SIZE 1m) ON ts")
    text = str(e.value)
    assert "GROUP BY k: a MAP holding strings of collation UTF8_LCASE" in text and "line 2, column 10" in text
    assert "CAST(k AS MAP<INT, STRING COLLATE UTF8_BINARY>)" in text


def test_min_max_of_collated_strings_run_natively(spark, lcase):
    query = "SELECT v % 2 AS k, MIN(k) AS lo, MAX(k) AS hi FROM lcase WHERE v IN (1, 8) GROUP BY v % 2 WINDOW GLOBAL ON ts"
    df = sqlflow.sql(spark, query)
    # UTF8_LCASE orders 'a' before 'B' (Spark's answer; by bytes MIN would be 'B', MAX 'a')
    assert sorted((r.k, r.lo, r.hi) for r in df.collect()) == [(0, "B", "B"), (1, "a", "a")]
    df = sqlflow.sql(spark, query.replace("v % 2", "v % 1"))
    assert [(r.k, r.lo, r.hi) for r in df.collect()] == [(0, "a", "B")]
    with pytest.raises(SqlflowUnsupportedError, match="MIN\\(k\\): the sqlflow engine compares strings by their bytes"):
        sqlflow.sql(spark, query, path="engine")
    # collated keys need the engine, which cannot compare them: a located error, not a wrong answer
    with pytest.raises(SqlflowUnsupportedError) as e:
        sqlflow.sql(spark, "SELECT v, MAX(k) AS hi FROM lcase GROUP BY v, k WINDOW GLOBAL ON ts")
    text = str(e.value)
    assert "can run neither natively (GROUP BY k: keys of collation UTF8_LCASE" in text
    assert "nor on the engine (MAX(k): the sqlflow engine compares strings by their bytes" in text


def test_a_stream_refuses_collated_keys_at_sql_time(spark, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    rows = [{"k": "a", "v": 1, "ts": "2024-01-01T00:00:01Z"}, {"k": "A", "v": 2, "ts": "2024-01-01T00:00:02Z"}]
    (folder / "part-0.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    os.utime(folder / "part-0.json", (time.time() - 100, time.time() - 100))
    stream = spark.readStream.schema("k STRING, v BIGINT, ts TIMESTAMP").json(str(folder))
    stream.selectExpr("k COLLATE UTF8_LCASE AS k", "v", "ts").createOrReplaceTempView("lcase_stream")
    with pytest.raises(SqlflowUnsupportedError) as e:
        sqlflow.sql(spark, "SELECT k, SUM(v) AS s FROM lcase_stream WATERMARK ts DELAY OF INTERVAL 1 SECOND "
                           "GROUP BY k WINDOW FIXED(SIZE 1m)")
    text = str(e.value)
    assert "GROUP BY k: keys of collation UTF8_LCASE compare by that collation" in text
    assert "CAST(k AS STRING COLLATE UTF8_BINARY) or lower(k)" in text and "line 1, column 90" in text
    with pytest.raises(SqlflowUnsupportedError, match="MAX\\(k\\): the sqlflow engine compares strings"):
        sqlflow.sql(spark, "SELECT v, MAX(k) AS s FROM lcase_stream WATERMARK ts DELAY OF INTERVAL 1 SECOND "
                           "GROUP BY v WINDOW FIXED(SIZE 1m)")
