"""A statement's rewrite into plain Spark SQL, as a sequence of passes.

In the manner of sqlglot's optimizer: each pass is a function from a tree to a tree (given the
`Rewrite` context), `PASSES` lists them in the order they run, and `rewrite` applies them:

1. `plan_stages`: each windowed SELECT, innermost first (the order their clauses are written),
   first reads its upstream stages as their accumulation mode means (`consume_upstream`), then is
   planned by `Rewrite.plan_stage`: rewritten in place into plain Spark SQL (the native path) or
   replaced by a SELECT over its panes that carries a `pipelines.StageLink` (the engine and
   streaming paths). Planning a stage is the one step that needs Spark (its input's types, the
   engine's run); without Spark, `native_stage` plans every stage natively (`sqlflow.transpile`).
2. `rewrite_consumers`: every other SELECT aggregating over a stage reads it as its mode means.
   It runs after all stages, whose links it reads.
3. `drop_watermark_clauses`: Spark reads no WATERMARK clause.

A windowed SELECT has read its upstream stages once, in `plan_stages`; `rewrite_consumers` must
not rewrite it again. That is marked on the SELECT (`CONSUMED_KEY` in its meta) rather than kept
by identity, because the mark must follow the SELECT into the copies of its CTEs that a SELECT
over panes takes along (`output.panes_select`).

>>> from sqlflow.frontend import parse
>>> s = parse("SELECT k, COUNT(*) AS n FROM t WATERMARK ts DELAY OF 1m GROUP BY k WINDOW FIXED(SIZE 1m) ON ts")
>>> tree = rewrite(s.tree, Rewrite(s, native_stage))
>>> print(to_spark_sql(tree))
SELECT k, COUNT(*) AS n, WINDOW(ts, '1 minute').start AS window_start, WINDOW(ts, '1 minute').end AS window_end, CAST(0 AS BIGINT) AS pane_index, 'ON_TIME' AS pane_timing, TRUE AS is_last, CAST(NULL AS TIMESTAMP) AS emit_time, WINDOW(ts, '1 minute').end - INTERVAL '1' MICROSECOND AS output_time FROM t WHERE NOT ts IS NULL GROUP BY k, WINDOW(ts, '1 minute')
>>> [p.__name__ for p in PASSES]
['plan_stages', 'rewrite_consumers', 'drop_watermark_clauses']
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple, Protocol

from sqlglot import exp

from .. import ast
from ..errors import SqlflowError, SqlflowUnsupportedError
from ..frontend.statement import Statement
from .inputs import InputRelation, input_relation
from .path_choice import Choice, choose
from .pipelines import STAGE_KEY, rewrite_consumer, upstream_stage
from .relations import drop_watermark_clauses as _drop_watermark_clauses
from .relations import to_spark_sql
from .windowed_select import WindowedSelect, check_known_window_fn, describe

#: marks a windowed SELECT that has read its upstream stages (module doc)
CONSUMED_KEY = "sqlflow_consumer_done"

#: avg_type(select, call): the Spark type of an AVG call of `select`, or None when unknown
AvgType = Callable[[exp.Select, exp.Expr], Any]


class StagePlanner(Protocol):
    """Plans windowed SELECT number `number` (from 1) of the statement's `tree`: rewrites it in
    place, or replaces it (`relations.replace_select`); returns the stage's report entry and the
    tree (its root replaced when the SELECT was the root)."""

    def __call__(self, statement: Statement, number: int, select: exp.Select, windowing: ast.Windowing,
                 tree: exp.Expr) -> tuple[Any, exp.Expr]: ...


@dataclass
class Rewrite:
    """What the passes share: the statement, how a stage is planned, the type of an AVG call
    (None: unknown, without Spark), and the stages planned so far (the report's, in order)."""

    statement: Statement
    plan_stage: StagePlanner
    avg_type: AvgType | None = None
    stages: list = field(default_factory=list)


def consume_upstream(select: exp.Select, context: Rewrite, *, windowed: bool) -> None:
    """Have `select` read its upstream stages as their accumulation modes mean
    (`pipelines.rewrite_consumer`), once."""
    if select._meta and (select.meta.get(CONSUMED_KEY) or select.meta.get(STAGE_KEY)):
        return
    select.meta[CONSUMED_KEY] = True
    rewrite_consumer(select, context.statement, avg_type=context.avg_type, windowed=windowed)


def plan_stages(tree: exp.Expr, context: Rewrite) -> exp.Expr:
    """Plan each windowed SELECT, innermost first; each reads its upstream stages first."""
    for number, (select, windowing) in enumerate(context.statement.windowed_selects(), start=1):
        consume_upstream(select, context, windowed=True)
        stage, tree = context.plan_stage(context.statement, number, select, windowing, tree)
        context.stages.append(stage)
    return tree


def rewrite_consumers(tree: exp.Expr, context: Rewrite) -> exp.Expr:
    """Every SELECT that is not a stage reads the stages it aggregates over as their modes mean.

    >>> from sqlflow.frontend import parse
    >>> from sqlflow.plan.pipelines import StageLink
    >>> s = parse("SELECT k, SUM(n) AS total FROM (SELECT * FROM panes) AS p GROUP BY k")
    >>> panes = s.tree.find(exp.Subquery).this
    >>> panes.meta[STAGE_KEY] = StageLink(ast.AccumulationMode.ACCUMULATING_AND_RETRACTING, None, False, "stage 1")
    >>> print(to_spark_sql(rewrite_consumers(s.tree, Rewrite(s, native_stage))))
    SELECT k, SUM(IF(p.is_retraction, -(n), n)) AS total FROM (SELECT * FROM panes) AS p GROUP BY k HAVING SUM(IF(p.is_retraction, -1, 1)) <> 0
    """
    for select in list(tree.find_all(exp.Select)):
        consume_upstream(select, context, windowed=False)
    return tree


def drop_watermark_clauses(tree: exp.Expr, context: Rewrite) -> exp.Expr:
    """Remove every source WATERMARK clause (`relations.drop_watermark_clauses`)."""
    _drop_watermark_clauses(tree)
    return tree


#: the passes, in the order they run
PASSES: tuple[Callable[[exp.Expr, Rewrite], exp.Expr], ...] = (plan_stages, rewrite_consumers, drop_watermark_clauses)


def rewrite(tree: exp.Expr, context: Rewrite,
            passes: tuple[Callable[[exp.Expr, Rewrite], exp.Expr], ...] = PASSES) -> exp.Expr:
    """Apply `passes` to `tree` in order; the tree it ends as (a replaced root included)."""
    for rewrite_pass in passes:
        tree = rewrite_pass(tree, context)
    return tree


class StagePlan(NamedTuple):
    """A windowed SELECT as the planner sees it before Spark: taken apart, its input relation, and
    its path, or None when no path can be chosen yet (the error is raised again after Spark's
    analysis of the input, whose errors come first)."""

    ws: WindowedSelect
    rel: InputRelation
    choice: Choice | None


def describe_stage(statement: Statement, select: exp.Select, windowing: ast.Windowing,
                   forced: str | None = None) -> StagePlan:
    """The Spark-free part of planning a stage: its window function known, the SELECT taken apart
    (`windowed_select.describe`), the replayed stage it reads as emitted (`pipelines.upstream_stage`),
    its input relation (`inputs.input_relation`), its path (`path_choice.choose`; `forced`: the
    path asked for, or None for the faster).

    >>> from sqlflow.frontend import parse
    >>> s = parse("SELECT k, COUNT(*) AS n FROM t WHERE v > 0 GROUP BY k WINDOW SESSIONS(GAP 1m) ON ts")
    >>> plan = describe_stage(s, *s.windowed_selects()[0])
    >>> plan.choice.path, plan.rel.keys
    ('engine', ['__sqlflow_k0'])
    >>> describe_stage(s, *s.windowed_selects()[0], forced="native").choice.path
    'native'
    """
    check_known_window_fn(statement, windowing)
    ws = describe(statement, select, windowing)
    ws.upstream = upstream_stage(statement, ws)
    rel = input_relation(ws)
    try:
        choice: Choice | None = choose(ws, forced)
    except SqlflowError:
        choice = None
    return StagePlan(ws, rel, choice)


def native_stage(statement: Statement, number: int, select: exp.Select, windowing: ast.Windowing,
                 tree: exp.Expr) -> tuple[Any, exp.Expr]:
    """Plan a stage without Spark: rewritten natively, or a located error saying why it cannot be
    (no input types, no names of items mentioning pane columns: see `sqlflow.transpile`)."""
    from .native_rewrite import rewrite_native, why_not_native

    ws = describe(statement, select, windowing)
    why = why_not_native(ws)
    if why is not None:
        raise ws.error(SqlflowUnsupportedError, f"no native Spark SQL for {ws.label()}: {why}", "WINDOW",
                       pos=windowing.pos)
    rewrite_native(ws)
    return ws.label(), tree



def transpile(statement: Statement) -> str:
    """The whole statement as plain Spark SQL, every windowed SELECT rewritten natively (no Spark:
    types and the names of items mentioning pane columns are not checked; `sqlflow.transpile`)."""
    if statement.tree is None:
        raise ValueError("a plain statement has no windowed SELECT to rewrite")
    return to_spark_sql(rewrite(statement.tree, Rewrite(statement, native_stage)))
