"""The `sqlflow` command: spark-sql's command line, for sqlflow's SQL.

spark-sql cannot call Python UDFs, so this is a Python program that speaks spark-sql's flags::

    sqlflow -e "SELECT 1"                      # run statements given on the command line
    sqlflow -f report.sql -d day=2015-09-01     # run a script, ${day} substituted
    sqlflow -i init.sql                         # run init.sql (quietly), then prompt
    sqlflow --transpile -f report.sql           # print the Spark SQL each statement runs as

Statements without sqlflow clauses go to `spark.sql` unchanged; windowed statements go to
`sqlflow.sql`. Output is spark-sql's: one line per row, tab-separated, values formatted by
Spark's own Hive formatter (NULL, true, 2015-09-01 12:00:00, [1,2], {"a":1}), column names first
with `--header`. "Time taken" lines and Spark's warnings go to stderr (`-S` silences them). The
first failing statement stops a script: its error, with the line and column in the script and a
caret under the offending SQL, goes to stderr and the exit status is 1.

Without `-e` or `-f` the command reads statements from its terminal: a statement may span
lines and ends with `;`; history is kept (readline) in ~/.sqlflow_history (or
$SQLFLOW_HISTORY); Ctrl-C cancels the running statement (or discards the one being typed);
Ctrl-D exits. With stdin not a terminal the same loop reads it without prompts.

Statements run as sqlflow's SQL scripts run them (`sqlflow.spark.script`): a temporary view
with `OPTIONS (..., streaming true)` is a streaming source, and `INSERT INTO <sink> <windowed
query>` starts a checkpointed streaming job, awaited until its source is exhausted
(availableNow) or until Ctrl-C. A query over a streaming source prints its rows as each
micro-batch emits them. Progress goes to stderr, a line per micro-batch.
"""
from __future__ import annotations

import argparse
import itertools
import logging
import os
import re
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import TextIO

from .errors import SqlflowAnalysisError, SqlflowError, SqlflowExecutionError

PROMPT = "sqlflow> "
CONTINUATION = "       > "

#: Spark's own error loggers print a JSON record with a stack trace for every analysis error
_NOISY_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")
#: plain statements that `--explain` explains rather than runs (the rest still run: DDL, SET, USE)
_QUERY_WORDS = {"SELECT", "WITH", "FROM", "VALUES", "TABLE", "INSERT", "MERGE"}
_VARIABLE = re.compile(r"\$\{(?:(hivevar|hiveconf|env|system|spark|sparkconf|define):)?([^}:]+)\}")
_QUERY_NUMBERS = itertools.count(1)
_SET_HIVEVAR = re.compile(r"^\s*SET\s+hivevar:([^=\s]+)\s*=\s*(.*?)\s*$", re.IGNORECASE | re.DOTALL)


# --------------------------------------------------------------------------- arguments


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    return key.strip(), value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="sqlflow",
        description="Run sqlflow SQL (Spark SQL with WINDOW / TRIGGER / ALLOWED LATENESS / EMIT) "
                    "on Spark, with spark-sql's flags.",
        epilog="Without -e or -f: an interactive prompt (statements end with ';', Ctrl-D exits).",
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument("-e", metavar="SQL", dest="execute", help="SQL statements to run ('; '-separated)")
    src.add_argument("-f", metavar="FILE", dest="file", help="a SQL script to run")
    p.add_argument("-i", metavar="FILE", dest="init", action="append", default=[],
                   help="an initialization script, run quietly first (repeatable)")
    p.add_argument("--conf", metavar="K=V", type=_key_value, action="append", default=[],
                   help="a Spark configuration property (repeatable)")
    p.add_argument("--master", help="Spark master URL (default local[2])")
    p.add_argument("--name", default="sqlflow", help="application name (default sqlflow)")
    p.add_argument("-d", "--define", "--hivevar", metavar="K=V", dest="define", type=_key_value,
                   action="append", default=[], help="a variable for ${K} substitution (repeatable)")
    p.add_argument("--hiveconf", metavar="K=V", type=_key_value, action="append", default=[],
                   help="as spark-sql: hive.cli.print.header=true prints headers; "
                        "other properties are set in the session")
    p.add_argument("--database", help="the database to use")
    p.add_argument("-S", "--silent", action="store_true", help="silent mode: rows only, no timings or warnings")
    p.add_argument("-v", "--verbose", action="store_true", help="echo each statement before running it")
    p.add_argument("--header", action="store_true", help="print column names before the rows")
    p.add_argument("--explain", action="store_true",
                   help="explain queries instead of running them (DDL, SET and USE still run)")
    p.add_argument("--transpile", action="store_true",
                   help="print the Spark SQL each statement runs as; run nothing (no Spark needed)")
    return p


