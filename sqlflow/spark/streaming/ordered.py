"""Ordering a live stream by event time: the driver side of udfs/ordered_stream.py.

The source's rows (the user's columns, the tie-breakers, the event time as microseconds) are
packed per input partition (udfs/pack.py), unioned with the finish marker's rows, watermarked on
a column shifted ten years ahead (so that Spark drops no row itself: the operator judges and
counts the late ones, docs/streaming.md 3.2; under ASCENDING PER on a constant, the operator
computing the watermark itself) and handed to one transformWithStateInPandas group.
Its output rows are released rows (KIND PANE, in order), dropped rows (KIND DROPPED) and one
counter row per call (KIND METRICS, observed as `sqlflow`): `PaneStream` as the windowed stream's,
so `start`, `finish`, `dropped_path`, `query_metrics` and `watermark_log` work alike.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ...columns import (BUCKET, DATA, DROPPED, DROPPED_ARRIVAL_TIME, DROPPED_EVENT_TIME, DROPPED_REASON, EMIT_TIME,
                        EVENT_TIME, FINISH, KIND, PANE, PARTITION, PREFIX, REASON, WM_COLUMN, metric_column)
from ...udfs.ordered_stream import ORDER_COUNTERS, ORDER_GAUGES, OrderSpec, SourceRule
from ...udfs.tws import OrderProcessor
from ..log_filter import quiet
from .metrics import METRICS_NAME
from .pane_stream import PaneStream
from .stateful import packed_rows
from .watermark import UNBOUNDED_SHIFT, interval_ms

@dataclass(frozen=True)
class NotOwned:
    """What `sink.owned_obstacle_of` reads of a stream the owned-sink executor does not run."""

    why_not: str = "an ordering by event time (it runs on its stateful operator)"


#: each row's partition under ASCENDING PER (its value as a string)
PARTITION_COLUMN = PARTITION


def user_column(i: int) -> str:
    return f"{PREFIX}c{i}"


def tie_column(i: int) -> str:
    return f"{PREFIX}tie{i}"


def _to_wire(column, data_type):
    """A column as the operator carries it: timestamps as microseconds, dates as days; a
    TIMESTAMP_NTZ as it is (Arrow holds its wall-clock microseconds; Spark's conversions to and
    from numbers go through the session's time zone, which skips some wall-clock times)."""
    if isinstance(data_type, T.TimestampType):
        return F.unix_micros(column)
    if isinstance(data_type, T.DateType):
        return F.unix_date(column)
    return column


def from_wire(column, data_type):
    """A carried column back from its wire form (TIMESTAMP as microseconds, DATE as days) to `data_type`."""
    if isinstance(data_type, T.TimestampType):
        return F.timestamp_micros(column)
    if isinstance(data_type, T.DateType):
        return F.date_from_unix_date(column)
    return column.cast(data_type)


#: the column types the operator carries (through Arrow, exactly)
CARRIED = (T.LongType, T.IntegerType, T.ShortType, T.ByteType, T.DoubleType, T.FloatType, T.BooleanType,
           T.StringType, T.TimestampType, T.TimestampNTZType, T.DateType)


def ordered_stream(rows: DataFrame, *, names: list[str], event_time: str, ties: list[tuple[bool, bool]],
                   delay: int, finish_dir: str | None, metrics_name: str = METRICS_NAME,
                   per_partition: bool = False, idle: int | None = None, pass_through: bool = False,
                   sources: tuple[SourceRule, ...] = (), source: str | None = None, time_shift: int = 0) -> PaneStream:
    """The released rows of `rows` (a streaming DataFrame: the user's columns `names`, then one
    column per tie-breaker, `ties` giving each one's (descending, NULLs first)) ordered by the
    event-time column `event_time` under `WATERMARK ... DELAY OF delay` (us); with
    `per_partition`, under `ASCENDING PER` instead (the last column of `rows` is each row's
    partition as a string; `idle`: the IDLE TIMEOUT in us), on the operator's own watermark
    (Spark's is then a constant). The released rows have the user's columns and `emit_time`;
    the dropped rows the user's columns, `event_time`, `arrival_time` (the batch's time) and
    `reason`. With `pass_through` the rows are not held: each batch releases its rows that are not
    behind their partition (`OrderSpec.pass_through`, the first stage of `partitioned`); there
    `sources` are the rules of several sources, `source` the name in `names` of the column of
    each row's source number, `time_shift` the query's (`OrderSpec.sources`)."""
    spark = rows.sparkSession
    fields = rows.schema.fields
    user, tie_fields = fields[:len(names)], fields[len(names):len(names) + len(ties)]
    shift = UNBOUNDED_SHIFT
    wire = [_to_wire(rows[i], f.dataType).alias(user_column(i))
            for i, f in enumerate(user)]
    wire += [_to_wire(rows[len(names) + j], f.dataType).alias(tie_column(j)) for j, f in enumerate(tie_fields)]
    if per_partition:
        wire.append(rows[len(fields) - 1].alias(PARTITION_COLUMN))
    et = F.unix_micros(rows[names.index(event_time)].cast("timestamp"))
    data = rows.select(F.lit(0).cast("int").alias(BUCKET), F.lit(DATA).cast("int").alias(KIND),
                       et.alias(EVENT_TIME), *wire)
    # Spark's watermark: under DELAY OF the ordering's (on a column shifted ahead, so that Spark drops no
    # row itself); under ASCENDING PER a constant that Spark never drops a row behind and never moves,
    # there only for the batch's processing time (EventTime mode gives it; timeMode None does not)
    data = data.withColumn(WM_COLUMN, F.timestamp_micros(F.lit(shift) if per_partition else F.col(EVENT_TIME) + F.lit(shift)))
    columns = (EVENT_TIME, *[user_column(i) for i in range(len(user))], *[tie_column(j) for j in range(len(ties))],
               *([PARTITION_COLUMN] if per_partition else []))
    packed = packed_rows(spark, data)
    parts = [packed]
    if finish_dir is not None:
        os.makedirs(finish_dir, exist_ok=True)
        control = spark.readStream.schema("finish string").json(finish_dir)
        parts.append(control.select(*[F.lit(0).cast("int").alias(BUCKET) if c == BUCKET else
                                      F.lit(FINISH).cast("int").alias(KIND) if c == KIND else
                                      F.lit(None).cast(packed.schema[c].dataType).alias(c)
                                      for c in packed.columns]))
    union = parts[0]
    for part in parts[1:]:
        union = union.unionByName(part)
    union = union.withWatermark(WM_COLUMN, "1 day" if per_partition else interval_ms(delay + shift)).drop(WM_COLUMN)
    spec = OrderSpec(columns=columns, ties=tuple((tie_column(j), d, n) for j, (d, n) in enumerate(ties)),
                     delay_ms=(delay + shift) // 1000, column_shift=shift, time=EVENT_TIME,
                     frame_columns=tuple(union.columns), partition=PARTITION_COLUMN if per_partition else None,
                     idle=idle, pass_through=pass_through, sources=sources,
                     source=user_column(names.index(source)) if source is not None else None, time_shift=time_shift,
                     wall_clock=tuple(
                         [user_column(i) for i, f in enumerate(user) if isinstance(f.dataType, T.TimestampNTZType)]
                         + [tie_column(j) for j, f in enumerate(tie_fields) if isinstance(f.dataType, T.TimestampNTZType)]))
    types = {EVENT_TIME: T.LongType(), KIND: T.IntegerType(), EMIT_TIME: T.LongType(), REASON: T.StringType()}
    types.update({user_column(i): _wire_type(f.dataType) for i, f in enumerate(user)})
    types.update({tie_column(j): _wire_type(f.dataType) for j, f in enumerate(tie_fields)})
    types[PARTITION_COLUMN] = T.StringType()
    schema = T.StructType([T.StructField(c, types.get(c, T.LongType()), c != KIND) for c in spec.output_columns()])
    quiet(spark)
    raw = union.groupBy(BUCKET).transformWithStateInPandas(
        statefulProcessor=OrderProcessor(spec), outputStructType=schema, outputMode="Append", timeMode="EventTime")
    sums = [F.coalesce(F.sum(metric_column(m)), F.lit(0)).alias(m) for m in ORDER_COUNTERS]
    gauges = [F.max(metric_column(m)).alias(m) for m in ORDER_GAUGES]
    observed = raw.observe(metrics_name, *sums, *gauges)
    released = [from_wire(F.col(user_column(i)), f.dataType).alias(f.name) for i, f in enumerate(user)]
    released.append(F.timestamp_micros(F.col(EMIT_TIME)).alias(EMIT_TIME))
    dropped = [from_wire(F.col(user_column(i)), f.dataType).alias(f.name) for i, f in enumerate(user)]
    dropped += [F.timestamp_micros(F.col(EVENT_TIME)).alias(DROPPED_EVENT_TIME),
                F.timestamp_micros(F.col(EMIT_TIME)).alias(DROPPED_ARRIVAL_TIME), F.col(REASON).alias(DROPPED_REASON)]
    return PaneStream(observed.where(F.col(KIND) == PANE).select(*released), observed,
                      observed.where(F.col(KIND) == DROPPED).select(*dropped), finish_dir, "stateful", 1,
                      metrics_name, released, dropped, owned=NotOwned())


def _wire_type(data_type):
    if isinstance(data_type, T.TimestampType):
        return T.LongType()
    if isinstance(data_type, T.DateType):
        return T.IntegerType()
    return data_type
