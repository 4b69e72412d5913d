"""The stateful operator: `Engine.advance` per hash bucket of keys in transformWithStateInPandas.

The driver side of udfs/streaming.py: it tags every input row with its bucket and kind, adds the
control rows (heartbeats, finish markers), puts Spark's watermark on a shifted column
(`watermark`), and splits the operator's output into panes, dropped rows and counters.
"""
from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ...columns import (BUCKET, DATA, DROPPED, DROPPED_EVENT_TIME, DROPPED_REASON, DROPPED_SOURCE, SOURCE, EMIT_TIME, EVENT_TIME, FINISH,
                        HEARTBEAT, KIND, LATEST, METRICS, OUTPUT_TYPES, PACK, PACKED, PANE, PANE_TIMES, REASON,
                        REPORT, REPORT_COLUMNS, REPORT_TYPES, STREAM_COUNTERS,
                        STREAM_GAUGES, STREAM_LIVE, WEIGHT, WINDOW_END, WINDOW_START, WM_COLUMN, metric_column,
                        null_mask)
from ...engine import EnginePlan, overflow_column
from ...errors import SqlflowUnsupportedError
from ...frontend.printer import string as sql_string
from ...plan.relations import quoted
from ...time import MILLISECOND
from ...udfs.pack import CombinedPack, Pack
from ...udfs.heartbeats import heartbeats
from ...udfs.streaming import StreamSpec
from ...udfs.tws import PaneProcessor
from .. import conf
from ..log_filter import quiet
from ..expressions import cast_sql, sql_columns
from ..select_types import spark_type
from .combine import combinable, combining
from .metrics import observe_input
from .pane_stream import PaneStream
from .schema import is_integral
from .watermark import UNBOUNDED_SHIFT, interval_ms



def bucket_count(spark: SparkSession, plan: EnginePlan, buckets: int | None) -> int:
    """The hash buckets of a stream's stateful operator: `buckets` when given, else
    `conf.operator_buckets` (never from spark.sql.shuffle.partitions); 1 without keys."""
    if not plan.keys:
        return 1
    return buckets or conf.operator_buckets(spark)[0]


def bucket_counts(spark: SparkSession, plan: EnginePlan, buckets: int | None) -> dict:
    """The `StreamSpec` fields of a stream's count of buckets: the count (`bucket_count`), the
    count a state of an older sqlflow is taken to have (`buckets` when given, else
    `conf.previous_streaming_buckets`), and the setting that chooses it."""
    n = bucket_count(spark, plan, buckets)
    previous = buckets or (conf.previous_streaming_buckets(spark) if plan.keys else 1)
    return {"buckets": n, "previous_buckets": previous, "buckets_setting": conf.STREAMING_BUCKETS}


def bucket_of(keys, n_buckets: int):
    """The bucket of a row's keys, 0 .. n_buckets - 1 (every stateful operator's one hash)."""
    if not keys:
        return F.lit(0)
    return F.pmod(F.hash(*[F.col(k) for k in keys]), F.lit(n_buckets))


