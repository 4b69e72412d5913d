"""One statement loop for the `sqlflow` command and the `%%sqlflow` magic.

A script (or cell) is split into statements (`pieces`); each is parsed and validated with its
errors located in the whole script (`parse_piece`), then either printed as the Spark SQL it runs as
(`transpiled`), explained (`explained`), or run as sqlflow's SQL scripts run statements
(`run`: `sqlflow.spark.script.run_statement`, parameters or not). What came back is classified
once (`Outcome.kind`); the front ends only render it. Any failure becomes a SqlflowError located
in the script (`locate_error`), Spark's own errors in Spark's words.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from ..errors import SqlflowAnalysisError, SqlflowError, SqlflowExecutionError

#: plain statements that explain mode explains rather than runs (the rest still run: DDL, SET, USE)
QUERY_WORDS = frozenset({"SELECT", "WITH", "FROM", "VALUES", "TABLE", "INSERT", "MERGE"})

#: what running a statement gave (`Outcome.kind`)
ROWS = "rows"                          # a batch DataFrame: rows to show (none for DDL and the like)
WRITTEN = "written"                    # a batch INSERT of a windowed query: written, nothing to show
STREAM = "stream"                      # a streaming DataFrame: a query over a streaming source
STREAMING_INSERT = "streaming insert"  # a StreamingQuery: INSERT INTO <sink> over a streaming source
DECLARED = "declared"                  # a streaming source view was declared: nothing to show
TEXT = "text"                          # explain output

_VARIABLE = re.compile(r"\$\{(?:(hivevar|hiveconf|env|system|spark|sparkconf|define):)?([^}:]+)\}")


@dataclass(frozen=True)
class Piece:
    """One statement of a script, after rewriting (variable substitution), with the text errors
    point into."""

    number: int         # 1-based, in the script
    sql: str            # the statement, rewritten
    source: Any         # sqlflow.frontend.source.Source: the script with this statement rewritten
    start: int          # offset of `sql` in source.text


@dataclass(frozen=True)
class Outcome:
    """What one statement gave: `kind` (ROWS, WRITTEN, STREAM, ...) and the DataFrame,
    StreamingQuery or text it is about."""

    kind: str
    value: Any = None


def pieces(text: str, rewrite: Callable[[str], str] | None = None, *, first: int = 1) -> Iterator[Piece]:
    """The statements of a script (or notebook cell), numbered from `first`, each rewritten by
    `rewrite(sql)` just before it is yielded, so a statement sees what earlier ones SET.

    >>> [(p.number, p.sql, p.start) for p in pieces("SELECT 1; -- one\\nSELECT ${x}", lambda s: s.replace("${x}", "2"))]
    [(1, 'SELECT 1', 0), (2, 'SELECT 2', 17)]
    """
    from ..frontend.scan import scan, split_statements
    from ..frontend.source import Source

    for number, (start, end) in enumerate(split_statements(text), first):
        tokens = scan(text, start, end)
        if tokens:  # comments before a statement are not part of it
            start = tokens[0].start
        sql = text[start:end]
        new = rewrite(sql) if rewrite is not None else sql
        if new == sql:
            yield Piece(number, sql, Source(text), start)
        else:
            yield Piece(number, new, Source(text[:start] + new + text[end:]), start)


def parse_piece(piece: Piece):
    """The parsed, validated statement (errors located in the whole script)."""
    from ..frontend.statement import parse_statement
    from ..frontend.validate import validate

    statement = parse_statement(piece.sql, piece.source, piece.start, piece.start + len(piece.sql))
    validate(statement, streaming=False, grouping=False)  # after Spark resolved the names
    return statement


def substitute(sql: str, variables: dict, spark=None) -> str:
    """spark-sql's variable substitution: `${k}` / `${hivevar:k}` from `variables`, then `${k}`,
    `${hiveconf:k}`, `${spark:k}` from the session's conf (`SET k=v`), `${env:K}`,
    `${system:k}`; anything unknown is left for Spark's own substitution.

    >>> substitute("SELECT ${a}, '${env:NO_SUCH_VARIABLE_HERE}'", {"a": "1"})
    "SELECT 1, '${env:NO_SUCH_VARIABLE_HERE}'"
    """
    if "${" not in sql:
        return sql

    def lookup(m: re.Match) -> str:
        scope, name = m.group(1), m.group(2)
        if scope == "env":
            return os.environ.get(name, m.group(0))
        if scope == "system":
            value = spark._jvm.java.lang.System.getProperty(name) if spark is not None else None
            return m.group(0) if value is None else str(value)
        if scope in (None, "hivevar", "define") and name in variables:
            return variables[name]
        if scope in (None, "hiveconf", "spark", "sparkconf") and spark is not None:
            value = spark.conf.get(name, None)
            if value is not None:
                return value
        return m.group(0)  # unknown here: Spark's own substitution decides (it reads its conf)

    return _VARIABLE.sub(lookup, sql)


def first_word(sql: str) -> str:
    """The statement's first keyword (comments skipped), upper case.

    >>> first_word("-- why\\n  select 1")
    'SELECT'
    """
    from ..frontend.scan import scan

    tokens = scan(sql)
    return tokens[0].upper if tokens else ""


# --------------------------------------------------------------------------- running


def explains(statement) -> bool:
    """Whether explain mode explains this statement (windowed statements and plain queries) rather
    than running it (DDL, SET, USE)."""
    return not statement.is_plain or first_word(statement.sql) in QUERY_WORDS


def run(spark, statement, params: dict | None = None, *, explain: bool = False) -> Outcome:
    """Run one parsed statement (or explain it, in explain mode) and say what came back.

    Every statement takes the path sqlflow's SQL scripts take (`sqlflow.spark.script`), with its
    `:name` parameters or without: streaming source views, `INSERT INTO <sink>` of a windowed
    query, plain Spark SQL."""
    if explain and explains(statement):
        return Outcome(TEXT, explained(spark, statement, params))
    from ..spark.script import run_statement

    # a stream the magic or the CLI starts gets its state store per query (settings_for_result)
    return classify(statement, run_statement(spark, statement, params or None, starts_query=True))


def classify(statement, result) -> Outcome:
    """The Outcome of `sqlflow.spark.script.run_statement`'s result for `statement`."""
    if result is None:
        return Outcome(DECLARED)
    if is_streaming_query(result):
        return Outcome(STREAMING_INSERT, result)
    if result.isStreaming:
        return Outcome(STREAM, result)
    if _is_insert(statement):
        return Outcome(WRITTEN, result)
    return Outcome(ROWS, result)


