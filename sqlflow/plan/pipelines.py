"""Aggregating over the output of a windowed SELECT (multi-stage pipelines, docs/pipelines.md).

A windowed SELECT's output is a stream of panes; what an aggregation downstream of it should do
depends on the upstream accumulation mode (the paper, section 2.3):

- **DISCARDING**: each pane is a delta; summing panes downstream gives totals. Nothing to do.
- **ACCUMULATING**: each pane replaces the previous one of its window (a consumer that
  overwrites); downstream aggregates read the last pane of every window. (With merging windows
  a merged-away session is never replaced: the paper's reason for retractions; sqlflow warns.)
- **ACCUMULATING AND RETRACTING**: each retraction row withdraws a pane. COUNT, SUM and AVG apply
  it by subtraction (`SUM(x)` -> `SUM(IF(is_retraction, -x, x))`, ...), and a group whose rows
  all cancel disappears; other aggregates (MIN, MAX, COUNT(DISTINCT), ...) need the retained
  multiset: on bounded data, each retraction cancels the pane it withdraws, so they read the
  final panes.

Only engine-path stages need this: a natively rewritten stage emits one final pane per window.

On a **stream** there are no final panes, only the changelog so far: COUNT, SUM and AVG over a
retracting stage subtract as above (the result is a streaming aggregation, written in complete
or update mode), a stage whose windows each emit one pane (default trigger, no allowed lateness)
needs nothing, and every other shape (MIN/MAX/DISTINCT over retractions, anything over refining
ACCUMULATING panes) is refused with a located error (`refuse_on_stream`).

>>> import sqlglot
>>> from sqlflow.frontend.statement import DIALECT
>>> r = exp.column("is_retraction", table="s")
>>> def sub(sql):
...     return subtract(sqlglot.parse_one(sql, read=DIALECT), r, None).sql(DIALECT)
>>> sub("SUM(total)")
'SUM(IF(s.is_retraction, -(total), total))'
>>> sub("COUNT(*)")
'COALESCE(SUM(IF(s.is_retraction, -1, 1)), 0)'
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol

from sqlglot import exp

from .. import ast
from ..columns import EMIT_TIME, OUTPUT_TIME
from ..engine import INVERTIBLE, collapsible
from ..errors import SqlflowUnsupportedError
from . import user_warnings
from .aggregate_calls import aggregate_call, aggregate_calls
from .relations import visible_ctes
from .windowed_select import select_position, windowing_of

STAGE_KEY = "sqlflow_stage"


class ReportedStage(Protocol):
    """What the planner reads and marks of a stage's report entry (`sqlflow.spark.report.Stage`)."""

    output_time: str | None  # the OUTPUT TIMESTAMP policy
    extra: dict


class SqlflowPipelineWarning(UserWarning):
    """A downstream aggregation reads a stage whose output it cannot fully interpret."""


@dataclass
class StageLink:
    """Attached to the SELECT that replaced an engine-path windowed SELECT."""

    mode: ast.AccumulationMode
    net: exp.Select | None  # the same SELECT over the stage's final panes only (None on a stream)
    merging: bool        # windows merge and a merged-away window can be in the output (not when
                         # each window emits one final pane: bounded data, a trigger firing at the end)
    label: str
    #: the stage runs on a stream (its `net` is None: a stream has no final panes); `one_pane`:
    #: each window emits exactly one pane; `stage`: the report's Stage (marked when aggregated)
    stream: bool = False
    one_pane: bool = False
    stage: ReportedStage | None = None
    #: the stage replays recorded data (ARRIVAL): its panes have processing times (emit_time)
    replay: bool = False
    #: a replayed stage's watermark and holds, for a windowed SELECT reading it (`StageTime`)
    time: "StageTime | None" = None

    def __deepcopy__(self, memo) -> "StageLink":
        return self  # a copied SELECT (sqlglot copies meta) still links the same stage


