"""`%load_ext sqlflow`: the %sqlflow (line) and %%sqlflow (cell) magics.

    %load_ext sqlflow
    %%sqlflow -o panes --plot
    SELECT k, SUM(v) AS total FROM paper GROUP BY k WINDOW FIXED(SIZE 2m) ON ts

    %sqlflow -l 5 SELECT * FROM paper WHERE v > :threshold
    %sqlflow -f report.sql

- Statements run through the loop the command shares (`sqlflow.interfaces.statements`); a cell
  (or the file given with `-f/--file`) may hold several `;`-separated statements, the result of
  the last one is shown.
- `:name` and `{name}` refer to Python variables; they are passed to Spark as named parameters
  (`args=`), never pasted into the text (so a string value needs no quoting, and cannot inject
  SQL). They work wherever Spark accepts a parameter marker, not inside sqlflow's own clauses.
- `${k}` is Spark's variable substitution (`SET k=v`), done before sqlflow reads the statement.
- Results show as a table of at most `--limit` rows (only those rows are fetched), with a note
  when there are more. `-o NAME` stores the Spark DataFrame in the notebook's namespace.
- A query over a streaming source runs into a memory table; a streaming `INSERT INTO <sink>` runs
  into its sink. The cell shows the panes as they arrive, until the source is exhausted
  (`available-now`), `--timeout` passes, or the kernel is interrupted (which stops the query).
- Errors show sqlflow's message with the line and column in the cell and a caret, never a JVM
  stack trace.

Defaults are traitlets, set with `%config SqlflowMagic.displaylimit = 50` and the like
(`%config SqlflowMagic` lists them).
"""
from __future__ import annotations

import itertools
import os
import re
import time
import uuid
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class, needs_local_scope, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from traitlets import Bool, Float, Int, Unicode

from ..spark.log_filter import failures_reported, quiet
from . import statements as st
from .display import ResultTable, StreamView, Text, Watcher  # noqa: F401  (StreamView: public)
from .interrupts import cancel_all, interrupt_flag, interruptible
from .snippets import QUERY_STARTS, Snippets



