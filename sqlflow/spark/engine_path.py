"""The engine path on the driver: from the input relation to DataFrames of panes and dropped rows.

The input rows get the engine's column types (times as microseconds) and are hash-partitioned
by their keys into N buckets, `pmod(hash(keys), N)` (`by_bucket`); a `BucketJob`
(sqlflow/udfs/bucket.py) runs the engine once per partition, i.e. per bucket, on the executors.
(`groupBy(bucket).applyInPandas` did the same after sorting every partition by bucket: 10% slower
on benchmarks/compare.py scenario 2.) `mapInArrow` hands the job the partition's Arrow batches,
which it turns into one pandas frame itself (`ArrowBuckets`), exactly, for every Spark type an
Arrow batch carries (PySpark's pandas conversion measured 8-15% slower on scenarios 2 and 2b, and
makes BIGINTs with NULLs float64). Keys are first normalised as Spark's GROUP BY normalises them
(`normalised_key`: -0.0 is 0.0 and every NaN the same, also inside arrays, structs and map
values), so that equal keys hash to the same bucket; a key of collated strings is replaced by the
smallest member of its group (`sqlflow.spark.collation`). Nothing is collected on the driver except
the watermark timeline of a replay (`timeline.py`).

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

**A hot key** (`BucketJob.chunked`): where a replay's rows combine (`replay_combining`), a bucket
above `spark.sqlflow.bucketChunkRows` rows is read and combined in chunks by its bucket job, so
one key with many rows needs memory for its combined groups and late rows, not for its rows.

The result columns get Spark's types: the aggregates take the types Spark's analysis gives the
original aggregate calls (`agg_types`), and what depends on Spark's type rules (overflow, decimal
precision, AVG of decimals) is finished by Spark on the engine's exact output (`handover.py`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from .. import ast
from ..columns import (ARRIVAL_TIME, BUCKET_OUTPUT_COLUMNS, DROPPED, DROPPED_ARRIVAL_TIME, DROPPED_EVENT_TIME,
                       DROPPED_REASON, EMIT_TIME, EVENT_TIME, FINAL, GAP, HOLD_SINCE, HOLD_UNTIL, IS_RETRACTION, KIND,
                       OUTPUT_TIME, OUTPUT_TYPES, PANE, PANE_COLUMNS, PANE_TIMES, REASON, SOURCE, WEIGHT, WINDOW_END,
                       WINDOW_START, agg_column, part_column, when_column)
from ..engine import (BOUNDED, COMBINING, REPLAY, Aggregate, EnginePlan, arrival_grid, custom_windows_of, path_for,
                      spread_blocks)
from . import conf, handover
from .collation import representative
from ..plan.inputs import InputRelation
from ..plan.relations import quoted
from .select_types import spark_type

if TYPE_CHECKING:  # pragma: no cover
    from pyspark.sql import DataFrame

#: replay timelines with more steps than this travel as a broadcast variable
_BROADCAST_STEPS = 10_000


@dataclass
class EngineRun:
    """The DataFrames of one windowed SELECT run by the engine."""

    output: DataFrame     # everything the bucket jobs returned (kinds PANE, DROPPED, METRICS)
    panes: DataFrame      # keys (k0...), aggregates (agg0...), pane columns
    final: DataFrame      # the panes that are their window's final value
    dropped: DataFrame    # dropped input rows (internal column names)
    buckets: int
    combined: bool = False  # rows were combined before the shuffle (lifted_rows)
    replay_combined: bool = False  # replayed rows combined in the bucket jobs (replay_combining)
    holds: Any = None  # a replay's watermark holds: since, until, value (microseconds)
    chunk_rows: int | None = None  # a bucket above this many rows is combined in chunks (BucketJob.chunked)
    #: function(output) -> the EngineRun of the same stage over that output
    derive: Callable[[DataFrame], EngineRun] | None = None

    def materialised(self) -> "EngineRun":
        """The same stage over its output computed once, now, and kept as a local checkpoint (in
        the executors' memory, spilling to disk) for a later stage that reads its panes after
        collecting its holds: the engine runs once, not once per job. Spark's ContextCleaner drops
        the checkpoint's blocks once no DataFrame refers to it (the statement's result and every
        DataFrame derived from it are garbage)."""
        if self.derive is None:
            raise ValueError("this run cannot be derived from its output")
        return self.derive(self.output.localCheckpoint(eager=True))


def arrow_schema(schema, spark):
    """The Arrow schema of a Spark StructType as mapInArrow wants it back: timestamps in the
    session time zone, strings and binary as large types when Spark's
    `spark.sql.execution.arrow.useLargeVarTypes` is on."""
    from pyspark.sql.pandas.types import to_arrow_schema

    large = conf.flag(spark, conf.ARROW_LARGE_VAR_TYPES)
    return to_arrow_schema(schema, timezone=spark.conf.get("spark.sql.session.timeZone"), prefers_large_types=large)


def normalised_key(expr: str, dtype, depth: int = 0) -> str | None:
    """SQL for a GROUP BY key as Spark's grouping compares it (-0.0 as 0.0, every NaN the same
    NaN, in nested values too), or None when the type has nothing to normalise.

    >>> from pyspark.sql import types as T
    >>> normalised_key("k", T.DoubleType())
    "CASE WHEN isnan(k) THEN CAST('NaN' AS DOUBLE) WHEN k = 0 THEN CAST(0 AS DOUBLE) ELSE k END"
    >>> print(normalised_key("k", T.ArrayType(T.FloatType())))
    transform(k, x0 -> CASE WHEN isnan(x0) THEN CAST('NaN' AS FLOAT) WHEN x0 = 0 THEN CAST(0 AS FLOAT) ELSE x0 END)
    >>> normalised_key("k", T.StructType([T.StructField("a", T.StringType())])) is None
    True
    """
    from pyspark.sql import types as T

    if isinstance(dtype, (T.FloatType, T.DoubleType)):
        t = dtype.simpleString().upper()
        return f"CASE WHEN isnan({expr}) THEN CAST('NaN' AS {t}) WHEN {expr} = 0 THEN CAST(0 AS {t}) ELSE {expr} END"
    if isinstance(dtype, T.ArrayType):
        var = f"x{depth}"
        inner = normalised_key(var, dtype.elementType, depth + 1)
        return None if inner is None else f"transform({expr}, {var} -> {inner})"
    if isinstance(dtype, T.MapType):  # keys stay: -0.0 and 0.0 would become one key twice
        var = f"x{depth}"
        inner = normalised_key(f"v{depth}", dtype.valueType, depth + 1)
        return None if inner is None else f"transform_values({expr}, ({var}, v{depth}) -> {inner})"
    if isinstance(dtype, T.StructType):
        fields = [(f.name, normalised_key(f"{expr}.{quoted(f.name)}", f.dataType, depth)) for f in dtype.fields]
        if all(n is None for _, n in fields):
            return None
        parts = ", ".join(f"{_string(name)}, {n or f'{expr}.{quoted(name)}'}" for name, n in fields)
        return f"IF({expr} IS NULL, NULL, named_struct({parts}))"
    return None


def _string(text: str) -> str:
    """A Spark SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"




