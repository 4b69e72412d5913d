"""The watermark of a replay, computed by Spark and given to every bucket of the engine path.

A replayed source (`FROM t WATERMARK ts <model> ARRIVAL at`) has one watermark for all keys: it
is a function of the whole stream, so each bucket cannot compute it from its own rows. The
driver gets the rows that can set the watermark (`_records`: all pairs of a small input, those
each input partition keeps of a large one) and turns them into the timeline of the source's
model (`sqlflow.engine.watermarks`):

- `DELAY OF d`: max event time arrived so far - d;
- `PERFECT`: min event time of the rows not yet arrived;
- `TIMELINE steps`: the (proc_time, watermark) rows of table `steps`, NULL watermark = +inf.
The end of the input (`p_end`) is the last arrival (or timeline step), the same for every bucket.
The watermark is the source's, before any WHERE or JOIN: Spark's own WATERMARK clause works so.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sqlglot import exp

from .. import ast
from ..errors import SqlflowAnalysisError, SqlflowError, SqlflowExecutionError
from ..engine import EMPTY_TIMELINE, ProcessingClock, Timeline, bounded_delay, minimum, perfect
from ..time import NEG_INF, POS_INF
from ..plan.relations import source_select, to_spark_sql, visible_ctes, with_ctes
from ..plan.windowed_select import Source, WindowedSelect, parse_column


@dataclass
class Replay:
    """The global watermark and end of input of one replayed windowed SELECT."""

    timeline: Timeline
    p_end: int
    rows: int            # rows of the source with an event and an arrival time
    model: str           # the model, for explain()


def timestamp_check(ws: WindowedSelect, source: Source, dtype, what: str, column: str, pos) -> None:
    from pyspark.sql import types as T

    from .select_types import to_timestamp_hint

    if not isinstance(dtype, (T.TimestampType, T.TimestampNTZType)):
        raise ws.error(SqlflowAnalysisError,
                       f"the {what} column {column} of the WATERMARK clause is {dtype.simpleString().upper()}, "
                       "not a TIMESTAMP", "WATERMARK", pos=pos or source.watermark.pos, hint=to_timestamp_hint(column, dtype))


def source_query(source: Source) -> exp.Query:
    """SELECT <event time>, <arrival> FROM <the watermarked relation> (with its visible CTEs)."""
    w = source.watermark
    return source_select(source.node, [exp.alias_(parse_column(w.event_time), "et"),
                                       exp.alias_(parse_column(source.arrival), "at")])


def replay(spark, ws: WindowedSelect, args, run_sql) -> Replay:
    """The replay watermark of a windowed SELECT. `run_sql(sql, node)` runs a query and locates
    analysis errors at `node` of the user's query.

    Several replayed sources (the branches of a UNION ALL) each have their own watermark; the
    window's is the minimum of theirs at every processing time (the low-watermark article: a stage's input low
    watermark is the minimum over its inputs), and the input ends at the last of their ends."""
    if ws.domain is not ast.TimeDomain.EVENT_TIME:
        return clock_replay(ws, run_sql)
    parts = [source_replay(spark, ws, source, run_sql) for source in ws.arrival_sources]
    if len(parts) == 1:
        return parts[0]
    timeline = minimum(*(p.timeline for p in parts))
    p_end = max(max(p.p_end for p in parts), timeline.last_time)
    model = "the minimum of " + ", ".join(f"{p.model} ({s.watermark.event_time} of source {i + 1})"
                                          for i, (p, s) in enumerate(zip(parts, ws.arrival_sources)))
    return Replay(timeline, p_end, sum(p.rows for p in parts), model)


def source_replay(spark, ws: WindowedSelect, source: Source, run_sql) -> Replay:
    """The watermark of one replayed source."""
    from pyspark.sql import functions as F

    w = source.watermark
    if isinstance(w.model, ast.AscendingPer):  # per-partition watermark (sqlflow/spark/event_order.py)
        from .event_order import ascending_replay

        return ascending_replay(spark, ws, source, lambda q, node, _pos: run_sql(q, node))[0]
    raw = run_sql(to_spark_sql(source_query(source)), source.node)
    types = {f.name: f.dataType for f in raw.schema.fields}
    timestamp_check(ws, source, types["et"], "event-time", w.event_time, w.event_time_pos)
    timestamp_check(ws, source, types["at"], "arrival", source.arrival, w.arrival_pos)
    micros = raw.select(F.unix_micros(F.col("et").cast("timestamp")).alias("et"),
                        F.unix_micros(F.col("at").cast("timestamp")).alias("at"))
    model = w.model
    kind = "delay" if isinstance(model, ast.BoundedDelay) else "perfect" if isinstance(model, ast.Perfect) else None
    records, rows, first_at, last_at = _records(micros.where(F.col("et").isNotNull() & F.col("at").isNotNull()), kind)
    at = records["at"].to_numpy(np.int64)
    try:
        if isinstance(model, ast.BoundedDelay):
            timeline = _ending(bounded_delay(at, records["et"].to_numpy(np.int64), model.delay.micros),
                               last_at)
            described = f"DELAY OF {model.delay}"
        elif isinstance(model, ast.Perfect):
            # the first arrival sets the first watermark, whether its rows are records or not
            timeline = _ending(perfect(np.r_[at, first_at], np.r_[records["et"].to_numpy(np.int64), POS_INF]),
                               last_at)
            described = "PERFECT"
        elif isinstance(model, ast.Timeline):
            timeline = explicit_timeline(spark, ws, source, run_sql)
            described = f"TIMELINE {model.table}"
        else:
            raise ValueError(f"no replay of {model!r} here")
    except SqlflowError as error:
        if error.line is None:
            raise ws.error(type(error), error.message, error.clause or "WATERMARK", pos=model.pos or w.pos,
                           hint=error.hint) from None
        raise
    p_end = max(last_at, timeline.last_time)
    return Replay(timeline, p_end, rows, described)


def domain_text(ws: WindowedSelect) -> str:
    """What a window ON PROCESSING / INGESTION TIME reads from its replayed sources, for explain()."""
    unused = [w for w in (s.watermark for s in ws.arrival_sources)]
    models = ", ".join(f"{_model_text(w.model)} on {w.event_time}" for w in unused)
    if ws.domain is ast.TimeDomain.PROCESSING_TIME:
        text = ("on PROCESSING TIME: each row's time is its arrival, and the operator's clock is the watermark "
                "(a window fires when processing time reaches its end)")
    else:
        text = ("on INGESTION TIME: each row's event time is its arrival, under the ingestion watermark "
                "(the latest arrival; no row is late)")
    return f"{text}; the source's event-time watermark ({models}) is not used"


def _model_text(model) -> str:
    from .event_order import model_text

    return model_text(model)


def clock_replay(ws: WindowedSelect, run_sql) -> Replay:
    """The watermark of a replayed window ON PROCESSING TIME or ON INGESTION TIME (docs/semantics.md,
    10): each row's time is its arrival, over the rows of every replayed source together.

    - PROCESSING TIME: the operator's clock, W(p) = p (`ProcessingClock`): a window
      fires at its end, an instant of its own even without an arrival there;
    - INGESTION TIME: the latest arrival so far (a bounded delay of 0 over the ingestion times):
      no row can be ingested before a row already seen, so no row is late, and a window fires at
      the first arrival at or after its end (or at the end of the input).
    """
    from pyspark.sql import functions as F

    records, rows, first_at, last_at = [], 0, POS_INF, NEG_INF
    for source in ws.arrival_sources:
        w = source.watermark
        query = source_select(source.node, [exp.alias_(parse_column(source.arrival), "at")])
        raw = run_sql(to_spark_sql(query), source.node)
        timestamp_check(ws, source, raw.schema.fields[0].dataType, "arrival", source.arrival, w.arrival_pos)
        micros = F.unix_micros(F.col("at").cast("timestamp"))
        part, n, first, last = _records(raw.select(micros.alias("et"), micros.alias("at")).where(F.col("at").isNotNull()),
                                        "delay")
        records.append(part["at"].to_numpy(np.int64))
        rows, first_at, last_at = rows + n, min(first_at, first), max(last_at, last)
    if not rows:
        return Replay(EMPTY_TIMELINE, NEG_INF, 0, domain_text(ws))
    if ws.domain is ast.TimeDomain.PROCESSING_TIME:
        timeline: Timeline = ProcessingClock.over(first_at, last_at)
    else:
        at = np.concatenate(records)
        timeline = _ending(bounded_delay(at, at, 0), last_at)
    return Replay(timeline, last_at, rows, domain_text(ws))


#: a replay whose (event time, arrival) pairs Spark estimates at no more than this many bytes is
#: collected whole (`_records`); a larger one is reduced on the executors first
COLLECT_BYTES = 128 * 1024 * 1024


def _records(micros, kind: str | None):
    """The rows (at, et) the watermark model needs, the number of rows, the first and last arrival.

    The timeline is a running extreme in arrival order: DELAY's running maximum of event time,
    PERFECT's minimum over the rows still to arrive. A row that another row dominates (arrived no
    later with an event time no smaller, for DELAY; arrives no earlier with an event
    time no larger, for PERFECT) never sets the watermark alone, and a row dominated within part of
    the input is dominated in all of it. So only the rows nothing dominates need reach the
    driver's model (`sqlflow.udfs.records.frontier`), and any superset of them gives the same steps:

    - input Spark estimates at up to `COLLECT_BYTES`: one native scan collects every pair (Arrow,
      no Python worker; 16 bytes a row on the driver) and the driver keeps the undominated ones.
      Measured on benchmarks/compare.py scenario 2 (2M rows): 0.3 s instead of 0.6-0.9 s;
    - larger or unknown: every input partition keeps the rows nothing in it dominates (one pass,
      no shuffle, `PartitionRecords` on the Python workers) and the driver gets their union,
      about a quarter of the rows when arrivals are nearly in event-time order.
    """
    import pandas as pd

    from ..udfs.records import SCHEMA, PartitionRecords, frontier
    from .conf import estimated_bytes

    size = estimated_bytes(micros) if kind is not None else None
    if size is not None and size <= COLLECT_BYTES:
        pairs = micros.toArrow()
        at = pairs.column("at").to_numpy().astype(np.int64, copy=False)
        et = pairs.column("et").to_numpy().astype(np.int64, copy=False)
        keep = frontier(at, et, kind)
        records = pd.DataFrame({"at": at[keep], "et": et[keep]})
        if not len(at):
            return records, 0, POS_INF, NEG_INF
        return records, len(at), int(at.min()), int(at.max())
    out = micros.mapInPandas(PartitionRecords(kind), SCHEMA).toPandas()
    summary = out[out["summary"]]
    records = out[~out["summary"]]
    rows = int(summary["n"].sum())
    last_at = int(summary["at"].max()) if rows else NEG_INF
    first_at = int(summary["et"].min()) if rows else POS_INF
    records = pd.DataFrame({"at": records["at"].to_numpy(np.int64), "et": records["et"].to_numpy(np.int64)})
    return records, rows, first_at, last_at


def _ending(timeline: Timeline, last_at: int) -> Timeline:
    """The timeline of the records, ending where the input ends (its last arrival)."""
    return Timeline(timeline.times, timeline.values, max(timeline.end, last_at))


def explicit_timeline(spark, ws: WindowedSelect, source: Source, run_sql) -> Timeline:
    """The steps of `TIMELINE <table>`: columns proc_time and watermark (NULL: +inf)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    model = source.watermark.model
    if not isinstance(model, ast.Timeline):
        raise ValueError(f"{_model_text(model)} has no table of steps")
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
    return Timeline.from_steps(frame["p"].astype("Int64").to_numpy(np.int64), marks,
                                          what=f"TIMELINE {name}")
