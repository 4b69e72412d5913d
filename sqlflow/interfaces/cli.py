"""The `sqlflow` command: spark-sql's command line, for sqlflow's SQL.

spark-sql cannot call Python UDFs, so this is a Python program that speaks spark-sql's flags::

    sqlflow -e "SELECT 1"                      # run statements given on the command line
    sqlflow -f report.sql -d day=2015-09-01     # run a script, ${day} substituted
    sqlflow -i init.sql                         # run init.sql (quietly), then prompt
    sqlflow --transpile -f report.sql           # print the Spark SQL each statement runs as

Statements run through the loop the magic shares (`sqlflow.interfaces.statements`); this module
only renders. Output is spark-sql's: one line per row, tab-separated, values formatted by Spark's
own Hive formatter (NULL, true, 2015-09-01 12:00:00, [1,2], {"a":1}), column names first with
`--header`. "Time taken" lines and Spark's warnings go to stderr (`-S` silences them). The first
failing statement stops a script: its error, with the line and column in the script and a caret
under the offending SQL, goes to stderr and the exit status is 1.

Without `-e` or `-f` the command reads statements from its terminal (`sqlflow.interfaces.prompt`).
A streaming `INSERT INTO <sink>` is awaited until its source is exhausted (availableNow) or
Ctrl-C; a query over a streaming source prints its rows as each micro-batch emits them. Progress
goes to stderr, a line per micro-batch.
"""
from __future__ import annotations

import argparse
import itertools
import re
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, TextIO

from ..errors import SqlflowError
from ..spark.log_filter import failures_reported, quiet
from ..spark.conf import is_true
from . import statements as st
from .interrupts import cancel_all, interruptible
from .launch import add_submit_options, check_deploy_mode, start_session

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
        epilog="Without -e or -f: an interactive prompt (statements end with ';'; quit; exit; or "
               "Ctrl-D ends it). Spark's settings come from spark-submit as for spark-sql: "
               "$SPARK_CONF_DIR/spark-defaults.conf, then --conf.",
        add_help=False,
    )
    p.add_argument("-H", "-h", "--help", action="help", help="show this help and exit")
    p.add_argument("--version", action="version", version=_version())
    src = p.add_mutually_exclusive_group()
    src.add_argument("-e", metavar="SQL", dest="execute", help="SQL statements to run ('; '-separated)")
    src.add_argument("-f", metavar="FILE", dest="file", help="a SQL script to run")
    p.add_argument("-i", metavar="FILE", dest="init", action="append", default=[],
                   help="an initialization script, run quietly first (repeatable)")
    p.add_argument("--conf", "-c", metavar="K=V", type=_key_value, action="append", default=[],
                   help="a Spark configuration property (repeatable)")
    p.add_argument("--master", help="Spark master URL (default local[*], or spark.master of spark-defaults.conf)")
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
    add_submit_options(p)
    return p


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    from .. import __version__

    try:
        spark = version("pyspark")
    except PackageNotFoundError:  # pragma: no cover
        spark = "unknown"
    return f"sqlflow {__version__} on Spark {spark}"


