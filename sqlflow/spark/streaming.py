"""Windowed queries on Spark Structured Streaming: panes as an append-only changelog.

`stream_panes(input_df, plan, delay=...)` turns a streaming DataFrame that already has the
engine's input columns (`sqlflow.engine.plan`: event time in microseconds, keys, aggregate inputs,
WHEN and gap columns) into a streaming DataFrame of panes, with the columns of the bounded path.
Two operators can run it (docs/streaming.md says when and why):

- Spark's native streaming window aggregation, where its output is provably the same
  (`native_equivalent`);
- otherwise `transformWithStateInPandas` running `Engine.advance` per hash bucket of keys
  (`sqlflow.udfs.streaming`), in EventTime mode, with the Spark watermark put on a shifted
  column so that Spark only drops rows the engine would drop too.

`start(...)` writes a pane stream to a sink (json, csv, parquet, memory, console, or a table)
with a checkpoint, a trigger interval or availableNow, and optionally finishes a bounded stream
(the watermark moves to +infinity, every window is emitted). `query_metrics(query)` sums what
was counted (late rows, malformed records, panes, retractions) over a query's progress.
`read_stream(...)` reads a file source with Spark's PERMISSIVE / DROPMALFORMED / FAILFAST modes
while counting malformed records.
"""
from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import ast
from ..engine.plan import EVENT_TIME, GAP, EnginePlan, when_column
from ..errors import SqlflowUnsupportedError
from ..time import DAY, MILLISECOND

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery
    from pyspark.sql.types import DataType, StructType

#: observe() names of the counters in a query's progress (`observedMetrics`)
METRICS_NAME = "sqlflow"
SOURCE_METRICS_NAME = "sqlflow_source"

#: the default shift of the watermark column: Spark drops (before the operator, counting them in
#: numRowsDroppedByWatermark) only rows this far behind the watermark, so in practice every row
#: reaches the engine, which judges lateness per (row, window) and counts and returns what it drops
UNBOUNDED_SHIFT = 3650 * DAY

#: default hash buckets per shuffle partition (docs/streaming.md: key vs bucket measurements)
BUCKETS_PER_PARTITION = 4

#: the pane columns, in output order
PANE_COLUMNS = ("window_start", "window_end", "pane_index", "pane_timing", "is_last", "emit_time")
RETRACTION_COLUMN = "is_retraction"

#: sinks that write files under a path
FILE_FORMATS = ("json", "csv", "parquet", "orc", "text")


# --------------------------------------------------------------------------- types


def pane_schema(input_schema: "StructType", plan: EnginePlan) -> "StructType":
    """The output schema of a pane stream: keys, aggregates, pane columns (and is_retraction)."""
    from pyspark.sql import types as T

    fields = {f.name: f for f in input_schema.fields}
    out = [T.StructField(k, fields[k].dataType, True) for k in plan.keys]
    for agg in plan.aggregates:
        source = fields[agg.column].dataType if agg.column is not None else None
        out.append(T.StructField(agg.output, aggregate_type(agg.kind, source), True))
    out += [
        T.StructField("window_start", T.TimestampType(), True),
        T.StructField("window_end", T.TimestampType(), True),
        T.StructField("pane_index", T.LongType(), False),
        T.StructField("pane_timing", T.StringType(), False),
        T.StructField("is_last", T.BooleanType(), False),
        T.StructField("emit_time", T.TimestampType(), True),
    ]
    if plan.mode.retracting:
        out.append(T.StructField(RETRACTION_COLUMN, T.BooleanType(), False))
    return T.StructType(out)


def aggregate_type(kind: str, source: "DataType | None") -> "DataType":
    """Spark's result type of an aggregate over a column of type `source`."""
    from pyspark.sql import types as T

    if kind in ("count_star", "count", "count_distinct"):
        return T.LongType()
    if kind in ("stddev_samp", "stddev_pop", "var_samp", "var_pop"):
        return T.DoubleType()
    if kind == "sum":
        if isinstance(source, T.DecimalType):
            return T.DecimalType(min(38, source.precision + 10), source.scale)
        if isinstance(source, (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.BooleanType)):
            return T.LongType()
        return T.DoubleType()
    if kind == "avg":
        if isinstance(source, T.DecimalType):
            return T.DecimalType(min(38, source.precision + 4), min(38, source.scale + 4))
        return T.DoubleType()
    if kind in ("collect_list", "collect_set"):
        return T.ArrayType(source, False)
    return source  # min, max, first, last


def _integral(dtype) -> bool:
    from pyspark.sql import types as T

    return isinstance(dtype, (T.ByteType, T.ShortType, T.IntegerType, T.LongType))


# --------------------------------------------------------------------------- watermark shift