def run_engine(ws, rel: InputRelation, raw, agg_types: list, *, buckets: int, timeline=None,
               p_end: int | None = None) -> EngineRun:
    """Build the engine path's DataFrames for one windowed SELECT (lazily: nothing runs yet).

    `raw` is the input relation as a DataFrame (raw values), `agg_types` the Spark type of each
    aggregate call.
    """
    from pyspark.sql import types as T

    from ..udfs.bucket import ArrowBuckets, BucketJob

    spark = raw.sparkSession
    schema = {f.name: f.dataType for f in raw.schema.fields}
    outputs = handover.plan_outputs(ws, rel, schema, agg_types, ansi_mode=handover.ansi(spark), name=agg_column)
    # keys as Spark's GROUP BY compares them (so equal keys share a bucket), derived arguments:
    # a collated key becomes its group's representative first (sqlflow/spark/collation.py)
    collated = {c: representative(quoted(c), schema[c]) for c in rel.keys}
    if any(collated.values()):
        raw = raw.selectExpr(*[f"{collated[c]} AS {quoted(c)}" if collated.get(c) else quoted(c) for c in raw.columns])
    columns = []
    for c in raw.columns:
        norm = normalised_key(quoted(c), schema[c]) if c in rel.keys else None
        columns.append(quoted(c) if norm is None else f"{norm} AS {quoted(c)}")
    columns += [f"{sql} AS {quoted(name)}" for name, sql in outputs.derived.items()]
    raw = raw.selectExpr(*columns)
    schema = {f.name: f.dataType for f in raw.schema.fields}
    args = rel.args + list(outputs.derived)
    plan = EnginePlan(ws.windowing, tuple(outputs.aggregates), keys=tuple(rel.keys),
                      custom_windows=custom_windows_of(ws.window))

    lifted = lifted_rows(plan, rel, raw, buckets) if liftable(plan, rel, schema) else None
    combine = conf.flag(spark, conf.REPLAY_COMBINE)
    combine = combine and SOURCE not in rel.args  # (rows of several sources keep their source)
    combinable = replay_combining(plan, rel, schema) if lifted is None and SOURCE not in rel.args else None
    combining = combinable if combine else None
    chunk_rows = conf.chunk_rows(spark)
    # a bucket above chunk_rows rows (a hot key) is read and combined in chunks, asked or not
    chunked = (combinable[0], WEIGHT, combinable[1]) if combinable is not None and chunk_rows else None
    if combining is not None:
        plan, combining = combining
    if lifted is not None:
        rows, plan = lifted
    else:
        # engine input: times in microseconds
        columns = [quoted(c) for c in rel.keys + args]
        columns.append(f"unix_micros(CAST({quoted(EVENT_TIME)} AS TIMESTAMP)) AS {quoted(EVENT_TIME)}")
        if rel.replay:
            columns.append(f"unix_micros(CAST({quoted(ARRIVAL_TIME)} AS TIMESTAMP)) AS {quoted(ARRIVAL_TIME)}")
        if rel.gap:
            columns.append(f"unix_micros(timestamp_micros(0) + {quoted(GAP)}) AS {quoted(GAP)}")
        columns += [quoted(when_column(i)) for i in range(rel.n_when)]
        rows = by_bucket(raw.selectExpr(*columns), rel.keys, buckets, spread_over(ws, rel))

    # output schema: the wire columns (sqlflow/columns.py), keys, aggregates (Spark's types), argument echoes
    fields = [T.StructField(name, spark_type(OUTPUT_TYPES[name]), True) for name in BUCKET_OUTPUT_COLUMNS]
    fields += [T.StructField(k, schema[k], True) for k in rel.keys]
    fields += [T.StructField(c, t, True) for c, t in outputs.types]
    fields += [T.StructField(a, schema[a], True) for a in rel.args]
    out_schema = T.StructType(fields)
    shared = None
    if timeline is not None and len(timeline.times) > _BROADCAST_STEPS:
        try:  # once per executor process rather than inside every task's closure
            shared = spark.sparkContext.broadcast(timeline)
            timeline = None
        except Exception:  # noqa: BLE001  (Spark Connect has no broadcast variables)
            shared = None
    job = BucketJob(plan, columns=tuple(out_schema.fieldNames()), keys=tuple(rel.keys), args=tuple(rel.args),
                    timeline=timeline, p_end=p_end, replay=rel.replay,
                    weight=WEIGHT if lifted is not None or combining is not None else None, shared=shared,
                    combine=combining, chunked=chunked, chunk_rows=chunk_rows or 0,
                    averages=tuple(outputs.averages))
    output = rows.mapInArrow(ArrowBuckets(job, arrow_schema(out_schema, spark)), schema=out_schema)

    pane_columns = [quoted(k) for k in rel.keys] + outputs.decode
    for name in PANE_COLUMNS:
        pane_columns.append(_micros_as_time(name, name) if name in PANE_TIMES else quoted(name))
    if ws.windowing.mode.retracting:
        pane_columns.append(IS_RETRACTION)

    def derive(output) -> EngineRun:
        pane_rows = output.where(f"{quoted(KIND)} = {PANE}")
        panes = pane_rows.selectExpr(*pane_columns)
        final = pane_rows.where(quoted(FINAL)).selectExpr(*pane_columns)
        dropped = output.where(f"{quoted(KIND)} = {DROPPED}").selectExpr(
            *[quoted(k) for k in rel.keys], *[quoted(a) for a in rel.args],
            _micros_as_time(EVENT_TIME, DROPPED_EVENT_TIME), _micros_as_time(ARRIVAL_TIME, DROPPED_ARRIVAL_TIME),
            f"{quoted(REASON)} AS {DROPPED_REASON}",
            _micros_as_time(WINDOW_START, WINDOW_START), _micros_as_time(WINDOW_END, WINDOW_END))
        # a replay's holds: (since, until, smallest output time) per held instant range, for the
        # output watermark a later windowed stage reads (sqlflow.engine.holds); rows without a hold
        # (since NULL) say where the output ends (their emission), and a GLOBAL window's pane may have
        # no output_time
        holds = pane_rows.selectExpr(f"{quoted(HOLD_SINCE)} AS since",
                                     f"coalesce({quoted(HOLD_UNTIL)}, {quoted(EMIT_TIME)}) AS until",
                                     f"{quoted(OUTPUT_TIME)} AS value").groupBy("since", "until").agg(
            {"value": "min"}).toDF("since", "until", "value") if rel.replay else None
        return EngineRun(output, panes, final, dropped, buckets, combined=lifted is not None,
                         replay_combined=combining is not None, holds=holds, derive=derive,
                         chunk_rows=chunk_rows if chunked is not None else None)

    return derive(output)