# --------------------------------------------------------------------------- the driver


@dataclass
class Piece:
    """One statement of a script, after variable substitution, with the text errors point into."""

    number: int
    sql: str            # the statement, variables substituted
    source: object      # sqlflow.frontend.source.Source: the script with this statement substituted
    start: int          # offset of `sql` in source.text


@dataclass
class Cli:
    args: argparse.Namespace
    out: TextIO = field(default_factory=lambda: sys.stdout)
    err: TextIO = field(default_factory=lambda: sys.stderr)

    def __post_init__(self) -> None:
        self.variables: dict[str, str] = dict(self.args.define)
        self.header = self.args.header
        self.session_conf: dict[str, str] = {}
        for key, value in self.args.hiveconf:
            if key == "hive.cli.print.header":
                self.header = value.strip().lower() == "true"
            else:
                self.session_conf[key] = value
        self._spark = None
        self.silent = self.args.silent
        self._watched: dict[str, list] = {}
        self._progress_lock = threading.Lock()

    # ---- the session, started on first use (--transpile never starts it)

    @property
    def spark(self):
        if self._spark is None:
            from .spark.session import local_session

            conf = dict(self.args.conf)
            if self.silent:
                conf.setdefault("spark.log.level", "ERROR")
            self._owns_session = _no_jvm_yet()
            with _jvm_stderr_discarded(self.silent):
                self._spark = local_session(app_name=self.args.name,
                                            master=self.args.master or "local[2]", conf=conf)
                if self.silent:
                    self._spark.sparkContext.setLogLevel("ERROR")
            for name in _NOISY_LOGGERS:
                logging.getLogger(name).setLevel(logging.CRITICAL)
            for key, value in self.session_conf.items():
                self._spark.conf.set(key, value)
            if self.args.database:
                self._spark.catalog.setCurrentDatabase(self.args.database)
        return self._spark

    def _cancel(self) -> None:
        """Ctrl-C: cancel the running Spark jobs and stop streaming queries."""
        if self._spark is not None:
            cancel_all(self._spark)

    def close(self) -> None:
        """Stop the session this command started (not one that was running already)."""
        if self._spark is not None and getattr(self, "_owns_session", True):
            try:
                self._spark.stop()
            except Exception:  # noqa: BLE001 - stopping at exit: nothing left to report to
                pass

    # ---- entry

    def run(self) -> int:
        try:
            if self.args.database and not self.args.transpile:
                self.spark  # noqa: B018 - fail early on a missing database
            for path in self.args.init:
                status = self.run_script(_read(path), name=path, quiet=True)
                if status:
                    return status
            if self.args.execute is not None:
                return self.run_script(self.args.execute, name="-e")
            if self.args.file is not None:
                return self.run_script(_read(self.args.file), name=self.args.file)
            return self.interactive()
        except SqlflowError as error:
            self.err.write(f"{error}\n")
            return 1
        except OSError as error:
            self.err.write(f"sqlflow: {error}\n")
            return 1
        except Exception as error:  # noqa: BLE001 - e.g. the database given to --database is missing
            self.err.write(_spark_message(error) + "\n")
            return 1

    # ---- scripts

    def run_script(self, text: str, *, name: str, quiet: bool = False, keep_going: bool = False) -> int:
        """Run each statement of `text`; stop at the first failure (unless keep_going). 0 or 1."""
        status = 0
        for piece in pieces(text, self._substitute):
            try:
                try:
                    interruptible(lambda: self.run_statement(piece, quiet=quiet), self._cancel,
                                  tick=self._progress)
                finally:
                    self._progress_done()
            except KeyboardInterrupt:
                self.err.write("Query cancelled.\n")
                status = 130
                if not keep_going:
                    return status
            except Exception as error:  # noqa: BLE001 - every failure is reported the same way
                self.err.write(self._report(error, piece, name) + "\n")
                if self.args.verbose and not isinstance(error, SqlflowError):
                    import traceback

                    traceback.print_exception(error, file=self.err)
                status = 1
                if not keep_going:
                    return status
        return status

    def _substitute(self, sql: str) -> str:
        spark = None if self.args.transpile else self.spark if "${" in sql else None
        return substitute(sql, self.variables, spark)

    def run_statement(self, piece: Piece, *, quiet: bool = False) -> None:
        statement = parse_piece(piece)
        if self.args.verbose and not quiet:
            self.out.write(piece.sql + "\n")
            self.out.flush()
        if self.args.transpile:
            text = self._transpiled(statement)
            if not quiet:
                self.out.write(text + ";\n")
            return
        hivevar = _SET_HIVEVAR.match(_without_leading_comments(piece.sql))
        if hivevar:
            self.variables[hivevar.group(1)] = hivevar.group(2)
            return
        began = time.monotonic()
        if self.args.explain and (not statement.is_plain or _first_word(piece.sql) in _QUERY_WORDS):
            text = self._explained(statement)
            if not quiet:
                self.out.write(text.rstrip("\n") + "\n")
            return
        result = execute(self.spark, statement)
        if result is None:                                   # a streaming source was declared
            rows = None
        elif _is_streaming_query(result):                    # a streaming INSERT
            rows = self._await(result)
        elif result.isStreaming:                             # a query over a streaming source
            rows = self._stream(result, quiet=quiet)
        elif _is_insert(statement):                          # a batch INSERT: written, nothing to show
            rows = None
        else:
            rows = self._print(result, quiet=quiet)
        self._progress()  # the last micro-batches, before the timing line
        if not (quiet or self.silent):
            self.err.write(f"Time taken: {time.monotonic() - began:.3f} seconds"
                           + (f", Fetched {rows} row(s)" if rows is not None else "") + "\n")
            self.err.flush()

    def _transpiled(self, statement) -> str:
        if statement.is_plain:
            return statement.sql
        import sqlflow

        return str(sqlflow.transpile(statement.sql)).rstrip().rstrip(";")

    def _explained(self, statement) -> str:
        if statement.is_plain:
            rows = self.spark.sql("EXPLAIN " + statement.sql).collect()
            return "\n".join(str(r[0]) for r in rows)
        import sqlflow

        return str(sqlflow.explain(statement.sql, spark=self.spark))

    # ---- output

    def _print(self, df, *, quiet: bool) -> int | None:
        """Print rows as spark-sql does; the number of rows (None for a statement without output)."""
        lines = _hive_lines(df)
        if not df.columns:
            return None
        if quiet:
            return len(lines)
        if self.header:
            self.out.write("\t".join(df.columns) + "\n")
        for line in lines:
            self.out.write(line + "\n")
        self.out.flush()
        return len(lines)

    def _stream(self, df, *, quiet: bool) -> int:
        """Run a streaming result to the terminal: each micro-batch's panes as they are emitted,
        until the source is exhausted (availableNow) or Ctrl-C (which stops the query)."""
        printed = [0]
        header_done = [not self.header or quiet]

        def emit(batch, batch_id):
            lines = _hive_lines(batch)
            if quiet:
                printed[0] += len(lines)
                return
            if not header_done[0]:
                self.out.write("\t".join(batch.columns) + "\n")
                header_done[0] = True
            for line in lines:
                self.out.write(line + "\n")
            self.out.flush()
            printed[0] += len(lines)

        query = (df.writeStream.foreachBatch(emit).queryName(f"sqlflow_select_{next(_QUERY_NUMBERS)}")
                 .trigger(availableNow=True).start())
        self._await(query)
        return printed[0]

    def _await(self, query) -> None:
        """Wait for a streaming query to end (availableNow: its source is exhausted); Ctrl-C
        stops it (`cancel_all`, from the main thread). A failure of the query is raised."""
        with self._progress_lock:  # its progress is printed even if it ends between two ticks
            self._watched.setdefault(str(query.id), [query, -1])
        while query.isActive:
            query.awaitTermination(1)
        failure = query.exception()
        if failure is not None:
            message = _first_line(getattr(failure, "desc", None) or failure)
            raise SqlflowExecutionError(f"the streaming query {query.name or query.id} failed: {message}",
                                        clause="STREAM")
        return None

    def _progress(self) -> None:
        """Called every second while a statement runs: one stderr line per new micro-batch of
        every streaming query of the session."""
        if self.silent or self._spark is None:
            return
        with self._progress_lock:  # the ticker (main thread) and the statement's thread
            try:
                for query in self._spark.streams.active:
                    self._watched.setdefault(str(query.id), [query, -1])
                for entry in self._watched.values():
                    _report_progress(entry, self.err)
            except Exception:  # noqa: BLE001 - progress is a nicety; the statement reports failures
                pass

    def _progress_done(self) -> None:
        self._progress()
        self._watched.clear()

    # ---- errors

    def _report(self, error: Exception, piece: Piece, name: str) -> str:
        """The error as the user should see it: message, line and column in the script, caret."""
        where = f"Error in statement {piece.number}" + (f" of {name}" if name != "-e" else "") + ":"
        return where + "\n" + str(locate_error(error, piece))

    # ---- the prompt

    def interactive(self) -> int:
        tty = sys.stdin.isatty()
        history = _setup_history() if tty else None
        buffer = ""
        status = 0
        if tty and not self.silent:
            self.err.write("sqlflow: statements end with ';'. Ctrl-C cancels, Ctrl-D exits.\n")
        while True:
            try:
                line = _read_line((CONTINUATION if buffer else PROMPT) if tty else "", tty)
            except EOFError:
                if tty:
                    self.out.write("\n")
                if buffer.strip():
                    status = self.run_script(buffer, name="<stdin>", keep_going=True) or status
                break
            except KeyboardInterrupt:  # Ctrl-C while typing: drop the statement
                self.out.write("\n")
                buffer = ""
                continue
            buffer += line + "\n"
            if _complete(buffer):
                status = self.run_script(buffer, name="<stdin>", keep_going=True) or status
                buffer = ""
        if history:
            history()
        return 0 if tty else status


