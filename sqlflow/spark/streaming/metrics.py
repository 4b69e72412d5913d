"""What a pane stream counts, and how to read it back from a query's progress.

The operators count with `observe()` (Spark puts the values in each micro-batch's
`observedMetrics`): input rows, panes, retractions, rows dropped by reason; file sources count
malformed records (`sources.read_stream`). Spark's own watermark drops show in `stateOperators`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ...columns import EVENT_TIME, STREAM_GAUGES, STREAM_LIVE
from ...time import NEG_INF
from ...udfs.streaming import STATE_NAME

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql.streaming import StreamingQuery

#: observe() names of the counters in a query's progress (`observedMetrics`)
METRICS_NAME = "sqlflow"
SOURCE_METRICS_NAME = "sqlflow_source"
#: ASCENDING PER on the operators (partitioned.py): the observe() name of the first stage's
#: counters (`<metrics name>` + this), and what they add to the query's
PARTITIONS_SUFFIX = "_partitions"
PARTITION_COUNTERS = ("input_rows", "dropped_behind_partition", "dropped_null_event_time")


def observe_input(data: DataFrame, metrics_name: str, *, null_event_time: bool) -> DataFrame:
    """Count the input rows (and, for the native operator, the NULL event times it drops)."""
    metrics = [F.count(F.lit(1)).alias("input_rows")]
    if null_event_time:
        null_et = F.col(EVENT_TIME).isNull().cast("long")
        metrics.append(F.coalesce(F.sum(null_et), F.lit(0)).alias("dropped_null_event_time"))
    return data.observe(metrics_name + "_input", *metrics)


def _observed_row(row) -> dict:
    """An observed metrics row as {name: value}. Spark Connect's progress gives the row as its JSON
    form, values and schema apart.

    >>> _observed_row({"values": [2, 0], "schema": {"type": "struct", "fields": [{"name": "panes"}, {"name": "late"}]}})
    {'panes': 2, 'late': 0}
    """
    values = row.asDict() if hasattr(row, "asDict") else dict(row or {})
    if set(values) == {"values", "schema"} and isinstance(values["schema"], dict):
        return dict(zip((f["name"] for f in values["schema"]["fields"]), values["values"]))
    return values


def progress_metrics(progress: dict, name: str = METRICS_NAME) -> dict:
    """What one micro-batch counted: sqlflow's counters (observe) plus the rows Spark's stateful
    operators dropped behind the watermark (`spark_dropped_late`).

    >>> progress_metrics({"observedMetrics": {"sqlflow": {"panes": 2}, "sqlflow_input": {"input_rows": 5}},
    ...                   "stateOperators": [{"numRowsDroppedByWatermark": 1}]})
    {'panes': 2, 'input_rows': 5, 'spark_dropped_late': 1}
    >>> progress_metrics({"observedMetrics": {"sqlflow": {"panes": 1, "dropped_null_event_time": 0},
    ...                   "sqlflow_partitions": {"input_rows": 3, "dropped_behind_partition": 1, "ordered_rows": 2}}})
    {'panes': 1, 'dropped_null_event_time': 0, 'input_rows': 3, 'dropped_behind_partition': 1, 'spark_dropped_late': 0}
    """
    observed = progress.get("observedMetrics") or {}
    out = {}
    for metrics_name in (name, name + "_input", SOURCE_METRICS_NAME):
        values = _observed_row(observed.get(metrics_name))
        out.update({k: int(v) for k, v in values.items() if v is not None})
    # ASCENDING PER: the first stage's input rows and the rows it dropped (partitioned.py)
    values = _observed_row(observed.get(name + PARTITIONS_SUFFIX))
    for k in PARTITION_COUNTERS:
        if values.get(k) is not None:
            out[k] = out.get(k, 0) + int(values[k])
    out["spark_dropped_late"] = sum(int(op.get("numRowsDroppedByWatermark", 0) or 0)
                                    for op in progress.get("stateOperators", []))
    return out


def query_metrics(query: "StreamingQuery", name: str = METRICS_NAME) -> dict:
    """Counters summed over the query's recent progress (Spark keeps the last 100 batches;
    use a StreamingQueryListener for longer runs), and what the stateful operator keeps as of
    its latest batch (`state_keys`, `state_windows`, `state_bytes`: sqlflow's own state, which
    Spark's `numRowsTotal` and `memoryUsedBytes` do not show). A query of the owned-sink executor
    counts every batch of the run (its own record, `owned.OwnedRun.progress`)."""
    total: dict = {}
    for progress in _progress(query):
        metrics = (progress_metrics(progress, name) if "observedMetrics" in progress or "stateOperators" in progress
                   else {k: v for k, v in progress.items() if k != "batchId" and v is not None})
        for k, v in metrics.items():
            if k in STREAM_LIVE:
                total[k] = v  # the latest batch's
            elif k not in STREAM_GAUGES:
                total[k] = total.get(k, 0) + v
    return total


def watermark_log(query: "StreamingQuery", name: str = METRICS_NAME) -> list[tuple[int, int]]:
    """(processing time, watermark) of each micro-batch of a stateful pane query, in engine
    microseconds, from its recent progress (Spark keeps 100 batches): the steps of the watermark
    the stream ran on. As the rows of a table `(proc_time TIMESTAMP, watermark TIMESTAMP)` it is
    the `TIMELINE` of a replay that gives the stream's panes exactly (docs/streaming.md, 2.1)."""
    from .owned import run_of

    run = run_of(query)
    if run is not None:  # the owned-sink executor's own log (kept in its state's bookkeeping)
        return [(int(p), int(w)) for p, w in run.log if w > NEG_INF]
    steps = []
    for progress in query.recentProgress:
        values = _observed_row((progress.get("observedMetrics") or {}).get(name))
        if values.get("batch_time") is None or values.get("watermark") is None or values["watermark"] <= NEG_INF:
            continue  # no watermark yet: -infinity, as before a timeline's first step
        steps.append((int(values["batch_time"]), int(values["watermark"])))
    return steps


def _progress(query) -> list[dict]:
    from .owned import run_of

    run = run_of(query)
    return list(run.progress) if run is not None else list(query.recentProgress)


def state_summary(spark: SparkSession, checkpoint: str) -> dict:
    """What a stateful pane query keeps, from its checkpoint (Spark's state data source): buckets,
    keys, live windows and bytes of engine state, and how many buckets have finished their input."""
    meta = spark.read.format("statestore").option("path", checkpoint).option("stateVarName", STATE_NAME).load()
    row = meta.agg(F.count("*").alias("buckets"), F.sum("value.keys").alias("keys"),
                   F.sum("value.windows").alias("windows"), F.sum("value.bytes").alias("bytes"),
                   F.sum(F.col("value.finished").cast("long")).alias("finished")).collect()[0]
    return {k: int(v or 0) for k, v in row.asDict().items()}


def late_rows(metrics: dict) -> int:
    """Rows too late for every window they belong to: dropped by Spark ahead of the operator, or
    by the engine (each (row, window) pair the engine drops counts once).

    >>> late_rows({"spark_dropped_late": 2, "dropped_too_late": 3})
    5
    """
    return metrics.get("spark_dropped_late", 0) + metrics.get("dropped_too_late", 0)

