"""Spark's analysis of the queries sqlflow generates, with errors pointing into the user's query.

sqlflow hands Spark queries it built (an input relation, a source's arrivals, the rewritten
statement). When Spark cannot analyse one (a missing table or column, a type mismatch), the
error is Spark's own message, raised as `SqlflowAnalysisError` at the place of the user's query
the offending fragment came from: the identifier or expression Spark names, else the SELECT.
"""
from __future__ import annotations

import contextlib
import logging
import re
import threading

import sqlglot
from sqlglot import exp

from .. import ast
from ..columns import PANE_ALIAS, VIEW_PATTERN
from ..errors import SqlflowAnalysisError, SqlflowError
from ..frontend.statement import DIALECT, Statement

#: PySpark's loggers that log every analysis error with a query context (ERROR, with a stack trace)
ERROR_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")


class _ThisThread(logging.Filter):
    """Drops the records logged by one thread: sqlflow's own analysis requests, and nothing else."""

    def __init__(self) -> None:
        super().__init__()
        self.thread = threading.get_ident()

    def filter(self, record: logging.LogRecord) -> bool:
        return record.thread != self.thread


@contextlib.contextmanager
def quiet_analysis_errors():
    """PySpark logs every AnalysisException with a query context as an ERROR with a stack trace,
    even when it is caught (docs/spark-internals.md, 8): silence that while sqlflow asks.

    The loggers are PySpark's own (`PySparkLogger.getLogger` creates them as PySpark does: a plain
    `logging.getLogger` would create plain Loggers, which PySpark then calls with keyword arguments
    they do not take); a filter drops only this thread's records, and their levels stay as they are."""
    from pyspark.logger import PySparkLogger

    loggers = [PySparkLogger.getLogger(name) for name in ERROR_LOGGERS]
    quiet = _ThisThread()
    for lg in loggers:
        lg.addFilter(quiet)
    try:
        yield
    finally:
        for lg in loggers:
            lg.removeFilter(quiet)


def spark_sql(spark, query: str, args, *, statement: Statement, original: exp.Expr | None,
              fallback: ast.Position | None, clause: str = "SELECT", clauses=()):
    """spark.sql(query, args), with an analysis error turned into a located SqlflowAnalysisError.

    `clauses`: (SQL text, position, clause) of expressions sqlflow's own clauses contributed (the
    ON column, the WATERMARK and ARRIVAL columns, a GAP, a WHEN): an error about one of them is
    located at that clause."""
    from pyspark.errors import AnalysisException

    with quiet_analysis_errors():
        try:
            return spark.sql(query, args=args) if args else spark.sql(query)
        except AnalysisException as error:
            raise analysis_error(error, statement=statement, original=original, fallback=fallback,
                                 clause=clause, clauses=clauses) from None


def analysis_error(error, *, statement: Statement, original: exp.Expr | None, fallback, clause: str,
                   clauses=()):
    fragment = _fragment(error)
    pos = None
    if fragment:
        for text, where, name in clauses:
            if where is not None and _mentions(text, fragment):
                pos, clause = where, name
                break
        else:
            pos = locate_fragment(fragment, original, statement)
    pos = pos or fallback
    message = spark_message(error)
    err = SqlflowAnalysisError(message, clause=clause, sql=statement.source.text if pos else None,
                               line=pos.line if pos else None, column=pos.column if pos else None)
    err.spark_error_class = _condition(error)
    err.spark_sql_state = _sql_state(error)
    return err


def _mentions(text: str, fragment: str) -> bool:
    """Whether a clause's SQL text is, or contains as a column, the fragment Spark names."""
    try:
        tree = sqlglot.parse_one(text, read=DIALECT)
        wanted = sqlglot.parse_one(fragment, read=DIALECT)
    except Exception:  # noqa: BLE001
        return text.strip() == fragment.strip()
    if tree == wanted:
        return True
    return isinstance(wanted, exp.Column) and any(
        isinstance(n, exp.Column) and n.name.lower() == wanted.name.lower() for n in tree.walk())


def spark_message(error, *, whole: bool = False) -> str:
    """Spark's message without the plan dump and the position in the generated SQL: its first
    line, or with `whole` every line of the message proper (spark-sql's hints such as the search
    path, and the SQLSTATE), as spark-sql prints a statement's error.

    >>> text = "[X] Not found.\\nSearch path: [a]. SQLSTATE: 42P01; line 1 pos 14;\\n'Project [*]"
    >>> spark_message(text), spark_message(text, whole=True)
    ('[X] Not found.', '[X] Not found.\\nSearch path: [a]. SQLSTATE: 42P01')
    """
    text = str(getattr(error, "desc", None) or error)
    if whole:
        text = text.strip()
        for marker in ("\n== SQL", "; line ", "\nJVM stacktrace:", "\n\tat ", "\n=== Streaming Query ==="):
            text = text.split(marker, 1)[0]
        text = re.sub(r"\s*\(line \d+, pos \d+\)$", "", text.strip())
    else:
        text = text.split("\n", 1)[0]
        text = re.sub(r"\s*SQLSTATE: \w+.*$", "", text)
        text = re.sub(r";?\s*line \d+ pos \d+;?$", "", text)
    text = re.sub(f"`{VIEW_PATTERN}`\\.", "", text)  # sqlflow's own views (panes, ...)
    text = text.strip().rstrip(";").strip()
    clash = re.search(f"`{PANE_ALIAS}`\\.`(\\w+)`", text)
    if clash:  # an input column named like a pane column
        name = clash.group(1)
        text = text.replace(f"`{PANE_ALIAS}`.`{name}`", f"the pane column `{name}`")
        text = text.rstrip(".") + (f". An input column is also named `{name}`: qualify it with its table"
                                   " or rename it before the windowed SELECT")
    return text