# --------------------------------------------------------------------------- statements


def pieces(text: str, rewrite=None):
    """The statements of a script (or notebook cell), each rewritten by `rewrite(sql)` (variable
    substitution) just before it is yielded, so a statement sees what earlier ones SET."""
    from .frontend.scan import split_statements
    from .frontend.source import Source

    from .frontend.scan import scan

    for number, (start, end) in enumerate(split_statements(text), 1):
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
    from .frontend.statement import parse_statement
    from .frontend.validate import validate

    statement = parse_statement(piece.sql, piece.source, piece.start, piece.start + len(piece.sql))
    validate(statement, streaming=False)
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


def execute(spark, statement, args=None):
    """Run one parsed statement as sqlflow runs scripts (`sqlflow.spark.script`): a DataFrame
    (batch, or streaming for a query over a streaming source), a StreamingQuery (a streaming
    `INSERT INTO <sink>`), or None (a streaming source declared with `OPTIONS (streaming true)`).
    `args` are Spark query parameters (`:name`)."""
    if not args:
        from .spark.script import run_statement

        return run_statement(spark, statement)
    if statement.is_plain:
        return spark.sql(statement.sql, args=args)
    import sqlflow

    return sqlflow.sql(spark, statement.sql, args=args)


def _is_streaming_query(result) -> bool:
    return hasattr(result, "awaitTermination") and hasattr(result, "isActive") and not hasattr(result, "columns")