@magics_class
class SqlflowMagic(Magics):
    """Run sqlflow SQL (Spark SQL with WINDOW / TRIGGER / ALLOWED LATENESS / EMIT) in a notebook."""

    displaylimit = Int(20, config=True, help="Rows shown of a result (only these are fetched).")
    session = Unicode("", config=True,
                      help="Name of the SparkSession variable to use; empty: the active session, "
                           "or a new local one.")
    autoplot = Bool(False, config=True, help="Draw the pane diagram of every result that is panes "
                                                       "(a windowed query's, not a plain aggregate over one).")
    plot_limit = Int(2000, config=True, help="At most this many panes are collected to draw a diagram.")
    poll_interval = Float(1.0, config=True, help="Seconds between refreshes of a running stream's panes.")
    stream_trigger = Unicode("available-now", config=True,
                             help="Trigger of a streaming query: 'available-now' (stop once the "
                                  "source is exhausted) or a processing-time interval like '2 seconds'.")
    stream_timeout = Float(0.0, config=True, help="Stop a streaming query after this many seconds (0: never).")
    parameters = Bool(True, config=True, help="Turn :name and {name} into Spark parameters.")

    def __init__(self, shell=None, **kwargs):
        super().__init__(shell=shell, **kwargs)
        self._streams = itertools.count(1)
        self.snippets = Snippets()

    @no_var_expand  # {name} and $name are parameters (see parameters), never pasted into the SQL
    @needs_local_scope
    @magic_arguments()
    @argument("-s", "--session", metavar="NAME", help="the SparkSession variable to use")
    @argument("-o", "--out", metavar="NAME", help="store the result DataFrame in this variable")
    @argument("-l", "--limit", metavar="N", type=int, help="rows to show (default: SqlflowMagic.displaylimit)")
    @argument("--explain", action="store_true", help="show how each query would run, run nothing else")
    @argument("--transpile", action="store_true", help="show the Spark SQL each statement runs as (no Spark)")
    @argument("--plot", action="store_true", help="draw the pane diagram of the result")
    @argument("--no-plot", action="store_true", help="no diagram even with SqlflowMagic.autoplot")
    @argument("--inputs", metavar="NAME", help="with --plot: a DataFrame of input rows to draw")
    @argument("--watermark", metavar="NAME", help="with --plot: watermark steps (proc_time, watermark) to draw")
    @argument("--title", help="with --plot: the diagram's title")
    @argument("--timeout", metavar="SECONDS", type=float, help="stop a streaming query after this long")
    @argument("--trigger", help="streaming trigger: 'available-now' or an interval like '2 seconds'")
    @argument("--save", metavar="NAME", help="keep the cell's query as NAME: queries reading NAME get it as a CTE")
    @argument("--no-execute", action="store_true", help="with --save: save the query without running it")
    @argument("--with", metavar="NAME", dest="with_", action="append", default=[],
              help="compose the saved query NAME into this one (queries reading NAME get it anyway)")
    @argument("--snippets", action="store_true", help="list the saved queries")
    @argument("-f", "--file", metavar="FILE", help="run the SQL statements of this file (no SQL next to it)")
    @line_cell_magic
    def sqlflow(self, line: str, cell: str | None = None, local_ns=None):
        """Run sqlflow SQL: `%sqlflow [options] [NAME <<] SQL` or `%%sqlflow [options] [NAME <<]`
        then the SQL (`NAME <<` stores the result in NAME, as -o NAME)."""
        parser = self.sqlflow.parser
        options, target, rest = split_line(line, option_arity(parser))
        if re.search(r"(^|\s)(-h|--help)(\s|$)", options):
            print(parser.format_help())
            return None
        args = parse_argstring(self.sqlflow, options)
        if args.snippets:
            saved = [f"{name}:\n  {self.snippets.get(name)}" for name in self.snippets.names()]
            return Text("\n".join(saved) if saved else "no saved queries (save one with --save NAME)")
        unknown = [name for name in args.with_ if self.snippets.get(name) is None]
        if unknown:
            raise UsageError(f"%sqlflow: --with {unknown[0]}: no query saved as {unknown[0]!r} "
                             f"(saved: {', '.join(self.snippets.names()) or 'none'})")
        if args.no_execute and not args.save:
            raise UsageError("%sqlflow: --no-execute only goes with --save NAME")
        if args.file:
            if rest.strip() or (cell or "").strip():
                raise UsageError("%sqlflow: -f/--file runs the SQL of a file: give no SQL next to it")
            try:
                with open(os.path.expanduser(args.file.strip("\"'")), encoding="utf-8") as f:
                    query = f.read()  # errors are located in the file's lines
            except OSError as error:
                raise UsageError(f"%sqlflow: -f/--file: cannot read {args.file}: {error.strerror}") from None
        elif cell is None:
            query = rest
        else:
            # line 1 is the %%sqlflow line: error positions then match the lines of the cell
            query = rest + "\n" + cell
        if not query.strip():
            raise UsageError("%sqlflow: no SQL to run")
        namespace = dict(self.shell.user_ns) if self.shell is not None else {}
        namespace.update(local_ns or {})
        limit = args.limit if args.limit is not None else self.displaylimit
        if args.save:
            last = _saved_query(query, args.save)
            if args.no_execute:
                self.snippets.save(args.save, last)
                return Text(f"saved {args.save!r} (not run)")
        result = self._run(query, args, namespace, limit, target)
        if args.save:
            self.snippets.save(args.save, last)
        return result

    # ------------------------------------------------------------------ running a cell

    def _run(self, query, args, namespace, limit, target=None):
        if self.parameters:
            _refuse_templates(query)
        spark = None if args.transpile else self._spark(args.session, namespace)
        if spark is None:
            return self._run_statements(query, args, namespace, limit, target, spark)
        with failures_reported(spark):  # a failure is the cell's located error, not Spark's stack traces
            return self._run_statements(query, args, namespace, limit, target, spark)

    def _run_statements(self, query, args, namespace, limit, target, spark):
        def rewrite(sql):
            # saved queries it reads become CTEs; ${k}: Spark's variable substitution (SET k=v,
            # spark.conf), done before sqlflow reads the statement; then {name} -> :name, a parameter
            sql = self.snippets.compose(sql, tuple(args.with_))
            sql = st.substitute(sql, {}, spark) if spark is not None else sql
            return _braces_to_markers(sql) if self.parameters else sql

        result, statement, texts, streamed = None, None, [], False
        # Ctrl-C (the stop button) between the steps below only sets this flag: raised inside a
        # py4j call it would break the connection; interruptible() and _watch take it from there
        with interrupt_flag() as interrupted:
            for piece in st.pieces(query, rewrite):
                watcher = None
                try:
                    statement = st.parse_piece(piece)
                    if args.transpile:
                        texts.append(st.transpiled(statement))
                        continue
                    params = _parameters(piece.sql, namespace) if self.parameters else {}
                    watcher = Watcher(spark, limit, _sink_reader(spark, statement))
                    outcome = interruptible(lambda: st.run(spark, statement, params, explain=args.explain),
                                            lambda: cancel_all(spark), tick=watcher.tick)
                    if outcome.kind == st.TEXT:
                        texts.append(outcome.value)
                        continue
                    result, streamed = outcome.value, False
                    if outcome.kind == st.STREAMING_INSERT:
                        result, streamed = self._watch(watcher.follow(outcome.value), args, interrupted), True
                    elif outcome.kind == st.STREAM:
                        result, streamed = self._stream(spark, outcome.value, args, limit, interrupted), True
                    elif interrupted.is_set():
                        cancel_all(spark)
                        raise KeyboardInterrupt
                except KeyboardInterrupt:
                    raise
                except Exception as error:  # noqa: BLE001 - shown as sqlflow shows errors
                    if watcher is not None and watcher.query is not None:
                        watcher.show()  # a stream the statement started shows how it ended: failed
                    raise st.locate_error(error, piece) from None
        if texts:
            return Text("\n\n".join(texts))
        if result is None or not result.columns:
            return None
        for name in (args.out, target):
            if name and self.shell is not None:
                self.shell.user_ns[name] = result
        if streamed:
            return None  # the cell already shows the stream's rows, refreshed as they came
        table = ResultTable(result, limit)
        try:
            interruptible(table._fetch, lambda: cancel_all(spark))  # fetched here, so Ctrl-C cancels
            if not args.no_plot and (args.plot or (self.autoplot and _autoplotted(statement, result))):
                self._plot(result, args, namespace)
        except KeyboardInterrupt:
            raise
        except Exception as error:  # noqa: BLE001
            raise st.locate_error(error, piece) from None
        return table

    def _spark(self, name, namespace):
        name = name or self.session
        if name:
            if name not in namespace:
                raise UsageError(f"%sqlflow: no variable {name!r} (the SparkSession to use)")
            spark = namespace[name]
            if not hasattr(spark, "sql") or not hasattr(spark, "sparkContext"):
                raise UsageError(f"%sqlflow: {name!r} is a {type(spark).__name__}, not a SparkSession")
        else:
            from ..spark.session import ensure_session

            spark = ensure_session()
        st.quiet_error_logs()
        quiet(spark)
        return spark

    def _plot(self, result, args, namespace):
        import matplotlib.pyplot as plt
        from IPython.display import display

        from ..diagram import plot

        def lookup(name):
            if name is None:
                return None
            if name not in namespace:
                raise UsageError(f"%sqlflow: no variable {name!r} to plot")
            return namespace[name]

        inputs, watermark = lookup(args.inputs), lookup(args.watermark)
        title = args.title.strip("\"'") if args.title else None
        ax = interruptible(lambda: plot(result, inputs=inputs, watermark=watermark, title=title,
                                        limit=self.plot_limit),
                           lambda: cancel_all(result.sparkSession))
        display(ax.figure)
        plt.close(ax.figure)

    # ------------------------------------------------------------------ streams

    def _stream(self, spark, df, args, limit, interrupted):
        """Run a streaming result into a memory table, showing its panes while they arrive;
        return the panes received (a batch DataFrame over that table). A start that failed
        because Spark's Python process did not connect back in time (a loaded machine) is tried
        again, as `sqlflow.spark.streaming.start` does."""
        from ..spark.streaming.pane_stream import clear_finish_markers, pane_streams
        from ..spark.streaming.session_conf import settings_for_result
        from ..spark.streaming.sink import RETRY_PAUSE, START_ATTEMPTS, run_with_retries

        trigger = (args.trigger or self.stream_trigger).strip().strip("\"'")
        watcher = Watcher(spark, limit)

        def launch():
            name = f"sqlflow_stream_{next(self._streams)}_{uuid.uuid4().hex[:8]}"
            writer = df.writeStream.format("memory").queryName(name).outputMode("append")
            if trigger.lower().replace("_", "-") in ("available-now", "availablenow"):
                writer = writer.trigger(availableNow=True)
            else:
                writer = writer.trigger(processingTime=trigger)
            clear_finish_markers(pane_streams(df))  # a new run (a new query name): no earlier run's marker ends it
            with settings_for_result(df):  # the RocksDB state store, the partitions: this query only
                query = writer.start()
            watcher.reader = lambda: spark.table(name)
            return watcher.follow(query).query

        run_with_retries(launch, lambda query: self._watch(watcher, args, interrupted),
                         attempts=START_ATTEMPTS, pause=RETRY_PAUSE)
        return watcher.rows()

    def _watch(self, watcher: Watcher, args, interrupted: interrupt_flag):
        """Show a running streaming query's panes until it ends, `--timeout` passes or the kernel
        is interrupted (`interrupted`; the query is stopped); return what it wrote (None for a
        console sink)."""
        query: Any = watcher.query
        timeout = args.timeout if args.timeout is not None else self.stream_timeout
        began = time.monotonic()
        watcher.show()
        while query.isActive:
            if interrupted.is_set():
                watcher.note = "stopped (interrupted)"
                query.stop()
                break
            if timeout and time.monotonic() - began >= timeout:
                watcher.note = f"stopped after {timeout:g} s (--timeout)"
                query.stop()
                break
            time.sleep(self.poll_interval)
            watcher.show()
        failure = st.stream_error(query)
        watcher.show()  # how it ended: finished, stopped, or failed with its error
        if failure is not None:
            raise failure
        return watcher.rows()


