"""The engine path on the driver: from the input relation to DataFrames of panes and dropped rows.

The input rows get the engine's column types (times as microseconds), a bucket column
`pmod(hash(keys), N)`, and go through `groupBy(bucket).applyInPandas(BucketJob)`
(sqlflow/udfs/bucket.py): the engine runs once per bucket on the executors. Nothing is collected
on the driver except the watermark timeline of a replay (`timeline.py`).

**Combining before the shuffle** (`lifted_rows`): bounded sessions with a static gap, a trigger
that only fires at the end of input and aggregates that combine (COUNT, SUM of exact numbers, MIN,
MAX) ship far fewer rows. Rows of a key whose event times fall in the same gap-aligned slice
`[k*gap, (k+1)*gap)` are less than a gap apart, so they always end up in the same session: Spark
hash-partitions the rows by bucket and combines them there (one shuffle serves both) into two
engine elements, one
at the slice's first event time carrying the partial aggregates and one at its last carrying
neutral ones (COUNT 0, SUM/MIN/MAX NULL), and the engine sums COUNTs and SUMs, takes MIN and MAX.
The two elements span exactly what the rows spanned, so sessions, their bounds and their values
are those of the rows (measured by benchmarks/compare.py: 2M skewed clicks become 0.42M elements
and the sessions query runs about 1.35x faster). Rows without an event time skip the combining and are dropped and reported
as before.

The result columns get Spark's types: the aggregates take the types Spark's analysis gives the
original aggregate calls (`agg_types`), so `SUM(int)` is a BIGINT even though pandas saw floats.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..engine.aggregates import Aggregate
from ..engine.plan import ARRIVAL_TIME, EVENT_TIME, GAP, EnginePlan, when_column
from ..engine.windows import registered_window_fn
from .. import ast
from ..engine import vectorised
from .inputs import InputRelation, agg_column

BUCKET = "__sqlflow_bucket"
#: how many input rows an engine element stands for (combined rows: see lifted_rows)
WEIGHT = "__sqlflow_weight"
#: aggregate kinds whose partial results combine (the engine then sums COUNTs)
#: replay timelines with more steps than this travel as a broadcast variable
_BROADCAST_STEPS = 10_000

_LIFTABLE = {"count_star": "sum", "count": "sum", "sum": "sum", "min": "min", "max": "max"}

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
    combined: bool = False  # rows were combined before the shuffle (lifted_rows)


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
    aggregates = tuple(Aggregate(call.kind, arg, agg_column(j), call.ignore_nulls)
                       for j, (call, arg) in enumerate(zip(ws.calls, rel.call_args)))
    fn = ws.window
    custom = {}
    if isinstance(fn, ast.CustomWindow):
        cls = registered_window_fn(fn.name)
        if cls is not None:
            custom[fn.name.lower()] = cls
    plan = EnginePlan(ws.windowing, aggregates, keys=tuple(rel.keys), custom_windows=custom)

    keyed = bool(rel.keys)
    bucket = F.pmod(F.hash(*[F.col(k) for k in rel.keys]), F.lit(buckets)) if keyed else F.lit(0)
    lifted = lifted_rows(plan, rel, raw, schema, bucket) if liftable(plan, rel, schema) else None
    if lifted is not None:
        rows, plan, masked, extra_integral = lifted
    else:
        masked = exact_bigints(rel.keys + rel.args, raw.schema)
        extra_integral = ()
        # engine input: times in microseconds; BIGINTs with a NULL mask (see exact_bigint_columns)
        columns = exact_bigint_columns(rel.keys + rel.args, masked)
        columns.append(F.unix_micros(F.col(EVENT_TIME).cast("timestamp")).alias(EVENT_TIME))
        if rel.replay:
            columns.append(F.unix_micros(F.col(ARRIVAL_TIME).cast("timestamp")).alias(ARRIVAL_TIME))
        if rel.gap:
            columns.append(F.unix_micros(F.timestamp_micros(F.lit(0)) + F.col(GAP)).alias(GAP))
        columns += [F.col(when_column(i)) for i in range(rel.n_when)]
        rows = raw.select(*columns).withColumn(BUCKET, bucket)

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
    integral = tuple(c for c in rel.keys + rel.args if _integral(schema[c])) + extra_integral
    shared = None
    if timeline is not None and len(timeline.times) > _BROADCAST_STEPS:
        try:  # once per executor process rather than inside every task's closure
            shared = raw.sparkSession.sparkContext.broadcast(timeline)
            timeline = None
        except Exception:  # noqa: BLE001  (Spark Connect has no broadcast variables)
            shared = None
    job = BucketJob(plan, columns=tuple(out_schema.fieldNames()), keys=tuple(rel.keys), args=tuple(rel.args),
                    integral=integral, masked=masked, coerce=coerce, timeline=timeline, p_end=p_end, replay=rel.replay,
                    weight=WEIGHT if lifted is not None else None, shared=shared)

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
    return EngineRun(output, panes, final, dropped, buckets, combined=lifted is not None)


def liftable(plan: EnginePlan, rel: InputRelation, schema: dict) -> bool:
    """Whether `lifted_rows` applies (see the module doc)."""
    from pyspark.sql import types as T

    if rel.replay or rel.gap or rel.n_when or not isinstance(plan.window, ast.Sessions):
        return False
    if not vectorised.collapsible(plan.trigger):
        return False
    for agg in plan.aggregates:
        if agg.kind not in _LIFTABLE:
            return False
        if agg.kind == "sum" and isinstance(schema[agg.column], (T.FloatType, T.DoubleType)):
            return False  # combining would change the order of floating-point additions
    return True


def lifted_rows(plan: EnginePlan, rel: InputRelation, raw, schema: dict, bucket):
    """The engine input with rows combined per key and gap-aligned slice of event time (module doc).

    The rows are hash-partitioned by `bucket` first, so the combining aggregate and the bucket jobs
    share that one shuffle. Rows without an event time stay single (a unique id joins their
    grouping key) and keep their argument values, so they are dropped and reported as before.
    Returns (rows with the BUCKET column, plan over the partial columns, masked BIGINT columns,
    integral partial columns)."""
    from pyspark.sql import functions as F

    gap = plan.window.gap.micros
    et = F.col(EVENT_TIME)
    partial_names = [f"__sqlflow_part{j}" for j in range(len(plan.aggregates))]
    partials, neutral, aggregates = [], [], []
    for name, agg in zip(partial_names, plan.aggregates):
        if agg.kind == "count_star":
            partials.append(F.count(F.lit(1)).alias(name))
        elif agg.kind == "count":
            partials.append(F.count(F.col(agg.column)).alias(name))
        else:
            partials.append(getattr(F, agg.kind)(F.col(agg.column)).alias(name))
        aggregates.append(Aggregate(_LIFTABLE[agg.kind], name, agg.output, agg.ignore_nulls))
    timed = (raw.withColumn(EVENT_TIME, F.unix_micros(F.col(EVENT_TIME).cast("timestamp")))
             .withColumn(BUCKET, bucket).repartition(F.col(BUCKET)))
    single = F.when(et.isNull(), F.monotonically_increasing_id())
    echoes = [F.first(F.when(et.isNull(), F.col(a)), ignorenulls=True).alias(a) for a in rel.args]
    combined = (timed.groupBy(BUCKET, *rel.keys, (et - F.pmod(et, F.lit(gap))).alias("__slice"), single.alias("__single"))
                .agg(F.min(et).alias("__lo"), F.max(et).alias("__hi"), F.count(F.lit(1)).alias(WEIGHT),
                     *partials, *echoes))
    types = {f.name: f.dataType for f in combined.schema.fields}
    for name, agg in zip(partial_names, plan.aggregates):
        zero = F.lit(0).cast("bigint") if agg.kind in ("count_star", "count") else F.lit(None).cast(types[name])
        neutral.append(zero.alias(name))
    args = [F.col(a) for a in rel.args]
    first = F.struct(F.col("__lo").alias(EVENT_TIME), F.col(WEIGHT), *[F.col(n) for n in partial_names], *args)
    last = F.struct(F.col("__hi").alias(EVENT_TIME), F.lit(0).cast("bigint").alias(WEIGHT), *neutral, *args)
    rows = (combined.select(BUCKET, *rel.keys, F.explode(F.when(F.col("__hi") > F.col("__lo"), F.array(first, last))
                                                         .otherwise(F.array(first))).alias("__e"))
            .select(BUCKET, *rel.keys, "__e.*"))
    masked = exact_bigints(rel.keys + rel.args + partial_names, rows.schema)
    rows = rows.select(F.col(BUCKET), *exact_bigint_columns(rel.keys + rel.args + partial_names, masked),
                       F.col(EVENT_TIME), F.col(WEIGHT))
    integral = tuple(n for n in partial_names if _integral(types[n]))
    lifted_plan = EnginePlan(plan.windowing, tuple(aggregates), keys=plan.keys, custom_windows=plan.custom_windows)
    return rows, lifted_plan, masked, integral