def _is_insert(statement) -> bool:
    if statement.is_plain:
        return False
    from sqlglot import exp

    return isinstance(statement.tree, exp.Insert)


def _first_line(error) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _report_progress(entry: list, err: TextIO) -> None:
    """Print the micro-batches of entry = [query, last batch printed] not printed yet."""
    query, last = entry
    for progress in query.recentProgress:
        batch = progress.get("batchId", -1)
        if batch <= last:
            continue
        try:
            from .spark.streaming import progress_metrics

            counts = progress_metrics(progress)
        except Exception:  # noqa: BLE001 - plain queries have no sqlflow counters
            counts = {}
        rows = counts.get("input_rows", progress.get("numInputRows", 0))  # sqlflow's count: once per row
        line = f"{query.name or 'query ' + str(query.id)[:8]} batch {batch}: {rows} input rows"
        for key, label in (("panes", "panes"), ("retractions", "retractions"),
                           ("dropped_too_late", "too late"), ("spark_dropped_late", "dropped behind the watermark"),
                           ("malformed_records", "malformed")):
            if counts.get(key):
                line += f", {counts[key]} {label}"
        err.write(line + "\n")
        entry[1] = batch
    err.flush()


# --------------------------------------------------------------------------- Ctrl-C


def interruptible(fn, cancel, *, grace: float = 30.0, tick=None, every: float = 1.0):
    """fn() run in a worker thread while this (main) thread waits; a Ctrl-C meanwhile calls
    cancel() from this thread, waits for fn to give up (at most `grace` seconds) and raises
    KeyboardInterrupt.

    `tick()`, if given, is called from this thread about every `every` seconds meanwhile.

    Why a thread: py4j talks to the JVM over one connection per thread, so PySpark's own SIGINT
    handler, which calls cancelAllJobs from inside the interrupted call, fails with a reentrant
    call; a waiting main thread has a free connection to cancel with.
    """
    if threading.current_thread() is not threading.main_thread():
        return fn()
    box: dict = {}
    done = threading.Event()
    interrupted = threading.Event()

    def target():
        # SIGINT stays blocked here and in the threads started from here (py4j's, when the session
        # starts in this thread): the OS then delivers Ctrl-C to the main thread, whose readline
        # would otherwise sleep through a signal another thread took.
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            box["value"] = fn()
        except BaseException as error:  # noqa: BLE001 - handed to the waiting thread
            box["error"] = error
        finally:
            done.set()

    previous = signal.signal(signal.SIGINT, lambda signum, frame: interrupted.set())
    try:
        threading.Thread(target=target, name="sqlflow-statement", daemon=True).start()
        next_tick = time.monotonic() + every
        while not done.wait(0.1):
            if tick is not None and time.monotonic() >= next_tick:
                tick()
                next_tick = time.monotonic() + every
            if interrupted.is_set():
                cancel()
                done.wait(grace)
                raise KeyboardInterrupt
    finally:
        signal.signal(signal.SIGINT, previous)
    if "error" in box:
        raise box["error"]
    return box.get("value")


