"""Relations cut out of a statement so that Spark can run them on their own.

A windowed SELECT's input (its FROM, JOINs and WHERE) or a watermarked source is run by Spark
apart from the rest of the statement: it must see the CTEs visible where it was written, and
must not carry sqlflow's clauses (Spark cannot read them).

>>> from sqlflow.frontend import parse
>>> s = parse("WITH a AS (SELECT * FROM t), b AS (SELECT k, COUNT(*) AS n FROM a GROUP BY k "
...           "WINDOW GLOBAL ON ts), c AS (SELECT 1) SELECT * FROM b")
>>> select, _ = s.windowed_selects()[0]
>>> [cte.alias for cte in visible_ctes(select)]
['a']
>>> to_spark_sql(with_ctes(exp.select("*").from_("a"), visible_ctes(select)))
'WITH a AS (SELECT * FROM t) SELECT * FROM a'
"""
from __future__ import annotations

from typing import TypeVar

from sqlglot import exp

from ..frontend.dialect import WATERMARK_KEY, WINDOWING_KEY
from ..frontend.statement import DIALECT

SQLFLOW_KEYS = (WATERMARK_KEY, WINDOWING_KEY)


E = TypeVar("E", bound=exp.Expr)


def quoted(name: str) -> str:
    """A column name as Spark SQL text (backquoted, its backquotes doubled): where a statement's
    pieces are built as SQL text, one round trip to the JVM, instead of `pyspark.sql.functions`
    calls, a dozen each.

    >>> quoted("a`b")
    '`a``b`'
    """
    return "`" + name.replace("`", "``") + "`"


def strip_clauses(node: E) -> E:
    """A copy of `node` without sqlflow clauses attached (Spark reads what is left)."""
    copy = node.copy()
    for child in copy.walk():
        if child._meta:
            for key in SQLFLOW_KEYS:
                child.meta.pop(key, None)
    return copy


def drop_watermark_clauses(tree: exp.Expr) -> None:
    """Remove every source WATERMARK clause in place: on bounded data a plain SELECT does not
    depend on it, and Spark cannot read sqlflow's forms (PERFECT, TIMELINE, ARRIVAL)."""
    for node in tree.walk():
        if node._meta:
            node.meta.pop(WATERMARK_KEY, None)


def visible_ctes(node: exp.Expr) -> list[exp.CTE]:
    """The CTEs a relation written at `node` can name, outermost first; an inner CTE hides an
    outer one of the same name, and a CTE sees only the CTEs defined before it."""
    scopes: list[list[exp.CTE]] = []  # innermost first
    own = node.args.get("with_") if isinstance(node, exp.Query) else None
    if own is not None:
        scopes.append(list(own.expressions))
    child = node
    while child.parent is not None:
        parent = child.parent
        if isinstance(parent, exp.With):
            ctes = list(parent.expressions)
            inside = next((i for i, cte in enumerate(ctes) if cte is child), len(ctes))
            scopes.append(ctes[:inside])
            child = parent.parent if parent.parent is not None else parent  # the query owning the WITH
            continue
        with_ = parent.args.get("with_") if isinstance(parent, exp.Query) else None
        if with_ is not None:
            scopes.append(list(with_.expressions))
        child = parent
    seen: set[str] = set()
    out: list[exp.CTE] = []
    for ctes in scopes:  # innermost first
        for cte in reversed(ctes):
            name = cte.alias_or_name.lower()
            if name not in seen:
                seen.add(name)
                out.append(cte)
    out.reverse()
    return out


def with_ctes(query: exp.Query, ctes: list[exp.CTE]) -> exp.Query:
    """`query` with these CTEs (copied, without sqlflow clauses) in front of it."""
    if not ctes:
        return query
    query.set("with_", exp.With(expressions=[strip_clauses(cte) for cte in ctes]))
    return query


