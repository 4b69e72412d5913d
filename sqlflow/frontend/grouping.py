"""Every item of a windowed SELECT is grouped or inside an aggregate (or names a pane column).

This is the one check of `validate` that depends on names: where Spark is at hand, the Spark layer
runs it after Spark resolved the query's columns (`ungrouped_item` gives the offending node, so
the caller can ask Spark about that column first), and a misspelt column gets Spark's own message.

>>> from sqlflow.frontend.statement import parse_statement
>>> s = parse_statement("SELECT user_id, COUNT(*) AS n FROM t GROUP BY usr_id WINDOW GLOBAL ON ts")
>>> (select, windowing), = s.windowed_selects()
>>> node, error = ungrouped_item(s, select, windowing)
>>> node.sql(), error.message
('user_id', 'user_id is neither in GROUP BY nor inside an aggregate')
"""
from __future__ import annotations

from sqlglot import exp

from .. import ast
from ..columns import ALL_PANE_COLUMNS, IS_RETRACTION
from ..errors import SqlflowSemanticError
from .statement import Statement

#: columns a windowed SELECT may name without grouping them: they describe the pane (semantics 4)
PANE_COLUMNS = frozenset(ALL_PANE_COLUMNS)


def ungrouped_item(statement: Statement, select: exp.Select,
                   w: ast.Windowing) -> tuple[exp.Expr, SqlflowSemanticError] | None:
    """The first column (or *) of the SELECT list that is neither grouped nor aggregated, with
    the error that says so; None when every item is fine."""
    group = select.args.get("group")
    if group is not None and group.args.get("all"):
        return None
    keys = _group_keys(select)
    retracting = w.emit is not None and w.emit.mode.retracting
    panes = PANE_COLUMNS if retracting else PANE_COLUMNS - {IS_RETRACTION}

    def error(message, node, clause="SELECT", hint=None):
        return node, statement.source.error_at(SqlflowSemanticError, message, statement.position(node) or w.pos,
                                               clause=clause, hint=hint)

    for item in select.expressions:
        for node in _ungrouped(item.this if isinstance(item, exp.Alias) else item, keys, panes):
            if isinstance(node, exp.Star):
                return select, statement.source.error_at(
                    SqlflowSemanticError, "SELECT * in a windowed SELECT", statement.position(select) or w.pos,
                    clause="SELECT", hint="select the GROUP BY keys and aggregates")
            name = node.sql(dialect="spark")
            if isinstance(node, exp.Column) and not node.table and node.name.lower() == "is_retraction":
                return error("is_retraction is a pane column only with EMIT ACCUMULATING AND RETRACTING", node,
                             hint="add EMIT ACCUMULATING AND RETRACTING, or drop is_retraction "
                                  "(without it no row is a retraction)")
            calls = [a for a in ancestors(node, select) if isinstance(a, exp.Anonymous)]
            if calls:  # maybe meant as an aggregate: say which function is not known as one
                call = calls[0].name
                return error(f"{name} is neither in GROUP BY nor inside an aggregate: {call}(...) is "
                             "not a Spark aggregate function sqlflow knows", node,
                             hint=f"check the function's name; user-defined aggregate functions are not "
                                  f"supported in a windowed SELECT (group by {name}, or aggregate it "
                                  f"with a built-in aggregate)")
            return error(f"{name} is neither in GROUP BY nor inside an aggregate", node,
                         hint=f"add it to GROUP BY or aggregate it, e.g. first({name})")
    return None


#: Spark aggregate functions that sqlglot reads as anonymous functions
SPARK_AGGREGATES = frozenset({
    "mean", "std", "every", "some", "any", "bool_and", "bool_or", "bit_and", "bit_or", "bit_xor",
    "kurtosis", "skewness", "mode", "median", "percentile", "approx_percentile", "histogram_numeric",
    "count_min_sketch", "try_avg", "try_sum", "collect_list", "collect_set", "max_by", "min_by",
    "regr_avgx", "regr_avgy", "regr_count", "regr_intercept", "regr_r2", "regr_slope", "regr_sxx",
    "regr_sxy", "regr_syy", "covar_pop", "covar_samp", "corr", "hll_sketch_agg", "hll_union_agg",
    "bitmap_construct_agg", "bitmap_or_agg", "listagg", "string_agg", "grouping", "grouping_id",
})


def is_aggregate(node: exp.Expr) -> bool:
    """An aggregate call: sqlglot's AggFunc, a Spark aggregate it does not model, or
    `agg(...) FILTER (WHERE ...)`."""
    if isinstance(node, exp.AggFunc):
        return True
    if isinstance(node, exp.Anonymous):
        return node.name.lower() in SPARK_AGGREGATES
    return isinstance(node, exp.Filter) and is_aggregate(node.this)


def ancestors(node: exp.Expr, top: exp.Expr):
    parent = node.parent
    while parent is not None and parent is not top:
        yield parent
        parent = parent.parent


def _group_keys(select: exp.Select) -> list[exp.Expr]:
    group = select.args.get("group")
    if group is None:
        return []
    keys: list[exp.Expr] = []
    for key in group.expressions:
        keys.append(key)
    for arg in ("grouping_sets", "cube", "rollup"):
        for node in group.args.get(arg) or []:
            keys.extend(n for n in node.walk() if isinstance(n, exp.Expr))
    items = select.expressions
    out = []
    for key in keys:
        out.append(key)
        if isinstance(key, exp.Literal) and not key.is_string and key.name.isdigit():
            index = int(key.name) - 1  # GROUP BY 1
            if 0 <= index < len(items):
                item = items[index]
                out.append(item.this if isinstance(item, exp.Alias) else item)
        elif isinstance(key, exp.Column) and not key.table:  # GROUP BY alias
            for item in items:
                if isinstance(item, exp.Alias) and item.alias.lower() == key.name.lower():
                    out.append(item.this)
    return out


def _same_column(a: exp.Column, b: exp.Expr) -> bool:
    """`a` is the grouped column `b`, or a field of a grouped struct (`window.start` when
    grouping by Spark's `window(ts, ...)`)."""
    if isinstance(b, exp.Anonymous):
        return bool(a.table) and a.table.lower() == b.name.lower()
    return (isinstance(b, exp.Column) and a.name.lower() == b.name.lower()
            and (not a.table or not b.table or a.table.lower() == b.table.lower()))


def _ungrouped(node: exp.Expr, keys: list[exp.Expr], panes: frozenset = PANE_COLUMNS):
    """Columns (and *) of a SELECT item that are neither grouped nor inside an aggregate
    (in text order; iterative, as `a + b + ...` can be thousands of levels deep)."""
    stack = [node]
    while stack:
        node = stack.pop()
        if any(node == key or (isinstance(node, exp.Column) and _same_column(node, key)) for key in keys):
            continue
        if is_aggregate(node) or isinstance(node, (exp.Window, exp.Subquery, exp.Query, exp.Lambda, exp.Exists)):
            continue
        if isinstance(node, exp.Star):
            yield node
        elif isinstance(node, exp.Column):
            if isinstance(node.this, exp.Star) or node.table or node.name.lower() not in panes:
                yield node
        else:
            stack.extend(reversed(list(node.iter_expressions())))