def _micros_as_time(column: str, alias: str) -> str:
    """SQL turning a column of int64 microseconds from the bucket jobs back into a TIMESTAMP."""
    return f"timestamp_micros({quoted(column)}) AS {quoted(alias)}"


def by_bucket(rows, keys, buckets: int, blocks: tuple[int, int] | None = None):
    """`rows` hash-partitioned by the keys into `buckets` partitions, pmod(murmur3(keys), N):
    every row of a key in one partition, which is one bucket job. Without keys, by the block of
    event time (`blocks`: size, offset; `spread_over`) when given, else all in one partition."""
    from pyspark.sql import functions as F

    if keys:
        return rows.repartition(buckets, *[F.col(k) for k in keys])
    if blocks is not None:
        size, offset = blocks
        et = quoted(EVENT_TIME)
        return rows.repartition(buckets, F.expr(f"{et} - pmod({et} - {offset}, {size})"))
    return rows.repartition(1)


def spread_over(ws, rel: InputRelation) -> tuple[int, int] | None:
    """The blocks of event time over which the rows of a windowed SELECT without GROUP BY keys
    are spread over buckets (FIXED and CUMULATE windows: `sqlflow.engine.spread_blocks`), or None
    (keys spread them; other windows leave every row in one bucket)."""
    return None if rel.keys else spread_blocks(ws.windowing, replay=rel.replay)


