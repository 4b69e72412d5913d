"""Event-time ordering and ascending per-partition watermarks on Spark's replay path
(docs/semantics.md, 1.2 and 11).

- `ascending_replay`: the watermark of a replayed `WATERMARK ts ASCENDING PER p [IDLE TIMEOUT d]`
  source. Spark aggregates the source to one row per (partition, arrival instant) with its largest
  event time; the driver turns them into the timeline (`sqlflow.engine.partitions`) and the
  table of each partition's latest event time, which a pandas UDF reads on the executors to tell
  the rows behind their partition.
- `order_stages`: each SELECT ordered by event time over a replay (`frontend.ordering`) gets each
  row's emit instant from a pandas UDF over (event time, arrival, partition), computed by
  `sqlflow.engine.ordering` against the source's timeline. The SELECT keeps its own items, WHERE
  and JOINs; sqlflow adds `emit_time`, keeps the rows that are not late and orders by
  `emit_time` first. Late rows are counted and listed (`sqlflow.metrics`, `sqlflow.dropped`).
- `partition_filters`: a windowed SELECT over an ASCENDING PER replay reads its source without
  the rows behind their partition (listed and counted as a stage of their own).

- `_order_stream`: a SELECT ordered by event time over a live stream (`WATERMARK ts DELAY OF d`
  or `ASCENDING PER p [IDLE TIMEOUT d]`) reads the released rows of the ordering operator
  (`streaming.ordered`, `udfs/ordered_stream.py`: transformWithStateInPandas, rows buffered in its
  state until the watermark passes them, released in order with their batch's time as
  `emit_time`; under ASCENDING PER the operator computes the per-partition watermark itself);
  the SELECT keeps its items and WHERE.

A windowed SELECT over ASCENDING PER on a live stream runs on the streaming path
(`streaming.partitioned` on the operators, `streaming.per_partition` on the owned-sink executor),
which computes the per-partition watermark over the micro-batches itself.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd  # the UDFs' type hints, resolved in this module's globals
from sqlglot import exp

from .. import ast
from ..columns import (BEHIND_PARTITION, DROPPED_ARRIVAL_TIME, DROPPED_EVENT_TIME, DROPPED_REASON, EMIT_TIME, NULL_ARRIVAL_TIME,
                       NULL_EVENT_TIME, TOO_LATE)
from ..errors import SqlflowUnsupportedError
from ..frontend import ordering
from ..frontend.dialect import WATERMARK_KEY
from ..time import NEG_INF
from ..plan.relations import strip_clauses, to_spark_sql, visible_ctes, with_ctes
from .report import Stage
from ..plan.windowed_select import Source, feeding_sources, parse_column

if TYPE_CHECKING:  # pragma: no cover
    from .execute import Runner

#: reason -> counter (the rest are the windowed SELECTs' counters, sqlflow.columns.DROP_METRICS)
REASON_METRICS = {TOO_LATE: "dropped_too_late", BEHIND_PARTITION: "dropped_behind_partition",
                  NULL_EVENT_TIME: "dropped_null_event_time", NULL_ARRIVAL_TIME: "dropped_null_arrival_time"}

RULE = ("each partition's watermark is its latest event time; the source's is the minimum over the "
        "partitions not idle{idle}, never moving back; a row older than its partition's latest is late "
        f"({BEHIND_PARTITION})")


def model_text(model) -> str:
    """The watermark model as `explain` names it."""
    if isinstance(model, ast.AscendingPer):
        idle = f" IDLE TIMEOUT {model.idle_timeout}" if model.idle_timeout is not None else ""
        rule = RULE.format(idle=f" (no row for {model.idle_timeout})" if model.idle_timeout is not None else "")
        return f"ASCENDING PER {model.partition}{idle} ({rule})"
    if isinstance(model, ast.BoundedDelay):
        return f"DELAY OF {model.delay}"
    return "PERFECT" if isinstance(model, ast.Perfect) else f"TIMELINE {model.table}"


@dataclass
class _Locator:
    """Where the replay's errors point (what `timeline.source_replay` asks of a windowed SELECT)."""

    statement: Any
    pos: ast.Position | None
    domain: ast.TimeDomain = ast.TimeDomain.EVENT_TIME

    def error(self, kind, message: str, clause: str, node=None, pos=None, hint=None):
        return self.statement.source.error_at(kind, message, pos or self.pos, clause=clause, hint=hint)


