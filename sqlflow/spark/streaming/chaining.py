"""Windowed SELECTs over a stream that already has a watermark: chained, or refused, here.

Spark keeps one watermark per query. A second `withWatermark` over a stream that has one (the
user's own) fails when the query starts, with Spark's "Redefining watermark is disallowed", so a
windowed SELECT over such a stream is refused (`refuse_watermarked_input`). The panes of a
windowed SELECT could carry event time on through `transformWithStateInPandas(...,
eventTimeColumnName=...)`, but measured on Spark 4.3 (docs/pipelines.md, "On a stream") that
operator's rows must never be behind the watermark of the previous micro-batch, and nothing holds
the watermark back for pending windows.

What carries it instead (docs/pipelines.md, "On a stream"): the later stage runs as a second
sqlflow operator in timeMode None in the same query (udfs/chained_operator.py), and every call of a bucket
of the earlier stage reports that bucket's watermark and holds on its METRICS row (udfs/
streaming.py). The reports travel in the rows between the two: the earlier stage's panes leave
its operator in one relation with them (`PaneStream.chain`), and each SELECT between the stages
is rewritten to pass them on (`carry_reports`: the report columns in its SELECT list, and
`OR kind = REPORT` on its WHERE), since a second branch read off the first operator would run it
twice (tests/upstream/test_transform_with_state.py). That works with OUTPUT TIMESTAMP END OF
WINDOW upstream, for every window kind, where the output watermark at each instant is what the
earlier stage knows then (docs/semantics.md, 1.3); with the other output timestamps it depends
on later input, and the SELECT is refused at its WINDOW clause.
"""
from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from ... import ast
from ...columns import KIND, OUTPUT_TIME, REPORT, REPORT_COLUMNS
from ...errors import SqlflowUnsupportedError
from ...plan.pipelines import STAGE_KEY, StageLink, aggregates
from ...plan.relations import visible_ctes

#: the logical-plan node of `withWatermark` (Spark's name, in the analysed plan's text)
WATERMARK_NODE = "EventTimeWatermark"


@dataclass
class Chain:
    """A windowed SELECT reading the panes of an earlier windowed stage on a stream: `selects`
    are the SELECTs from the one its FROM names down to the stage's SELECT over its panes, and
    `relations[i]` is the FROM relation that names `selects[i]`."""

    link: StageLink
    selects: list
    relations: list

    @property
    def stage(self):
        """The earlier stage's report Stage (its `extra`: the PaneStream, the chain view)."""
        return self.link.stage


def find_chain(ws) -> tuple[Chain | None, str | None]:
    """The earlier streaming stage the windowed SELECT `ws` reads through plain SELECTs (their
    SELECT lists and WHERE clauses can carry the reports), or None and, when the path stops at
    something that cannot carry them, what it is."""
    selects, relations = [], []
    current = ws.select
    while True:
        if current.args.get("joins") or current.args.get("laterals"):
            return None, "a JOIN or LATERAL VIEW"
        source = current.args.get("from_")
        if source is None:
            return None, None
        relation = source.this
        inner = _resolve(relation, current)
        if inner is None:
            return None, None
        if not isinstance(inner, exp.Select):
            return None, "a set operation (UNION, INTERSECT, EXCEPT)"
        link = inner.meta.get(STAGE_KEY) if inner._meta else None
        selects.append(inner)
        relations.append(relation)
        if isinstance(link, StageLink):
            if not link.stream:
                return None, None
            blocked = _blocked(inner, stage=True)
            return (None, blocked) if blocked else (Chain(link, selects, relations), None)
        blocked = _blocked(inner, stage=False)
        if blocked:
            return None, blocked
        current = inner


def read_later(statement, select: exp.Select) -> bool:
    """Whether a windowed SELECT of `statement` reads the windowed SELECT `select` through its FROM
    (directly, or through CTEs and subqueries): then `select`'s stage reports to it."""
    for later, _ in statement.windowed_selects():
        current = later
        while current is not select:
            source = current.args.get("from_")
            inner = _resolve(source.this, current) if source is not None else None
            if not isinstance(inner, exp.Select):
                break
            current = inner
        else:
            if later is not select:
                return True
    return False


