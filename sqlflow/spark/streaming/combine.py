"""Pre-combining: a micro-batch's rows combined per key and FIXED window before the operator.

The stateful operator's input is read row by row by PySpark; combining the rows of one key and
window into one element (partial aggregates, a weight, the earliest and latest event times) gives
it fewer rows (udfs/micro_batch_combine.py does the combining, on the executors, with pyarrow).
"""
from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ... import ast
from ...columns import EVENT_TIME, LATEST, PREFIX, WEIGHT, part_column
from ...engine import COMBINING, STREAM, Aggregate, EnginePlan, path_for
from ...udfs.micro_batch_combine import ARROW_PARTIAL, Combine


def combinable(plan: EnginePlan, schema: T.StructType) -> bool:
    """Whether the rows of a micro-batch can be combined per key and window before the operator
    (`combined`). The rule is the engine's (`path_for(..., operator="combine")`): FIXED windows
    (a row is in one window), a watermark-only trigger (none counts elements), COUNT, SUM of
    integers, MIN and MAX of atomic types, and keys pyarrow groups as Spark does (no floating
    point, no nested types)."""
    return path_for(plan, input=STREAM, operator="combine", types={f.name: f.dataType.simpleString() for f in schema.fields}).name == "combined"


def combined(data: DataFrame, plan: EnginePlan) -> tuple[DataFrame, EnginePlan]:
    """The micro-batch's rows combined per key and window, and the plan over the partial
    aggregates."""
    rows, job, schema, partials = combining(data, plan)
    return rows.mapInArrow(job, schema).drop(job.group[len(plan.keys)]), partials


def combining(data: DataFrame, plan: EnginePlan) -> tuple[DataFrame, Combine, T.StructType, EnginePlan]:
    """What `combined` runs: the rows with their window start, the `mapInArrow` job that combines
    them (grouped by the keys and the window start, in that order), its output schema (the window
    start among its columns) and the plan over the partial aggregates."""
    window = plan.window
    if not isinstance(window, ast.Fixed):
        raise ValueError(f"a stream's rows combine per FIXED window, not {window}")
    et = F.col(EVENT_TIME)
    start = PREFIX + "start"  # the window start of a row
    sliced = data.withColumn(start, et - F.pmod(et - F.lit(window.offset.micros), F.lit(window.size.micros)))
    fields = {f.name: f for f in data.schema.fields}
    out = [T.StructField(k, fields[k].dataType, True) for k in plan.keys]
    out += [T.StructField(start, T.LongType(), True), T.StructField(EVENT_TIME, T.LongType(), True),
            T.StructField(LATEST, T.LongType(), True)]  # Combine's order: time, latest, parts, weight
    parts, aggregates = [], []
    for j, agg in enumerate(plan.aggregates):
        name = part_column(j)
        partial, final = ARROW_PARTIAL[agg.kind], COMBINING[agg.kind]
        parts.append((name, partial, agg.column))
        aggregates.append(Aggregate(final, name, agg.output, agg.ignore_nulls))
        kind = fields[agg.column].dataType if agg.kind in ("min", "max") and agg.column else T.LongType()
        # counts are never NULL: declared so, they travel without a NULL mask (stateful.masked_numbers)
        out.append(T.StructField(name, kind, partial not in ("count", "count_all")))
    out.append(T.StructField(WEIGHT, T.LongType(), False))
    job = Combine(group=(*plan.keys, start), time=EVENT_TIME, parts=tuple(parts), weight=WEIGHT,
                  latest=LATEST)
    return sliced, job, T.StructType(out), EnginePlan(plan.windowing, tuple(aggregates), keys=plan.keys,
                                                      custom_windows=plan.custom_windows)