# ------------------------------------------------------------------ the per-partition watermark


def ascending_replay(spark, where, source: Source, run_sql):
    """The timeline of a replayed ASCENDING PER source (a `timeline.Replay`) and its
    `PartitionLatest` (for the rows behind their partition)."""
    from pyspark.sql import functions as F

    from ..engine import PartitionLatest
    from ..engine import ascending_replay as engine_replay
    from .timeline import Replay, timestamp_check

    w = source.watermark
    model = w.model
    if not isinstance(model, ast.AscendingPer):
        raise ValueError(f"{model_text(model)} is not ASCENDING PER")
    query = exp.Select(expressions=[exp.alias_(parse_column(w.event_time), "et"),
                                    exp.alias_(parse_column(source.arrival), "at"),
                                    exp.alias_(exp.cast(parse_column(model.partition), "string"), "pt")])
    query.set("from_", exp.From(this=strip_clauses(source.node)))
    raw = run_sql(to_spark_sql(with_ctes(query, visible_ctes(source.node))), source.node,
                  model.partition_pos or model.pos)
    types = {f.name: f.dataType for f in raw.schema.fields}
    timestamp_check(where, source, types["et"], "event-time", w.event_time, w.event_time_pos)
    timestamp_check(where, source, types["at"], "arrival", source.arrival, w.arrival_pos)
    groups = (raw.where(F.col("et").isNotNull() & F.col("at").isNotNull())
              .groupBy("pt", F.unix_micros(F.col("at").cast("timestamp")).alias("a"))
              .agg(F.max(F.unix_micros(F.col("et").cast("timestamp"))).alias("e"), F.count(F.lit(1)).alias("n"))
              .toPandas())
    a = groups["a"].to_numpy(np.int64)
    e = groups["e"].to_numpy(np.int64)
    pt = groups["pt"].to_numpy(object)
    idle = model.idle_timeout.micros if model.idle_timeout is not None else None
    timeline, _ = engine_replay(a, e, pt, idle)
    last_at = int(a.max()) if a.size else NEG_INF
    replay = Replay(timeline, max(last_at, timeline.last_time), int(groups["n"].sum()), model_text(model))
    return replay, PartitionLatest(a, e, pt)


def _source_replay(spark, where, source: Source, run_sql):
    """The replay of one source, and its PartitionLatest (None unless ASCENDING PER)."""
    from .timeline import source_replay

    if isinstance(source.watermark.model, ast.AscendingPer):
        return ascending_replay(spark, where, source, run_sql)
    return source_replay(spark, where, source, lambda q, node: run_sql(q, node, None)), None


# ------------------------------------------------------------------ the pandas UDFs


def _emit_function(timeline, p_end: int, latest):
    """f(event µs, arrival µs, partition) -> emit µs, NULL for a row that is late, behind its
    partition, or without an event or arrival time."""
    from ..engine import emit_times

    def emit(et: pd.Series, at: pd.Series, pt: pd.Series) -> pd.Series:
        valid = (et.notna() & at.notna()).to_numpy()
        out = pd.array(np.zeros(len(et), np.int64), dtype="Int64")
        t = et.to_numpy(np.int64, na_value=0)
        a = at.to_numpy(np.int64, na_value=0)
        behind = t < latest.before(a, pt.to_numpy(object)) if latest is not None else None
        when, late = emit_times(timeline, t, a, p_end, behind)
        out[:] = when
        out[~valid | late] = pd.NA
        return pd.Series(out)

    return emit


