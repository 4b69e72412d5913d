"""The text errors point into: offsets to 1-based (line, column), and located errors.

Positions are always relative to the whole text the user gave (a script, not one statement).

>>> src = Source("SELECT 1;\\nSELECT k FROM t GROUP BY k WINDOW GLOBL")
>>> src.position(20)
Position(line=2, column=11)
>>> print(src.error(SqlflowSyntaxError, "unknown window function GLOBL", 47, clause="WINDOW"))
sqlflow: WINDOW: unknown window function GLOBL (line 2, column 38)
  SELECT k FROM t GROUP BY k WINDOW GLOBL
                                       ^
"""
from __future__ import annotations

import bisect
import re
from typing import TypeVar

from ..ast import Position
from ..errors import SqlflowError
from ..errors import SqlflowSyntaxError  # noqa: F401  (doctest)
from .scan import blank, comment_spans

E = TypeVar("E", bound=SqlflowError)


class Source:
    """One query or script text."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._starts = [0] + [m.end() for m in re.finditer("\n", text)]
        self._code: str | None = None

    @property
    def code(self) -> str:
        """The text with its comments blanked out (same length, same line breaks): what the
        clause parser reads, so comments may appear anywhere, nested as Spark allows."""
        if self._code is None:
            self._code = blank(self.text, comment_spans(self.text))
        return self._code

    def line_column(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self._starts, offset) - 1
        return line + 1, offset - self._starts[line] + 1

    def position(self, offset: int) -> Position:
        return Position(*self.line_column(offset))

    def offset(self, line: int, column: int) -> int:
        """The offset of a 1-based (line, column)."""
        line = min(max(line, 1), len(self._starts))
        return min(self._starts[line - 1] + max(column, 1) - 1, len(self.text))

    def error(self, kind: type[E], message: str, offset: int, *,
              clause: str | None = None, hint: str | None = None) -> E:
        line, column = self.line_column(offset)
        return kind(message, clause=clause, sql=self.text, line=line, column=column, hint=hint)

    def error_at(self, kind: type[E], message: str, pos: Position | None, *,
                 clause: str | None = None, hint: str | None = None) -> E:
        """An error at an AST node's position (or unlocated if it has none)."""
        if pos is None:
            return kind(message, clause=clause, hint=hint)
        return kind(message, clause=clause, sql=self.text, line=pos.line, column=pos.column,
                    hint=hint)