def stateful_panes(spark: SparkSession, data: DataFrame, plan: EnginePlan, *, delay: int, buckets, heartbeat,
                   finish_dir, keep_dropped, time_shift, schema: T.StructType, metrics_name: str,
                   grouping: str, shift: int, engine_types: dict | None = None,
                   decode: dict | None = None, sources: tuple[str, ...] = (),
                   source_delays: tuple[int, ...] = (), report: bool = False) -> PaneStream:
    """The pane stream of `plan` by the stateful operator (see `build.build_stream` for the
    arguments; `shift` is the watermark column's shift, `watermark.lateness_shift`)."""
    if sources and (grouping == "key" or heartbeat is False or shift != UNBOUNDED_SHIFT):
        raise SqlflowUnsupportedError("several watermarked sources need the heartbeats of buckets (the watermark is "
                                      "the minimum of the sources' max event times they carry), and Spark dropping "
                                      "no row itself", clause="STREAM")
    data = observe_input(data, metrics_name, null_event_time=False)
    n_buckets = bucket_count(spark, plan, buckets)
    by_key = grouping == "key"
    if by_key:
        n_buckets = 0
        bucket = F.lit(0)
    else:
        bucket = bucket_of(plan.keys, n_buckets)
    weight = None
    combining_rows = None  # the rows with their window start and bucket, and the job combining them
    # the pass before the operator (combine, pack, heartbeats) or none (several sources need its heartbeats)
    passing = conf.flag(spark, conf.STREAMING_COMBINE, True) or bool(sources)
    if not passing and heartbeat is None:
        heartbeat = False
    if (passing and not keep_dropped and not sources and shift == UNBOUNDED_SHIFT and grouping != "key"
            and combinable(plan, data.schema)):
        sliced, job, combined_schema, plan = combining(data, plan)
        start = job.group[-1]
        data = sliced.mapInArrow(job, combined_schema).drop(start)
        # the bucket is a function of the keys: a group column more changes no group
        combining_rows = (sliced.withColumn(BUCKET, bucket.cast("int")),
                          replace(job, group=(*job.group, BUCKET)), start)
        weight = WEIGHT
    # a combined element keeps its rows' smallest event time for the engine and their largest
    # (LATEST) for Spark's watermark, which is max event time - delay over the rows
    latest = F.col(LATEST) if LATEST in data.columns else F.col(EVENT_TIME)
    input_columns = tuple(c for c in data.columns if c != LATEST)
    rows = data.withColumn(BUCKET, bucket.cast("int")).withColumn(KIND, F.lit(DATA).cast("int"))
    if not sources:  # several: the input has its sources' own watermarks (several.py)
        rows = rows.withColumn(WM_COLUMN, F.timestamp_micros(latest + F.lit(time_shift + shift)))
    packed = passing and not by_key and not sources and shift == UNBOUNDED_SHIFT and packable(data.schema)
    masked: tuple[str, ...] | list[str] = ()
    heartbeat = heartbeat is not False and not by_key  # default on
    if packed:  # one row per bucket and input partition, BIGINTs exact (udfs/pack.py), and the
        # heartbeats (3.3) in the same pass: one Python crossing of the batch, not two
        # (rows that combine per key and window are combined in that pass too)
        rows = packed_rows(spark, rows, n_buckets if heartbeat else 0,
                           combining_rows and (*combining_rows, time_shift + shift))
    else:
        # BIGINT and FLOAT/DOUBLE keys and arguments as value + NULL mask (columns.null_mask)
        masked = masked_numbers(list(dict.fromkeys([*plan.keys, *(a.column for a in plan.aggregates if a.column)])),
                                data.schema)
        if masked:
            rows = rows.selectExpr(*masked_number_exprs(rows.columns, masked))
    columns = rows.columns
    # control rows (heartbeats, finish) put 0 / TRUE (= NULL) in the masked BIGINTs: a NULL there
    # would turn the whole int64 column of an Arrow batch into float64 for pandas
    fill: dict[str, Any] = {**{c: 0 for c in masked}, **{null_mask(c): True for c in masked}, **({SOURCE: 0} if sources else {})}
    parts = [rows]
    if heartbeat and not packed:
        # in the same pass as the rows (Spark reads the source once and counts its rows once): each
        # input partition adds one row per bucket with its max event time, `fill` and NULL in every
        # other column, also in the watermark column (Spark's max is unchanged)
        time_column = LATEST if LATEST in columns else None
        nullable = T.StructType([T.StructField(f.name, f.dataType, True) for f in rows.schema.fields])
        parts = [rows.mapInArrow(heartbeats(n_buckets, fill, time_column, len(sources)), nullable)]
    if finish_dir is not None:
        os.makedirs(finish_dir, exist_ok=True)
        control = spark.readStream.schema("finish string").json(finish_dir)
        fin = control.select(F.explode(F.sequence(F.lit(0), F.lit(max(n_buckets, 1) - 1))).alias(BUCKET))
        fin = fin.select(*[(F.col(BUCKET) if c == BUCKET else
                            F.lit(FINISH).cast("int").alias(c) if c == KIND else
                            F.lit(fill.get(c)).cast(rows.schema[c].dataType).alias(c)) for c in columns])
        parts.append(fin)
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part)
    if not sources:
        union = union.withWatermark(WM_COLUMN, interval_ms(delay + shift))
    if shift == UNBOUNDED_SHIFT:
        # Spark drops no row as late (the column is shifted 10 years ahead): the column has
        # defined the watermark and goes. The operator reads its input row by row (PySpark's
        # transformWithStateInPandas), and a TIMESTAMP column costs a Python datetime per row
        # (a third of the operator's time, measured)
        union = union.drop(WM_COLUMN, LATEST)
        columns = [c for c in columns if c not in (WM_COLUMN, LATEST)]
    spec = StreamSpec(
        plan=plan, input_columns=input_columns, frame_columns=tuple(columns),
        integral_columns=tuple(f.name for f in data.schema.fields if is_integral(f.dataType)),
        masked_columns=masked,
        shift=time_shift, keep_dropped=keep_dropped, weight=weight,
        column_shift=time_shift + shift, delay_ms=(delay + shift) // MILLISECOND if heartbeat else None,
        packed=packed, sources=tuple(sources),
        source_delays_ms=tuple((d + shift) // MILLISECOND for d in source_delays), report=report,
        initial_state=not by_key and not heartbeat, **(bucket_counts(spark, plan, buckets) if not by_key else {}))
    out_schema = operator_schema(spec, schema, engine_types)
    group_cols = list(plan.keys) if by_key else [BUCKET]
    initial = None
    if spec.initial_state:
        initial = (spark.range(max(n_buckets, 1)).select(F.col("id").cast("int").alias(BUCKET))
                   .groupBy(BUCKET))
    quiet(spark)  # Spark's state server and the operator's Python workers chatter on every batch
    raw = union.groupBy(*group_cols).transformWithStateInPandas(
        statefulProcessor=PaneProcessor(spec), outputStructType=out_schema, outputMode="Append",
        timeMode="EventTime", initialState=initial)
    observed, panes, pane_projection, chain = operator_outputs(raw, spec, schema, decode, metrics_name)
    dropped = dropped_projection = None
    if keep_dropped:
        dropped_projection = dropped_columns(spark, plan, sources)
        dropped = observed.where(F.col(KIND) == DROPPED).select(*dropped_projection)
    return PaneStream(panes, observed, dropped, finish_dir, "stateful", n_buckets, metrics_name,
                      pane_projection, dropped_projection, chain)


def dropped_columns(spark: SparkSession, plan: EnginePlan, sources: tuple[str, ...] = ()) -> list:
    """The dropped rows' columns from an operator's output (KIND DROPPED): the keys, the row's
    event time, the reason, the window it missed (NULL: none) and `emit_time` (when it was
    dropped), times as TIMESTAMPs; of several sources, the row's source's name."""
    out = [*[quoted(k) for k in plan.keys],
           f"timestamp_micros({quoted(EVENT_TIME)}) AS {quoted(DROPPED_EVENT_TIME)}",
           f"{quoted(REASON)} AS {quoted(DROPPED_REASON)}",
           *[f"timestamp_micros({quoted(c)}) AS {quoted(c)}" for c in (WINDOW_START, WINDOW_END, EMIT_TIME)]]
    if sources:  # the name of the row's source
        names = ", ".join(sql_string(n) for n in sources)
        out.append(f"element_at(array({names}), CAST({quoted(SOURCE)} AS int) + 1) AS {quoted(DROPPED_SOURCE)}")
    return sql_columns(spark, out)


def operator_outputs(raw: DataFrame, spec: StreamSpec, schema: T.StructType, decode: dict | None,
                     metrics_name: str):
    """What a stateful operator's output `raw` gives: itself with its counters observed, its panes
    (and their projection) and, when it reports to a later stage, its chain (`PaneStream.chain`)."""
    def counted(m: str, sql: str) -> str:
        return sql.format(quoted(metric_column(m))) + f" AS {quoted(m)}"

    metrics = [*[counted(m, "coalesce(sum({}), 0)") for m in STREAM_COUNTERS],
               *[counted(m, "max({})") for m in STREAM_GAUGES],
               *[counted(m, "sum({})") for m in STREAM_LIVE],  # over the buckets
               *[counted(m, "coalesce(sum({}), 0)") for m in spec.source_counters()]]
    observed = raw.observe(metrics_name, *sql_columns(raw.sparkSession, metrics))
    pane_projection = pane_columns(raw.sparkSession, spec, schema, decode)
    panes = observed.where(f"{quoted(KIND)} = {PANE}").select(*pane_projection)
    chain = None
    if spec.report:  # panes as DATA and each call's report as a REPORT row, in one relation
        kind = f"CAST(CASE WHEN {quoted(KIND)} = {METRICS} THEN {REPORT} ELSE {DATA} END AS int) AS {quoted(KIND)}"
        # never NULL (0, false on the panes): a NULL would make the int64 column float64 for pandas
        reports = [f"coalesce({quoted(c)}, CAST(0 AS {REPORT_TYPES[c]})) AS {quoted(c)}" for c in REPORT_COLUMNS]
        chain = (observed.where(f"{quoted(KIND)} IN ({PANE}, {METRICS})")
                 .select(*pane_projection, *sql_columns(raw.sparkSession, [kind, *reports])))
    return observed, panes, pane_projection, chain


#: Spark types whose pandas form the operator gets alike packed or not (udfs/pack.py)
_PLAIN = (T.LongType, T.IntegerType, T.ShortType, T.ByteType, T.DoubleType, T.FloatType, T.BooleanType,
          T.StringType)


def packable(schema: T.StructType) -> bool:
    """The operator's input columns all have a plain Arrow form, so they can travel packed
    (udfs/pack.py) and come out as the engine path's pandas frame (`bucket.arrow_frame`: BIGINTs
    with NULLs exact, NaN apart from NULL)."""
    return all(isinstance(f.dataType, _PLAIN) for f in schema.fields)


def packed_rows(spark: SparkSession, rows: DataFrame, heartbeats: int = 0, combining: tuple | None = None) -> DataFrame:
    """`rows` (bucket, kind, the input columns, the watermark column) as one row per bucket and
    input partition: bucket, kind PACKED, the largest event time and watermark-column value, the
    rows themselves in column PACK (udfs/pack.py); with `heartbeats` (the bucket count), then
    each input partition's heartbeat rows (udfs/heartbeats.py's, in the same pass).

    `combining`: `rows` are combined rows (`combine.combined`); the pass then starts from the rows
    before it, combines and packs them in one Python pass, not two (on small micro-batches each
    pass costs about 50 ms a batch, whatever it computes: docs/dev/streaming-performance.md, 5):
    (the rows with their window start and bucket, the `Combine` job grouping by both, the window
    start's column, the watermark column's shift from the latest event time)."""
    large = conf.flag(spark, conf.ARROW_LARGE_VAR_TYPES)
    fields = {f.name: f.dataType for f in rows.schema.fields}
    latest = tuple(c for c in (WM_COLUMN, LATEST) if c in fields)
    columns = (BUCKET, KIND, EVENT_TIME, *latest)
    schema = T.StructType([T.StructField(c, fields[c], True) for c in columns]
                          + [T.StructField(PACK, T.BinaryType(), True)])
    job = Pack(bucket=BUCKET, kind=KIND, time=EVENT_TIME, columns=columns, latest=latest, packed=PACKED,
               large_binary=large, heartbeats=heartbeats, heartbeat=HEARTBEAT,
               beat_time=LATEST if LATEST in fields else None)
    if combining is None:
        return rows.mapInArrow(job, schema)
    source, combine, start, wm_shift = combining
    return source.mapInArrow(CombinedPack(combine=combine, pack=job, start=start, kind=KIND, data=DATA,
                                          watermark=WM_COLUMN, latest=LATEST, shift=wm_shift), schema)


def operator_schema(spec: StreamSpec, schema: T.StructType, engine_types: dict | None = None) -> T.StructType:
    """The operator's output (`StreamSpec.output_columns`): kind, keys and aggregates of the pane
    schema's types (an aggregate in its `engine_types` type when given, with its overflow column),
    then the executors' wire columns of theirs (sqlflow/columns.py: times as int64 us), counters
    as BIGINT."""
    by_name = {f.name: f.dataType for f in schema.fields}
    types = {**by_name, **(engine_types or {})}
    fields = [T.StructField(KIND, T.IntegerType(), False)]
    fields += [T.StructField(k, by_name[k], True) for k in spec.plan.keys]
    for a in spec.plan.aggregates:
        fields.append(T.StructField(a.output, types[a.output], True))
        if a.may_overflow:  # every SUM says where it overflowed (udfs.streaming.StreamSpec.output_columns)
            fields.append(T.StructField(overflow_column(a.output), T.BooleanType(), True))
    wire = spec.output_columns()[len(fields):]
    types = {**OUTPUT_TYPES, **REPORT_TYPES}
    fields += [T.StructField(c, spark_type(types.get(c, "bigint")), True) for c in wire]  # else a counter
    return T.StructType(fields)


def pane_columns(spark: SparkSession, spec: StreamSpec, schema: T.StructType, decode: dict | None = None) -> list:
    """The pane columns of `schema` from the operator's output (times back to TIMESTAMP, an
    aggregate by its `decode` SQL when given)."""
    decode = decode or {}
    exprs = [decode.get(f.name) or (f"timestamp_micros({quoted(f.name)})" if f.name in PANE_TIMES else quoted(f.name))
             for f in schema.fields]
    texts = [cast_sql(f"({e})", f.dataType, f.name) for e, f in zip(exprs, schema.fields)]
    if any(t is None for t in texts):  # a type without a SQL name here: cast by the column functions
        return [F.expr(e).cast(f.dataType).alias(f.name) for e, f in zip(exprs, schema.fields)]
    return sql_columns(spark, [t for t in texts if t is not None])


def project_batch(raw: DataFrame, stream: PaneStream, kind: int) -> DataFrame:
    """The pane (or dropped-row) columns of one micro-batch of the operator's output."""
    rows = raw.where(F.col(KIND) == kind)
    projection = stream.pane_projection if kind == PANE else stream.dropped_projection
    if projection is None:
        raise ValueError(f"this stream has no projection of its {'panes' if kind == PANE else 'dropped rows'}")
    return rows.select(*projection)


def masked_numbers(columns, schema) -> tuple:
    """The nullable BIGINT, FLOAT and DOUBLE columns among `columns` (`schema`: a StructType):
    PySpark's pandas conversion would make a BIGINT with NULLs float64 and a NULL DOUBLE NaN."""
    fields = {f.name: f for f in schema.fields}
    numbers = (T.LongType, T.FloatType, T.DoubleType)
    return tuple(c for c in columns if isinstance(fields[c].dataType, numbers) and fields[c].nullable)


def masked_number_exprs(columns, masked) -> list[str]:
    """`columns` as SQL expressions for `selectExpr`, each of `masked` as its value with NULL as 0
    plus a boolean NULL mask (`columns.null_mask`), which `udfs.operator_frames.restore_nulls`
    turns back into an exact nullable column on the executor. SQL text rather than
    `pyspark.sql.functions` calls: those are a dozen py4j round trips each."""
    out = []
    for c in columns:
        if c in masked:
            out += [f"coalesce({quoted(c)}, 0) AS {quoted(c)}", f"{quoted(c)} IS NULL AS {quoted(null_mask(c))}"]
        else:
            out.append(quoted(c))
    return out
