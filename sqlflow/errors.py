"""One error hierarchy for everything sqlflow reports to users.

Every error names the clause it concerns and, when it comes from query text, the line and
column, and renders the offending line with a caret under the position:

>>> e = SqlflowSyntaxError("expected a duration", clause="WINDOW", sql="SELECT 1\\nWINDOW FIXED(SIZE x)", line=2, column=19)
>>> print(e)
sqlflow: WINDOW: expected a duration (line 2, column 19)
  WINDOW FIXED(SIZE x)
                    ^
"""
from __future__ import annotations

import re


#: characters a terminal does not show as one column: tabs, line breaks other than "\n", and lone
#: surrogates (which no terminal encoding can even print)
_ONE_COLUMN = re.compile("[\t\r\v\f\x1c-\x1e\x85\u2028\u2029\ud800-\udfff]")


class SqlflowError(Exception):
    """Base class of all sqlflow errors.

    `clause` is the clause the error concerns (WINDOW, TRIGGER, EMIT, ALLOWED LATENESS,
    WATERMARK, SELECT, ...). `line` and `column` are 1-based positions in `sql`.
    """

    #: how the rendered message starts; Spark's own errors, which sqlflow only locates in a
    #: script (sqlflow.interfaces.statements), keep Spark's words without it
    prefix = "sqlflow: "
    #: for an error of Spark's that sqlflow located (an analysis error of the generated SQL):
    #: Spark's error class (condition) and SQLSTATE, as PySparkException's getCondition() and
    #: getSqlState() give them
    spark_error_class: str | None = None
    spark_sql_state: str | None = None

    def __init__(
        self,
        message: str,
        *,
        clause: str | None = None,
        sql: str | None = None,
        line: int | None = None,
        column: int | None = None,
        hint: str | None = None,
    ) -> None:
        self.message = message
        self.clause = clause
        self.sql = sql
        self.line = line
        self.column = column
        self.hint = hint
        super().__init__(self._render())

    def with_location(self, *, sql: str | None = None, line: int | None = None,
                      column: int | None = None, clause: str | None = None) -> "SqlflowError":
        """A copy of this error with location details filled in where missing."""
        return type(self)(
            self.message,
            clause=self.clause or clause,
            sql=self.sql if self.sql is not None else sql,
            line=self.line if self.line is not None else line,
            column=self.column if self.column is not None else column,
            hint=self.hint,
        )

    def _render(self) -> str:
        head = self.prefix
        if self.clause:
            head += f"{self.clause}: "
        head += self.message
        if self.line is not None:
            head += f" (line {self.line}, column {self.column})"
        parts = [head]
        if self.sql is not None and self.line is not None:
            # lines end at "\n" only, as positions count them (and Spark does); the echoed line
            # shows one column per character, so the caret lines up
            lines = self.sql.split("\n")
            if 1 <= self.line <= len(lines):
                text = _ONE_COLUMN.sub(" ", lines[self.line - 1].rstrip("\r"))
                parts.append("  " + text)
                if self.column is not None:
                    parts.append("  " + " " * max(self.column - 1, 0) + "^")
        if self.hint:
            parts.append(self.hint)
        return "\n".join(parts)

    def __str__(self) -> str:  # keep str() in sync if attributes are edited
        return self._render()

    def _render_traceback_(self) -> list[str]:
        """What IPython shows instead of a traceback: the located message is the whole story
        (the frames inside sqlflow and Spark tell a user nothing)."""
        return self._render().splitlines()


class SqlflowSyntaxError(SqlflowError):
    """The query text does not follow the grammar."""


class SqlflowSemanticError(SqlflowError):
    """The query parses but means nothing sensible (zero durations, a trigger that can never fire...)."""


class SqlflowAnalysisError(SqlflowError):
    """Spark could not analyse the query (missing table or column, type mismatch)."""


class SqlflowUnsupportedError(SqlflowError):
    """The query is valid but asks for something this execution path cannot do."""


class SqlflowExecutionError(SqlflowError):
    """Running the query failed (bad input data, a failing user window function...)."""
