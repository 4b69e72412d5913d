"""Spark's chatter about the internals of sqlflow's own queries, kept out of the user's sight.

Lines about sqlflow's stateful operator, Spark's state server and its Python workers are not the
user's business and push the rows and errors off the screen (a notebook cell, the command's
stderr). At the default log level they are left out, on any session where sqlflow starts a
stream (`quiet(spark)`, called by the magic, the command and wherever the stateful operator is
built):

- the loggers of Spark's transformWithState in Python (`QUIET_LOGGERS`: its state server, which
  warns "Value state bucket doesn't contain a value." on every first visit of a bucket, its
  Python runners, timers and state variables) are switched off;
- a log4j filter drops the few lines of general loggers that concern sqlflow's streams only
  (`PATTERNS`): the temporary checkpoint of a memory or console sink, AQE disabled in a streaming
  query, a job group cancelled at the end of an availableNow stream with no job left, a plan's
  debug string truncated;
- the transformWithStateInPandas driver worker prints each step of its start ("... Python worker
  finish init stage of Python runner. Received UDF from JVM: ...") with a blank line after, to
  the JVM's System.err: that is read through a pipe and passed on less those lines
  (`ChatterFilter`; the command reads the JVM's stderr through its own pipe);
- PySpark's daemon prints a traceback of its own frames ending in `BrokenPipeError` when the JVM
  has closed a Python worker's connection before the worker's last flush (a worker Spark stops,
  a task that stops reading: `first()`, `take()`): nothing failed, and `ChatterFilter` holds a
  traceback's lines until it knows whether it is that one.

While the magic or the command runs a statement, `failures_reported(spark)` also silences the
loggers that print a failing job's stack traces (`FAILURE_LOGGERS`): the statement reports the
failure itself, located in the script, in one message.

>>> keep = ChatterFilter()
>>> [keep(line) for line in ["Streaming TransformWithStateInPandas Python worker finish init stage.\\n", "\\n",
...                          "26/01/01 12:00:00 WARN Something: the user's concern\\n", "\\n"]]
[False, False, True, True]
>>> daemon = ['Traceback (most recent call last):\\n',
...           '  File "/v/pyspark/python/lib/pyspark.zip/pyspark/daemon.py", line 264, in manager\\n',
...           '  File "/v/pyspark/python/lib/pyspark.zip/pyspark/daemon.py", line 95, in worker\\n',
...           'BrokenPipeError: [Errno 32] Broken pipe\\n']
>>> [out for line in daemon + ["a line of the user's\\n"] for out in keep.feed(line)]
["a line of the user's\\n"]
>>> [out for line in daemon[:2] + ['  File "job.py", line 3, in f\\n'] for out in keep.feed(line)] == (
...     daemon[:2] + ['  File "job.py", line 3, in f\\n'])
True

With the installed pyspark's sources (docs/spark-internals.md, 9) a frame has its source line and
marks, and two workers' tracebacks can interleave:

>>> frame = ['  File "/v/site-packages/pyspark/daemon.py", line 264, in manager\\n',
...          '    code = worker(sock, authenticated)\\n', '           ^^^^^^^^^^^^^^^^^^^^^^^^^^^\\n']
>>> last = ['  File "/v/site-packages/pyspark/daemon.py", line 95, in worker\\n', '    outfile.flush()\\n',
...         'BrokenPipeError: [Errno 32] Broken pipe\\n']
>>> lines = [daemon[0], *frame, daemon[0], *frame, *last, *last, "the user's\\n"]
>>> [out for line in lines for out in keep.feed(line)]
["the user's\\n"]
>>> [out for line in [daemon[0], *frame, "    an indented line of the user's\\n", "x\\n"] for out in keep.feed(line)][-2:]
["    an indented line of the user's\\n", 'x\\n']
"""
from __future__ import annotations

import os
import re
import sys
import tempfile
import threading
from contextlib import contextmanager
from typing import Iterator