def one_pane_per_window(windowing: ast.Windowing) -> bool:
    """Each window emits exactly one pane on a stream: the trigger fires once, at the watermark,
    and the window is gone then (no allowed lateness, or a trigger that never fires again).

    >>> from sqlflow.frontend import parse
    >>> def one(sql):
    ...     return one_pane_per_window(parse(f"SELECT k, COUNT(*) FROM t GROUP BY k {sql}").windowed_selects()[0][1])
    >>> one("WINDOW SESSIONS(GAP 1m) ON ts"), one("WINDOW FIXED(SIZE 1m) ON ts ALLOWED LATENESS 1m")
    (True, False)
    >>> one("WINDOW FIXED(SIZE 1m) ON ts TRIGGER WATERMARK ALLOWED LATENESS 1m")
    True
    """
    trigger = windowing.effective_trigger
    once = ast.Watermark()
    if trigger == once:
        return True
    return windowing.lateness_micros == 0 and trigger in (ast.Repeat(once), ast.Sequence((once, ast.Repeat(once))))


def aggregates(select: exp.Select) -> bool:
    """The SELECT aggregates (GROUP BY or an aggregate call)."""
    if select.args.get("group") is not None:
        return True
    scopes = list(select.expressions) + [select.args.get("having")]
    return bool(aggregate_calls(scopes))


def _stage_of_query(query: exp.Expr, ctes: dict):
    link = query.meta.get(STAGE_KEY) if query._meta else None
    if isinstance(link, StageLink):
        return link, True
    if isinstance(query, exp.Select) and not aggregates(query) and not query.args.get("joins"):
        source = query.args.get("from_")
        if source is not None:
            found = _stage_of_relation(source.this, ctes)
            if found is not None:
                return found[0], False
    return None


def _stage_of_relation(relation: exp.Expr, ctes: dict):
    if isinstance(relation, exp.Subquery):
        return _stage_of_query(relation.this, ctes)
    if isinstance(relation, exp.Table) and not relation.db and relation.name.lower() in ctes:
        return _stage_of_query(ctes[relation.name.lower()].this, ctes)
    return None


def _relations(select: exp.Select) -> list[exp.Expr]:
    out = []
    source = select.args.get("from_")
    if source is not None:
        out.append(source.this)
    out += [join.this for join in select.args.get("joins") or []]
    return out


def _qualifier(relation: exp.Expr) -> str | None:
    alias = relation.args.get("alias")
    if alias is not None and alias.this:
        return alias.name
    return relation.name if isinstance(relation, exp.Table) else None


