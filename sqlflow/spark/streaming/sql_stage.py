"""The streaming branch of `sqlflow.sql`: a windowed SELECT whose input is a stream.

The bounded path (`sqlflow.spark.execute.Runner.stage`) hands the SELECT over when Spark says its
input relation is streaming; it becomes a pane stream (`build.build_stream`) registered as a
view, and the SELECT a SELECT over it, as the bounded engine path does with its panes.
"""
from __future__ import annotations

from pyspark.sql import SparkSession
from sqlglot import exp
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ... import ast
from ...columns import DROPPED_SOURCE, EMIT_TIME, EVENT_TIME, GAP, KIND, PARTITION, REPORT_COLUMNS, SOURCE, agg_column, when_column
from ...engine import EnginePlan, custom_windows_of
from ...errors import SqlflowSemanticError, SqlflowUnsupportedError
from ...frontend.validate import validate
from .. import collation, conf, handover, trigger_checks
from ...plan.output import panes_select
from ...plan.pipelines import STAGE_KEY, StageLink, one_pane_per_window
from ...plan.relations import replace_select, to_spark_sql
from ..execute import user_columns
from ..report import Stage
from ..select_types import check_input_types, names_and_types, naming_query
from .build import build_stream
from .chained_stage import chained_panes
from .chaining import carry_reports, find_chain, read_later, refuse_unchainable, refuse_watermarked_input
from .metrics import METRICS_NAME
from .schema import pane_schema
from .session_conf import check_python_workers, use_state_store
from .several import several_sources, tagged_input


