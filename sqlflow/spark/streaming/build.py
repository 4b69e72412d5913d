"""Building a pane stream: which operator runs a plan over a streaming DataFrame, and with what."""
from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import types as T

from ...columns import EVENT_TIME, GAP, PARTITION, SOURCE, when_column
from ...engine import EnginePlan
from ...errors import SqlflowUnsupportedError
from .metrics import METRICS_NAME
from .native import native_equivalent, native_panes
from .owned import OwnedRecipe, owned_obstacle
from .pane_stream import PaneStream
from .per_partition import PartitionRule
from .schema import pane_schema
from .stateful import stateful_panes
from .watermark import UNBOUNDED_SHIFT, lateness_shift


def stream_panes(input_df: DataFrame, plan: EnginePlan, *, delay: int, **options) -> DataFrame:
    """A streaming DataFrame of the panes of `plan` over `input_df` (see `build_stream`)."""
    return build_stream(input_df, plan, delay=delay, **options).panes


def build_stream(input_df: DataFrame, plan: EnginePlan, *, delay: int, buckets: int | None = None,
                 native: bool | None = None, heartbeat: bool | None = None, finish_dir: str | None = None,
                 keep_dropped: bool = False, time_shift: int = 0, output_schema: T.StructType | None = None,
                 metrics_name: str = METRICS_NAME, grouping: str = "bucket",
                 spark_drops_late: bool = False, engine_types: dict | None = None,
                 decode: dict | None = None, sources: tuple[str, ...] = (),
                 source_delays: tuple[int, ...] = (), report: bool = False,
                 partition: PartitionRule | None = None) -> PaneStream:
    """Build the pane stream of `plan` over the streaming DataFrame `input_df`.

    - `input_df` has the engine input columns (event time as int64 microseconds, keys, aggregate
      inputs, WHEN and gap columns) and no watermark of its own;
    - `delay`: the bounded-delay watermark (us): W = max event time - delay (Spark's, per batch,
      in whole milliseconds);
    - `buckets`: hash buckets of keys (default: `conf.streaming_buckets`, from the cores);
    - `native`: None chooses Spark's native window aggregation when it is equivalent, True
      requires it, False forces the stateful operator;
    - `heartbeat`: visit every bucket in every batch with data, telling it the batch's max event
      time (default on; never with grouping="key"). PERIOD and DELAY then fire at the first batch
      at or after their time, and the watermark survives a restart that Spark's does not (the
      re-run of a batch the sink had committed is skipped unexecuted: Spark's watermark lags one
      batch, the operator's does not; docs/streaming.md section 7). False saves a second read of
      each batch's event times (within noise on benchmarks/streaming.py);
    - `finish_dir`: a directory for the end-of-input marker (`PaneStream.finish`);
    - `keep_dropped`: also output dropped rows (`PaneStream.dropped`; a stream under ASCENDING PER
      always has them, as an ordering does). The owned-sink executor keeps them when `start` is
      given a `dropped_path`, and then does not combine rows (each dropped row is listed). A
      stream built without them can build its twin with them (`PaneStream.keeping_dropped`,
      which `start(..., dropped_path=...)` runs on the operator): they cost the stateful operator
      (never the native one) and its combining, so only a stream whose rows are asked for pays;
    - `time_shift` (us): the watermark column is event time + time_shift; use e.g. 100 years for
      event times before 1970 (Spark's watermark starts at 0, the epoch);
    - `grouping`: "bucket" (default) or "key" (one call per key: for measurements only);
    - `spark_drops_late`: let Spark drop rows too late for all their windows before the operator
      (`lateness_shift`; counted as rows in `spark_dropped_late`) instead of shipping them to the
      engine (counted per (row, window) in `dropped_too_late`, and returned with keep_dropped);
    - `engine_types`, `decode`: the stateful operator's Spark types of aggregate outputs (and
      their overflow columns) where they differ from `output_schema`'s, and the SQL that turns
      them into it (sqlflow.spark.handover: Spark's overflow rules for SUM);
    - `sources`, `source_delays`: several watermarked inputs (their names and DELAY OF, us): the
      input has column SOURCE (each row's source number) and its own per-source Spark watermarks
      (`several.several_sources`); the window's watermark is the minimum of the sources' (the
      stateful operator, which counts late rows per source). `delay` is then unused;
    - `report`: a later windowed stage reads this one (`chaining`): the stateful operator, whose
      every call reports its bucket's output watermark (`PaneStream.chain`);
    - `partition`: the source's watermark is `ASCENDING PER` (docs/semantics.md, 1.2): `input_df`
      has column `columns.PARTITION`, `delay` is unused, and the watermark is computed per
      partition over the micro-batches (`per_partition` for the owned-sink executor); of
      several sources (`PartitionRule.sources`, `sources` then empty) `input_df` has SOURCE too,
      and each source's watermark is computed alike (the window's the minimum).
    """
    spark = input_df.sparkSession
    several = sources or (partition.sources if partition is not None else ())
    data = input_df.select(*engine_columns(input_df, plan), *([SOURCE] if several else []),
                           *([PARTITION] if partition is not None else []))
    schema = output_schema or pane_schema(data.schema, plan)
    reason = native_equivalent(plan, time_shift=time_shift) if native is not False else "forced"
    if sources:
        reason = "several watermarked sources"
    if report:
        reason = "a later windowed stage reads its output watermark"
    if native and reason is not None:
        raise SqlflowUnsupportedError(f"the native operator is not equivalent here: {reason}", clause="STREAM")
    recipe = OwnedRecipe(data, plan, delay, time_shift, schema, engine_types or {}, decode or {}, metrics_name,
                         finish_dir, buckets,
                         owned_obstacle(plan, data.schema, sources=sources if partition is None else (),
                                        report=report, grouping=grouping,
                                        spark_drops_late=spark_drops_late), partition)
    if partition is not None:
        from .partitioned import partitioned_panes

        stream = partitioned_panes(spark, data, plan, partition, schema=schema, finish_dir=finish_dir,
                                   buckets=buckets, metrics_name=metrics_name, engine_types=engine_types or {},
                                   decode=decode or {}, report=report)
        stream.owned = recipe
        return stream
    if reason is None and not keep_dropped and finish_dir is None:
        panes = native_panes(data, plan, delay=delay, schema=schema, metrics_name=metrics_name)
        stream = PaneStream(panes, None, None, None, "native", 0, metrics_name, owned=recipe)
    else:
        stream = stateful_panes(spark, data, plan, delay=delay, buckets=buckets, heartbeat=heartbeat,
                                finish_dir=finish_dir, keep_dropped=keep_dropped, time_shift=time_shift,
                                schema=schema, metrics_name=metrics_name, grouping=grouping,
                                shift=lateness_shift(plan) if spark_drops_late else UNBOUNDED_SHIFT,
                                engine_types=engine_types or {}, decode=decode or {}, sources=tuple(sources),
                                source_delays=tuple(source_delays), report=report)
    stream.owned = recipe
    if not keep_dropped:
        def keeping_dropped() -> PaneStream:  # the same stream, listing its dropped rows
            return build_stream(input_df, plan, delay=delay, buckets=buckets, native=False, heartbeat=heartbeat,
                                finish_dir=finish_dir, keep_dropped=True, time_shift=time_shift,
                                output_schema=output_schema, metrics_name=metrics_name, grouping=grouping,
                                spark_drops_late=spark_drops_late, engine_types=engine_types, decode=decode,
                                sources=sources, source_delays=source_delays, report=report)

        stream.keeping_dropped = keeping_dropped
    return stream


def engine_columns(df: DataFrame, plan: EnginePlan) -> list[str]:
    """The engine input columns `plan` reads, each once (an error names those `df` lacks)."""
    cols = [*plan.keys, EVENT_TIME]
    cols += [a.column for a in plan.aggregates if a.column is not None]
    cols += [when_column(i) for i in range(plan.n_when)]
    if plan.per_row_gap:
        cols.append(GAP)
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise SqlflowUnsupportedError(f"the stream lacks engine input columns {missing}", clause="STREAM")
    return list(dict.fromkeys(cols))
