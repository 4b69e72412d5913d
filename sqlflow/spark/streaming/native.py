"""The native operator: Spark's own streaming window aggregation, where it gives the engine's panes.

Spark (>= 3.4) judges a row late in batch N when its window's end <= the watermark of batch N-1,
aggregates the rest, and emits (append mode) the windows whose end <= the watermark of batch N:
exactly `Engine.advance(rows, wm_prev=W(N-1), wm_new=W(N))` for FIXED or SLIDING windows with the
default trigger and no allowed lateness (docs/streaming.md, "Native operator").
"""
from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ... import ast
from ...columns import (EMIT_TIME, EVENT_TIME, IS_LAST, IS_RETRACTION, ON_TIME, OUTPUT_TIME, PANE_INDEX, PANE_TIMING,
                        PREFIX, WINDOW_END, WINDOW_START)
from ...engine import SPARK_STREAMING_AGGREGATES, STREAM, EnginePlan, path_for
from .metrics import observe_input
from .watermark import interval_ms

NATIVE_AGGREGATES = SPARK_STREAMING_AGGREGATES

_TS, _WINDOW = PREFIX + "ts", PREFIX + "window"  # Spark's event time and window struct


def native_equivalent(plan: EnginePlan, *, time_shift: int = 0) -> str | None:
    """Why Spark's native streaming window aggregation would differ from the engine on this plan,
    or None when it gives exactly the same panes: FIXED or SLIDING windows with the default
    trigger REPEAT(WATERMARK) and no allowed lateness give one ON_TIME, final pane per window,
    and late rows are dropped by the same rule. The rule is the engine's
    (`path_for(plan, input=STREAM, operator="spark")`)."""
    path = path_for(plan, input=STREAM, operator="spark", time_shift=time_shift)
    return None if path.name == "native" else path.why


def native_panes(data: DataFrame, plan: EnginePlan, *, delay: int, schema: T.StructType,
                 metrics_name: str) -> DataFrame:
    """The pane stream of `plan` by Spark's window aggregation (`native_equivalent` said yes)."""
    fn = plan.window
    data = observe_input(data, metrics_name, null_event_time=True)
    ts = F.timestamp_micros(F.col(EVENT_TIME))
    src = data.withColumn(_TS, ts).withWatermark(_TS, interval_ms(delay))
    if isinstance(fn, ast.Fixed):
        size = fn.size.micros
        win = F.window(_TS, f"{size} microseconds", f"{size} microseconds",
                       f"{fn.offset.micros % size} microseconds")
    elif isinstance(fn, ast.Sliding):
        win = F.window(_TS, f"{fn.size.micros} microseconds", f"{fn.period.micros} microseconds",
                       f"{fn.offset.micros % fn.period.micros} microseconds")
    else:  # path_for chose Spark's operator only for FIXED and SLIDING windows
        raise ValueError(f"Spark's streaming window aggregation cannot run {fn}")
    aggs = []
    for agg in plan.aggregates:
        col = F.col(agg.column) if agg.column is not None else F.lit(None)
        expr = {"count_star": lambda: F.count(F.lit(1)), "count": lambda: F.count(col),
                "sum": lambda: F.sum(col), "avg": lambda: F.avg(col), "min": lambda: F.min(col),
                "max": lambda: F.max(col)}[agg.kind]()
        aggs.append(expr.alias(agg.output))
    grouped = src.groupBy(*[F.col(k) for k in plan.keys], win.alias(_WINDOW)).agg(*aggs)
    out = grouped.select(
        *[F.col(k) for k in plan.keys], *[F.col(a.output) for a in plan.aggregates],
        F.col(f"{_WINDOW}.start").alias(WINDOW_START), F.col(f"{_WINDOW}.end").alias(WINDOW_END),
        F.lit(0).cast("long").alias(PANE_INDEX), F.lit(ON_TIME).alias(PANE_TIMING),
        F.lit(True).alias(IS_LAST), F.current_timestamp().alias(EMIT_TIME),
        (F.col(f"{_WINDOW}.start") if plan.output_time is ast.OutputTime.START_OF_WINDOW
         else F.col(f"{_WINDOW}.end") - F.expr("INTERVAL 1 MICROSECOND")).alias(OUTPUT_TIME),
        *([F.lit(False).alias(IS_RETRACTION)] if plan.mode.retracting else []))
    out = out.observe(metrics_name, F.count(F.lit(1)).alias("panes"), F.max(F.unix_micros(EMIT_TIME)).alias("batch_time"))
    return out.select(*[F.col(f.name).cast(f.dataType) for f in schema.fields])
