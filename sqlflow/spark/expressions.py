"""Spark columns from SQL text, at one JVM round trip each.

Building a stream's projections through PySpark's column functions costs several py4j round
trips per column: `F.col`, `F.timestamp_micros` and `F.coalesce` each look the function up on
the JVM before calling it, and `Column.cast` parses its type there (about 12 a pane column, 1,258
for scenario 3's query, most of `sqlflow.sql`'s 0.14-0.3 s building a stream;
docs/dev/streaming-performance.md, 5). Here the parser function is looked up once and each
column is one call to it. Under Spark Connect columns are built in the client: `F.expr`.
"""
from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column
from pyspark.sql import types as T

from ..plan.relations import quoted
from .lifetimes import is_connect

#: Spark types whose SQL name is their `simpleString` (a CAST to them in SQL text is the
#: Column API's cast)
_ATOMIC = (T.BooleanType, T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType,
           T.DecimalType, T.StringType, T.BinaryType, T.DateType, T.TimestampType, T.TimestampNTZType)


def sql_columns(spark, exprs: Sequence[str]) -> list[Column]:
    """Each SQL expression of `exprs` (Spark's syntax, `AS name` allowed) as a Column of `spark`'s."""
    from pyspark.sql import functions as F

    if is_connect(spark):
        return [F.expr(e) for e in exprs]
    from pyspark import SparkContext
    from pyspark.sql.classic.column import Column as ClassicColumn

    sc = SparkContext._active_spark_context
    assert sc is not None and sc._jvm is not None
    parse = sc._jvm.functions.expr  # looked up once
    return [ClassicColumn(parse(e)) for e in exprs]


def type_sql(dtype: T.DataType) -> str | None:
    """`dtype` as the SQL of a CAST to it, where its name is that (atomic types); None otherwise.

    >>> type_sql(T.DecimalType(38, 18)), type_sql(T.TimestampType()), type_sql(T.ArrayType(T.LongType()))
    ('decimal(38,18)', 'timestamp', None)
    """
    return dtype.simpleString() if isinstance(dtype, _ATOMIC) else None


def cast_sql(expr: str, dtype: T.DataType, name: str) -> str | None:
    """`CAST(expr AS dtype) AS name` (None where `type_sql` has no name for the type).

    >>> cast_sql("timestamp_micros(`w`)", T.TimestampType(), "w")
    'CAST(timestamp_micros(`w`) AS timestamp) AS `w`'
    """
    sql = type_sql(dtype)
    return None if sql is None else f"CAST({expr} AS {sql}) AS {quoted(name)}"