def liftable(plan: EnginePlan, rel: InputRelation, schema: dict) -> bool:
    """Whether `lifted_rows` applies (the module doc; the rule is the engine's, `path_for`)."""
    return not rel.replay and _combine_path(plan, BOUNDED, schema).name == "combined"


def _combine_path(plan: EnginePlan, input: str, schema: dict):
    """The engine's answer whether rows combine before it, given the input's Spark types."""
    types = {c: t.simpleString() for c, t in schema.items()}
    return path_for(plan, input=input, operator="combine", types=types)


def replay_combining(plan: EnginePlan, rel: InputRelation, schema: dict):
    """(plan over the partial aggregates, BucketJob.combine) when the replayed rows of each bucket
    are combined per key, gap-aligned slice and arrival period before its engine runs
    (sqlflow/engine/arrival_combine.py: static-gap sessions, a trigger that rule allows, no WHEN,
    COUNT of anything and SUM/MIN/MAX of integers), else None. The bucket jobs do it, where the
    timeline already is: combining in Spark before the hand-over (a broadcast join for the
    watermark, an aggregation, an explode) cost more than the rows it saved. Only with
    `spark.sqlflow.replay.combine` true: measured end to end it was 1-10% faster per round before
    the engine's exact-type hand-over and 6-40% slower after (docs/bounded-execution.md)."""
    if not rel.replay or _combine_path(plan, REPLAY, schema).name != "combined":
        return None
    grid = arrival_grid(plan.windowing)
    if grid is None:
        return None
    parts, aggregates = [], []
    for j, agg in enumerate(plan.aggregates):
        name = part_column(j)
        parts.append((name, agg.kind, agg.column))
        aggregates.append(Aggregate(COMBINING[agg.kind], name, agg.output, agg.ignore_nulls))
    combined = EnginePlan(plan.windowing, tuple(aggregates), keys=plan.keys, custom_windows=plan.custom_windows)
    return combined, (*aligned_slices(plan.window), *grid, tuple(parts))


