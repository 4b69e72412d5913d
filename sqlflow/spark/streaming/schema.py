"""The Spark schema of a pane stream: keys, aggregates (with Spark's result types), pane columns.

Keys and aggregates keep the names and types of the streaming DataFrame they come from; the pane
columns are those of the bounded path (docs/streaming.md, section 1).
"""
from __future__ import annotations

from pyspark.sql import types as T

from ...columns import PANE_NULLABLE, PANE_TYPES, pane_columns
from ...columns import PANE_COLUMNS, RETRACTION_COLUMN  # noqa: F401  (sqlflow.spark.streaming's names)
from ...engine import EnginePlan
from ..select_types import spark_type

_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)


def pane_schema(input_schema: T.StructType, plan: EnginePlan) -> T.StructType:
    """The output schema of a pane stream: keys, aggregates, pane columns (and is_retraction)."""
    fields = {f.name: f for f in input_schema.fields}
    out = [T.StructField(k, fields[k].dataType, True) for k in plan.keys]
    for agg in plan.aggregates:
        source = fields[agg.column].dataType if agg.column is not None else None
        out.append(T.StructField(agg.output, aggregate_type(agg.kind, source), True))
    out += [T.StructField(c, spark_type(PANE_TYPES[c]), c in PANE_NULLABLE) for c in pane_columns(plan.mode.retracting)]
    return T.StructType(out)


def aggregate_type(kind: str, source: T.DataType | None) -> T.DataType:
    """Spark's result type of an aggregate over a column of type `source`.

    >>> aggregate_type("sum", T.IntegerType()), aggregate_type("avg", T.DecimalType(10, 2))
    (LongType(), DecimalType(14,6))
    """
    if kind in ("count_star", "count", "count_distinct"):
        return T.LongType()
    if kind in ("stddev_samp", "stddev_pop", "var_samp", "var_pop"):
        return T.DoubleType()
    if kind == "sum":
        if isinstance(source, T.DecimalType):
            return T.DecimalType(min(38, source.precision + 10), source.scale)
        if isinstance(source, (*_INTEGRAL, T.BooleanType)):
            return T.LongType()
        return T.DoubleType()
    if kind == "avg":
        if isinstance(source, T.DecimalType):
            return T.DecimalType(min(38, source.precision + 4), min(38, source.scale + 4))
        return T.DoubleType()
    if source is None:
        raise ValueError(f"{kind} needs the type of its argument")
    if kind in ("collect_list", "collect_set"):
        return T.ArrayType(source, False)
    return source  # min, max, first, last


def is_integral(dtype: T.DataType) -> bool:
    """Whether a Spark type is an integer type (pandas sees it as float64 when it holds NULLs)."""
    return isinstance(dtype, _INTEGRAL)