#: what a chatter line of a general logger (or of the Python worker) contains
PATTERNS = (
    "TransformWithStateInPandas Python worker",
    "TransformWithStateInPySpark Python worker",
    "Temporary checkpoint location created which is deleted normally",
    "Failed to delete timer",
    "No more data to read from the socket",
    "is not supported in streaming DataFrames/Datasets and will be disabled",
    "Disabling AQE since AQE is not supported in stateful workloads",
    "Cannot find active jobs for it",
    "Truncated the string representation of a plan since it was too large",
    "PySpark daemon failed to flush the output to the worker process",
)
_CHATTER = re.compile("|".join(re.escape(p) for p in PATTERNS))

_TWS = "org.apache.spark.sql.execution.python.streaming.TransformWithStateInPySpark"
#: loggers that speak only of transformWithState in Python, sqlflow's stateful operator: off
QUIET_LOGGERS = (
    _TWS + "StateServer",
    _TWS + "PythonRunner",
    _TWS + "PythonPreInitRunner",
    _TWS + "PythonInitialStateRunner",
    _TWS + "Exec",
    "org.apache.spark.sql.execution.streaming.operators.stateful.transformwithstate",
)
#: loggers that print a failing job's stack traces (local mode: tasks run in the driver's JVM),
#: off while a statement whose failure is reported runs (`failures_reported`)
FAILURE_LOGGERS = (
    "org.apache.spark.executor.Executor",
    "org.apache.spark.scheduler.TaskSetManager",
    "org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution",
    "org.apache.spark.sql.execution.datasources.FileFormatWriter",
    "org.apache.spark.sql.execution.datasources.v2.WriteToDataSourceV2Exec",
    "org.apache.spark.util.Utils",
)


def is_chatter(line: str) -> bool:
    """Whether one line is chatter (see the module's docstring)."""
    return _CHATTER.search(line) is not None


#: the first line of a Python traceback, and the frame and last lines of PySpark's daemon's
#: traceback when the JVM closed a worker's connection before the worker's last flush
TRACEBACK = "Traceback (most recent call last):"
_DAEMON_FRAME = re.compile(r'^  File ".*[/\\]pyspark[/\\]daemon\.py", line \d+, in \w+\s*$')
_CLOSED = re.compile(r"^(BrokenPipeError|ConnectionResetError): ")


class ChatterFilter:
    """keep(line): False for chatter and for the blank line the worker prints after each.
    feed(line): the lines to pass on now, as `keep` says, less PySpark's daemon's tracebacks of a
    closed connection (a traceback's lines are held until it is known which it is); flush(): the
    lines still held, at the end of the stream."""

    def __init__(self) -> None:
        self._after_chatter = False
        self._held: list[str] = []
        self._open = 0  # the held tracebacks not yet ended (the daemon's workers print at once)
        self._framed = False  # the last held line is a daemon frame, its source or a traceback's end

    def feed(self, line: str) -> list[str]:
        if self._held:
            if _DAEMON_FRAME.match(line) or line.rstrip("\r\n") == TRACEBACK or (
                    line.startswith("    ") and self._framed):  # a frame's source line, or its ^^^ marks
                self._open += line.rstrip("\r\n") == TRACEBACK
                self._framed = not line.startswith("Traceback")
                self._held.append(line)
                return []
            if _CLOSED.match(line) and self._framed:
                self._open -= 1
                if self._open == 0:
                    self._held = []
                return []
            held, self._held, self._open = self._held, [], 0
            return held + self.feed(line)
        if line.rstrip("\r\n") == TRACEBACK:
            self._held, self._open, self._framed = [line], 1, False
            return []
        return [line] if self(line) else []

    def flush(self) -> list[str]:
        held, self._held, self._open = self._held, [], 0
        return held

    def __call__(self, line: str) -> bool:
        if is_chatter(line):
            self._after_chatter = True
            return False
        if self._after_chatter and not line.strip():
            return False
        self._after_chatter = False
        return True


#: a JVM system property set once the JVM's chatter is quieted (so it is done once per JVM)
_QUIETED = "sqlflow.chatter.quieted"


