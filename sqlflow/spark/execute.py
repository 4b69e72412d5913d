"""Running one sqlflow statement on Spark's bounded path.

The planner's passes (`sqlflow.plan.passes`) rewrite the statement; this module is their Spark
side, `Runner.plan_stage`. Each windowed SELECT, innermost first (the order their clauses are
written), is taken apart (`plan.windowed_select`), its input relation (`plan.inputs`) analysed by
Spark (`select_types`), and its path chosen (`plan.path_choice`):

- native: the SELECT is rewritten in place into plain Spark SQL (`plan.native_rewrite`);
- engine: its panes are computed by the engine over hash buckets (`engine_path`), registered as a
  temporary view, and the SELECT is replaced by a SELECT over that view (`plan.output`).

Aggregations downstream of an engine stage are adjusted to its accumulation mode (`plan.pipelines`).
What is left is plain Spark SQL, which `spark.sql` runs; the temporary views are dropped once
Spark has analysed it (the DataFrame holds their plans).
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from sqlglot import exp

from .. import ast
from ..columns import (BAD_GAP, DROPPED_ARRIVAL_TIME, DROPPED_EVENT_TIME, DROPPED_REASON, DROPPED_SOURCE,
                       EVENT_TIME, GAP, SOURCE,
                       NULL_EVENT_TIME, WINDOW_END, WINDOW_START, view_name)
from ..engine import collapsible
from ..errors import SqlflowError
from ..frontend.grouping import PANE_COLUMNS, ungrouped_item
from ..frontend.statement import Statement
from ..plan import passes
from ..plan.inputs import InputRelation, tagged_relation
from ..plan.native_rewrite import rewrite_native
from ..plan.output import panes_select
from ..plan.path_choice import Choice, choose, engine_mode
from ..plan.pipelines import STAGE_KEY, StageLink, StageTime, one_pane_per_window
from ..plan.relations import probe_select, replace_select, strip_clauses, to_spark_sql, visible_ctes, with_ctes
from ..plan.windowed_select import WindowedSelect, select_position
from . import collation, conf, engine_path, event_order, timeline, trigger_checks
from .analysis import spark_sql
from .engine_path import EngineRun, run_engine
from .lifetimes import is_connect
from .report import Report, Stage
from .select_types import (check_input_types, is_ntz, names_and_types, mentions_panes, naming_query,
                           pane_expression_names)


@dataclass
class Prepared:
    """A statement turned into plain Spark SQL, ready for spark.sql."""

    sql: str
    args: dict | None
    report: Report
    views: list[str] = field(default_factory=list)
    keep_views: bool = False


class Runner:
    """Turns one parsed statement into plain Spark SQL plus the DataFrames it reads.

    `spark` None plans without Spark (no types, no data: for explain without a session);
    `dry` plans without running Spark jobs (no replay timeline: for explain); `finish_dir`: where
    the pane streams of windowed SELECTs over a stream write their end-of-input marker;
    `starts_query`: the caller starts the stream itself, with `streaming.start`.
    """

    def __init__(self, spark, statement: Statement, args: dict | None, *, path: str | None = None,
                 dry: bool = False, finish_dir: str | None = None, starts_query: bool = False):
        self.spark = spark
        self.statement = statement
        #: the pane-stream views of this statement's windowed SELECTs over streams, and each SELECT
        self.stream_stages: dict[str, object] = {}
        self.args = args
        self.path = None if path in (None, "auto") else path
        self.dry = dry
        self.finish_dir = finish_dir
        self.starts_query = starts_query or dry  # sets what a stream needs per query (streaming.session_conf)
        if statement.tree is None:
            raise ValueError("a plain statement has no windowed SELECT to run")
        self.tree: exp.Expr = statement.tree
        self.original = statement.tree.copy()
        self.views: list[str] = []
        # native stages whose panes query is not analysed yet: (stage, its SQL, the SELECT)
        self.unanalysed: list[tuple[Stage, str, WindowedSelect]] = []
        self.run_id = uuid.uuid4().hex[:8]

    # ------------------------------------------------------------------ helpers

    def sql(self, query: str, node: exp.Expr | None, fallback: ast.Position | None, clause: str = "SELECT",
            clauses=()):
        return spark_sql(self.spark, query, self.args, statement=self.statement, original=node,
                         fallback=fallback, clause=clause, clauses=clauses)

    def view(self, df, kind: str) -> str:
        name = view_name(kind, self.run_id, len(self.views))
        df.createOrReplaceTempView(name)
        self.views.append(name)
        return name

    def drop_views(self) -> None:
        if self.spark is None:
            return
        for name in self.views:
            try:
                self.spark.catalog.dropTempView(name)
            except Exception:  # noqa: BLE001  (already gone)
                pass
        self.views = []

    def avg_type(self, select: exp.Select, call: exp.Expr):
        """The Spark type of an AVG call in `select` (for pipelines), or None without Spark."""
        if self.spark is None:
            return None
        query = probe_select(select, [call.copy()])
        df = self.sql(to_spark_sql(query), select, select_position(self.statement, select))
        return exp.DataType.build(df.schema.fields[0].dataType.simpleString(), dialect="spark")

    def check_grouping(self, select: exp.Select, windowing: ast.Windowing) -> None:
        """Every item grouped or aggregated (`frontend.grouping`); but first, Spark resolves the
        GROUP BY keys and the offending column, so that a misspelt name gets Spark's message and
        suggestion (UNRESOLVED_COLUMN), not "neither in GROUP BY"."""
        problem = ungrouped_item(self.statement, select, windowing)
        if problem is None:
            return
        node, error = problem
        if self.spark is not None and isinstance(node, exp.Column) and node.name.lower() not in PANE_COLUMNS:
            group = select.args.get("group")
            aliases = {item.alias.lower(): item.this for item in select.expressions if isinstance(item, exp.Alias)}
            keys = []
            for key in group.expressions if group is not None else []:
                if isinstance(key, exp.Literal) and not key.is_string:
                    continue  # GROUP BY 1
                if isinstance(key, exp.Column) and not key.table and key.name.lower() in aliases:
                    key = aliases[key.name.lower()]  # GROUP BY an item's alias
                keys.append(key.copy())
            probe = probe_select(select, keys + [node.copy()])
            self.sql(to_spark_sql(probe), select, select_position(self.statement, select))
        raise error

    # ------------------------------------------------------------------ the statement

    def prepare(self) -> Prepared:
        """Run the planner's passes (`sqlflow.plan.passes.PASSES`) over the statement, each stage
        planned by `plan_stage`, after freezing the views it reads (`resolve_views`)."""
        context = passes.Rewrite(self.statement, self.plan_stage, avg_type=self.avg_type)
        try:
            self.resolve_views()
            behind = event_order.partition_filters(self)  # ASCENDING PER: rows behind their partition
            self.tree = passes.rewrite(self.tree, context, (passes.plan_stages,))
            context.stages += event_order.order_stages(self, len(context.stages) + 1)  # ORDER BY event time
            for stage in behind:
                stage.number = len(context.stages) + 1
                context.stages.append(stage)
            self.tree = passes.rewrite(self.tree, context, (passes.rewrite_consumers, passes.drop_watermark_clauses))
            final = to_spark_sql(self.tree)
            self.analyse_panes(final)
        except BaseException:
            self.drop_views()
            raise
        keep = not isinstance(self.tree, exp.Query)
        return Prepared(final, self.args, Report(context.stages), list(self.views), keep)

    def plan_stage(self, statement: Statement, number: int, select: exp.Select, windowing: ast.Windowing,
                   tree: exp.Expr) -> tuple[Stage, exp.Expr]:
        """The planner's `StagePlanner` on Spark: `stage` rewrites or replaces the SELECT in
        `self.tree` (the streaming path replaces it there too)."""
        self.tree = tree
        stage = self.stage(number, select, windowing)
        return stage, self.tree

    def resolve_views(self) -> None:
        """Resolve each temp view the query reads once, now, and have every Spark job of this call
        read that version (the replay's timeline, the engine's buckets, the counters, the final
        query): each query sqlflow hands Spark would otherwise resolve the view again, and a view
        replaced meanwhile (another thread, another notebook cell) would give a result matching
        neither version. Each view's analysed plan becomes a view of this run's own, which the
        query's relations are pointed at (aliased by their old names). Not for a statement that
        defines something (CREATE VIEW ...: it reads its inputs when it is read), nor for
        streams (Spark resolves a streaming query once, when it starts)."""
        if self.spark is None or self.dry or not isinstance(self.tree, exp.Query):
            return
        from pyspark.errors import AnalysisException

        from ..plan.relations import named_relations, rename_relation

        for nodes in named_relations(self.tree).values():
            quoted = "`" + nodes[0].name.replace("`", "``") + "`"
            try:
                if not self.spark.catalog.getTable(quoted).isTemporary:
                    continue  # a catalog table: no plan to keep (its files are listed by each job)
                df = self.spark.table(quoted)
                if df.isStreaming:
                    continue
            except AnalysisException:  # no such view: Spark's own error, located, comes later
                continue
            frozen = self.view(df, "input")
            for node in nodes:
                rename_relation(node, frozen)

    def analyse_panes(self, final: str) -> None:
        """Analyse the panes query of each native stage, unless it is the statement itself (a lone
        windowed SELECT without HAVING, ORDER BY, ...): then the result is the panes
        (`Stage.panes_are_result`, `sql` sets them), and Spark analyses that query once, not twice."""
        for stage, text, ws in self.unanalysed:
            if text == final and not self.dry:
                stage.panes_are_result = True
            elif self.spark is not None:
                stage.panes = self.sql(text, ws.select, ws.position)
        self.unanalysed = []

    def stage(self, number: int, select: exp.Select, windowing: ast.Windowing) -> Stage:
        self.check_grouping(select, windowing)
        # choice None: no path possible yet; raised again below, after Spark's analysis (its errors first)
        ws, rel, choice = passes.describe_stage(self.statement, select, windowing, self.path)
        raw = names = agg_types = None
        if self.spark is not None:
            raw = None
            if len(ws.arrival_sources) > 1:  # each row names its source: late rows per source
                tagged = _tagged(ws)
                try:
                    raw = self.sql(tagged.sql(), select, ws.position, clauses=_clause_columns(ws))
                    rel = tagged
                except SqlflowError:  # a SELECT list between the UNION ALL and the window drops it
                    raw = None
            if raw is None:
                raw = self.sql(rel.sql(), select, ws.position, clauses=_clause_columns(ws))
            if raw.isStreaming:  # the streaming path (sqlflow/spark/streaming/, docs/streaming.md)
                from .streaming.sql_stage import streaming_stage
                return streaming_stage(self, number, ws, rel, raw, finish_dir=self.finish_dir)
            if ws.event_time_clause == "STREAM":
                raise _no_clock(ws)
            keys_blocked = check_input_types(ws, rel, raw.schema)
            collation.refuse(ws, rel, raw.schema, stream=False)
            collation.engine_calls(ws, rel, raw.schema, stream=False)
            native_blocked = collation.native_blocked(ws, rel, raw.schema)
            if native_blocked is not None:
                choice = None  # the engine takes it: its names and types are needed
            # a native rewrite without pane columns among the items needs no naming query: Spark
            # analyses the user's SELECT once, in the rewrite (`mentions_panes`)
            if choice is None or choice.path != "native" or mentions_panes(ws):
                named = self.sql(to_spark_sql(naming_query(ws)), select, ws.position)
                names, agg_types = names_and_types(ws, named.schema)
            if choice is None or choice.path == "engine":  # the types may rule the engine out
                choice = choose(ws, self.path, engine_blocked=keys_blocked, native_blocked=native_blocked)
        if choice is None:
            choice = choose(ws, self.path)
        stage = Stage(number, ws.label(), choice.path, choice.why, ws.windowing.mode.value,
                      output_time=ws.windowing.output_time.value)
        stage.notes += trigger_checks.finish_notes(ws, bounded=not ws.replay)
        stage.extra["select"] = ws  # what each output column is (sinks that key rows: sinks/postgres.py)
        if SOURCE in rel.args:
            from .streaming.several import source_name

            stage.extra["sources"] = [source_name(s, i) for i, s in enumerate(ws.arrival_sources)]
        if ws.upstream is not None:
            stage.replay = (f"the panes of {ws.upstream.link.label} as it emits them: each row arrives at its "
                            "emit_time with its output_time as event time; watermark: that stage's output "
                            "watermark (the minimum of its input watermark and the output times of the panes "
                            "it holds)")
        elif ws.replay:
            srcs = [s.watermark for s in ws.arrival_sources]
            model = _model(srcs[0].model) if len(srcs) == 1 else (
                f"the minimum of {len(srcs)} sources' (UNION ALL): "
                + ", ".join(f"{_model(w.model)} on {w.event_time}" for w in srcs))
            stage.replay = f"replay of ARRIVAL {srcs[0].arrival}, watermark {model}"
            if ws.domain is not ast.TimeDomain.EVENT_TIME:
                stage.replay = f"replay of ARRIVAL {srcs[0].arrival}, {timeline.domain_text(ws)}"
        elif raw is not None:  # bounded (a stream returned above)
            stage.notes += trigger_checks.bounded_notes(ws, trigger_checks.row_count_estimate(raw))
        if choice.path == "native":
            self.native(ws, rel, raw, names, stage)
        else:
            self.engine(ws, rel, raw, names, agg_types, choice, stage)
        return stage

    # ------------------------------------------------------------------ the two paths

    def native(self, ws: WindowedSelect, rel: InputRelation, raw, names, stage: Stage) -> None:
        from pyspark.sql import functions as F

        pane_names = pane_expression_names(ws, names) if names else None
        nonempty = rewrite_native(ws, names=pane_names, ntz=is_ntz(raw.schema) if raw is not None else False)
        if self.spark is None:
            return
        # the panes themselves, before HAVING, QUALIFY, ORDER BY and LIMIT (as the engine counts them)
        standalone = strip_clauses(ws.select)
        for arg in ("qualify", "order", "limit", "offset", "distinct"):
            standalone.set(arg, None)
        standalone.set("having", exp.Having(this=nonempty) if nonempty is not None else None)
        self.unanalysed.append((stage, to_spark_sql(with_ctes(standalone, visible_ctes(ws.select))), ws))  # analysed by `analyse_panes`
        stage.input_rows = raw
        stage.null_event_time = F.col(EVENT_TIME).isNull()
        bad_gap = None
        if rel.gap:
            micros = F.unix_micros(F.timestamp_micros(F.lit(0)) + F.col(GAP))
            bad_gap = F.col(EVENT_TIME).isNotNull() & (micros.isNull() | (micros <= 0))
        stage.bad_gap = bad_gap
        renamed = user_columns(ws, rel)

        def dropped():  # built when asked for: a dozen Spark calls that most queries never need
            base = [F.col(c).alias(n) for c, n in renamed]
            null_time = F.lit(None).cast("timestamp")

            def rows(condition, reason):
                return raw.where(condition).select(
                    *base, F.col(EVENT_TIME).cast("timestamp").alias(DROPPED_EVENT_TIME),
                    null_time.alias(DROPPED_ARRIVAL_TIME), F.lit(reason).alias(DROPPED_REASON),
                    null_time.alias(WINDOW_START), null_time.alias(WINDOW_END))

            out = rows(stage.null_event_time, NULL_EVENT_TIME)
            if bad_gap is not None:
                out = out.unionByName(rows(bad_gap, BAD_GAP))
            return out

        stage.dropped_rows = dropped

    def engine(self, ws: WindowedSelect, rel: InputRelation, raw, names, agg_types, choice: Choice,
               stage: Stage) -> None:
        if defines_view(self.tree):
            raise _view_of_engine(ws, choice)
        stage.engine_mode = choice.engine_mode or engine_mode(ws)
        if self.spark is None:  # explain() without a session: the shape of the rewrite only
            stage.buckets = "2 x spark.sql.shuffle.partitions (decided at run time)"
            names = [_guessed_name(item) for item in ws.select.expressions]
            name = view_name("panes", self.run_id, len(self.views))
            new = panes_select(ws, name, names)
            self.views.append(name)
            self._link(ws, new, panes_select(ws, view_name("final", self.run_id, len(self.views)), names), None)
            return
        replay = None
        if ws.replay:
            if self.dry:
                stage.replay = (stage.replay or "") + " (the timeline is computed when the query runs)"
            elif ws.upstream is not None:
                if ws.upstream.link.time is not None and ws.upstream.link.time.materialised():
                    # the stage's panes are now its kept output: read them again, over it
                    raw = self.sql(rel.sql(), ws.select, ws.position, clauses=_clause_columns(ws))
                replay = self.upstream_replay(ws, stage)
            else:
                src = ws.replayed.watermark
                where = src.model.pos or src.pos
                replay = timeline.replay(self.spark, ws, self.args,
                                         lambda q, node: self.sql(q, node, where, clause="WATERMARK"))
                stage.replay = (stage.replay or "") + f": {replay.rows} rows, {len(replay.timeline.times)} watermark steps"
                stage.notes += trigger_checks.replay_notes(ws, raw, replay.rows)
        blocks = engine_path.spread_over(ws, rel)
        n, why = conf.buckets(self.spark, raw, keyed=bool(rel.keys) or blocks is not None)
        if blocks is not None:
            why += "; no GROUP BY keys: the rows spread by window (each window's rows in one bucket)"
        stage.buckets = why
        run = run_engine(ws, rel, raw, agg_types, buckets=n,
                         timeline=replay.timeline if replay else None, p_end=replay.p_end if replay else None)
        stage.output = run.output
        if run.combined:
            stage.engine_mode += ("; rows combined per key and gap-aligned slice of event time before the "
                                  "shuffle (COUNT/SUM/MIN/MAX combine)")
        if run.replay_combined:
            stage.engine_mode += ("; replayed rows combined per key, aligned slice and arrival period "
                                  "in the bucket jobs where nothing can fire between their arrivals")
        if run.chunk_rows:
            stage.engine_mode += (f"; a bucket above {run.chunk_rows:,} rows (a hot key) is read in chunks of as "
                                  "many, its rows combined per key, aligned slice and arrival period "
                                  f"({conf.BUCKET_CHUNK_ROWS})")
        renamed = dict(user_columns(ws, rel))
        stage.dropped_rows = _dropped(run, renamed)
        panes_view = self.view(run.panes, "panes")
        final_view = self.view(run.final, "final")
        new = panes_select(ws, panes_view, names)
        net = panes_select(ws, final_view, names)
        time = None
        if replay is not None:
            plot = view_name("plot", self.run_id, len(self.views))
            time = StageTime(replay.timeline, replay.p_end, run.holds, stage.replay or "")
            stage.timeline, stage.holds = replay.timeline, run.holds
            reads = ws.upstream.link.stage if ws.upstream is not None else None
            stage.reads = reads if isinstance(reads, Stage) else None
            stage.pane_frame = _pane_frame(self.spark, run.panes, ws, names, plot)
            if not is_connect(self.spark):
                time.materialise = lambda: self.materialise(run, ws, names, stage,
                                                            (panes_view, final_view, plot), renamed)
        self._link(ws, new, net, time, stage)

    def materialise(self, run: EngineRun, ws: WindowedSelect, names, stage: Stage, views, renamed) -> object:
        """Run a replayed stage once, now, for a later windowed SELECT that collects its holds (for
        its output watermark) and then reads its panes: both read the kept output
        (`EngineRun.materialised`), so the engine does not run twice. Its views, report and plot
        read it too. Not on Spark Connect, whose views are analysed when the result runs (its
        panes are then computed twice). Returns the holds."""
        panes_view, final_view, plot = views
        done = run.materialised()
        done.panes.createOrReplaceTempView(panes_view)
        done.final.createOrReplaceTempView(final_view)
        stage.output, stage.holds, stage.dropped_rows = done.output, done.holds, _dropped(done, renamed)
        stage.pane_frame = _pane_frame(self.spark, done.panes, ws, names, plot)
        return done.holds

    def _link(self, ws: WindowedSelect, new: exp.Select, net: exp.Select, time: StageTime | None,
              stage: Stage | None = None) -> None:
        """Replace the windowed SELECT by `new` (over its panes), linked to the stage for the
        SELECTs that read it (`pipelines`); `net` reads its final panes."""
        # merged-away windows reach the output only if a window can emit before its final pane
        merging = _merging(ws.window) and not (not ws.replay and collapsible(ws.windowing.effective_trigger))
        new.meta[STAGE_KEY] = StageLink(ws.windowing.mode, net, merging, ws.label(), replay=ws.replay,
                                        one_pane=ws.replay and one_pane_per_window(ws.windowing), time=time,
                                        stage=stage)
        self._replace(ws, new)

    def upstream_replay(self, ws: WindowedSelect, stage: Stage) -> timeline.Replay | None:
        """The replay of a windowed SELECT over a replayed stage's panes: the stage's output
        watermark (one job over its panes collects the holds), ending where the stage ends."""
        if ws.upstream is None:
            raise ValueError(f"{ws.label()} reads no replayed stage")
        time = ws.upstream.link.time
        if time is None:  # the stage was planned without running (explain)
            stage.replay = (stage.replay or "") + " (the timeline is computed when the query runs)"
            return None
        output = time.output_watermark()
        stage.replay = (stage.replay or "") + f": {len(output.times)} watermark steps"
        return timeline.Replay(output, max(time.p_end, output.last_time), 0, "output watermark")

    def _replace(self, ws: WindowedSelect, new: exp.Select) -> None:
        self.tree = replace_select(self.tree, ws.select, new)


def defines_view(tree: exp.Expr) -> bool:
    """Whether a statement defines a view (CREATE [TEMP] VIEW ... AS, ALTER VIEW ... AS): Spark
    keeps its SQL and recomputes it at each read.

    >>> import sqlglot
    >>> [defines_view(sqlglot.parse_one(q, read="spark")) for q in ("CREATE TEMP VIEW v AS SELECT 1",
    ...  "ALTER VIEW v AS SELECT 1", "CREATE TABLE t AS SELECT 1", "SELECT 1")]
    [True, True, False, False]
    """
    return isinstance(tree, (exp.Create, exp.Alter)) and (tree.args.get("kind") or "").upper() == "VIEW"


def _view_of_engine(ws: WindowedSelect, choice: Choice) -> SqlflowError:
    """A view over a windowed SELECT the engine runs: Spark could not recompute it at each read."""
    from ..errors import SqlflowUnsupportedError

    return ws.error(
        SqlflowUnsupportedError,
        f"CREATE VIEW over {ws.label()}, which runs on the engine path ({choice.why}): a Spark view is "
        "recomputed at each read, and the engine's panes are not plain Spark SQL (sqlflow computes them "
        "when the query runs), so the view would keep the rows of its source as they were when it was "
        "created", "SELECT",
        hint="register a result instead, computed when you ask: "
             "sqlflow.sql(spark, query).createOrReplaceTempView(\"v\") (run it again after the source "
             "changes); or write a SELECT the native path runs (a view of it is plain Spark SQL and follows "
             "its source; sqlflow.explain(query) says which path a SELECT takes and why)")


def _dropped(run: EngineRun, renamed: dict):
    """A function returning a stage's dropped rows with readable column names (`Stage.dropped_rows`)."""
    return lambda: run.dropped.toDF(*[renamed.get(c, c) for c in run.dropped.columns])


