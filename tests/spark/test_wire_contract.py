"""The driver/executor contract comes from sqlflow/columns.py: both executors' outputs (the bounded
bucket job, the streaming operator) and the pane schemas (bounded engine and native paths,
streaming) have exactly the names, types and row kinds written there."""
import pandas as pd
import pytest

import sqlflow
from sqlflow import ast
from sqlflow import columns as C
from sqlflow.engine.aggregates import Aggregate, overflow_column
from sqlflow.engine.plan import EnginePlan
from sqlflow.spark.report import ATTRIBUTE
from sqlflow.spark.select_types import spark_type
from sqlflow.spark.streaming.schema import pane_schema
from sqlflow.spark.streaming.stateful import operator_schema
from sqlflow.udfs.bucket import BucketJob, arrow_frame
from sqlflow.udfs.operator_frames import complete
from sqlflow.udfs.streaming import BucketStep, Meta, StreamSpec

MIN = 60_000_000
RETRACTING = ast.Windowing(ast.WindowClause(ast.Sessions(ast.Duration(MIN))),
                           trigger=ast.Repeat(ast.Count(1)),
                           emit=ast.Emit(ast.AccumulationMode.ACCUMULATING_AND_RETRACTING))
PLAN = EnginePlan(RETRACTING, (Aggregate("sum", "v", "total"),), keys=("k",))


def rows() -> pd.DataFrame:
    # two rows merge into one session (a retraction), one row has no event time (dropped)
    return pd.DataFrame({"k": ["a", "a", "b"], "v": [1, 2, 5], C.EVENT_TIME: pd.array([0, 30_000_000, None], "Int64")})


def kinds(frame: pd.DataFrame) -> set:
    return set(frame[C.KIND].tolist())


#: Arrow types of the wire columns' DDL types (times travel as int64 microseconds)
ARROW = {"int": "int32", "bigint": "int64", "string": "string", "boolean": "bool_"}


def test_the_bucket_job_writes_the_wire_columns_and_row_kinds():
    import pyarrow as pa

    columns = C.BUCKET_OUTPUT_COLUMNS + ("k", "total", "v")
    schema = pa.schema([(c, getattr(pa, ARROW[C.OUTPUT_TYPES[c]])()) for c in C.BUCKET_OUTPUT_COLUMNS]
                       + [("k", pa.string()), ("total", pa.int64()), ("v", pa.int64())])
    job = BucketJob(PLAN, columns=columns, keys=("k",), args=("v",))
    frame = rows()
    table = pa.table({"k": frame["k"].tolist(), "v": pa.array(frame["v"].tolist(), pa.int64()),
                      C.EVENT_TIME: pa.array([0, 30_000_000, None], pa.int64())})
    out = job.table(arrow_frame(table), schema).to_pandas()
    assert tuple(out.columns) == columns
    assert kinds(out) == {C.PANE, C.DROPPED, C.METRICS}
    panes = out[out[C.KIND] == C.PANE]
    # the session [0, 1m) grows to [0, 1m30s): its first pane is retracted
    assert sorted(panes[["total", C.WINDOW_START, C.WINDOW_END, C.IS_RETRACTION]].values.tolist()) == [
        [1, 0, MIN, False], [1, 0, MIN, True], [3, 0, MIN + 30_000_000, False]]
    dropped = out[out[C.KIND] == C.DROPPED]
    assert dropped[["k", C.REASON]].values.tolist() == [["b", C.NULL_EVENT_TIME]]
    assert out.loc[out[C.KIND] == C.METRICS, C.ROWS].tolist() == [3]


def test_the_streaming_operator_writes_the_wire_columns_and_row_kinds():
    spec = StreamSpec(plan=PLAN, input_columns=("k", "v", C.EVENT_TIME), keep_dropped=True)
    assert spec.output_columns() == [
        C.KIND, "k", "total", overflow_column("total"), *C.pane_columns(True), C.EVENT_TIME, C.REASON,
        *(C.metric_column(m) for m in C.STREAM_COUNTERS + C.STREAM_GAUGES + C.STREAM_LIVE)]
    frames, _ = BucketStep(spec).run(Meta(), {}, rows(), p=MIN, wm_new=3 * MIN, finish=True)
    out = pd.concat([complete(f, spec.output_columns()) for f in frames], ignore_index=True)
    assert kinds(out) == {C.PANE, C.DROPPED, C.METRICS}
    panes = out[out[C.KIND] == C.PANE]
    # both rows arrive at one instant: one pane of the session [0, 1m30s)
    assert panes[["total", C.WINDOW_START, C.WINDOW_END, C.IS_RETRACTION, C.EMIT_TIME]].values.tolist() == [
        [3, 0, MIN + 30_000_000, False, MIN]]
    dropped = out[out[C.KIND] == C.DROPPED]
    assert dropped[["k", C.REASON, C.EMIT_TIME]].values.tolist() == [["b", C.NULL_EVENT_TIME, MIN]]
    assert out.loc[out[C.KIND] == C.METRICS, C.metric_column("engine_rows")].tolist() == [3]


