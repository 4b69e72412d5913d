"""The input relation of a windowed SELECT: one row per input element, in the engine's columns.

It is the SELECT's own FROM, JOINs, LATERAL VIEWs and WHERE, projecting what Spark computes
before the engine (docs/semantics.md, 7): the GROUP BY keys, the argument of every aggregate,
the event time, the arrival time of a replay, a per-row session gap and each WHEN predicate.
The values are raw here (types are checked on them); `sqlflow.spark.engine_path` converts times
to microseconds.

>>> from sqlflow.frontend import parse
>>> from sqlflow.plan.windowed_select import describe
>>> s = parse("WITH c AS (SELECT * FROM clicks) SELECT `user id`, SUM(amount * 2) AS total "
...           "FROM c WHERE amount > 0 GROUP BY `user id` WINDOW FIXED(SIZE 1h) ON ts "
...           "TRIGGER REPEAT(WHEN(kind = 'flush'))")
>>> rel = input_relation(describe(s, *s.windowed_selects()[0]))
>>> print(rel.sql())
WITH c AS (SELECT * FROM clicks) SELECT `user id` AS __sqlflow_k0, amount * 2 AS __sqlflow_a0, ts AS __sqlflow_et, kind = 'flush' AS __sqlflow_when0 FROM c WHERE amount > 0
>>> rel.call_args
['__sqlflow_a0']
"""
from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from .. import ast
from ..columns import ARRIVAL_TIME, EVENT_TIME, GAP, PARTITION, SOURCE, arg_column, key_column, when_column
from ..engine import when_predicates
from .relations import probe_select, to_spark_sql
from .windowed_select import WindowedSelect, parse_column


@dataclass
class InputRelation:
    """The input rows of one windowed SELECT, as a query, and the meaning of its columns."""

    query: exp.Select
    keys: list[str]
    call_args: list[str | None]                 # per aggregate call: its argument column
    arg_exprs: dict[str, exp.Expr] = field(default_factory=dict)   # argument column -> expression
    replay: bool = False
    gap: bool = False
    n_when: int = 0

    def sql(self) -> str:
        return to_spark_sql(self.query)

    @property
    def args(self) -> list[str]:
        return list(self.arg_exprs)


def input_relation(ws: WindowedSelect) -> InputRelation:
    """The query of the windowed SELECT's input rows (with the CTEs it can see)."""
    select = ws.select
    items: list[exp.Expr] = []
    keys = []
    for i, key in enumerate(ws.keys):
        keys.append(key_column(i))
        items.append(exp.alias_(key.copy(), key_column(i)))
    call_args: list[str | None] = []
    arg_exprs: dict[str, exp.Expr] = {}
    for call in ws.calls:
        if call.arg is None:
            call_args.append(None)
            continue
        name = next((n for n, e in arg_exprs.items() if e == call.arg), None)
        if name is None:
            name = arg_column(len(arg_exprs))
            arg_exprs[name] = call.arg
            items.append(exp.alias_(call.arg.copy(), name))
        call_args.append(name)
    items.append(exp.alias_(ws.event_time.copy(), EVENT_TIME))
    arrival = ws.arrival
    if ws.replay and arrival is not None:
        items.append(exp.alias_(arrival, ARRIVAL_TIME))
    fn = ws.window
    gap = isinstance(fn, ast.Sessions) and isinstance(fn.gap, ast.SqlExpr)
    if isinstance(fn, ast.Sessions) and isinstance(fn.gap, ast.SqlExpr):
        items.append(exp.alias_(parse_column(fn.gap.sql), GAP))
    predicates = when_predicates(ws.windowing.effective_trigger)
    for i, predicate in enumerate(predicates):
        items.append(exp.alias_(parse_column(predicate.sql), when_column(i)))
    query = probe_select(select, items, hint=True)
    return InputRelation(query, keys, call_args, arg_exprs, ws.replay, gap, len(predicates))


#: meta markers on the user's tree while `tagged_relation` copies it (removed after)
_SOURCE_MARK, _BRANCH_MARK = "sqlflow_source_index", "sqlflow_branch_index"


def tagged_relation(ws: WindowedSelect, sources, tags: list[exp.Expr], relations=None,
                    partitions: list[exp.Expr] | None = None) -> InputRelation:
    """`input_relation(ws)` whose rows carry their source's tag in column SOURCE: `sources` are
    the branches of a UNION ALL, one watermarked source each (docs/semantics.md, 9), and the
    SELECT list of source i's branch gets `tags[i] AS SOURCE`; `relations[i]`, when given,
    replaces source i's relation (a stream's watermarked view); `partitions[i]`, when given, is
    source i's rows' partition, column PARTITION (docs/semantics.md 1.2). The columns reach the window
    through the UNION ALL and `SELECT *`; a SELECT list in between that leaves it out makes
    Spark's analysis fail on it."""
    for i, s in enumerate(sources):
        s.node.meta[_SOURCE_MARK] = i
        s.node.find_ancestor(exp.Select).meta[_BRANCH_MARK] = i
    try:
        rel = input_relation(ws)
    finally:
        for s in sources:
            s.node.meta.pop(_SOURCE_MARK, None)
            s.node.find_ancestor(exp.Select).meta.pop(_BRANCH_MARK, None)
    for node in list(rel.query.walk()):
        if not node._meta:
            continue
        i = node.meta.pop(_SOURCE_MARK, None)
        if i is not None and relations is not None:
            node.replace(relations[i])
        i = node.meta.pop(_BRANCH_MARK, None)
        if i is not None:
            tagged = [exp.alias_(tags[i], SOURCE)]
            if partitions is not None:
                tagged.append(exp.alias_(partitions[i], PARTITION))
            node.set("expressions", [*node.expressions, *tagged])
    rel.query.set("expressions", [*rel.query.expressions, exp.column(SOURCE),
                                  *([exp.column(PARTITION)] if partitions is not None else [])])
    return rel
