"""The windowed SELECT rewritten over its panes: what Spark computes after the engine.

The panes relation has one column per GROUP BY key (`__sqlflow_k0`...), one per aggregate call
(`__sqlflow_agg0`...) and the pane columns. The SELECT list, HAVING (as a WHERE), QUALIFY,
ORDER BY, LIMIT and named windows of the original SELECT are kept, with every key and aggregate
call replaced by its column; each item keeps the name Spark would have given it, and the pane
columns the SELECT does not name come last.

>>> from sqlflow.frontend import parse
>>> from sqlflow.plan.windowed_select import describe
>>> s = parse("SELECT t.k, SUM(v) / COUNT(*) AS mean, window_end FROM t GROUP BY k "
...           "HAVING mean > 1 AND MAX(v) < 9 WINDOW FIXED(SIZE 1m) ON ts ORDER BY SUM(v) DESC LIMIT 3")
>>> ws = describe(s, *s.windowed_selects()[0])
>>> from sqlflow.plan.relations import to_spark_sql
>>> print(to_spark_sql(panes_select(ws, "panes", ["k", "mean", "window_end"])))
SELECT __sqlflow_k0 AS `k`, __sqlflow_agg0 / __sqlflow_agg1 AS mean, window_end, window_start, pane_index, pane_timing, is_last, emit_time, output_time FROM panes WHERE (__sqlflow_agg0 / __sqlflow_agg1) > 1 AND __sqlflow_agg2 < 9 ORDER BY __sqlflow_agg0 DESC LIMIT 3
"""
from __future__ import annotations

from sqlglot import exp

from ..columns import agg_column, key_column, pane_columns
from .aggregate_calls import is_aggregate_call
from .windowed_select import WindowedSelect, is_pane_ref, matches_key


def replace_keys_and_calls(ws: WindowedSelect, node: exp.Expr) -> exp.Expr:
    """`node` with every aggregate call and GROUP BY key replaced by its panes column."""

    def swap(n: exp.Expr) -> exp.Expr:
        if is_aggregate_call(n):
            for j, call in enumerate(ws.calls):
                if n == call.node:
                    return exp.column(agg_column(j))
            return n
        if isinstance(n, (exp.Column, exp.Expr)) and not isinstance(n, (exp.Identifier, exp.Literal, exp.Star)):
            for i, key in enumerate(ws.keys):
                if matches_key(n, key):
                    return exp.column(key_column(i))
        return n

    return node.transform(swap)


def _resolve_aliases(ws: WindowedSelect, node: exp.Expr) -> exp.Expr:
    """HAVING may name SELECT aliases; over the panes it becomes a WHERE, which cannot."""
    aliases = {item.alias.lower(): item.this for item in ws.select.expressions if isinstance(item, exp.Alias)}

    def swap(n: exp.Expr) -> exp.Expr:
        if (isinstance(n, exp.Column) and not n.table and isinstance(n.this, exp.Identifier)
                and n.name.lower() in aliases and not is_pane_ref(n)
                and not any(matches_key(n, key) for key in ws.keys)):
            return exp.Paren(this=aliases[n.name.lower()].copy())
        return n

    return node.transform(swap)


def panes_select(ws: WindowedSelect, relation: str | exp.Expr, names: list[str]) -> exp.Select:
    """The SELECT over the panes `relation` (a view name or a relation node) that replaces the
    windowed SELECT; `names[i]` is the output name of item i (Spark's name when unaliased)."""
    select = ws.select
    items = []
    present = set()
    for i, item in enumerate(select.expressions):
        if isinstance(item, exp.Alias):
            new = exp.alias_(replace_keys_and_calls(ws, item.this.copy()), item.args["alias"].copy())
            present.add(item.alias.lower())
        else:
            replaced = replace_keys_and_calls(ws, item.copy())
            name = names[i]
            same = isinstance(replaced, exp.Column) and not replaced.table and replaced.name == name
            new = replaced if same else exp.alias_(replaced, name, quoted=True)
            present.add(name.lower())
        items.append(new)
    for column in pane_columns(ws.windowing.mode.retracting):
        if column not in present:
            items.append(exp.column(column))
    out = exp.Select(expressions=items)
    out.set("from_", exp.From(this=exp.to_table(relation) if isinstance(relation, str) else relation))
    having = select.args.get("having")
    if having is not None:
        out.set("where", exp.Where(this=replace_keys_and_calls(ws, _resolve_aliases(ws, having.this.copy()))))
    for arg in ("qualify", "order", "distinct", "limit", "offset", "windows", "with_"):
        value = select.args.get(arg)
        if value is None:
            continue
        if arg in ("qualify", "order"):
            value = replace_keys_and_calls(ws, value.copy())
        elif arg == "windows":
            value = [replace_keys_and_calls(ws, w.copy()) for w in value]
        else:
            value = value.copy()
        out.set(arg, value)
    return out