def _reason_function(timeline, latest):
    """f(event µs, arrival µs, partition) -> why the row is not emitted (NULL: it is)."""
    def reason(et: pd.Series, at: pd.Series, pt: pd.Series) -> pd.Series:
        t = et.to_numpy(np.int64, na_value=0)
        a = at.to_numpy(np.int64, na_value=0)
        out = np.full(len(et), None, dtype=object)
        late = t < timeline.before_many(a)
        out[late] = TOO_LATE
        if latest is not None:
            out[t < latest.before(a, pt.to_numpy(object))] = BEHIND_PARTITION
        out[at.isna().to_numpy()] = NULL_ARRIVAL_TIME
        out[et.isna().to_numpy()] = NULL_EVENT_TIME
        return pd.Series(out, dtype=object)

    return reason


def _behind_function(latest):
    """f(event µs, arrival µs, partition) -> whether the row is behind its partition."""
    def behind(et: pd.Series, at: pd.Series, pt: pd.Series) -> pd.Series:
        t = et.to_numpy(np.int64, na_value=0)
        a = at.to_numpy(np.int64, na_value=0)
        out = (t < latest.before(a, pt.to_numpy(object))) & et.notna().to_numpy() & at.notna().to_numpy()
        return pd.Series(out)

    return behind


def _register(runner: "Runner", kind: str, fn, returns: str) -> str:
    from pyspark.sql.functions import pandas_udf

    from ..columns import view_name

    name = view_name(kind, runner.run_id, len(runner.views))
    runner.spark.udf.register(name, pandas_udf(fn, returns))  # type: ignore[call-overload]
    runner.views.append(name)  # a name of this run (temporary functions outlive the analysis harmlessly)
    return name


def _call(name: str, source: Source) -> exp.Expr:
    """`name(unix_micros(et), unix_micros(at), CAST(partition AS STRING))` over the source's columns."""
    w = source.watermark
    micros = [exp.func("unix_micros", exp.cast(source.column(c), "timestamp")) for c in (w.event_time, source.arrival)]
    model = w.model
    pt = (exp.cast(source.column(model.partition), "string") if isinstance(model, ast.AscendingPer)
          else exp.cast(exp.null(), "string"))
    return exp.Anonymous(this=name, expressions=[*micros, pt])


# ------------------------------------------------------------------ streams


def refuse_on_stream(statement, watermark: ast.SourceWatermark, what: str, hint: str | None = None) -> None:
    """What is not run on a live stream yet under ASCENDING PER: a located refusal."""
    pos = watermark.model.pos if isinstance(watermark.model, ast.AscendingPer) else watermark.pos
    raise statement.source.error_at(
        SqlflowUnsupportedError, f"{what} is not yet run on a live stream", pos, clause="WATERMARK",
        hint=hint or "record the stream with each row's arrival time (its micro-batch's time) and replay it: "
                     "FROM t WATERMARK <column> ... ARRIVAL <arrival column> (docs/semantics.md, 11)")


# ------------------------------------------------------------------ ordering stages


class OrderStage(Stage):
    """A SELECT ordered by event time, as it ran: its late rows and counts."""

    counting: Any = None  # function() -> rows of (reason, n) over the source

    def describe(self) -> str:
        return "\n".join([f"{self.label}:", f"  path: {self.path} ({self.why})",
                          f"  input: {self.replay}", *[f"  warning: {n}" for n in self.notes]])

    def metrics(self) -> dict:
        from ..columns import METRIC_NAMES

        counts: dict[str, int] = dict.fromkeys(METRIC_NAMES, 0)
        counts["dropped_behind_partition"] = 0
        counts["ordered_rows"] = 0
        if self.counting is None:
            return counts
        for row in self.counting():
            n = int(row["n"])
            counts["input_rows"] += n
            if row["reason"] is None:
                counts["ordered_rows"] += n
            else:
                counts[REASON_METRICS[row["reason"]]] += n
        return counts


def _label(statement, order: ordering.EventTimeOrder) -> str:
    pos = statement.position(order.first)
    where = f" at line {pos.line}, column {pos.column}" if pos else ""
    return f"the SELECT ordered by {order.watermark.event_time}{where}"


