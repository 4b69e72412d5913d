"""Spark SQL expressions inside our clauses (`WHEN(<predicate>)`, `SESSIONS(GAP <expression>)`).

They are parsed with sqlglot and kept as canonical Spark SQL text (`ast.SqlExpr`), so the AST
never holds sqlglot objects.

>>> canonical("event_type='flush'  AND  x>1")
"event_type = 'flush' AND x > 1"
"""
from __future__ import annotations

from sqlglot import exp
from sqlglot.errors import ParseError, SqlglotError

from ..errors import SqlflowSyntaxError
from .dialect import SqlflowSpark
from .source import Source

_DIALECT = SqlflowSpark()


class SqlExprError(ValueError):
    """An embedded expression that is not one Spark SQL expression; `offset` is in its text."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


def parse_expression(text: str) -> exp.Expr:
    """The sqlglot tree of one Spark SQL expression (raises SqlExprError)."""
    try:
        trees = _DIALECT.parse(text)
    except ParseError as error:
        token = getattr(error, "sqlflow_token", None)
        detail = error.errors[0]["description"] if error.errors else str(error)
        raise SqlExprError(sqlglot_words(detail, token.text if token else ""),
                           token.start if token else 0) from None
    except RecursionError:
        raise SqlExprError("it is nested too deeply", 0) from None
    except (SqlglotError, ValueError) as error:
        raise SqlExprError(str(error).splitlines()[0], 0) from None
    trees = [t for t in trees if t is not None]
    if len(trees) != 1:
        raise SqlExprError("expected one expression", 0)
    tree = trees[0]
    if isinstance(tree, exp.Alias):
        alias = tree.args["alias"]
        offset = alias.meta.get("start", text.rfind(alias.name)) if alias else 0
        raise SqlExprError(f"unexpected '{alias.name}' after the expression", max(offset, 0))
    if isinstance(tree, (exp.Query, exp.Command)) or not isinstance(tree, exp.Expr) \
            or isinstance(tree, (exp.DDL, exp.DML)):
        raise SqlExprError("expected an expression, not a statement", 0)
    return tree


def canonical(text: str) -> str:
    """Canonical Spark SQL text of one expression (raises SqlExprError).

    The canonical text must read back to itself (what makes parse(to_sql(s)) == s): sqlglot
    reads some malformed text leniently (`INTERVAL 30 MIN 1 UTES`) and prints what it cannot
    read again.
    """
    out = _print(parse_expression(text))
    try:
        again = _print(parse_expression(out))
    except SqlExprError:
        again = None
    if again != out:
        raise SqlExprError("it is not well-formed Spark SQL", 0)
    return out


def _print(tree: exp.Expr) -> str:
    try:
        return tree.sql(dialect=_DIALECT, comments=False)
    except RecursionError:
        raise SqlExprError("it is nested too deeply", 0) from None


def located(text: str, offset: int, source: Source, clause: str, what: str) -> str:
    """canonical(text), with errors located at `offset` (where `text` starts) in `source`."""
    try:
        return canonical(text)
    except SqlExprError as error:
        raise source.error(SqlflowSyntaxError, f"cannot read {what}: {error}",
                           offset + error.offset, clause=clause) from None


def sqlglot_words(description: str, got: str) -> str:
    """sqlglot's description of a parse error, worded like ours."""
    description = description.strip().rstrip(".")
    got_text = f"'{got}'" if got else "the end of the statement"
    if description.startswith("Expecting "):
        return f"expected {description[len('Expecting '):]}, got {got_text}"
    if description.startswith("Invalid expression / Unexpected token"):
        return f"unexpected {got_text}"
    if description.startswith("Required keyword"):
        return f"incomplete expression at {got_text}"
    return description[:1].lower() + description[1:] + (f", at {got_text}" if got else "")
