"""Reading a micro-batch's files directly (sqlflow/spark/streaming/direct_read.py): where pyarrow
reads them, the driver-local step's rows equal Spark's own read of the same files through the same
projection, hash buckets included; where pyarrow's reading could differ, it declines and Spark reads
the batch. On random CSV files (integers, empty fields, and what Spark's parser makes NULL: spaces,
hexadecimal, signs, overflows, wrong field counts), on random parquet files, and on a stream."""
from __future__ import annotations

import re

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema

from sqlflow import ast
from sqlflow.columns import BUCKET, DATA, EVENT_TIME, KIND
from sqlflow.spark import streaming as S
from sqlflow.spark.conf import STREAMING_DIRECT_READ
from sqlflow.spark.streaming import owned
from sqlflow.spark.streaming.direct_read import DirectRead
from sqlflow.time import MINUTE, SECOND

from .harness import collect_panes
from .test_equivalence import plan_of
from tests.conftest import examples

D = ast.Duration
BUCKETS = 3
CSV_SCHEMA = "k bigint, ms bigint, v int"
CSV_PROJECTION = ("k", f"unix_micros(timestamp_millis(ms)) AS {EVENT_TIME}", "CAST(v AS BIGINT) AS v")
#: fields Spark's CSV parser reads as integers, as NULL, or (too large for milliseconds) fails on
TOKENS = ["", "0", "7", "-3", "+5", "007", "-0", "12", "1700000000000", "9223372036854775807",
          "-9223372036854775808", "9223372036854775808", "2147483648", " 5", "5 ", "0x5", "1e3", "5.0", "x",
          '"6"', '" 6"', "\u0663", "--2", "+-1", "-"]
LINES = st.lists(st.lists(st.sampled_from(TOKENS), min_size=2, max_size=4), min_size=1, max_size=12)


def with_bucket(df):
    return (df.withColumn(BUCKET, F.pmod(F.hash(F.col("k")), F.lit(BUCKETS)).cast("int"))
            .withColumn(KIND, F.lit(DATA).cast("int")))


def planned(spark, stream, reference) -> DirectRead:
    direct = DirectRead.plan(stream, ("k",), BUCKETS, BUCKET, KIND, DATA, to_arrow_schema(reference.schema))
    assert direct is not None
    return direct


def rows_of(table: pa.Table, schema: pa.Schema) -> list[dict]:
    """`table`'s rows as `schema` types them (its column names in its order), sorted."""
    return table.cast(schema).sort_by([(c, "ascending") for c in schema.names]).to_pylist()


def spark_csv_rows(spark, path, header: bool):
    df = spark.read.schema(CSV_SCHEMA).option("header", str(header).lower()).csv(str(path))
    return with_bucket(df.selectExpr(*CSV_PROJECTION))


@settings(max_examples=examples(40))
@given(lines=LINES, header=st.booleans())
def test_a_csv_batch_reads_as_spark_reads_it_or_is_declined(spark, tmp_path_factory, lines, header):
    folder = tmp_path_factory.mktemp("csv")
    path = folder / "part-0.csv"
    body = "\n".join(",".join(fields) for fields in lines) + "\n"
    path.write_text(("k,ms,v\n" if header else "") + body, encoding="utf-8")
    reference = spark_csv_rows(spark, path, header)
    stream = (spark.readStream.schema(CSV_SCHEMA).option("header", str(header).lower()).csv(str(folder))
              .selectExpr(*CSV_PROJECTION))
    ours = planned(spark, stream, reference).rows([path.as_uri()])
    try:
        theirs = reference.toArrow()
    except Exception:  # noqa: BLE001  (Spark fails the batch: a millisecond time overflows)
        assert ours is None
        return
    clean = all(len(f) == 3 and all(re.fullmatch("-?[0-9]{1,12}", t) for t in f) for f in lines)
    if ours is None:
        assert not clean, "a file of small integers only is read directly"
        return
    assert rows_of(ours, theirs.schema) == rows_of(theirs, theirs.schema)


