"""A windowed SELECT over a live stream with `WATERMARK ts ASCENDING PER p [IDLE TIMEOUT d]`, on
the operators (a `sqlflow.sql` result written by its user, or `start` with the default executor;
docs/streaming.md 5.5, the rule docs/semantics.md 1.2).

Spark's one global watermark cannot express the per-partition rule, so two operators run in one
query, as two chained windowed stages do (chained_stage.py, docs/semantics.md 1.3):

1. the ordering operator (ordered.py, udfs/ordered_stream.py), one group, in pass-through mode:
   it keeps each partition's latest event time and last batch in its state, drops the rows behind
   their partition (counted, `dropped_behind_partition`) and those without an event time, computes
   W(N) (the minimum latest over the partitions not idle at p(N), never back) and releases every
   other row in its own batch;
   its counters row (batch time, W(N), finished) becomes the REPORT row of a stage whose one
   bucket holds nothing back;
2. the windowed stage, chained after it (udfs/chained_operator.py, timeMode None): the batch's
   rows arrive at p(N), are judged against the W(N-1) the last report gave, and the watermark
   steps to W(N): `advance(rows, p(N), W(N-1), W(N))`, the instant of the ARRIVAL replay in which
   the batch's rows arrive together. The finish marker's batch ends the input.

The rows the first stage drops travel on to the second as DROPPED rows with their reason, which
lists them with its own dropped rows (`PaneStream.dropped`, `start(..., dropped_path=...)`): the
query's output is the second operator's, and a second branch read off the first would run it twice.

Of a UNION ALL of it and other watermarked streams (`PartitionRule.sources`, docs/semantics.md 9)
the rows carry their source (SOURCE) through both operators: the first computes each source's
watermark and reports their minimum (udfs/ordered_stream.py's `sources_watermark`), the second
counts and lists its dropped rows per source, as a window over several DELAY OF streams does.

The owned-sink executor computes the same watermark in the driver instead (per_partition.py).
"""
from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ...columns import (DATA, DROPPED, EVENT_TIME, KIND, METRICS, PANE, PARTITION, REASON, REPORT, REPORT_DONE,
                        REPORT_FROM, REPORT_HELD, REPORT_SEQ, REPORT_TIME, REPORT_WM, SOURCE, metric_column)
from ...engine import EnginePlan
from ...time import POS_INF
from .chained_stage import chained_panes
from .metrics import PARTITIONS_SUFFIX
from .ordered import from_wire, ordered_stream, user_column
from .pane_stream import PaneStream
from .per_partition import PartitionRule


def partitioned_panes(spark: SparkSession, data: DataFrame, plan: EnginePlan, rule: PartitionRule, *,
                      schema: T.StructType, finish_dir: str | None, buckets: int | None, metrics_name: str,
                      engine_types: dict, decode: dict, report: bool = False) -> PaneStream:
    """The pane stream of `plan` over `data` (the engine input columns and `columns.PARTITION`)
    under the per-partition watermark `rule`."""
    names = [c for c in data.columns if c != PARTITION]
    # the ordering operator reads its event time as a timestamp, and keeps its own as microseconds
    rows = data.select(*[F.timestamp_micros(F.col(c)).alias(c) if c == EVENT_TIME else F.col(c) for c in names],
                       F.col(PARTITION))
    first = ordered_stream(rows, names=names, event_time=EVENT_TIME, ties=[], delay=0, finish_dir=finish_dir,
                           metrics_name=metrics_name + PARTITIONS_SUFFIX, per_partition=True, idle=rule.idle,
                           pass_through=True, sources=rule.sources, source=SOURCE if rule.sources else None,
                           time_shift=rule.time_shift)
    raw = first.raw
    assert raw is not None
    fields = {f.name: f.dataType for f in data.schema.fields}
    kind = F.col(KIND)
    is_row = kind.isin(PANE, DROPPED)  # a row handed on, or one the operator dropped (with its REASON)
    carried = [F.when(is_row, F.col(EVENT_TIME) if c == EVENT_TIME
                      else from_wire(F.col(user_column(i)), fields[c])).alias(c) for i, c in enumerate(names)]
    reported = {
        REPORT_FROM: F.lit(0).cast("bigint"),
        REPORT_SEQ: F.col(metric_column("batch_time")),  # one call per batch, and batch times only grow
        REPORT_WM: F.coalesce(F.col(metric_column("watermark")), F.lit(POS_INF)),
        REPORT_HELD: F.lit(POS_INF).cast("bigint"),
        REPORT_TIME: F.col(metric_column("batch_time")),
        REPORT_DONE: F.col(metric_column("finished")) == 1,
    }
    # never NULL (0, false on the rows): a NULL would make an int64 column float64 for pandas
    reports = [F.when(is_row, F.lit(False) if c == REPORT_DONE else F.lit(0).cast("bigint"))
               .otherwise(value).alias(c) for c, value in reported.items()]
    kinds = F.when(kind == PANE, F.lit(DATA)).when(kind == DROPPED, F.lit(DROPPED)).otherwise(F.lit(REPORT))
    chain = raw.where(kind.isin(PANE, DROPPED, METRICS)).select(*carried, kinds.cast("int").alias(KIND), *reports,
                                                                F.col(REASON))
    return chained_panes(spark, chain, plan, upstream=first, schema=schema, metrics_name=metrics_name,
                         buckets=buckets, engine_types=engine_types, decode=decode, report=report,
                         count_input=False, keep_dropped=True, sources=rule.names)