def _resolve(relation: exp.Expr, at: exp.Select) -> exp.Expr | None:
    """The query a FROM relation names: a subquery's, or a CTE's visible at `at`."""
    if isinstance(relation, exp.Subquery):
        return relation.this
    if isinstance(relation, exp.Table) and not relation.db:
        ctes = {cte.alias_or_name.lower(): cte for cte in visible_ctes(at)}
        cte = ctes.get(relation.name.lower())
        return cte.this if cte is not None else None
    return None


def _blocked(select: exp.Select, stage: bool) -> str | None:
    """What in a SELECT between two stages keeps it from passing the reports on, or None."""
    if not stage and (aggregates(select) or select.args.get("having") is not None):
        return "an aggregation"
    for arg, what in (("distinct", "DISTINCT"), ("qualify", "QUALIFY"), ("limit", "LIMIT"),
                      ("offset", "OFFSET"), ("order", "ORDER BY")):
        if select.args.get(arg) is not None:
            return what
    if not stage and (select.args.get("joins") or select.args.get("laterals")):
        return "a JOIN or LATERAL VIEW"
    return None


def refuse_unchainable(ws, chain: Chain) -> None:
    """Raise a located error when `ws` cannot run chained after the stage it reads."""
    stage = chain.stage
    policy = ast.OutputTime(stage.output_time) if stage is not None else None
    if policy is not ast.OutputTime.END_OF_WINDOW:
        name = policy.value if policy is not None else "?"
        raise ws.error(
            SqlflowUnsupportedError,
            f"{ws.label()} reads the panes of {chain.link.label} on a stream, whose OUTPUT TIMESTAMP is {name}: "
            "no stream can know that stage's output watermark, which at an instant depends on input arriving "
            "later (docs/semantics.md, 1.3; docs/pipelines.md, \"On a stream\")", "WINDOW", pos=ws.windowing.pos,
            hint="use OUTPUT TIMESTAMP END OF WINDOW upstream (the default), or run both stages over the recorded "
                 "input as a replay (WATERMARK ... ARRIVAL ...), or write the upstream panes to a sink and read "
                 "them as a new stream with WATERMARK output_time DELAY OF <how late its panes come>")
    if ws.domain is not ast.TimeDomain.EVENT_TIME:
        window = ws.windowing.window
        raise ws.error(
            SqlflowUnsupportedError,
            f"{ws.label()} reads the panes of {chain.link.label}, an event-time stage, on {ws.domain.value}: "
            "one pipeline keeps one time domain (docs/semantics.md, 10)", "WINDOW", pos=window.on_pos or window.pos,
            hint="window the panes ON output_time")
    if ws.sources:
        where = ws.sources[0].watermark
        raise ws.error(
            SqlflowUnsupportedError,
            f"{ws.label()} reads the panes of {chain.link.label} on a stream, and a WATERMARK clause: its "
            "watermark is that stage's output watermark", "WATERMARK", pos=where.pos or ws.windowing.pos,
            hint="drop the WATERMARK clause (the panes arrive in the micro-batch that emits them, under the "
                 "stage's output watermark, WINDOW ... ON output_time)")
    event = ws.event_time
    if not (isinstance(event, exp.Column) and event.name.lower() == OUTPUT_TIME):
        window = ws.windowing.window
        raise ws.error(
            SqlflowUnsupportedError,
            f"{ws.label()} reads the panes of {chain.link.label} as they are emitted: its event time is their "
            f"output_time (the time the stage's output watermark bounds), not {event.sql(dialect='spark')}",
            "WINDOW", pos=window.on_pos or window.pos,
            hint="write WINDOW ... ON output_time, and choose the event time upstream with OUTPUT TIMESTAMP")
    if stage is None or "chain_view" not in stage.extra:
        raise ws.error(
            SqlflowUnsupportedError,
            f"{ws.label()} reads the panes of {chain.link.label} on a stream, which runs on Spark's native "
            "window aggregation and reports no output watermark", "WINDOW", pos=ws.windowing.pos,
            hint="SET spark.sqlflow.streaming.operator = stateful")


