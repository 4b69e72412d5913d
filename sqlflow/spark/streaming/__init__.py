"""Windowed queries on Spark Structured Streaming: panes as an append-only changelog.

The streaming peer of the bounded path (docs/streaming.md). `build_stream(input_df, plan,
delay=...)` turns a streaming DataFrame that already has the engine's input columns
(`sqlflow.engine.plan`: event time in microseconds, keys, aggregate inputs, WHEN and gap columns)
into a `PaneStream`, whose `panes` have the columns of the bounded path. Two operators can run it:

- Spark's native streaming window aggregation, where its output is provably the same (`native`);
- otherwise `transformWithStateInPandas` running `Engine.advance` per hash bucket of keys
  (`stateful`, with udfs/streaming.py on the executors), in EventTime mode, with the Spark
  watermark put on a shifted column (`watermark`) so that Spark only drops rows the engine would
  drop too, and the rows of a micro-batch pre-combined where that is exact (`combine`).

`start(...)` writes a pane stream to a sink (json, csv, parquet, memory, console, or a table)
with a checkpoint, a trigger interval or availableNow, and optionally finishes a bounded stream
(`sink`). `query_metrics(query)` sums what was counted (late rows, malformed records, panes,
retractions) over a query's progress (`metrics`). `read_stream(...)` reads a file source with
Spark's PERMISSIVE / DROPMALFORMED / FAILFAST modes while counting malformed records (`sources`).
`sqlflow.sql` over a streaming source goes through `sql_stage`.

Every name below is importable from `sqlflow.spark.streaming` itself, as the docs use them.
"""
from __future__ import annotations

from ..conf import STREAMING_BUCKETS as CONF_BUCKETS
from ..conf import STREAMING_FINISH_DIR as CONF_FINISH_DIR
from ..conf import STREAMING_OPERATOR as CONF_OPERATOR
from ..conf import STREAMING_TIME_SHIFT as CONF_TIME_SHIFT
from .build import build_stream, engine_columns, stream_panes
from .combine import combinable
from ..report import late_by_source
from .metrics import (METRICS_NAME, SOURCE_METRICS_NAME, late_rows, progress_metrics, query_metrics,
                      state_summary, watermark_log)
from .native import NATIVE_AGGREGATES, native_equivalent
from .pane_stream import PaneStream, pane_streams, write_finish_marker
from .schema import PANE_COLUMNS, RETRACTION_COLUMN, aggregate_type, pane_schema
from .sink import FILE_FORMATS, start
from .sources import read_stream
from .sql_stage import streaming_stage
from .watermark import UNBOUNDED_SHIFT, lateness_shift

__all__ = [
    "CONF_BUCKETS", "CONF_FINISH_DIR", "CONF_OPERATOR", "CONF_TIME_SHIFT",
    "FILE_FORMATS", "METRICS_NAME", "NATIVE_AGGREGATES", "PANE_COLUMNS", "RETRACTION_COLUMN",
    "SOURCE_METRICS_NAME", "UNBOUNDED_SHIFT", "PaneStream", "aggregate_type", "build_stream", "combinable",
    "engine_columns", "late_by_source", "late_rows", "lateness_shift", "native_equivalent", "pane_schema", "pane_streams",
    "progress_metrics", "query_metrics", "read_stream", "start", "state_summary", "stream_panes",
    "streaming_stage", "watermark_log", "write_finish_marker",
]