def streaming_stage(runner, number: int, ws, rel, raw, *, finish_dir: str | None = None) -> Stage:
    """Build the pane stream of one windowed SELECT over a stream and replace the SELECT by a
    SELECT over it. Returns the report's Stage, whose `extra["stream"]` is the PaneStream (for
    `start` and `finish`). `finish_dir` (default: conf `spark.sqlflow.streaming.finishDir`) is
    where `PaneStream.finish` writes its marker."""
    chain, obstacle = find_chain(ws)
    if chain is not None:  # a stage over an earlier stage's panes: runs after it, on its reports
        refuse_unchainable(ws, chain)
        carry_reports(rel.query, chain)
        raw = runner.sql(rel.sql(), ws.select, ws.position)
    else:
        refuse_watermarked_input(ws, rel.sql(), raw, runner.stream_stages, obstacle)
    validate(runner.statement, streaming=True)
    if ws.replay:
        src = ws.arrival_source.watermark
        raise ws.error(SqlflowSemanticError, f"ARRIVAL {src.arrival} replays recorded data; on a stream a row "
                       "arrives with its micro-batch", "WATERMARK", hint="drop ARRIVAL, or read the data as a batch")
    clock = ws.domain is not ast.TimeDomain.EVENT_TIME  # docs/semantics.md, 10: the batch's time
    delays = [] if clock else [s.watermark.model for s in ws.sources]
    # ASCENDING PER (of the one source, or of one of several): the watermark computed per partition
    # over the batches, by the ordering operator (partitioned.py) or the owned executor's driver
    per = next((d for d in delays if isinstance(d, ast.AscendingPer)), None) if chain is None else None
    if per is not None and len(delays) == 1:
        rel, raw = _with_partition(runner, ws, rel, per)
    if chain is None and not clock and (
            not delays or not all(isinstance(d, (ast.BoundedDelay, ast.AscendingPer)) for d in delays)):
        raise ws.error(SqlflowUnsupportedError, f"{ws.label()} reads a stream: it needs a source with "
                       "WATERMARK <column> DELAY OF <interval> (each of its sources, when several)", "WATERMARK")
    spark = runner.spark
    shift = conf.get(spark, conf.STREAMING_TIME_SHIFT)
    time_shift = _interval_micros(spark, shift) if shift else 0
    several = None
    if len(delays) > 1:  # each source its own watermark, the window's the minimum (docs/semantics.md, 9)
        several = several_sources(runner, ws, time_shift=time_shift)
        rel = several.relation
        raw = tagged_input(runner, ws, rel)
    check_input_types(ws, rel, raw.schema)
    collation.refuse(ws, rel, raw.schema, stream=True)
    collation.engine_calls(ws, rel, raw.schema, stream=True)
    named = runner.sql(to_spark_sql(naming_query(ws)), ws.select, ws.position)
    names, agg_types = names_and_types(ws, named.schema)

    schema = {f.name: f.dataType for f in raw.schema.fields}
    columns = [F.col(k) for k in rel.keys] + [F.col(a) for a in rel.args]
    columns.append(F.unix_micros(F.col(EVENT_TIME).cast("timestamp")).alias(EVENT_TIME))
    if rel.gap:
        columns.append(F.unix_micros(F.timestamp_micros(F.lit(0)) + F.col(GAP)).alias(GAP))
    columns += [F.col(when_column(i)) for i in range(rel.n_when)]
    if several is not None:
        columns.append(F.col(SOURCE))
    if per is not None:
        columns.append(F.col(PARTITION))  # with several sources, "" on a DELAY OF source's rows
    if chain is not None:
        columns += [F.col(KIND), *[F.col(c) for c in REPORT_COLUMNS]]
    engine_input = raw.select(*columns)
    if per is not None:
        _refuse_uncarried(ws, per, engine_input.schema)
    # the engine's exact sums, finished by Spark's type rules (overflow: handover.py)
    outputs = handover.plan_outputs(ws, rel, schema, agg_types, ansi_mode=handover.ansi(runner.spark),
                                    name=agg_column, rewrite=False)
    aggregates = tuple(outputs.aggregates)
    plan = EnginePlan(ws.windowing, aggregates, keys=tuple(rel.keys), custom_windows=custom_windows_of(ws.window))
    fields = [T.StructField(k, schema[k], True) for k in rel.keys]
    fields += [T.StructField(agg_column(j), t, True) for j, t in enumerate(agg_types)]
    output_schema = T.StructType(fields + pane_schema(T.StructType([]), EnginePlan(ws.windowing, (), ())).fields)

    operator = conf.get(spark, conf.STREAMING_OPERATOR, "auto").lower()
    if operator not in conf.STREAMING_OPERATORS:
        raise SqlflowUnsupportedError(f"{conf.STREAMING_OPERATOR} must be auto, native or stateful, got {operator!r}",
                                      clause="STREAM")
    buckets = conf.get(spark, conf.STREAMING_BUCKETS)
    report = read_later(runner.statement, ws.select)
    if operator == "native":
        _native_refused(ws, several=len(delays) if several is not None else 0, chained=chain is not None,
                        report=report, per=per)
    if chain is not None:
        stream = chained_panes(spark, engine_input, plan, upstream=chain.stage.extra["stream"],
                               schema=output_schema, metrics_name=_metrics_name(number),
                               buckets=int(buckets) if buckets else None, engine_types=dict(outputs.types),
                               decode=outputs.decode_by_column(), report=report)
    else:
        stream = _build(runner, number, engine_input, plan, clock, delays, output_schema, operator, buckets,
                        several, finish_dir, time_shift, outputs, report, per)
    if stream.operator == "stateful" and not runner.dry:
        if not runner.starts_query:  # `start` sets the state store for the query it starts
            use_state_store(spark, ws)
        check_python_workers(spark, ws)
    if stream.keeping_dropped is not None and not runner.dry:
        stream.keeping_dropped = _checked_twin(stream.keeping_dropped, spark, ws)
    counted = (f"{stream.buckets} hash bucket{'' if stream.buckets == 1 else 's'} of keys "
               f"({conf.operator_buckets(spark, keyed=bool(plan.keys))[1]})")
    if chain is not None:
        why = (f"transformWithStateInPandas (timeMode None) over {counted}, after "
               f"{chain.link.label}'s operator in the same query")
    else:
        why = ("Spark's native streaming window aggregation (equivalent for this query)" if stream.operator == "native"
               else f"transformWithStateInPandas over {counted}")
        if stream.operator == "stateful" and not conf.flag(spark, conf.STREAMING_COMBINE, True) and several is None:
            why += f" ({conf.STREAMING_COMBINE} false: its rows as they arrive, no pass before it)"
    stage = Stage(number, ws.label(), f"streaming {stream.operator}", why, ws.windowing.mode.value,
                  output_time=ws.windowing.output_time.value)
    stage.notes += trigger_checks.finish_notes(ws, bounded=False)
    if chain is not None:
        stage.replay = (f"stream, the panes of {chain.link.label} as it emits them (each in the micro-batch that "
                        "emits it, with its output_time as event time); watermark: that stage's output watermark "
                        "(the minimum of its input watermark and the output times its pending retractions hold), "
                        f"reported by each of its {chain.stage.extra['stream'].buckets} buckets at every call")
    elif per is not None:
        from ..event_order import model_text

        rule = (model_text(per) if several is None else f"the minimum of {len(delays)} sources' (UNION ALL): "
                + ", ".join(f"{model_text(d)} on {s.watermark.event_time} of {n}"
                            for d, s, n in zip(delays, ws.sources, several.names)))
        stage.replay = (f"stream, watermark {rule}, computed over the micro-batches (each batch an "
                        "instant): by the ordering operator ahead of the window's, or by the owned-sink executor's "
                        "driver")
    else:
        stage.replay = _stream_text(ws, clock, delays, several)
    stage.extra["stream"] = stream
    # the dropped rows' keys named as in the query (`start(..., dropped_path=...)`), as sqlflow.dropped names them
    stage.extra["dropped_names"] = {c: n for c, n in user_columns(ws, rel, taken=(EMIT_TIME, DROPPED_SOURCE))
                                    if c in rel.keys and c != n}
    stage.extra["select"] = ws  # what each output column is (sinks that key rows: sinks/postgres.py)
    stage.extra["executor"] = _executor_text(stream)
    if stream.chain is not None:
        stage.extra["chain_view"] = runner.view(stream.chain, "chain")
    view = runner.view(stream.panes, "stream")
    stage.extra["stream_view"] = view
    runner.stream_stages[view] = ws
    new = panes_select(ws, view, names)
    # what an aggregation downstream may do with these panes (pipelines.rewrite_consumer)
    new.meta[STAGE_KEY] = StageLink(ws.windowing.mode, None, False, ws.label(), stream=True,
                                    one_pane=one_pane_per_window(ws.windowing), stage=stage)
    runner.tree = replace_select(runner.tree, ws.select, new)
    return stage


