"""Malformed input records follow Spark's file-source modes and are counted in the progress."""
import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import functions as F

from sqlflow import ast
from sqlflow.engine.aggregates import Aggregate
from sqlflow.columns import EVENT_TIME
from sqlflow.engine.plan import EnginePlan
from sqlflow.spark import streaming as S
from sqlflow.time import MINUTE

LINES = [
    '{"k": "a", "ts": "2024-01-01T00:00:10Z", "v": 1}',
    '{"k": "a", "ts": "2024-01-01T00:00:20Z", "v": 2',   # bad JSON
    '{"k": "b", "ts": "not a time", "v": 4}',            # unparsable timestamp
    '{"k": "b", "ts": "2024-01-01T00:00:30Z", "v": 8}',
]
SCHEMA = "k string, ts timestamp, v long"


def plan(trigger=None):
    windowing = ast.Windowing(ast.WindowClause(ast.Fixed(ast.Duration(MINUTE))), trigger)
    return EnginePlan(windowing, (Aggregate("sum", "v", "total"),), keys=("k",))


def run(spark, tmp_path, mode, name, trigger=None):
    src_dir = tmp_path / "in"
    src_dir.mkdir()
    (src_dir / "part-0.json").write_text("\n".join(LINES) + "\n")
    events = S.read_stream(spark, str(src_dir), format="json", schema=SCHEMA, mode=mode)
    engine_input = events.withColumn(EVENT_TIME, F.unix_micros("ts"))
    stream = S.build_stream(engine_input, plan(trigger), delay=0, native=False, finish_dir=str(tmp_path / "finish"))
    query = S.start(stream, format="memory", query_name=name, available_now=True, finish=True)
    panes = sorted((r.k, r.total) for r in spark.table(name).collect())
    return panes, S.query_metrics(query)


def test_permissive_keeps_malformed_records_with_null_fields(spark, tmp_path):
    panes, metrics = run(spark, tmp_path, "PERMISSIVE", "permissive")
    assert panes == [("a", 1), ("b", 8)]
    assert metrics["malformed_records"] == 2
    # both malformed records reach the engine with a NULL event time: excluded and counted
    assert metrics["dropped_null_event_time"] == 2
    assert metrics["input_rows"] == 4


def test_permissive_with_a_processing_time_trigger(spark, tmp_path):
    # the heartbeat branch reads the same source: it must not read only the
    # corrupt-record column, which Spark refuses (UNSUPPORTED_FEATURE.QUERY_ONLY_CORRUPT_RECORD_COLUMN)
    panes, metrics = run(spark, tmp_path, "PERMISSIVE", "permissive_period",
                         trigger=ast.WatermarkEarlyLate(early=ast.Period(ast.Duration(MINUTE))))
    assert panes == [("a", 1), ("b", 8)]
    assert metrics["malformed_records"] == 2


def test_dropmalformed_drops_and_counts(spark, tmp_path):
    panes, metrics = run(spark, tmp_path, "DROPMALFORMED", "dropmalformed")
    assert panes == [("a", 1), ("b", 8)]
    assert metrics["malformed_records"] == 2
    assert metrics["input_rows"] == 2
    assert metrics["dropped_null_event_time"] == 0


def test_failfast_fails_the_query(spark, tmp_path):
    with pytest.raises(StreamingQueryException, match="FAILED_READ_FILE"):
        run(spark, tmp_path, "FAILFAST", "failfast")