def order_stages(runner: "Runner", first_number: int) -> list[Stage]:
    """Run every SELECT ordered by event time over a replay or a live stream (rewritten in
    place); bounded data keeps Spark's ORDER BY."""
    stages: list[Stage] = []
    for order in ordering.event_time_orders(runner.statement):
        if not order.replay:
            if runner.spark is not None and _is_stream(runner, order):
                stages.append(_order_stream(runner, order, first_number + len(stages)))
            continue
        stages.append(_order_replay(runner, order, first_number + len(stages)))
    return stages


def _is_stream(runner: "Runner", order: ordering.EventTimeOrder) -> bool:
    query = exp.Select(expressions=[exp.Star()])
    query.set("from_", exp.From(this=strip_clauses(order.relation)))
    df = runner.sql(to_spark_sql(with_ctes(query, visible_ctes(order.relation))), order.relation, order.watermark.pos,
                    clause="WATERMARK")
    return bool(df.isStreaming)


def _order_replay(runner: "Runner", order: ordering.EventTimeOrder, number: int) -> Stage:
    from pyspark.sql import functions as F

    statement = runner.statement
    source = Source(order.relation, order.watermark, True)
    w = order.watermark
    stage = OrderStage(number, _label(statement, order), "engine",
                       "rows are buffered and emitted, in event-time order, once the watermark passes them "
                       "(Flink's time design draft, 'Ordering Elements in a Stream')", "ordered")
    stage.replay = f"replay of ARRIVAL {w.arrival}, watermark {model_text(w.model)}"
    locator = _Locator(statement, w.pos)

    def run_sql(query, node, pos):
        return runner.sql(query, node, pos or w.pos, clause="WATERMARK")

    emit_expr: exp.Expr
    if runner.spark is None or runner.dry:
        stage.replay += " (the timeline is computed when the query runs)"
        emit_expr = _call("sqlflow_emit_instant", source)  # what explain shows
        _rewrite(order, emit_expr)
        return stage
    replay, latest = _source_replay(runner.spark, locator, source, run_sql)
    stage.replay += f": {replay.rows} rows, {len(replay.timeline.times)} watermark steps"
    stage.timeline = replay.timeline
    emit_name = _register(runner, "emit", _emit_function(replay.timeline, replay.p_end, latest), "bigint")
    reason_name = _register(runner, "reason", _reason_function(replay.timeline, latest), "string")
    emit_expr = _call(emit_name, source)
    reason_expr = _call(reason_name, source)
    # the late rows and the counts, over the source relation (before the SELECT's WHERE, as windows count)
    relation = strip_clauses(order.relation)
    base = exp.Select(expressions=[exp.Star(), exp.alias_(reason_expr, "__sqlflow_reason")])
    base.set("from_", exp.From(this=relation))
    text = to_spark_sql(with_ctes(base, visible_ctes(order.relation)))
    rows = runner.sql(text, order.relation, w.pos, clause="WATERMARK")
    reasons = rows.columns[-1]

    def dropped():
        user = [F.col(f"`{c}`") for c in rows.columns[:-1]]
        return rows.where(F.col(reasons).isNotNull()).select(
            *user, F.col(f"`{_name(w.event_time)}`").cast("timestamp").alias(DROPPED_EVENT_TIME),
            F.col(f"`{_name(source.arrival)}`").cast("timestamp").alias(DROPPED_ARRIVAL_TIME),
            F.col(reasons).alias(DROPPED_REASON))

    stage.dropped_rows = dropped
    stage.counting = lambda: rows.groupBy(F.col(reasons).alias("reason")).agg(F.count(F.lit(1)).alias("n")).collect()
    _rewrite(order, emit_expr)
    return stage