# --------------------------------------------------------------------------- the driver


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
                self.header = is_true(value)
            else:
                self.session_conf[key] = value
        self._spark: Any = None
        self._owns_session = False
        self.quitting = False  # quit; or exit; was read
        self.silent = self.args.silent
        self._watched: dict[str, list] = {}
        self._progress_lock = threading.Lock()

    # ---- the session, started on first use (--transpile never starts it)

    @property
    def spark(self):
        if self._spark is None:
            self._spark, self._owns_session = start_session(self.args, err=self.err, silent=self.silent)
            # the JVM this command started writes its stderr to the command's pipe, filtered there
            quiet(self._spark, system_err=not self._owns_session)
            if self.silent:
                self._spark.sparkContext.setLogLevel("ERROR")
            st.quiet_error_logs()
            for key, value in self.session_conf.items():
                self._spark.conf.set(key, value)
            if self.args.database:
                self._spark.catalog.setCurrentDatabase(self.args.database)
            elif self._owns_session:  # the metastore starts now, as spark-sql's does
                self._spark.catalog.databaseExists(self._spark.catalog.currentDatabase())
            if not self.silent and self._owns_session:
                sc = self._spark.sparkContext
                self.err.write(f"Spark master: {sc.master}, Application Id: {sc.applicationId}\n")
        return self._spark

    def _cancel(self) -> None:
        """Ctrl-C: cancel the running Spark jobs and stop streaming queries."""
        if self._spark is not None:
            cancel_all(self._spark)

    def close(self) -> None:
        """Stop the session this command started (not one that was running already)."""
        if self._spark is not None and self._owns_session:
            try:
                self._spark.stop()
            except Exception:  # noqa: BLE001 - stopping at exit: nothing left to report to
                pass

    # ---- entry

    def run(self) -> int:
        from .prompt import interactive

        refusal = check_deploy_mode(self.args)
        if refusal:
            self.err.write(refusal + "\n")
            return 1
        try:
            if not self.args.transpile:
                self.spark  # noqa: B018 - Spark starts first, as spark-sql's does (--transpile needs none)
            for path in self.args.init:
                status = self.run_script(_read(path), name=path, quiet=True)
                if status or self.quitting:
                    return status
            if self.args.execute is not None:
                return self.run_script(self.args.execute, name="-e")
            if self.args.file is not None:
                return self.run_script(_read(self.args.file), name=self.args.file)
            return interactive(self)
        except SqlflowError as error:
            self.err.write(f"{error}\n")
            return 1
        except OSError as error:
            self.err.write(f"sqlflow: {error}\n")
            return 1
        except Exception as error:  # noqa: BLE001 - e.g. the database given to --database is missing
            from ..spark.analysis import spark_message

            self.err.write(spark_message(error, whole=True) + "\n")
            return 1

    # ---- scripts

    def run_script(self, text: str, *, name: str, quiet: bool = False, keep_going: bool = False,
                   first: int = 1, line: int = 1) -> int:
        """Run each statement of `text`; stop at the first failure (unless keep_going), or at
        `quit;` / `exit;` (then `self.quitting`). 0, 1, or 130 (Ctrl-C).

        `first` and `line` number the statements and lines of a text that continues earlier
        input (the prompt's, stdin's), so errors point where the user typed."""
        status = 0
        # blank lines in front: the text's lines keep their numbers in what was read before
        for piece in st.pieces("\n" * (line - 1) + text, self._substitute, first=first):
            if piece.sql.strip().rstrip(";").strip().lower() in ("quit", "exit"):
                self.quitting = True
                return status
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
                if self.args.verbose and not isinstance(error, SqlflowError) and not _from_spark(error):
                    import traceback  # a bug of sqlflow's: its traceback helps the report

                    traceback.print_exception(error, file=self.err)
                status = 1
                if not keep_going:
                    return status
        return status

    def _substitute(self, sql: str) -> str:
        spark = None if self.args.transpile else self.spark if "${" in sql else None
        return st.substitute(sql, self.variables, spark)

    def run_statement(self, piece: st.Piece, *, quiet: bool = False) -> None:
        statement = st.parse_piece(piece)
        if self.args.verbose and not quiet:
            self.out.write(piece.sql + "\n")
            self.out.flush()
        if self.args.transpile:
            if not quiet:
                self.out.write(st.transpiled(statement) + ";\n")
            return
        hivevar = _SET_HIVEVAR.match(piece.sql)
        if hivevar:
            self.variables[hivevar.group(1)] = hivevar.group(2)
            return
        spark = self.spark  # started first: "Time taken" is the statement's, as spark-sql's is
        began = time.monotonic()
        with failures_reported(spark):  # a failure is reported located, not as Spark's stack traces
            outcome = st.run(spark, statement, explain=self.args.explain)
            rows = None
            if outcome.kind == st.TEXT:
                if not quiet:
                    self.out.write(outcome.value + "\n")
                return
            if outcome.kind == st.STREAMING_INSERT:
                self._await(outcome.value)
            elif outcome.kind == st.STREAM:
                rows = self._stream(outcome.value, quiet=quiet)
            elif outcome.kind == st.ROWS:
                rows = self._print(outcome.value, quiet=quiet)
        self._progress()  # the last micro-batches, before the timing line
        if not (quiet or self.silent):
            self.err.write(f"Time taken: {time.monotonic() - began:.3f} seconds"
                           + (f", Fetched {rows} row(s)" if rows is not None else "") + "\n")
            self.err.flush()

    # ---- output

    def _print(self, df, *, quiet: bool) -> int | None:
        """Print rows as spark-sql does; the number of rows (None for a statement without output)."""
        text, rows = _hive_result(df)
        if not df.columns:
            return None
        if quiet:
            return rows
        if self.header:
            self.out.write("\t".join(df.columns) + "\n")
        if rows:
            self.out.write(text + "\n")
        self.out.flush()
        return rows

    def _stream(self, df, *, quiet: bool) -> int:
        """Run a streaming result to the terminal: each micro-batch's panes as they are emitted,
        until the source is exhausted (availableNow) or Ctrl-C (which stops the query)."""
        printed = [0]
        header_done = [not self.header or quiet]

        def emit(batch, batch_id):
            text, rows = _hive_result(batch)
            printed[0] += rows
            if quiet:
                return
            if not header_done[0]:
                self.out.write("\t".join(batch.columns) + "\n")
                header_done[0] = True
            if rows:
                self.out.write(text + "\n")
            self.out.flush()

        from ..spark.streaming.pane_stream import clear_finish_markers, pane_streams
        from ..spark.streaming.session_conf import settings_for_result
        from ..spark.streaming.sink import RETRY_PAUSE, START_ATTEMPTS, run_with_retries

        def launch():
            clear_finish_markers(pane_streams(df))  # a new run (a new query name): no earlier run's marker ends it
            with settings_for_result(df):  # the RocksDB state store, the partitions: this query only
                return (df.writeStream.foreachBatch(emit).queryName(f"sqlflow_select_{next(_QUERY_NUMBERS)}")
                        .trigger(availableNow=True).start())

        # started again if Spark's Python process did not connect back in time, as start() does
        run_with_retries(launch, self._await, attempts=START_ATTEMPTS, pause=RETRY_PAUSE)
        return printed[0]

    def _await(self, query) -> None:
        """Wait for a streaming query to end (availableNow: its source is exhausted); Ctrl-C
        stops it (`cancel_all`, from the main thread). A failure of the query is raised."""
        with self._progress_lock:  # its progress is printed even if it ends between two ticks
            self._watched.setdefault(str(query.id), [query, -1])
        while query.isActive:
            query.awaitTermination(1)
        failure = st.stream_error(query)
        if failure is not None:
            raise failure

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

    def _report(self, error: Exception, piece: st.Piece, name: str) -> str:
        """The error as the user should see it: message, line and column in the script, caret."""
        where = f"Error in statement {piece.number}" + (f" of {name}" if name != "-e" else "") + ":"
        return where + "\n" + str(st.locate_error(error, piece))