def _pane_frame(spark, panes, ws: WindowedSelect, names, view: str):
    """A function returning a replayed stage's panes with the query's column names, for
    `sqlflow.plot`: the statement's views are gone by then, so it registers the panes under a view
    of its own, kept as long as the DataFrame needs it (`lifetimes`)."""
    from .lifetimes import is_connect, keep_until_unused

    select = panes_select(ws, view, names)
    select.set("with_", None)  # the statement's CTEs: the SELECT reads only its panes
    text = to_spark_sql(select)

    def frame():
        panes.createOrReplaceTempView(view)
        df = spark.sql(text)
        if is_connect(spark):  # analysed, by view name, each time it runs
            keep_until_unused(spark, df, [view])
        else:
            spark.catalog.dropTempView(view)
        return df

    return frame


def _no_clock(ws: WindowedSelect) -> SqlflowError:
    """ON PROCESSING / INGESTION TIME over bounded data without arrival times (docs/semantics.md, 10)."""
    from ..errors import SqlflowSemanticError

    window = ws.windowing.window
    return ws.error(SqlflowSemanticError, f"{window.domain.value} needs each row's arrival: bounded data "
                    "without arrival times has no processing time (its rows are all there at once)", "WINDOW",
                    pos=window.on_pos or window.pos,
                    hint="replay recorded rows with WATERMARK <column> ... ARRIVAL <column> on the source, "
                         "read a stream, or window an event-time column (ON <column>)")