def is_streaming_query(value) -> bool:
    """A StreamingQuery (not a DataFrame)."""
    return hasattr(value, "awaitTermination") and hasattr(value, "isActive") and not hasattr(value, "columns")


def _is_insert(statement) -> bool:
    if statement.is_plain:
        return False
    from sqlglot import exp

    return isinstance(statement.tree, exp.Insert)


def transpiled(statement) -> str:
    """The Spark SQL the statement runs as (no Spark needed), without a final `;`."""
    if statement.is_plain:
        return statement.sql
    import sqlflow

    return str(sqlflow.transpile(statement.sql)).rstrip().rstrip(";")


def explained(spark, statement, params: dict | None = None) -> str:
    """`sqlflow.explain` of a windowed statement, Spark's `EXPLAIN` of a plain one."""
    if statement.is_plain:
        rows = spark.sql("EXPLAIN " + statement.sql, args=params or None).collect()
        return "\n".join(str(r[0]) for r in rows).rstrip("\n")
    import sqlflow

    return str(sqlflow.explain(statement.sql, spark=spark, args=params or None)).rstrip("\n")


def quiet_error_logs() -> None:
    """The command and the magic report every error themselves, located in the script: PySpark's
    own log record of each analysis error (an ERROR with a stack trace) would only repeat it. The
    loggers are taken as PySpark creates them (a plain logging.getLogger would break its calls)."""
    import logging

    from pyspark.logger import PySparkLogger

    from ..spark.analysis import ERROR_LOGGERS

    for name in ERROR_LOGGERS:
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)


def stream_error(query) -> SqlflowExecutionError | None:
    """The failure of a streaming query that ended (None if it did not fail), in Spark's words."""
    failure = query.exception()
    if failure is None:
        return None
    from ..spark.analysis import carried_error, spark_message

    carried = carried_error(failure)  # raised by sqlflow in a worker: its own words
    if carried is not None:
        return SqlflowExecutionError(f"the streaming query {query.name or query.id} failed: {carried.message}",
                                     clause=carried.clause or "STREAM", hint=carried.hint)
    message = spark_message(failure) or type(failure).__name__
    return SqlflowExecutionError(f"the streaming query {query.name or query.id} failed: {message}",
                                 clause="STREAM")


# --------------------------------------------------------------------------- errors


class SparkAnalysisError(SqlflowAnalysisError):
    """Spark's own analysis error of a statement (a missing table, a bad column), located in the
    script: shown in Spark's words, not as sqlflow's."""

    prefix = ""


