"""A chained stage's operator: a windowed SELECT over an earlier windowed stage on a stream.

The driver side of udfs/chained_operator.py. Its input is the SELECT's input relation over the earlier
stage's chain (`PaneStream.chain`, passed through the SELECTs between by `chaining.carry_reports`):
panes as DATA rows, reports as REPORT rows. Each data row goes to the hash bucket of its keys, each
report to every bucket (so every bucket runs in every batch the earlier stage ran in, and learns
its watermark and batch time); the operator runs in timeMode None after the earlier one, in the
same query and micro-batch (tests/upstream/test_transform_with_state.py).
"""
from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ...columns import BUCKET, DATA, DROPPED, EVENT_TIME, KIND, REASON, REPORT, REPORT_COLUMNS, SOURCE
from ...engine import EnginePlan
from ...udfs.chained_operator import ChainSpec
from ...udfs.streaming import StreamSpec
from ...udfs.tws import ChainedProcessor
from .build import engine_columns
from .pane_stream import PaneStream
from .schema import is_integral
from .stateful import (bucket_counts, bucket_count, bucket_of, dropped_columns, masked_number_exprs, masked_numbers,
                       operator_outputs, operator_schema)


def chained_panes(spark: SparkSession, data: DataFrame, plan: EnginePlan, *, upstream: PaneStream,
                  schema: T.StructType, metrics_name: str, buckets: int | None = None,
                  engine_types: dict | None = None, decode: dict | None = None,
                  report: bool = False, count_input: bool = True, keep_dropped: bool = False,
                  sources: tuple[str, ...] = ()) -> PaneStream:
    """The pane stream of `plan` over `data`: the engine input columns of the earlier stage's panes
    (KIND DATA) and its reports (KIND REPORT, the REPORT_COLUMNS). `upstream`: the earlier stage's
    pane stream (its bucket count, its finish directory); `report`: this stage reports in turn;
    `count_input`: count the DATA rows as the query's `input_rows` (else the earlier stage counts);
    `keep_dropped`: list the rows this stage drops, and pass on the DROPPED rows of `data` (with
    their REASON: what the stage before dropped), as `PaneStream.dropped`; `sources`: the names of
    several sources, whose number each row carries (SOURCE), counted and listed per source."""
    kind = F.col(KIND)
    cols = engine_columns(data, plan) + ([SOURCE] if sources else [])
    data = data.select(*[F.when(kind == REPORT, F.lit(0)).otherwise(F.col(c)).alias(c) if c == EVENT_TIME
                         else F.col(c) for c in cols], kind, *REPORT_COLUMNS, *([REASON] if keep_dropped else []))
    if count_input:
        data = data.observe(metrics_name + "_input", F.coalesce(F.sum((kind == DATA).cast("long")), F.lit(0))
                            .alias("input_rows"))
    n_buckets = bucket_count(spark, plan, buckets)
    own = bucket_of(plan.keys, n_buckets)
    every = F.sequence(F.lit(0), F.lit(n_buckets - 1))
    targets = F.when(kind == REPORT, every).otherwise(F.array(own)).cast("array<int>")
    rows = data.select("*", F.explode(targets).alias(BUCKET))
    masked = masked_numbers(list(dict.fromkeys([*plan.keys, *(a.column for a in plan.aggregates if a.column)])),
                            data.schema)
    if masked:
        rows = rows.selectExpr(*masked_number_exprs(rows.columns, masked))
    spec = StreamSpec(plan=plan, input_columns=tuple(cols), frame_columns=tuple(rows.columns),
                      integral_columns=tuple(f.name for f in data.schema.fields
                                             if f.name in cols and is_integral(f.dataType)),
                      masked_columns=masked, report=report, keep_dropped=keep_dropped, sources=sources,
                      **bucket_counts(spark, plan, buckets))
    raw = rows.groupBy(BUCKET).transformWithStateInPandas(
        statefulProcessor=ChainedProcessor(ChainSpec(spec, upstream.buckets)),
        outputStructType=operator_schema(spec, schema, engine_types), outputMode="Append", timeMode="None")
    observed, panes, projection, chain = operator_outputs(raw, spec, schema, decode, metrics_name)
    dropped = dropped_projection = None
    if keep_dropped:
        dropped_projection = dropped_columns(spark, plan, sources)
        dropped = observed.where(F.col(KIND) == DROPPED).select(*dropped_projection)
    return PaneStream(panes, observed, dropped, upstream.finish_dir, "stateful", n_buckets, metrics_name,
                      projection, dropped_projection, chain)