def _guessed_name(item: exp.Expr) -> str:
    """An item's output name without Spark's analysis (explain() without a session)."""
    if isinstance(item, exp.Alias):
        return item.alias
    if isinstance(item, exp.Column):
        return item.name
    return item.sql(dialect="spark")


def _clause_columns(ws: WindowedSelect) -> list[tuple[str, ast.Position | None, str]]:
    """SQL that sqlflow's clauses put in the input relation, with where it was written."""
    out: list[tuple[str, ast.Position | None, str]] = []
    window = ws.windowing.window
    if ws.event_time_clause == "WINDOW" and window.on is not None:
        out.append((window.on, window.on_pos or window.pos, "WINDOW"))
    elif ws.event_time_clause == "WATERMARK" and ws.sources:
        source = ws.sources[0].watermark
        out.append((source.event_time, source.event_time_pos or source.pos, "WATERMARK"))
    elif ws.event_time_clause == "ARRIVAL":
        w = ws.replayed.watermark
        out.append((ws.replayed.arrival, w.arrival_pos or w.pos, "WATERMARK"))
    if ws.upstream is not None:
        out.append((ws.upstream.arrival.sql(dialect="spark"), window.on_pos or window.pos, "WINDOW"))
    elif ws.replay:
        w = ws.replayed.watermark
        out.append((ws.replayed.arrival, w.arrival_pos or w.pos, "WATERMARK"))
    fn = ws.window
    if isinstance(fn, ast.Sessions) and isinstance(fn.gap, ast.SqlExpr):
        out.append((fn.gap.sql, fn.gap.pos or fn.pos, "WINDOW"))
    for t in ast.walk_triggers(ws.windowing.effective_trigger):
        if isinstance(t, ast.When):
            out.append((t.predicate.sql, t.predicate.pos or t.pos, "TRIGGER"))
    return out