def test_a_csv_batch_of_plain_integers_is_read_directly(spark, tmp_path):
    path = tmp_path / "part-0.csv"
    path.write_text("1,1700000000000,3\n-2,1700000001500,\n,1700000002000,4\n9,,5\n")
    reference = spark_csv_rows(spark, path, False)
    stream = spark.readStream.schema(CSV_SCHEMA).csv(str(tmp_path)).selectExpr(*CSV_PROJECTION)
    ours = planned(spark, stream, reference).rows([path.as_uri()])
    theirs = reference.toArrow()
    assert ours is not None and ours.num_rows == 4
    assert rows_of(ours, theirs.schema) == rows_of(theirs, theirs.schema)
    direct = planned(spark, stream, reference)
    size = path.stat().st_size
    assert direct.rows([path.as_uri()], max_bytes=size) is not None
    assert direct.rows([path.as_uri()], max_bytes=size - 1) is None  # more than the driver may hold
    # what Spark's parser reads otherwise than pyarrow's: spaces, hexadecimal, a byte-order mark
    for text in ("1, 17,3\n", "0x5,1,2\n", "\ufeff1,2,3\n", "1,2,3,4\n", "1,2\n"):
        path.write_text(text, encoding="utf-8")
        assert planned(spark, stream, reference).rows([path.as_uri()]) is None, text


PARQUET_ROWS = st.lists(st.tuples(st.one_of(st.none(), st.integers(-2**63, 2**63 - 1)),
                                  st.one_of(st.none(), st.integers(-2**52, 2**52)),
                                  st.one_of(st.none(), st.integers(-2**31, 2**31 - 1))), min_size=1, max_size=20)