def _checked_twin(build, spark, ws):
    """`PaneStream.keeping_dropped` of a stage: its twin runs on the stateful operator, whose
    Python workers are checked as the stage's own would be (`check_python_workers`)."""
    def twin():
        stream = build()
        check_python_workers(spark, ws)
        return stream

    return twin


def _native_refused(ws, *, several: int, chained: bool, report: bool, per=None) -> None:
    """The located refusal of `spark.sqlflow.streaming.operator = native` where Spark's window
    aggregation cannot run the stage (nothing when it can)."""
    if per is not None:
        why, clause, pos = ("Spark's window aggregation keeps one global watermark, which cannot be "
                            "ASCENDING PER partition", "WATERMARK", per.pos)
    elif several:
        why, clause, pos = (f"Spark's window aggregation keeps one watermark, and {several} watermarked streams "
                            "feed this window", "WATERMARK", ws.sources[1].watermark.pos)
    elif chained:
        why, clause, pos = (f"{ws.label()} reads the panes of an earlier windowed stage: it runs on that stage's "
                            "reports", "WINDOW", ws.windowing.pos)
    elif report:
        why, clause, pos = (f"a later windowed SELECT reads the panes of {ws.label()}, under the output watermark "
                            "that only the stateful operator reports", "WINDOW", ws.windowing.pos)
    else:
        return
    raise ws.error(SqlflowUnsupportedError, f"{conf.STREAMING_OPERATOR} is native, but {why}", clause, pos=pos,
                   hint=f"SET {conf.STREAMING_OPERATOR} = auto")