def _merging(fn: ast.WindowFn) -> bool:
    if isinstance(fn, ast.Sessions):
        return True
    if isinstance(fn, ast.CustomWindow):
        from ..engine import registered_window_fn

        return callable(getattr(registered_window_fn(fn.name), "merge", None))
    return False


def _model(model) -> str:
    return event_order.model_text(model)


def _tagged(ws: WindowedSelect) -> InputRelation:
    """The input relation of a replay over several sources, each row tagged with the name of its
    source (an argument echoed in dropped rows, sqlflow/plan/inputs.py)."""
    from .streaming.several import source_name

    sources = ws.arrival_sources
    rel = tagged_relation(ws, sources, [exp.Literal.string(source_name(s, i)) for i, s in enumerate(sources)])
    rel.arg_exprs[SOURCE] = exp.column(SOURCE)
    return rel


def user_columns(ws: WindowedSelect, rel: InputRelation, taken: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """(internal column, readable name) for the keys and arguments of dropped rows (a name never
    one of the dropped rows' own columns, nor one of `taken`)."""
    used = {"stage", DROPPED_EVENT_TIME, DROPPED_ARRIVAL_TIME, DROPPED_REASON, WINDOW_START, WINDOW_END,
            *(t.lower() for t in taken)}
    out = []
    for column, node in list(zip(rel.keys, ws.keys)) + list(rel.arg_exprs.items()):
        name = node.name if isinstance(node, exp.Column) else node.sql(dialect="spark")
        if column == SOURCE:
            name = DROPPED_SOURCE
        base, i = name, 1
        while name.lower() in used:
            i += 1
            name = f"{base}_{i}"
        used.add(name.lower())
        out.append((column, name))
    return out