def rewrite_consumer(select: exp.Select, statement, *, avg_type=None, windowed: bool = False) -> None:
    """Make an aggregating SELECT read its upstream windowed stages as their mode means.

    `avg_type(select, call)` gives the Spark type of an AVG call (to keep it under subtraction),
    or None when unknown. `windowed`: the SELECT is itself windowed (over a stream it is refused
    later, by `streaming.chaining`, whatever its aggregates; over a replay whose panes it reads
    as they are emitted, `upstream_stage`, it reads them as a stream's changelog)."""
    if not aggregates(select):
        return
    ctes = {cte.alias_or_name.lower(): cte for cte in visible_ctes(select)}
    linked = []
    for relation in _relations(select):
        found = _stage_of_relation(relation, ctes)
        if found is not None and found[0].stream and found[0].stage is not None and not windowed:
            found[0].stage.extra["aggregated"] = True  # a streaming aggregation: complete or update mode
        if found is not None and found[0].mode is not ast.AccumulationMode.DISCARDING:
            linked.append((relation, *found))
    if not linked:
        return
    position = select_position(statement, select)
    where = (f" at line {position.line}, column {position.column}" if position else "")
    if len(linked) > 1:
        raise statement.source.error_at(
            SqlflowUnsupportedError, f"this SELECT aggregates over {len(linked)} windowed stages at once",
            position, clause="SELECT", hint="aggregate each stage on its own first")
    relation, link, direct = linked[0]
    if link.stream and windowed and not chainable(link):
        return  # refused by `streaming.chaining`
    calls = [aggregate_call(node) for node in aggregate_calls(
        list(select.expressions) + [select.args.get("having"), select.args.get("order")])]
    as_emitted = link.stream or (link.replay and windowed and _timed(select))
    if as_emitted:  # the changelog as it comes: no final panes to read
        if link.one_pane:
            return
        if not (link.mode.retracting and calls and all(_invertible(c) for c in calls)):
            raise refuse_on_stream(statement, position, where, link, calls)
    if link.mode.retracting and calls and all(_invertible(c) for c in calls):
        qualifier = _qualifier(relation)
        flag = exp.column("is_retraction", table=qualifier) if qualifier else exp.column("is_retraction")
        # a window's pane whose rows all cancel says so (its value is 0): a changelog keeps it
        _subtract_all(select, flag, avg_type, drop_empty=not (as_emitted and windowed))
        return
    if not direct:
        names = ", ".join(sorted({c.name for c in calls if not _invertible(c)})) or "these aggregates"
        raise statement.source.error_at(
            SqlflowUnsupportedError,
            f"this SELECT aggregates ({names}) over {link.label} through another SELECT: "
            "it needs the stage's final panes", position, clause="SELECT",
            hint="read the windowed stage directly in FROM, or use COUNT, SUM and AVG")
    if link.mode is ast.AccumulationMode.ACCUMULATING and link.merging:
        user_warnings.warn(f"sqlflow: the SELECT{where} aggregates over {link.label}, an ACCUMULATING stage of merging "
                      "windows: a session that was merged into another is never replaced, so it is counted "
                      "too; use EMIT ACCUMULATING AND RETRACTING upstream", SqlflowPipelineWarning)
    alias = relation.args.get("alias")
    name = alias.copy() if alias is not None else exp.TableAlias(this=exp.to_identifier(relation.name))
    relation.replace(exp.Subquery(this=link.net.copy(), alias=name))


def chainable(link: StageLink) -> bool:
    """A windowed SELECT reading this stage on a stream can run chained after it: the stage's
    output watermark is known at every micro-batch (OUTPUT TIMESTAMP END OF WINDOW: docs/semantics.md,
    1.3; `streaming.chaining`)."""
    stage = link.stage
    return stage is not None and getattr(stage, "output_time", None) == ast.OutputTime.END_OF_WINDOW.value


def _timed(select: exp.Select) -> bool:
    """Whether a windowed SELECT's panes depend on when its input arrives: all but a GLOBAL window
    whose trigger fires only at the end of the input (its one pane is the same either way)."""
    windowing = windowing_of(select)
    if windowing is None:
        return True
    return not (isinstance(windowing.window.fn, ast.Global) and collapsible(windowing.effective_trigger))


@dataclass
class StageTime:
    """What a later windowed stage needs of a replayed stage: its input watermark, where its input
    ends, and its watermark holds (a Spark DataFrame of since, until, value in microseconds,
    `engine_path.EngineRun.holds`). `output_watermark()` collects the holds (one job over the
    stage's panes) and computes the stage's output watermark (`sqlflow.engine.holds`)."""

    timeline: Any      # engine.watermarks.Timeline
    p_end: int
    holds: Any         # DataFrame, or None when planned without Spark
    model: str         # the stage's own watermark, for explain()
    #: function() -> the holds of the stage computed once and kept for the later stage that reads
    #: its panes too (`Runner.materialise`); None once called, or when there is nothing to keep
    materialise: Callable[[], Any] | None = None

    def materialised(self) -> bool:
        """Compute the stage once and keep it (its panes and holds then read the kept output),
        before a later stage reads them; whether anything changed (its panes must be read again)."""
        if self.materialise is None:
            return False
        self.holds, self.materialise = self.materialise(), None
        return True

    def output_watermark(self):
        from ..engine import output_watermark

        frame = self.holds.toPandas()
        emitted = frame["until"].dropna()  # every emission, held or not: the output ends at the last
        end = max(self.p_end, int(emitted.max())) if len(emitted) else self.p_end
        held = frame.dropna()
        col = {c: held[c].to_numpy("int64") for c in ("since", "until", "value")}
        return output_watermark(self.timeline, since=col["since"], until=col["until"], value=col["value"], end=end)