def carry_reports(query: exp.Select, chain: Chain) -> None:
    """Rewrite the windowed SELECT's input relation `query` (in place) so that the earlier stage's
    reports reach it: each SELECT on the way, copied, reads the one below, with the report
    columns in its SELECT list and `OR kind = REPORT` on its WHERE; the stage's own SELECT over
    its panes reads the stage's chain view (panes and reports) instead."""
    below = None
    for select, relation in zip(reversed(chain.selects), reversed(chain.relations)):
        copy = select.copy()
        if below is None:
            copy.set("from_", exp.From(this=exp.to_table(chain.stage.extra["chain_view"])))
        else:
            copy.set("from_", exp.From(this=below))
        _pass_on(copy)
        name = relation.args.get("alias")
        alias = (name.copy() if name is not None and name.this
                 else exp.TableAlias(this=exp.to_identifier(relation.name)) if isinstance(relation, exp.Table)
                 else None)
        below = exp.Subquery(this=copy, alias=alias)
    query.set("from_", exp.From(this=below))
    _pass_on(query)


def _pass_on(select: exp.Select) -> None:
    """The report columns in `select`'s list (unless a star has them) and its WHERE true for them."""
    star = any(isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star))
               for e in select.expressions)
    if not star:
        select.set("expressions", [*select.expressions, *(exp.column(c) for c in (KIND, *REPORT_COLUMNS))])
    where = select.args.get("where")
    if where is not None:
        report = exp.EQ(this=exp.column(KIND), expression=exp.Literal.number(REPORT))
        select.set("where", exp.Where(this=exp.Or(this=exp.Paren(this=where.this), expression=report)))


def refuse_watermarked_input(ws, relation_sql: str, raw, stream_stages: dict, obstacle: str | None = None) -> None:
    """Raise a located error when the input of the windowed SELECT `ws` (its relation's SQL and
    the analysed DataFrame `raw`) already carries a watermark and is not a chain (`find_chain`).
    `stream_stages`: the pane-stream views of this statement's earlier windowed SELECTs, and each
    SELECT; `obstacle`: what stopped `find_chain`."""
    upstream = next((up for view, up in stream_stages.items() if view in relation_sql), None)
    if upstream is None and WATERMARK_NODE not in plan_text(raw):
        return
    if upstream is not None:
        what = (f"reads the panes of {upstream.label()} on a stream through {obstacle or 'a relation'} that "
                "cannot pass on that stage's output watermark: its reports travel in the rows between the two "
                "stages, which only SELECT lists and WHERE clauses carry (docs/pipelines.md, \"On a stream\")")
        hint = ("read the stage through plain SELECTs (no JOIN, aggregation, DISTINCT, ORDER BY or LIMIT between), "
                "or write the upstream panes to a sink (sqlflow.spark.streaming.start) and read that as a new stream "
                "with WATERMARK output_time DELAY OF <how late its panes come>")
    else:
        what = ("reads a stream that already has a watermark (withWatermark, or the result of a windowed "
                "sqlflow.sql on a stream); Spark allows one watermark per chain of stateful operators (it would "
                "fail at start with \"Redefining watermark is disallowed\")")
        hint = ("over a stream of your own, drop withWatermark: the WATERMARK clause defines it; or write the "
                "upstream to a sink and read it as a new stream")
    raise ws.error(SqlflowUnsupportedError, f"{ws.label()} {what}", "WINDOW", pos=ws.windowing.pos, hint=hint)


def plan_text(df) -> str:
    """The analysed logical plan of `df` as text (Spark Classic or Spark Connect)."""
    jdf = getattr(df, "_jdf", None)
    if jdf is not None:
        return str(jdf.queryExecution().analyzed().toString())
    return df._explain_string(extended=True)  # Spark Connect: the server explains it
