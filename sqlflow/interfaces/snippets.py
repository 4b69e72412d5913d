"""Saved queries a `%%sqlflow` cell composes, as jupysql's `--save` / `--with` do.

`%%sqlflow --save clean` keeps the cell's query under the name `clean`; a later query that
reads `clean` (in FROM or a join) gets it as a common table expression, `WITH clean AS (...)`,
and so do the snippets `clean` itself reads. `--with NAME` asks for a snippet explicitly.
Being a CTE, a saved windowed SELECT is a pipeline stage: a query over it reads its panes as
its accumulation mode means (docs/pipelines.md).

The CTEs go on the statement's first line, one line each, so the lines of the cell keep their
numbers in errors.

>>> s = Snippets()
>>> s.save("big", "SELECT * FROM t -- rows\\nWHERE v > 10")
>>> s.save("keys", "SELECT DISTINCT k FROM big")
>>> s.compose("SELECT COUNT(*) FROM keys")
'WITH big AS (SELECT * FROM t WHERE v > 10), keys AS (SELECT DISTINCT k FROM big) SELECT COUNT(*) FROM keys'
>>> s.compose("WITH x AS (SELECT 1) SELECT * FROM x JOIN big")
'WITH big AS (SELECT * FROM t WHERE v > 10), x AS (SELECT 1) SELECT * FROM x JOIN big'
>>> s.compose("SELECT 1")
'SELECT 1'
"""
from __future__ import annotations

#: statements a snippet can be saved from and composed into (queries)
QUERY_STARTS = frozenset({"SELECT", "WITH", "FROM", "VALUES", "TABLE"})


class Snippets:
    """Saved queries by name (case-insensitive, as Spark's names are)."""

    def __init__(self) -> None:
        self._saved: dict[str, tuple[str, str]] = {}   # lower name -> (name, SQL)

    def names(self) -> list[str]:
        return [name for name, _ in self._saved.values()]

    def get(self, name: str) -> str | None:
        found = self._saved.get(name.lower())
        return found[1] if found else None

    def save(self, name: str, sql: str) -> None:
        """Keep `sql` (a query) as `name`, replacing a snippet of that name."""
        self._saved[name.lower()] = (name, sql.strip().rstrip(";").strip())

    def delete(self, name: str) -> bool:
        return self._saved.pop(name.lower(), None) is not None

    def compose(self, sql: str, with_: tuple[str, ...] = ()) -> str:
        """`sql` with the snippets it reads (and those they read, and `with_`) as CTEs in front,
        each before the snippets that read it. Statements other than queries are left alone."""
        from ..frontend.scan import scan

        tokens = scan(sql)
        if not tokens or tokens[0].upper not in QUERY_STARTS:
            return sql
        order: list[str] = []
        for name in [*with_, *self._read_by(sql)]:
            self._visit(name.lower(), order, ())
        if not order:
            return sql
        ctes = ", ".join(f"{self._saved[n][0]} AS ({_one_line(self._saved[n][1])})" for n in order)
        if tokens[0].upper == "WITH":
            at = tokens[1].end if len(tokens) > 1 and tokens[1].upper == "RECURSIVE" else tokens[0].end
            return f"{sql[:at]} {ctes},{sql[at:]}"
        return f"WITH {ctes} {sql}"

    def _read_by(self, sql: str) -> list[str]:
        """The saved names `sql` mentions as an unqualified name (not after a dot)."""
        from ..frontend.scan import WORD, scan

        tokens = scan(sql)
        found = []
        for i, token in enumerate(tokens):
            if token.kind != WORD or token.text.lower() not in self._saved:
                continue
            if i and tokens[i - 1].text == ".":
                continue
            if token.text.lower() not in found:
                found.append(token.text.lower())
        return found

    def _visit(self, name: str, order: list[str], path: tuple[str, ...]) -> None:
        if name in order or name in path:  # done, or a snippet reading its own name (a table)
            return
        for dependency in self._read_by(self._saved[name][1]):
            if dependency != name:
                self._visit(dependency, order, (*path, name))
        order.append(name)


def _one_line(sql: str) -> str:
    """The SQL's tokens separated by single spaces where it had comments or line breaks (the
    text of strings and quoted names kept as is).

    >>> _one_line("SELECT a, -- why\\n  'x  y' FROM t")
    "SELECT a, 'x  y' FROM t"
    """
    from ..frontend.scan import scan

    tokens = scan(sql)
    out, previous = [], None
    for token in tokens:
        if previous is not None:
            out.append("" if sql[previous.end:token.start] == "" else " ")
        out.append(token.text)
        previous = token
    return "".join(out)