def quiet(spark, *, system_err: bool = True) -> None:
    """Drop the chatter of the JVM behind `spark` at its source, once per JVM: the loggers of
    transformWithState in Python off, a log4j filter for the rest of Spark's log lines, and
    (`system_err`) System.err, where Spark copies its Python workers' output, read through a
    pipe by a thread that passes on all but the chatter to this process's stderr (a notebook
    cell). The command, which reads the JVM's stderr itself, passes `system_err=False`. Best
    effort: a JVM this cannot reach (Spark Connect) is left alone."""
    try:
        jvm = spark._jvm
        if jvm is None:
            return
        system = jvm.java.lang.System
        if system.getProperty(_QUIETED) is not None:
            return
        system.setProperty(_QUIETED, "true")
        _filter_log(jvm, spark.sparkContext._gateway)
        _set_levels(jvm, {name: "OFF" for name in QUIET_LOGGERS})
        if system_err and hasattr(os, "mkfifo"):
            _filter_system_err(jvm)
    except Exception:  # noqa: BLE001 - quieter output is a nicety, never a failure
        pass


@contextmanager
def failures_reported(spark) -> Iterator[None]:
    """Around running a statement whose failure the caller reports itself: the loggers of a
    failing job's stack traces off (`FAILURE_LOGGERS`), then as they were. Best effort."""
    saved = None
    try:
        jvm = spark._jvm
        saved = _set_levels(jvm, {name: "OFF" for name in FAILURE_LOGGERS}) if jvm is not None else None
    except Exception:  # noqa: BLE001 - quieter output is a nicety, never a failure
        saved = None
    try:
        yield
    finally:
        if saved is not None:
            try:
                _set_levels(spark._jvm, saved)
            except Exception:  # noqa: BLE001
                pass


def _set_levels(jvm, levels: dict[str, str | None]) -> dict[str, str | None]:
    """Set log4j's level of each logger (None: the logger's own setting removed, so it follows
    its parent again); what they were before, in the same form."""
    core = jvm.org.apache.logging.log4j.core
    context = jvm.org.apache.logging.log4j.LogManager.getContext(False)
    config = context.getConfiguration()
    own = config.getLoggers()
    before: dict[str, str | None] = {}
    for name, level in levels.items():
        before[name] = str(own.get(name).getLevel()) if own.containsKey(name) else None
        if level is None:
            if own.containsKey(name):
                config.removeLogger(name)
        else:
            core.config.Configurator.setLevel(name, jvm.org.apache.logging.log4j.Level.toLevel(level))
    context.updateLoggers()
    return before


def _filter_log(jvm, gateway) -> None:
    log4j = jvm.org.apache.logging.log4j
    result = log4j.core.Filter.Result
    pattern = "(?s).*(" + "|".join(re.escape(p) for p in PATTERNS) + ").*"
    deny = log4j.core.filter.RegexFilter.createFilter(pattern, gateway.new_array(jvm.java.lang.String, 0),
                                                      True, result.DENY, result.NEUTRAL)
    context = log4j.LogManager.getContext(False)
    context.getConfiguration().addFilter(deny)
    context.updateLoggers()


def _write(lines: list[str]) -> None:
    for line in lines:
        try:
            sys.stderr.write(line)
            sys.stderr.flush()
        except Exception:  # noqa: BLE001 - keep draining whatever stderr does
            pass


def _filter_system_err(jvm) -> None:
    path = os.path.join(tempfile.mkdtemp(prefix="sqlflow-stderr-"), "jvm-stderr")
    os.mkfifo(path)

    def copy() -> None:
        keep = ChatterFilter()
        with open(path, "rb") as fifo:  # opens once the JVM opens its end
            os.unlink(path)
            os.rmdir(os.path.dirname(path))
            for raw in fifo:  # until the JVM exits: it never blocks on a full pipe
                _write(keep.feed(raw.decode("utf-8", "replace")))
            _write(keep.flush())

    threading.Thread(target=copy, name="sqlflow-jvm-system-err", daemon=True).start()
    stream = jvm.java.io.PrintStream(jvm.java.io.FileOutputStream(path), True, "UTF-8")
    jvm.java.lang.System.setErr(stream)