def _autoplotted(statement, result) -> bool:
    """Whether autoplot draws a result: a windowed statement's panes, not a plain aggregate over
    them (a windowed CTE, subquery or saved query read by a query that drops the windows)."""
    from ..diagram.frames import are_panes

    return not statement.is_plain and are_panes(result.columns)


def _sink_reader(spark, statement):
    """For `INSERT INTO <sink> ...`: a function reading what the sink holds so far (None if it
    cannot be read back: console)."""
    if statement.is_plain:
        return None
    from sqlglot import exp

    if not isinstance(statement.tree, exp.Insert):
        return None
    from ..spark.script import sink_of
    from ..spark.sinks.postgres import FORMAT as POSTGRES

    sink = sink_of(statement.tree)
    if sink.format == POSTGRES:  # the current-results table, read from the database
        from ..spark import conf
        from ..spark.sinks.postgres import read_table

        table = sink.table or ""
        return lambda: read_table(spark, conf.get(spark, conf.POSTGRES_URL), table)
    if sink.format == "memory":
        return lambda: spark.table(sink.name)
    if sink.table is not None:
        return lambda: spark.table(sink.table)
    if sink.path is not None:
        return lambda: spark.read.format(sink.format).load(sink.path)
    return None


# --------------------------------------------------------------------------- the magic's line