def test_every_wire_column_has_one_type():
    from pyspark.sql import types as T

    spec = StreamSpec(plan=PLAN, input_columns=("k", "v", C.EVENT_TIME), report=True)
    schema = operator_schema(spec, pane_schema(T.StructType([T.StructField("k", T.StringType()),
                                                             T.StructField("v", T.LongType())]), PLAN))
    types = {**C.OUTPUT_TYPES, **C.REPORT_TYPES}
    for field in schema.fields:
        if field.name in types:
            assert field.dataType == spark_type(types[field.name]), field.name
        elif field.name.startswith(C.METRIC_PREFIX):
            assert field.dataType == T.LongType()
    assert [f.name for f in schema.fields][-len(C.REPORT_COLUMNS):] == list(C.REPORT_COLUMNS)
    assert not set(C.BUCKET_OUTPUT_COLUMNS) - set(C.OUTPUT_TYPES)
    kinds = (C.PANE, C.DROPPED, C.METRICS, C.DATA, C.HEARTBEAT, C.FINISH, C.PACKED, C.REPORT, C.STATE)
    assert len(set(kinds)) == len(kinds) and set(C.KIND_NAMES) == set(kinds)  # a code never means two things


def expected_pane_fields(retracting: bool) -> list[tuple]:
    return [(c, spark_type(C.PANE_TYPES[c])) for c in C.pane_columns(retracting)]


@pytest.mark.parametrize("mode", ["", "EMIT ACCUMULATING AND RETRACTING"])
def test_streaming_pane_schema(mode):
    from pyspark.sql import types as T

    windowing = ast.Windowing(ast.WindowClause(ast.Fixed(ast.Duration(MIN))),
                              emit=ast.Emit(ast.AccumulationMode.ACCUMULATING_AND_RETRACTING if mode
                                            else ast.AccumulationMode.DISCARDING))
    plan = EnginePlan(windowing, (Aggregate("count_star", None, "n"),), keys=("k",))
    schema = pane_schema(T.StructType([T.StructField("k", T.StringType())]), plan)
    panes = [(f.name, f.dataType) for f in schema.fields[2:]]
    assert panes == expected_pane_fields(bool(mode))
    assert {f.name for f in schema.fields if f.nullable} == {"k", "n"} | C.PANE_NULLABLE


@pytest.mark.parametrize("path", ["native", "engine"])
@pytest.mark.parametrize("mode", ["", "EMIT ACCUMULATING AND RETRACTING"])
def test_bounded_pane_schema(spark, path, mode):
    spark.createDataFrame([("a", 1, 0)], "k string, v bigint, s bigint") \
        .selectExpr("k", "v", "timestamp_seconds(s) AS ts").createOrReplaceTempView("wire_contract")
    df = sqlflow.sql(spark, f"SELECT k, SUM(v) AS total FROM wire_contract GROUP BY k WINDOW FIXED(SIZE 1m) ON ts {mode}",
                     path=path)
    assert [(f.name, f.dataType) for f in df.schema.fields[2:]] == expected_pane_fields(bool(mode))
    if path == "engine":
        output = getattr(df, ATTRIBUTE).stages[0].output.schema
        wire = [(f.name, f.dataType) for f in output.fields[:len(C.BUCKET_OUTPUT_COLUMNS)]]
        assert wire == [(c, spark_type(C.OUTPUT_TYPES[c])) for c in C.BUCKET_OUTPUT_COLUMNS]
        kinds = {r[0] for r in getattr(df, ATTRIBUTE).stages[0].output.select(C.KIND).distinct().collect()}
        assert kinds == {C.PANE, C.METRICS}
