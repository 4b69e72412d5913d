"""Spark SQL's own WATERMARK clause, STREAM(...) and parameters, as sqlflow's SQL forms rely on
them (docs/spark-internals.md, 5): where the alias goes, which sources stream, what binds."""
import datetime as dt

import pytest
from pyspark.errors import AnalysisException, ParseException

T = dt.datetime
QUERY = "SELECT k, window.start AS ws, count(*) AS n FROM {src} GROUP BY k, window(ts, '1 minute')"
WM = "WATERMARK ts DELAY OF INTERVAL 1 MINUTE"
SCHEMA = "k string, ts timestamp, v long"


@pytest.fixture(scope="module")
def sources(spark, tmp_path_factory, frame):
    """`up_bt` (a batch view), `up_st` (a streaming view) and `up_tbl` (a catalog table) over
    one parquet file: a@0, a@30, b@61, a@200 seconds."""
    folder = tmp_path_factory.mktemp("sql_watermark") / "in"
    folder.mkdir()
    data = frame([("a", 0), ("a", 30), ("b", 61), ("a", 200)])
    data.to_parquet(folder / "part-0.parquet", index=False)
    spark.createDataFrame(data).createOrReplaceTempView("up_bt")
    spark.readStream.schema(SCHEMA).parquet(str(folder)).createOrReplaceTempView("up_st")
    spark.sql(f"CREATE TABLE up_tbl (k STRING, ts TIMESTAMP, v BIGINT) USING parquet LOCATION '{folder}'")
    # pandas writes naive datetimes: without a declared schema Spark reads them as TIMESTAMP_NTZ
    spark.sql(f"CREATE TABLE up_tbl_inferred USING parquet LOCATION '{folder}'")
    yield
    spark.sql("DROP TABLE up_tbl")
    spark.sql("DROP TABLE up_tbl_inferred")


def test_watermark_on_a_batch_view_is_ignored(spark, sources):
    assert sorted(tuple(r) for r in spark.sql(QUERY.format(src=f"up_bt {WM}")).collect()) == [
        ("a", T(2024, 1, 1, 0, 0), 2), ("a", T(2024, 1, 1, 0, 3), 1), ("b", T(2024, 1, 1, 0, 1), 1)]


def test_watermark_on_a_stream_emits_the_windows_below_the_final_watermark(spark, sources, available_now):
    # the alias goes after the clause; the final watermark (200 s - 1 min) closes the first two windows
    assert available_now(spark.sql(QUERY.format(src=f"up_st {WM} AS a"))) == [
        ("a", T(2024, 1, 1, 0, 0), 2), ("b", T(2024, 1, 1, 0, 1), 1)]


@pytest.mark.parametrize("src", ["up_st AS a WATERMARK a.ts DELAY OF INTERVAL 1 MINUTE",
                                 f"up_st AS a {WM}", f"up_st a {WM}", f"(SELECT * FROM up_st) AS x {WM}"])
def test_an_alias_before_the_watermark_is_a_syntax_error(spark, sources, src):
    with pytest.raises(ParseException) as info:
        spark.sql(QUERY.format(src=src))
    assert info.value.getCondition() == "PARSE_SYNTAX_ERROR"
    assert "Syntax error at or near 'WATERMARK'" in str(info.value)


@pytest.mark.parametrize("src", [
    f"(SELECT * FROM up_st) {WM}", f"STREAM(up_tbl) {WM}", f"STREAM up_tbl {WM}", f"STREAM(up_st) {WM}",
    f"STREAM up_st {WM}", "up_st WATERMARK ts DELAY OF INTERVAL '1' MINUTE",
    "up_st WATERMARK ts DELAY OF INTERVAL 0 SECONDS",
    "up_st WATERMARK ts + INTERVAL 1 SECOND AS ets DELAY OF INTERVAL 1 MINUTE"])
def test_forms_that_read_a_stream(spark, sources, src):
    assert spark.sql(QUERY.format(src=src)).isStreaming


def test_sources_that_do_not(spark, sources):
    with pytest.raises(AnalysisException, match="up_bt is not a temp view of streaming logical plan"):
        spark.sql(QUERY.format(src=f"STREAM(up_bt) {WM}"))
    with pytest.raises(AnalysisException) as info:
        spark.sql(QUERY.format(src=f"STREAM(up_tbl_inferred) {WM}"))
    assert info.value.getCondition() == "EVENT_TIME_IS_NOT_ON_TIMESTAMP_TYPE"
    with pytest.raises(AnalysisException) as info:  # an append aggregation needs a watermark
        spark.sql(QUERY.format(src="up_st")).writeStream.outputMode("append").format("noop").start()
    assert info.value.getCondition() == "STREAMING_OUTPUT_MODE.UNSUPPORTED_OPERATION"


def test_parameters(spark, sources):
    def one(sql, args):
        return [tuple(r) for r in spark.sql(sql, args=args).collect()]

    assert one("SELECT k, v FROM up_bt WHERE v > :x ORDER BY v", {"x": 1}) == [("b", 2), ("a", 3)]
    assert one("SELECT k, v FROM up_bt WHERE v > ? ORDER BY v", [1]) == [("b", 2), ("a", 3)]
    assert one("SELECT count(*) FROM up_bt GROUP BY window(ts, :w) ORDER BY 1", {"w": "1 minute"}) == [(1,), (1,), (2,)]
    assert one("SELECT ts + INTERVAL :n MINUTE FROM up_bt WHERE v = 0", {"n": 5}) == [(T(2024, 1, 1, 0, 5),)]
    assert one("SELECT ts + :d FROM up_bt WHERE v = 0", {"d": dt.timedelta(minutes=5)}) == [(T(2024, 1, 1, 0, 5),)]
    assert one("SELECT count(*) FROM IDENTIFIER(:tbl)", {"tbl": "up_bt"}) == [(4,)]
    assert spark.sql(QUERY.format(src="up_st WATERMARK ts DELAY OF INTERVAL :d MINUTES"), args={"d": 1}).isStreaming
    with pytest.raises(ParseException, match="missing 'INTERVAL'"):
        spark.sql(QUERY.format(src="up_st WATERMARK ts DELAY OF :d"), args={"d": "INTERVAL 1 MINUTE"})


def test_streaming_sessions_merge_rows_exactly_one_gap_apart(spark, stream_files, frame, available_now):
    stream_files.write(frame([("x", 0), ("x", 300), ("y", 0), ("y", 299.999999)]))
    stream_files.write(frame([("z", 3600)]))  # moves the watermark past both sessions
    spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(stream_files.path)) \
        .createOrReplaceTempView("up_sessions")
    assert available_now(spark.sql(
        "SELECT k, session_window.start, session_window.end, count(*) FROM up_sessions "
        "WATERMARK ts DELAY OF INTERVAL 0 SECONDS GROUP BY k, session_window(ts, '5 minutes')")) == [
        ("x", T(2024, 1, 1, 0, 0), T(2024, 1, 1, 0, 10), 2),
        ("y", T(2024, 1, 1, 0, 0), T(2024, 1, 1, 0, 9, 59, 999999), 2)]
