"""The watermark of a replay, computed by Spark and given to every bucket of the engine path.

A replayed source (`FROM t WATERMARK ts <model> ARRIVAL at`) has one watermark for all keys: it
is a function of the whole stream, so each bucket cannot compute it from its own rows. Spark
aggregates the source per arrival instant (max and min event time), the driver turns those
per-instant figures into the timeline of the source's model (`sqlflow.engine.watermarks`):

- `DELAY OF d`: max event time arrived so far - d;
- `PERFECT`: min event time of the rows not yet arrived;
- `TIMELINE steps`: the (proc_time, watermark) rows of table `steps`, NULL watermark = +inf.

The per-instant figures are the timeline, not the data: one row per distinct arrival time. The
end of the input (`p_end`) is the last arrival (or timeline step), the same for every bucket.
The watermark is the source's, before any WHERE or JOIN: Spark's own WATERMARK clause works so.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sqlglot import exp

from .. import ast
from ..errors import SqlflowAnalysisError, SqlflowError, SqlflowExecutionError
from ..engine import watermarks
from ..time import POS_INF
from .relations import strip_clauses, to_spark_sql, visible_ctes, with_ctes
from .windowed_select import Source, WindowedSelect, parse_column


@dataclass
class Replay:
    """The global watermark and end of input of one replayed windowed SELECT."""

    timeline: watermarks.Timeline
    p_end: int
    rows: int            # rows of the source with an event and an arrival time
    instants: int        # distinct arrival times
    model: str           # the model, for explain()


def _timestamp_check(ws: WindowedSelect, source: Source, dtype, what: str, column: str) -> None:
    from pyspark.sql import types as T

    if not isinstance(dtype, (T.TimestampType, T.TimestampNTZType)):
        raise ws.error(SqlflowAnalysisError,
                       f"the {what} column {column} of the WATERMARK clause is {dtype.simpleString().upper()}, "
                       "not a TIMESTAMP", "WATERMARK", pos=source.watermark.pos,
                       hint=f"convert it in a subquery, e.g. timestamp_seconds({column}) or to_timestamp({column})")


def source_query(source: Source) -> exp.Select:
    """SELECT <event time>, <arrival> FROM <the watermarked relation> (with its visible CTEs)."""
    w = source.watermark
    relation = strip_clauses(source.node)
    query = exp.Select(expressions=[exp.alias_(parse_column(w.event_time), "et"),
                                    exp.alias_(parse_column(w.arrival), "at")])
    query.set("from_", exp.From(this=relation))
    return with_ctes(query, visible_ctes(source.node))


def replay(spark, ws: WindowedSelect, args, run_sql) -> Replay:
    """The replay watermark of a windowed SELECT. `run_sql(sql, node)` runs a query and locates
    analysis errors at `node` of the user's query."""
    from pyspark.sql import functions as F

    source = ws.arrival_source
    w = source.watermark
    raw = run_sql(to_spark_sql(source_query(source)), source.node)
    types = {f.name: f.dataType for f in raw.schema.fields}
    _timestamp_check(ws, source, types["et"], "event-time", w.event_time)
    _timestamp_check(ws, source, types["at"], "arrival", w.arrival)
    micros = raw.select(F.unix_micros(F.col("et").cast("timestamp")).alias("et"),
                        F.unix_micros(F.col("at").cast("timestamp")).alias("at"))
    per_instant = (micros.where(F.col("et").isNotNull() & F.col("at").isNotNull())
                   .groupBy("at").agg(F.max("et").alias("max_et"), F.min("et").alias("min_et"),
                                      F.count(F.lit(1)).alias("n"))
                   .toPandas())
    per_instant = per_instant.sort_values("at")
    at = per_instant["at"].to_numpy(np.int64)
    model = w.model
    try:
        if isinstance(model, ast.BoundedDelay):
            timeline = watermarks.bounded_delay(at, per_instant["max_et"].to_numpy(np.int64), model.delay.micros)
            described = f"DELAY OF {model.delay}"
        elif isinstance(model, ast.Perfect):
            timeline = watermarks.perfect(at, per_instant["min_et"].to_numpy(np.int64))
            described = "PERFECT"
        else:
            timeline = explicit_timeline(spark, ws, source, run_sql)
            described = f"TIMELINE {model.table}"
    except SqlflowError as error:
        if error.line is None:
            raise ws.error(type(error), error.message, error.clause or "WATERMARK", pos=model.pos or w.pos,
                           hint=error.hint) from None
        raise
    p_end = max(int(at.max()) if len(at) else timeline.last_time, timeline.last_time)
    return Replay(timeline, p_end, int(per_instant["n"].sum()), len(at), described)


def explicit_timeline(spark, ws: WindowedSelect, source: Source, run_sql) -> watermarks.Timeline:
    """The steps of `TIMELINE <table>`: columns proc_time and watermark (NULL: +inf)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    model = source.watermark.model
    table = parse_column(model.table)
    name = table.sql(dialect="spark")
    query = exp.Select(expressions=[exp.column("proc_time"), exp.column("watermark")])
    query.set("from_", exp.From(this=exp.to_table(name, dialect="spark")))
    with_ctes(query, visible_ctes(source.node))
    steps = run_sql(to_spark_sql(query), source.node)
    for field in steps.schema.fields:
        if not isinstance(field.dataType, (T.TimestampType, T.TimestampNTZType)):
            raise ws.error(SqlflowAnalysisError,
                           f"TIMELINE {name}: column {field.name} is {field.dataType.simpleString().upper()}, "
                           "not a TIMESTAMP", "WATERMARK", pos=model.pos or source.watermark.pos)
    frame = steps.select(F.unix_micros(F.col("proc_time").cast("timestamp")).alias("p"),
                         F.unix_micros(F.col("watermark").cast("timestamp")).alias("w")).toPandas()
    if frame["p"].isna().any():
        raise ws.error(SqlflowExecutionError, f"TIMELINE {name} has a row without proc_time", "WATERMARK",
                       pos=model.pos or source.watermark.pos)
    marks = frame["w"].astype("Int64").fillna(POS_INF).to_numpy(np.int64)  # NULL: +inf (exact, no float)
    return watermarks.Timeline.from_steps(frame["p"].astype("Int64").to_numpy(np.int64), marks,
                                          what=f"TIMELINE {name}")