def _order_stream(runner: "Runner", order: ordering.EventTimeOrder, number: int) -> Stage:
    """A SELECT ordered by event time over a live stream: its source relation becomes the
    released rows of the ordering operator (sqlflow/spark/streaming/ordered.py), in order, with
    their emit instant; the SELECT's items and WHERE apply to them as written."""
    from pyspark.sql import types as T

    from . import conf
    from .streaming.ordered import CARRIED, PARTITION_COLUMN, ordered_stream, tie_column
    from .streaming.session_conf import use_state_store

    statement = runner.statement
    w = order.watermark
    ordering.check(statement, order)
    per = isinstance(w.model, ast.AscendingPer)
    if not per and not isinstance(w.model, ast.BoundedDelay):
        raise statement.source.error_at(
            SqlflowUnsupportedError, f"ORDER BY {w.event_time} over a live stream needs WATERMARK {w.event_time} "
            f"DELAY OF <interval> or ASCENDING PER <column>, not {model_text(w.model)} (for recorded data)", w.pos,
            clause="WATERMARK")
    select = order.select
    for arg, clause in (("joins", "JOIN"), ("limit", "LIMIT"), ("offset", "OFFSET"), ("distinct", "DISTINCT")):
        found = select.args.get(arg)
        if found:
            node = found[0] if isinstance(found, list) else found
            raise statement.source.error_at(
                SqlflowUnsupportedError, f"a SELECT ordered by event time over a live stream does not take {clause} "
                "yet", statement.position(node) or w.pos, clause=clause,
                hint="order the stream in a SELECT of its own and read it from a later query")
    aliases = {item.alias.lower(): item.this for item in select.expressions if isinstance(item, exp.Alias)}
    ties: list[tuple[bool, bool]] = []
    query = exp.Select(expressions=[exp.Star()])
    for j, key in enumerate(select.args["order"].expressions[1:]):
        ordered_key = key if isinstance(key, exp.Ordered) else exp.Ordered(this=key)
        expr = ordered_key.this
        if isinstance(expr, exp.Column) and not expr.table and expr.name.lower() in aliases:
            expr = aliases[expr.name.lower()]
        desc = bool(ordered_key.args.get("desc"))
        nulls_first = ordered_key.args.get("nulls_first")
        ties.append((desc, (not desc) if nulls_first is None else bool(nulls_first)))
        query.append("expressions", exp.alias_(expr.copy(), tie_column(j)))
    if isinstance(w.model, ast.AscendingPer):  # each row's partition, as the replay reads it
        query.append("expressions", exp.alias_(exp.cast(parse_column(w.model.partition), "string"), PARTITION_COLUMN))
    query.set("from_", exp.From(this=strip_clauses(order.relation)))
    rows = runner.sql(to_spark_sql(with_ctes(query, visible_ctes(order.relation))), order.relation,
                      w.model.partition_pos if isinstance(w.model, ast.AscendingPer) else w.pos, clause="ORDER BY")
    names = rows.columns[:len(rows.columns) - len(ties) - (1 if per else 0)]
    event_name = _name(w.event_time).lower()
    matches = [n for n in names if n.lower() == event_name]
    et_type = rows.schema[matches[0]].dataType if matches else None
    if not isinstance(et_type, (T.TimestampType, T.TimestampNTZType)):
        raise statement.source.error_at(
            SqlflowUnsupportedError, f"the WATERMARK column {w.event_time} must be a TIMESTAMP column of the "
            f"source, not {et_type.simpleString() if et_type else 'missing'}", w.event_time_pos or w.pos,
            clause="WATERMARK")
    for f in rows.schema.fields[:len(names) + len(ties)]:
        if not isinstance(f.dataType, CARRIED):
            raise statement.source.error_at(
                SqlflowUnsupportedError, f"column {f.name} of type {f.dataType.simpleString()} cannot be ordered "
                "on a live stream yet (integers, floating point, strings, booleans, timestamps and dates can)",
                w.pos, clause="WATERMARK", hint=f"CAST {f.name} to a string or a number in a view the query reads")
    spark = runner.spark
    model = w.model
    idle = model.idle_timeout.micros if isinstance(model, ast.AscendingPer) and model.idle_timeout else None
    delay = model.delay.micros if isinstance(model, ast.BoundedDelay) else 0
    stream = ordered_stream(rows, names=list(names), event_time=matches[0], ties=ties, delay=delay,
                            finish_dir=runner.finish_dir or conf.get(spark, conf.STREAMING_FINISH_DIR),
                            metrics_name=_metrics_name(number), per_partition=per, idle=idle)
    label = _label(statement, order)
    stage = OrderStage(number, label, "streaming stateful",
                       "transformWithStateInPandas: each row is buffered in its state until the watermark passes "
                       "it, then released in (event time, tie-breakers) order (Flink's time design draft, "
                       "'Ordering Elements in a Stream')", "ordered")
    stage.replay = (f"stream, watermark {model_text(model)}, computed by the operator over each micro-batch"
                    if per else f"stream, watermark {model_text(model)}")
    if not runner.starts_query and not runner.dry:
        use_state_store(spark, _StoreWhere(statement, label, w.pos))
    view = runner.view(stream.panes, "ordered")
    stage.extra["stream"] = stream
    stage.extra["stream_view"] = view
    # the SELECT reads the released rows: its stars are the source's columns, emit_time comes last
    relation = order.relation
    alias = relation.args.get("alias")
    ident = alias.this if alias is not None and alias.this else (
        relation.this if isinstance(relation, exp.Table) else None)
    table = exp.Table(this=exp.to_identifier(view))
    if ident is not None:
        table.set("alias", exp.TableAlias(this=ident.copy()))
    relation.replace(table)
    items = []
    for item in select.expressions:
        if isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star)):
            items += [exp.column(n, quoted=True) for n in names]
        else:
            items.append(item)
    items.append(exp.column(EMIT_TIME))
    select.set("expressions", items)
    select.set("order", None)
    return stage


