"""`WATERMARK ts ASCENDING PER p [IDLE TIMEOUT d]` on a live stream whose sink sqlflow writes (the
owned-sink executor, docs/streaming.md 3.0 and 5.5; the rule: docs/semantics.md 1.2).

Spark keeps one global watermark, the largest event time minus a delay; the per-partition rule
(each partition's watermark is its latest event time, the source's the minimum over the partitions
not idle) is computed here, by the driver, per micro-batch N at its processing time p(N):

1. the batch's rows are joined with the partition table of batch N-1 (each partition's latest
   event time and last arrival, kept in the state version's bookkeeping): a row older than its
   partition's latest before the batch is behind its partition, dropped and counted (rows of one
   batch are judged only against the batches before: they arrive at one instant);
2. one small aggregation in the JVM gives each partition's largest event time among its other
   rows and the number of rows behind;
3. the driver updates the table and computes W(N) (`udfs.ordered_stream.partition_watermark`, the
   ordering operator's rule): the minimum latest over the partitions with a row in
   `(p(N) - d, p(N)]`, never moving back, unchanged when every partition is idle.

With several sources (a UNION ALL of it and other watermarked streams, docs/semantics.md 9) the
table has each row's source too (`udfs.ordered_stream.sources_watermark`: a DELAY OF source is one
partition "" holding its largest event time, each source has a row holding its own watermark), a
row is behind only within an ASCENDING PER source, and W(N) is the minimum of the sources'.

The batch is then the engine instant `advance(rows not behind, p(N), W(N-1), W(N))`, as any
owned batch: its panes are those of the ARRIVAL replay of the same rows arriving at their
batches' times (its end of input is the finish marker's batch, the replay's its last arrival).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ...columns import DATA, EVENT_TIME, KIND, PARTITION, PREFIX, SOURCE
from ...udfs.ordered_stream import SourceRule, empty_partitions, empty_sources, partition_watermark, sources_watermark

#: the joined columns: the partition's latest event time before the batch, and whether a row is behind it
_BEFORE = PREFIX + "partition_latest"
BEHIND = PREFIX + "behind"


@dataclass(frozen=True)
class PartitionRule:
    """What the executors need of an ASCENDING PER source: its IDLE TIMEOUT (us; None: none). The
    engine input then has column `columns.PARTITION` (each row's partition, a string; NULL values
    are the partition `udfs.ordered_stream.NULL_PARTITION`). Of a window over several sources, one
    at least ASCENDING PER: each source's rule (`sources`, `idle` unused) and name (`names`), the
    query's time shift (us) for the DELAY OF ones; the engine input then has column SOURCE."""

    idle: int | None = None
    sources: tuple[SourceRule, ...] = ()
    names: tuple[str, ...] = ()
    time_shift: int = 0


def table_of(rows: list | None, sources: bool = False) -> pd.DataFrame:
    """The partition table kept in the bookkeeping (`[partition, latest, last]` rows, and the
    source with `sources`) as a frame.

    >>> table_of([["a", 12, 100], ["b", 3, 90]]).values.tolist(), len(table_of(None))
    ([['a', 12, 100], ['b', 3, 90]], 0)
    >>> table_of([["a", 12, 100, 0], [None, 12, 100, 0]], sources=True).values.tolist()
    [['a', 12, 100, 0], [None, 12, 100, 0]]
    """
    if not rows:
        return empty_sources() if sources else empty_partitions()
    table = pd.DataFrame({"k": pd.Series([r[0] for r in rows], dtype=object),
                          "latest": np.array([r[1] for r in rows], np.int64),
                          "last": np.array([r[2] for r in rows], np.int64)})
    return table.assign(s=np.array([r[3] for r in rows], np.int64)) if sources else table


def rows_of(table: pd.DataFrame) -> list:
    """The partition table as the bookkeeping keeps it (JSON: `[partition, latest, last]` rows,
    and the source when the table has one)."""
    columns = [table["k"].to_numpy(object), table["latest"].to_numpy(np.int64), table["last"].to_numpy(np.int64)]
    if "s" in table:
        columns.append(table["s"].to_numpy(np.int64))
    return [[None if row[0] is None else str(row[0]), *(int(v) for v in row[1:])] for row in zip(*columns)]


def flag_behind(batch_df: DataFrame, table: pd.DataFrame, rule: PartitionRule | None = None) -> DataFrame:
    """The batch's rows with column `BEHIND`: a data row older than its partition's latest event
    time of the batches before (`table`; of several sources (`rule.sources`), only an ASCENDING
    PER source's rows are)."""
    on, schema = [PARTITION], f"`{PARTITION}` string, `{_BEFORE}` bigint"
    if rule is not None and rule.sources and len(table):
        per = [i for i, r in enumerate(rule.sources) if r.delay is None]
        table = table[table["s"].isin(per) & table["k"].notna()]
        on, schema = [SOURCE, PARTITION], f"`{SOURCE}` {batch_df.schema[SOURCE].dataType.simpleString()}, " + schema
    if not len(table):
        return batch_df.withColumn(BEHIND, F.lit(False))
    spark = batch_df.sparkSession
    columns = {PARTITION: table["k"].astype(str).to_numpy(object), _BEFORE: table["latest"].to_numpy(np.int64)}
    if len(on) > 1:
        columns = {SOURCE: table["s"].to_numpy(np.int64), **columns}
    before = spark.createDataFrame(pd.DataFrame(columns), schema)
    joined = batch_df.join(F.broadcast(before), on=on, how="left")
    et = F.col(EVENT_TIME)
    behind = (F.col(KIND) == DATA) & et.isNotNull() & F.col(_BEFORE).isNotNull() & (et < F.col(_BEFORE))
    return joined.select(*[F.col(c) for c in batch_df.columns],  # the batch's column order, as without a join
                         F.coalesce(behind, F.lit(False)).alias(BEHIND))


def step_partitions(flagged: DataFrame, table: pd.DataFrame, *, p: int, rule: PartitionRule,
                    wm_prev: int) -> tuple[pd.DataFrame, int, int]:
    """One micro-batch at processing time `p` (us) over the flagged rows (`flag_behind`): the new
    partition table, the watermark W(N) and how many rows were behind their partition. One Spark
    job: each partition's largest event time among its rows not behind, and the count behind."""
    et = F.col(EVENT_TIME)
    several = [F.col(SOURCE).alias("s")] if rule.sources else []
    stats: pd.DataFrame = (flagged.where((F.col(KIND) == DATA) & et.isNotNull())
             .groupBy(*several, F.col(PARTITION).alias("k"))
             .agg(F.max(F.when(~F.col(BEHIND), et)).alias("latest"),
                  F.sum(F.col(BEHIND).cast("long")).alias("behind"))
             .toPandas())
    got = stats[stats["latest"].notna()]
    keys = got["k"].astype(str).to_numpy(object)
    latest = got["latest"].to_numpy(np.int64)
    if rule.sources:
        _, table, wm = sources_watermark(table, rule.sources, got["s"].to_numpy(np.int64), keys, latest,
                                         np.ones(len(keys), bool), p, wm_prev, rule.time_shift)
    else:
        _, table, wm = partition_watermark(table, keys, latest, np.ones(len(keys), bool), p, rule.idle, wm_prev)
    return table, wm, int(stats["behind"].fillna(0).sum())