def _executor_text(stream) -> str:
    """What runs this stream when sqlflow writes its sink (`sink.choose_executor`), for explain()."""
    recipe = stream.owned
    why_not = "a chained stage" if recipe is None else recipe.why_not
    head = "when sqlflow writes the sink (start, INSERT INTO): the operator above by default"
    if why_not is None:
        return (head + f"; with {conf.STREAMING_EXECUTOR} = owned or auto, the owned-sink executor (foreachBatch, "
                f"versioned state; a micro-batch of at most {conf.driver_step_rows(stream.panes.sparkSession)} rows "
                f"({conf.STREAMING_DRIVER_ROWS}) stepped in the driver, a larger one by Spark's partial aggregation "
                "where exact and one Arrow call per bucket)")
    return head + f"; the owned-sink executor cannot run it: {why_not}"


def _metrics_name(number: int) -> str:
    return METRICS_NAME if number == 1 else f"{METRICS_NAME}_{number}"


def _with_partition(runner, ws, rel, per: ast.AscendingPer):
    """The input relation with each row's partition (as a string; NULL values one partition of
    their own), and its rows."""
    from .several import partition_of

    column = partition_of(per)
    rel.query.set("expressions", [*rel.query.expressions, exp.alias_(column, PARTITION)])
    raw = runner.sql(rel.sql(), ws.select, per.partition_pos or per.pos, clause="WATERMARK")
    return rel, raw


def _refuse_uncarried(ws, per: ast.AscendingPer, schema: T.StructType) -> None:
    """ASCENDING PER: the rows pass through the ordering operator, which carries the types
    `ordered.CARRIED` (a located error names another)."""
    from .ordered import CARRIED

    for f in schema.fields:
        if not isinstance(f.dataType, CARRIED):
            raise ws.error(SqlflowUnsupportedError, f"an input column of type {f.dataType.simpleString()} cannot be "
                           "windowed under WATERMARK ... ASCENDING PER on a live stream yet (integers, floating point, "
                           "strings, booleans, timestamps and dates can)", "WATERMARK", pos=per.pos,
                           hint="CAST it to one of those in a view the query reads")


def _build(runner, number, engine_input, plan, clock, delays, output_schema, operator, buckets, several,
           finish_dir, time_shift, outputs, report, per=None):
    """The pane stream of a stage over a watermarked stream (`build_stream`)."""
    spark = runner.spark
    partition = None
    delayed = several if per is None else None  # several DELAY OF sources: Spark's watermarks and the operator's
    if per is not None:
        from .per_partition import PartitionRule

        partition = PartitionRule(per.idle_timeout.micros if per.idle_timeout is not None else None,
                                  sources=several.rules if several is not None else (),
                                  names=several.names if several is not None else (), time_shift=time_shift)
    return build_stream(
        engine_input, plan, delay=0 if clock or per is not None else delays[0].delay.micros,
        output_schema=output_schema,
        native=False if several is not None or per is not None
        else {"auto": None, "native": True, "stateful": False}[operator],
        buckets=int(buckets) if buckets else None,
        finish_dir=finish_dir or conf.get(spark, conf.STREAMING_FINISH_DIR),
        time_shift=time_shift, sources=delayed.names if delayed else (),
        source_delays=delayed.delays if delayed else (),
        engine_types=dict(outputs.types), decode=outputs.decode_by_column(),
        metrics_name=_metrics_name(number), report=report, partition=partition)


def _stream_text(ws, clock: bool, delays, several) -> str:
    """Where a stage over a watermarked stream gets its time, for explain()."""
    text = (f"stream, on {ws.domain.value}: each row's time is its micro-batch's, and so is the watermark "
            "(a window fires at the first micro-batch at or after its end)" if clock
            else f"stream, watermark DELAY OF {delays[0].delay}" if several is None
            else f"stream, watermark the minimum of {len(delays)} sources' (UNION ALL): " + ", ".join(
                f"DELAY OF {d.delay} on {s.watermark.event_time} of {n}"
                for d, s, n in zip(delays, ws.sources, several.names)))
    if clock and ws.sources:
        text += "; the source's WATERMARK clause (on " + ", ".join(
            s.watermark.event_time for s in ws.sources) + ") is not used"
    return text


def _interval_micros(spark: SparkSession, text: str) -> int:
    """A Spark interval literal's length in microseconds (Spark parses it: every form it knows)."""
    row = spark.sql(f"SELECT unix_micros(timestamp_micros(0) + INTERVAL {text}) AS us").collect()[0]
    return int(row["us"])
