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

from ..errors import SqlflowSyntaxError
from .scan import split_statements
from .source import Source
from .statement import DIALECT, Statement, parse_statement
from .validate import validate


def parse(sql: str) -> Statement:
    """One statement (a trailing `;` is allowed), checked with validate(streaming=False).

    A statement without sqlflow clauses is plain Spark SQL: it parses even when sqlglot cannot
    read it, and `statement.sql` is exactly `sql`.
    """
    source = Source(sql)
    spans = split_statements(sql)
    if not spans:
        raise SqlflowSyntaxError("there is no statement to parse", sql=sql, line=1, column=1)
    if len(spans) > 1:
        raise source.error(SqlflowSyntaxError, f"expected one statement, found {len(spans)}",
                           spans[1][0], hint="use parse_script for several statements")
    statement = parse_statement(sql, source, *spans[0])
    validate(statement, streaming=False)
    return statement


def parse_script(text: str) -> list[Statement]:
    """The `;`-separated statements of a script; error positions are in the whole script."""
    source = Source(text)
    statements = []
    for start, end in split_statements(text):
        statement = parse_statement(text[start:end], source, start, end)
        validate(statement, streaming=False)
        statements.append(statement)
    return statements


def to_sql(statement: Statement, *, pretty: bool = False) -> str:
    """Canonical SQL of a statement, our clauses included; a plain statement's own text."""
    if statement.is_plain:
        return statement.sql
    return statement.tree.sql(dialect=DIALECT, pretty=pretty)
