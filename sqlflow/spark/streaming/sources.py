"""Streaming file sources that count their malformed records."""
from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ...errors import SqlflowUnsupportedError
from .metrics import SOURCE_METRICS_NAME

MODES = ("PERMISSIVE", "DROPMALFORMED", "FAILFAST")


def read_stream(spark: SparkSession, path: str, *, format: str, schema: T.StructType | str,
                mode: str = "PERMISSIVE", options: dict[str, Any] | None = None,
                corrupt_column: str = "_corrupt_record") -> DataFrame:
    """A streaming file source (json or csv) whose malformed records are counted.

    Modes follow Spark's: PERMISSIVE keeps a malformed record with NULL fields (a NULL event time
    is then excluded and counted by the engine), DROPMALFORMED drops it, FAILFAST fails the query.
    PERMISSIVE and DROPMALFORMED count malformed records as `malformed_records` in the query's
    progress (observe name `sqlflow_source`); both read in PERMISSIVE mode with a corrupt-record
    column, and DROPMALFORMED then filters."""
    mode = mode.upper()
    if mode not in MODES:
        raise SqlflowUnsupportedError(f"unknown mode {mode!r}: {', '.join(MODES[:-1])} or {MODES[-1]}",
                                      clause="SOURCE")
    if isinstance(schema, str):
        parsed = T._parse_datatype_string(schema)
        if not isinstance(parsed, T.StructType):
            raise SqlflowUnsupportedError(f"the schema {schema!r} is not a list of columns (e.g. 'ts TIMESTAMP, "
                                          "user STRING')", clause="SOURCE")
        schema = parsed
    reader = spark.readStream.format(format).options(**{k: str(v) for k, v in (options or {}).items()})
    if mode == "FAILFAST":
        return reader.schema(schema).option("mode", "FAILFAST").load(path)
    names = [f.name for f in schema.fields]
    full = T.StructType(schema.fields + [T.StructField(corrupt_column, T.StringType(), True)])
    df = (reader.schema(full).option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", corrupt_column)
          .load(path))
    bad = F.col(corrupt_column).isNotNull()
    df = df.observe(SOURCE_METRICS_NAME, F.coalesce(F.sum(bad.cast("long")), F.lit(0)).alias("malformed_records"))
    if mode == "DROPMALFORMED":
        df = df.where(~bad)
    return df.select(*names)