# --------------------------------------------------------------------------- rendering


def _report_progress(entry: list, err: TextIO) -> None:
    """Print the micro-batches of entry = [query, last batch printed] not printed yet."""
    query, last = entry
    for progress in query.recentProgress:
        batch = progress.get("batchId", -1)
        if batch <= last:
            continue
        try:
            from ..spark.streaming import progress_metrics

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


def _hive_result(df) -> tuple[str, int]:
    """(the rows formatted by Spark's HiveResult, one after the other as spark-sql prints them,
    the number of rows): a row is one line unless a value holds a newline (EXPLAIN's plan is one
    row), and spark-sql's "Fetched N row(s)" counts rows, not lines."""
    try:
        jvm = df.sparkSession._jvm
        plan = df._jdf.queryExecution().executedPlan()
        seq = jvm.org.apache.spark.sql.execution.HiveResult.hiveResultString(plan)
        return seq.mkString("\n"), seq.size()
    except Exception as error:  # fall back to formatting in Python (Spark's own errors re-raised)
        if type(error).__module__.startswith("pyspark.errors"):
            raise
        rows = ["\t".join(_format(v) for v in row) for row in df.collect()]
        return "\n".join(rows), len(rows)


def _from_spark(error: Exception) -> bool:
    """An error Spark raised (analysis, execution, py4j): its message says it all."""
    return type(error).__module__.split(".")[0] in ("pyspark", "py4j")


def _format(value) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    cli = Cli(args)
    try:
        return cli.run()
    finally:
        cli.close()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