@dataclass
class Upstream:
    """The replayed stage a windowed SELECT reads as its panes are emitted (`upstream_stage`)."""

    link: StageLink
    arrival: exp.Expr  # the stage's emit_time column, as this SELECT names it


def upstream_stage(statement, ws) -> Upstream | None:
    """The replayed windowed stage that a windowed SELECT reads as a new replay, or None.

    Its input elements are the stage's pane rows (retractions included), each arriving at its
    `emit_time` and carrying its `output_time` as event time, under the stage's output watermark
    (docs/semantics.md, 1.3). So the window must be ON output_time, and the SELECT reads no other
    watermarked source; a WATERMARK clause with ARRIVAL of its own replays the panes its own way.
    A GLOBAL window firing only at the end of the input reads the panes as bounded data (its one
    pane is the same either way)."""
    select = ws.select
    if not _timed(select):
        return None
    ctes = {cte.alias_or_name.lower(): cte for cte in visible_ctes(select)}
    found = [(relation, *hit) for relation in _relations(select)
             for hit in [_stage_of_relation(relation, ctes)] if hit is not None and hit[0].replay]
    if not found or ws.arrival_source is not None:
        return None
    relation, link, _ = found[0]
    window = ws.windowing.window
    if ws.sources:
        where = ws.sources[0].watermark if ws.sources else None
        raise statement.source.error_at(
            SqlflowUnsupportedError,
            f"this windowed SELECT reads the panes of {link.label}, a replay, and a WATERMARK clause without "
            "ARRIVAL: the panes would be bounded data (every pane ON_TIME at no processing time)",
            (where.pos if where else None) or window.pos, clause="WATERMARK",
            hint="drop the WATERMARK clause: the panes then arrive at their emit_time under the stage's output "
                 "watermark (WINDOW ... ON output_time)")
    qualifier = _qualifier(relation)
    event = ws.event_time
    if not (isinstance(event, exp.Column) and event.name.lower() == OUTPUT_TIME
            and (not event.table or qualifier is None or event.table.lower() == qualifier.lower())):
        raise statement.source.error_at(
            SqlflowUnsupportedError,
            f"this window reads the panes of {link.label} as they are emitted: its event time is their "
            f"output_time (the time the stage's output watermark bounds), not {event.sql(dialect='spark')}",
            window.on_pos or window.pos, clause="WINDOW",
            hint="write WINDOW ... ON output_time, and choose the event time upstream with OUTPUT TIMESTAMP "
                 "(END OF WINDOW, START OF WINDOW, EARLIEST, LATEST)")
    arrival = exp.column(EMIT_TIME, table=qualifier) if qualifier else exp.column(EMIT_TIME)
    return Upstream(link, arrival)


def refuse_on_stream(statement, position, where: str, link: StageLink, calls) -> Exception:
    """The located error for an aggregation a stream cannot give right: only subtraction applies
    retractions incrementally, and only retractions say that a pane was replaced. (A windowed
    SELECT over a replayed stage reads its panes as they are emitted, as on a stream.)"""
    what = "a stream" if link.stream else "a replay whose panes this window reads as they are emitted"
    if link.mode.retracting:
        names = ", ".join(sorted({c.name for c in calls if not _invertible(c)})) or "these aggregates"
        message = (f"the SELECT{where} aggregates ({names}) over {link.label}, {what}: only COUNT, SUM and "
                   "AVG can apply its retractions as they come (the other aggregates need its final panes, "
                   "which a changelog read as it comes never has)")
        hint = ("use COUNT, SUM or AVG here, or write the stage's panes to a sink (sqlflow.spark.streaming.start) "
                "and aggregate them as bounded data" if link.stream else
                "use COUNT, SUM or AVG here, or aggregate the stage without a WINDOW clause (that reads its final panes)")
    else:
        message = (f"the SELECT{where} aggregates over {link.label}, an ACCUMULATING stage ({what}) whose "
                   "windows emit several panes: each pane refines the one before, which a streaming "
                   "aggregation cannot replace, so it would count every refinement")
        hint = ("use EMIT ACCUMULATING AND RETRACTING upstream (COUNT, SUM and AVG then subtract what is "
                "retracted), or EMIT DISCARDING when downstream only adds values up")
    return statement.source.error_at(SqlflowUnsupportedError, message, position, clause="SELECT", hint=hint)