def lateness_shift(plan: EnginePlan) -> int:
    """How far behind the watermark a row may be and still matter to the engine (us).

    The watermark column is `event time + shift` with delay `delay + shift`: Spark's watermark is
    unchanged (max event time - delay) while Spark drops, before the operator, only rows with
    `event time + shift <= watermark`. A row matters while some window it is assigned to has
    `end + allowed lateness > watermark`; its windows end at most `extent` after it, so
    `shift = extent + lateness` drops nothing the engine would keep."""
    fn = plan.window
    if isinstance(fn, ast.Fixed):
        extent = fn.size.micros
    elif isinstance(fn, ast.Sliding):
        extent = fn.size.micros
    elif isinstance(fn, ast.Cumulate):
        extent = fn.size.micros
    elif isinstance(fn, ast.Sessions) and isinstance(fn.gap, ast.Duration):
        extent = fn.gap.micros
    else:
        return UNBOUNDED_SHIFT
    shift = extent + plan.lateness
    shift = -(-shift // MILLISECOND) * MILLISECOND  # Spark's watermark has millisecond steps
    return min(shift, UNBOUNDED_SHIFT)


def _interval_ms(micros: int) -> str:
    return f"{micros // MILLISECOND} milliseconds"


# --------------------------------------------------------------------------- native operator


NATIVE_AGGREGATES = ("count_star", "count", "sum", "avg", "min", "max")


def native_equivalent(plan: EnginePlan, *, time_shift: int = 0) -> str | None:
    """Why Spark's native streaming window aggregation would differ from the engine on this plan,
    or None when it gives exactly the same panes (docs/streaming.md, "Native operator").

    Spark (>= 3.4) judges a row late in batch N when its window's end <= the watermark of batch
    N-1, aggregates the rest, and emits (append mode) the windows whose end <= the watermark of
    batch N: exactly `Engine.advance(rows, wm_prev=W(N-1), wm_new=W(N))` for FIXED or SLIDING
    windows with the default trigger REPEAT(WATERMARK) and no allowed lateness: one ON_TIME,
    final pane per window, late rows dropped by the same rule."""
    fn = plan.window
    if not isinstance(fn, (ast.Fixed, ast.Sliding)):
        return f"window {type(fn).__name__.upper()} (only FIXED and SLIDING are native)"
    if plan.trigger != ast.default_trigger():
        return "a trigger other than the default REPEAT(WATERMARK)"
    if plan.lateness:
        return "ALLOWED LATENESS (Spark drops a window when the watermark passes its end)"
    for agg in plan.aggregates:
        if agg.kind not in NATIVE_AGGREGATES:
            return f"aggregate {agg.kind} (order- or distinct-dependent in Spark's streaming aggregation)"
    if time_shift:
        return "a time shift"
    return None


def _native_panes(data: "DataFrame", plan: EnginePlan, *, delay: int, schema: "StructType",
                  metrics_name: str) -> "DataFrame":
    from pyspark.sql import functions as F

    fn = plan.window
    data = _observe_input(data, metrics_name, null_event_time=True)
    ts = F.timestamp_micros(F.col(EVENT_TIME))
    src = data.withColumn("__sqlflow_ts", ts).withWatermark("__sqlflow_ts", _interval_ms(delay))
    if isinstance(fn, ast.Fixed):
        size = fn.size.micros
        win = F.window("__sqlflow_ts", f"{size} microseconds", f"{size} microseconds",
                       f"{fn.offset.micros % size} microseconds")
    else:
        win = F.window("__sqlflow_ts", f"{fn.size.micros} microseconds", f"{fn.period.micros} microseconds",
                       f"{fn.offset.micros % fn.period.micros} microseconds")
    aggs = []
    for agg in plan.aggregates:
        col = F.col(agg.column) if agg.column is not None else None
        expr = {"count_star": lambda: F.count(F.lit(1)), "count": lambda: F.count(col),
                "sum": lambda: F.sum(col), "avg": lambda: F.avg(col), "min": lambda: F.min(col),
                "max": lambda: F.max(col)}[agg.kind]()
        aggs.append(expr.alias(agg.output))
    grouped = src.groupBy(*[F.col(k) for k in plan.keys], win.alias("__sqlflow_window")).agg(*aggs)
    out = grouped.select(
        *[F.col(k) for k in plan.keys], *[F.col(a.output) for a in plan.aggregates],
        F.col("__sqlflow_window.start").alias("window_start"), F.col("__sqlflow_window.end").alias("window_end"),
        F.lit(0).cast("long").alias("pane_index"), F.lit("ON_TIME").alias("pane_timing"),
        F.lit(True).alias("is_last"), F.current_timestamp().alias("emit_time"),
        *([F.lit(False).alias(RETRACTION_COLUMN)] if plan.mode.retracting else []))
    out = out.observe(metrics_name, F.count(F.lit(1)).alias("panes"), F.max(F.unix_micros("emit_time")).alias("batch_time"))
    return out.select(*[F.col(f.name).cast(f.dataType) for f in schema.fields])


# --------------------------------------------------------------------------- the stateful operator


@dataclass
class PaneStream:
    """A streaming DataFrame of panes and what runs it.

    - `panes`: the pane changelog (what `stream_panes` returns);
    - `dropped`: rows dropped by the engine (too late, closed window, NULL event time, bad gap),
      with the window they missed, when `keep_dropped=True` (same query as `panes`: use
      `start(..., dropped_path=...)` to write both);
    - `finish_dir`: where `finish()` writes the end-of-input marker (None: cannot finish);
    - `operator`: "native" or "stateful".
    """

    panes: "DataFrame"
    raw: "DataFrame | None"
    dropped: "DataFrame | None"
    finish_dir: str | None
    operator: str
    buckets: int
    metrics_name: str = METRICS_NAME
    pane_projection: list | None = None
    dropped_projection: list | None = None

    def finish(self) -> None:
        """End the input: the next micro-batch moves the watermark to +infinity in every bucket,
        emitting and expiring every window (later rows are too late and counted)."""
        if self.finish_dir is None:
            raise SqlflowUnsupportedError("this stream was built without finish_dir, so it cannot be finished",
                                          clause="STREAM")
        write_finish_marker(self.finish_dir)


def write_finish_marker(finish_dir: str) -> None:
    os.makedirs(finish_dir, exist_ok=True)
    name = f"finish-{time.time_ns()}-{uuid.uuid4().hex[:8]}.json"
    tmp = os.path.join(finish_dir, "." + name + ".tmp")
    with open(tmp, "w") as out:
        out.write(json.dumps({"finish": "finish"}) + "\n")
    os.replace(tmp, os.path.join(finish_dir, name))


def stream_panes(input_df: "DataFrame", plan: EnginePlan, *, delay: int, **options) -> "DataFrame":
    """A streaming DataFrame of the panes of `plan` over `input_df` (see `build_stream`)."""
    return build_stream(input_df, plan, delay=delay, **options).panes


def build_stream(input_df: "DataFrame", plan: EnginePlan, *, delay: int, buckets: int | None = None,
                 native: bool | None = None, heartbeat: bool | None = None, finish_dir: str | None = None,
                 keep_dropped: bool = False, time_shift: int = 0, output_schema: "StructType | None" = None,
                 metrics_name: str = METRICS_NAME, grouping: str = "bucket",
                 spark_drops_late: bool = False) -> PaneStream:
    """Build the pane stream of `plan` over the streaming DataFrame `input_df`.

    - `input_df` has the engine input columns (event time as int64 microseconds, keys, aggregate
      inputs, WHEN and gap columns) and no watermark of its own;
    - `delay`: the bounded-delay watermark (us): W = max event time - delay (Spark's, per batch,
      in whole milliseconds);
    - `buckets`: hash buckets of keys (default: 4 per shuffle partition);
    - `native`: None chooses Spark's native window aggregation when it is equivalent, True
      requires it, False forces the stateful operator;
    - `heartbeat`: visit every bucket in every batch with data, telling it the batch's max event
      time (default on; never with grouping="key"). PERIOD and DELAY then fire at the first batch
      at or after their time, and the watermark survives a restart that Spark's does not (the
      re-run of a batch the sink had committed is skipped unexecuted: Spark's watermark lags one
      batch, the operator's does not; docs/streaming.md section 7). False saves a second read of
      each batch's event times (within noise on benchmarks/streaming.py);
    - `finish_dir`: a directory for the end-of-input marker (`PaneStream.finish`);
    - `keep_dropped`: also output dropped rows (`PaneStream.dropped`);
    - `time_shift` (us): the watermark column is event time + time_shift; use e.g. 100 years for
      event times before 1970 (Spark's watermark starts at 0, the epoch);
    - `grouping`: "bucket" (default) or "key" (one call per key: for measurements only);
    - `spark_drops_late`: let Spark drop rows too late for all their windows before the operator
      (`lateness_shift`; counted as rows in `spark_dropped_late`) instead of shipping them to the
      engine (counted per (row, window) in `dropped_too_late`, and returned with keep_dropped).
    """
    from pyspark.sql import functions as F

    spark = input_df.sparkSession
    needed = _engine_columns(input_df, plan)
    data = input_df.select(*needed)
    schema = output_schema or pane_schema(data.schema, plan)
    reason = native_equivalent(plan, time_shift=time_shift) if native is not False else "forced"
    if native and reason is not None:
        raise SqlflowUnsupportedError(f"the native operator is not equivalent here: {reason}", clause="STREAM")
    if reason is None and not keep_dropped and finish_dir is None:
        panes = _native_panes(data, plan, delay=delay, schema=schema, metrics_name=metrics_name)
        return PaneStream(panes, None, None, None, "native", 0, metrics_name)
    return _stateful(spark, data, plan, delay=delay, buckets=buckets, heartbeat=heartbeat, finish_dir=finish_dir,
                     keep_dropped=keep_dropped, time_shift=time_shift, schema=schema, metrics_name=metrics_name,
                     grouping=grouping, shift=lateness_shift(plan) if spark_drops_late else UNBOUNDED_SHIFT)


def _observe_input(data: "DataFrame", metrics_name: str, *, null_event_time: bool) -> "DataFrame":
    """Count the input rows (and, for the native operator, the NULL event times it drops)."""
    from pyspark.sql import functions as F

    metrics = [F.count(F.lit(1)).alias("input_rows")]
    if null_event_time:
        null_et = F.col(EVENT_TIME).isNull().cast("long")
        metrics.append(F.coalesce(F.sum(null_et), F.lit(0)).alias("dropped_null_event_time"))
    return data.observe(metrics_name + "_input", *metrics)


def _engine_columns(df: "DataFrame", plan: EnginePlan) -> list[str]:
    cols = [*plan.keys, EVENT_TIME]
    cols += [a.column for a in plan.aggregates if a.column is not None]
    cols += [when_column(i) for i in range(plan.n_when)]
    if plan.per_row_gap:
        cols.append(GAP)
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise SqlflowUnsupportedError(f"the stream lacks engine input columns {missing}", clause="STREAM")
    return list(dict.fromkeys(cols))


def _stateful(spark: "SparkSession", data: "DataFrame", plan: EnginePlan, *, delay: int, buckets, heartbeat,
              finish_dir, keep_dropped, time_shift, schema: "StructType", metrics_name: str,
              grouping: str, shift: int) -> PaneStream:
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from sqlflow.udfs import streaming as op
    from sqlflow.udfs.bucket import NULL_MASK

    from .engine_path import exact_bigint_exprs, exact_bigints

    plain, data = data, _observe_input(data, metrics_name, null_event_time=False)
    weight = None
    if not keep_dropped and shift == UNBOUNDED_SHIFT and grouping != "key" and combinable(plan, data.schema):
        data, plan = _combined(data, plan)
        weight = op.WEIGHT
    # a combined element keeps its rows' smallest event time for the engine and their largest
    # (LATEST) for Spark's watermark, which is max event time - delay over the rows
    latest = F.col(op.LATEST) if op.LATEST in data.columns else F.col(EVENT_TIME)
    input_columns = tuple(c for c in data.columns if c != op.LATEST)
    n_buckets = buckets or BUCKETS_PER_PARTITION * int(spark.conf.get("spark.sql.shuffle.partitions"))
    if not plan.keys:
        n_buckets = 1
    by_key = grouping == "key"
    if by_key:
        n_buckets = 0
        bucket = F.lit(0)
    else:
        bucket = F.pmod(F.hash(*[F.col(k) for k in plan.keys]), F.lit(n_buckets)) if plan.keys else F.lit(0)
    rows = (data.withColumn(op.BUCKET, bucket.cast("int"))
            .withColumn(op.KIND, F.lit(op.DATA).cast("int"))
            .withColumn(op.WM_COLUMN, F.timestamp_micros(latest + F.lit(time_shift + shift))))
    # BIGINT keys and arguments as value + NULL mask: pandas would see them as float64 (engine_path)
    masked = exact_bigints(list(dict.fromkeys([*plan.keys, *(a.column for a in plan.aggregates if a.column)])),
                           data.schema)
    if masked:
        rows = rows.selectExpr(*exact_bigint_exprs(rows.columns, masked))
    columns = rows.columns
    # control rows (heartbeats, finish) put 0 / TRUE (= NULL) in the masked BIGINTs: a NULL there
    # would turn the whole int64 column of an Arrow batch into float64 for pandas
    fill = {**{c: 0 for c in masked}, **{NULL_MASK + c: True for c in masked}}
    parts = [rows]
    heartbeat = heartbeat is not False and not by_key  # default on
    if heartbeat:
        # read a real column too: a file source read for its corrupt-record column alone (counted by
        # read_stream's observe) is refused by Spark (UNSUPPORTED_FEATURE.QUERY_ONLY_CORRUPT_RECORD_COLUMN)
        # heartbeat rows hold their partition's max event time, `fill` and NULL in every other
        # column, also in the watermark column (Spark's max is unchanged)
        beat_schema = T.StructType([T.StructField(f.name, f.dataType, True) for f in rows.schema.fields])
        beats = (plain.select(F.lit(1).alias("__sqlflow_one"), F.col(EVENT_TIME))
                 .mapInPandas(op.heartbeats(n_buckets, columns, fill), beat_schema))
        parts.append(beats)
    if finish_dir is not None:
        os.makedirs(finish_dir, exist_ok=True)
        control = spark.readStream.schema("finish string").json(finish_dir)
        fin = control.select(F.explode(F.sequence(F.lit(0), F.lit(max(n_buckets, 1) - 1))).alias(op.BUCKET))
        fin = fin.select(*[(F.col(op.BUCKET) if c == op.BUCKET else
                            F.lit(op.FINISH).cast("int").alias(c) if c == op.KIND else
                            F.lit(fill.get(c)).cast(rows.schema[c].dataType).alias(c)) for c in columns])
        parts.append(fin)
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part)
    union = union.withWatermark(op.WM_COLUMN, _interval_ms(delay + shift))
    if shift == UNBOUNDED_SHIFT:
        # Spark drops no row as late (the column is shifted 10 years ahead): the column has
        # defined the watermark and goes. The operator reads its input row by row (PySpark's
        # transformWithStateInPandas), and a TIMESTAMP column costs a Python datetime per row
        # (a third of the operator's time, measured)
        union = union.drop(op.WM_COLUMN, op.LATEST)
        columns = [c for c in columns if c not in (op.WM_COLUMN, op.LATEST)]
    spec = op.StreamSpec(
        plan=plan, input_columns=input_columns, frame_columns=tuple(columns),
        integral_columns=tuple(f.name for f in data.schema.fields if _integral(f.dataType)),
        masked_columns=masked,
        shift=time_shift, keep_dropped=keep_dropped, weight=weight,
        column_shift=time_shift + shift, delay_ms=(delay + shift) // MILLISECOND if heartbeat else None)
    out_schema = _operator_schema(spec, data.schema, schema)
    group_cols = list(plan.keys) if by_key else [op.BUCKET]
    initial = None
    if not by_key:
        initial = (spark.range(max(n_buckets, 1)).select(F.col("id").cast("int").alias(op.BUCKET))
                   .groupBy(op.BUCKET))
    raw = union.groupBy(*group_cols).transformWithStateInPandas(
        statefulProcessor=op.PaneProcessor(spec), outputStructType=out_schema, outputMode="Append",
        timeMode="EventTime", initialState=initial)
    sums = [F.coalesce(F.sum(op.METRIC_PREFIX + m), F.lit(0)).alias(m) for m in op.METRICS_COLUMNS]
    gauges = [F.max(op.METRIC_PREFIX + m).alias(m) for m in op.GAUGE_COLUMNS]
    observed = raw.observe(metrics_name, *sums, *gauges)
    pane_projection = _pane_columns(spec, schema)
    panes = observed.where(F.col(op.KIND) == op.PANE).select(*pane_projection)
    dropped = dropped_projection = None
    if keep_dropped:
        dropped_projection = [
            *[F.col(k) for k in plan.keys],
            F.timestamp_micros(F.col(op.OUT_EVENT_TIME)).alias("event_time"),
            F.col(op.OUT_REASON).alias("reason"),
            F.timestamp_micros(F.col(op.OUT_START)).alias("window_start"),
            F.timestamp_micros(F.col(op.OUT_END)).alias("window_end"),
            F.timestamp_micros(F.col(op.OUT_EMIT)).alias("emit_time")]
        dropped = observed.where(F.col(op.KIND) == op.DROPPED).select(*dropped_projection)
    return PaneStream(panes, observed, dropped, finish_dir, "stateful", n_buckets, metrics_name,
                      pane_projection, dropped_projection)


#: aggregates whose partials combine exactly, and pyarrow's aggregate for the partial (the engine's
#: aggregate over the partials is the bounded path's, engine_path._LIFTABLE)
_ARROW_PARTIAL = {"count_star": "count_all", "count": "count", "sum": "sum", "min": "min", "max": "max"}


def combinable(plan: EnginePlan, schema: "StructType") -> bool:
    """Whether the rows of a micro-batch can be combined per key and window before the operator
    (`_combined`): FIXED windows (a row is in one window), the vectorised step's triggers (none
    counts elements), COUNT, SUM of integers, MIN and MAX of atomic types, and keys pyarrow groups
    as Spark does (no floating point, no nested types)."""
    from pyspark.sql import types as T

    from ..engine import watermark_step

    if not isinstance(plan.window, ast.Fixed) or plan.custom_windows or not watermark_step.applies(plan):
        return False
    if plan.n_when or plan.per_row_gap:
        return False
    fields = {f.name: f.dataType for f in schema.fields}
    atomic = (T.StringType, T.BooleanType, T.DateType, T.TimestampType, T.TimestampNTZType, T.DecimalType,
              T.ByteType, T.ShortType, T.IntegerType, T.LongType)
    integral = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
    if any(not isinstance(fields[k], atomic) for k in plan.keys):
        return False
    for agg in plan.aggregates:
        if agg.kind not in _ARROW_PARTIAL:
            return False
        kind = fields[agg.column] if agg.column else None
        if agg.kind == "sum" and not isinstance(kind, integral):
            return False
        if agg.kind in ("min", "max") and not isinstance(kind, atomic):  # not floats: NaN is ordered apart
            return False
    return True


def _combined(data: "DataFrame", plan: EnginePlan):
    """The micro-batch's rows combined per key and window (udfs/combine.py), and the plan over the
    partial aggregates: fewer rows for the operator, whose input PySpark reads row by row."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from sqlflow.engine.aggregates import Aggregate
    from sqlflow.udfs import streaming as op
    from sqlflow.udfs.combine import Combine

    from .engine_path import _LIFTABLE

    window = plan.window
    et = F.col(EVENT_TIME)
    start = "__sqlflow_start"
    sliced = data.withColumn(start, et - F.pmod(et - F.lit(window.offset.micros), F.lit(window.size.micros)))
    fields = {f.name: f for f in data.schema.fields}
    out = [T.StructField(k, fields[k].dataType, True) for k in plan.keys]
    out += [T.StructField(start, T.LongType(), True), T.StructField(EVENT_TIME, T.LongType(), True),
            T.StructField(op.LATEST, T.LongType(), True)]  # Combine's order: time, latest, parts, weight
    parts, aggregates = [], []
    for j, agg in enumerate(plan.aggregates):
        name = f"__sqlflow_part{j}"
        partial, final = _ARROW_PARTIAL[agg.kind], _LIFTABLE[agg.kind]
        parts.append((name, partial, agg.column))
        aggregates.append(Aggregate(final, name, agg.output, agg.ignore_nulls))
        kind = fields[agg.column].dataType if agg.kind in ("min", "max") else T.LongType()
        # counts are never NULL: declared so, they travel without a NULL mask (engine_path.exact_bigints)
        out.append(T.StructField(name, kind, partial not in ("count", "count_all")))
    out.append(T.StructField(op.WEIGHT, T.LongType(), False))
    job = Combine(group=(*plan.keys, start), time=EVENT_TIME, parts=tuple(parts), weight=op.WEIGHT,
                  latest=op.LATEST)
    combined = sliced.mapInArrow(job, T.StructType(out)).drop(start)
    return combined, EnginePlan(plan.windowing, tuple(aggregates), keys=plan.keys, custom_windows=plan.custom_windows)


def _operator_schema(spec, data_schema: "StructType", schema: "StructType") -> "StructType":
    """The operator's output: kind, pane columns (times as int64 us), dropped-row and metric columns."""
    from pyspark.sql import types as T

    from sqlflow.udfs import streaming as op

    by_name = {f.name: f for f in schema.fields}
    fields = [T.StructField(op.KIND, T.IntegerType(), False)]
    fields += [T.StructField(k, by_name[k].dataType, True) for k in spec.plan.keys]
    fields += [T.StructField(a.output, by_name[a.output].dataType, True) for a in spec.plan.aggregates]
    fields += [T.StructField(c, t, True) for c, t in (
        (op.OUT_START, T.LongType()), (op.OUT_END, T.LongType()), (op.OUT_INDEX, T.LongType()),
        (op.OUT_TIMING, T.StringType()), (op.OUT_LAST, T.BooleanType()), (op.OUT_EMIT, T.LongType()))]
    if spec.retracting:
        fields.append(T.StructField(op.OUT_RETRACTION, T.BooleanType(), True))
    fields += [T.StructField(op.OUT_EVENT_TIME, T.LongType(), True), T.StructField(op.OUT_REASON, T.StringType(), True)]
    fields += [T.StructField(op.METRIC_PREFIX + m, T.LongType(), True) for m in op.METRICS_COLUMNS + op.GAUGE_COLUMNS]
    return T.StructType(fields)


def _pane_columns(spec, schema: "StructType") -> list:
    from pyspark.sql import functions as F

    from sqlflow.udfs import streaming as op

    source = {"window_start": F.timestamp_micros(F.col(op.OUT_START)),
              "window_end": F.timestamp_micros(F.col(op.OUT_END)),
              "pane_index": F.col(op.OUT_INDEX), "pane_timing": F.col(op.OUT_TIMING),
              "is_last": F.col(op.OUT_LAST), "emit_time": F.timestamp_micros(F.col(op.OUT_EMIT)),
              RETRACTION_COLUMN: F.col(op.OUT_RETRACTION) if spec.retracting else None}
    out = []
    for f in schema.fields:
        expr = source.get(f.name)
        out.append((expr if expr is not None else F.col(f.name)).cast(f.dataType).alias(f.name))
    return out


# --------------------------------------------------------------------------- running a stream


def start(stream: "PaneStream | DataFrame", *, format: str = "parquet", path: str | None = None,
          table: str | None = None, query_name: str | None = None, checkpoint: str | None = None,
          trigger_interval: str | None = None, available_now: bool = False, finish: bool = False,
          options: dict[str, Any] | None = None, await_termination: bool | None = None,
          dropped_path: str | None = None) -> "StreamingQuery":
    """Write a pane stream to a sink and start it.

    - `format`: json, csv, parquet (with `path`), memory (with `query_name`), console, or any
      format Spark knows; `table`: write to a catalog table instead (`toTable`);
    - `checkpoint`: the checkpoint location (required for file sinks and tables; restart a query
      from it after a failure: exactly-once for file sinks and tables);
    - `trigger_interval`: e.g. "10 seconds": micro-batch period, and so the resolution of PERIOD and
      DELAY triggers (default: as soon as the previous batch is done);
    - `available_now`: process what is available, then stop; with `finish=True` the stream is
      then finished (every window emitted) by a second availableNow run that reads the finish
      marker. Both wait for termination and return the last query.
    - `dropped_path`: also write the rows the engine dropped (a PaneStream built with
      keep_dropped=True; file formats only). Both outputs are then written by foreachBatch, one
      directory per micro-batch (`<path>/batch_id=N`, overwritten when Spark re-runs a batch after
      a failure, so still exactly once); read them with spark.read.<format>(path).
    """
    if isinstance(stream, PaneStream):
        finishers, df = [stream], stream.panes
    else:
        finishers, df = pane_streams(stream), stream
    if finish and (not finishers or any(s.finish_dir is None for s in finishers)):
        raise SqlflowUnsupportedError(f"finish needs a stream built with finish_dir ({CONF_FINISH_DIR} in SQL)",
                                      clause="STREAM")
    if finish and not available_now:
        raise SqlflowUnsupportedError("finish=True needs available_now=True (or call PaneStream.finish() "
                                      "on a running stream)", clause="STREAM")

    if dropped_path is not None:
        if not isinstance(stream, PaneStream) or stream.dropped is None:
            raise SqlflowUnsupportedError("dropped_path needs a PaneStream built with keep_dropped=True",
                                          clause="STREAM")
        if format not in FILE_FORMATS or path is None or checkpoint is None:
            raise SqlflowUnsupportedError("dropped_path needs a file format, a path and a checkpoint", clause="STREAM")
        w = stream.raw.writeStream.foreachBatch(_split_batch(stream, format, path, dropped_path, options))
    else:
        w = df.writeStream.outputMode("append")
        if options:
            w = w.options(**{k: str(v) for k, v in options.items()})
    if checkpoint is not None:
        w = w.option("checkpointLocation", checkpoint)
    if query_name is not None:
        w = w.queryName(query_name)
    if available_now and not finish:
        w = w.trigger(availableNow=True)
    elif trigger_interval is not None:
        w = w.trigger(processingTime=trigger_interval)
    if dropped_path is not None:
        query = w.start()
    elif table is not None:
        query = w.toTable(table)
    else:
        w = w.format(format)
        if format in FILE_FORMATS:
            if path is None:
                raise SqlflowUnsupportedError(f"a {format} sink needs a path", clause="INSERT")
            if checkpoint is None:
                raise SqlflowUnsupportedError(f"a {format} sink needs a checkpoint location", clause="INSERT")
            query = w.start(path)
        else:
            query = w.start()
    if finish:
        # availableNow fixes every source's end offset when it starts, so the finish marker could
        # not come after the data in one run: process what is there, finish, process, stop.
        query.processAllAvailable()
        for finisher in finishers:
            finisher.finish()
        query.processAllAvailable()
        query.stop()
        return query
    wait = available_now if await_termination is None else await_termination
    if wait:
        query.awaitTermination()
    return query


def _split_batch(stream: PaneStream, format: str, path: str, dropped_path: str, options):
    """foreachBatch: the panes and the dropped rows of one micro-batch, each to its own directory
    named after the batch (overwritten when Spark re-runs the batch: exactly once)."""
    from sqlflow.udfs import streaming as op

    def write(batch_df, batch_id: int) -> None:
        batch_df.persist()
        try:
            for kind, target in ((op.PANE, path), (op.DROPPED, dropped_path)):
                writer = _project_batch(batch_df, stream, kind).write.mode("overwrite").format(format)
                if options:
                    writer = writer.options(**{k: str(v) for k, v in options.items()})
                writer.save(f"{target.rstrip('/')}/batch_id={batch_id}")
        finally:
            batch_df.unpersist()

    return write


def _project_batch(raw: "DataFrame", stream: PaneStream, kind: int) -> "DataFrame":
    """The pane (or dropped-row) columns of one micro-batch of the operator's output."""
    from pyspark.sql import functions as F

    from sqlflow.udfs import streaming as op

    rows = raw.where(F.col(op.KIND) == kind)
    if kind == op.PANE:
        return rows.select(*stream.pane_projection)
    return rows.select(*stream.dropped_projection)


# --------------------------------------------------------------------------- metrics


def progress_metrics(progress: dict, name: str = METRICS_NAME) -> dict:
    """What one micro-batch counted: sqlflow's counters (observe) plus the rows Spark's stateful
    operators dropped behind the watermark (`spark_dropped_late`)."""
    observed = progress.get("observedMetrics") or {}
    out = {}
    for metrics_name in (name, name + "_input", SOURCE_METRICS_NAME):
        row = observed.get(metrics_name)
        values = row.asDict() if hasattr(row, "asDict") else dict(row or {})
        out.update({k: int(v) for k, v in values.items() if v is not None})
    out["spark_dropped_late"] = sum(int(op.get("numRowsDroppedByWatermark", 0) or 0)
                                    for op in progress.get("stateOperators", []))
    return out


def query_metrics(query: "StreamingQuery", name: str = METRICS_NAME) -> dict:
    """Counters summed over the query's recent progress (Spark keeps the last 100 batches;
    use a StreamingQueryListener for longer runs)."""
    from sqlflow.udfs.streaming import GAUGE_COLUMNS

    total: dict = {}
    for progress in query.recentProgress:
        for k, v in progress_metrics(progress, name).items():
            if k not in GAUGE_COLUMNS:
                total[k] = total.get(k, 0) + v
    return total


def state_summary(spark: "SparkSession", checkpoint: str) -> dict:
    """What a stateful pane query keeps, from its checkpoint (Spark's state data source): buckets,
    keys and live windows, and how many buckets have finished their input."""
    from pyspark.sql import functions as F

    meta = spark.read.format("statestore").option("path", checkpoint).option("stateVarName", "meta").load()
    row = meta.agg(F.count("*").alias("buckets"), F.sum("value.keys").alias("keys"),
                   F.sum("value.windows").alias("windows"),
                   F.sum(F.col("value.finished").cast("long")).alias("finished")).collect()[0]
    return {k: int(v or 0) for k, v in row.asDict().items()}


def late_rows(metrics: dict) -> int:
    """Rows too late for every window they belong to: dropped by Spark ahead of the operator, or
    by the engine (each (row, window) pair the engine drops counts once)."""
    return metrics.get("spark_dropped_late", 0) + metrics.get("dropped_too_late", 0)


# --------------------------------------------------------------------------- sources


def read_stream(spark: "SparkSession", path: str, *, format: str, schema: "StructType | str",
                mode: str = "PERMISSIVE", options: dict[str, Any] | None = None,
                corrupt_column: str = "_corrupt_record") -> "DataFrame":
    """A streaming file source (json or csv) whose malformed records are counted.

    Modes follow Spark's: PERMISSIVE keeps a malformed record with NULL fields (a NULL event time
    is then excluded and counted by the engine), DROPMALFORMED drops it, FAILFAST fails the query.
    PERMISSIVE and DROPMALFORMED count malformed records as `malformed_records` in the query's
    progress (observe name `sqlflow_source`); both read in PERMISSIVE mode with a corrupt-record
    column, and DROPMALFORMED then filters."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    mode = mode.upper()
    if mode not in ("PERMISSIVE", "DROPMALFORMED", "FAILFAST"):
        raise SqlflowUnsupportedError(f"unknown mode {mode!r}: PERMISSIVE, DROPMALFORMED or FAILFAST",
                                      clause="SOURCE")
    if isinstance(schema, str):
        schema = T._parse_datatype_string(schema)
    reader = spark.readStream.format(format).options(**{k: str(v) for k, v in (options or {}).items()})
    if mode == "FAILFAST":
        return reader.schema(schema).option("mode", "FAILFAST").load(path)
    names = [f.name for f in schema.fields]
    full = T.StructType(schema.fields + [T.StructField(corrupt_column, T.StringType(), True)])
    df = (reader.schema(full).option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", corrupt_column)
          .load(path))
    bad = F.col(corrupt_column).isNotNull()
    df = df.observe(SOURCE_METRICS_NAME, F.coalesce(F.sum(bad.cast("long")), F.lit(0)).alias("malformed_records"))
    if mode == "DROPMALFORMED":
        df = df.where(~bad)
    return df.select(*names)



# --------------------------------------------------------------------------- sqlflow.sql on streams

#: `spark.sqlflow.*` keys read when sqlflow.sql meets a streaming source (docs/streaming.md)
CONF_OPERATOR = "spark.sqlflow.streaming.operator"      # auto | native | stateful
CONF_BUCKETS = "spark.sqlflow.streaming.buckets"
CONF_FINISH_DIR = "spark.sqlflow.streaming.finishDir"
CONF_TIME_SHIFT = "spark.sqlflow.streaming.timeShift"   # an interval, e.g. '36500 days'


def streaming_stage(runner, number: int, ws, rel, raw):
    """The streaming branch of `sqlflow.sql` (called by `sqlflow.spark.execute.Runner.stage` when
    the windowed SELECT's input is a stream): build the pane stream and replace the SELECT by a
    SELECT over it, as the bounded engine path does with its panes. Returns the report's Stage,
    whose `extra["stream"]` is the PaneStream (for `start` and `finish`)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from ..engine.aggregates import Aggregate
    from ..errors import SqlflowSemanticError
    from ..frontend.validate import validate
    from . import conf
    from .inputs import agg_column
    from .output import panes_select
    from .relations import to_spark_sql
    from .report import Stage
    from .schema import check_input_types, names_and_types, naming_query

    validate(runner.statement, streaming=True)
    if ws.replay:
        src = ws.arrival_source.watermark
        raise ws.error(SqlflowSemanticError, f"ARRIVAL {src.arrival} replays recorded data; on a stream a row "
                       "arrives with its micro-batch", "WATERMARK", hint="drop ARRIVAL, or read the data as a batch")
    delays = [s.watermark.model for s in ws.sources]
    if len(delays) != 1 or not isinstance(delays[0], ast.BoundedDelay):
        raise ws.error(SqlflowUnsupportedError, f"{ws.label()} reads a stream: it needs exactly one source with "
                       "WATERMARK <column> DELAY OF <interval>", "WATERMARK")
    check_input_types(ws, rel, raw.schema)
    named = runner.sql(to_spark_sql(naming_query(ws)), ws.select, ws.position)
    names, agg_types = names_and_types(ws, named.schema)

    schema = {f.name: f.dataType for f in raw.schema.fields}
    columns = [F.col(k) for k in rel.keys] + [F.col(a) for a in rel.args]
    columns.append(F.unix_micros(F.col(EVENT_TIME).cast("timestamp")).alias(EVENT_TIME))
    if rel.gap:
        columns.append(F.unix_micros(F.timestamp_micros(F.lit(0)) + F.col(GAP)).alias(GAP))
    columns += [F.col(when_column(i)) for i in range(rel.n_when)]
    engine_input = raw.select(*columns)
    aggregates = tuple(Aggregate(call.kind, arg, agg_column(j), call.ignore_nulls)
                       for j, (call, arg) in enumerate(zip(ws.calls, rel.call_args)))
    custom = {}
    if isinstance(ws.window, ast.CustomWindow):
        from ..engine.windows import registered_window_fn

        cls = registered_window_fn(ws.window.name)
        if cls is not None:
            custom[ws.window.name.lower()] = cls
    plan = EnginePlan(ws.windowing, aggregates, keys=tuple(rel.keys), custom_windows=custom)
    fields = [T.StructField(k, schema[k], True) for k in rel.keys]
    fields += [T.StructField(agg_column(j), t, True) for j, t in enumerate(agg_types)]
    output_schema = T.StructType(fields + pane_schema(T.StructType([]), EnginePlan(ws.windowing, (), ())).fields)

    spark = runner.spark
    operator = conf.get(spark, CONF_OPERATOR, "auto").lower()
    if operator not in ("auto", "native", "stateful"):
        raise SqlflowUnsupportedError(f"{CONF_OPERATOR} must be auto, native or stateful, got {operator!r}",
                                      clause="STREAM")
    buckets = conf.get(spark, CONF_BUCKETS)
    shift = conf.get(spark, CONF_TIME_SHIFT)
    stream = build_stream(
        engine_input, plan, delay=delays[0].delay.micros, output_schema=output_schema,
        native={"auto": None, "native": True, "stateful": False}[operator],
        buckets=int(buckets) if buckets else None, finish_dir=conf.get(spark, CONF_FINISH_DIR),
        time_shift=_interval_micros(spark, shift) if shift else 0,
        metrics_name=METRICS_NAME if number == 1 else f"{METRICS_NAME}_{number}")
    why = ("Spark's native streaming window aggregation (equivalent for this query)" if stream.operator == "native"
           else f"transformWithStateInPandas over {stream.buckets} hash buckets of keys")
    stage = Stage(number, ws.label(), f"streaming {stream.operator}", why, ws.windowing.mode.value)
    stage.replay = f"stream, watermark DELAY OF {delays[0].delay}"
    stage.extra["stream"] = stream
    view = runner.view(stream.panes, "stream")
    new = panes_select(ws, view, names)
    if ws.select is runner.tree:
        runner.tree = new
    else:
        ws.select.replace(new)
    return stage


def _interval_micros(spark, text: str) -> int:
    row = spark.sql(f"SELECT unix_micros(timestamp_micros(0) + INTERVAL {text}) AS us").collect()[0]
    return int(row["us"])


def pane_streams(df) -> list[PaneStream]:
    """The pane streams behind a `sqlflow.sql` result over a stream (for `start` and `finish`)."""
    from .report import ATTRIBUTE

    report = getattr(df, ATTRIBUTE, None)
    if report is None:
        return []
    return [s.extra["stream"] for s in report.stages if "stream" in s.extra]