def option_arity(parser) -> dict[str, bool]:
    """Each option of the magic's parser -> whether it takes a value (and -h, --help)."""
    arity = {flag: action.nargs != 0 for action in parser._actions for flag in action.option_strings}
    return {**arity, "-h": False, "--help": False}


def split_line(line: str, options: dict[str, bool]) -> tuple[str, str | None, str]:
    """Split a %sqlflow line into its leading options, jupysql's `NAME <<` and the SQL after
    them. A leading word that looks like an option must be one: SQL cannot start with it, and
    an unknown option would otherwise be read as a `--` comment.

    >>> opts = {"-o": True, "-l": True, "--limit": True, "--plot": False}
    >>> split_line("-o df -l 5 --plot SELECT * FROM t WHERE x = 'a -b'", opts)
    ('-o df -l 5 --plot', None, "SELECT * FROM t WHERE x = 'a -b'")
    >>> split_line("--limit=3 result << SELECT 1", opts)
    ('--limit=3', 'result', 'SELECT 1')
    >>> split_line("-- a comment", opts)
    ('', None, '-- a comment')
    """
    pos, n = 0, len(line)
    while True:
        while pos < n and line[pos].isspace():
            pos += 1
        m = re.match(r"(-[A-Za-z]|--[A-Za-z][\w-]*)(=\S*)?(?=\s|$)", line[pos:])
        if not m:
            break
        flag = m.group(1)
        if flag not in options:
            raise UsageError(f"%sqlflow: unknown option {flag}; the options are: {_listing(options)}")
        pos += m.end()
        if options[flag] and not m.group(2):
            while pos < n and line[pos].isspace():
                pos += 1
            v = re.match(r"'[^']*'|\"[^\"]*\"|\S+", line[pos:])
            if v:
                pos += v.end()
    rest = line[pos:].strip()
    assign = re.match(r"([A-Za-z_]\w*)\s*<<", rest)
    if assign:
        return line[:pos].strip(), assign.group(1), rest[assign.end():].strip()
    return line[:pos].strip(), None, rest