def _metrics_name(number: int) -> str:
    from .streaming.metrics import METRICS_NAME

    return METRICS_NAME if number == 1 else f"{METRICS_NAME}_{number}"


@dataclass
class _StoreWhere:
    """Where `session_conf.use_state_store` locates its refusal (it asks a windowed SELECT's
    label, error and WINDOW position)."""

    statement: Any
    name: str
    pos: ast.Position | None

    def label(self) -> str:
        return self.name

    @property
    def windowing(self):
        return self

    def error(self, kind, message: str, clause: str, pos=None, hint=None):
        return self.statement.source.error_at(kind, message, pos or self.pos, clause="WATERMARK", hint=hint)


def _name(column: str) -> str:
    col = parse_column(column)
    return col.name if isinstance(col, exp.Column) else column


def _rewrite(order: ordering.EventTimeOrder, emit: exp.Expr) -> None:
    """The SELECT with `emit_time`, without its late rows, ordered by emit time first."""
    select = order.select
    select.append("expressions", exp.alias_(exp.func("timestamp_micros", emit.copy()), EMIT_TIME))
    kept = exp.Not(this=exp.Is(this=emit.copy(), expression=exp.null()))
    where = select.args.get("where")
    select.set("where", exp.Where(this=exp.and_(where.this, kept) if where is not None else kept))
    keys = select.args["order"].expressions
    select.args["order"].set("expressions", [exp.Ordered(this=exp.column(EMIT_TIME)), *keys])
    order.relation.meta.pop(WATERMARK_KEY, None)


# ------------------------------------------------------------------ windows over ASCENDING PER replays


class BehindStage(OrderStage):
    """The rows of an ASCENDING PER replay that a windowed SELECT never sees: those behind their
    partition, dropped as they arrive (counted and listed as a stage of their own)."""

    def metrics(self) -> dict:
        from ..columns import METRIC_NAMES

        counts: dict[str, int] = dict.fromkeys(METRIC_NAMES, 0)
        counts["dropped_behind_partition"] = sum(int(r["n"]) for r in self.counting()) if self.counting else 0
        return counts