class SparkExecutionError(SqlflowExecutionError):
    """Spark's own error running a statement, located in the script."""

    prefix = ""


def locate_error(error: Exception, piece: Piece) -> SqlflowError:
    """Any error of running `piece` as a SqlflowError located in the whole script (or cell):
    sqlflow's own errors moved from the statement to the script, Spark's without their JVM
    stack trace or plan, at the position of their query context."""
    if isinstance(error, SqlflowError):
        return _in_script(error, piece)
    from ..spark.analysis import spark_message

    message = spark_message(error, whole=True)
    line, column = _spark_position(error, piece)
    name = type(error).__name__
    kind = SparkAnalysisError if ("AnalysisException" in name or "ParseException" in name) else SparkExecutionError
    return kind(message, sql=piece.source.text, line=line, column=column)


def _spark_position(error: Exception, piece: Piece) -> tuple[int, int]:
    """Line and column in the script of a Spark error in this statement (its start if unknown).

    An error in the SQL sqlflow runs for a windowed statement (a stream's micro-batch dividing by
    zero) has its query context in that SQL: the failing expression is found in the statement."""
    found = _fragment_offset(error, piece.sql)
    if found is not None:
        return piece.source.line_column(piece.start + found)
    offset = 0
    try:
        contexts = error.getQueryContext() if hasattr(error, "getQueryContext") else []
        for ctx in contexts:
            if ctx.startIndex() is not None and ctx.startIndex() >= 0:
                offset = ctx.startIndex()
                break
        else:
            m = re.search(r"\(line (\d+), pos (\d+)\)", str(error))
            if m:
                lines = piece.sql.split("\n")
                line = min(int(m.group(1)), len(lines))
                offset = sum(len(x) + 1 for x in lines[:line - 1]) + int(m.group(2))
    except Exception:  # noqa: BLE001 - a position is a nicety
        offset = 0
    return piece.source.line_column(piece.start + min(offset, len(piece.sql)))


_CONTEXT = re.compile(r"== SQL \(line \d+, position \d+\) ==\n(.*)\n( *)(\^+)")


def spark_fragment(error: Exception) -> str | None:
    r"""The text of the expression a Spark error's query context points at (None if it has none).

    >>> spark_fragment(Exception("[DIVIDE_BY_ZERO] ...\n== SQL (line 1, position 15) ==\nSELECT k, SUM(1 / 0) AS n\n"
    ...                          "              ^^^^^\n"))
    '1 / 0'
    """
    try:
        for ctx in error.getQueryContext() if hasattr(error, "getQueryContext") else []:
            fragment = ctx.fragment()
            if fragment:
                return fragment
    except Exception:  # noqa: BLE001 - a position is a nicety
        pass
    m = _CONTEXT.search(str(error))
    if m is None:
        return None
    return m.group(1)[len(m.group(2)):len(m.group(2)) + len(m.group(3))]


def _fragment_offset(error: Exception, sql: str) -> int | None:
    """Where in a windowed statement `sql` the failing expression of a Spark error is: the
    statement's node equal to it (Spark's context is in sqlflow's rewrite, not in `sql`)."""
    fragment = spark_fragment(error)
    if not fragment:
        return None
    try:
        import sqlglot

        from ..frontend.statement import DIALECT, parse_statement

        statement = parse_statement(sql)
        if statement.is_plain or statement.tree is None:
            return None
        wanted = sqlglot.parse_one(fragment, read=DIALECT)
        for node in statement.tree.walk():
            if type(node) is type(wanted) and node == wanted:
                pos = statement.position(node)
                if pos is not None:
                    return statement.source.offset(pos.line, pos.column)
    except Exception:  # noqa: BLE001 - a position is a nicety
        return None
    return None


def _in_script(error: SqlflowError, piece: Piece) -> SqlflowError:
    """A SqlflowError located in the statement's own text, moved to its place in the script."""
    if error.sql is not None and error.sql == piece.source.text:
        return error  # already located in the script (the frontend parses with the script's Source)
    if error.line is None:
        line, column = piece.source.line_column(piece.start)
    elif error.sql != piece.sql:
        return error  # located in some other text: show it as it is
    else:
        first_line, first_column = piece.source.line_column(piece.start)
        line = first_line + error.line - 1
        column = (error.column or 1) + (first_column - 1 if error.line == 1 else 0)
    return type(error)(error.message, clause=error.clause, sql=piece.source.text, line=line,
                       column=column, hint=error.hint)
