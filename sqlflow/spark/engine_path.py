"""The engine path on the driver: from the input relation to DataFrames of panes and dropped rows.

The input rows get the engine's column types (times as microseconds), a bucket column
`pmod(hash(keys), N)`, and go through `groupBy(bucket).applyInPandas(BucketJob)`
(sqlflow/udfs/bucket.py): the engine runs once per bucket on the executors. Nothing is collected
on the driver except the watermark timeline of a replay (`timeline.py`).

The result columns get Spark's types: the aggregates take the types Spark's analysis gives the
original aggregate calls (`agg_types`), so `SUM(int)` is a BIGINT even though pandas saw floats.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..engine.aggregates import Aggregate
from ..engine.plan import ARRIVAL_TIME, EVENT_TIME, GAP, EnginePlan, when_column
from ..engine.windows import registered_window_fn
from .. import ast
from .inputs import InputRelation, agg_column

BUCKET = "__sqlflow_bucket"

PANE_TYPES = (("window_start", "timestamp"), ("window_end", "timestamp"), ("pane_index", "bigint"),
              ("pane_timing", "string"), ("is_last", "boolean"), ("emit_time", "timestamp"))


@dataclass
class EngineRun:
    """The DataFrames of one windowed SELECT run by the engine."""

    output: object        # everything the bucket jobs returned (kinds P, D, M)
    panes: object         # keys (k0...), aggregates (agg0...), pane columns
    final: object         # the panes that are their window's final value
    dropped: object       # dropped input rows (internal column names)
    buckets: int


def _coercion(dtype) -> tuple[str, int] | None:
    from pyspark.sql import types as T

    if isinstance(dtype, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
        return "int", 0
    if isinstance(dtype, (T.FloatType, T.DoubleType)):
        return "float", 0
    if isinstance(dtype, T.DecimalType):
        return "decimal", dtype.scale
    return None


def _integral(dtype) -> bool:
    from pyspark.sql import types as T

    return isinstance(dtype, (T.ByteType, T.ShortType, T.IntegerType, T.LongType))


def exact_bigints(columns, schema) -> tuple:
    """The nullable BIGINT columns among `columns` (`schema`: a Spark StructType)."""
    from pyspark.sql import types as T

    fields = {f.name: f for f in schema.fields}
    return tuple(c for c in columns if isinstance(fields[c].dataType, T.LongType) and fields[c].nullable)


def exact_bigint_columns(columns, masked) -> list:
    """`columns` as Spark columns, each BIGINT of `masked` as its value with NULL as 0 plus a
    boolean NULL mask (`udfs.bucket.NULL_MASK`): Arrow hands pandas an integer column with NULLs
    as float64, where 2^53 and 2^53 + 1 are one number (two keys would become one group).
    `udfs.bucket.restore_nulls` rebuilds the exact nullable column on the executor."""
    from pyspark.sql import functions as F

    from ..udfs.bucket import NULL_MASK

    out = []
    for c in columns:
        if c in masked:
            out += [F.coalesce(F.col(c), F.lit(0).cast("bigint")).alias(c), F.col(c).isNull().alias(NULL_MASK + c)]
        else:
            out.append(F.col(c))
    return out


def run_engine(ws, rel: InputRelation, raw, agg_types: list, *, buckets: int, timeline=None,
               p_end: int | None = None) -> EngineRun:
    """Build the engine path's DataFrames for one windowed SELECT (lazily: nothing runs yet).

    `raw` is the input relation as a DataFrame (raw values), `agg_types` the Spark type of each
    aggregate call.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from ..udfs.bucket import DROPPED, DROPPED_END, DROPPED_START, FINAL, KIND, OUTPUT_COLUMNS, PANE, REASON, BucketJob

    schema = {f.name: f.dataType for f in raw.schema.fields}
    masked = exact_bigints(rel.keys + rel.args, raw.schema)
    # engine input: times in microseconds; BIGINTs with a NULL mask (see exact_bigint_columns)
    columns = exact_bigint_columns(rel.keys + rel.args, masked)
    columns.append(F.unix_micros(F.col(EVENT_TIME).cast("timestamp")).alias(EVENT_TIME))
    if rel.replay:
        columns.append(F.unix_micros(F.col(ARRIVAL_TIME).cast("timestamp")).alias(ARRIVAL_TIME))
    if rel.gap:
        columns.append(F.unix_micros(F.timestamp_micros(F.lit(0)) + F.col(GAP)).alias(GAP))
    columns += [F.col(when_column(i)) for i in range(rel.n_when)]
    rows = raw.select(*columns)
    keyed = bool(rel.keys)
    bucket = F.pmod(F.hash(*[F.col(k) for k in rel.keys]), F.lit(buckets)) if keyed else F.lit(0)
    rows = rows.withColumn(BUCKET, bucket)

    aggregates = tuple(Aggregate(call.kind, arg, agg_column(j), call.ignore_nulls)
                       for j, (call, arg) in enumerate(zip(ws.calls, rel.call_args)))
    fn = ws.window
    custom = {}
    if isinstance(fn, ast.CustomWindow):
        cls = registered_window_fn(fn.name)
        if cls is not None:
            custom[fn.name.lower()] = cls
    plan = EnginePlan(ws.windowing, aggregates, keys=tuple(rel.keys), custom_windows=custom)

    # output schema: bookkeeping columns, keys, aggregates (Spark's types), argument echoes
    bookkeeping = {
        KIND: T.StringType(), REASON: T.StringType(), FINAL: T.BooleanType(), "__sqlflow_rows": T.LongType(),
        "window_start": T.LongType(), "window_end": T.LongType(), "pane_index": T.LongType(),
        "pane_timing": T.StringType(), "is_last": T.BooleanType(), "emit_time": T.LongType(),
        "is_retraction": T.BooleanType(), EVENT_TIME: T.LongType(), ARRIVAL_TIME: T.LongType(),
        DROPPED_START: T.LongType(), DROPPED_END: T.LongType(),
    }
    fields = [T.StructField(name, bookkeeping[name], True) for name in OUTPUT_COLUMNS]
    fields += [T.StructField(k, schema[k], True) for k in rel.keys]
    fields += [T.StructField(agg_column(j), t, True) for j, t in enumerate(agg_types)]
    fields += [T.StructField(a, schema[a], True) for a in rel.args]
    out_schema = T.StructType(fields)
    coerce = tuple((agg_column(j), *_coercion(t)) for j, t in enumerate(agg_types) if _coercion(t))
    integral = tuple(c for c in rel.keys + rel.args if _integral(schema[c]))
    job = BucketJob(plan, columns=tuple(out_schema.fieldNames()), keys=tuple(rel.keys), args=tuple(rel.args),
                    integral=integral, masked=masked, coerce=coerce, timeline=timeline, p_end=p_end, replay=rel.replay)

    def run_bucket(key, pdf):
        return job(key, pdf)

    output = rows.groupBy(BUCKET).applyInPandas(run_bucket, schema=out_schema)

    pane_columns = [F.col(k) for k in rel.keys] + [F.col(agg_column(j)) for j in range(len(agg_types))]
    for name, kind in PANE_TYPES:
        col = F.col(name)
        pane_columns.append((F.timestamp_micros(col) if kind == "timestamp" else col).alias(name))
    if ws.windowing.mode.retracting:
        pane_columns.append(F.col("is_retraction"))
    pane_rows = output.where(F.col(KIND) == F.lit(PANE))
    panes = pane_rows.select(*pane_columns)
    final = pane_rows.where(F.col(FINAL)).select(*pane_columns)
    dropped = output.where(F.col(KIND) == F.lit(DROPPED)).select(
        *[F.col(k) for k in rel.keys], *[F.col(a) for a in rel.args],
        F.timestamp_micros(F.col(EVENT_TIME)).alias("event_time"),
        F.timestamp_micros(F.col(ARRIVAL_TIME)).alias("arrival_time"),
        F.col(REASON).alias("reason"),
        F.timestamp_micros(F.col(DROPPED_START)).alias("window_start"),
        F.timestamp_micros(F.col(DROPPED_END)).alias("window_end"))
    return EngineRun(output, panes, final, dropped, buckets)