def _invertible(call) -> bool:
    node = call.node
    return (call.kind in INVERTIBLE and not isinstance(node, exp.Filter)
            and not (isinstance(node, exp.Count) and isinstance(node.this, exp.Distinct)))


def _subtract_all(select: exp.Select, flag: exp.Expr, avg_type, drop_empty: bool = True) -> None:
    for arg in ("expressions", "having", "order"):
        value = select.args.get(arg)
        if value is None:
            continue
        if isinstance(value, list):
            select.set(arg, [v.transform(lambda n: _swap_call(n, flag, select, avg_type)) for v in value])
        else:
            select.set(arg, value.transform(lambda n: _swap_call(n, flag, select, avg_type)))
    if select.args.get("group") is not None and drop_empty:
        # a group whose rows all cancel out is gone, as if its panes had never been emitted
        alive = exp.NEQ(this=exp.Sum(this=_sign(flag)), expression=exp.Literal.number(0))
        having = select.args.get("having")
        select.set("having", exp.Having(this=alive if having is None
                                        else exp.And(this=exp.Paren(this=having.this), expression=alive)))


def _swap_call(node, flag, select, avg_type):
    from .aggregate_calls import is_aggregate_call

    if is_aggregate_call(node) and not isinstance(node.parent, exp.Window):
        return subtract(node, flag, avg_type(select, node) if avg_type else None)
    return node


def _sign(flag: exp.Expr) -> exp.Expr:
    return exp.If(this=flag.copy(), true=exp.Literal.number(-1), false=exp.Literal.number(1))


def _signed(value: exp.Expr, flag: exp.Expr) -> exp.Expr:
    return exp.If(this=flag.copy(), true=exp.Neg(this=exp.Paren(this=value.copy())), false=value.copy())


def subtract(call: exp.Expr, flag: exp.Expr, avg_type) -> exp.Expr:
    """COUNT, SUM or AVG over rows where `flag` marks retractions, applied by subtraction."""
    zero = exp.Literal.number(0)
    if isinstance(call, exp.Count):
        if isinstance(call.this, exp.Star) or call.this is None:
            return exp.Coalesce(this=exp.Sum(this=_sign(flag)), expressions=[zero])
        counted = exp.If(this=exp.Is(this=call.this.copy(), expression=exp.Null()), true=zero.copy(), false=_sign(flag))
        return exp.Coalesce(this=exp.Sum(this=counted), expressions=[zero])
    info = aggregate_call(call)
    arg = info.arg
    if arg is None:
        raise AssertionError(f"not invertible: {call.sql()}")
    if info.kind == "sum":
        return exp.Sum(this=_signed(arg, flag))
    if info.kind == "avg":
        count = exp.Sum(this=exp.If(this=exp.Is(this=arg.copy(), expression=exp.Null()), true=zero.copy(),
                                    false=_sign(flag)))
        mean = exp.Div(this=exp.Sum(this=_signed(arg, flag)),
                       expression=exp.Nullif(this=count, expression=zero.copy()))
        return exp.Cast(this=mean, to=avg_type) if avg_type is not None else mean
    if info.kind == "count":  # COUNT_IF and the like
        counted = exp.If(this=exp.Is(this=arg.copy(), expression=exp.Null()), true=zero.copy(), false=_sign(flag))
        return exp.Coalesce(this=exp.Sum(this=counted), expressions=[zero])
    raise AssertionError(f"not invertible: {call.sql()}")