@settings(max_examples=examples(30))
@given(rows=PARQUET_ROWS, unit=st.sampled_from(["us", "ms"]))
def test_a_parquet_batch_reads_as_spark_reads_it(spark, tmp_path_factory, rows, unit):
    folder = tmp_path_factory.mktemp("parquet")
    path = folder / "part-0.parquet"
    k, t, v = zip(*rows)
    if unit == "ms":
        t = tuple(None if x is None else x // 1000 for x in t)
    pq.write_table(pa.table({"k": pa.array(k, pa.int64()), "ts": pa.array(t, pa.timestamp(unit, tz="UTC")),
                             "v": pa.array(v, pa.int32())}), path)
    ours, theirs = parquet_reads(spark, path, "k bigint, ts timestamp, v int",
                                 ("k", f"unix_micros(ts) AS {EVENT_TIME}", "CAST(v AS BIGINT) AS v"))
    assert ours is not None and rows_of(ours, theirs.schema) == rows_of(theirs, theirs.schema)


def parquet_reads(spark, path, schema: str, projection: tuple):
    """The one parquet file at `path` read directly (None: declined) and Spark's read of it, both
    through `projection` with their bucket and kind."""
    reference = with_bucket(spark.read.schema(schema).parquet(str(path)).selectExpr(*projection))
    stream = spark.readStream.schema(schema).parquet(str(path.parent)).selectExpr(*projection)
    return planned(spark, stream, reference).rows([path.as_uri()]), reference.toArrow()


@settings(max_examples=examples(30))
@given(keys=st.lists(st.one_of(st.none(), st.text(max_size=11)), min_size=1, max_size=20))
def test_a_parquet_batch_of_string_keys_reads_and_hashes_as_spark(spark, tmp_path_factory, keys):
    """STRING keys: their buckets are Spark's Murmur3 of their UTF-8 bytes (words, then each
    byte after them as a signed int)."""
    folder = tmp_path_factory.mktemp("parquet-strings")
    path = folder / "part-0.parquet"
    n = len(keys)
    pq.write_table(pa.table({"k": pa.array(keys, pa.string()), "ts": pa.array(range(n), pa.timestamp("us", tz="UTC")),
                             "v": pa.array(range(n), pa.int64())}), path)
    ours, theirs = parquet_reads(spark, path, "k string, ts timestamp, v bigint",
                                 ("k", f"unix_micros(ts) AS {EVENT_TIME}", "v"))
    assert ours is not None and rows_of(ours, theirs.schema) == rows_of(theirs, theirs.schema)


def test_parquet_of_another_type_or_a_local_time_is_declined(spark, tmp_path):
    schema = "k bigint, ts timestamp, v int"
    projection = ("k", f"unix_micros(ts) AS {EVENT_TIME}", "CAST(v AS BIGINT) AS v")
    path = tmp_path / "part-0.parquet"
    pq.write_table(pa.table({"k": pa.array([1], pa.int64()), "ts": pa.array([5], pa.timestamp("us", tz="UTC")),
                             "v": pa.array([2], pa.int32())}), path)
    reference = with_bucket(spark.read.schema(schema).parquet(str(path)).selectExpr(*projection))
    direct = planned(spark, spark.readStream.schema(schema).parquet(str(tmp_path)).selectExpr(*projection), reference)
    assert direct.rows([path.as_uri()]) is not None
    for table in (pa.table({"k": pa.array([1], pa.int32()), "ts": pa.array([5], pa.timestamp("us", tz="UTC")),
                            "v": pa.array([2], pa.int32())}),
                  pa.table({"k": pa.array([1], pa.int64()), "ts": pa.array([5], pa.timestamp("us")),
                            "v": pa.array([2], pa.int32())})):
        pq.write_table(table, path)
        assert direct.rows([path.as_uri()]) is None


def test_plans_read_otherwise_are_not_read_directly(spark, tmp_path):
    (tmp_path / "part-0.csv").write_text("1,2,3\n")
    schema = to_arrow_schema(spark_csv_rows(spark, tmp_path / "part-0.csv", False).schema)
    base = spark.readStream.schema(CSV_SCHEMA).csv(str(tmp_path))
    for stream in (base.where("v > 0").selectExpr(*CSV_PROJECTION),  # a filter
                   base.selectExpr("k", f"unix_micros(timestamp_millis(ms)) + 1 AS {EVENT_TIME}", "v"),  # arithmetic
                   spark.readStream.schema(CSV_SCHEMA).option("nullValue", "NA").csv(str(tmp_path))
                   .selectExpr(*CSV_PROJECTION)):  # a parsing option
        assert DirectRead.plan(stream, ("k",), BUCKETS, BUCKET, KIND, DATA, schema) is None
    strings = spark.readStream.schema("k string, ms bigint, v int").csv(str(tmp_path)).selectExpr(*CSV_PROJECTION)
    assert DirectRead.plan(strings, ("k",), BUCKETS, BUCKET, KIND, DATA, schema) is None


def test_a_stream_of_csv_files_gives_the_same_panes_read_directly(spark, tmp_path):
    """An owned stream over CSV files: the driver-local step reads every batch with data
    directly (`direct_reads`), the finishing one through Spark, and the panes are those of the
    same stream with `spark.sqlflow.streaming.directRead` false (Spark reads every batch)."""
    folder = tmp_path / "input"
    folder.mkdir()
    base = 1_700_000_000_000
    for b in range(3):
        lines = [f"{(7 * i + b) % 5},{base + b * 120_000 + i * 9_000 - 30_000},{i % 4}" for i in range(12)]
        lines[3] = f"2,{base + b * 120_000},"  # a NULL argument
        (folder / f"part-{b}.csv").write_text("\n".join(lines) + "\n")
    plan = plan_of(ast.Fixed(D(MINUTE)), ast.WatermarkEarlyLate(late=ast.Watermark()), lateness=MINUTE)
    panes = {}
    for direct in (True, False):
        source = (spark.readStream.schema(CSV_SCHEMA).option("maxFilesPerTrigger", 1).csv(str(folder))
                  .selectExpr(*CSV_PROJECTION))
        spark.conf.set(STREAMING_DIRECT_READ, str(direct).lower())
        try:
            stream = S.build_stream(source, plan, delay=30 * SECOND, finish_dir=str(tmp_path / f"finish-{direct}"))
            name = f"direct_read_{str(direct).lower()}"
            query = S.start(stream, format="memory", query_name=name, checkpoint=str(tmp_path / f"cp-{direct}"),
                            available_now=True, finish=True, executor="owned")
        finally:
            spark.conf.unset(STREAMING_DIRECT_READ)
        assert [b["direct_reads"] for b in owned.run_of(query).progress] == ([1, 1, 1, 0] if direct else [0] * 4)
        assert S.query_metrics(query)["input_rows"] == 36
        panes[direct] = collect_panes(spark, name)
    assert len(panes[True]) > 0
    cols = [c for c in panes[True].columns if c != "emit_time"]
    pd.testing.assert_frame_equal(panes[True][cols], panes[False][cols])