def cancel_all(spark) -> None:
    """Cancel every running job of `spark` and stop its streaming queries."""
    try:
        spark.sparkContext.cancelAllJobs()
    except Exception:  # noqa: BLE001 - best effort: the session may be going away
        pass
    for query in list(spark.streams.active):
        try:
            query.stop()
        except Exception:  # noqa: BLE001
            pass


# --------------------------------------------------------------------------- helpers


class _jvm_stderr_discarded:
    """With -S, the JVM started meanwhile gets /dev/null as its stderr (its banner and log lines
    are not rows); errors still reach the user, as Python exceptions."""

    def __init__(self, active: bool) -> None:
        self.active = active and _no_jvm_yet()
        self.saved = None

    def __enter__(self):
        if self.active:
            sys.stderr.flush()
            self.saved = os.dup(2)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 2)
            os.close(devnull)
        return self

    def __exit__(self, *exc) -> None:
        if self.saved is not None:
            os.dup2(self.saved, 2)
            os.close(self.saved)


def _no_jvm_yet() -> bool:
    try:
        from pyspark import SparkContext
    except ImportError:  # pragma: no cover
        return True
    return SparkContext._gateway is None


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def _without_leading_comments(sql: str) -> str:
    from .frontend.scan import scan

    tokens = scan(sql)
    return sql[tokens[0].start:] if tokens else ""


def _first_word(sql: str) -> str:
    from .frontend.scan import scan

    tokens = scan(sql)
    return tokens[0].upper if tokens else ""