def aligned_slices(window: ast.WindowFn) -> tuple[int, int]:
    """(size, offset) of the slices of event time whose rows always share a window: a session's
    gap (rows less than a gap apart), a FIXED window itself."""
    if isinstance(window, ast.Fixed):
        return window.size.micros, window.offset.micros
    if isinstance(window, ast.Sessions) and isinstance(window.gap, ast.Duration):
        return window.gap.micros, 0
    raise ValueError(f"no slices of event time always share a window of {window}")


def _fixed_gap(plan: EnginePlan) -> int:
    """The gap of a plan's SESSIONS(GAP <duration>) windows, in microseconds (what combining needs)."""
    fn = plan.window
    if not isinstance(fn, ast.Sessions) or not isinstance(fn.gap, ast.Duration):
        raise ValueError(f"rows combine per gap-aligned slice of SESSIONS with a fixed gap, not {fn}")
    return fn.gap.micros


def lifted_rows(plan: EnginePlan, rel: InputRelation, raw, buckets: int):
    """The engine input with rows combined per key and gap-aligned slice of event time (module doc).

    The rows are hash-partitioned by bucket first, so the combining aggregate and the bucket jobs
    share that one shuffle. Rows without an event time stay single (a unique id joins their
    grouping key) and keep their argument values, so they are dropped and reported as before.
    Returns the rows partitioned by bucket and the plan over the partial columns."""
    from pyspark.sql import functions as F

    gap = _fixed_gap(plan)
    et = quoted(EVENT_TIME)
    keys = [quoted(k) for k in rel.keys]
    partial_names = [part_column(j) for j in range(len(plan.aggregates))]
    partials, aggregates = [], []
    for name, agg in zip(partial_names, plan.aggregates):
        arg = "1" if agg.kind == "count_star" or agg.column is None else quoted(agg.column)
        partials.append(f"{'count' if agg.kind == 'count_star' else agg.kind}({arg}) AS {quoted(name)}")
        aggregates.append(Aggregate(COMBINING[agg.kind], name, agg.output, agg.ignore_nulls))
    echoes = [f"first(IF({et} IS NULL, {quoted(a)}, NULL), true) AS {quoted(a)}" for a in rel.args]
    timed = by_bucket(raw.selectExpr(
        *keys, *[quoted(a) for a in rel.args], f"unix_micros(CAST({et} AS TIMESTAMP)) AS {et}"), rel.keys, buckets)
    sliced = timed.selectExpr("*", f"{et} - pmod({et}, {gap}L) AS __slice",
                              f"IF({et} IS NULL, monotonically_increasing_id(), NULL) AS __single")

    def element(time, weight, parts):
        fields = [f"'{EVENT_TIME}', {time}", f"'{WEIGHT}', {weight}"]
        fields += [f"'{n}', {v}" for n, v in zip(partial_names, parts)]
        fields += [f"'{a}', {quoted(a)}" for a in rel.args]
        return f"named_struct({', '.join(fields)})"

    first = element("__lo", quoted(WEIGHT), [quoted(n) for n in partial_names])
    # the neutral partial: COUNT 0, otherwise a NULL of the partial's type
    last = element("__hi", "0L", ["0L" if agg.kind in ("count_star", "count") else f"IF(false, {quoted(n)}, NULL)"
                                  for n, agg in zip(partial_names, plan.aggregates)])
    combined = sliced.groupBy(*rel.keys, "__slice", "__single").agg(
        F.expr(f"min({et}) AS __lo"), F.expr(f"max({et}) AS __hi"), F.expr(f"count(1) AS {quoted(WEIGHT)}"),
        *[F.expr(p) for p in partials + echoes])
    rows = combined.selectExpr(
        *keys, f"explode(IF(__hi > __lo, array({first}, {last}), array({first}))) AS __e").selectExpr(*keys, "__e.*")
    rows = rows.selectExpr(*[quoted(c) for c in rel.keys + rel.args + partial_names], et, quoted(WEIGHT))
    lifted_plan = EnginePlan(plan.windowing, tuple(aggregates), keys=plan.keys, custom_windows=plan.custom_windows)
    return rows, lifted_plan