def probe_select(select: exp.Select, items: list[exp.Expr], *, hint: bool = False) -> exp.Select:
    """A SELECT of `items` over the input of `select`: its FROM, JOINs, LATERAL VIEWs, WHERE (and
    its hint, with `hint`), without sqlflow clauses, under the CTEs visible there. What Spark runs
    apart from the statement to learn of that input (its rows, a type, a resolved name).

    >>> from sqlflow.frontend import parse
    >>> s = parse("WITH a AS (SELECT * FROM t) SELECT k, COUNT(*) FROM a WHERE v > 0 GROUP BY k "
    ...           "WINDOW GLOBAL ON ts")
    >>> to_spark_sql(probe_select(s.windowed_selects()[0][0], [exp.column("k")]))
    'WITH a AS (SELECT * FROM t) SELECT k FROM a WHERE v > 0'
    """
    query = exp.Select(expressions=items)
    for arg in ("from_", "joins", "laterals", "where") + (("hint",) if hint else ()):
        value = select.args.get(arg)
        if value is not None:
            query.set(arg, [strip_clauses(v) for v in value] if isinstance(value, list) else strip_clauses(value))
    with_ctes(query, visible_ctes(select))
    return query


def source_select(node: exp.Expr, items: list[exp.Expr], *, alias: bool = True) -> exp.Query:
    """A SELECT of `items` over the relation `node` alone (a watermarked source, without sqlflow
    clauses; without its alias unless `alias`), under the CTEs visible where it was written.

    >>> from sqlflow.frontend import parse
    >>> s = parse("WITH a AS (SELECT * FROM t) SELECT k, COUNT(*) FROM a WATERMARK ts DELAY OF 1m AS x "
    ...           "GROUP BY k WINDOW GLOBAL ON ts")
    >>> node = s.source_watermarks()[0][0]
    >>> to_spark_sql(source_select(node, [exp.column("ts")])), to_spark_sql(source_select(node, [exp.Star()], alias=False))
    ('WITH a AS (SELECT * FROM t) SELECT ts FROM a AS x', 'WITH a AS (SELECT * FROM t) SELECT * FROM a')
    """
    relation = strip_clauses(node)
    if not alias:
        relation.set("alias", None)
    query = exp.Select(expressions=items)
    query.set("from_", exp.From(this=relation))
    return with_ctes(query, visible_ctes(node))


def to_spark_sql(node: exp.Expr, pretty: bool = False) -> str:
    """Spark SQL text of a tree without sqlflow clauses."""
    return strip_clauses(node).sql(dialect=DIALECT, pretty=pretty)


def named_relations(tree: exp.Expr) -> dict[str, list[exp.Table]]:
    """The relations of `tree` that name a table or view by an unqualified name (not a CTE, not a
    streaming relation `STREAM t`, not a table function), grouped by lower-case name.

    >>> from sqlflow.frontend import parse
    >>> s = parse("WITH c AS (SELECT * FROM t) SELECT * FROM c JOIN T AS x ON c.k = x.k "
    ...           "JOIN db.u ON TRUE JOIN STREAM s ON TRUE WHERE c.k IN (SELECT k FROM v)")
    >>> {name: len(tables) for name, tables in named_relations(s.tree).items()}
    {'t': 2, 'v': 1}
    """
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    out: dict[str, list[exp.Table]] = {}
    for node in tree.find_all(exp.Table):
        if (not isinstance(node.this, exp.Identifier) or node.args.get("db") is not None
                or node.args.get("catalog") is not None or isinstance(node.parent, exp.Stream)):
            continue
        name = node.name.lower()
        if name not in ctes:
            out.setdefault(name, []).append(node)
    return out


def rename_relation(node: exp.Table, name: str) -> None:
    """Point `node` at relation `name`, keeping what it was called (its alias, else its old name:
    columns qualified by it still resolve, and Spark's messages name it), and where it was
    written (its identifier stays, for error positions).

    >>> t = exp.to_table("events")
    >>> rename_relation(t, "frozen_1"); t.sql()
    'frozen_1 AS events'
    """
    ident = node.this
    alias = node.args.get("alias")
    if alias is None or alias.this is None:
        node.set("alias", exp.TableAlias(this=exp.to_identifier(ident.this, quoted=ident.quoted)))
    ident.set("this", name)
    ident.set("quoted", False)


def replace_select(tree: exp.Expr, old: exp.Select, new: exp.Select) -> exp.Expr:
    """`tree` with the SELECT `old` replaced by `new` (in place); `new` when `old` is the root.

    >>> import sqlglot
    >>> tree = sqlglot.parse_one("SELECT * FROM (SELECT 1) AS s")
    >>> replace_select(tree, tree.find(exp.Subquery).this, exp.select("2")).sql()
    'SELECT * FROM (SELECT 2) AS s'
    >>> replace_select(tree, tree, exp.select("3")).sql()
    'SELECT 3'
    """
    if old is tree:
        return new
    old.replace(new)
    return tree
