"""Query parameters (`spark.sql(q, args=...)`) across the several queries sqlflow runs.

A statement with windowed SELECTs becomes several Spark queries (input relations, the final
statement), each holding only some of the parameter markers. Named markers (`:x`) bind by name
in each of them (Spark ignores unused names); positional markers (`?`) are renamed, in the
order they are written, to named ones (`:__sqlflow_p0`, ...).

>>> from sqlflow.frontend import parse
>>> s = parse("WITH c AS (SELECT * FROM t WHERE a = ?) SELECT k, SUM(v) FROM c WHERE b = ? "
...           "GROUP BY k WINDOW FIXED(SIZE 1m) ON ts")
>>> args = named_parameters(s.tree, [1, 2])
>>> args
{'__sqlflow_p0': 1, '__sqlflow_p1': 2}
>>> print(s.tree.sql())
WITH c AS (SELECT * FROM t WHERE a = :__sqlflow_p0) SELECT k, SUM(v) FROM c WHERE b = :__sqlflow_p1 GROUP BY k
"""
from __future__ import annotations

import re

from sqlglot import exp

from ..errors import SqlflowError

PREFIX = "__sqlflow_p"


def clause_expressions(statement):
    """(SQL expression, clause) of sqlflow's clauses that hold Spark SQL: WHEN predicates and
    per-row session gaps (they are not part of the statement's SQL tree)."""
    from .. import ast

    for _, windowing in statement.windowed_selects():
        fn = windowing.window.fn
        if isinstance(fn, ast.Sessions) and isinstance(fn.gap, ast.SqlExpr):
            yield fn.gap, "WINDOW"
        for trigger in ast.walk_triggers(windowing.effective_trigger):
            if isinstance(trigger, ast.When):
                yield trigger.predicate, "TRIGGER"


def check_clause_markers(statement) -> None:
    """Positional markers (`?`) are numbered in the SQL tree, which does not hold sqlflow's
    clauses: a `?` in a WHEN predicate or a session GAP is a located error (named ones work)."""
    from .windowed_select import parse_column

    for expr, clause in clause_expressions(statement):
        if any(isinstance(n, exp.Placeholder) and not n.this for n in parse_column(expr.sql).walk()):
            raise statement.source.error_at(
                SqlflowError, f"a positional parameter (?) in {clause} is not supported", expr.pos,
                clause=clause, hint="use named parameters there (:name, with args as a dict)")


def named_parameters(tree: exp.Expr, args, statement=None):
    """Rename the positional markers of `tree` in place and return args as a dict (or None).
    With `statement`, a positional marker in one of its sqlflow clauses is refused first."""
    if args is None:
        return None
    if isinstance(args, dict):
        return dict(args)
    if statement is not None:
        check_clause_markers(statement)
    values = list(args)
    markers = [n for n in tree.walk() if isinstance(n, exp.Placeholder) and not n.this]
    # number the markers in tree order, then read the text order back from the printed SQL
    for i, marker in enumerate(markers):
        marker.set("this", f"__sqlflow_tmp{i}")
    from ..frontend.statement import DIALECT

    printed = tree.sql(dialect=DIALECT)
    order = [int(m) for m in re.findall(r":__sqlflow_tmp(\d+)", printed)]
    for position, i in enumerate(order):
        markers[i].set("this", f"{PREFIX}{position}")
    if len(values) != len(markers):
        raise SqlflowError(f"the query has {len(markers)} positional parameters (?) but args has {len(values)} values",
                           clause="SQL")
    return {f"{PREFIX}{i}": value for i, value in enumerate(values)}