def _complete(buffer: str) -> bool:
    """Does the text typed so far end with a `;` that ends a statement (not in a string,
    comment or BEGIN ... END block)?"""
    from .frontend.scan import scan, split_statements

    tokens = scan(buffer)
    if not tokens or tokens[-1].text != ";" or any(t.unterminated for t in tokens):
        return False
    spans = split_statements(buffer)
    return not spans or spans[-1][1] <= tokens[-1].start  # that ';' ended the last statement


def _read_line(prompt: str, tty: bool) -> str:
    if tty:
        return input(prompt)
    line = sys.stdin.readline()
    if not line:
        raise EOFError
    return line.rstrip("\n")


def _setup_history():
    """Enable readline history; return a function that saves it (or None without readline)."""
    try:
        import readline
    except ImportError:  # pragma: no cover - e.g. Windows
        return None
    path = os.environ.get("SQLFLOW_HISTORY") or os.path.join(os.path.expanduser("~"), ".sqlflow_history")
    try:
        readline.read_history_file(path)
    except OSError:
        pass
    readline.set_history_length(1000)

    def save():
        try:
            readline.write_history_file(path)
        except OSError:
            pass

    return save


def _hive_lines(df) -> list[str]:
    """Rows formatted by Spark's HiveResult, exactly as spark-sql prints them."""
    try:
        jvm = df.sparkSession._jvm
        plan = df._jdf.queryExecution().executedPlan()
        seq = jvm.org.apache.spark.sql.execution.HiveResult.hiveResultString(plan)
        text = seq.mkString("\n")
        return text.split("\n") if text else []
    except Exception as error:  # fall back to formatting in Python (Spark's own errors re-raised)
        if _is_spark_error(error):
            raise
        return ["\t".join(_format(v) for v in row) for row in df.collect()]


def _is_spark_error(error: Exception) -> bool:
    return type(error).__module__.startswith("pyspark.errors")


def _format(value) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _spark_message(error: Exception) -> str:
    """A Spark error without its JVM stack trace, logical plan or SQL excerpt."""
    text = str(error).strip()
    cut = len(text)
    for marker in ("\n== SQL", "; line ", "\nJVM stacktrace:", "\n\tat ", "\n=== Streaming Query ==="):
        i = text.find(marker)
        if i != -1:
            cut = min(cut, i)
    text = text[:cut].strip()
    return re.sub(r"\s*\(line \d+, pos \d+\)$", "", text)


def _spark_position(error: Exception, piece: Piece) -> tuple[int, int]:
    """Line and column in the script of a Spark error in this statement (its start if unknown)."""
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


def locate_error(error: Exception, piece: Piece) -> SqlflowError:
    """Any error of running `piece` as a SqlflowError located in the whole script (or cell):
    sqlflow's own errors moved from the statement to the script, Spark's without their JVM
    stack trace or plan, at the position of their query context."""
    if isinstance(error, SqlflowError):
        return _in_script(error, piece)
    message = _spark_message(error)
    line, column = _spark_position(error, piece)
    name = type(error).__name__
    kind = SqlflowAnalysisError if ("AnalysisException" in name or "ParseException" in name) \
        else SqlflowExecutionError
    return kind(message, sql=piece.source.text, line=line, column=column)


def _in_script(error: SqlflowError, piece: Piece) -> SqlflowError:
    """A SqlflowError located in the statement's own text, moved to its place in the script."""
    if error.sql is not None and error.sql == piece.source.text:
        return error  # already located in the script (the frontend parses with the script's Source)
    if error.line is None:
        line, column = piece.source.line_column(piece.start)
        return type(error)(error.message, clause=error.clause, sql=piece.source.text, line=line,
                           column=column, hint=error.hint)
    if error.sql != piece.sql:
        return error  # located in some other text: show it as it is
    first_line, first_column = piece.source.line_column(piece.start)
    line = first_line + error.line - 1
    column = (error.column or 1) + (first_column - 1 if error.line == 1 else 0)
    return type(error)(error.message, clause=error.clause, sql=piece.source.text, line=line,
                       column=column, hint=error.hint)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    cli = Cli(args)
    try:
        return cli.run()
    finally:
        cli.close()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
