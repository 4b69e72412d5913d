"""The frontend's entry points: parse a query or a script, print a statement back.

>>> s = parse('''SELECT user_id, SUM(amount) AS total
... FROM events WATERMARK event_time DELAY OF INTERVAL 5 MINUTES
... GROUP BY user_id
... WINDOW SESSIONS(GAP 30m)
... TRIGGER SEQUENCE(REPEAT_UNTIL(PERIOD 1m, WATERMARK), REPEAT(WATERMARK))
... EMIT ACCUMULATING AND RETRACTING''')
>>> print(to_sql(s))
SELECT user_id, SUM(amount) AS total FROM events WATERMARK event_time DELAY OF INTERVAL 5 MINUTES GROUP BY user_id WINDOW SESSIONS(GAP 30m) TRIGGER SEQUENCE(REPEAT_UNTIL(PERIOD 1m, WATERMARK), REPEAT(WATERMARK)) EMIT ACCUMULATING AND RETRACTING
>>> parse(to_sql(s)) == s
True
>>> [st.is_plain for st in parse_script("SELECT 1; SELECT k, count(*) FROM t GROUP BY k WINDOW GLOBAL ON ts")]
[True, False]
"""
from __future__ import annotations

import re

from ..errors import SqlflowSyntaxError
from .scan import split_statements, unterminated
from .source import Source
from .statement import DIALECT, UNTERMINATED_COMMENT_HINT, Statement, parse_statement
from .validate import validate


def parse(sql: str) -> Statement:
    """One statement (a trailing `;` is allowed), checked with validate(streaming=False).

    A statement without sqlflow clauses is plain Spark SQL: it parses even when sqlglot cannot
    read it, and `statement.sql` is exactly `sql`.
    """
    source = Source(sql)
    check_encodable(source)
    spans = split_statements(sql)
    _check_comment_after(source, spans)
    if not spans:
        raise SqlflowSyntaxError("there is no statement to parse", sql=sql, line=1, column=1)
    if len(spans) > 1:
        raise source.error(SqlflowSyntaxError, f"expected one statement, found {len(spans)}",
                           spans[1][0], hint="use parse_script for several statements")
    statement = parse_statement(sql, source, *spans[0])
    validate(statement, streaming=False)
    return statement


def parse_script(text: str, *, grouping: bool = True) -> list[Statement]:
    """The `;`-separated statements of a script; error positions are in the whole script.

    `grouping=False` leaves the check that every item is grouped or aggregated to the caller
    (see `validate`): the Spark layer runs it after Spark resolved the names."""
    source = Source(text)
    check_encodable(source)
    spans = split_statements(text)
    _check_comment_after(source, spans)
    statements = []
    for start, end in spans:
        statement = parse_statement(text[start:end], source, start, end)
        validate(statement, streaming=False, grouping=grouping)
        statements.append(statement)
    return statements


#: a UTF-16 surrogate on its own: Python strings can hold one, Unicode text (and so Spark) cannot
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def check_encodable(source: Source) -> None:
    """Text Spark can read: a lone surrogate (`'\\ud800'`, e.g. from a bad decode) cannot be sent
    to the JVM (py4j would fail with a raw error), so it is refused where it stands.

    >>> check_encodable(Source("SELECT 'a\\ud800'"))
    Traceback (most recent call last):
    ...
    sqlflow.errors.SqlflowSyntaxError: sqlflow: SQL: the text holds a lone surrogate U+D800, which is not Unicode text (line 1, column 10)
      SELECT 'a '
               ^
    remove it, or decode the text it came from with errors='replace'
    """
    found = LONE_SURROGATE.search(source.text)
    if found is not None:
        raise source.error(SqlflowSyntaxError, f"the text holds a lone surrogate U+{ord(found.group()):04X}, "
                           "which is not Unicode text", found.start(), clause="SQL",
                           hint="remove it, or decode the text it came from with errors='replace'")


def _check_comment_after(source: Source, spans: list[tuple[int, int]]) -> None:
    """A `/*` left open after the last statement would vanish with the empty statement it is in."""
    tok = unterminated(source.text, spans[-1][1] if spans else 0)
    if tok is not None:
        raise source.error(SqlflowSyntaxError, "unterminated comment", tok.start, clause="SQL",
                           hint=UNTERMINATED_COMMENT_HINT)


def to_sql(statement: Statement, *, pretty: bool = False) -> str:
    """Canonical SQL of a statement, our clauses included; a plain statement's own text."""
    if statement.is_plain:
        return statement.sql
    assert statement.tree is not None  # a statement with sqlflow clauses was read by sqlglot
    return statement.tree.sql(dialect=DIALECT, pretty=pretty)
