"""The engine path on the driver: from the input relation to DataFrames of panes and dropped rows.

The input rows get the engine's column types (times as microseconds) and are hash-partitioned
by their keys into N buckets, `pmod(hash(keys), N)` (`by_bucket`); a `BucketJob`
(sqlflow/udfs/bucket.py) runs the engine once per partition, i.e. per bucket, on the executors.
(`groupBy(bucket).applyInPandas` did the same after sorting every partition by bucket: 10% slower
on benchmarks/compare.py scenario 2.) When the keys, arguments and aggregates all have plain
types (`arrow_ready`: integers, floating point, strings, booleans), `mapInArrow` hands the job
the partition's Arrow batches, which it turns into one pandas frame itself (`ArrowBuckets`),
BIGINTs with NULLs exact; otherwise `mapInPandas` with PySpark's conversion, each BIGINT
shipped with a NULL mask. The Arrow way measured 8-15% faster on scenarios 2 and 2b. Nothing is collected
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

#: Spark types the bucket job outputs as nullable pandas columns (udfs.bucket.BucketJob.kinds)
_KINDS = {"LongType": "long", "BooleanType": "bool"}
#: Spark types whose Arrow and pandas forms are plain (no time zone, no Python objects per value
#: beyond strings): a query whose keys, arguments and aggregates all have one of them runs its
#: bucket jobs on Arrow batches (`mapInArrow`), others on PySpark's pandas conversion
_ARROW = {"LongType": "int64", "IntegerType": "int32", "ShortType": "int16", "ByteType": "int8",
          "DoubleType": "float64", "FloatType": "float32", "BooleanType": "bool_", "StringType": "string"}
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


def arrow_ready(types) -> bool:
    """Whether Spark types `types` all have a plain Arrow form (`_ARROW`)."""
    return all(type(t).__name__ in _ARROW for t in types)


def arrow_schema(schema, large_strings: bool):
    """The Arrow schema of a Spark StructType of `_ARROW` types (strings as large_string when
    Spark's `spark.sql.execution.arrow.useLargeVarTypes` is on: mapInArrow wants exactly its types)."""
    import pyarrow as pa

    def arrow_type(t):
        name = _ARROW[type(t).__name__]
        return pa.large_string() if name == "string" and large_strings else getattr(pa, name)()

    return pa.schema([pa.field(f.name, arrow_type(f.dataType), True) for f in schema.fields])


def _integral(dtype) -> bool:
    from pyspark.sql import types as T

    return isinstance(dtype, (T.ByteType, T.ShortType, T.IntegerType, T.LongType))


def exact_bigints(columns, schema) -> tuple:
    """The nullable BIGINT columns among `columns` (`schema`: a Spark StructType)."""
    from pyspark.sql import types as T

    fields = {f.name: f for f in schema.fields}
    return tuple(c for c in columns if isinstance(fields[c].dataType, T.LongType) and fields[c].nullable)


def _q(name: str) -> str:
    """A column name quoted for Spark SQL."""
    return "`" + name.replace("`", "``") + "`"


def exact_bigint_exprs(columns, masked) -> list[str]:
    """`columns` as SQL expressions for `selectExpr`, each BIGINT of `masked` as its value with
    NULL as 0 plus a boolean NULL mask (`udfs.bucket.NULL_MASK`): Arrow hands pandas an integer
    column with NULLs as float64, where 2^53 and 2^53 + 1 are one number (two keys would become
    one group). `udfs.bucket.restore_nulls` rebuilds the exact nullable column on the executor.
    SQL text rather than `pyspark.sql.functions` calls: those are a dozen py4j round trips each."""
    from ..udfs.bucket import NULL_MASK

    out = []
    for c in columns:
        if c in masked:
            out += [f"coalesce({_q(c)}, 0L) AS {_q(c)}", f"{_q(c)} IS NULL AS {_q(NULL_MASK + c)}"]
        else:
            out.append(_q(c))
    return out


def run_engine(ws, rel: InputRelation, raw, agg_types: list, *, buckets: int, timeline=None,
               p_end: int | None = None) -> EngineRun:
    """Build the engine path's DataFrames for one windowed SELECT (lazily: nothing runs yet).

    `raw` is the input relation as a DataFrame (raw values), `agg_types` the Spark type of each
    aggregate call.
    """
    from pyspark.sql import types as T

    from ..udfs.bucket import (DROPPED, DROPPED_END, DROPPED_START, FINAL, KIND, OUTPUT_COLUMNS, PANE, REASON,
                               ArrowBuckets, BucketJob)

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

    # Arrow batches hand BIGINTs with NULLs over exactly (udfs.bucket.arrow_frame); PySpark's pandas
    # conversion makes them float64, so that path ships them with NULL masks (exact_bigint_exprs)
    arrow = arrow_ready([schema[c] for c in rel.keys + rel.args] + list(agg_types))
    lifted = lifted_rows(plan, rel, raw, schema, buckets, masks=not arrow) if liftable(plan, rel, schema) else None
    if lifted is not None:
        rows, plan, masked, extra_integral = lifted
    else:
        masked = exact_bigints(rel.keys + rel.args, raw.schema) if not arrow else ()
        extra_integral = ()
        # engine input: times in microseconds; BIGINTs with a NULL mask (see exact_bigint_exprs)
        columns = exact_bigint_exprs(rel.keys + rel.args, masked)
        columns.append(f"unix_micros(CAST({_q(EVENT_TIME)} AS TIMESTAMP)) AS {_q(EVENT_TIME)}")
        if rel.replay:
            columns.append(f"unix_micros(CAST({_q(ARRIVAL_TIME)} AS TIMESTAMP)) AS {_q(ARRIVAL_TIME)}")
        if rel.gap:
            columns.append(f"unix_micros(timestamp_micros(0) + {_q(GAP)}) AS {_q(GAP)}")
        columns += [_q(when_column(i)) for i in range(rel.n_when)]
        rows = by_bucket(raw.selectExpr(*columns), rel.keys, buckets)

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
                    weight=WEIGHT if lifted is not None else None, shared=shared,
                    kinds=tuple(_KINDS.get(type(f.dataType).__name__, "") for f in out_schema.fields))

    if arrow:
        large = (raw.sparkSession.conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false") or "").lower() == "true"
        output = rows.mapInArrow(ArrowBuckets(job, arrow_schema(out_schema, large)), schema=out_schema)
    else:
        def run_partition(batches):
            import pandas as pd

            frames = list(batches)
            if frames:
                yield job(None, frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True))

        output = rows.mapInPandas(run_partition, schema=out_schema)

    pane_columns = [_q(k) for k in rel.keys] + [_q(agg_column(j)) for j in range(len(agg_types))]
    for name, kind in PANE_TYPES:
        pane_columns.append(f"timestamp_micros({_q(name)}) AS {_q(name)}" if kind == "timestamp" else _q(name))
    if ws.windowing.mode.retracting:
        pane_columns.append("is_retraction")
    pane_rows = output.where(f"{_q(KIND)} = '{PANE}'")
    panes = pane_rows.selectExpr(*pane_columns)
    final = pane_rows.where(_q(FINAL)).selectExpr(*pane_columns)
    dropped = output.where(f"{_q(KIND)} = '{DROPPED}'").selectExpr(
        *[_q(k) for k in rel.keys], *[_q(a) for a in rel.args],
        f"timestamp_micros({_q(EVENT_TIME)}) AS event_time",
        f"timestamp_micros({_q(ARRIVAL_TIME)}) AS arrival_time",
        f"{_q(REASON)} AS reason",
        f"timestamp_micros({_q(DROPPED_START)}) AS window_start",
        f"timestamp_micros({_q(DROPPED_END)}) AS window_end")
    return EngineRun(output, panes, final, dropped, buckets, combined=lifted is not None)