#: a sqlflow error raised in a Python worker (or a foreachBatch function), as the text of the
#: Spark error that failed the query carries it: the class's name, then the rendered error (its
#: message, then its hint), up to Spark's SQLSTATE, its stack or its dump of the query
_CARRIED = re.compile(r"^(?:sqlflow\.[\w.]+\.)?(Sqlflow\w*Error|StateFormatError): (sqlflow: .*?)"
                      r"(?=\n\s*SQLSTATE|\s+SQLSTATE: |\n\s+at |\n=== |\n\S*(?:Error|Exception)\b|\Z)", re.M | re.S)
_CLAUSE = re.compile(r"^sqlflow: ([A-Z][A-Z ]*[A-Z]): ")


def carried_error(error) -> "SqlflowError | None":
    """The sqlflow error that failed a streaming query from inside Spark (a Python worker or a
    foreachBatch function raised it), as the same class, clause, message and hint, without
    Spark's stack and plan around it; None when the failure is not sqlflow's.

    >>> text = ("[STREAM_FAILED] Query [id = 1] terminated with exception: [PYTHON_EXCEPTION] Traceback:\\n"
    ...         "  File x, line 1\\nsqlflow.errors.SqlflowExecutionError: sqlflow: STREAM: the state is older\\n"
    ...         "set the count = 8 to go on\\n SQLSTATE: 38000\\n=== Streaming Query ===")
    >>> found = carried_error(text)
    >>> type(found).__name__, found.clause, found.message, found.hint
    ('SqlflowExecutionError', 'STREAM', 'the state is older', 'set the count = 8 to go on')
    >>> carried_error("[STREAM_FAILED] ... java.io.IOException: disk full") is None
    True
    """
    from .. import errors
    from ..engine import state_codec

    found = _CARRIED.search(str(getattr(error, "desc", None) or error))
    if found is None:
        return None
    kind = getattr(errors, found.group(1), None) or getattr(state_codec, found.group(1), None)
    if not (isinstance(kind, type) and issubclass(kind, errors.SqlflowError)):
        kind = errors.SqlflowExecutionError
    head, _, hint = found.group(2).strip().partition("\n")
    clause = _CLAUSE.match(head)
    message = head[clause.end():] if clause else head.removeprefix("sqlflow: ")
    return kind(message, clause=clause.group(1) if clause else None, hint=hint.strip() or None)


@contextlib.contextmanager
def carried_errors():
    """Around waiting for a streaming query: a sqlflow error that failed it from inside Spark comes
    out as itself (`carried_error`), not as Spark's error around it; any other as it was."""
    try:
        yield
    except Exception as error:
        carried = carried_error(error)
        if carried is None:
            raise
        raise carried from None


def _condition(error) -> str | None:
    for name in ("getCondition", "getErrorClass"):
        getter = getattr(error, name, None)
        if getter is not None:
            try:
                return getter()
            except Exception:  # noqa: BLE001
                continue
    return None


def _sql_state(error) -> str | None:
    try:
        return error.getSqlState()
    except Exception:  # noqa: BLE001  (an error without one)
        return None


def _fragment(error) -> str | None:
    try:
        contexts = error.getQueryContext()
    except Exception:  # noqa: BLE001
        return None
    for ctx in contexts or []:
        try:
            text = ctx.fragment()
        except Exception:  # noqa: BLE001
            continue
        if text:
            return text
    return None


def locate_fragment(fragment: str, original: exp.Expr | None, statement: Statement) -> ast.Position | None:
    """Where, in the user's query, the SQL fragment Spark complains about came from."""
    if original is None:
        return None
    try:
        wanted = sqlglot.parse_one(fragment, read=DIALECT)
    except Exception:  # noqa: BLE001  (any fragment Spark prints that sqlglot cannot read)
        wanted = None
    names = {fragment.strip("`").lower()}
    if isinstance(wanted, (exp.Column, exp.Table)):
        names.add(wanted.name.lower())
    candidates: list[exp.Expr] = []
    for node in original.walk():
        if wanted is not None and node == wanted:
            candidates.append(node)
        elif isinstance(node, (exp.Column, exp.Table)) and node.name.lower() in names:
            candidates.append(node)
    if not candidates and isinstance(wanted, exp.Func) and not isinstance(wanted, exp.Anonymous):
        # Spark prints the call after its own rewrites (DATE(ts) becomes CAST(ts AS DATE)):
        # the only call of that function will do
        same: list[exp.Expr] = [node for node in original.walk() if type(node) is type(wanted)]
        candidates = same if len(same) == 1 else []
    found = [p for p in (statement.position(node) for node in candidates) if p is not None]
    return min(found, key=lambda p: (p.line, p.column)) if found else None