def _relation_is_stream(runner: "Runner", node: exp.Expr, w: ast.SourceWatermark) -> bool:
    query = exp.Select(expressions=[exp.Star()])
    query.set("from_", exp.From(this=strip_clauses(node)))
    df = runner.sql(to_spark_sql(with_ctes(query, visible_ctes(node))), node, w.pos, clause="WATERMARK")
    return bool(df.isStreaming)


def partition_filters(runner: "Runner") -> list[Stage]:
    """Each replayed ASCENDING PER source read by a windowed SELECT becomes a subquery without its
    rows behind their partition (the WATERMARK clause moves onto it), so the engine sees only the
    rows the watermark's declaration allows; the dropped rows make a stage of their own (numbered
    by the caller)."""
    from pyspark.sql import functions as F

    if runner.spark is None or runner.dry:
        return []
    statement = runner.statement
    ordered = {id(o.relation) for o in ordering.event_time_orders(statement)}
    windowed = {id(source.node) for select, _ in statement.windowed_selects() for source in feeding_sources(select)}
    stages: list[Stage] = []
    for node, w in statement.source_watermarks():
        if not isinstance(w.model, ast.AscendingPer) or id(node) in ordered:
            continue
        if w.arrival is None:  # bounded data needs no watermark; a windowed SELECT's stream computes its own
            if id(node) not in windowed and _relation_is_stream(runner, node, w):
                refuse_on_stream(statement, w, "WATERMARK ... ASCENDING PER without WINDOW or ORDER BY",
                                 hint="window the stream (GROUP BY ... WINDOW ...) or order it by event time "
                                      f"(ORDER BY {w.event_time}): both run on a live stream; or replay the "
                                      "recorded stream (FROM t WATERMARK <column> ... ARRIVAL <arrival column>)")
            continue
        source = Source(node, w, True)
        _, latest = ascending_replay(runner.spark, _Locator(statement, w.pos), source,
                                     lambda q, n, pos: runner.sql(q, n, pos or w.pos, clause="WATERMARK"))
        name = _register(runner, "behind", _behind_function(latest), "boolean")
        call = _call(name, Source(node, w, False))
        alias = node.args.get("alias")
        ident = alias.this if alias is not None and alias.this else (
            node.this if isinstance(node, exp.Table) else exp.to_identifier("__sqlflow_source"))
        inner = strip_clauses(node)
        inner.set("alias", None)
        kept = exp.Select(expressions=[exp.Star()]).from_(inner).where(exp.Not(this=exp.func("coalesce", call, exp.false())))
        sub = exp.Subquery(this=kept, alias=exp.TableAlias(this=ident.copy()))
        node.replace(sub)
        sub.meta[WATERMARK_KEY] = w
        # the dropped rows, over the source as written
        rows = runner.sql(to_spark_sql(with_ctes(
            exp.Select(expressions=[exp.Star(), exp.alias_(call.copy(), "__sqlflow_behind")]).from_(inner.copy()),
            visible_ctes(sub))), sub, w.pos, clause="WATERMARK")
        flag = rows.columns[-1]
        behind = rows.where(F.col(flag))
        label = f"the rows behind their partition of {ident.name} (WATERMARK at line {w.pos.line}, column {w.pos.column})" \
            if w.pos else f"the rows behind their partition of {ident.name}"
        stage = BehindStage(0, label, "engine", "dropped before any window: older than their partition's latest "
                            "event time", "dropped")
        stage.replay = f"replay of ARRIVAL {w.arrival}, watermark {model_text(w.model)}"
        user = [F.col(f"`{c}`") for c in rows.columns[:-1]]
        stage.dropped_rows = lambda behind=behind, user=user, w=w: behind.select(
            *user, F.col(f"`{_name(w.event_time)}`").cast("timestamp").alias(DROPPED_EVENT_TIME),
            F.col(f"`{_name(w.arrival)}`").cast("timestamp").alias(DROPPED_ARRIVAL_TIME),
            F.lit(BEHIND_PARTITION).alias(DROPPED_REASON))
        stage.counting = lambda behind=behind: [{"reason": BEHIND_PARTITION, "n": behind.count()}]
        stages.append(stage)
    return stages