def _listing(options: dict[str, bool]) -> str:
    """'-o/--out NAME'-style names of the options, one entry per option."""
    return ", ".join(sorted({flag for flag in options if flag not in ("-h", "--help")}, key=lambda f: f.lstrip("-")))


def _saved_query(query: str, name: str) -> str:
    """The cell's last statement, as written, which --save keeps (it must be a query)."""
    last = None
    for piece in st.pieces(query):
        last = piece
    if last is None or st.first_word(last.sql) not in QUERY_STARTS:
        raise UsageError(f"%sqlflow: --save {name} needs the cell to end with a query (SELECT, WITH, ...)")
    return last.sql


# --------------------------------------------------------------------------- parameters


def _braces_to_markers(sql: str) -> str:
    """`{name}` (outside strings and comments) -> `:name`, a Spark named parameter marker.

    >>> _braces_to_markers("SELECT {x}, '{y}' /* {z} */ FROM t WHERE k = { key } AND v = ${var}")
    "SELECT :x, '{y}' /* {z} */ FROM t WHERE k = :key AND v = ${var}"
    """
    from ..frontend.scan import PUNCT, WORD, scan

    tokens = scan(sql)
    edits = []
    for a, b, c in zip(tokens, tokens[1:], tokens[2:]):
        if a.start > 0 and sql[a.start - 1] == "$":
            continue  # ${name}: a Spark variable, not a parameter
        if a.kind == PUNCT and a.text == "{" and b.kind == WORD and c.kind == PUNCT and c.text == "}":
            edits.append((a.start, c.end, ":" + b.text))
    for start, end, text in reversed(edits):
        sql = sql[:start] + text + sql[end:]
    return sql


def _refuse_templates(sql: str) -> None:
    """A located error for jupysql's `{{name}}` template (outside strings and comments): read as
    sqlflow's `{name}` inside braces it would reach Spark as `{:name}`, SQL nobody wrote.

    >>> _refuse_templates("SELECT '{{x}}', {x} -- {{y}}")
    >>> _refuse_templates("SELECT 1\\nWHERE a < {{ x }}")
    Traceback (most recent call last):
    ...
    sqlflow.errors.SqlflowSyntaxError: sqlflow: SQL: {{x}} is jupysql's template syntax (line 2, column 11)
      WHERE a < {{ x }}
                ^
    sqlflow's parameters are {x} and :x (a Python variable, passed to Spark as a value)
    """
    from ..errors import SqlflowSyntaxError
    from ..frontend.scan import PUNCT, WORD, scan
    from ..frontend.source import Source

    tokens = scan(sql)
    for window in zip(tokens, tokens[1:], tokens[2:], tokens[3:], tokens[4:]):
        if [t.text if t.kind == PUNCT else WORD for t in window] == ["{", "{", WORD, "}", "}"]:
            name = window[2].text
            raise Source(sql).error(SqlflowSyntaxError, f"{{{{{name}}}}} is jupysql's template syntax",
                                    window[0].start, clause="SQL",
                                    hint=f"sqlflow's parameters are {{{name}}} and :{name} "
                                         "(a Python variable, passed to Spark as a value)")


def _parameters(sql: str, namespace: dict) -> dict:
    """The `:name` markers of `sql` (outside strings and comments) naming Python variables.

    `a::int` (a cast) and `col:field` (a path into a variant) are not markers.

    >>> _parameters("SELECT :x, a::int, v:f, ':y' FROM t WHERE z > :lim", {"x": 1, "lim": 2, "f": 3, "int": 4})
    {'x': 1, 'lim': 2}
    """
    from ..frontend.scan import PUNCT, WORD, scan

    tokens = scan(sql)
    found = {}
    for i, tok in enumerate(tokens):
        if tok.kind != PUNCT or tok.text != ":" or i + 1 >= len(tokens):
            continue
        name = tokens[i + 1]
        if name.kind != WORD or name.start != tok.end:
            continue
        before = sql[tok.start - 1] if tok.start > 0 else " "
        if before.isalnum() or before in "_:)]`\"'":
            continue
        if name.text in namespace:
            found[name.text] = namespace[name.text]
    return found


# --------------------------------------------------------------------------- registration


def load_ipython_extension(ipython) -> None:
    """Register the magics (and make `%config SqlflowMagic` see their defaults)."""
    magics = SqlflowMagic(ipython)
    ipython.register_magics(magics)
    if magics not in ipython.configurables:
        ipython.configurables.append(magics)
