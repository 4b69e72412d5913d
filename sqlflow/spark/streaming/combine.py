"""Pre-combining: a micro-batch's rows combined per key and FIXED window before the operator.

The stateful operator's input is read row by row by PySpark; combining the rows of one key and
window into one element (partial aggregates, a weight, the earliest and latest event times) gives
it fewer rows (udfs/combine.py does the combining, on the executors, with pyarrow).
"""
from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ... import ast
from ...engine import watermark_step
from ...engine.aggregates import Aggregate
from ...columns import EVENT_TIME, LATEST, PREFIX, WEIGHT, part_column
from ...engine.plan import EnginePlan
from ...udfs.combine import Combine
from ..engine_path import LIFTABLE
from .schema import is_integral

#: aggregates whose partials combine exactly, and pyarrow's aggregate for the partial (the engine's
#: aggregate over the partials is the bounded path's, engine_path.LIFTABLE)
ARROW_PARTIAL = {"count_star": "count_all", "count": "count", "sum": "sum", "min": "min", "max": "max"}

_ATOMIC = (T.StringType, T.BooleanType, T.DateType, T.TimestampType, T.TimestampNTZType, T.DecimalType,
           T.ByteType, T.ShortType, T.IntegerType, T.LongType)


def combinable(plan: EnginePlan, schema: T.StructType) -> bool:
    """Whether the rows of a micro-batch can be combined per key and window before the operator
    (`combined`): FIXED windows (a row is in one window), the vectorised step's triggers (none
    counts elements), COUNT, SUM of integers, MIN and MAX of atomic types, and keys pyarrow groups
    as Spark does (no floating point, no nested types)."""
    if not isinstance(plan.window, ast.Fixed) or plan.custom_windows or not watermark_step.applies(plan):
        return False
    if plan.n_when or plan.per_row_gap:
        return False
    fields = {f.name: f.dataType for f in schema.fields}
    if any(not isinstance(fields[k], _ATOMIC) for k in plan.keys):
        return False
    for agg in plan.aggregates:
        if agg.kind not in ARROW_PARTIAL:
            return False
        kind = fields[agg.column] if agg.column else None
        if agg.kind == "sum" and not is_integral(kind):
            return False
        if agg.kind in ("min", "max") and not isinstance(kind, _ATOMIC):  # not floats: NaN is ordered apart
            return False
    return True


def combined(data: DataFrame, plan: EnginePlan) -> tuple[DataFrame, EnginePlan]:
    """The micro-batch's rows combined per key and window, and the plan over the partial
    aggregates."""
    window = plan.window
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
        partial, final = ARROW_PARTIAL[agg.kind], LIFTABLE[agg.kind]
        parts.append((name, partial, agg.column))
        aggregates.append(Aggregate(final, name, agg.output, agg.ignore_nulls))
        kind = fields[agg.column].dataType if agg.kind in ("min", "max") else T.LongType()
        # counts are never NULL: declared so, they travel without a NULL mask (stateful.masked_numbers)
        out.append(T.StructField(name, kind, partial not in ("count", "count_all")))
    out.append(T.StructField(WEIGHT, T.LongType(), False))
    job = Combine(group=(*plan.keys, start), time=EVENT_TIME, parts=tuple(parts), weight=WEIGHT,
                  latest=LATEST)
    result = sliced.mapInArrow(job, T.StructType(out)).drop(start)
    return result, EnginePlan(plan.windowing, tuple(aggregates), keys=plan.keys, custom_windows=plan.custom_windows)