def by_bucket(rows, keys, buckets: int):
    """`rows` hash-partitioned by the keys into `buckets` partitions, pmod(murmur3(keys), N):
    every row of a key in one partition, which is one bucket job."""
    from pyspark.sql import functions as F

    return rows.repartition(buckets, *[F.col(k) for k in keys]) if keys else rows.repartition(1)


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


def lifted_rows(plan: EnginePlan, rel: InputRelation, raw, schema: dict, buckets: int, *, masks: bool = True):
    """The engine input with rows combined per key and gap-aligned slice of event time (module doc).

    The rows are hash-partitioned by bucket first, so the combining aggregate and the bucket jobs
    share that one shuffle. Rows without an event time stay single (a unique id joins their
    grouping key) and keep their argument values, so they are dropped and reported as before.
    Returns (rows partitioned by bucket, plan over the partial columns, masked BIGINT columns,
    integral partial columns)."""
    from pyspark.sql import functions as F

    gap = plan.window.gap.micros
    et = _q(EVENT_TIME)
    keys = [_q(k) for k in rel.keys]
    partial_names = [f"__sqlflow_part{j}" for j in range(len(plan.aggregates))]
    partials, aggregates = [], []
    for name, agg in zip(partial_names, plan.aggregates):
        arg = "1" if agg.kind == "count_star" else _q(agg.column)
        partials.append(f"{'count' if agg.kind == 'count_star' else agg.kind}({arg}) AS {_q(name)}")
        aggregates.append(Aggregate(_LIFTABLE[agg.kind], name, agg.output, agg.ignore_nulls))
    echoes = [f"first(IF({et} IS NULL, {_q(a)}, NULL), true) AS {_q(a)}" for a in rel.args]
    timed = by_bucket(raw.selectExpr(
        *keys, *[_q(a) for a in rel.args], f"unix_micros(CAST({et} AS TIMESTAMP)) AS {et}"), rel.keys, buckets)
    sliced = timed.selectExpr("*", f"{et} - pmod({et}, {gap}L) AS __slice",
                              f"IF({et} IS NULL, monotonically_increasing_id(), NULL) AS __single")

    def element(time, weight, parts):
        fields = [f"'{EVENT_TIME}', {time}", f"'{WEIGHT}', {weight}"]
        fields += [f"'{n}', {v}" for n, v in zip(partial_names, parts)]
        fields += [f"'{a}', {_q(a)}" for a in rel.args]
        return f"named_struct({', '.join(fields)})"

    first = element("__lo", _q(WEIGHT), [_q(n) for n in partial_names])
    # the neutral partial: COUNT 0, otherwise a NULL of the partial's type
    last = element("__hi", "0L", ["0L" if agg.kind in ("count_star", "count") else f"IF(false, {_q(n)}, NULL)"
                                  for n, agg in zip(partial_names, plan.aggregates)])
    combined = sliced.groupBy(*rel.keys, "__slice", "__single").agg(
        F.expr(f"min({et}) AS __lo"), F.expr(f"max({et}) AS __hi"), F.expr(f"count(1) AS {_q(WEIGHT)}"),
        *[F.expr(p) for p in partials + echoes])
    rows = combined.selectExpr(
        *keys, f"explode(IF(__hi > __lo, array({first}, {last}), array({first}))) AS __e").selectExpr(*keys, "__e.*")
    types = {f.name: f.dataType for f in rows.schema.fields}
    masked = exact_bigints(rel.keys + rel.args + partial_names, rows.schema) if masks else ()
    rows = rows.selectExpr(*exact_bigint_exprs(rel.keys + rel.args + partial_names, masked), et, _q(WEIGHT))
    integral = tuple(n for n in partial_names if _integral(types[n]))
    lifted_plan = EnginePlan(plan.windowing, tuple(aggregates), keys=plan.keys, custom_windows=plan.custom_windows)
    return rows, lifted_plan, masked, integral
